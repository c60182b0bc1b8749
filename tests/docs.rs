//! The user documentation's own checks, no server needed: the README (also the docs.rs front
//! page) lists every `Config::with_*` setting and links only to absolute URLs or intra-doc items;
//! every relative link of the markdown pages resolves to a file, and its `#anchor` to a heading;
//! absolute links into this repository name files that exist; user pages carry no internal
//! tracker numbers; the ACL rule shown to users is the one `tests/it/acl.rs` runs; the README's
//! settings table shows the code's defaults; every page under `docs/` is a doc test
//! (`src/doctests.rs`), and the examples that run give their locks names of their own;
//! docs/guarantees.md names only tests, model properties and campaign classes that exist.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// The README and the docs pages are read on GitHub (and the README on crates.io), which show
/// rustdoc's hidden `# ` lines as code: a reader who copies a block gets a syntax error. No Rust
/// block of theirs has one; the README's first example runs as a doc test through its copy in
/// `src/doctests.rs`, which adds only the hidden line that points it at a throwaway server, and
/// must otherwise be the README's block.
#[test]
fn the_pages_show_no_hidden_lines_and_the_readme_example_runs() {
    let hidden = |l: &String| l.trim_start().starts_with("# ") || l.trim() == "#";
    let rust_blocks = |page: &Path| -> Vec<_> {
        code_blocks(&read(page), false)
            .into_iter()
            .filter(|(_, info, _)| info.starts_with("rust"))
            .collect()
    };
    for page in pages() {
        for (line, _, lines) in rust_blocks(&page) {
            assert!(
                !lines.iter().any(hidden),
                "{}:{line}: a block with a hidden doc-test line: {lines:#?}",
                page.display()
            );
        }
    }
    let readme = rust_blocks(&root().join("README.md"));
    let doctests = read(&root().join("src/doctests.rs"));
    let marker = doctests
        .split("mod readme_first_example {}")
        .next()
        .unwrap();
    let (_, _, copy) = code_blocks(marker, true)
        .pop()
        .expect("src/doctests.rs: the README's first example");
    // (Compared without indentation: `code_blocks` drops a page's, not a doc comment's.)
    let copy: Vec<String> = copy
        .into_iter()
        .filter(|l| !hidden(l))
        .map(|l| l.trim_start().to_owned())
        .collect();
    assert_eq!(
        readme[0].2, copy,
        "src/doctests.rs's copy of the README's first example differs from the README's"
    );
}

