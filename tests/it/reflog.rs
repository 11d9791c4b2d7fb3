//! Reflogs without a configured identity: with `core.logAllRefUpdates=always` every ref
//! update writes a reflog entry, which needs a committer. The harness configures none (no
//! `user.name`, no `user.email`, no global config), as on a fresh server or CI runner; every
//! ref git-lease moves, ledger refs and the bookkeeping refs of a remote alike, must still
//! move, with git-lease as the reflog's committer.

use serde_json::json;

use crate::env::{jrun, TestRepo};
use crate::server::Server;
use crate::session::assert_secret_shape;

const ALICE: &str = "alice@example.com";

/// Asserts that `refname` has a reflog with `entries` entries, each by git-lease.
#[track_caller]
fn assert_reflog(repo: &TestRepo, refname: &str, entries: usize) {
    let log = repo.git(&["reflog", "show", "--format=%gn <%ge>", refname]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), entries, "reflog of {refname}:\n{log}");
    assert!(
        lines
            .iter()
            .all(|l| *l == "git-lease <git-lease@localhost>"),
        "reflog of {refname}:\n{log}"
    );
}

/// A repository that logs every ref update and has no identity configured.
fn logging_repo(repo: &TestRepo) {
    repo.git(&["config", "core.logAllRefUpdates", "always"]);
    for key in ["user.name", "user.email"] {
        assert_eq!(repo.git_run(&["config", key]).code, 1, "{key} is not set");
    }
}

#[test]
fn local_claims_write_reflogs_without_an_identity() {
    let repo = TestRepo::new();
    logging_repo(&repo);
    jrun(&repo, 0, &["acquire", "42", "--holder", ALICE]).outcome(0, "acquired");
    jrun(&repo, 1, &["renew", "42", "--holder", ALICE]).outcome(0, "renewed");
    // Several issues at once are one transaction.
    jrun(&repo, 2, &["acquire", "7", "8", "--holder", ALICE]).ok();
    jrun(&repo, 3, &["release", "42", "--holder", ALICE]).outcome(0, "released");
    assert_reflog(&repo, "refs/leases/42", 3);
    assert_reflog(&repo, "refs/leases/7", 1);
    repo.assert_fsck();
}

#[test]
fn remote_claims_with_a_session_write_reflogs_without_an_identity() {
    let daemon = Server::daemon();
    let client = daemon.client(ALICE);
    logging_repo(&client);

    let run = jrun(
        &client,
        0,
        &[
            "acquire",
            "--remote",
            "origin",
            "42",
            "--ttl",
            "1h",
            "--session",
        ],
    );
    run.ok();
    let v = run.json_has(&[
        ("outcome", json!("acquired")),
        ("token", json!(1)),
        ("holder", json!(ALICE)),
    ]);
    let secret = v["secret"]
        .as_str()
        .expect("the session's secret is printed");
    assert_secret_shape(secret);
    let tip = daemon.tip("42").expect("the server has refs/leases/42");
    assert_eq!(client.tip("42").as_deref(), Some(tip.as_str()));

    let run = jrun(
        &client,
        1,
        &["release", "--remote", "origin", "42", "--secret", secret],
    );
    run.ok();
    run.json_has(&[("outcome", json!("released"))]);
    assert_eq!(daemon.tip("42"), client.tip("42"), "both moved");

    // The ledger ref and the remote-tracking ref both logged both updates.
    assert_reflog(&client, "refs/leases/42", 2);
    let tracking = client.git(&["for-each-ref", "--format=%(refname)", "refs/lease-remotes/"]);
    let tracking: Vec<&str> = tracking.lines().collect();
    assert_eq!(tracking.len(), 1, "{tracking:?}");
    assert!(
        tracking[0].ends_with("/42"),
        "a tracking ref of 42: {tracking:?}"
    );
    assert_reflog(&client, tracking[0], 2);
}
