//! ARCHITECTURE.md's rule, checked: "a module only uses modules below it". The layers are read
//! from its "Layers" table; the uses from the sources (`crate::module` paths, `use crate::{..}`
//! groups, and the names `lib.rs` re-exports). Every top-level module must be in the table,
//! every use must go to its own layer or a lower one, and the uses must form no cycle (issue 24
//! item 5: `conn` <-> `scripts`, `error` <-> `observe` and the CLI's `inspect` <-> `render` had
//! crept in). The operator CLI's and the bench crate's modules are checked the same way, among
//! themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments and literals: doc links such as ``[`x`](crate::Config)`` and the
/// doc strings that macros build (`"crate::Lock"`) are no uses.
fn code(path: &Path) -> String {
    strip(&std::fs::read_to_string(path).expect("read source"))
}

/// `text` with its comments, strings (raw ones too) and char literals cut out, line breaks kept.
fn strip(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or(' ');
    // The end of a literal from `i`, its opening quote, closed by `close` (escapes unless raw).
    let end = |mut i: usize, close: &str, raw: bool| {
        let close: Vec<char> = close.chars().collect();
        i += 1;
        while i < s.len() && !s[i..].starts_with(&close) {
            i += if !raw && s[i] == '\\' { 2 } else { 1 };
        }
        i + close.len()
    };
    let (mut out, mut i) = (String::new(), 0);
    while i < s.len() {
        let hashes = s[i + 1..].iter().take_while(|c| **c == '#').count();
        let raw = s[i] == 'r' && at(i + 1 + hashes) == '"';
        let next = match (s[i], at(i + 1)) {
            ('/', '/') => (i..s.len()).find(|&j| s[j] == '\n').unwrap_or(s.len()),
            ('/', '*') => s[i..]
                .windows(2)
                .position(|w| w == ['*', '/'])
                .map_or(s.len(), |p| i + p + 2),
            _ if raw && (i == 0 || !(at(i - 1).is_alphanumeric() || at(i - 1) == '_')) => {
                end(i + 1 + hashes, &format!("\"{}", "#".repeat(hashes)), true)
            }
            ('"', _) => end(i, "\"", false),
            ('\'', '\\') => end(i, "'", false),
            ('\'', _) if at(i + 2) == '\'' => i + 3,
            (c, _) => {
                out.push(c);
                i += 1;
                continue;
            }
        };
        out.extend(s[i..next.min(s.len())].iter().filter(|c| **c == '\n'));
        i = next;
    }
    out
}