/// Every `with_*` method of `Config` (in whichever files under `src/` hold `impl Config` or
/// `impl crate::Config`) has a row in the README's settings table.
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
            if line.starts_with("impl Config") || line.starts_with("impl crate::Config") {
                in_config = true;
            } else if line.starts_with('}') {
                in_config = false;
            } else if in_config {
                // A setter written out, or a row of `config/mod.rs`'s `settings!` table
                // (`with_name(arg) -> field: Type;`).
                let trimmed = line.trim_start();
                let row = trimmed.starts_with("with_") && trimmed.contains(") -> ");
                let rest = trimmed
                    .strip_prefix("pub fn with_")
                    .or_else(|| row.then(|| &trimmed["with_".len()..]));
                if let Some(rest) = rest {
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

/// The README's settings table: setting (`with_...`) → its "Default" cell and its description.
fn readme_settings() -> HashMap<String, (String, String)> {
    let readme = read(&root().join("README.md"));
    let mut rows = HashMap::new();
    for (_, line) in prose(&readme) {
        let Some(rest) = line.strip_prefix("| [`Config::") else {
            continue;
        };
        let cells: Vec<&str> = rest.split(" | ").collect();
        let name = cells[0].trim_end_matches("`]");
        assert!(
            cells.len() >= 3,
            "README settings row without its cells: {line}"
        );
        rows.insert(
            name.to_owned(),
            (cells[1].trim().to_owned(), cells[2].to_owned()),
        );
    }
    rows
}

/// The amount a cell starts with, as written in the README: `16,384`, `7.5 s`, `100 ms`,
/// `5 min`; `None` when it starts with no number.
fn leading_amount(cell: &str) -> Option<(f64, &str)> {
    let end = cell
        .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .unwrap_or(cell.len());
    let number: f64 = cell[..end].replace(',', "").parse().ok()?;
    let unit = cell[end..]
        .trim_start()
        .split([' ', ','])
        .next()
        .unwrap_or("");
    Some((number, unit))
}

/// The duration a cell starts with (`7.5 s`, `100 ms`, `5 min`).
fn leading_duration(cell: &str) -> Option<Duration> {
    let (number, unit) = leading_amount(cell)?;
    let unit_ms = match unit {
        "ms" => 1.0,
        "s" => 1e3,
        "min" => 60e3,
        "h" => 3600e3,
        _ => return None,
    };
    Some(Duration::from_micros(
        (number * unit_ms * 1e3).round() as u64
    ))
}

/// The README's "Default" column is the code's: the `DEFAULT_*` constants (each of which must be
/// checked here, so that a new one needs a row) and what `Config::new` starts with.
#[test]
fn the_readme_settings_table_shows_the_code_defaults() {
    use redisson_lock::*;
    let rows = readme_settings();
    let cell = |setting: &str| -> &str {
        match rows.get(setting) {
            Some((default, _)) => default,
            None => panic!("no README row for Config::{setting}"),
        }
    };
    let single = Config::new("redis://127.0.0.1/");
    let cluster = Config::cluster(["redis://127.0.0.1:7000/"]);
    let mut problems = Vec::new();
    let mut checked = BTreeSet::new();
    // `DEFAULT_X_Y` against the row of `with_x_y` (or the row given), read by `$parse`, and
    // against what `Config` starts with (`$configured`).
    macro_rules! check {
        ($parse:ident, $constant:ident, $value:expr, $configured:expr) => {{
            let setting = format!("with_{}", stringify!($constant)[8..].to_lowercase());
            check!($parse, $constant, $value, $configured, &setting)
        }};
        ($parse:ident, $constant:ident, $value:expr, $configured:expr, $setting:expr) => {{
            let (name, setting): (&str, &str) = (stringify!($constant), $setting);
            assert_eq!($configured, $constant, "Config does not start with {name}");
            checked.insert(name);
            if $parse(cell(setting)) != Some($value) {
                let said = cell(setting);
                problems.push(format!(
                    "{setting}: README says {said:?}, {name} is {:?}",
                    $value
                ));
            }
        }};
    }
    check!(
        leading_duration,
        DEFAULT_WATCHDOG_TIMEOUT,
        DEFAULT_WATCHDOG_TIMEOUT,
        single.watchdog_timeout()
    );
    check!(
        leading_duration,
        DEFAULT_FAIR_LOCK_WAIT_TIMEOUT,
        DEFAULT_FAIR_LOCK_WAIT_TIMEOUT,
        single.fair_lock_wait_timeout()
    );
    check!(
        leading_duration,
        DEFAULT_RESPONSE_TIMEOUT,
        DEFAULT_RESPONSE_TIMEOUT,
        single.response_timeout()
    );
    check!(
        leading_duration,
        DEFAULT_CONNECTION_TIMEOUT,
        DEFAULT_CONNECTION_TIMEOUT,
        single.connection_timeout()
    );
    check!(
        leading_duration,
        DEFAULT_SUBSCRIPTION_TIMEOUT,
        DEFAULT_SUBSCRIPTION_TIMEOUT,
        single.subscription_timeout()
    );
    check!(
        leading_duration,
        DEFAULT_RETRY_DELAY,
        DEFAULT_RETRY_DELAY,
        single.retry_delay()
    );
    // "1 s on Cluster and Sentinel, off on a single server".
    let sync = DEFAULT_REPLICA_SYNC_TIMEOUT;
    check!(
        leading_duration,
        DEFAULT_REPLICA_SYNC_TIMEOUT,
        sync,
        cluster.replica_sync().unwrap(),
        "with_replica_sync"
    );
    if single.replica_sync().is_some()
        || !cell("with_replica_sync").contains("off on a single server")
    {
        problems.push("with_replica_sync: the README says off on a single server".to_owned());
    }
    let count = |cell: &str| {
        leading_amount(cell)
            .filter(|(_, unit)| unit.is_empty())
            .map(|(n, _)| n)
    };
    check!(
        count,
        DEFAULT_WATCHDOG_BATCH_SIZE,
        DEFAULT_WATCHDOG_BATCH_SIZE as f64,
        single.watchdog_batch_size()
    );
    check!(
        count,
        DEFAULT_LATCH_QUEUE,
        DEFAULT_LATCH_QUEUE as f64,
        single.latch_queue()
    );
    check!(
        count,
        DEFAULT_RETRY_ATTEMPTS,
        f64::from(DEFAULT_RETRY_ATTEMPTS),
        single.retry_attempts()
    );
    // The retry delay's cap is in its row's description.
    checked.insert("MAX_RETRY_DELAY");
    let max = format!("up to {} s", MAX_RETRY_DELAY.as_secs_f64());
    if !rows["with_retry_delay"].1.contains(&max) {
        problems.push(format!(
            "with_retry_delay: its description does not say {max:?}"
        ));
    }
    let on = |b: bool| if b { "on" } else { "off" }.to_owned();
    let words = [
        (
            "with_sharded_pubsub",
            format!("`{:?}`", single.sharded_pubsub()),
        ),
        (
            "with_replica_sync_policy",
            format!("`{:?}`", single.replica_sync_policy()),
        ),
        ("with_aof_sync", on(single.aof_sync().is_some())),
        ("with_batching", on(single.batching())),
        ("with_failover_awareness", on(single.failover_awareness())),
        ("with_writer_preference", on(single.writer_preference())),
        ("with_read_only", on(single.read_only())),
    ];
    for (setting, code) in words {
        if cell(setting) != code {
            problems.push(format!(
                "{setting}: README says {:?}, the code {code:?}",
                cell(setting)
            ));
        }
    }
    // Every public default constant of `src/config/` is compared above.
    let mut constants = BTreeSet::new();
    for file in fs::read_dir(root().join("src/config")).unwrap() {
        for line in read(&file.unwrap().path()).lines() {
            if let Some(rest) = line.strip_prefix("pub const ") {
                let name = rest.split(':').next().unwrap().trim();
                if name.starts_with("DEFAULT_") || name.starts_with("MAX_") {
                    constants.insert(name.to_owned());
                }
            }
        }
    }
    let unchecked: Vec<&String> = constants
        .iter()
        .filter(|c| !checked.contains(c.as_str()))
        .collect();
    assert!(
        unchecked.is_empty(),
        "defaults not compared with the README: {unchecked:?}"
    );
    assert!(
        problems.is_empty(),
        "the README's settings table has drifted:\n{}",
        problems.join("\n")
    );
}

/// Every page under `docs/` is included in `src/doctests.rs`, so its Rust blocks are doc tests.
#[test]
fn every_docs_page_is_a_doc_test() {
    let root = root();
    let doctests = read(&root.join("src/doctests.rs"));
    let missing: Vec<String> = pages()
        .iter()
        .filter(|p| p.parent() == Some(root.join("docs").as_path()))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| !doctests.contains(&format!("include_str!(\"../docs/{name}\")")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs pages not in src/doctests.rs: {missing:?}"
    );
}

/// The code blocks of a markdown text, or of the doc comments of a Rust file (`///`, `//!`):
/// (line of the opening fence, its info string, the block's lines).
fn code_blocks(text: &str, rust_file: bool) -> Vec<(usize, String, Vec<String>)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        let content = if rust_file {
            match line
                .strip_prefix("///")
                .or_else(|| line.strip_prefix("//!"))
            {
                Some(c) => c.strip_prefix(' ').unwrap_or(c),
                None => continue,
            }
        } else {
            line
        };
        if let Some(info) = content.strip_prefix("```") {
            match open.take() {
                Some(block) => blocks.push(block),
                None => open = Some((i + 1, info.trim().to_owned(), Vec::new())),
            }
        } else if let Some((_, _, lines)) = open.as_mut() {
            lines.push(content.to_owned());
        }
    }
    blocks
}

