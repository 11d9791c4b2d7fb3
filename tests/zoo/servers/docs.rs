//! docs/SERVER.md and the tests cannot drift apart: every fixture the doc names exists and is
//! what a test runs, every fixture is named in the doc, and the doc's exact lines (the VREF
//! wrapper, the forced command, the `git daemon` command line) are the ones in the fixtures
//! and the harness; and the recipes, run as written, give a fence that holds.

use std::path::Path;

use crate::env::{at, Run, BIN};
use crate::pushes::assert_fenced;
use crate::server::{git, lease, Server};

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
    let harness = [
        read("tests/common/server.rs"),
        read("tests/zoo/servers/mod.rs"),
    ]
    .join("\n");
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
            "tests/zoo/servers/mod.rs",
        ),
        (
            r#"LOCAL_CODE => "$ENV{HOME}/local","#,
            "tests/zoo/servers/mod.rs",
        ),
        ("'repo-specific-hooks',", "tests/zoo/servers/mod.rs"),
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
    let harness = read("tests/common/server.rs");
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

/// The ```sh blocks of docs/SERVER.md under the heading whose text is `heading` (any level),
/// before the next heading.
fn doc_blocks(heading: &str) -> Vec<String> {
    let doc = read("docs/SERVER.md");
    let mut blocks = Vec::new();
    let mut inside = false;
    let mut block: Option<String> = None;
    for line in doc.lines() {
        match &mut block {
            Some(text) if line.starts_with("```") => {
                blocks.push(std::mem::take(text));
                block = None;
            }
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None if line.starts_with('#') => {
                inside = line.trim_start_matches('#').trim() == heading;
            }
            None if inside && line == "```sh" => block = Some(String::new()),
            None => {}
        }
    }
    assert!(
        !blocks.is_empty(),
        "docs/SERVER.md has no sh block under {heading:?}"
    );
    blocks
}

/// The lines of a recipe's blocks that the tests run as written, but for paths: not the
/// `git daemon` line (the harness starts it with the same flags:
/// [`the_docs_exact_lines_are_the_fixtures`]), nor `chown` to the web server's account (the
/// harness's web front runs `git http-backend` as this account).
fn recipe_lines(blocks: &[String]) -> Vec<String> {
    blocks
        .iter()
        .flat_map(|b| b.lines())
        .map(|l| l.split(" #").next().unwrap_or(l).trim().to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| !l.starts_with("git daemon ") && !l.starts_with("chown "))
        .collect()
}

/// Runs `lines` for the served repository of `server` as root would on the server: the doc's
/// `/srv/git/project.git` is that repository, `/usr/local/bin/git-lease` the binary under test.
fn run_recipe(server: &Server, lines: &[String]) {
    let bare = server.bare().to_str().expect("a UTF-8 path");
    for line in lines {
        let line = line
            .replace("/srv/git/project.git", bare)
            .replace("/usr/local/bin/git-lease", BIN);
        let mut cmd = std::process::Command::new("sh");
        crate::env::hermetic(&mut cmd, &server.root().join("home"), server.root());
        cmd.env("PATH", crate::env::path_with_binary(&[]))
            .arg("-c")
            .arg(&line)
            .current_dir(server.root());
        Run::capture(cmd, line.clone()).ok();
    }
}

/// The story the recipes must hold to: alice works on issue 7 and pushes; her lease runs out
/// and bob takes the issue over; bob, the live holder, pushes; alice's stale plain
/// `git push` is refused, and the branch stays bob's. Where the server knows who pushed, bob's
/// plain push is accepted; where it does not, only his token opens the branch.
fn takeover_story(server: &Server, identity: bool) {
    let alice = server.client("alice");
    let bob = server.client("bob");
    lease(
        &alice,
        0,
        &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
    )
    .ok();
    alice.git(&["switch", "-q", "-c", "issue/7"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "alice: work"]);
    lease(&alice, 0, &["push"]).ok();

    // The server's clock passes alice's expiry; bob takes issue 7 over (token 2).
    server.config("lease.hookNow", &at(1000));
    lease(
        &bob,
        1000,
        &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
    )
    .ok()
    .stdout_has("token 2");
    git(&bob, &["fetch", "-q", "origin"]).ok();
    git(&bob, &["switch", "-q", "-c", "issue/7", "origin/issue/7"]).ok();
    bob.git(&["commit", "-q", "--allow-empty", "-m", "bob: work"]);
    let plain = git(&bob, &["push", "origin", "issue/7"]);
    if identity {
        plain.ok();
    } else {
        assert_fenced(&plain, "issue/7", &["lease-token", "lease.requireToken"]);
        lease(&bob, 1000, &["push"]).ok();
    }
    let bobs = bob.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bobs.clone()));

    // alice, late, brings her branch up to date and pushes plainly: refused.
    git(&alice, &["fetch", "-q", "origin"]).ok();
    alice.git(&["merge", "-q", "--ff-only", "origin/issue/7"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "alice: stale work"]);
    let run = git(&alice, &["push", "origin", "issue/7"]);
    let why = if identity {
        "not by alice"
    } else {
        "lease-token"
    };
    assert_fenced(&run, "issue/7", &[why]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bobs));
}

#[test]
fn the_git_daemon_recipe_as_written_fences_a_stale_plain_push() {
    let mut server = Server::without_hook();
    let lines = recipe_lines(
        &[
            doc_blocks("Recipes, server by server"),
            doc_blocks("git daemon (no identity)"),
        ]
        .concat(),
    );
    assert!(
        lines.iter().any(|l| l.contains("install-hook")),
        "{lines:?}"
    );
    run_recipe(&server, &lines);
    server.start_at(&at(0));
    takeover_story(&server, false);
}

#[test]
fn the_http_backend_recipe_as_written_fences_a_stale_plain_push() {
    let mut server = Server::http_unhooked(&["alice", "bob", "ops"]);
    let lines = recipe_lines(
        &[
            doc_blocks("Recipes, server by server"),
            doc_blocks("git http-backend behind nginx, apache or lighttpd (basic auth)"),
        ]
        .concat(),
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("lease.pusherEnv REMOTE_USER")),
        "{lines:?}"
    );
    run_recipe(&server, &lines);
    server.start_at(&at(0));
    takeover_story(&server, true);
}
