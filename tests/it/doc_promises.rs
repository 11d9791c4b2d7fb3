//! The documents name only tests that exist: every test name in README.md, ARCHITECTURE.md and
//! docs/*.md is looked up in the sources, so a promise never cites a test renamed or moved
//! away; and every row of a guarantee table names the test that checks it.
//!
//! A name is a code span of `::`-separated lowercase words ending in a function or `*`
//! (`hook::*`, `run::processes::a_run_killed_by_sigkill_leaves_nothing_of_its_command_running`), or
//! `tests/<dir>/<file>.rs::<test>` anywhere. Test names are looked up in both test binaries
//! (`tests/it/`, `tests/zoo/`) and their shared harness (`tests/common/`), each module path
//! from its binary's root. A span that names a module of `src/` (`cli::exit`) or one of its
//! functions (`rules::is_live`) names code, and is looked up there the same way.

use std::path::{Path, PathBuf};

/// The top of the crate.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documents whose names are checked, relative to the top of the crate.
fn documents() -> Vec<String> {
    let mut docs = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    let mut more: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// `text` without its fenced code blocks: code there is shown, not cited.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether `word` is a lowercase Rust identifier.
fn is_ident(word: &str) -> bool {
    word.chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `span` is a path of identifiers, the last one possibly a glob (`*`, `*_refused`).
fn is_name(span: &str) -> bool {
    let parts: Vec<&str> = span.split("::").collect();
    let Some((last, modules)) = parts.split_last() else {
        return false;
    };
    let glob = last.replace('*', "");
    !modules.is_empty()
        && modules.iter().all(|m| is_ident(m))
        && (glob.is_empty()
            || is_ident(&glob)
            || glob
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
}

/// Whether the identifier `name` matches `glob`, whose `*` stands for any run of characters.
fn glob_matches(glob: &str, name: &str) -> bool {
    let pieces: Vec<&str> = glob.split('*').collect();
    crate::readme::pieces_match(&pieces, name)
}

/// The functions `source` defines.
fn functions(source: &str) -> impl Iterator<Item = &str> {
    source.match_indices("fn ").filter_map(move |(at, _)| {
        let rest = &source[at + 3..];
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
        rest[end..].starts_with(['(', '<']).then_some(&rest[..end])
    })
}

/// The test directories whose files are each a module path from their own root: the two test
/// binaries and the harness they share.
const TEST_DIRS: [&str; 3] = ["tests/it", "tests/zoo", "tests/common"];

/// The names `text` cites: code spans that are names, and `tests/<dir>/<file>.rs::<test>`.
fn cited(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut names: Vec<String> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| is_name(span))
        .map(str::to_owned)
        .collect();
    let mut paths: Vec<usize> = TEST_DIRS
        .iter()
        .flat_map(|dir| {
            let dir = format!("{dir}/");
            text.match_indices(&dir)
                .map(|(at, _)| at)
                .collect::<Vec<_>>()
        })
        .collect();
    paths.sort_unstable();
    for at in paths {
        let rest: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_/.:*".contains(*c))
            .collect();
        if rest.contains(".rs::") {
            names.push(rest.trim_end_matches(['.', ':']).to_owned());
        }
    }
    names
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The module path of the source file `file` under `base`: `ledger/cas.rs` is
/// `["ledger", "cas"]`, `rules/mod.rs` is `["rules"]`.
fn module_of(base: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(base).expect("a file under its base");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Whether `source` defines `item` inside the inline modules `inner`: a function, or `*`.
fn defines(source: &str, inner: &[&str], item: &str) -> bool {
    inner
        .iter()
        .all(|m| source.contains(&format!("mod {m} ")) || source.contains(&format!("mod {m};")))
        && functions(source).any(|f| glob_matches(item, f))
}

/// Whether `name` (`a::b::item`) is defined: a file whose module path is `a::b` (a test
/// directory's by its whole path, src/ by its end) or an outer module of it with the rest inline, defining
/// `item`; or, for src/, a module whose path ends with the whole name.
fn exists(name: &str, files: &[(PathBuf, Vec<String>, bool)]) -> bool {
    let parts: Vec<&str> = name
        .split("::")
        .skip_while(|p| *p == "git_lease" || *p == "crate")
        .collect();
    let Some((item, modules)) = parts.split_last() else {
        return false;
    };
    let matches = |module: &[String], path: &[&str], in_src: bool| {
        if in_src {
            module.len() >= path.len() && module[module.len() - path.len()..] == *path
        } else {
            module == path
        }
    };
    files.iter().any(|(file, module, in_src)| {
        if *in_src && matches(module, &parts, true) {
            return true;
        }
        (1..=modules.len()).any(|k| {
            matches(module, &modules[..k], *in_src)
                && std::fs::read_to_string(file)
                    .is_ok_and(|source| defines(&source, &modules[k..], item))
        })
    })
}

/// Whether `tests/<dir>/<file>.rs::<test>` exists.
fn exists_at_path(name: &str) -> bool {
    let Some((file, test)) = name.split_once(".rs::") else {
        return false;
    };
    std::fs::read_to_string(root().join(format!("{file}.rs")))
        .is_ok_and(|source| defines(&source, &[], test))
}

/// Every source file of the test directories and src/, with its module path and whether it is
/// in src/.
fn all_sources() -> Vec<(PathBuf, Vec<String>, bool)> {
    let mut files = Vec::new();
    let dirs = TEST_DIRS.iter().map(|dir| (*dir, false));
    for (dir, in_src) in dirs.chain([("src", true)]) {
        let base = root().join(dir);
        for file in sources(&base) {
            let module = module_of(&base, &file);
            files.push((file, module, in_src));
        }
    }
    files
}

#[test]
fn every_test_a_document_names_exists() {
    let files = all_sources();
    let mut missing = Vec::new();
    let mut total = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a document");
        for name in cited(&text) {
            total += 1;
            let found = if name.starts_with("tests/") {
                exists_at_path(&name)
            } else {
                exists(&name, &files)
            };
            if !found {
                missing.push(format!("{doc}: `{name}`"));
            }
        }
    }
    assert!(total >= 50, "the documents name their tests: {total} names");
    assert!(
        missing.is_empty(),
        "names of tests (or code) that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_name_that_does_not_exist_is_found_missing() {
    let files = all_sources();
    assert!(exists("hook::*", &files));
    assert!(exists("rules::is_live", &files));
    assert!(exists("cli::exit", &files));
    assert!(exists(
        "doc_promises::a_name_that_does_not_exist_is_found_missing",
        &files
    ));
    assert!(!exists("hook::no_such_test_anywhere", &files));
    assert!(!exists("no_such_module::*", &files));
    assert!(exists("doc_promises::*_is_found_missing", &files));
    assert!(!exists("doc_promises::*_is_found_nowhere", &files));
    assert!(exists_at_path(
        "tests/it/doc_promises.rs::every_test_a_document_names_exists"
    ));
    assert!(!exists_at_path("tests/it/doc_promises.rs::no_such_test"));
    // The other binary's tests, and the shared harness's functions, by module path and by file.
    assert!(exists("servers::checks::*", &files));
    assert!(exists("env::skips::skipped", &files));
    assert!(!exists("servers::checks::no_such_test", &files));
    assert!(exists_at_path(
        "tests/zoo/oldgit.rs::git_2_39_claims_releases_and_syncs_through_a_daemon_of_the_newer_git"
    ));
    assert_eq!(
        cited("see `hook::*`, tests/it/fence.rs::a_b, and `Ledger::apply`.\n```\n`x::y`\n```\n"),
        vec!["hook::*".to_owned(), "tests/it/fence.rs::a_b".to_owned()]
    );
    assert_eq!(
        cited("tests/zoo/mcp/mod.rs::m_n and tests/it/fence.rs::a_b."),
        vec![
            "tests/zoo/mcp/mod.rs::m_n".to_owned(),
            "tests/it/fence.rs::a_b".to_owned()
        ]
    );
}

/// Every row of a table whose last column is the proof (`shown by`, `test`) names a test in
/// that cell, in SECURITY.md, SERVER.md and FORMAT.md.
#[test]
fn every_guarantee_row_names_its_test() {
    for doc in ["docs/SECURITY.md", "docs/SERVER.md", "docs/FORMAT.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("a document");
        let mut proof_table = false;
        let mut rows = 0;
        for line in text.lines() {
            if !line.starts_with('|') {
                proof_table = false;
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let last = cells.last().copied().unwrap_or_default();
            if ["shown by", "test", "tests", "checked by"].contains(&last) {
                proof_table = true;
                continue;
            }
            if !proof_table || last.starts_with("---") {
                continue;
            }
            rows += 1;
            assert!(
                !cited(last).is_empty(),
                "{doc}: a row names no test: {line}"
            );
        }
        assert!(rows > 0 || !cited(&text).is_empty(), "{doc} names no test");
    }
}