/// The examples that run may run at once against one server (`REDIS_URL`): each gives its locks
/// and synchronizers names of its own, or one would wait for another.
#[test]
fn examples_that_run_use_names_of_their_own() {
    let root = root();
    let mut files: Vec<PathBuf> = pages()
        .into_iter()
        .filter(|p| p.parent() == Some(root.join("docs").as_path()) || p.ends_with("README.md"))
        .collect();
    let mut dirs = vec![root.join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    let mut users: HashMap<String, BTreeSet<String>> = HashMap::new();
    for file in files {
        let text = read(&file);
        let rust_file = file.extension().is_some_and(|x| x == "rs");
        let name = file.strip_prefix(&root).unwrap().display().to_string();
        for (line, info, lines) in code_blocks(&text, rust_file) {
            let tags: Vec<&str> = info.split(',').map(str::trim).collect();
            let rust = tags
                .iter()
                .all(|t| matches!(*t, "" | "rust" | "should_panic"));
            if !rust {
                continue; // another language, or `no_run` / `ignore`: it never runs
            }
            for code in &lines {
                // Each string literal, and the call it is the first argument of.
                let mut rest = code.as_str();
                while let Some(at) = rest.find('"') {
                    let (before, after) = (&rest[..at], &rest[at + 1..]);
                    let Some(end) = after.find('"') else { break };
                    let call = before
                        .strip_suffix('(')
                        .and_then(|b| b.rsplit(['.', ' ', '(']).next())
                        .unwrap_or("");
                    if call.starts_with("get_") || before.ends_with("redlock(&client, ") {
                        users
                            .entry(after[..end].to_owned())
                            .or_default()
                            .insert(format!("{name}:{line}"));
                    }
                    rest = &after[end + 1..];
                }
            }
        }
    }
    assert!(
        users.len() >= 50,
        "found too few names to trust the scan: {}",
        users.len()
    );
    let shared: Vec<String> = users
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name:?}: {at:?}"))
        .collect();
    assert!(
        shared.is_empty(),
        "names used by several runnable examples:\n{}",
        shared.join("\n")
    );
}

