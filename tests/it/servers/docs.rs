//! docs/SERVER.md and the tests cannot drift apart: every fixture the doc names exists and is
//! what a test runs, every fixture is named in the doc, and the doc's exact lines (the VREF
//! wrapper, the forced command, the `git daemon` command line) are the ones in the fixtures
//! and the harness.

use std::path::Path;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(manifest().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every `fixtures/<name>` the text mentions.
fn fixtures_named(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .match_indices("fixtures/")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                .collect::<String>()
                .trim_end_matches(['.', '/'])
                .to_owned()
        })
        .filter(|n| n.len() > "fixtures/".len())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_fixture_the_server_doc_names_exists_and_a_test_runs_it() {
    let doc = read("docs/SERVER.md");
    let named = fixtures_named(&doc);
    assert!(
        named.len() >= 9,
        "the doc names too few fixtures: {named:?}"
    );
    // The harness's sources: what include_str! brings into the tests.
    let harness = [read("tests/it/server.rs"), read("tests/it/servers/mod.rs")].join("\n");
    for name in &named {
        assert!(
            manifest().join(name).is_file(),
            "docs/SERVER.md names {name}, which does not exist"
        );
        assert!(
            harness.contains(&format!("include_str!(\"../../{name}\")"))
                || harness.contains(&format!("include_str!(\"../../../{name}\")")),
            "docs/SERVER.md names {name}, which no test runs"
        );
    }
    // And every fixture is in the doc.
    for entry in std::fs::read_dir(manifest().join("fixtures")).expect("fixtures/") {
        let name = format!(
            "fixtures/{}",
            entry.expect("an entry").file_name().to_string_lossy()
        );
        assert!(
            named.contains(&name),
            "{name} is not described in docs/SERVER.md"
        );
    }
}

#[test]
fn the_docs_exact_lines_are_the_fixtures() {
    let doc = read("docs/SERVER.md");
    for (line, fixture) in [
        (
            r#"exec git-lease hook update "$1" "$2" "$3""#,
            "fixtures/gitolite-VREF-LEASE",
        ),
        (
            "exec git-lease hook pre-receive",
            "fixtures/gitolite-hook-git-lease",
        ),
        (
            r#"command="LEASE_USER=@USER@ exec git-shell -c \"$SSH_ORIGINAL_COMMAND\"",restrict"#,
            "fixtures/ssh-authorized-key.line",
        ),
        // What gitolite-rc.sed makes of ~/.gitolite.rc, as the gitolite tests check it.
        (
            r"GIT_CONFIG_KEYS => 'lease\..* receive\.advertisePushOptions',",
            "tests/it/servers/mod.rs",
        ),
        (
            r#"LOCAL_CODE => "$ENV{HOME}/local","#,
            "tests/it/servers/mod.rs",
        ),
        ("'repo-specific-hooks',", "tests/it/servers/mod.rs"),
    ] {
        assert!(doc.contains(line), "docs/SERVER.md should show {line:?}");
        assert!(
            read(fixture).contains(line),
            "{fixture} should hold the doc's line {line:?}"
        );
    }
    // The doc's `git daemon` command line is the harness's.
    let daemon_line = doc
        .lines()
        .find(|l| l.trim_start().starts_with("git daemon "))
        .expect("docs/SERVER.md shows a git daemon command line");
    let harness = read("tests/it/server.rs");
    for flag in daemon_line
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
    {
        let flag = flag.split('=').next().unwrap_or(flag);
        assert!(
            harness.contains(&format!("\"{flag}")),
            "the doc's git daemon flag {flag} is not what the tests run"
        );
    }
}
