//! A hookless remote (any git host without the hook) whose ledgers someone rewinds, rewrites or
//! deletes with a plain force-push: a clone that verified the later history refuses to decide
//! anything on the rewound one, so it never issues a token again that it has seen issued.
//! Each test runs its own `git daemon` without the hook.

use serde_json::json;

use crate::env::{at_min, Run, TestRepo};
use crate::forge;
use crate::server::Server;

fn lease(repo: &TestRepo, min: i64, args: &[&str]) -> Run {
    repo.lease().now(&at_min(min)).args(args).run()
}

/// A hookless daemon where alice took and released issue 9 and bob then took it (token 2),
/// and alice took issue 10; alice's clone has seen all of it. Returns the server, alice's
/// clone, and the server's ledger of 9, oldest first.
fn seen_history() -> (Server, TestRepo, Vec<String>) {
    let server = Server::daemon();
    let alice = server.client("alice");
    let bob = server.client("bob");
    lease(&alice, 0, &["acquire", "--remote", "origin", "9"]).ok();
    lease(&alice, 1, &["release", "--remote", "origin", "9"]).ok();
    lease(&bob, 2, &["acquire", "--remote", "origin", "9"]).ok();
    lease(&alice, 3, &["acquire", "--remote", "origin", "10"]).ok();
    // alice reads the remote: she has now verified token 2 of issue 9.
    lease(&alice, 4, &["list", "--remote", "origin"])
        .ok()
        .stdout_has("bob");
    let chain = server.chain("9").into_iter().map(|(c, _)| c).collect();
    (server, alice, chain)
}

/// Asserts that `run` failed with exit 1 naming how issue 9's remote ledger diverged.
#[track_caller]
fn assert_diverged(run: &Run, how: &str) {
    run.code(1)
        .stderr_has(&format!("remote ledger {how}: refs/leases/9"));
}

#[test]
fn a_rewound_remote_ledger_is_refused_and_no_token_is_issued_twice() {
    let (server, alice, chain) = seen_history();
    // Someone force-pushes issue 9 back to alice's first tenure, then releases it, so the
    // rewound remote says: free, last token 1.
    server.git(&["update-ref", "refs/leases/9", &chain[1]]);
    let carol = server.client("carol");
    let before = server.refs();
    for args in [
        &["acquire", "--remote", "origin", "9", "--holder", "carol"][..],
        &["renew", "--remote", "origin", "9"],
        &["release", "--remote", "origin", "9"],
        &["show", "--remote", "origin", "9"],
        &["log", "--remote", "origin", "9"],
        &["check", "--remote", "origin", "9", "--token", "1"],
    ] {
        assert_diverged(&lease(&alice, 5, args), "rewound");
    }
    assert_eq!(server.refs(), before, "nothing was pushed");
    // The other ledgers still answer; the rewound one is reported, not listed.
    let run = lease(&alice, 5, &["list", "--remote", "origin", "--all"]);
    assert_diverged(&run, "rewound");
    run.stdout_has("10");
    assert!(!run.stdout.contains("9 "), "{run}");
    // A clone that never saw the later history cannot know: to it the remote is the truth.
    lease(&carol, 5, &["acquire", "--remote", "origin", "9"])
        .ok()
        .stdout_has("token 2");
    // alice's clone still refuses: its memory is what it verified, not what it was told.
    assert_diverged(
        &lease(&alice, 6, &["acquire", "--remote", "origin", "9"]),
        "rewritten",
    );
}

#[test]
fn a_rewritten_or_rule_breaking_remote_ledger_is_refused() {
    let (server, alice, chain) = seen_history();
    // A forward commit that resets the token after bob's lease expired: the tip descends from
    // what alice saw, but the new step breaks the token rule.
    let reset = forge::lease_commit_saying(
        &alice,
        &forge::acquired("9", "mallory", 1, 7300, Some(3600)),
        &[&chain[2]],
        "reset",
    );
    alice.git(&["push", "-q", "origin", &format!("{reset}:refs/heads/tmp")]);
    server.git(&["update-ref", "refs/leases/9", &reset]);
    // Read after the reset's own time: a step dated ahead of the reader is refused before
    // any other rule is asked.
    let run = lease(&alice, 122, &["acquire", "--remote", "origin", "9"]);
    assert_diverged(&run, "rewritten");
    run.stderr_has("token-step");
    assert_eq!(server.tip("9").as_deref(), Some(reset.as_str()));
    // A history that leaves what alice saw altogether.
    let root = forge::lease_commit_saying(
        &alice,
        &forge::acquired("9", "mallory", 1, 300, Some(3600)),
        &[],
        "fork",
    );
    alice.git(&["push", "-q", "origin", &format!("{root}:refs/heads/tmp2")]);
    server.git(&["update-ref", "refs/leases/9", &root]);
    assert_diverged(
        &lease(&alice, 6, &["show", "--remote", "origin", "9"]),
        "rewritten",
    );
    let run = lease(&alice, 6, &["verify", "--remote", "origin"]);
    run.code(1).stdout_has("fast-forward");
}

#[test]
fn a_deleted_remote_ledger_is_rewound_and_its_local_memory_kept() {
    let (server, alice, chain) = seen_history();
    server.git(&["update-ref", "-d", "refs/leases/9"]);
    assert_diverged(
        &lease(&alice, 5, &["acquire", "--remote", "origin", "9"]),
        "rewound",
    );
    assert_eq!(server.tip("9"), None, "nothing was pushed");
    let run = lease(&alice, 5, &["--json", "list", "--remote", "origin"]);
    assert_diverged(&run, "rewound");
    let listed = run.json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["issue"], json!("10"));
    // The verified tip stays in the remote-tracking ref.
    assert_eq!(
        alice.git(&["rev-parse", "refs/lease-remotes/origin/9"]),
        chain[2]
    );
}

#[test]
fn a_legitimate_remote_history_moves_the_verified_copy_forward() {
    let (server, alice, _) = seen_history();
    let bob = server.client("bob");
    lease(&bob, 5, &["release", "--remote", "origin", "9"]).ok();
    lease(&alice, 6, &["acquire", "--remote", "origin", "9"])
        .ok()
        .stdout_has("token 3");
    assert_eq!(
        alice.git(&["rev-parse", "refs/lease-remotes/origin/9"]),
        server.tip("9").unwrap_or_default()
    );
}

#[test]
fn a_clone_whose_tracking_refs_were_pruned_still_refuses_a_rewound_remote() {
    let (server, alice, chain) = seen_history();
    // The user mirrors every ref of origin with pruning: the remote has no
    // refs/lease-remotes/*, so git deletes this clone's.
    alice.git(&["fetch", "-q", "--prune", "origin", "+refs/*:refs/*"]);
    assert_eq!(
        alice.git(&["for-each-ref", "refs/lease-remotes/"]),
        "",
        "the prune deleted the tracking refs"
    );
    server.git(&["update-ref", "refs/leases/9", &chain[1]]);
    // What was verified is remembered where no refspec reaches.
    assert_diverged(
        &lease(
            &alice,
            5,
            &["acquire", "--remote", "origin", "9", "--holder", "carol"],
        ),
        "rewound",
    );
    assert_eq!(
        server.tip("9").as_deref(),
        Some(chain[1].as_str()),
        "nothing was pushed"
    );
}
