//! The same story through every server of docs/SERVER.md: claims, a race, a forged takeover,
//! identity, revoke, fencing, and a refusal by the lease rules through `git lease push`. Each
//! server's clock is T0 (`lease.hookNow`); clients are at the instants given.
//!
//! Where the server tells no identity (`git daemon`) the story says what changes: anyone may
//! act in anyone's name, so the identity and administrator checks are shown to be absent.

use std::sync::Barrier;

use crate::env::{at, Run, TestRepo};
use crate::forge::acquired;
use crate::pushes::assert_fenced;
use crate::pushes::{assert_refused, lease_commit};
use crate::server::{git, lease};

use super::{Kind, Served};

/// Asserts `run` exited `code`, showing the server's logs otherwise.
#[track_caller]
pub fn expect(server: &Served, run: &Run, code: i32) {
    assert_eq!(
        run.code,
        code,
        "{:?}: `{}` exited {} instead of {code}\n{run}\n{}",
        server.kind,
        run.command,
        run.code,
        server.log()
    );
}

/// Asserts that `run`, bob's claim of `issue` in alice's name, was refused by the identity
/// check (exit 3) and left the server without a ledger of `issue`.
#[track_caller]
pub fn assert_refused_as_someone_else(server: &Served, run: &Run, issue: &str) {
    expect(server, run, 3);
    run.stderr_has("identity").stderr_has("but bob pushed it");
    assert_eq!(server.tip(issue), None);
}

/// The story; see the module documentation.
fn story(kind: Kind) {
    let Some(server) = Served::start(kind, &at(0)) else {
        return;
    };
    if !kind.is_gitolite() {
        // gitolite.conf sets these.
        server.config("lease.admins", "admin");
        server.config("lease.fence", "refs/heads/issue/*");
    }
    let alice = server.client("alice");
    let bob = server.client("bob");
    let admin = server.client("admin");
    let remote = ["--remote", "origin"];
    let with = |args: &[&str]| -> Vec<String> {
        remote.iter().chain(args).map(|s| (*s).to_owned()).collect()
    };
    let run_as = |client: &TestRepo, secs: i64, args: &[&str]| -> Run {
        let args = with(args);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        lease(client, secs, &refs)
    };

    // Claims: alice takes 7; bob cannot.
    let run = run_as(&alice, 0, &["acquire", "7", "--ttl", "1h"]);
    expect(&server, &run, 0);
    let chain = server.leases("7");
    assert_eq!(chain.len(), 1);
    assert_eq!(chain[0]["holder"], "alice");
    assert_eq!(chain[0]["token"], 1);
    let alices = server.tip("7").expect("refs/leases/7 on the server");
    let run = run_as(&bob, 0, &["acquire", "7"]);
    expect(&server, &run, 3);
    run.stdout_has("held by alice");

    // A race: three users claim issue r at once; exactly one gets it, with token 1.
    let barrier = Barrier::new(3);
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = [&alice, &bob, &admin]
            .into_iter()
            .map(|client| {
                let barrier = &barrier;
                let run_as = &run_as;
                scope.spawn(move || {
                    barrier.wait();
                    run_as(client, 0, &["acquire", "r", "--ttl", "1h"])
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a racer"))
            .collect()
    });
    let winners = runs.iter().filter(|r| r.code == 0).count();
    let held = runs.iter().filter(|r| r.code == 3).count();
    assert_eq!(
        (winners, held),
        (1, 2),
        "{kind:?}: one winner, two told it is held:\n{}\n{}",
        runs.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        server.log()
    );
    let chain = server.leases("r");
    assert_eq!(chain.len(), 1, "{chain:?}");
    assert_eq!(chain[0]["token"], 1);

    // A forged takeover of alice's live lease, pushed with plain git: refused.
    expect(
        &server,
        &git(&bob, &["fetch", "-q", "origin", "refs/leases/7"]),
        0,
    );
    let forged = lease_commit(&bob, &acquired("7", "bob", 2, 0, Some(600)), &[&alices]);
    let run = git(
        &bob,
        &["push", "origin", &format!("{forged}:refs/leases/7")],
    );
    assert_refused(&run, "7", &forged, "holder-change");
    assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));

    // Identity: bob claims 8 in alice's name.
    let run = run_as(&bob, 0, &["acquire", "8", "--holder", "alice"]);
    if kind.has_identity() {
        assert_refused_as_someone_else(&server, &run, "8");
    } else {
        // Nobody is authenticated: the server cannot tell.
        expect(&server, &run, 0);
    }

    // Revoke: only an administrator, where the server knows who pushed.
    if kind.has_identity() {
        let run = run_as(
            &bob,
            0,
            &["revoke", "7", "--reason", "mine now", "--holder", "bob"],
        );
        expect(&server, &run, 3);
        run.stderr_has("admin")
            .stderr_has("bob is not in lease.admins");
        assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));
    }
    let run = run_as(
        &admin,
        10,
        &["revoke", "7", "--reason", "stuck", "--holder", "admin"],
    );
    expect(&server, &run, 0);
    let chain = server.leases("7");
    assert_eq!(chain[1]["event"], "revoke");
    assert_eq!(chain[1]["by"], "admin");
    assert_eq!(chain[1]["token"], 1);

    // Fencing: bob takes 7 (token 2) and pushes his work with `git lease push`.
    expect(
        &server,
        &run_as(&bob, 20, &["acquire", "7", "--ttl", "1h"]),
        0,
    );
    assert_eq!(server.leases("7")[2]["token"], 2);
    expect(&server, &git(&bob, &["switch", "-q", "-c", "issue/7"]), 0);
    bob.git(&["commit", "-q", "--allow-empty", "-m", "bob: work"]);
    let run = lease(&bob, 20, &["push"]);
    expect(&server, &run, 0);
    let bobs = bob.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bobs.clone()));
    // alice, whose tenure was revoked, pushes on top of it with her old token 1: refused.
    expect(&server, &git(&alice, &["fetch", "-q", "origin"]), 0);
    expect(
        &server,
        &git(&alice, &["switch", "-q", "-c", "issue/7", "origin/issue/7"]),
        0,
    );
    alice.git(&["commit", "-q", "--allow-empty", "-m", "alice: late work"]);
    let run = git(
        &alice,
        &["push", "-o", "lease-token=1", "origin", "issue/7"],
    );
    let needle = if kind.has_identity() {
        "not by alice"
    } else {
        "token 1 is stale"
    };
    if kind.sees_push_options() {
        assert_fenced(&run, "issue/7", &[needle]);
    } else {
        // The update hook (gitolite's VREF) gets no push options: without `-o` the holder
        // check refuses alice all the same.
        let run = git(&alice, &["push", "origin", "issue/7"]);
        assert_fenced(&run, "issue/7", &[needle]);
    }
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bobs.clone()));
    if kind.sees_push_options() && kind.has_identity() {
        // The token reaches the hook: bob himself with a stale token is refused.
        bob.git(&["commit", "-q", "--allow-empty", "-m", "bob: more"]);
        let run = git(&bob, &["push", "-o", "lease-token=1", "origin", "issue/7"]);
        assert_fenced(&run, "issue/7", &["token 1 is stale"]);
    }

    // `git lease push` exits 3 when the server's lease rules refuse: alice holds 9 until
    // +120 by her clock, and pushes at +60, but the server's clock has moved to +200.
    expect(
        &server,
        &run_as(&alice, 0, &["acquire", "9", "--ttl", "2m"]),
        0,
    );
    expect(&server, &git(&alice, &["switch", "-q", "-c", "issue/9"]), 0);
    server.config("lease.hookNow", &at(200));
    let run = lease(&alice, 60, &["push"]);
    expect(&server, &run, 3);
    run.stderr_has("remote: git-lease: refused refs/heads/issue/9")
        .stderr_has("nobody holds issue 9");
    assert_eq!(server.rev("refs/heads/issue/9"), None);

    // Everything the server holds passes an audit.
    let run = server.host_lease(&["-C", super::path_str(server.bare()), "verify"], &[]);
    expect(&server, &run, 0);
}

