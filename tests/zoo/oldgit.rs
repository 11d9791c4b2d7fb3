//! Older gits: the distribution's git (Debian's 2.39 at `/usr/bin/git`, which `.ci/run`
//! installs) as client and as server beside the newer git first on the harness's `PATH`, and
//! what git 2.39 does with a reftable repository: read in-process, writes refused naming 2.45.
//! The version gates themselves, shown with stand-in gits, are `version_gates` in `it`.
//!
//! The interoperation tests make every repository in the files format explicitly, in the
//! reftable run too: git 2.39 has no reftable, and what it does with a reftable repository is
//! the test of its own here. Without an older git at `/usr/bin/git` (another machine), those
//! tests print `SKIPPED: ...` on stderr, and with `CI=true` fail instead.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::env::{self, at_min, Skip, TestRepo};
use crate::gits::{lease, stand_in};
use crate::server::Server;

/// The distribution's git.
const DISTRIBUTION_GIT: &str = "/usr/bin/git";

/// The first two numbers of what `<git> --version` says.
fn version_of(git: &Path) -> Option<(u32, u32, String)> {
    let out = std::process::Command::new(git)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let word = text
        .strip_prefix("git version ")?
        .split_whitespace()
        .next()?;
    let mut numbers = word.split('.').map(|n| n.parse::<u32>());
    let (Some(Ok(major)), Some(Ok(minor))) = (numbers.next(), numbers.next()) else {
        return None;
    };
    Some((major, minor, word.to_owned()))
}

/// The distribution's git, older than reftable and new enough for remotes (2.29 to 2.44):
/// returns a directory of `scratch` holding `git`, a link to it, to put first on `PATH`, and
/// its version as it prints it (`2.39.5`).
fn old_git(test: &str, scratch: &Path) -> Option<(PathBuf, String)> {
    let git = Path::new(DISTRIBUTION_GIT);
    if !git.is_file() {
        return env::unavailable(Skip::Host, test, &format!("there is no {DISTRIBUTION_GIT}"));
    }
    match version_of(git) {
        Some((2, minor, shown)) if (29..45).contains(&minor) => {
            let dir = scratch.join("old-git");
            std::fs::create_dir_all(&dir).expect("create the old git's directory");
            std::os::unix::fs::symlink(git, dir.join("git")).expect("link the old git");
            Some((dir, shown))
        }
        other => env::unavailable(
            Skip::Host,
            test,
            &format!("{DISTRIBUTION_GIT} is not a git from 2.29 to 2.44: {other:?}"),
        ),
    }
}

/// A client of `server` in the files format, holding as `holder`, sharing through `origin`,
/// running the `git` of `dir` if given.
fn client(server: &Server, holder: &str, dir: Option<&Path>) -> TestRepo {
    let repo = TestRepo::client_made_with(&["--ref-format=files"], &server.url(), holder);
    repo.git(&["config", "lease.remote", "origin"]);
    match dir {
        Some(dir) => repo.path_first(dir),
        None => repo,
    }
}

