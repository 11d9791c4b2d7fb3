//! `watch`: what happens to the ledgers, streamed as one JSON object a line.
//!
//! `watch` runs as a child process whose standard output a thread reads line by line; every
//! wait is a bounded loop on what it printed or on the process's state, never a sleep that
//! decides an outcome.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{refs, ALICE, BOB};
use crate::env::{at, Cmd, TestRepo, Watch, BOUND, T0};
use crate::server::Server;
use crate::session::start_ticks;

/// `watch --json --since <T0 - 1h>` on the clock `GIT_LEASE_NOW=T0`, with `extra` arguments.
fn watch_cmd(repo: &TestRepo, extra: &[&str]) -> Cmd {
    repo.lease()
        .now(T0)
        .arg_json()
        .args(["watch", "--since", &at(-3600)])
        .args(extra)
}

/// Records a claim of `marker` a minute before T0, so that a `watch --since` started later
/// replays it first: once its line is read, the watch has read the refs once.
fn mark(repo: &TestRepo, marker: &str) {
    repo.lease()
        .now(&at(-60))
        .args(["acquire", marker, "--holder", ALICE, "--ttl", "never"])
        .run()
        .ok();
}

#[test]
fn watch_sees_acquire_release_and_a_synthesized_expiry_and_writes_nothing() {
    let repo = TestRepo::new();
    mark(&repo, "marker");
    let before = refs(&repo);
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo, &[]));
    let marker = watch.wait_event("marker", "acquire");
    assert_eq!(marker["at"], at(-60));
    assert_eq!(marker["synthesized"], false);

    // Another process acquires and releases.
    let lease = |args: &[&str]| repo.lease().now(T0).args(args).run();
    lease(&["acquire", "a1", "--holder", BOB, "--ttl", "1h"]).ok();
    let acquired = watch.wait_event("a1", "acquire");
    assert_eq!(acquired["token"], 1);
    assert_eq!(acquired["holder"], BOB);
    assert_eq!(acquired["at"], T0);
    assert_eq!(acquired["commit"], json!(repo.tip("a1")));
    lease(&["release", "a1", "--holder", BOB]).ok();
    let released = watch.wait_event("a1", "release");
    assert_eq!(released["holder"], Value::Null);
    assert_eq!(released["previous_holder"], BOB);
    assert_eq!(released["token"], 1);

    // A lease that expires two seconds after the watch's T0: the watch says so when its
    // clock passes that instant, with the expiry as the event's time.
    lease(&["acquire", "soon", "--holder", ALICE, "--ttl", "2s"]).ok();
    let after_writes = refs(&repo);
    let objects = repo.object_count();
    watch.wait_event("soon", "acquire");
    let expired = watch.wait_event("soon", "expired");
    assert_eq!(
        expired,
        json!({
            "schema_version": 1,
            "issue": "soon", "event": "expired", "synthesized": true, "token": 1,
            "holder": ALICE, "previous_holder": null, "by": null, "reason": null,
            "at": at(2), "acquired_at": T0, "expires_at": at(2),
            "commit": repo.tip("soon"),
        })
    );

    // SIGTERM ends it cleanly.
    watch.signal("TERM");
    let status = watch.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", watch.stderr());
    watch.drain();

    // Exactly these events, once each, in order.
    let seen: Vec<(String, String)> = watch
        .seen
        .iter()
        .map(|v| {
            (
                v["issue"].as_str().unwrap_or("?").to_owned(),
                v["event"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("marker", "acquire"),
        ("a1", "acquire"),
        ("a1", "release"),
        ("soon", "acquire"),
        ("soon", "expired"),
    ]
    .iter()
    .map(|(i, e)| ((*i).to_owned(), (*e).to_owned()))
    .collect();
    assert_eq!(seen, want, "{:#?}", watch.seen);

    // The watch wrote nothing: the refs are the other process's writes and nothing else.
    let after = refs(&repo);
    assert_eq!(after, after_writes, "refs moved while only watch ran");
    assert_eq!(repo.object_count(), objects, "objects were written");
    let added: BTreeSet<&str> = after
        .difference(&before)
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(
        added,
        BTreeSet::from(["refs/leases/a1", "refs/leases/soon"]),
        "before {before:#?}\nafter {after:#?}"
    );
}

#[test]
fn watch_replays_the_events_of_one_instant_in_natural_order_of_issue() {
    let repo = TestRepo::new();
    repo.lease()
        .now(&at(-60))
        .args([
            "acquire", "10", "9", "issue-10", "issue-2", "--holder", ALICE,
        ])
        .run()
        .ok();
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo, &[]));
    watch.wait_event("issue-10", "acquire");
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
    watch.drain();
    let order: Vec<&str> = watch
        .seen
        .iter()
        .map(|v| v["issue"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        order,
        ["9", "10", "issue-2", "issue-10"],
        "{:#?}",
        watch.seen
    );
}

#[test]
fn watch_replays_history_since_an_instant_with_the_expiries_in_it() {
    let repo = TestRepo::new();
    let lease = |now: &str, args: &[&str]| repo.lease().now(now).args(args).run();
    lease(
        &at(-7200),
        &["acquire", "old", "--holder", ALICE, "--ttl", "10m"],
    )
    .ok();
    lease(
        &at(-600),
        &["acquire", "x", "--holder", ALICE, "--ttl", "5m"],
    )
    .ok();
    // x expired at -300; bob takes it over at -120 and releases it at -60.
    lease(&at(-120), &["acquire", "x", "--holder", BOB, "--ttl", "1h"]).ok();
    lease(&at(-60), &["release", "x", "--holder", BOB]).ok();
    let mut watch = Watch::spawn(
        &repo,
        repo.lease()
            .now(T0)
            .arg_json()
            .args(["watch", "--since", &at(-3600), "x"]),
    );
    watch.wait_event("x", "release");
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
    watch.drain();
    let run = &watch.seen;
    let events: Vec<(String, String)> = run
        .iter()
        .map(|v| {
            (
                v["event"].as_str().unwrap_or("?").to_owned(),
                v["at"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("acquire".to_owned(), at(-600)),
            ("expired".to_owned(), at(-300)),
            ("acquire".to_owned(), at(-120)),
            ("release".to_owned(), at(-60)),
        ],
        "{run:#?}"
    );
    assert_eq!(run[2]["previous_holder"], ALICE);
}

#[test]
fn watch_remote_sees_a_claim_made_from_another_clone() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    alice
        .lease()
        .now(&at(-60))
        .args(["acquire", "marker", "--remote", "origin", "--ttl", "never"])
        .run()
        .ok();
    let watcher = daemon.client("orchestrator@fleet");
    let before = watcher.lease_refs();
    let mut watch = Watch::spawn(
        &watcher,
        watch_cmd(&watcher, &["--remote", "origin", "--interval", "100ms"]),
    );
    watch.wait_event("marker", "acquire");

    let bob = daemon.client(BOB);
    bob.lease()
        .now(T0)
        .args(["acquire", "r1", "--remote", "origin", "--ttl", "1h"])
        .run()
        .ok();
    let claimed = watch.wait_event("r1", "acquire");
    assert_eq!(claimed["holder"], BOB);
    assert_eq!(claimed["token"], 1);
    assert_eq!(claimed["commit"], json!(daemon.tip("r1")));

    watch.signal("INT");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
    // Only the verified remote-tracking copies moved: the watcher's own ledger did not.
    assert_eq!(watcher.lease_refs(), before);
}

#[test]
fn watch_remote_ends_on_a_signal_while_a_silent_remote_keeps_its_fetch_waiting() {
    // A remote that accepts every connection and never says a word.
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen on 127.0.0.1");
    let url = format!(
        "git://127.0.0.1:{}/x",
        listener
            .local_addr()
            .expect("the listener's address")
            .port()
    );
    let (accepted, connections) = mpsc::channel::<TcpStream>();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            if accepted.send(conn).is_err() {
                return;
            }
        }
    });
    let repo = TestRepo::new();
    for sig in ["TERM", "INT"] {
        let mut watch = Watch::spawn(
            &repo,
            repo.lease().arg_json().args(["watch", "--remote", &url]),
        );
        // Its fetch is connected, and waits for an answer that never comes.
        let mut conn = connections
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("the fetch never connected\n{}", watch.stderr()));
        // Its request is read first (git writes it after connecting), so that the signal
        // lands on a fetch that is waiting for the answer.
        conn.set_read_timeout(Some(BOUND)).expect("a read timeout");
        let mut len = [0u8; 4];
        conn.read_exact(&mut len)
            .unwrap_or_else(|e| panic!("SIG{sig}: the fetch sent no request: {e}"));
        let len = usize::from_str_radix(&String::from_utf8_lossy(&len), 16)
            .unwrap_or_else(|e| panic!("SIG{sig}: not a pkt-line length {len:?}: {e}"));
        let mut request = vec![0u8; len.saturating_sub(4)];
        conn.read_exact(&mut request)
            .unwrap_or_else(|e| panic!("SIG{sig}: the request was cut short: {e}"));
        assert!(
            String::from_utf8_lossy(&request).contains("git-upload-pack /x"),
            "the fetch asked for the repository: {request:?}"
        );
        let fetch = poll_children(watch.child.id());
        let fetch_ticks = start_ticks(fetch);
        assert!(fetch_ticks.is_some(), "the fetch runs");

        watch.signal(sig);
        let status = watch.wait_exit();
        assert_eq!(
            status.code(),
            Some(0),
            "SIG{sig}: {status:?}\n{}",
            watch.stderr()
        );
        // The fetch ended with it and was reaped by it: not running, not even a zombie.
        assert_ne!(
            start_ticks(fetch),
            fetch_ticks,
            "SIG{sig}: git fetch (pid {fetch}) outlived the watch"
        );
        // And the connection it held is closed, with nothing more said on it.
        let mut buf = Vec::new();
        conn.read_to_end(&mut buf)
            .unwrap_or_else(|e| panic!("SIG{sig}: the fetch's connection is still open: {e}"));
        assert!(buf.is_empty(), "SIG{sig}: the fetch said more: {buf:?}");
    }
}

