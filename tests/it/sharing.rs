//! Sharing by default: a clone's claims are local unless `lease.remote` (or `--remote`) says
//! otherwise, so a local write in a repository with remotes says so, the way git's `advice.*`
//! hints do; and a clone whose local ledger diverged from the remote's is told exactly that,
//! and can adopt the remote's without losing its own.

use serde_json::Value;

use crate::env::{at_min, Run, TestRepo};
use crate::server::Server;

fn lease(repo: &TestRepo, min: i64, args: &[&str]) -> Run {
    repo.lease().now(&at_min(min)).args(args).run()
}

/// A served repository on which bob holds 8 (from T0), and carol's fresh client of it.
fn bob_holds_8_for_carol() -> (Server, TestRepo) {
    let server = Server::daemon();
    let bob = server.client("bob");
    lease(&bob, 0, &["acquire", "--remote", "origin", "8"]).ok();
    let carol = server.client("carol");
    (server, carol)
}

const HINT: &str = "hint: this claim is local to this repository";

#[test]
fn a_local_claim_in_a_clone_says_it_is_local_until_told_otherwise() {
    let (_server, carol) = bob_holds_8_for_carol();
    // carol's clone writes locally, and is told so, with the command to share.
    lease(&carol, 1, &["acquire", "8"])
        .ok()
        .stdout_has("token 1")
        .stderr_has(HINT)
        .stderr_has("git config lease.remote origin")
        .stderr_has("advice.leaseLocal");
    // Reads and --local are not told; nor is anyone once the advice is off.
    assert!(!lease(&carol, 1, &["list"]).ok().stderr.contains(HINT));
    assert!(!lease(&carol, 1, &["release", "8", "--local"])
        .ok()
        .stderr
        .contains(HINT));
    carol.git(&["config", "advice.leaseLocal", "false"]);
    assert!(!lease(&carol, 1, &["acquire", "9"])
        .ok()
        .stderr
        .contains(HINT));
    // With lease.remote set, claims go to the remote: bob's lease is seen.
    carol.git(&["config", "lease.remote", "origin"]);
    lease(&carol, 2, &["acquire", "8"])
        .code(3)
        .stdout_has("bob");
    // A repository without remotes (worktrees sharing one repository) is never told.
    let alone = TestRepo::new();
    assert!(!lease(&alone, 0, &["acquire", "1", "--holder", "a"])
        .ok()
        .stderr
        .contains(HINT));
}

#[test]
fn a_diverged_local_ledger_is_named_as_such_and_can_adopt_the_remotes() {
    let (server, carol) = bob_holds_8_for_carol();
    carol.git(&["config", "advice.leaseLocal", "false"]);
    lease(&carol, 1, &["acquire", "8"]).ok();
    let hers = carol.tip("8").expect("carol's local ledger");
    let run = lease(&carol, 2, &["sync"]);
    run.code(1)
        .stdout_has("this clone's ledger has diverged from origin's")
        .stdout_has("git lease sync --adopt 8");
    assert!(!run.stdout.contains("remote rewrote"), "{run}");
    assert_eq!(
        carol.tip("8").as_deref(),
        Some(hers.as_str()),
        "nothing moved"
    );
    // Adopting takes the remote's ledger and keeps hers under another ref.
    let run = lease(&carol, 3, &["--json", "sync", "--adopt", "8"]);
    run.ok();
    let v: Value = run.json();
    assert_eq!(v["adopted"][0]["kept"], "refs/lease-diverged/8", "{v}");
    assert_eq!(carol.tip("8"), server.tip("8"));
    assert_eq!(
        carol.git(&["rev-parse", "refs/lease-diverged/8"]),
        hers,
        "the local ledger is kept"
    );
    lease(&carol, 4, &["verify"]).ok();
    // From now on the clone follows the remote.
    lease(&carol, 4, &["sync"]).ok().stdout_has("0 refused");
}

#[test]
fn a_remote_claim_over_a_diverged_local_ledger_keeps_the_local_one() {
    remote_claim_keeps_the_local_ledger(false);
}

#[test]
fn a_remote_claim_keeps_the_local_ledger_even_when_git_push_moves_it() {
    // With a fetch refspec for lease refs configured, git's push itself moves the local
    // refs/leases/8 to what it pushed.
    remote_claim_keeps_the_local_ledger(true);
}

fn remote_claim_keeps_the_local_ledger(refspec: bool) {
    let (server, carol) = bob_holds_8_for_carol();
    carol.git(&["config", "advice.leaseLocal", "false"]);
    if refspec {
        carol.git(&[
            "config",
            "--add",
            "remote.origin.fetch",
            "+refs/leases/*:refs/leases/*",
        ]);
    }
    // carol's clone has a tenure of its own that the remote never had ...
    lease(&carol, 1, &["acquire", "8"]).ok();
    let hers = carol.tip("8").expect("carol's local ledger");
    let bob = server.client("bob");
    lease(&bob, 2, &["release", "--remote", "origin", "8"]).ok();
    // ... and claims through the remote: the local ledger follows the remote's, and hers is
    // kept, and said so.
    lease(&carol, 3, &["acquire", "--remote", "origin", "8"])
        .ok()
        .stdout_has("token 2")
        .stderr_has("kept as refs/lease-diverged/8");
    assert_eq!(carol.tip("8"), server.tip("8"));
    assert_eq!(carol.git(&["rev-parse", "refs/lease-diverged/8"]), hers);
    // A claim on top of what it already had keeps nothing more.
    let run = lease(&carol, 4, &["renew", "--remote", "origin", "8"]);
    run.ok();
    assert!(!run.stderr.contains("kept as"), "{run}");
}

#[test]
fn adopting_never_goes_back_over_a_token_seen_here() {
    let (server, carol) = bob_holds_8_for_carol();
    carol.git(&["config", "advice.leaseLocal", "false"]);
    // Three local tenures: token 3 was issued here; the remote is at token 1.
    for (min, args) in [
        (1, &["acquire", "8"][..]),
        (2, &["release", "8"]),
        (3, &["acquire", "8"]),
        (4, &["release", "8"]),
        (5, &["acquire", "8"]),
    ] {
        lease(&carol, min, args).ok();
    }
    let hers = carol.tip("8").expect("carol's local ledger");
    lease(&carol, 6, &["sync", "--adopt", "8"])
        .code(1)
        .stdout_has("tokens never go back");
    assert_eq!(
        carol.tip("8").as_deref(),
        Some(hers.as_str()),
        "nothing moved"
    );
    assert!(server.tip("8").is_some());
}