/// The first path segments that follow `crate::` (not `$crate::`), including each item of a
/// `crate::{a, b::c, d::{e}}` group.
fn crate_uses(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i;
        at = start + "crate::".len();
        if start > 0 && (bytes[start - 1] == b'$' || bytes[start - 1].is_ascii_alphanumeric()) {
            continue;
        }
        let rest = code[at..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // Items at depth 1 of the group: the first segment after `{` or `,`.
            let mut depth = 1;
            let mut expect = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => expect = true,
                    c if expect && depth == 1 && (c.is_alphanumeric() || c == '_') => {
                        found.insert(ident(&group[j..]));
                        expect = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// The module a file belongs to: `src/conn/batch.rs` -> `conn`, `src/error.rs` -> `error`.
fn module_of(base: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(base).expect("under base");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_owned()
}

/// Uses between the modules of `base` (files right under it, or in one folder per module), and
/// each `crate::` use that names no module (`file: crate::Name`): a crate-root item or
/// re-export, which hides the module it comes from.
fn graph(base: &Path, skip: &[&str]) -> (Graph, Vec<String>) {
    let mut files = Vec::new();
    rust_files(base, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(base, f))
        .filter(|m| !skip.contains(&m.as_str()))
        .collect();
    let mut g: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let mut roots = Vec::new();
    for file in &files {
        let from = module_of(base, file);
        if skip.contains(&from.as_str()) {
            continue;
        }
        for used in crate_uses(&code(file)) {
            if !modules.contains(&used) {
                let rel = file.strip_prefix(base).expect("under base").display();
                roots.push(format!("{rel}: crate::{used}"));
            } else if used != from {
                g.get_mut(&from).expect("known module").insert(used);
            }
        }
    }
    (g, roots)
}

/// A cycle of `g`, if it has one (depth-first search, colours).
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        node: &str,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), 1);
        path.push(node.to_owned());
        for next in &g[node] {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|n| n == next).expect("on path");
                    let mut c = path[from..].to_vec();
                    c.push(next.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(g, next, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in g.keys() {
        if !state.contains_key(node) {
            if let Some(c) = visit(g, node, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The layer of each module named in ARCHITECTURE.md's "Layers" table (its row, from 0 at the
/// top = lowest; a module named in two rows belongs to the higher one).
fn layers(known: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = doc
        .split("## Layers")
        .nth(1)
        .expect("a Layers section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let rows = table
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .enumerate();
    let mut layer = BTreeMap::new();
    for (row, line) in rows {
        // Backticked names outside parentheses: `conn/` (`mod`, `batch`) names `conn` only
        // (what the parentheses list are its files).
        let modules_cell = line.split('|').nth(2).unwrap_or_default();
        let mut depth = 0i32;
        for (k, part) in modules_cell.split('`').enumerate() {
            if k % 2 == 0 {
                depth += part.matches('(').count() as i32 - part.matches(')').count() as i32;
                continue;
            }
            let name = part.split('/').next().unwrap_or_default();
            if depth == 0 && known.contains(name) {
                layer.insert(name.to_owned(), row);
            }
        }
    }
    layer
}

#[test]
fn library_modules_only_use_modules_below_them() {
    let src = root().join("src");
    let (g, roots) = graph(&src, &["lib", "bin"]);
    assert!(
        roots.is_empty(),
        "crate-root names, which hide the module they come from (name it: \
         `crate::error::LockError`, not `crate::LockError`): {roots:#?}"
    );
    assert!(
        g.contains_key("conn") && g.contains_key("error"),
        "modules found: {g:?}"
    );
    if let Some(c) = cycle(&g) {
        panic!("an import cycle among src/ modules: {}", c.join(" -> "));
    }
    let known: BTreeSet<String> = g.keys().cloned().collect();
    let layer = layers(&known);
    let missing: Vec<&String> = known.iter().filter(|m| !layer.contains_key(*m)).collect();
    assert!(
        missing.is_empty(),
        "modules missing from ARCHITECTURE.md's Layers table: {missing:?}"
    );
    let mut upward = Vec::new();
    for (from, uses) in &g {
        for to in uses {
            if layer[to] > layer[from] {
                upward.push(format!(
                    "{from} (row {}) uses {to} (row {})",
                    layer[from], layer[to]
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "uses of a higher layer than ARCHITECTURE.md gives: {upward:#?}"
    );
}

#[test]
fn cli_modules_form_no_cycle() {
    let cli = root().join("src/bin/redisson-lock");
    let (g, _) = graph(&cli, &["main"]);
    assert!(
        g.contains_key("inspect") && g.contains_key("render"),
        "modules found: {g:?}"
    );
    if let Some(c) = cycle(&g) {
        panic!(
            "an import cycle among the CLI's modules: {}",
            c.join(" -> ")
        );
    }
}

#[test]
fn the_use_reader_sees_groups_and_ignores_comments_and_macros() {
    let uses =
        crate_uses("use crate::{a::{B, C}, d, e::f};\nlet x = crate::g::h();\n$crate::i::j\n");
    let expected: BTreeSet<String> = ["a", "d", "e", "g"].map(String::from).into();
    assert_eq!(uses, expected);
    let dir = std::env::temp_dir().join(format!("layers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("x.rs");
    std::fs::write(&file, "/// [`A`](crate::k::A)\nfn f() {} // crate::l\n").expect("write");
    assert!(crate_uses(&code(&file)).is_empty());
    let literals =
        "f(\"crate::m \\\"\", r#\"\"crate::n\"#, '\"', '\\'', b'x') /* crate::o */ crate::P";
    let expected: BTreeSet<String> = ["P".to_owned()].into();
    assert_eq!(
        crate_uses(&strip(literals)),
        expected,
        "{}",
        strip(literals)
    );
    let mut g = Graph::new();
    g.insert("a".into(), ["b".to_owned()].into());
    g.insert("b".into(), ["a".to_owned()].into());
    assert!(cycle(&g).is_some());
    g.get_mut("b").expect("b").clear();
    assert!(cycle(&g).is_none());
}

#[test]
fn bench_modules_form_no_cycle() {
    // The bench crate (benches/src) keeps the same rule among its own modules.
    let bench = root().join("benches/src");
    let (g, _) = graph(&bench, &["main"]);
    assert!(
        g.contains_key("workloads") && g.contains_key("contend"),
        "modules found: {g:?}"
    );
    if let Some(c) = cycle(&g) {
        panic!(
            "an import cycle among the bench's modules: {}",
            c.join(" -> ")
        );
    }
}

/// The most lines a source file of the library or the CLI may have (ARCHITECTURE.md, "Layers"):
/// a file longer than that holds more than one idea. Test-only modules (declared under
/// `#[cfg(test)]` by their parent, such as the stateright models) are exempt.
const MAX_FILE_LINES: usize = 550;

#[test]
fn no_source_file_is_over_the_line_limit() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "found too few sources: {}", files.len());
    let mut long = Vec::new();
    for file in &files {
        let lines = std::fs::read_to_string(file).expect("read").lines().count();
        if lines <= MAX_FILE_LINES || test_only(file) {
            continue;
        }
        long.push(format!("{} ({lines} lines)", file.display()));
    }
    assert!(
        long.is_empty(),
        "over {MAX_FILE_LINES} lines: {long:?}: split it where it holds two ideas"
    );
}

/// Whether `file` is a module its parent declares under `#[cfg(test)]`.
fn test_only(file: &Path) -> bool {
    let name = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let dir = file.parent().expect("a parent");
    let parent = ["mod.rs", "lib.rs"]
        .iter()
        .map(|p| dir.join(p))
        .chain(std::iter::once(dir.with_extension("rs")))
        .find(|p| p.exists() && p != file);
    let Some(parent) = parent else { return false };
    let text = std::fs::read_to_string(parent).expect("read parent");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines.windows(2).any(|w| {
        w[0] == "#[cfg(test)]"
            && (w[1] == format!("mod {name};") || w[1] == format!("pub(crate) mod {name};"))
    })
}
