//! An ordered queue: `acquire --any --ordered` and `run --any --ordered` take the candidates
//! as a priority order. A claimer's first write goes to the first candidate it reads as free;
//! it passes over one it last read as free only after a race lost to another claimer, and
//! says so (`lost`, `passed_over`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::env::race;
use crate::env::{Run, TestRepo, T0};
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
/// before it, once every claimer has stopped: each won a distinct candidate that was free, and
/// together they hold exactly the first free ones of the queue (no inversion). None says it
/// passed over a free one, and each one a claimer says it moved from is behind the one it
/// holds. Returns the winners by issue, with the token each was told.
#[track_caller]
fn check_settled_race(
    runs: &[Run],
    holders: &[String],
    candidates: &[String],
    taken: &[&str],
) -> BTreeMap<String, (String, u64)> {
    let place = |issue: &str| candidates.iter().position(|c| c == issue);
    let mut won = BTreeMap::new();
    for (run, holder) in runs.iter().zip(holders) {
        run.ok();
        let v = run.json();
        assert_eq!(v["outcome"], "acquired", "{run}");
        assert_eq!(v["holder"], json!(holder), "{run}");
        let issue = v["issue"].as_str().expect("an issue").to_owned();
        let at = place(&issue).unwrap_or_else(|| panic!("not a candidate: {run}"));
        assert!(!taken.contains(&issue.as_str()), "taken before: {run}");
        assert_eq!(
            v["passed_over"],
            json!([]),
            "stopped before a free one: {run}"
        );
        for left in v["moved_from"]
            .as_array()
            .expect("moved_from with --ordered")
        {
            let left = left.as_str().and_then(place);
            assert!(
                left.is_some_and(|l| l > at),
                "moved down, or not a candidate: {run}"
            );
        }
        let token = v["token"].as_u64().expect("a token");
        if let Some((other, _)) = won.insert(issue.clone(), (holder.clone(), token)) {
            panic!("{issue} was claimed by both {other} and {holder}: {run}");
        }
    }
    let first_free: Vec<&String> = candidates
        .iter()
        .filter(|c| !taken.contains(&c.as_str()))
        .take(runs.len())
        .collect();
    let claimed: Vec<&String> = won.keys().collect();
    let mut first_free_sorted = first_free.clone();
    first_free_sorted.sort();
    assert_eq!(
        claimed, first_free_sorted,
        "an inversion in the queue: {won:?}"
    );
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
fn racing_ordered_claimers_on_one_repository_settle_on_the_first_free_candidates() {
    let repo = TestRepo::new();
    // Twice as many candidates as claimers: any inversion would leave one free ahead.
    let candidates = names("job-", 2 * RACERS);
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
    let won = check_settled_race(&runs, &holders, &candidates, &taken);
    assert_eq!(won.len(), RACERS);
    // What each claimer was told is what the ledger holds; every other candidate is free.
    for issue in &candidates {
        let show = repo.lease().now(T0).arg_json().args(["show", issue]).run();
        if show.code == 4 {
            assert!(!won.contains_key(issue), "{issue} was never leased: {show}");
            continue;
        }
        let v = show.json();
        match won.get(issue) {
            Some((holder, token)) => {
                assert_eq!(v["holder"], json!(holder), "{issue}: {v}");
                assert_eq!(v["token"], json!(token), "{issue}: {v}");
            }
            None if taken.contains(&issue.as_str()) => assert_eq!(v["holder"], ALICE, "{v}"),
            None => assert!(
                v["holder"].is_null(),
                "{issue} is held but nobody said so: {v}"
            ),
        }
    }
    repo.assert_fsck();
}

#[test]
fn racing_ordered_claimers_through_a_daemon_settle_on_the_first_free_candidates() {
    let daemon = Server::daemon();
    let holders: Vec<String> = (1..=RACERS).map(|i| format!("agent-{i}@queue")).collect();
    let clients: Vec<TestRepo> = holders.iter().map(|h| daemon.client(h)).collect();
    let candidates = names("task-", 2 * RACERS);
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
    let won = check_settled_race(&runs, &holders, &candidates, &taken);
    assert_eq!(won.len(), RACERS);
    // The server holds exactly what was reported, and every candidate left is free there.
    for issue in &candidates {
        let newest = daemon.leases(issue).into_iter().last();
        let holder = newest.as_ref().map(|v| v["holder"].clone());
        match won.get(issue) {
            Some((who, token)) => {
                let newest = newest.expect("a claimed ledger");
                assert_eq!(newest["holder"], json!(who), "{issue}: {newest}");
                assert_eq!(newest["token"], json!(token), "{issue}: {newest}");
            }
            None if taken.contains(&issue.as_str()) => assert_eq!(holder, Some(json!(ALICE))),
            None => assert!(
                holder.is_none_or(|h| h.is_null()),
                "{issue} is held on the server but nobody said so: {newest:?}"
            ),
        }
    }
    daemon.repo().assert_fsck();
}

/// A daemon where Bob holds q1 and, the moment a claim of q2 lands, the server runs each of
/// `then` as `git lease <args>` on its own repository (at T0).
fn daemon_acting_when_q2_is_claimed(then: &[&str]) -> Server {
    let daemon = Server::daemon();
    daemon
        .client(BOB)
        .lease()
        .now(T0)
        .args(["acquire", "q1", "--remote", "origin", "--ttl", "1h"])
        .run()
        .ok();
    let lease = format!("GIT_LEASE_NOW={T0} '{}' -C \"$PWD\"", crate::env::BIN);
    let acts: Vec<String> = then
        .iter()
        .map(|a| format!("{lease} {a} >/dev/null"))
        .collect();
    daemon.install_hook(
        "post-receive",
        &format!(
            "if grep -q '^0\\{{40\\}} [0-9a-f]* refs/leases/q2$'; then {}; fi",
            acts.join("; ")
        ),
    );
    daemon
}

/// A claimer that took a candidate while one ahead of it was freed moves up to it, leaving
/// the one it took in the same atomic push.
#[test]
fn an_ordered_claimer_moves_up_to_a_candidate_freed_ahead_of_it_in_one_push() {
    let daemon = daemon_acting_when_q2_is_claimed(&[&format!("release q1 --holder {BOB}")]);
    let alice = daemon.client(ALICE);
    let v = ordered(&alice, ALICE, &names("q", 3), true)
        .run()
        .ok()
        .json();
    assert_eq!(v["issue"], "q1", "{v}");
    assert_eq!(v["moved_from"], json!(["q2"]), "{v}");
    assert_eq!(v["passed_over"], json!([]), "{v}");
    assert_eq!(
        (v["attempts"].clone(), v["lost"].clone()),
        (json!(2), json!(0)),
        "{v}"
    );
    assert_eq!(v["token"], 2, "Bob's tenure was token 1: {v}");
    // On the server: q2's tenure began and ended, token kept; q1 is Alice's.
    let q2 = daemon.leases("q2");
    assert_eq!(q2.len(), 2, "{q2:#?}");
    assert_eq!(q2[1]["event"], "release", "{q2:#?}");
    assert_eq!(q2[1]["previous_holder"], ALICE, "{q2:#?}");
    assert_eq!(q2[1]["token"], 1, "{q2:#?}");
    let q1 = daemon.leases("q1");
    assert_eq!(
        q1.last().map(|v| &v["holder"]),
        Some(&json!(ALICE)),
        "{q1:#?}"
    );
    daemon.repo().assert_fsck();
}

/// A claimer whose tenure is revoked while it settles moves nothing: it leaves no tenure it
/// no longer holds, and does not take the one freed ahead of it.
#[test]
fn an_ordered_claimer_revoked_while_it_settles_moves_nothing() {
    let daemon = daemon_acting_when_q2_is_claimed(&[
        &format!("release q1 --holder {BOB}"),
        "revoke q2 --holder ops --reason reassigned",
    ]);
    let alice = daemon.client(ALICE);
    let v = ordered(&alice, ALICE, &names("q", 3), true)
        .run()
        .ok()
        .json();
    assert_eq!(v["issue"], "q2", "{v}");
    assert_eq!(v["moved_from"], json!([]), "{v}");
    assert_eq!(v["attempts"], 1, "no move was tried: {v}");
    let q1 = daemon.leases("q1");
    assert_eq!(
        q1.last().map(|v| v["event"].clone()),
        Some(json!("release")),
        "{q1:#?}"
    );
    let q2 = daemon.leases("q2");
    assert_eq!(
        q2.last().map(|v| v["event"].clone()),
        Some(json!("revoke")),
        "{q2:#?}"
    );
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
