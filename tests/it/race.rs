//! Real concurrent processes on one issue: the compare-and-swap must never hand out a token
//! twice, and the ledger must record exactly the events that succeeded.
//!
//! Eight threads start together on a barrier; each runs forty acquire/release cycles of the
//! binary as its own holder. Nothing sleeps: the only synchronisation is the barrier and the
//! ref itself.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

use serde_json::Value;

use crate::env::{Run, TestRepo};

const WORKERS: usize = 8;
const CYCLES: usize = 40;

/// What one worker saw.
#[derive(Default, Debug)]
struct Tally {
    /// Tokens of the acquires that succeeded.
    tokens: Vec<u64>,
    /// Releases that succeeded.
    releases: usize,
    /// Acquires refused because someone else held the lease.
    refused: usize,
}

fn worker(repo: &TestRepo, holder: &str, barrier: &Barrier) -> Tally {
    let acquire = repo.lease().args([
        "--json", "acquire", "hot", "--holder", holder, "--ttl", "never",
    ]);
    let release = repo
        .lease()
        .args(["--json", "release", "hot", "--holder", holder]);
    let mut tally = Tally::default();
    barrier.wait();
    for cycle in 0..CYCLES {
        let run = Run::capture(acquire.command(), format!("{holder} acquire #{cycle}"));
        let v: Value = run.json();
        match (run.code, v["outcome"].as_str()) {
            (0, Some("acquired")) => {
                assert_eq!(v["holder"], holder, "{run}");
                assert_eq!(v["wrote"], true, "a new tenure is always written: {run}");
                tally.tokens.push(v["token"].as_u64().expect("a token"));
            }
            (3, Some("held")) => {
                assert_ne!(v["holder"], holder, "held by myself? {run}");
                tally.refused += 1;
                continue;
            }
            _ => panic!("unexpected acquire answer\n{run}"),
        }
        // Only the holder can free an open-ended lease, so this release must succeed.
        let run = Run::capture(release.command(), format!("{holder} release #{cycle}"));
        run.ok();
        let v = run.json();
        assert_eq!(v["outcome"], "released", "{run}");
        assert_eq!(
            v["token"],
            *tally.tokens.last().expect("just acquired"),
            "release keeps the token: {run}"
        );
        tally.releases += 1;
    }
    tally
}

