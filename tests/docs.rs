//! The user documentation's own checks, no server needed: the README (also the docs.rs front
//! page) lists every `Config::with_*` setting and links only to absolute URLs or intra-doc items;
//! every relative link of the markdown pages resolves to a file, and its `#anchor` to a heading;
//! absolute links into this repository name files that exist; user pages carry no internal
//! tracker numbers; the ACL rule shown to users is the one `tests/it/acl.rs` runs.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

const REPO_URL: &str = "https://github.com/redisson-lock/redisson-lock/blob/main/";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The markdown pages users and contributors read.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages = vec![
        root.join("README.md"),
        root.join("CONTRIBUTING.md"),
        root.join("ARCHITECTURE.md"),
    ];
    for dir in ["docs", "docs/maintainers"] {
        let mut found: Vec<PathBuf> = fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        found.sort();
        pages.extend(found);
    }
    pages
}

/// Lines outside fenced code blocks, with their 1-based numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// Drops inline code spans (`...`), where brackets and numbers are not links or references.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of inline links `[text](target)` and of reference definitions `[x]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            if let Some((label, target)) = trimmed.split_once("]: ") {
                if !label.contains(']') {
                    out.push((n, target.trim().to_owned()));
                    continue;
                }
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n, after[..end].trim().to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, `-1`... for
/// repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        let anchor = if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        };
        *count += 1;
        out.insert(anchor);
    }
    out
}

/// Checks a link to `file` (an existing path) with an optional `#anchor`.
fn check_target(file: &Path, anchor: Option<&str>, problems: &mut Vec<String>, at: &str) {
    if !file.exists() {
        problems.push(format!("{at}: no such file {}", file.display()));
        return;
    }
    if let Some(anchor) = anchor {
        if file.extension().is_some_and(|x| x == "md") && !anchors(&read(file)).contains(anchor) {
            problems.push(format!("{at}: no heading #{anchor} in {}", file.display()));
        }
    }
}

#[test]
fn relative_and_repository_links_resolve() {
    let root = root();
    let mut problems = Vec::new();
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for (line, target) in links(&text) {
            let at = format!("{name}:{line}");
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            if let Some(in_repo) = path.strip_prefix(REPO_URL) {
                check_target(&root.join(in_repo), anchor, &mut problems, &at);
            } else if path.contains("://") || path.starts_with("mailto:") {
                continue;
            } else if path.is_empty() {
                check_target(&page, anchor, &mut problems, &at);
            } else if path.contains("::") {
                continue; // an intra-doc link (`crate::...`)
            } else {
                check_target(&dir.join(path), anchor, &mut problems, &at);
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

/// docs.rs renders the README as the crate's front page, where relative links lead nowhere.
#[test]
fn the_readme_links_only_to_absolute_urls_anchors_and_items() {
    let text = read(&root().join("README.md"));
    let bad: Vec<String> = links(&text)
        .into_iter()
        .filter(|(_, t)| !(t.starts_with("https://") || t.starts_with('#') || t.contains("::")))
        .map(|(line, t)| format!("README.md:{line}: {t}"))
        .collect();
    assert!(
        bad.is_empty(),
        "relative links in the README:\n{}",
        bad.join("\n")
    );
}

/// Every `with_*` method of `Config` (in whichever files under `src/` hold `impl Config`) has a
/// row in the README's settings table.
#[test]
fn the_readme_lists_every_config_setting() {
    let root = root();
    let readme = read(&root.join("README.md"));
    let mut files = vec![root.join("src")];
    let mut settings = BTreeSet::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = read(&path);
        let mut in_config = false;
        for line in text.lines() {
            if line.starts_with("impl Config") {
                in_config = true;
            } else if line.starts_with('}') {
                in_config = false;
            } else if in_config {
                if let Some(rest) = line.trim_start().strip_prefix("pub fn with_") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    settings.insert(format!("with_{name}"));
                }
            }
        }
    }
    assert!(
        settings.len() >= 10,
        "found too few Config settings to trust the scan: {settings:?}"
    );
    let missing: Vec<&String> = settings
        .iter()
        .filter(|s| !readme.contains(&format!("| [`Config::{s}`]")))
        .collect();
    assert!(
        missing.is_empty(),
        "settings without a row in the README's settings table: {missing:?}"
    );
}

/// No internal tracker numbers ("issue 24", "#31") in the pages users read; links to other
/// projects' issues are fine. The maintainers' pages and the benchmark lab notes are exempt.
#[test]
fn user_pages_carry_no_internal_issue_numbers() {
    let root = root();
    let mut problems = Vec::new();
    for page in pages() {
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        if name.starts_with("docs/maintainers/") || name == "docs/benchmarks.md" {
            continue;
        }
        for (line, text) in prose(&read(&page)) {
            let text = without_code(text).to_lowercase();
            let words: Vec<&str> = text.split_whitespace().collect();
            for pair in words.windows(2) {
                let is_issue = matches!(pair[0].trim_start_matches('('), "issue" | "issues");
                if is_issue && pair[1].starts_with(|c: char| c.is_ascii_digit()) {
                    problems.push(format!("{name}:{line}: {} {}", pair[0], pair[1]));
                }
            }
            for (i, word) in words.iter().enumerate() {
                let w = word.trim_start_matches(['(', '[']);
                let digits = w.strip_prefix('#').unwrap_or("");
                if !digits.starts_with(|c: char| c.is_ascii_digit()) {
                    continue;
                }
                // Another project's issue: a link's text (`[#12](https://...)`) or named after
                // its project (`upstream #12`, `node-redis #12`).
                let link_text = digits.trim_start_matches(|c: char| c.is_ascii_digit());
                let project = i > 0 && EXTERNAL.contains(&words[i - 1].trim_start_matches('('));
                if !link_text.starts_with(']') && !project {
                    problems.push(format!("{name}:{line}: {word}"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "internal issue numbers:\n{}",
        problems.join("\n")
    );
}

/// Words that name another project before its issue number.
const EXTERNAL: &[&str] = &[
    "upstream",
    "redisson",
    "redisson's",
    "node-redis",
    "redis-py",
    "rslock",
];

/// The words of an ACL rule, without `ACL SETUSER <user>`.
fn rule_words(rule: &str) -> BTreeSet<String> {
    rule.split_whitespace()
        .filter(|w| !matches!(*w, "ACL" | "SETUSER" | "locker"))
        .map(str::to_owned)
        .collect()
}

/// The ACL rule users copy (docs/production.md, docs/locks.md) is the rule the suite runs.
#[test]
fn the_documented_acl_rule_is_the_tested_one() {
    let root = root();
    let acl = read(&root.join("tests/it/acl.rs"));
    let start = acl
        .find("LOCK_ONLY_RULE: &str = \"")
        .expect("LOCK_ONLY_RULE in acl.rs")
        + 24;
    let end = start + acl[start..].find("\";").unwrap();
    let tested = rule_words(&acl[start..end].replace('\\', " "));
    assert!(tested.contains("+evalsha"), "{tested:?}");
    for page in ["docs/production.md", "docs/locks.md"] {
        let text = read(&root.join(page));
        let at = text
            .find("ACL SETUSER locker")
            .unwrap_or_else(|| panic!("no rule in {page}"));
        let block = &text[at..at + text[at..].find("```").unwrap()];
        assert_eq!(
            rule_words(block),
            tested,
            "{page}'s rule differs from tests/it/acl.rs"
        );
    }
}
