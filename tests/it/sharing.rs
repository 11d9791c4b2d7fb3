//! Sharing by default: where nothing says where claims go, a clone claims on the remote the
//! team uses when it holds lease refs, and is refused a claim (exit 2, with the setting that
//! decides) when it holds none, so no claim is made alone while its maker could believe it
//! shared; its reads say when they come from its own refs alone. A repository without remotes
//! needs no setting. A clone whose local ledger diverged from the remote's is told exactly
//! that, and can adopt the remote's without losing its own.

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

/// What a read from the local refs alone says beside its answer.
const ALONE: &str = "answered from this repository's own lease refs alone";

#[test]
fn a_fresh_clone_sees_the_servers_claims_and_is_refused_a_held_issue() {
    let (server, carol) = bob_holds_8_for_carol();
    // Nothing configured: the clone's reads are the server's.
    let listed = lease(&carol, 1, &["list"]);
    listed.ok().stdout_has("bob");
    assert!(!listed.stdout.contains("No live leases"), "{listed}");
    assert!(!listed.stderr.contains(ALONE), "{listed}");
    lease(&carol, 1, &["show", "8"]).ok().stdout_has("bob");
    lease(
        &carol,
        1,
        &["check", "8", "--token", "1", "--holder", "bob"],
    )
    .ok();
    // Its claim is refused as held on the server, and nothing is written anywhere.
    let server_tip = server.tip("8");
    lease(&carol, 1, &["acquire", "8"])
        .code(3)
        .stdout_has("held by bob");
    assert_eq!(server.tip("8"), server_tip);
    assert_eq!(carol.tip("8"), None, "nothing claimed here");
    // A free issue is claimed on the server, where bob sees it.
    lease(&carol, 2, &["acquire", "9"])
        .ok()
        .stdout_has("token 1");
    assert!(server.tip("9").is_some(), "claimed on the server");
    let bob = server.client("bob");
    lease(&bob, 3, &["acquire", "9"])
        .code(3)
        .stdout_has("carol");
}

#[test]
fn local_claims_in_a_clone_are_asked_for_with_local_or_lease_remote_dot() {
    let (server, carol) = bob_holds_8_for_carol();
    lease(&carol, 1, &["acquire", "8", "--local"])
        .ok()
        .stdout_has("token 1");
    assert!(carol.tip("8").is_some(), "claimed here");
    assert_eq!(
        server.leases("8").len(),
        1,
        "the server's ledger did not move"
    );
    lease(&carol, 1, &["release", "8", "--local"]).ok();
    // `.` names this repository, as in branch.<name>.remote: the clone's own refs.
    carol.git(&["config", "lease.remote", "."]);
    lease(&carol, 2, &["acquire", "8"])
        .ok()
        .stdout_has("token 2");
    let listed = lease(&carol, 2, &["list"]);
    listed.ok().stdout_has("carol");
    assert!(!listed.stdout.contains("bob"), "{listed}");
    assert_eq!(
        server.leases("8").len(),
        1,
        "the server's ledger did not move"
    );
}

#[test]
fn a_clone_of_a_server_without_claims_is_refused_a_claim_with_the_setting_that_decides() {
    let server = Server::daemon();
    let carol = server.client("carol");
    for args in [
        &["acquire", "3"][..],
        &["release", "3"],
        &["acquire", "3", "4"],
    ] {
        lease(&carol, 0, args)
            .code(2)
            .stderr_has("not claiming in this repository alone")
            .stderr_has("origin holds no lease refs yet")
            .stderr_has("git config lease.remote origin")
            .stderr_has("git config lease.remote .");
    }
    let run = lease(&carol, 0, &["--json", "acquire", "3"]);
    run.code(2);
    let error: Value = serde_json::from_str(&run.stderr).expect("one JSON object");
    assert_eq!(error["error"]["kind"], "usage", "{error}");
    assert_eq!(carol.lease_refs(), "", "nothing written here");
    assert_eq!(server.lease_refs(), "", "nothing pushed");
    // Its reads answer from its own refs, and say so.
    lease(&carol, 0, &["list"]).ok().stderr_has(ALONE);
    lease(&carol, 0, &["show", "3"]).stderr_has(ALONE);
    lease(&carol, 0, &["check", "3", "--token", "1"]).stderr_has(ALONE);
    // Deciding once shares every claim from then on.
    carol.git(&["config", "lease.remote", "origin"]);
    lease(&carol, 1, &["acquire", "3"]).ok();
    assert!(server.tip("3").is_some(), "claimed on the server");
    // Now the server holds lease refs, a fresh clone shares with it unasked.
    let dave = server.client("dave");
    lease(&dave, 2, &["acquire", "3"])
        .code(3)
        .stdout_has("carol");
}

#[test]
fn a_repository_without_remotes_needs_no_setting() {
    let alone = TestRepo::new();
    let run = lease(&alone, 0, &["acquire", "1", "--holder", "a"]);
    run.ok().stdout_has("token 1");
    assert_eq!(run.stderr, "", "{run}");
    let run = lease(&alone, 0, &["list"]);
    run.ok().stdout_has("1");
    assert_eq!(run.stderr, "", "{run}");
}

#[test]
fn the_current_branchs_upstream_is_the_remote_the_team_uses() {
    let (server, carol) = bob_holds_8_for_carol();
    // origin (an empty repository) is not the one the branch follows.
    carol.git(&["remote", "rename", "origin", "team"]);
    let _empty = carol.add_bare_origin(&[]);
    carol.git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let branch = carol.git(&["symbolic-ref", "--short", "HEAD"]);
    carol.git(&[
        "config",
        &format!("branch.{}.remote", branch.trim()),
        "team",
    ]);
    lease(&carol, 1, &["acquire", "8"])
        .code(3)
        .stdout_has("held by bob");
    assert!(server.tip("8").is_some());
    // Without an upstream, origin is the one: it holds no claims, so a claim is refused.
    carol.git(&[
        "config",
        "--unset",
        &format!("branch.{}.remote", branch.trim()),
    ]);
    lease(&carol, 1, &["acquire", "8"])
        .code(2)
        .stderr_has("git config lease.remote origin");
}

#[test]
fn a_diverged_local_ledger_is_named_as_such_and_can_adopt_the_remotes() {
    let (server, carol) = bob_holds_8_for_carol();
    lease(&carol, 1, &["acquire", "8", "--local"]).ok();
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
    if refspec {
        carol.git(&[
            "config",
            "--add",
            "remote.origin.fetch",
            "+refs/leases/*:refs/leases/*",
        ]);
    }
    // carol's clone has a tenure of its own that the remote never had ...
    lease(&carol, 1, &["acquire", "8", "--local"]).ok();
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
    carol.git(&["config", "lease.remote", "."]);
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
