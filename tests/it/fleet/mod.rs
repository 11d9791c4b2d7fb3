//! Fleets of workers: `acquire --any` and `run --any` claim exactly one free issue of several
//! candidates ([`watch`]: what happens to the ledgers, streamed).
//!
//! Racing claimers are real processes started together on a barrier, through a real
//! `git daemon` on 127.0.0.1 or on one local repository.

mod watch;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use crate::env::{at, race, Cmd, Run, TestRepo, T0};
use crate::server::Server;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

/// How many claimers race.
const RACERS: usize = 8;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

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
