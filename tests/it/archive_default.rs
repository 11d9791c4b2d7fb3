//! Trust in a remote's archive by default (docs/SECURITY.md, "Trust on first sight"): with
//! `lease.trustArchive` unset, a new clone claims from the newest fold alone when doctor's
//! probe heard the server's hook say it judges every fold, and verifies the whole archive
//! when nothing vouches for it.

use crate::archive::{on_server, seven_free_and_eight_held, seven_free_and_eight_held_on};
use crate::env::{at, TestRepo};
use crate::server::{lease, Server};

/// Where `refname` points in `client`, if it exists.
fn rev(client: &TestRepo, refname: &str) -> Option<String> {
    let run = client.git_run(&["rev-parse", "--verify", "--quiet", refname]);
    (run.code == 0).then(|| run.stdout.trim().to_owned())
}

/// The server folds, at `secs`, every ledger free for a minute.
fn fold_at(server: &Server, secs: i64) {
    server.config("lease.hookNow", &at(secs));
    on_server(server, &at(secs), &["archive", "--quiet-for", "1m"]);
}

/// What `client`'s probe records say of its servers, all files together.
fn probe_records(client: &TestRepo) -> String {
    let dir = crate::doctor_checks::verdict_dir(client);
    std::fs::read_dir(dir).map_or(String::new(), |entries| {
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .collect()
    })
}

/// Claims issue 10 as a new clone `bob` of `server` at 210 s, after a fold at 200 s, and
/// returns bob.
fn first_claim_after_a_fold(server: &Server, bob: TestRepo) -> TestRepo {
    fold_at(server, 200);
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    bob
}