/// The version of the git that serves `server`, as it tells a client (`agent=git/2.39.5`).
fn served_agent(server: &Server, client: &TestRepo) -> String {
    let run = client
        .git_cmd()
        .env("GIT_TRACE_PACKET", "1")
        .args(["-c", "protocol.version=2", "ls-remote", &server.url()])
        .run();
    run.ok();
    let at = run
        .stderr
        .find("< agent=git/")
        .unwrap_or_else(|| panic!("the server names no agent\n{run}"));
    run.stderr[at + "< agent=git/".len()..]
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Claims, renewals, releases, refusals, a forged push the hook refuses, and mirrors synced
/// and verified, through `server` (with the hook), between alice on the old git and bob on
/// the newer one; mallory forges with the old git, one mirror runs each git.
fn story(server: &Server, old: &Path) {
    let alice = client(server, "alice", Some(old));
    let bob = client(server, "bob", None);

    let v = lease(&alice, None, 0, &["acquire", "42", "--ttl", "1h"]);
    let v = v.outcome(0, "acquired");
    assert_eq!(v["token"], 1, "{v}");
    assert_eq!(server.tip("42").as_deref(), v["commit"].as_str());
    let v = lease(&bob, None, 1, &["acquire", "42"]).outcome(3, "held");
    assert_eq!(v["holder"], "alice", "{v}");
    let list = lease(&bob, None, 1, &["list"]);
    list.ok();
    assert_eq!(list.json()[0]["holder"], "alice", "{list}");
    lease(&alice, None, 2, &["renew", "42", "--ttl", "2h"]).outcome(0, "renewed");
    lease(&alice, None, 3, &["release", "42"]).outcome(0, "released");
    let v = lease(&bob, None, 4, &["acquire", "42", "--ttl", "1h"]).outcome(0, "acquired");
    assert_eq!(v["token"], 2, "{v}");
    let v = lease(&alice, None, 5, &["acquire", "42"]).outcome(3, "held");
    assert_eq!(v["holder"], "bob", "{v}");
    lease(&alice, None, 5, &["check", "42", "--token", "2"]).ok();

    // A ledger of 42 rewritten elsewhere and forced in with the old git's own push: the hook
    // refuses it, and nothing moves.
    let mallory = client(server, "mallory", Some(old));
    lease(&mallory, None, 5, &["acquire", "42", "--local"]).outcome(0, "acquired");
    server.assert_refuses_a_forced_ledger(&mallory, "42");

    for git in [Some(old), None] {
        let mirror = TestRepo::mirror_made_with(&["--ref-format=files"], &server.url());
        let mirror = match git {
            Some(dir) => mirror.path_first(dir),
            None => mirror,
        };
        let v = lease(&mirror, None, 6, &["sync"]);
        v.ok();
        assert_eq!(v.json()["new"].as_array().map(Vec::len), Some(1), "{v}");
        assert_eq!(mirror.tip("42"), server.tip("42"));
        assert_eq!(
            mirror.commit_count("42"),
            4,
            "acquire, renew, release, acquire"
        );
        let v = lease(&mirror, None, 6, &["verify"]);
        v.ok();
        assert_eq!(v.json()["clean"], json!(true), "{v}");
    }
    let v = server.lease(&["--json", "verify"]);
    v.ok();
    assert_eq!(v.json()["clean"], json!(true), "{v}");
}

#[test]
fn git_2_39_claims_releases_and_syncs_through_a_daemon_of_the_newer_git() {
    let mut server = Server::with_hook_made_with(&["--ref-format=files"]);
    let Some((old, shown)) = old_git(
        "git_2_39_claims_releases_and_syncs_through_a_daemon_of_the_newer_git",
        &server.repo().scratch("bin"),
    ) else {
        return;
    };
    server.start_at(&at_min(0));
    let probe = client(&server, "probe", Some(&old));
    assert!(probe.git(&["--version"]).ends_with(&shown));
    assert_ne!(served_agent(&server, &probe), shown, "the newer git serves");
    story(&server, &old);
}

#[test]
fn the_newer_git_claims_releases_and_syncs_through_a_daemon_of_git_2_39() {
    let server = Server::with_hook_made_with(&["--ref-format=files"]);
    let Some((old, shown)) = old_git(
        "the_newer_git_claims_releases_and_syncs_through_a_daemon_of_git_2_39",
        &server.repo().scratch("bin"),
    ) else {
        return;
    };
    let mut server = server.served_by(&old);
    server.start_at(&at_min(0));
    let probe = client(&server, "probe", None);
    assert_eq!(served_agent(&server, &probe), shown, "git 2.39 serves");
    story(&server, &old);
}

#[test]
fn a_reftable_repository_under_git_2_39_is_read_in_process_and_writes_refused_naming_git_2_45() {
    let name =
        "a_reftable_repository_under_git_2_39_is_read_in_process_and_writes_refused_naming_git_2_45";
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    let Some((old, shown)) = old_git(name, &repo.scratch("bin")) else {
        return;
    };
    let origin = repo.add_bare_origin(&["--ref-format=files"]);
    repo.git(&["config", "lease.remote", "."]);
    repo.json_at(&at_min(0), 0, &["acquire", "7", "--holder", "alice"]);
    // Reads are the reftable reader's, in-process: no git is asked.
    let listed = lease(&repo, Some(&old), 1, &["list"]);
    listed.code(0);
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).expect("JSON");
    assert_eq!(listed[0]["issue"], "7", "{listed}");
    assert_eq!(listed[0]["holder"], "alice", "{listed}");
    let shown_7 = lease(&repo, Some(&old), 1, &["show", "7"]);
    shown_7.code(0);
    assert!(shown_7.stdout.contains(r#""holder":"alice""#), "{shown_7}");
    repo.git(&["fsck", "--no-progress"]);
    let before = repo.snapshot();
    // Every write is git's, and needs git 2.45: refused before anything is written.
    let said = format!("this needs git 2.45 or newer for a reftable repository (found {shown})");
    for args in [
        &["acquire", "42", "--holder", "alice"][..],
        &["release", "7", "--holder", "alice"],
        &["gc"],
        // A remote needs 2.29, which 2.39 is; the repository's refs need 2.45.
        &["acquire", "43", "--holder", "alice", "--remote", "origin"],
    ] {
        let run = lease(&repo, Some(&old), 3, args);
        run.code(2);
        let error = serde_json::from_str::<serde_json::Value>(run.stderr.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e})\n{run}"));
        assert_eq!(error["error"]["kind"], "usage", "{run}");
        assert_eq!(error["error"]["message"], said.as_str(), "{run}");
    }
    assert_eq!(repo.snapshot(), before, "nothing was written");
    assert!(origin.lease_refs().is_empty(), "nothing was pushed");

    // A git whose version cannot be read is let run, and git's own words then tell that it
    // does not know reftable.
    let (unknown, _) = stand_in(
        &repo.scratch("unknown"),
        "git version unknown",
        Path::new(DISTRIBUTION_GIT),
    );
    let run = repo
        .lease()
        .path_first(&unknown)
        .args(["acquire", "45", "--holder", "alice"])
        .run();
    run.code(2).stderr_has(
        "this needs git 2.45 or newer for a reftable repository (found a git whose version \
         could not be read)",
    );
    assert!(repo.tip("45").is_none(), "no ref moved");
}
