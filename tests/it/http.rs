//! The server hook behind a web server: `git http-backend` runs as CGI on a free port of
//! 127.0.0.1 with basic auth for alice, bob and admin, behind lighttpd where it is installed
//! (`fixtures/lighttpd-git.conf` sets the CGI environment) and, in any case, behind the
//! harness's own front ([`crate::cgi`]), so the hook sees the authenticated pusher as
//! `REMOTE_USER` (`lease.pusherEnv = REMOTE_USER`) and judges who may write what: only
//! yourself as the actor of a ledger commit, only the holder's pushes to a fenced branch, and
//! only an administrator (`lease.admins`) may revoke someone else's live lease. No message
//! shows a remote URL's credentials. The server's clock is fixed at T0 (`lease.hookNow` in the
//! served repository's configuration).

use crate::env::at;
use crate::forge::{acquired, freed, with};
use crate::pushes::{assert_refused, lease_commit};
use crate::server::{git, lease, Server};

/// An http server for alice, bob and admin, identity from `REMOTE_USER`, admin in
/// `lease.admins`, its clock at T0.
fn http_server() -> Server {
    configured(Server::http(&["alice", "bob", "admin"]))
}

/// The same server behind the harness's own web front, whatever is installed.
fn builtin_server() -> Server {
    configured(Server::http_builtin(&["alice", "bob", "admin"]))
}

fn configured(mut server: Server) -> Server {
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.admins", "admin");
    server.start_at(&at(0));
    server
}

#[test]
fn over_http_only_authenticated_users_get_in() {
    only_authenticated_users_get_in(http_server());
}

#[test]
fn behind_the_harnesss_own_front_only_authenticated_users_get_in() {
    only_authenticated_users_get_in(builtin_server());
}

fn only_authenticated_users_get_in(server: Server) {
    let alice = server.client("alice");
    git(&alice, &["ls-remote", "origin"]).ok();
    // A wrong password is refused by the web server itself.
    let wrong = server.url_as("alice").replace("alicepw", "wrong");
    let run = git(&alice, &["ls-remote", &wrong]);
    assert_ne!(run.code, 0, "a wrong password got in\n{run}");
    assert!(
        run.stderr.contains("401") || run.stderr.contains("Authentication failed"),
        "expected an authentication failure\n{run}"
    );
}

#[test]
fn over_http_the_hook_judges_the_authenticated_pusher() {
    the_hook_judges_the_authenticated_pusher(http_server());
}

#[test]
fn behind_the_harnesss_own_front_the_hook_judges_the_authenticated_pusher() {
    the_hook_judges_the_authenticated_pusher(builtin_server());
}

fn the_hook_judges_the_authenticated_pusher(server: Server) {
    let alice = server.client("alice");
    let bob = server.client("bob");
    let admin = server.client("admin");

    // alice acquires as alice: accepted.
    let run = lease(
        &alice,
        0,
        &["--remote", "origin", "acquire", "7", "--ttl", "1h"],
    );
    assert_eq!(
        run.code,
        0,
        "alice's own acquire was refused\n{run}\n{}",
        server.log()
    );
    let chain = server.leases("7");
    assert_eq!(chain.len(), 1);
    assert_eq!(chain[0]["holder"], "alice");
    assert_eq!(chain[0]["token"], 1);
    let alices = server.tip("7").expect("refs/leases/7 on the server");

    // bob, authenticated as bob, acquires naming alice as the holder: refused.
    let run = lease(
        &bob,
        0,
        &["--remote", "origin", "acquire", "8", "--holder", "alice"],
    );
    run.code(3)
        .stderr_has("identity")
        .stderr_has("but bob pushed it");
    assert_eq!(server.tip("8"), None);
    // The same forged with plumbing and pushed with plain git.
    let forged = lease_commit(&bob, &acquired("8", "alice", 1, 0, Some(600)), &[]);
    let run = git(
        &bob,
        &["push", "origin", &format!("{forged}:refs/leases/8")],
    );
    assert_refused(&run, "8", &forged, "identity");
    assert_eq!(server.tip("8"), None);
    // As himself, bob gets in (his credentials work).
    lease(&bob, 0, &["--remote", "origin", "acquire", "8"]).ok();
    assert_eq!(server.leases("8")[0]["holder"], "bob");

    // bob tries to release alice's live lease, posing as alice: refused.
    let run = lease(
        &bob,
        0,
        &["--remote", "origin", "release", "7", "--holder", "alice"],
    );
    run.code(3).stderr_has("identity");
    assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));
    // As himself (the release records him as acting): refused.
    git(&bob, &["fetch", "-q", "origin", "refs/leases/7"]).ok();
    let v = with(
        freed("7", "release", "alice", 1, 0),
        "by",
        serde_json::json!("bob"),
    );
    let release = lease_commit(&bob, &v, &[&alices]);
    let run = git(
        &bob,
        &["push", "origin", &format!("{release}:refs/leases/7")],
    );
    assert_refused(&run, "7", &release, "holder-change");
    assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));
    // The tool itself will not release someone else's live lease.
    lease(&bob, 0, &["--remote", "origin", "release", "7"]).code(3);
    assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));

    // bob revokes alice's live lease: he is not an administrator.
    let run = lease(
        &bob,
        0,
        &[
            "--remote", "origin", "revoke", "7", "--reason", "mine now", "--holder", "bob",
        ],
    );
    run.code(3)
        .stderr_has("admin")
        .stderr_has("bob is not in lease.admins");
    assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));
    // Nor may he revoke it in admin's name: the server goes by who pushed.
    let run = lease(
        &bob,
        0,
        &[
            "--remote", "origin", "revoke", "7", "--reason", "x", "--holder", "admin",
        ],
    );
    run.code(3).stderr_has("admin: bob is not in lease.admins");
    assert_eq!(server.tip("7").as_deref(), Some(alices.as_str()));

    // admin revokes it: accepted, recording who and why; the token is kept.
    let run = lease(
        &admin,
        10,
        &[
            "--remote",
            "origin",
            "revoke",
            "7",
            "--reason",
            "stuck for a week",
            "--holder",
            "admin",
        ],
    );
    assert_eq!(
        run.code,
        0,
        "admin's revoke was refused\n{run}\n{}",
        server.log()
    );
    let chain = server.leases("7");
    assert_eq!(chain.len(), 2);
    assert_eq!(chain[1]["event"], "revoke");
    assert_eq!(chain[1]["by"], "admin");
    assert_eq!(chain[1]["previous_holder"], "alice");
    assert_eq!(chain[1]["reason"], "stuck for a week");
    assert_eq!(chain[1]["token"], 1);
    assert_eq!(chain[1]["holder"], serde_json::Value::Null);

    // Once a lease has expired by the server's clock, anyone may free it as themselves: alice
    // took issue 10 for 2 minutes 250 s before the server's clock.
    lease(
        &alice,
        -250,
        &["--remote", "origin", "acquire", "10", "--ttl", "2m"],
    )
    .ok();
    let run = lease(&bob, 0, &["--remote", "origin", "release", "10"]);
    assert_eq!(
        run.code,
        0,
        "bob could not free an expired lease\n{run}\n{}",
        server.log()
    );
    let chain = server.leases("10");
    assert_eq!(chain[1]["event"], "release");
    assert_eq!(chain[1]["by"], "bob");
    assert_eq!(chain[1]["previous_holder"], "alice");

    // Now bob may take it, as a new tenure.
    lease(&bob, 20, &["--remote", "origin", "acquire", "7"]).ok();
    let chain = server.leases("7");
    assert_eq!(chain[2]["holder"], "bob");
    assert_eq!(chain[2]["token"], 2);
    server.lease(&["verify"]).ok();
}

