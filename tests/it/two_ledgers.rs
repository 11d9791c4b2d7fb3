//! A clone's own ledger and the remote's are two ledgers, each with its own tokens
//! (docs/SECURITY.md, "Not guaranteed: a local ledger and the remote's are two ledgers"): a
//! token issued by one can be issued again by the other. What holds is shown here, through a
//! `git daemon` whose hook fences `issue/*`: a remote write that finds a tenure this clone
//! made alone keeps that ledger as `refs/lease-diverged/<issue>` and says so, and
//! `git lease push` fences work by the remote's ledger, the one the hook judges, never by a
//! tenure of the clone's own.

use crate::env::{at, Run, TestRepo};
use crate::server::Server;

/// A hooked server fencing `issue/*`, its clock at T0.
fn fenced_server() -> Server {
    let mut server = Server::with_hook();
    server.config("lease.fence", "refs/heads/issue/*");
    server.start_at(&at(0));
    server
}

/// `git lease <args>` in `client` at `secs` after T0.
fn lease(client: &TestRepo, secs: i64, args: &[&str]) -> Run {
    client.run_at(&at(secs), args)
}

/// Commits on `issue/8` in `client` (made on first use); returns the commit.
fn work_on_8(client: &TestRepo, message: &str) -> String {
    if client.git_run(&["switch", "-q", "issue/8"]).code != 0 {
        client.git(&["switch", "-q", "-c", "issue/8"]);
    }
    client.git(&["commit", "-q", "--allow-empty", "-m", message]);
    client.git(&["rev-parse", "HEAD"])
}

/// carol's tenure of issue 8 in her clone's own ledger (token 1), which the server never saw;
/// returns its tip.
fn carol_holds_8_here(server: &Server, carol: &TestRepo) -> String {
    lease(carol, 0, &["acquire", "8", "--local"])
        .ok()
        .stdout_has("(token 1)");
    assert_eq!(server.tip("8"), None, "the claim stayed in carol's clone");
    carol.tip("8").expect("carol's local ledger")
}

#[test]
fn a_token_issued_here_is_issued_again_by_the_remote_and_the_local_ledger_is_kept() {
    let server = fenced_server();
    let carol = server.client("carol");
    let hers = carol_holds_8_here(&server, &carol);

    // The remote's ledger starts at token 1 too: the same token, issued a second time.
    lease(&carol, 10, &["acquire", "8", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)")
        .stderr_has("kept as refs/lease-diverged/8");
    assert_eq!(server.leases("8").len(), 1, "one step on the server");
    assert_eq!(
        carol.tip("8"),
        server.tip("8"),
        "the clone follows the remote"
    );
    assert_eq!(
        carol.git(&["rev-parse", "refs/lease-diverged/8"]),
        hers,
        "the tenure made here is kept"
    );

    // Work is fenced by the remote's tenure, which is hers: it lands with its token.
    let mine = work_on_8(&carol, "carol: work");
    lease(&carol, 20, &["push"]).ok();
    assert_eq!(server.rev("refs/heads/issue/8"), Some(mine));
}

#[test]
fn git_lease_push_fences_by_the_remotes_ledger_never_by_a_tenure_made_here() {
    let server = fenced_server();
    let carol = server.client("carol");
    carol_holds_8_here(&server, &carol);
    // bob claims 8 on the server: token 1, the number carol's own ledger gave her.
    let bob = server.client("bob");
    lease(&bob, 5, &["acquire", "8", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");

    // carol's tenure here is no tenure of the server's: her push is refused before it is
    // made, and nothing lands.
    work_on_8(&carol, "carol: work under her local tenure");
    let run = lease(&carol, 10, &["push"]);
    run.code(3)
        .stderr_has("held by bob (token 1), not by carol");
    assert_eq!(server.rev("refs/heads/issue/8"), None, "nothing landed");
    // Nor can she claim it on the server while bob holds it; her local ledger stays hers.
    let hers = carol.tip("8");
    lease(&carol, 11, &["acquire", "8", "--remote", "origin"])
        .code(3)
        .stdout_has("held by bob");
    assert_eq!(carol.tip("8"), hers);
}