/// Whether `text` has `fn <name>` with no identifier character right after the name.
fn defines_fn(text: &str, name: &str) -> bool {
    let needle = format!("fn {name}");
    text.match_indices(&needle).any(|(at, _)| {
        !text[at + needle.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// What one reference of docs/guarantees.md names, if the code span is one.
fn guarantee_reference(root: &Path, span: &str) -> Option<Result<(), String>> {
    if span.contains('\n') {
        return None;
    }
    // A campaign class (`=> "<class>"`) or break (`Ok("<name>")`) in the campaign's plan.
    let in_plan = |needle: String, what: String| {
        let plan = read(&root.join("tests/it/campaign/plan.rs"));
        Some(plan.contains(&needle).then_some(()).ok_or(what))
    };
    if let Some(class) = span.strip_prefix("campaign:") {
        return in_plan(
            format!("=> \"{class}\""),
            format!("no campaign class `{class}`"),
        );
    }
    if let Some(name) = span.strip_prefix("CAMPAIGN_BREAK=") {
        return in_plan(
            format!("Ok(\"{name}\")"),
            format!("no campaign break `{name}`"),
        );
    }
    if !(span.starts_with("tests/") || span.starts_with("src/")) {
        return None;
    }
    let (file, item) = span.split_once(".rs::")?;
    let path = root.join(format!("{file}.rs"));
    let Ok(text) = fs::read_to_string(&path) else {
        return Some(Err(format!("`{span}`: no file {file}.rs")));
    };
    if let Some(property) = item.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
        let ok = ["always", "eventually", "sometimes"]
            .iter()
            .any(|k| text.contains(&format!("Property::{k}(\"{property}\"")));
        return Some(
            ok.then_some(())
                .ok_or(format!("`{span}`: no such model property")),
        );
    }
    let identifier =
        !item.is_empty() && item.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !identifier {
        return Some(Err(format!("`{span}`: not a `file.rs::fn_name` reference")));
    }
    Some(
        defines_fn(&text, item)
            .then_some(())
            .ok_or(format!("`{span}`: no `fn {item}` in {file}.rs")),
    )
}

/// docs/guarantees.md names only tests, model properties, campaign classes and campaign breaks
/// that exist: `` `tests/it/x.rs::test_fn` `` and `` `src/y.rs::test_fn` `` (the file has
/// `fn test_fn`), `` `src/lock/model.rs::"property"` `` (a `Property::always("property", ...)`
/// of that file), `` `campaign:class` `` (a class name in `tests/it/campaign/plan.rs`) and
/// `` `CAMPAIGN_BREAK=name` ``. Every numbered invariant names at least one of them.
#[test]
fn the_guarantees_name_only_tests_that_exist() {
    let root = root();
    let page = read(&root.join("docs/guarantees.md"));
    let mut problems = Vec::new();
    let mut found = 0;
    // Every piece between two backticks is a candidate: prose between two code spans starts
    // with a space or punctuation, or spans lines, and matches none of the forms.
    for span in page.split('`') {
        match guarantee_reference(&root, span) {
            Some(Ok(())) => found += 1,
            Some(Err(e)) => problems.push(e),
            None => {}
        }
    }
    // Each invariant (a paragraph opening `**L1.`, `**RW2.`, ...) up to the next one.
    let mut invariants = 0;
    for part in page.split("\n**").skip(1) {
        let label = part.split('.').next().unwrap_or("");
        let is_invariant = label.len() <= 3
            && label.starts_with(|c: char| c.is_ascii_uppercase())
            && label.ends_with(|c: char| c.is_ascii_digit());
        if !is_invariant {
            continue;
        }
        invariants += 1;
        let body = part.split("\n## ").next().unwrap_or(part);
        let named = body
            .split('`')
            .any(|s| matches!(guarantee_reference(&root, s), Some(Ok(()))));
        if !named {
            problems.push(format!("invariant {label} names no test"));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/guarantees.md:\n{}",
        problems.join("\n")
    );
    assert!(
        found >= 150 && invariants >= 30,
        "docs/guarantees.md: only {found} references and {invariants} invariants found; \
         has the reference format changed?"
    );
}