/// A repository gitolite creates on a first push (a wildcard repository) is judged too. Its
/// configuration is gitolite's alone, so the hook judges at the system clock, as do the
/// clients here.
fn wildcard(kind: Kind) {
    let Some(server) = Served::start(kind, &at(0)) else {
        return;
    };
    let alice = server.client("alice");
    let bob = server.client("bob");
    let url = server.url("alice").replace("/leases", "/team/alpha");
    alice.git(&["remote", "add", "team", &url]);
    bob.git(&["remote", "add", "team", &url]);
    let now = |client: &TestRepo, args: &[&str]| -> Run {
        client.lease().args(["--remote", "team"]).args(args).run()
    };
    let run = now(&alice, &["acquire", "1", "--ttl", "1h"]);
    expect(&server, &run, 0);
    if crate::env::reftable() {
        let wild = server.root.join("home-server/repositories/team/alpha.git");
        let run = server.host_git(&[
            "-C",
            super::path_str(&wild),
            "rev-parse",
            "--show-ref-format",
        ]);
        assert_eq!(
            run.stdout.trim(),
            "reftable",
            "the wildcard repository\n{run}"
        );
    }

    // bob claims another issue in alice's name: the hook of the new repository refuses it.
    let run = now(&bob, &["acquire", "2", "--holder", "alice"]);
    expect(&server, &run, 3);
    run.stderr_has("identity").stderr_has("but bob pushed it");
}

#[test]
fn the_story_through_git_daemon() {
    story(Kind::Daemon);
}

#[test]
fn the_story_through_sshd_with_forced_commands() {
    story(Kind::Sshd);
}

#[test]
fn the_story_through_gitolite_with_the_pre_receive_hook() {
    story(Kind::GitolitePreReceive);
}

#[test]
fn the_story_through_gitolite_with_the_vref() {
    story(Kind::GitoliteVref);
}

#[test]
fn the_story_through_nginx_and_http_backend() {
    story(Kind::Nginx);
}

#[test]
fn the_story_through_apache_and_http_backend() {
    story(Kind::Apache);
}

#[test]
fn gitolite_wildcard_repositories_get_the_hook_from_repo_specific_hooks() {
    wildcard(Kind::GitolitePreReceive);
}

#[test]
fn gitolite_wildcard_repositories_get_the_vref() {
    wildcard(Kind::GitoliteVref);
}