#[test]
fn over_http_a_fenced_branch_takes_only_the_holders_pushes() {
    let server = http_server();
    server.config("lease.fence", "refs/heads/issue/*");
    let alice = server.client("alice");
    let bob = server.client("bob");
    lease(
        &alice,
        0,
        &["--remote", "origin", "acquire", "7", "--ttl", "1h"],
    )
    .ok();

    git(&alice, &["switch", "-q", "-c", "issue/7"]).ok();
    git(
        &alice,
        &["commit", "-q", "--allow-empty", "-m", "alice: work"],
    )
    .ok();
    lease(&alice, 0, &["push"]).ok();
    let head = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(head.clone()));

    // bob, with the right token but not the holder: refused.
    git(&bob, &["fetch", "-q", "origin"]).ok();
    git(&bob, &["switch", "-q", "-c", "issue/7", "origin/issue/7"]).ok();
    git(&bob, &["commit", "-q", "--allow-empty", "-m", "bob: work"]).ok();
    let run = git(&bob, &["push", "-o", "lease-token=1", "origin", "issue/7"]);
    assert_ne!(run.code, 0, "bob pushed to alice's fenced branch\n{run}");
    run.stderr_has("remote: git-lease: refused refs/heads/issue/7 at ")
        .stderr_has(": fence: issue 7 is held by alice (token 1), not by bob");
    assert_eq!(server.rev("refs/heads/issue/7"), Some(head));
}

#[test]
fn no_message_shows_the_credentials_of_a_remote_url() {
    let server = http_server();
    let alice = server.client("alice");
    let url = server.url_as("alice");
    let wrong = url.replace("alicepw", "s3cr3t-wrong");
    lease(&alice, 0, &["--remote", &url, "acquire", "5"]).ok();
    let runs = [
        lease(&alice, 0, &["--remote", &wrong, "acquire", "6"]),
        lease(&alice, 0, &["--remote", &wrong, "list"]),
        lease(&alice, 0, &["--remote", &wrong, "show", "5"]),
        lease(&alice, 0, &["--remote", &wrong, "release", "5"]),
        lease(&alice, 0, &["sync", &wrong]),
        // bob's lease refused by the hook through a URL with alice's password.
        lease(
            &alice,
            0,
            &["--remote", &url, "release", "5", "--holder", "bob"],
        ),
        lease(&alice, 0, &["--remote", &url, "--json", "sync"]),
    ];
    for run in &runs {
        for secret in ["s3cr3t-wrong", "alicepw"] {
            assert!(
                !run.stderr.contains(secret) && !run.stdout.contains(secret),
                "a message shows the password {secret:?}\n{run}"
            );
        }
    }
    assert_ne!(runs[0].code, 0, "{}", runs[0]);
}
