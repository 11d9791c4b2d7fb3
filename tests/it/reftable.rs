//! Reftable repositories (`extensions.refStorage=reftable`, git 3.0's default), made so
//! explicitly whatever format the rest of the suite runs with: a repository migrated with
//! `git refs migrate` keeps every ledger, a held reftable lock is reported like a held ref
//! lock, and a reftable server with the hook serves clones and mirrors of the files format.
//!
//! The whole suite also runs with `GIT_DEFAULT_REF_FORMAT=reftable` (`.ci/run`, README's
//! Tests): every repository of every test is then reftable (client, server and mirror), the
//! 8-process race of [`crate::race`] and the racing clones of [`crate::remote`] included.

use serde_json::{json, Value};

use crate::env::{at_min, TestRepo, T0};
use crate::server::Server;

/// Everything a repository's ledgers say, as git-lease and plain git see them: every ref,
/// `list --all`, each ledger's `log`, and `verify`.
fn everything(repo: &TestRepo, min: i64) -> (String, Value, Vec<Value>, Value) {
    let refs = repo.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let list = repo.json_at(&at_min(min), 0, &["list", "--all"]);
    let logs = list
        .as_array()
        .expect("list is an array")
        .iter()
        .map(|e| {
            let issue = e["issue"].as_str().expect("an issue");
            repo.json_at(&at_min(min), 0, &["log", issue])
        })
        .collect();
    let verify = repo.json_at(&at_min(min), 0, &["verify"]);
    assert_eq!(verify["clean"], true, "{verify}");
    (refs, list, logs, verify)
}

#[test]
fn a_repository_migrated_to_reftable_keeps_every_ledger_and_passes_verify() {
    let repo = TestRepo::init(&["--ref-format=files"]);
    let _origin = repo.add_bare_origin(&["--ref-format=files"]);
    repo.git(&["config", "lease.remote", "."]);
    // Every kind of ledger: a takeover, an all-or-none claim, a namespace, a
    // session, a revoke, one shared through a remote (remote-tracking refs); some refs
    // packed, some loose.
    repo.json_steps(&[
        (0, 0, "acquire 1 --holder alice --ttl 10m"),
        (1, 0, "release 1 --holder alice"),
        (2, 0, "acquire 1 --holder bob --ttl 10m"),
        (2, 0, "acquire 2 gh/3 gh/4 --holder carol"),
    ]);
    repo.git(&["pack-refs", "--all"]);
    repo.json_steps(&[
        (3, 0, "acquire s --holder dave --session"),
        (4, 0, "revoke gh/4 --holder root --reason stuck"),
        (5, 0, "acquire r --remote origin --holder erin"),
    ]);
    let before = everything(&repo, 6);
    assert!(
        before.0.contains("refs/lease-remotes/origin/r"),
        "the remote-tracking ref is there: {}",
        before.0
    );

    let run = repo.git_run(&["refs", "migrate", "--ref-format=reftable"]);
    run.ok();
    assert_eq!(repo.git(&["rev-parse", "--show-ref-format"]), "reftable");
    assert!(!repo.git_dir().join("packed-refs").exists());
    assert_eq!(
        everything(&repo, 6),
        before,
        "the same ledgers, refs and verdict"
    );
    repo.assert_fsck();

    // The ledgers go on where they were: tokens count on, live leases are still held.
    let v = repo.json_at(&at_min(20), 0, &["acquire", "1", "--holder", "frank"]);
    assert_eq!(v["token"], 3, "{v}");
    let v = repo.json_at(&at_min(20), 3, &["acquire", "2", "--holder", "frank"]);
    assert_eq!(v["holder"], "carol", "{v}");
    let v = repo.json_at(
        &at_min(21),
        0,
        &["renew", "r", "--remote", "origin", "--holder", "erin"],
    );
    assert_eq!(v["token"], 1, "{v}");
    let after = everything(&repo, 22);

    // And back: nothing is lost either way.
    repo.git_run(&["refs", "migrate", "--ref-format=files"])
        .ok();
    assert_eq!(repo.git(&["rev-parse", "--show-ref-format"]), "files");
    assert_eq!(everything(&repo, 22), after);
    repo.assert_fsck();
}

