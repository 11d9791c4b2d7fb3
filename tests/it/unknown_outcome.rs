//! The unknown outcome: a push whose reply is lost after the server applied it. The client
//! cannot know whether its claim landed; it says so (exit 1, "the outcome … is unknown"), and
//! running the same command again converges: a re-acquire by the holder is idempotent (the
//! token is not bumped), a release again finds nothing held, a `git lease push` of a fenced
//! branch again finds it up to date or pushes it. A push refused because a killed
//! receive-pack left its ref's lock behind is told apart (exit 1, naming the lock and how it
//! is cleared): nothing changed, and the next command once the lock is removed works.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::env::at;
use crate::proxy::{self, Fault, Phase, Proxy, Service, Way};
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
    judged_then_through(&server, &client, &proxy.url());
    (server, proxy, client)
}

/// Judges `server`'s URL as `client`'s first write would (doctor, straight to the server),
/// then sends `client`'s traffic for that URL through the proxy at `proxy_url`: the proxy's
/// faults meet the commands, not the probe of the first write.
fn judged_then_through(server: &Server, client: &crate::env::TestRepo, proxy_url: &str) {
    lease(client, 0, &["doctor"]);
    client.git(&["config", &insteadof(proxy_url), &server.url()]);
}

/// The setting that sends traffic for a URL through the proxy at `proxy_url`.
fn insteadof(proxy_url: &str) -> String {
    format!("url.{proxy_url}.insteadOf")
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
    let (server, passing, client) = through_dropping_proxy(0);
    lease(&client, 0, &["acquire", "7", "--remote", "origin"]).ok();
    let proxy = dropping_every_reply(&server);
    client.git(&["config", "--unset", &insteadof(&passing.url())]);
    client.git(&["config", &insteadof(&proxy.url()), &server.url()]);
    lease(&client, 1, &["release", "7", "--remote", "origin"])
        .code(1)
        .stderr_has("the outcome is unknown");
    assert_eq!(server.leases("7").last().unwrap()["event"], "release");
    client.git(&["config", "--unset", &insteadof(&proxy.url())]);
    drop(proxy);
    let again = lease(
        &client,
        2,
        &["--json", "release", "7", "--remote", "origin"],
    );
    again.ok();
    assert_eq!(again.json()["outcome"], "not_held");
    assert_eq!(server.leases("7").len(), 2);
}

/// A client through a proxy before `server` (started) faulting every push with `fault`.
fn through(server: &Server, client: &crate::env::TestRepo, fault: Fault) -> Proxy {
    let proxy = Proxy::start(
        server.port(),
        Box::new(move |service| match service {
            Service::ReceivePack => fault,
            _ => Fault::Pass,
        }),
    );
    client.git(&["remote", "set-url", "origin", &proxy.url()]);
    proxy
}