#[test]
fn concurrent_processes_never_share_a_token() {
    let repo = Arc::new(TestRepo::new());
    let barrier = Arc::new(Barrier::new(WORKERS));
    let handles: Vec<_> = (0..WORKERS)
        .map(|i| {
            let repo = Arc::clone(&repo);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || worker(&repo, &format!("worker-{i}"), &barrier))
        })
        .collect();
    let tallies: Vec<Tally> = handles
        .into_iter()
        .map(|h| h.join().expect("a worker panicked"))
        .collect();

    let all_tokens: Vec<u64> = tallies.iter().flat_map(|t| t.tokens.clone()).collect();
    let tenures = all_tokens.len();
    let releases: usize = tallies.iter().map(|t| t.releases).sum();
    let refused: usize = tallies.iter().map(|t| t.refused).sum();
    assert_eq!(tenures + refused, WORKERS * CYCLES);
    assert!(tenures > 0, "someone must have won");
    assert_eq!(releases, tenures, "every tenure was released by its holder");

    // No token was issued twice, and they are exactly 1..=N.
    let distinct: BTreeSet<u64> = all_tokens.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        tenures,
        "a token was issued twice: {tallies:?}"
    );
    let expected: BTreeSet<u64> = (1..=tenures as u64).collect();
    assert_eq!(distinct, expected, "tokens are 1..=N with no gap");
    // Each worker saw its own tokens increase.
    for t in &tallies {
        assert!(t.tokens.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    }

    // The final state: free, last token N.
    let shown = repo.json_at(crate::env::T0, 0, &["show", "hot"]);
    assert_eq!(shown["token"], tenures as u64);
    assert_eq!(shown["state"], "free");

    // The chain: one commit per successful event, acquire/release alternating, tokens 1..N.
    let chain = repo.chain("hot");
    assert_eq!(
        chain.len(),
        tenures + releases,
        "one commit per successful event"
    );
    assert_eq!(repo.commit_count("hot"), chain.len());
    let mut winners = Vec::new();
    for (i, (commit, lease)) in chain.iter().enumerate() {
        let tenure = (i / 2 + 1) as u64;
        assert_eq!(lease["issue"], "hot", "{commit}");
        assert_eq!(lease["token"], tenure, "{commit}: {lease}");
        if i % 2 == 0 {
            assert_eq!(lease["event"], "acquire", "{commit}: {lease}");
            assert!(lease["holder"].is_string(), "{commit}: {lease}");
            winners.push(lease["holder"].as_str().expect("holder").to_owned());
        } else {
            assert_eq!(lease["event"], "release", "{commit}: {lease}");
            assert_eq!(lease["holder"], Value::Null, "{commit}: {lease}");
            assert_eq!(
                lease["previous_holder"].as_str(),
                winners.last().map(String::as_str),
                "released by the holder of the tenure: {commit}"
            );
        }
    }
    // Each worker's tokens are exactly the tenures the chain credits to it.
    for (i, t) in tallies.iter().enumerate() {
        let holder = format!("worker-{i}");
        let credited: Vec<u64> = winners
            .iter()
            .enumerate()
            .filter(|(_, h)| **h == holder)
            .map(|(n, _)| n as u64 + 1)
            .collect();
        assert_eq!(credited, t.tokens, "{holder}");
    }
    let parents = repo.git(&["rev-list", "--parents", "refs/leases/hot"]);
    let roots = parents
        .lines()
        .filter(|l| l.split_whitespace().count() == 1)
        .count();
    assert_eq!(roots, 1, "one root, every other commit has one parent");
    assert!(parents.lines().all(|l| l.split_whitespace().count() <= 2));
    repo.assert_fsck();
}

/// Racing `acquire a` against `acquire a/b`: exactly one side can exist, and every loser must
/// be told so as a clash (exit 2) or a refusal (exit 3), never a git failure (exit 1).
#[test]
fn racing_clashing_ids_lose_as_clashes_not_failures() {
    const ROUNDS: usize = 10;
    const PAIRS: usize = 4;
    let mut bad = Vec::new();
    for round in 0..ROUNDS {
        let repo = Arc::new(TestRepo::new());
        let barrier = Arc::new(Barrier::new(PAIRS * 2));
        let handles: Vec<_> = (0..PAIRS * 2)
            .map(|i| {
                let repo = Arc::clone(&repo);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let issue = if i % 2 == 0 { "a" } else { "a/b" };
                    let cmd = repo
                        .lease()
                        .now(crate::env::T0)
                        .args(["--json", "acquire", issue, "--holder", &format!("h{i}")])
                        .command();
                    barrier.wait();
                    Run::capture(cmd, issue)
                })
            })
            .collect();
        let runs: Vec<Run> = handles
            .into_iter()
            .map(|h| h.join().expect("a racer panicked"))
            .collect();
        let refs = repo.lease_refs();
        let names: Vec<&str> = refs
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(
            names == ["refs/leases/a"] || names == ["refs/leases/a/b"],
            "exactly one side exists: {refs}"
        );
        assert_eq!(
            runs.iter().filter(|r| r.code == 0).count(),
            1,
            "exactly one winner: {runs:#?}"
        );
        for run in &runs {
            if ![0, 2, 3].contains(&run.code) {
                bad.push(format!("round {round}, acquire {}:\n{run}", run.command));
            }
        }
        repo.assert_fsck();
    }
    assert!(
        bad.is_empty(),
        "{} of {} racing acquires failed instead of being refused:\n{}",
        bad.len(),
        ROUNDS * PAIRS * 2,
        bad.first().map(String::as_str).unwrap_or_default()
    );
}