#[test]
fn a_hooked_server_vouches_for_its_archive_and_a_new_clone_takes_the_newest_fold() {
    let (server, _alice) = seven_free_and_eight_held();
    let archived_tip = server.tip("7").expect("7 has a ledger");
    let bob = first_claim_after_a_fold(&server, server.client("bob"));
    assert!(
        probe_records(&bob).contains("archive: every fold is judged by the server's hook"),
        "{}",
        probe_records(&bob)
    );
    assert!(
        rev(&bob, "refs/lease-remote-archive/origin").is_none(),
        "the archive was not fetched whole"
    );
    assert!(
        bob.git_run(&["cat-file", "-e", &archived_tip]).code != 0,
        "no archived ledger was fetched for a claim of a new issue"
    );
    // An archived issue is revived from its verified ledger, trust or not: the hook refuses
    // the blind claim of it, and the claim reads the archive and goes on from it.
    lease(&bob, 211, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    assert_eq!(
        rev(&bob, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive")
    );
}

#[test]
fn the_first_write_through_a_hooked_server_asks_its_hook_in_one_push_that_writes_nothing() {
    // ...then claims blind: one push, no fetch.
    let (server, _alice) = seven_free_and_eight_held();
    fold_at(&server, 200);
    let bob = server.client("bob");
    let trace = bob.path().join("trace.txt");
    bob.lease()
        .now(&at(210))
        .env("GIT_TRACE", &trace)
        .args(["acquire", "10", "--remote", "origin"])
        .run()
        .ok()
        .stdout_has("(token 1)");
    let traced = std::fs::read_to_string(&trace).expect("git's trace");
    let pushes: Vec<&str> = traced
        .lines()
        .filter(|l| l.contains("trace: built-in: git push"))
        .collect();
    assert_eq!(
        pushes.len(),
        2,
        "the probe's one push, then the claim's: {pushes:#?}"
    );
    assert!(pushes[0].contains("lease-probe=report"), "{}", pushes[0]);
    // The hook judges every claim against its archive: the claim went blind, unfetched.
    assert!(
        !traced.contains("trace: built-in: git fetch"),
        "no fetch before a blind claim:\n{traced}"
    );
    assert!(probe_records(&bob).contains("its git-lease"));
    assert!(server
        .git(&["for-each-ref", "refs/lease-probe/"])
        .is_empty());
}

/// The `git push` and `git fetch` commands of one run of `args` by `client` at `secs`, as
/// GIT_TRACE shows them.
fn traced_transfers(client: &TestRepo, secs: i64, args: &[&str], token: &str) -> Vec<String> {
    let trace = client.path().join("trace.txt");
    let _ = std::fs::remove_file(&trace);
    client
        .lease()
        .now(&at(secs))
        .env("GIT_TRACE", &trace)
        .args(args)
        .run()
        .ok()
        .stdout_has(token);
    let traced = std::fs::read_to_string(&trace).expect("git's trace");
    traced
        .lines()
        .filter(|l| l.contains("built-in: git push") || l.contains("built-in: git fetch"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_new_clone_claims_any_of_never_leased_candidates_without_reading_a_fold() {
    let (server, _alice) = seven_free_and_eight_held();
    fold_at(&server, 200);
    let bob = server.client("bob");
    let args = ["acquire", "--any", "20", "21", "22", "--remote", "origin"];
    let transfers = traced_transfers(&bob, 210, &args, "(token 1)");
    // The probe's push, then the claim's, blind: no fetch at all, so no fold.
    assert_eq!(transfers.len(), 2, "{transfers:#?}");
    assert!(
        transfers[0].contains("lease-probe=report"),
        "{transfers:#?}"
    );
    assert!(transfers[1].contains("git push"), "{transfers:#?}");
    assert!(!bob.path().join(".git/lease-archive-index").exists());
}

#[test]
fn a_new_clones_blind_claim_of_a_held_candidate_is_lost_and_it_goes_on_from_a_fetch() {
    let (server, _alice) = seven_free_and_eight_held();
    let before = server.tip("8");
    let bob = server.client("bob");
    let trace = bob.path().join("trace.txt");
    let run = bob
        .lease()
        .now(&at(210))
        .env("GIT_TRACE", &trace)
        .args(["acquire", "--any", "8", "--remote", "origin"])
        .run();
    run.code(3).stdout_has("the one candidate is not free");
    assert_eq!(server.tip("8"), before, "8 is still alice's");
    let traced = std::fs::read_to_string(&trace).expect("git's trace");
    assert!(
        traced.contains("--force-with-lease=refs/leases/8: "),
        "a blind push, expecting no ledger:\n{traced}"
    );
    assert!(
        traced.contains("built-in: git fetch"),
        "then a fetch:\n{traced}"
    );
}

#[test]
fn an_archived_candidate_claimed_as_new_is_refused_by_the_hook_and_revived_from_its_ledger() {
    let (server, _alice) = seven_free_and_eight_held();
    fold_at(&server, 200);
    assert_eq!(server.tip("7"), None, "7 is archived");
    let bob = server.client("bob");
    // 8 is held: 7 alone is free, and only its archived ledger says its token is 1.
    lease(
        &bob,
        210,
        &["acquire", "--any", "8", "7", "--remote", "origin"],
    )
    .ok()
    .stdout_has("7")
    .stdout_has("(token 2)");
    on_server(&server, &at(220), &["verify"]);
}

#[test]
fn a_hookless_server_vouches_for_nothing_and_a_new_clone_verifies_its_archive() {
    let (server, _alice) = seven_free_and_eight_held_on(Server::without_hook());
    let bob = first_claim_after_a_fold(&server, server.client("bob"));
    assert!(!probe_records(&bob).contains("archive:"));
    assert_eq!(
        rev(&bob, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive"),
        "the whole archive was fetched and verified"
    );
}

#[test]
fn a_hooked_repository_on_this_machine_is_probed_once_for_its_word() {
    let (server, _alice) = seven_free_and_eight_held();
    let path = server.bare().to_str().expect("a UTF-8 path");
    let bob = TestRepo::client_of(path, "bob");
    let bob = first_claim_after_a_fold(&server, bob);
    assert!(probe_records(&bob).contains("archive: every fold is judged"));
    assert!(rev(&bob, "refs/lease-remote-archive/origin").is_none());
    assert!(
        server
            .git(&["for-each-ref", "refs/lease-probe/"])
            .is_empty(),
        "the probe's scratch ref is gone"
    );
}

#[test]
fn an_explicit_setting_wins_over_the_hooks_word() {
    let (server, _alice) = seven_free_and_eight_held();
    let carol = server.client("carol");
    carol.git(&["config", "lease.trustArchive", "false"]);
    let carol = first_claim_after_a_fold(&server, carol);
    assert_eq!(
        rev(&carol, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive")
    );
}

#[test]
fn doctor_takes_back_the_word_of_a_hook_removed_since() {
    let (server, _alice) = seven_free_and_eight_held();
    let bob = first_claim_after_a_fold(&server, server.client("bob"));
    assert!(probe_records(&bob).contains("archive: every fold is judged"));
    for hook in ["pre-receive", "reference-transaction"] {
        let _ = std::fs::remove_file(server.bare().join("hooks").join(hook));
    }
    lease(&bob, 220, &["doctor", "--remote", "origin"]);
    assert!(
        !probe_records(&bob).contains("archive:"),
        "{}",
        probe_records(&bob)
    );
    // Its next first claim of an issue reads the archive, which it verifies whole.
    lease(&bob, 221, &["acquire", "11", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert_eq!(
        rev(&bob, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive")
    );
}