#[test]
fn a_held_reftable_lock_is_reported_naming_it_and_nothing_moves() {
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    repo.git(&["config", "lease.lockTimeout", "300ms"]);
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "alice"]);
    let tip = repo.tip("42");
    // git's one lock of every ref update of a reftable repository, held by someone else.
    let lock = repo.git_dir().join("reftable/tables.list.lock");
    std::fs::write(&lock, b"").expect("create the lock");
    for args in [
        vec!["release", "42", "--holder", "alice"],
        vec!["acquire", "43", "--holder", "alice"],
        vec!["acquire", "44", "45", "--holder", "alice"],
    ] {
        repo.run_at(&at_min(1), &args)
            .code(1)
            .stderr_has(lock.to_str().expect("UTF-8 path"))
            .stderr_has("lock");
    }
    assert_eq!(repo.tip("42"), tip);
    assert_eq!(repo.tip("43"), None);
    assert!(lock.exists(), "someone else's lock is never removed");
    // Reads and refusals need no lock.
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "alice");
    repo.json_at(&at_min(1), 3, &["acquire", "42", "--holder", "bob"]);
    std::fs::remove_file(&lock).expect("release the lock");
    repo.json_at(&at_min(2), 0, &["release", "42", "--holder", "alice"]);
    let v = repo.json_at(&at_min(2), 0, &["acquire", "43", "--holder", "alice"]);
    assert_eq!(v["token"], 1);
}

#[test]
fn a_reftable_server_with_the_hook_serves_files_clones_and_mirrors() {
    let mut server = Server::without_hook();
    if server.git(&["rev-parse", "--show-ref-format"]) != "reftable" {
        server.git(&["refs", "migrate", "--ref-format=reftable"]);
    }
    assert_eq!(server.git(&["rev-parse", "--show-ref-format"]), "reftable");
    let bare = server.bare().to_str().expect("UTF-8").to_owned();
    server
        .lease(&["install-hook", "--repo", &bare])
        .ok()
        .stdout_has("installed");
    server.start_at(&at_min(0));

    let client = |holder: &str| {
        let repo = TestRepo::client_made_with(&["--ref-format=files"], &server.url(), holder);
        repo.git(&["config", "lease.remote", "origin"]);
        repo
    };
    let alice = client("alice");
    let bob = client("bob");
    let v = alice.json_at(&at_min(0), 0, &["acquire", "42", "--ttl", "1h"]);
    assert_eq!(v["token"], 1, "{v}");
    assert_eq!(server.tip("42").as_deref(), v["commit"].as_str());
    let v = bob.json_at(&at_min(1), 3, &["acquire", "42"]);
    assert_eq!(v["holder"], "alice", "{v}");

    // A ledger rewritten elsewhere (another token 1 for issue 42) and forced in by hand is
    // refused by the hook running on the reftable server.
    let mallory = client("mallory");
    mallory.json_at(&at_min(1), 0, &["acquire", "42", "--local"]);
    server.assert_refuses_a_forced_ledger(&mallory, "42");

    alice.json_at(&at_min(2), 0, &["release", "42"]);
    let v = bob.json_at(&at_min(3), 0, &["acquire", "42", "--ttl", "1h"]);
    assert_eq!(v["token"], 2, "{v}");

    let mirror = TestRepo::mirror_made_with(&["--ref-format=files"], &server.url());
    let v = mirror.json_at(&at_min(4), 0, &["sync"]);
    assert_eq!(v["new"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(mirror.tip("42"), server.tip("42"));
    let v = mirror.json_at(&at_min(4), 0, &["verify"]);
    assert_eq!(v["clean"], json!(true), "{v}");
    let v = server.lease(&["--json", "verify"]);
    v.ok();
    assert_eq!(v.json()["clean"], json!(true), "{v}");
}
