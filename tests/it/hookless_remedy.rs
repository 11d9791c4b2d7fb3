//! What a server without git-lease's hook can refuse of a forced rewind or a deletion of a
//! ledger (docs/SECURITY.md, "Rewinds and deletions on a server without the hook"): git's
//! `receive.denyNonFastForwards` and `receive.denyDeletes` guard `refs/heads/*` only, so both
//! land on `refs/leases/*`; `receive.hideRefs` refuses every update, honest claims included;
//! the short `pre-receive` hook SECURITY.md gives refuses both and lets every claim through.
//! Each test runs its own `git daemon`.

use crate::env::TestRepo;
use crate::server::{git, lease, Server};

/// The `pre-receive` hook of docs/SECURITY.md, read from its one `sh` block.
fn documented_hook() -> String {
    let doc = include_str!("../../docs/SECURITY.md");
    let start = doc
        .find("```sh\n#!/bin/sh\n# pre-receive")
        .expect("docs/SECURITY.md gives the pre-receive hook")
        + "```sh\n".len();
    let end = start + doc[start..].find("```").expect("the block ends");
    doc[start..end].to_owned()
}

/// Alice's ledger of 42 on `server`: claimed, released and claimed again (token 2), three
/// commits; returns her clone and the ledger's first commit. A branch `main` of two commits
/// is pushed too.
fn ledger_and_branch(server: &Server) -> (TestRepo, String) {
    let alice = server.client("alice");
    lease(&alice, 0, &["acquire", "42", "--remote", "origin"]).ok();
    lease(&alice, 1, &["release", "42", "--remote", "origin"]).ok();
    lease(&alice, 2, &["acquire", "42", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    alice.git(&["commit", "-q", "--allow-empty", "-m", "one"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "two"]);
    git(&alice, &["push", "-q", "origin", "HEAD:refs/heads/main"]).ok();
    let first = server.chain("42")[0].0.clone();
    (alice, first)
}

/// A forced rewind and a deletion, each of a ledger and of a branch: whether each landed.
fn rewinds_and_deletions(server: &Server, alice: &TestRepo, first: &str) -> [bool; 4] {
    let moved = |refname: &str, before: Option<String>| server.rev(refname) != before;
    let push = |refspec: &str| git(alice, &["push", "--force", "origin", refspec]);
    let mut landed = [false; 4];
    let ledger = server.rev("refs/leases/42");
    landed[0] =
        push(&format!("{first}:refs/leases/42")).code == 0 && moved("refs/leases/42", ledger);
    let branch = server.rev("refs/heads/main");
    landed[1] = push("HEAD~1:refs/heads/main").code == 0 && moved("refs/heads/main", branch);
    let ledger = server.rev("refs/leases/42");
    landed[2] = push(":refs/leases/42").code == 0 && moved("refs/leases/42", ledger);
    let branch = server.rev("refs/heads/main");
    landed[3] = push(":refs/heads/main").code == 0 && moved("refs/heads/main", branch);
    landed
}

/// With `receive.denyNonFastForwards` and `receive.denyDeletes`, the branch is kept but the
/// ledger is rewound and then deleted, and a fresh clone is issued token 1 again.
#[test]
fn deny_non_fast_forwards_and_deny_deletes_guard_branches_not_ledgers() {
    let mut server = Server::without_hook();
    server.config("receive.denyNonFastForwards", "true");
    server.config("receive.denyDeletes", "true");
    server.start();
    let (alice, first) = ledger_and_branch(&server);

    let landed = rewinds_and_deletions(&server, &alice, &first);
    assert_eq!(
        landed,
        [true, false, true, false],
        "[ledger rewound, branch rewound, ledger deleted, branch deleted]"
    );
    assert_eq!(server.tip("42"), None);
    let bob = server.client("bob");
    lease(&bob, 10, &["acquire", "42", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
}

/// `receive.hideRefs` is the one setting git applies to any namespace: it refuses the rewind
/// and the deletion, and every honest claim with them.
#[test]
fn hide_refs_refuses_a_rewind_of_a_ledger_and_every_claim_too() {
    let mut server = Server::without_hook();
    server.start();
    let (alice, first) = ledger_and_branch(&server);
    server.config("receive.hideRefs", "refs/leases");
    let tip = server.tip("42");

    let landed = rewinds_and_deletions(&server, &alice, &first);
    assert!(!landed[0] && !landed[2], "{landed:?}");
    assert_eq!(server.tip("42"), tip);
    let run = lease(&alice, 3, &["release", "42", "--remote", "origin"]);
    assert_ne!(run.code, 0, "an honest release lands: {run}");
    assert_eq!(server.tip("42"), tip);
}

/// The hook SECURITY.md gives, on a server that runs nothing of git-lease: the ledger's rewind,
/// its rewrite and its deletion are refused, the archive's deletion too, and every honest
/// claim, release and revival lands, so a fresh clone goes on from the newest token.
#[test]
fn the_documented_pre_receive_refuses_rewinds_and_deletions_of_ledgers_and_passes_claims() {
    let mut server = Server::without_hook();
    server.write_hook("pre-receive", &documented_hook());
    server.start();
    let (alice, first) = ledger_and_branch(&server);
    let tip = server.tip("42");

    let landed = rewinds_and_deletions(&server, &alice, &first);
    assert_eq!(landed, [false, true, false, true], "{landed:?}");
    assert_eq!(server.tip("42"), tip);
    // A rewrite: a commit beside the ledger's tip, not after it.
    let tree = alice.git(&["rev-parse", &format!("{first}^{{tree}}")]);
    let beside = alice.git(&["commit-tree", &tree, "-p", &first, "-m", "beside"]);
    let run = git(
        &alice,
        &[
            "push",
            "--force",
            "origin",
            &format!("{beside}:refs/leases/42"),
        ],
    );
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("refs/leases/42");
    assert_eq!(server.tip("42"), tip);

    // Honest steps, and a fold and revival, all land.
    lease(&alice, 3, &["release", "42", "--remote", "origin"]).ok();
    crate::archive::on_server(
        &server,
        &crate::env::at(200),
        &["archive", "--quiet-for", "1m"],
    );
    assert_eq!(
        server.tip("42"),
        None,
        "the fold, run on the server, removed the ref"
    );
    let archive = server.rev("refs/lease-archive");
    let run = git(&alice, &["push", "origin", ":refs/lease-archive"]);
    assert_ne!(run.code, 0, "{run}");
    assert_eq!(server.rev("refs/lease-archive"), archive);
    let bob = server.client("bob");
    lease(&bob, 210, &["acquire", "42", "--remote", "origin"])
        .ok()
        .stdout_has("(token 3)");
}
