//! `run` through a remote: the lease taken and renewed on the server, and a revoke there
//! stopping the child.

use super::*;

#[test]
fn run_works_through_a_remote() {
    let daemon = Server::daemon();
    let repo = daemon.client(WORKER);
    let other = daemon.client(BOB);
    let script = format!(
        "\"{BIN}\" check \"$GIT_LEASE_ISSUE\" --remote origin --token \"$GIT_LEASE_TOKEN\" \
         --holder \"$GIT_LEASE_HOLDER\""
    );
    let run = repo
        .lease()
        .args(["run", "--remote", "origin", "15", "--ttl", "1h"])
        .args(["--", "sh", "-c", &script])
        .run();
    run.ok();
    run.stdout_has("ok: token 1 is the live tenure of 15");
    let chain = daemon.chain("15");
    assert_eq!(events(&chain), vec!["acquire", "complete"], "on the server");
    assert_eq!(chain[0].1["holder"], json!(WORKER));
    assert!(chain[0].1["session"].is_string(), "{:?}", chain[0].1);
    assert_eq!(repo.tip("15"), daemon.tip("15"));

    // Held on the server by someone this clone never heard of: refused, nothing runs.
    other
        .lease()
        .args(["acquire", "--remote", "origin", "16", "--ttl", "1h"])
        .run()
        .ok();
    let marker = repo.scratch("out").join("ran");
    let before = daemon.lease_refs();
    let run = repo.run(&touching(&["run", "--remote", "origin", "16"], &marker));
    run.code(3);
    assert!(!marker.exists(), "the child ran\n{run}");
    assert_eq!(daemon.lease_refs(), before);
    daemon.lease(&["verify"]).ok();
}

#[test]
fn a_run_through_a_remote_whose_lease_is_revoked_on_the_server_exits_6() {
    let daemon = Server::daemon();
    let repo = daemon.client(WORKER);
    let cmd = repo
        .lease()
        .args(renewing(&["--remote", "origin", "19"], "1h"));
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_file(&ready);
    poll_until("19 on the server", || daemon.tip("19"));
    daemon.lease(&revoke("19")).ok();
    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    let chain = daemon.chain("19");
    assert_eq!(
        chain.last().map(|(_, l)| l["event"].clone()),
        Some(json!("revoke")),
        "nothing after the revoke: {chain:?}"
    );
}
