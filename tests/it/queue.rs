//! An ordered queue: `acquire --any --ordered` and `run --any --ordered` take the candidates
//! as a priority order. A claimer's first write goes to the first candidate it reads as free;
//! it passes over one it last read as free only after a race lost to another claimer, and
//! says so (`lost`, `passed_over`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::env::{Run, TestRepo, T0};
use crate::fleet::race;
use crate::server::Server;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

/// How many claimers race.
const RACERS: usize = 8;

fn names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

/// `acquire --any --ordered <candidates> --ttl 1h` as `holder`, in JSON, at T0.
fn ordered(repo: &TestRepo, holder: &str, candidates: &[String], remote: bool) -> crate::env::Cmd {
    let mut cmd = repo.lease().now(T0).arg_json().args([
        "acquire",
        "--any",
        "--ordered",
        "--ttl",
        "1h",
        "--holder",
        holder,
    ]);
    if remote {
        cmd = cmd.args(["--remote", "origin"]);
    }
    cmd.args(candidates)
}

/// Checks a race of ordered claimers over `candidates`, of which `taken` were held by others
/// before it: every claimer won a distinct candidate that was free, with token 1; one that
/// lost no race passed over nothing; and every candidate ahead of a claimed one, unless the
/// claimer says it passed it over, was taken by someone else (it read it taken). Returns the
/// winners by issue.
#[track_caller]
fn check_ordered_race(
    runs: &[Run],
    holders: &[String],
    candidates: &[String],
    taken: &[&str],
) -> BTreeMap<String, String> {
    let mut won = BTreeMap::new();
    let mut answers = Vec::new();
    for (run, holder) in runs.iter().zip(holders) {
        run.ok();
        let v = run.json();
        assert_eq!(v["outcome"], "acquired", "{run}");
        assert_eq!(v["holder"], json!(holder), "{run}");
        assert_eq!(v["token"], 1, "a tenure was taken twice: {run}");
        let issue = v["issue"].as_str().expect("an issue").to_owned();
        assert!(candidates.contains(&issue), "not a candidate: {run}");
        assert!(!taken.contains(&issue.as_str()), "taken before: {run}");
        if let Some(other) = won.insert(issue.clone(), holder.clone()) {
            panic!("{issue} was claimed by both {other} and {holder}: {run}");
        }
        answers.push((issue, v));
    }
    for (issue, v) in &answers {
        let passed: Vec<&str> = v["passed_over"]
            .as_array()
            .expect("passed_over with --ordered")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if v["lost"] == 0 {
            assert!(passed.is_empty(), "passed over without a lost race: {v}");
        }
        for ahead in candidates.iter().take_while(|c| *c != issue) {
            if passed.contains(&ahead.as_str()) {
                continue;
            }
            assert!(
                taken.contains(&ahead.as_str()) || won.contains_key(ahead),
                "{issue} was claimed while {ahead}, ahead of it, stayed free unread: {v}"
            );
        }
    }
    won
}

#[test]
fn ordered_claims_one_after_another_take_the_queue_in_priority_order() {
    let repo = TestRepo::new();
    let queue = names("q", 5);
    repo.run_at(T0, &["acquire", "q2", "--holder", BOB]).ok();

    let mut got = Vec::new();
    for i in 1..=4 {
        let holder = format!("agent-{i}@queue");
        let v = ordered(&repo, &holder, &queue, false).run().ok().json();
        assert_eq!(v["attempts"], 1, "{v}");
        assert_eq!(v["lost"], 0, "{v}");
        assert_eq!(v["passed_over"], json!([]), "{v}");
        got.push(v["issue"].as_str().expect("an issue").to_owned());
    }
    assert_eq!(got, ["q1", "q3", "q4", "q5"]);

    // Nothing is free now: exit 3, nothing written.
    let before = repo.lease_refs();
    let v = ordered(&repo, "late@queue", &queue, false)
        .run()
        .code(3)
        .json();
    assert_eq!(v["issue"], Value::Null);
    assert_eq!(repo.lease_refs(), before);

    // Released ones are free again: the first of them is next.
    repo.run_at(T0, &["release", "q4", "--holder", "agent-3@queue"])
        .ok();
    repo.run_at(T0, &["release", "q3", "--holder", "agent-2@queue"])
        .ok();
    let v = ordered(&repo, ALICE, &queue, false).run().ok().json();
    assert_eq!(v["issue"], "q3", "{v}");
    assert_eq!(v["token"], 2, "{v}");

    // A claimer's own live lease comes first, wherever it is in the order.
    let v = ordered(&repo, ALICE, &queue, false).run().ok().json();
    assert_eq!(v["issue"], "q3", "{v}");
    assert_eq!(v["token"], 2, "{v}");
}

