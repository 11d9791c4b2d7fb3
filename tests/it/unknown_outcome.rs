//! The unknown outcome: a push whose reply is lost after the server applied it. The client
//! cannot know whether its claim landed; it says so (exit 1, "the outcome … is unknown"), and
//! running the same command again converges: a re-acquire by the holder is idempotent (the
//! token is not bumped), a release again finds nothing held.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::env::at;
use crate::proxy::{Fault, Proxy, Service};
use crate::server::{lease, Server};

/// A client of a hooked daemon (clock at T0) through a proxy that drops the server's reply to
/// the first `drops` pushes, after the server acted.
fn through_dropping_proxy(drops: usize) -> (Server, Proxy, crate::env::TestRepo) {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let left = Arc::new(AtomicUsize::new(drops));
    let proxy = Proxy::start(
        server.port(),
        Box::new(move |service| {
            let drop_it = service == Service::ReceivePack
                && left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if drop_it {
                Fault::DropReply
            } else {
                Fault::Pass
            }
        }),
    );
    let client = server.client("alice");
    client.git(&["remote", "set-url", "origin", &proxy.url()]);
    (server, proxy, client)
}

/// A proxy that drops the server's reply to every push.
fn dropping_every_reply(server: &Server) -> Proxy {
    Proxy::start(
        server.port(),
        Box::new(|service| match service {
            Service::ReceivePack => Fault::DropReply,
            _ => Fault::Pass,
        }),
    )
}

#[test]
fn a_lost_reply_to_an_acquire_says_the_outcome_is_unknown_and_running_it_again_keeps_the_token() {
    let (server, _proxy, client) = through_dropping_proxy(1);
    let lost = lease(&client, 0, &["acquire", "7", "--remote", "origin"]);
    lost.code(1).stderr_has("the outcome is unknown");
    // The server acted: the claim landed, though the client could not know it.
    let chain = server.leases("7");
    assert_eq!(chain.len(), 1, "{chain:?}");
    assert_eq!(chain[0]["holder"], "alice");
    assert_eq!(chain[0]["token"], 1);
    let again = lease(
        &client,
        1,
        &["--json", "acquire", "7", "--remote", "origin"],
    );
    again.ok();
    let answer = again.json();
    assert_eq!(answer["outcome"], "acquired");
    assert_eq!(
        answer["token"], 1,
        "the re-acquire bumped the token: {again}"
    );
    let chain = server.leases("7");
    assert_eq!(chain.len(), 2);
    assert_eq!(chain[1]["event"], "reacquire");
    assert_eq!(chain[1]["token"], 1);
}

#[test]
fn a_lost_reply_to_a_release_says_the_outcome_is_unknown_and_running_it_again_finds_nothing_held() {
    let (server, _unused, client) = through_dropping_proxy(0);
    lease(&client, 0, &["acquire", "7", "--remote", "origin"]).ok();
    let proxy = dropping_every_reply(&server);
    client.git(&["remote", "set-url", "origin", &proxy.url()]);
    lease(&client, 1, &["release", "7", "--remote", "origin"])
        .code(1)
        .stderr_has("the outcome is unknown");
    assert_eq!(server.leases("7").last().unwrap()["event"], "release");
    drop(proxy);
    client.git(&["remote", "set-url", "origin", &server.url()]);
    let again = lease(
        &client,
        2,
        &["--json", "release", "7", "--remote", "origin"],
    );
    again.ok();
    assert_eq!(again.json()["outcome"], "not_held");
    assert_eq!(server.leases("7").len(), 2);
}