/// Polls (bounded) until `pid` has a child; returns the first.
#[track_caller]
fn poll_children(pid: u32) -> u32 {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(child) = crate::run::children_of(pid).first() {
            return *child;
        }
        assert!(
            Instant::now() < deadline,
            "{pid} started no child within {BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn watch_ends_with_exit_0_when_its_stdout_is_closed() {
    let repo = TestRepo::new();
    mark(&repo, "marker");
    let mut child = watch_cmd(&repo, &[])
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start git-lease watch");
    let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut first = String::new();
    reader.read_line(&mut first).expect("read the first line");
    assert!(first.contains("\"marker\""), "{first}");
    // Close the reading end: nothing more is written, yet the watch must notice and end.
    drop(reader);
    let deadline = Instant::now() + BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("watch did not end within {BOUND:?} of its stdout closing");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// The (issue, event, holder) of each event `watch` printed, in order.
fn events_seen(watch: &Watch) -> Vec<(String, String, String)> {
    watch
        .seen
        .iter()
        .map(|v| {
            let text = |k: &str| v[k].as_str().unwrap_or("-").to_owned();
            (text("issue"), text("event"), text("holder"))
        })
        .collect()
}

#[test]
fn watch_mine_shows_only_what_matters_to_its_holder_its_expiry_a_revoke_and_a_takeover() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", ALICE]);
    mark(&repo, "marker");
    let mut watch = Watch::spawn(&repo, watch_cmd(&repo, &["--mine"]));
    watch.wait_event("marker", "acquire");

    let lease = |now: &str, args: &[&str]| repo.lease().now(now).args(args).run();
    // Bob's own claims are none of Alice's business.
    lease(T0, &["acquire", "b1", "--holder", BOB, "--ttl", "1h"]).ok();
    lease(T0, &["release", "b1", "--holder", BOB]).ok();
    // Alice's claim, revoked by an administrator.
    lease(T0, &["acquire", "r1", "--ttl", "1h"]).ok();
    lease(
        T0,
        &[
            "revoke",
            "r1",
            "--holder",
            "admin@example.com",
            "--reason",
            "reassigned",
        ],
    )
    .ok();
    let revoked = watch.wait_event("r1", "revoke");
    assert_eq!(revoked["previous_holder"], ALICE, "{revoked}");
    assert_eq!(revoked["by"], "admin@example.com", "{revoked}");
    // Alice's claim that expires two seconds after the watch's T0, and that Bob takes over.
    lease(T0, &["acquire", "t1", "--ttl", "2s"]).ok();
    let expired = watch.wait_event("t1", "expired");
    assert_eq!(expired["holder"], ALICE, "{expired}");
    assert_eq!(expired["at"], at(2), "{expired}");
    lease(&at(3), &["acquire", "t1", "--holder", BOB, "--ttl", "1h"]).ok();
    let taken = watch.wait_for("Bob's takeover of t1", |v| {
        v["issue"] == "t1" && v["event"] == "acquire" && v["holder"] == BOB
    });
    assert_eq!(taken["previous_holder"], ALICE, "{taken}");
    assert_eq!(taken["token"], 2, "{taken}");
    // Bob's renewal of what he took is his own business again.
    lease(&at(4), &["renew", "t1", "--holder", BOB]).ok();
    lease(&at(4), &["acquire", "end", "--ttl", "never"]).ok();
    watch.wait_event("end", "acquire");
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
    watch.drain();

    let want: Vec<(String, String, String)> = [
        ("marker", "acquire", ALICE),
        ("r1", "acquire", ALICE),
        ("r1", "revoke", "-"),
        ("t1", "acquire", ALICE),
        ("t1", "expired", ALICE),
        ("t1", "acquire", BOB),
        ("end", "acquire", ALICE),
    ]
    .iter()
    .map(|(i, e, h)| ((*i).to_owned(), (*e).to_owned(), (*h).to_owned()))
    .collect();
    assert_eq!(events_seen(&watch), want, "{:#?}", watch.seen);

    // --holder names another: a replay of the same history shows Bob's events only.
    let mut bobs = Watch::spawn(
        &repo,
        repo.lease().now(&at(10)).arg_json().args([
            "watch",
            "--since",
            &at(-3600),
            "--holder",
            BOB,
        ]),
    );
    bobs.wait_for("Bob's renewal of t1", |v| {
        v["issue"] == "t1" && v["event"] == "renew"
    });
    bobs.signal("TERM");
    assert_eq!(bobs.wait_exit().code(), Some(0), "{}", bobs.stderr());
    bobs.drain();
    let want: Vec<(String, String, String)> = [
        ("b1", "acquire", BOB),
        ("b1", "release", "-"),
        ("t1", "acquire", BOB),
        ("t1", "renew", BOB),
    ]
    .iter()
    .map(|(i, e, h)| ((*i).to_owned(), (*e).to_owned(), (*h).to_owned()))
    .collect();
    assert_eq!(events_seen(&bobs), want, "{:#?}", bobs.seen);

    // --mine and --holder are one or the other.
    repo.lease()
        .args(["watch", "--mine", "--holder", BOB])
        .run()
        .code(2);
}