#[test]
fn without_ordered_the_json_names_no_passed_over_and_ordered_needs_any() {
    let repo = TestRepo::new();
    let v = repo
        .lease()
        .now(T0)
        .arg_json()
        .args(["acquire", "--any", "a", "b", "--holder", ALICE])
        .run()
        .ok()
        .json();
    assert_eq!(v["lost"], 0, "{v}");
    assert!(v.get("passed_over").is_none(), "{v}");
    repo.lease()
        .args(["acquire", "--ordered", "a", "--holder", ALICE])
        .run()
        .code(2);
}

#[test]
fn racing_ordered_claimers_on_one_repository_take_free_candidates_and_skip_only_after_a_lost_race()
{
    let repo = TestRepo::new();
    let candidates = names("job-", RACERS + 2);
    // Two of the queue, one near its head, are held by Alice already.
    let taken = ["job-2", "job-5"];
    for t in taken {
        repo.run_at(T0, &["acquire", t, "--holder", ALICE]).ok();
    }
    let holders: Vec<String> = (1..=RACERS).map(|i| format!("agent-{i}@queue")).collect();
    let cmds = holders
        .iter()
        .map(|h| ordered(&repo, h, &candidates, false))
        .collect();
    let runs = race(cmds);
    let won = check_ordered_race(&runs, &holders, &candidates, &taken);
    assert_eq!(won.len(), RACERS);
    for issue in won.keys() {
        assert_eq!(repo.commit_count(issue), 1, "{issue}");
    }
    repo.assert_fsck();
}

#[test]
fn racing_ordered_claimers_through_a_daemon_take_free_candidates_and_skip_only_after_a_lost_race() {
    let daemon = Server::daemon();
    let holders: Vec<String> = (1..=RACERS).map(|i| format!("agent-{i}@queue")).collect();
    let clients: Vec<TestRepo> = holders.iter().map(|h| daemon.client(h)).collect();
    let candidates = names("task-", RACERS + 2);
    let taken = ["task-1", "task-4"];
    let alice = daemon.client(ALICE);
    for t in taken {
        alice
            .lease()
            .now(T0)
            .args(["acquire", t, "--remote", "origin", "--ttl", "1h"])
            .run()
            .ok();
    }
    let cmds = clients
        .iter()
        .zip(&holders)
        .map(|(c, h)| ordered(c, h, &candidates, true))
        .collect();
    let runs = race(cmds);
    let won = check_ordered_race(&runs, &holders, &candidates, &taken);
    assert_eq!(won.len(), RACERS);
    // The server holds exactly what was reported: one commit per claimed candidate.
    for (issue, holder) in &won {
        let chain = daemon.leases(issue);
        assert_eq!(chain.len(), 1, "{issue}: {chain:#?}");
        assert_eq!(chain[0]["holder"], json!(holder));
    }
    daemon.repo().assert_fsck();
}

#[test]
fn run_any_ordered_runs_the_command_for_the_first_free_candidate() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["acquire", "p1", "--holder", ALICE, "--ttl", "never"])
        .ok();
    let out = repo.scratch("out").join("issue");
    let script = format!("echo \"$GIT_LEASE_ISSUE\" > {}", out.display());
    repo.lease()
        .args([
            "run",
            "--any",
            "--ordered",
            "--holder",
            BOB,
            "p1",
            "p2",
            "p3",
            "--",
            "sh",
            "-c",
        ])
        .args([script.as_str()])
        .run()
        .ok();
    assert_eq!(
        std::fs::read_to_string(&out).expect("the child ran"),
        "p2\n"
    );
}