/// A hooked daemon fencing `refs/heads/issue/*` (clock at T0), alice holding issue 7 and a
/// commit of hers on `issue/7`.
fn fenced_work() -> (Server, crate::env::TestRepo, String) {
    let mut server = Server::with_hook();
    server.config("lease.fence", "refs/heads/issue/*");
    server.start_at(&at(0));
    let alice = server.client("alice");
    lease(&alice, 0, &["acquire", "7", "--remote", "origin"]).ok();
    alice.git(&["switch", "-q", "-c", "issue/7"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    let head = alice.git(&["rev-parse", "HEAD"]);
    (server, alice, head)
}

#[test]
fn a_lost_reply_to_a_fenced_push_is_settled_by_asking_the_server_where_the_branch_is() {
    let (server, alice, head) = fenced_work();
    let _proxy = through(&server, &alice, Fault::DropReply);
    let pushed = lease(&alice, 1, &["--json", "push", "origin", "issue/7"]);
    pushed
        .ok()
        .stderr_has("the server's answer was lost")
        .stderr_has(&format!("its refs/heads/issue/7 is at {head}"));
    assert_pushed(&pushed.json(), &server, &head);
}

#[test]
fn a_lost_reply_to_a_fenced_push_the_server_cannot_settle_is_unknown_and_pushing_again_converges() {
    let (server, alice, head) = fenced_work();
    // The push's answer is lost, and so is every read after it.
    let mut pushed = false;
    let proxy = Proxy::start(
        server.port(),
        Box::new(move |service| match service {
            Service::ReceivePack => {
                pushed = true;
                Fault::DropReply
            }
            _ if pushed => Fault::Cut {
                way: Way::ToServer,
                after: 0,
            },
            _ => Fault::Pass,
        }),
    );
    alice.git(&["remote", "set-url", "origin", &proxy.url()]);
    lease(&alice, 1, &["push", "origin", "issue/7"])
        .code(1)
        .stderr_has("the outcome is unknown");
    // The server took it, though alice could not know.
    assert_eq!(
        server.rev("refs/heads/issue/7").as_deref(),
        Some(head.as_str())
    );
    drop(proxy);
    client_direct(&server, &alice);
    // Again, with nothing left to update: git still sends the push option, which the server
    // does not read; however its connection ends, the branch is there.
    let again = lease(&alice, 2, &["--json", "push", "origin", "issue/7"]);
    again.ok();
    assert_pushed(&again.json(), &server, &head);
}

#[test]
fn a_fenced_push_cut_before_its_pack_says_the_outcome_is_unknown_and_pushing_again_lands_it() {
    let (server, alice, head) = fenced_work();
    let cut = Fault::Cut {
        way: Way::ToServer,
        after: 0,
    };
    let proxy = through(&server, &alice, cut);
    lease(&alice, 1, &["push", "origin", "issue/7"])
        .code(1)
        .stderr_has("the outcome is unknown");
    assert_eq!(server.rev("refs/heads/issue/7"), None);
    drop(proxy);
    client_direct(&server, &alice);
    lease(&alice, 2, &["push", "origin", "issue/7"]).ok();
    assert_eq!(
        server.rev("refs/heads/issue/7").as_deref(),
        Some(head.as_str())
    );
}

/// Asserts that `answer` (a `push --json`) says `pushed` with token 1, and that the server's
/// `issue/7` is at `head`.
#[track_caller]
fn assert_pushed(answer: &serde_json::Value, server: &Server, head: &str) {
    assert_eq!(answer["outcome"], "pushed", "{answer}");
    assert_eq!(answer["token"], 1, "{answer}");
    assert_eq!(server.rev("refs/heads/issue/7").as_deref(), Some(head));
}

/// Points `client`'s `origin` at `server` itself again.
fn client_direct(server: &Server, client: &crate::env::TestRepo) {
    client.git(&["remote", "set-url", "origin", &server.url()]);
}

/// The lock file a receive-pack killed with the lock of `refs/<name>` taken leaves behind.
fn leftover_lock(server: &Server, name: &str) -> std::path::PathBuf {
    if crate::env::reftable() {
        server.bare().join("reftable/tables.list.lock")
    } else {
        server.bare().join(format!("refs/{name}.lock"))
    }
}

#[test]
fn a_claim_refused_for_a_lock_a_killed_receive_pack_left_behind_says_so_and_works_once_it_is_removed(
) {
    let mut server = Server::with_hook();
    let kills = proxy::install_killer(&server);
    server.start_at(&at(0));
    let alice = server.client("alice");
    let killing = Proxy::start_killing(
        server.port(),
        false,
        &kills,
        Box::new(|service| match service {
            Service::ReceivePack => Fault::Kill(Phase::Prepared),
            _ => Fault::Pass,
        }),
    );
    judged_then_through(&server, &alice, &killing.url());
    lease(&alice, 0, &["acquire", "7", "--remote", "origin"])
        .code(1)
        .stderr_has("the outcome is unknown");
    assert_eq!(proxy::kills_done(&kills), ["prepared"]);
    assert_eq!(server.tip("7"), None);
    let lock = leftover_lock(&server, "leases/7");
    assert!(lock.exists(), "no lock left at {}", lock.display());
    alice.git(&["config", "--unset", &insteadof(&killing.url())]);
    drop(killing);
    // Every attempt finds the lock in the way: a refusal that says so, not a lost race.
    let locked = lease(&alice, 1, &["--json", "acquire", "7", "--remote", "origin"]);
    locked
        .code(1)
        .stderr_has("a lock file on the server is in the way")
        .stderr_has("the server's administrator removes it");
    assert!(!locked.stderr.contains("lost the race"), "{locked}");
    assert_eq!(server.tip("7"), None);
    // The administrator removes it; the same command works.
    std::fs::remove_file(&lock).expect("remove the leftover lock");
    let again = lease(&alice, 2, &["--json", "acquire", "7", "--remote", "origin"]);
    again.ok();
    assert_eq!(again.json()["token"], 1);
    server.lease(&["verify"]).ok();
    server.git(&["fsck", "--no-progress"]);
}

#[test]
fn a_fenced_push_refused_for_a_lock_left_behind_says_so_and_lands_once_it_is_removed() {
    let (server, alice, head) = fenced_work();
    let lock = leftover_lock(&server, "heads/issue/7");
    std::fs::create_dir_all(lock.parent().expect("a parent")).expect("create the lock's directory");
    // What a receive-pack killed with the lock taken leaves: the lock file.
    std::fs::write(&lock, "").expect("leave a lock behind");
    lease(&alice, 1, &["push", "origin", "issue/7"])
        .code(1)
        .stderr_has("a lock file on the server is in the way");
    assert_eq!(server.rev("refs/heads/issue/7"), None);
    std::fs::remove_file(&lock).expect("remove the leftover lock");
    lease(&alice, 2, &["push", "origin", "issue/7"]).ok();
    assert_eq!(
        server.rev("refs/heads/issue/7").as_deref(),
        Some(head.as_str())
    );
}
