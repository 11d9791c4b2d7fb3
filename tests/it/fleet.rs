//! Fleets of workers (issue 13): `acquire --any` and `run --any` claim exactly one free issue
//! of several candidates, and `watch` streams what happens to the ledgers.
//!
//! Racing claimers are real processes started together on a barrier, through a real
//! `git daemon` on 127.0.0.1 or on one local repository. `watch` runs as a child process whose
//! standard output a thread reads line by line; every wait is a bounded loop on what it
//! printed or on the process's state, never a sleep that decides an outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::env::{at, Cmd, Run, TestRepo, Watch, BOUND, T0};
use crate::server::Server;
use crate::session::start_ticks;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

/// How many claimers race.
const RACERS: usize = 8;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Runs every command of `cmds` at once (each on its own thread, released together by a
/// barrier) and returns their runs in the same order.
pub fn race(cmds: Vec<Cmd>) -> Vec<Run> {
    let barrier = Arc::new(Barrier::new(cmds.len()));
    let handles: Vec<_> = cmds
        .into_iter()
        .enumerate()
        .map(|(i, cmd)| {
            let barrier = Arc::clone(&barrier);
            let mut command = cmd.command();
            command.stdin(Stdio::null());
            std::thread::spawn(move || {
                barrier.wait();
                Run::capture(command, format!("racer {i}"))
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a racer thread panicked"))
        .collect()
}

/// `acquire --any <candidates> --ttl 1h` as `holder`, in JSON, at T0 (with `--remote origin`
/// when `remote`).
fn any_cmd(repo: &TestRepo, holder: &str, candidates: &[String], remote: bool) -> Cmd {
    let mut cmd = repo
        .lease()
        .now(T0)
        .arg_json()
        .args(["acquire", "--any", "--ttl", "1h", "--holder", holder]);
    if remote {
        cmd = cmd.args(["--remote", "origin"]);
    }
    cmd.args(candidates)
}

/// Races `--any` claimers over `candidates` ([`any_cmd`]), one per holder of `holders`, each
/// in its repository of `repos` (in order), and returns their runs.
fn race_any<'a>(
    repos: impl IntoIterator<Item = &'a TestRepo>,
    holders: &[String],
    candidates: &[String],
    remote: bool,
) -> Vec<Run> {
    let cmds = repos
        .into_iter()
        .zip(holders)
        .map(|(repo, h)| any_cmd(repo, h, candidates, remote))
        .collect();
    race(cmds)
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

/// Checks the answers of a race of `--any` claimers over `candidates`: every winner got a
/// distinct candidate with the token `tokens` says it must have, exactly `winners` won, and
/// the others exited 3 with outcome `held`, no issue and nothing written. Returns the winners
/// by issue.
#[track_caller]
fn check_race(
    runs: &[Run],
    holders: &[String],
    candidates: &[String],
    tokens: &BTreeMap<String, u64>,
    winners: usize,
) -> BTreeMap<String, String> {
    let mut won = BTreeMap::new();
    for (run, holder) in runs.iter().zip(holders) {
        let v = run.json();
        match run.code {
            0 => {
                assert_eq!(v["outcome"], "acquired", "{run}");
                assert_eq!(v["wrote"], true, "{run}");
                assert_eq!(v["holder"], json!(holder), "{run}");
                assert_eq!(v["candidates"], json!(candidates.len()), "{run}");
                let issue = v["issue"].as_str().expect("an issue").to_owned();
                assert!(candidates.contains(&issue), "not a candidate: {run}");
                assert_eq!(
                    v["token"],
                    json!(tokens[&issue]),
                    "the token of {issue} is wrong: {run}"
                );
                if let Some(other) = won.insert(issue.clone(), holder.clone()) {
                    panic!("{issue} was claimed by both {other} and {holder}: {run}");
                }
            }
            3 => {
                assert_eq!(
                    v,
                    json!({"schema_version": 1, "outcome": "held", "wrote": false, "issue": null,
                           "candidates": candidates.len(), "attempts": v["attempts"]}),
                    "{run}"
                );
            }
            _ => panic!("unexpected answer\n{run}"),
        }
    }
    assert_eq!(won.len(), winners, "how many won: {runs:#?}");
    won
}

/// `git for-each-ref` of every ref of `repo`, as a set of lines.
fn refs(repo: &TestRepo) -> BTreeSet<String> {
    repo.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// acquire --any
// ---------------------------------------------------------------------------------------------

#[test]
fn racing_any_claimers_through_a_daemon_each_get_a_distinct_issue() {
    let daemon = Server::daemon();
    let holders: Vec<String> = (1..=RACERS).map(|i| format!("agent-{i}@fleet")).collect();
    let clients: Vec<TestRepo> = holders.iter().map(|h| daemon.client(h)).collect();

    // Half the candidates were claimed and released before: their next token is 2.
    let candidates = names("task-", RACERS);
    let mut tokens = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        if i % 2 == 0 {
            let prior = daemon.client(ALICE);
            prior
                .lease()
                .now(T0)
                .args(["acquire", c, "--remote", "origin"])
                .run()
                .ok();
            prior
                .lease()
                .now(T0)
                .args(["release", c, "--remote", "origin"])
                .run()
                .ok();
            tokens.insert(c.clone(), 2);
        } else {
            tokens.insert(c.clone(), 1);
        }
    }

    let runs = race_any(&clients, &holders, &candidates, true);
    let won = check_race(&runs, &holders, &candidates, &tokens, RACERS);

    // The server holds exactly what was reported: one new commit per candidate, by its winner.
    for (issue, holder) in &won {
        let chain = daemon.leases(issue);
        let tip = chain.last().expect("a ledger");
        assert_eq!(tip["holder"], json!(holder), "{issue}: {chain:#?}");
        assert_eq!(tip["event"], "acquire");
        assert_eq!(tip["token"], json!(tokens[issue]));
        assert_eq!(chain.len() as u64, 2 * tokens[issue] - 1, "{chain:#?}");
    }
    daemon.repo().assert_fsck();

    // Fewer candidates than claimers: four win, the other four exit 3, and every loss is one
    // push at most per lost candidate, so the server's ledgers have one commit each.
    let few = names("few-", RACERS / 2);
    let runs = race_any(&clients, &holders, &few, true);
    let ones = few.iter().map(|c| (c.clone(), 1)).collect();
    check_race(&runs, &holders, &few, &ones, RACERS / 2);
    for issue in &few {
        assert_eq!(daemon.leases(issue).len(), 1, "{issue}");
    }
}

#[test]
fn racing_any_claimers_on_one_repository_each_get_a_distinct_issue() {
    let repo = TestRepo::new();
    let holders: Vec<String> = (1..=RACERS).map(|i| format!("agent-{i}@fleet")).collect();
    let candidates = names("job-", RACERS);
    let tokens = candidates.iter().map(|c| (c.clone(), 1)).collect();
    let runs = race_any(std::iter::repeat(&repo), &holders, &candidates, false);
    check_race(&runs, &holders, &candidates, &tokens, RACERS);
    for issue in &candidates {
        assert_eq!(repo.commit_count(issue), 1, "{issue}");
    }

    let few = names("few-", 3);
    let ones = few.iter().map(|c| (c.clone(), 1)).collect();
    let runs = race_any(std::iter::repeat(&repo), &holders, &few, false);
    check_race(&runs, &holders, &few, &ones, 3);
    repo.assert_fsck();
}

#[test]
fn any_through_a_daemon_asks_only_for_its_candidates_and_fetches_no_id_that_extends_one() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    for c in ["n10", "n100", "n1x", "other"] {
        alice
            .lease()
            .now(T0)
            .args(["acquire", c, "--ttl", "1h", "--remote", "origin"])
            .run()
            .ok();
    }
    let bob = daemon.client(BOB);
    let trace = bob.scratch("trace").join("packets");
    let candidates = ["n1".to_owned(), "n10".to_owned()];
    let run = any_cmd(&bob, BOB, &candidates, true)
        .env("GIT_TRACE_PACKET", &trace)
        .run();
    run.ok();
    assert_eq!(
        run.json()["issue"],
        "n1",
        "n10 is alice's, so n1 is bob's: {run}"
    );
    let packets = std::fs::read_to_string(&trace).expect("the packet trace");
    // The fetch asks the remote for the candidates' names alone (protocol version 2's
    // ref-prefix), so it never lists a ledger outside them. (The push that follows is told
    // of every ref: receive-pack advertises them all.)
    let fetched: String = packets
        .lines()
        .filter(|l| l.contains("fetch<"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(packets.contains("ref-prefix refs/leases/n10"), "{packets}");
    assert!(
        !fetched.contains("refs/leases/other"),
        "another ledger was listed: {fetched}"
    );
    // A ledger whose id merely begins with a candidate's is listed, never fetched; a
    // candidate whose id begins with another's is fetched.
    let refs = bob.git(&["for-each-ref", "--format=%(refname)"]);
    assert!(refs.contains("/n10\n"), "{refs}");
    assert!(
        !refs.contains("n100") && !refs.contains("n1x") && !refs.contains("other"),
        "{refs}"
    );
}

#[test]
fn any_with_nothing_free_exits_3_and_writes_nothing() {
    // Through a daemon: every candidate is held by someone else.
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    let candidates = names("busy-", 3);
    for c in &candidates {
        alice
            .lease()
            .now(T0)
            .args(["acquire", c, "--ttl", "1h", "--remote", "origin"])
            .run()
            .ok();
    }
    let bob = daemon.client(BOB);
    // Bob has seen the remote before, so that his copies are current.
    bob.lease()
        .now(T0)
        .args(["list", "--remote", "origin"])
        .run()
        .ok();
    let server_before = daemon.refs();
    let bob_before = bob.snapshot();
    let pushes = || {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("Request receive-pack"))
            .count()
    };
    let pushes_before = pushes();
    let run = any_cmd(&bob, BOB, &candidates, true).run();
    run.code(3);
    assert_eq!(
        run.json(),
        json!({"schema_version": 1, "outcome": "held", "wrote": false, "issue": null, "candidates": 3, "attempts": 0}),
        "{run}"
    );
    assert_eq!(daemon.refs(), server_before, "the server's refs moved");
    assert_eq!(bob.snapshot(), bob_before, "bob's repository changed");
    assert_eq!(pushes(), pushes_before, "bob pushed nothing");

    // The text says so too.
    let run = bob
        .lease()
        .now(T0)
        .args(["acquire", "--any", "--remote", "origin"])
        .args(&candidates)
        .run();
    run.code(3).stdout_has("none of 3 candidates is free");

    // Locally.
    let repo = TestRepo::new();
    for c in &candidates {
        repo.lease()
            .now(T0)
            .args(["acquire", c, "--holder", ALICE])
            .run()
            .ok();
    }
    let before = repo.snapshot();
    let run = any_cmd(&repo, BOB, &candidates, false).run();
    run.code(3);
    assert_eq!(run.json()["outcome"], "held", "{run}");
    assert_eq!(
        repo.snapshot(),
        before,
        "a local --any with nothing free wrote"
    );
}

#[test]
fn any_reads_candidates_from_stdin_and_prefers_what_it_already_holds() {
    let repo = TestRepo::new();
    repo.lease()
        .now(T0)
        .args(["acquire", "a", "--holder", ALICE])
        .run()
        .ok();
    // `-` is stdin, one id a line, blank lines skipped; mixed with ids on the command line.
    let run = repo
        .lease()
        .now(T0)
        .arg_json()
        .args(["acquire", "--any", "-", "--holder", BOB])
        .stdin("a\n\n  b  \n")
        .run();
    run.ok();
    let v = run.json_has(&[
        ("outcome", json!("acquired")),
        ("issue", json!("b")),
        ("holder", json!(BOB)),
        ("token", json!(1)),
        ("candidates", json!(2)),
    ]);
    assert_eq!(repo.tip("b").as_deref(), v["commit"].as_str());

    // Bob asks again among c, b and d: he keeps b (a retry never takes a second issue).
    let run = repo
        .lease()
        .now(&at(60))
        .arg_json()
        .args(["acquire", "--any", "c", "-", "--holder", BOB])
        .stdin("b\nd\n")
        .run();
    run.ok();
    run.json_has(&[
        ("issue", json!("b")),
        ("event", json!("reacquire")),
        ("candidates", json!(3)),
    ]);
    assert!(repo.tip("c").is_none() && repo.tip("d").is_none());

    // Empty stdin: no candidate, none free.
    let run = repo
        .lease()
        .now(T0)
        .args(["acquire", "--any", "-", "--holder", BOB])
        .stdin("")
        .run();
    run.code(3).stdout_has("none of 0 candidates is free");
    // A bad id on stdin is bad input.
    repo.lease()
        .now(T0)
        .args(["acquire", "--any", "-", "--holder", BOB])
        .stdin("ok\nbad id\n")
        .run()
        .code(2);
}

#[test]
fn run_any_runs_the_command_for_the_issue_it_claimed() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    alice
        .lease()
        .args(["acquire", "r1", "--remote", "origin"])
        .run()
        .ok();
    let bob = daemon.client(BOB);
    let out = bob.scratch("out").join("issue");
    let script = format!(
        "echo \"$GIT_LEASE_ISSUE $GIT_LEASE_TOKEN\" > {}",
        out.display()
    );
    let run = bob
        .lease()
        .args([
            "run", "--any", "--remote", "origin", "r1", "r2", "--", "sh", "-c",
        ])
        .args([script.as_str()])
        .run();
    run.ok();
    assert_eq!(
        std::fs::read_to_string(&out).expect("the child ran"),
        "r2 1\n"
    );
    let chain = daemon.leases("r2");
    let events: Vec<&str> = chain.iter().filter_map(|l| l["event"].as_str()).collect();
    assert_eq!(events, ["acquire", "complete"], "{chain:#?}");

    // Nothing free: exit 3, the child never starts.
    std::fs::remove_file(&out).expect("remove the marker");
    let run = bob
        .lease()
        .args(["run", "--any", "--remote", "origin", "r1", "--", "sh", "-c"])
        .args([script.as_str()])
        .run();
    run.code(3).stderr_has("is not free");
    assert!(!out.exists(), "the child ran");

    // Without --any, run takes exactly one issue.
    bob.lease()
        .args(["run", "r1", "r2", "--", "true"])
        .run()
        .code(2);
}

#[test]
fn run_any_wait_keeps_the_candidates_it_read_from_stdin_while_it_waits() {
    let repo = TestRepo::new();
    // Alice's lease on the only candidate ends one second after the clock both start at.
    repo.lease()
        .now(T0)
        .args(["acquire", "w", "--holder", ALICE, "--ttl", "1s"])
        .run()
        .ok();
    let out = repo.scratch("out").join("issue");
    let script = format!("echo \"$GIT_LEASE_ISSUE\" > {}", out.display());
    // The first round finds `w` held and waits; the round after its expiry must still know
    // the candidates read from stdin the first time.
    repo.lease()
        .now(T0)
        .args([
            "run",
            "--any",
            "--wait=1m",
            "--holder",
            BOB,
            "-",
            "--",
            "sh",
            "-c",
        ])
        .args([script.as_str()])
        .stdin("w\n")
        .run()
        .ok();
    assert_eq!(std::fs::read_to_string(&out).expect("the child ran"), "w\n");
}

// ---------------------------------------------------------------------------------------------
// watch
// ---------------------------------------------------------------------------------------------

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
