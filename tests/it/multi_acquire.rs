//! Several issues in one `acquire`: all or none, locally (one ref transaction) and through a
//! remote (one atomic push), alone and under a race; a refusal reports no untaken issue as
//! acquired, and clashing or repeated ids are not git failures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Barrier};

use serde_json::{json, Value};

use crate::env::{assert_fields, at_min, issues, jrun, Run, TestRepo, T0};
use crate::server::Server;
use crate::session::{acquire, assert_verify_clean, each, session_hash, with_secret, ALICE, BOB};

#[test]
fn acquiring_several_issues_is_all_or_none() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "2", "--holder", "other"]);
    let before = repo.snapshot();
    let run = repo.run_at(
        &at_min(1),
        &["--json", "acquire", "1", "2", "3", "--holder", "me"],
    );
    run.code(3);
    let v = run.json();
    let reports = v.as_array().expect("one report per issue");
    assert_eq!(reports.len(), 3);
    assert_eq!(reports[1]["outcome"], "held");
    assert_eq!(reports[1]["holder"], "other");
    assert_eq!(repo.snapshot(), before, "nothing was written");
    // When none is held, all are taken in one go.
    let v = repo.json_at(&at_min(1), 0, &["acquire", "4", "5", "6", "--holder", "me"]);
    let reports = v.as_array().expect("array");
    assert_eq!(reports.len(), 3);
    for (r, id) in reports.iter().zip(["4", "5", "6"]) {
        assert_eq!(r["issue"], id);
        assert_eq!(r["outcome"], "acquired");
        assert_eq!(r["token"], 1);
        assert_eq!(repo.lease_json(id)["holder"], "me");
    }
}

#[test]
fn a_refused_multi_acquire_does_not_report_untaken_issues_as_acquired() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "2", "--holder", "other"]);
    let run = repo.run_at(
        &at_min(1),
        &["--json", "acquire", "1", "2", "3", "--holder", "me"],
    );
    run.code(3);
    let v = run.json();
    for r in v.as_array().expect("array") {
        if r["issue"] != "2" {
            assert_ne!(
                r["outcome"], "acquired",
                "issue {} was not acquired (nothing was written, holder {}), yet reported as \
                 acquired: {r}",
                r["issue"], r["holder"]
            );
        }
    }
    let human = repo.run_at(&at_min(1), &["acquire", "1", "2", "3", "--holder", "me"]);
    human.code(3);
    assert!(
        !human.stdout.lines().any(|l| l.starts_with("acquired")),
        "the human report claims an acquire that did not happen:\n{human}"
    );
}

#[test]
fn one_acquire_of_clashing_ids_is_refused_as_a_clash() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["acquire", "x", "x/y", "--holder", "me"]);
    run.code(2).stderr_has("clash");
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn one_acquire_naming_an_issue_twice_is_not_a_git_failure() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["--json", "acquire", "5", "5", "--holder", "me"]);
    assert!(
        run.code == 0 || run.code == 2,
        "a repeated id is either taken once or refused as bad usage, not a failure:\n{run}"
    );
    if run.code == 0 {
        assert_eq!(repo.commit_count("5"), 1);
        assert_eq!(repo.lease_json("5")["token"], 1);
    } else {
        assert_eq!(repo.lease_refs(), "");
    }
}

#[test]
fn acquire_of_several_issues_takes_all_of_them_in_one_answer() {
    let repo = TestRepo::new();
    let mut claim = vec!["acquire", "a", "b", "c"];
    claim.extend(["--holder", ALICE, "--ttl", "1h", "--session", "--task", "T"]);
    let run = jrun(&repo, 0, &claim);
    run.ok();
    let v = run.json();
    let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
    assert_eq!(answers.len(), 3, "{run}");
    let secret = answers[0]["secret"].as_str().expect("a secret").to_owned();
    for (answer, issue) in answers.iter().zip(["a", "b", "c"]) {
        assert_eq!(answer["issue"], json!(issue), "in the order given\n{run}");
        assert_fields(
            answer,
            &[
                ("outcome", json!("acquired")),
                ("wrote", json!(true)),
                ("holder", json!(ALICE)),
                ("token", json!(1)),
                ("secret", json!(secret)),
            ],
        );
        assert_eq!(repo.commit_count(issue), 1);
        assert_fields(
            &repo.lease_json(issue),
            &[("task", json!("T")), ("session", session_hash(&secret))],
        );
        assert_eq!(answer["commit"], json!(repo.tip(issue).expect("a ledger")));
    }
    // The one session frees each of them.
    for issue in ["a", "b", "c"] {
        jrun(&repo, 1, &["release", issue, "--holder", ALICE]).code(3);
        jrun(
            &repo,
            1,
            &with_secret(&["complete", issue, "--holder", ALICE], &secret),
        )
        .ok();
    }
    // Again, over a history: token 2 everywhere; a repeated id counts once.
    let run = jrun(
        &repo,
        2,
        &[
            "acquire", "a", "b", "c", "a", "--holder", BOB, "--ttl", "1h",
        ],
    );
    run.ok();
    let v = run.json();
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{run}");
    for answer in v.as_array().expect("an array") {
        assert_eq!(answer["token"], json!(2), "{run}");
        assert!(
            answer.get("secret").is_none(),
            "no session, no secret\n{run}"
        );
    }
    assert_verify_clean(&repo, 2);
}

#[test]
fn a_refused_multi_claim_writes_nothing_and_reports_the_others_skipped() {
    let repo = TestRepo::new();
    // `a` has a history (free now), `b` is held by bob, `c` was never leased.
    acquire(&repo, 0, "a", BOB, "1h").ok();
    jrun(&repo, 1, &["release", "a", "--holder", BOB]).ok();
    acquire(&repo, 1, "b", BOB, "1h").ok();
    let before = repo.snapshot();
    let refs_before = repo.lease_refs();

    let mut claim = vec!["acquire", "a", "b", "c"];
    claim.extend(["--holder", ALICE, "--ttl", "1h", "--session"]);
    let run = jrun(&repo, 5, &claim);
    run.code(3);
    let v = run.json();
    let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
    let outcomes: Vec<(Value, Value, Value)> = answers
        .iter()
        .map(|a| (a["issue"].clone(), a["outcome"].clone(), a["wrote"].clone()))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (json!("a"), json!("skipped"), json!(false)),
            (json!("b"), json!("held"), json!(false)),
            (json!("c"), json!("skipped"), json!(false)),
        ],
        "{run}"
    );
    assert_eq!(answers[1]["holder"], json!(BOB), "{run}");
    assert!(
        answers.iter().all(|a| a.get("secret").is_none()),
        "a refused claim shows no secret\n{run}"
    );
    assert_eq!(repo.snapshot(), before, "a refused claim wrote something");
    assert_eq!(repo.lease_refs(), refs_before);
    assert_eq!(repo.tip("c"), None);

    // The human form says so and exits 3 too.
    let human = repo.run_at(&at_min(5), &["acquire", "c", "b", "--holder", ALICE]);
    human.code(3);
    assert_eq!(repo.snapshot(), before);

    // Once b is free, the same claim takes all three.
    jrun(&repo, 6, &["release", "b", "--holder", BOB]).ok();
    let run = jrun(&repo, 7, &["acquire", "a", "b", "c", "--holder", ALICE]);
    run.ok();
    let tokens = each(&run.json(), "token");
    assert_eq!(tokens, vec![json!(2), json!(2), json!(1)], "{run}");
    assert_verify_clean(&repo, 7);
}

const RACERS_PER_SIDE: usize = 6;
const RACE_CYCLES: usize = 5;

/// What one racing worker saw.
#[derive(Debug, Default)]
struct ClaimTally {
    holder: String,
    issues: Vec<&'static str>,
    /// For every claim it won: the token of each issue.
    wins: Vec<BTreeMap<String, u64>>,
    refused: usize,
    lost_race: usize,
}

fn claim_worker(
    repo: &TestRepo,
    holder: String,
    issues: Vec<&'static str>,
    barrier: &Barrier,
) -> ClaimTally {
    let mut args: Vec<&str> = vec!["acquire"];
    args.extend(issues.iter().copied());
    args.extend(["--holder", holder.as_str(), "--ttl", "never"]);
    let mut tally = ClaimTally {
        holder: holder.clone(),
        issues: issues.clone(),
        ..ClaimTally::default()
    };
    barrier.wait();
    for _ in 0..RACE_CYCLES {
        let run = repo.lease().arg_json().args(&args).run();
        match run.code {
            0 => {
                let v = run.json();
                let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
                assert_eq!(answers.len(), issues.len(), "{run}");
                let mut tokens = BTreeMap::new();
                for (answer, issue) in answers.iter().zip(&issues) {
                    assert_eq!(answer["issue"], json!(issue), "{run}");
                    assert_eq!(answer["outcome"], json!("acquired"), "{run}");
                    assert_eq!(answer["wrote"], json!(true), "{run}");
                    assert_eq!(answer["holder"], json!(holder), "{run}");
                    tokens.insert(
                        issue.to_string(),
                        answer["token"].as_u64().expect("a token"),
                    );
                }
                // Open-ended and only its holder can free it: it holds every issue now.
                for issue in &issues {
                    let shown = repo.lease().arg_json().args(["show", issue]).run();
                    shown.ok();
                    let s = shown.json();
                    assert_eq!(s["holder"], json!(holder), "a partial claim?\n{shown}");
                    assert_eq!(s["token"], json!(tokens[*issue]), "{shown}");
                }
                for issue in &issues {
                    let rel = repo
                        .lease()
                        .arg_json()
                        .args(["release", issue, "--holder", holder.as_str()])
                        .run();
                    rel.ok();
                    assert_eq!(rel.json()["outcome"], json!("released"), "{rel}");
                }
                tally.wins.push(tokens);
            }
            3 => {
                let v = run.json();
                let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
                assert_eq!(answers.len(), issues.len(), "{run}");
                let mut held = 0;
                for answer in answers {
                    assert_eq!(answer["wrote"], json!(false), "{run}");
                    match answer["outcome"].as_str() {
                        Some("held") => {
                            held += 1;
                            assert_ne!(answer["holder"], json!(holder), "{run}");
                        }
                        Some("skipped") => {}
                        _ => panic!("a refused claim answers held or skipped\n{run}"),
                    }
                }
                assert!(held >= 1, "a refused claim names what was held\n{run}");
                tally.refused += 1;
            }
            5 => tally.lost_race += 1,
            _ => panic!("unexpected answer to a multi-claim\n{run}"),
        }
    }
    tally
}

#[test]
fn racing_multi_claims_are_all_or_nothing() {
    let repo = Arc::new(TestRepo::new());
    let barrier = Arc::new(Barrier::new(2 * RACERS_PER_SIDE));
    let mut handles = Vec::new();
    for i in 0..2 * RACERS_PER_SIDE {
        let (holder, issues) = if i < RACERS_PER_SIDE {
            (format!("p{i}"), vec!["x", "y", "z"])
        } else {
            (format!("q{i}"), vec!["z", "w"])
        };
        let repo = Arc::clone(&repo);
        let barrier = Arc::clone(&barrier);
        handles.push(std::thread::spawn(move || {
            claim_worker(&repo, holder, issues, &barrier)
        }));
    }
    let tallies: Vec<ClaimTally> = handles
        .into_iter()
        .map(|h| h.join().expect("a racer panicked"))
        .collect();
    let wins: usize = tallies.iter().map(|t| t.wins.len()).sum();
    assert!(wins > 0, "someone must have won: {tallies:?}");
    for t in &tallies {
        assert_eq!(t.wins.len() + t.refused + t.lost_race, RACE_CYCLES, "{t:?}");
    }

    // Every ledger alternates acquire/release by the same holder, tokens 1..=n.
    let mut tenures: BTreeMap<&str, Vec<(String, u64)>> = BTreeMap::new();
    for issue in ["x", "y", "z", "w"] {
        let chain = repo.chain(issue);
        assert_eq!(chain.len() % 2, 0, "{issue} ends free: {chain:?}");
        let mut list = Vec::new();
        for (i, pair) in chain.chunks(2).enumerate() {
            let (acq, rel) = (&pair[0].1, &pair[1].1);
            assert_eq!(acq["event"], json!("acquire"), "{issue}: {chain:?}");
            assert_eq!(rel["event"], json!("release"), "{issue}: {chain:?}");
            assert_eq!(acq["token"], json!(i + 1), "{issue}: {chain:?}");
            assert_eq!(rel["token"], json!(i + 1), "{issue}: {chain:?}");
            assert_eq!(rel["previous_holder"], acq["holder"], "{issue}: {chain:?}");
            list.push((
                acq["holder"].as_str().expect("a holder").to_owned(),
                i as u64 + 1,
            ));
        }
        tenures.insert(issue, list);
    }
    // Each win is exactly one tenure on each of its issues, with the tokens it was told; no
    // tenure exists that no win accounts for (a partial claim would be one).
    let mut accounted: BTreeMap<&str, BTreeSet<(String, u64)>> = BTreeMap::new();
    for t in &tallies {
        for win in &t.wins {
            for (issue, token) in win {
                let issue: &str = t
                    .issues
                    .iter()
                    .find(|i| *i == issue)
                    .expect("one of its issues");
                assert!(
                    tenures[issue].contains(&(t.holder.clone(), *token)),
                    "{} won {issue} with token {token}, which the ledger does not record: {:?}",
                    t.holder,
                    tenures[issue]
                );
                assert!(
                    accounted
                        .entry(issue)
                        .or_default()
                        .insert((t.holder.clone(), *token)),
                    "token {token} of {issue} reported twice"
                );
            }
        }
    }
    for (issue, list) in &tenures {
        let recorded: BTreeSet<(String, u64)> = list.iter().cloned().collect();
        assert_eq!(
            recorded,
            accounted.get(issue).cloned().unwrap_or_default(),
            "{issue}: tenures that no whole claim accounts for"
        );
    }
    // Per holder, the same number of tenures on each of its issues; none on the others.
    for t in &tallies {
        for issue in ["x", "y", "z", "w"] {
            let n = tenures[issue]
                .iter()
                .filter(|(h, _)| *h == t.holder)
                .count();
            let want = if t.issues.contains(&issue) {
                t.wins.len()
            } else {
                0
            };
            assert_eq!(n, want, "{} has {n} tenures of {issue}", t.holder);
        }
    }
    assert_eq!(tenures["z"].len(), wins, "every claim includes z");
    let none: Vec<String> = issues(&repo.json_at(&at_min(0), 0, &["list"]));
    assert!(none.is_empty(), "everything was released: {none:?}");
    let run = repo.lease().arg_json().args(["verify"]).run();
    run.ok();
    assert_eq!(run.json()["clean"], json!(true), "{run}");
}

#[test]
fn a_multi_claim_through_a_remote_is_one_atomic_push() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    let bob = daemon.client(BOB);

    // Judged by doctor first (else the first write probes the server once, with pushes of
    // its own); uncontended, all three land in one push.
    alice.lease().args(["doctor"]).run();
    let pushes = |d: &Server| {
        d.log()
            .lines()
            .filter(|l| l.contains("Request receive-pack"))
            .count()
    };
    let before_pushes = pushes(&daemon);
    let run = jrun(
        &alice,
        0,
        &[
            "acquire", "--remote", "origin", "m1", "m2", "m3", "--ttl", "1h",
        ],
    );
    run.ok();
    assert_eq!(
        pushes(&daemon),
        before_pushes + 1,
        "one push for the claim\n{}",
        daemon.log()
    );
    for issue in ["m1", "m2", "m3"] {
        let chain = daemon.chain(issue);
        assert_eq!(chain.len(), 1, "{issue}: {chain:?}");
        assert_eq!(chain[0].1["holder"], json!(ALICE));
        assert_eq!(alice.tip(issue), daemon.tip(issue));
    }

    // Refused by the rules: b held by alice on the server, which bob's clone has never seen.
    let server_before = daemon.lease_refs();
    let run = jrun(
        &bob,
        1,
        &[
            "acquire", "--remote", "origin", "n1", "m2", "n3", "--ttl", "1h",
        ],
    );
    run.code(3);
    let outcomes = each(&run.json(), "outcome");
    assert_eq!(
        outcomes,
        vec![json!("skipped"), json!("held"), json!("skipped")],
        "{run}"
    );
    assert_eq!(
        daemon.lease_refs(),
        server_before,
        "nothing reached the server"
    );
    assert_eq!(bob.tip("n1"), None);

    // Refused by the server for one ref only: an update hook that declines n3. A push that
    // was not atomic would land n1 and n2.
    daemon.install_hook(
        "update",
        "case \"$1\" in refs/leases/n3) echo \"n3 is frozen\" >&2; exit 1;; esac\nexit 0",
    );
    let run = jrun(
        &bob,
        2,
        &[
            "acquire", "--remote", "origin", "n1", "n2", "n3", "--ttl", "1h",
        ],
    );
    assert_ne!(run.code, 0, "the server refused part of the claim\n{run}");
    assert_eq!(
        daemon.lease_refs(),
        server_before,
        "part of a refused claim landed on the server\n{run}"
    );
    for issue in ["n1", "n2", "n3"] {
        assert_eq!(bob.tip(issue), None, "{issue} recorded locally\n{run}");
    }
    let run = daemon.lease(&["verify"]);
    run.ok();
}

#[test]
fn racing_multi_claims_through_a_remote_are_all_or_nothing() {
    const PER_SIDE: usize = 3;
    let daemon = Arc::new(Server::daemon());
    let barrier = Arc::new(Barrier::new(2 * PER_SIDE));
    let mut handles = Vec::new();
    for i in 0..2 * PER_SIDE {
        let (holder, issues): (String, Vec<&str>) = if i < PER_SIDE {
            (format!("p{i}"), vec!["x", "y", "z"])
        } else {
            (format!("q{i}"), vec!["z", "w"])
        };
        let daemon = Arc::clone(&daemon);
        let barrier = Arc::clone(&barrier);
        handles.push(std::thread::spawn(move || {
            let repo = daemon.client(&holder);
            let mut args = vec!["acquire", "--remote", "origin"];
            args.extend(issues.iter().copied());
            args.extend(["--ttl", "never"]);
            barrier.wait();
            let run = repo.lease().arg_json().args(&args).run();
            (holder, issues, run)
        }));
    }
    let results: Vec<(String, Vec<&str>, Run)> = handles
        .into_iter()
        .map(|h| h.join().expect("a racer panicked"))
        .collect();
    // Open-ended claims that all include z: exactly one can win.
    let winners: Vec<&(String, Vec<&str>, Run)> =
        results.iter().filter(|(_, _, r)| r.code == 0).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one claim wins z: {:?}",
        results.iter().map(|r| &r.2).collect::<Vec<_>>()
    );
    let (winner, won, _) = winners[0];
    for issue in ["x", "y", "z", "w"] {
        let chain = daemon.chain(issue);
        if won.contains(&issue) {
            assert_eq!(chain.len(), 1, "{issue}: {chain:?}");
            assert_eq!(chain[0].1["holder"], json!(winner), "{issue}: {chain:?}");
            assert_eq!(chain[0].1["token"], json!(1));
        } else {
            assert!(
                chain.is_empty(),
                "{issue} was written by a claim that lost: {chain:?}"
            );
        }
    }
    daemon.lease(&["verify"]).ok();
    // Every loser answered as a loser.
    for (_, _, run) in &results {
        match run.code {
            0 => {}
            3 => {
                for answer in run.json().as_array().expect("an array") {
                    assert_ne!(answer["outcome"], json!("acquired"), "{run}");
                    assert_eq!(answer["wrote"], json!(false), "{run}");
                }
            }
            5 => {}
            _ => panic!(
                "a claim that lost the race must be retried, refused (3) or reported lost (5)\n{run}"
            ),
        }
    }
}

/// Writes `<dir>/git`, a wrapper that runs `before_first_push` (with the real PATH) the first
/// time it is asked to push, then the real git: a deterministic way to land a concurrent write
/// between a claim's fetch and its push.
fn git_wrapper(dir: &Path, real_path: &str, before_first_push: &str) {
    let mark = dir.join("pushed-once");
    let script = format!(
        "#!/bin/sh\nPATH='{real_path}'; export PATH\n\
         case \" $* \" in *\" push \"*)\n\
           if [ ! -e '{mark}' ]; then : > '{mark}'; {before_first_push}; fi;;\n\
         esac\nexec git \"$@\"\n",
        mark = mark.display()
    );
    let path = dir.join("git");
    crate::env::write_program(&path, &script, 0o755);
}

#[test]
fn a_multi_claim_that_loses_its_atomic_push_to_a_concurrent_write_fetches_and_decides_again() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    let bob = daemon.client(BOB);
    let k1 = ["acquire", "--remote", "origin", "k1", "--ttl", "1h"];
    jrun(&bob, 0, &k1).ok();
    jrun(&bob, 1, &["release", "--remote", "origin", "k1"]).ok();

    // Between alice's fetches and her push, bob takes k1 and frees it again on the server:
    // her push carries a stale expected value for k1 and is refused as a whole; k1 is free
    // again, so after fetching and deciding again she takes both (token 3 and 1).
    let real_path = std::env::var("PATH").expect("PATH");
    let wrap = alice.scratch("wrap");
    let bob_dir = bob.path().display().to_string();
    git_wrapper(
        &wrap,
        &real_path,
        &format!(
            "(cd '{bob_dir}' && GIT_CEILING_DIRECTORIES='{bob_root}'; export GIT_CEILING_DIRECTORIES; \
             GIT_LEASE_NOW={now2} '{bin}' acquire --remote origin k1 \
             --ttl 1h && GIT_LEASE_NOW={now3} '{bin}' release --remote origin k1) >/dev/null",
            bob_root = bob.root().display(),
            now2 = at_min(2),
            now3 = at_min(3),
            bin = crate::env::BIN,
        ),
    );
    let run = alice
        .lease()
        .now(&at_min(4))
        .env("PATH", format!("{}:{real_path}", wrap.display()))
        .arg_json()
        .args(["acquire", "--remote", "origin", "k1", "k2", "--ttl", "1h"])
        .run();
    assert!(wrap.join("pushed-once").exists(), "the wrapper ran\n{run}");
    let chain = daemon.chain("k1");
    assert_eq!(
        chain
            .iter()
            .filter(|(_, l)| l["holder"] == json!(BOB))
            .count(),
        2,
        "bob's concurrent tenure landed in between: {chain:?}"
    );
    // Whatever the answer, never a partial claim on the server.
    let alice_has_k1 = chain
        .last()
        .is_some_and(|(_, l)| l["holder"] == json!(ALICE));
    assert_eq!(
        daemon.tip("k2").is_some(),
        alice_has_k1,
        "a partial claim landed\n{run}"
    );
    run.ok();
    let tokens = each(&run.json(), "token");
    assert_eq!(tokens, vec![json!(3), json!(1)], "{run}");
    let chain = daemon.chain("k1");
    assert_eq!(chain.len(), 5, "{chain:?}");
    assert_eq!(chain[4].1["holder"], json!(ALICE));
    assert_eq!(daemon.chain("k2").len(), 1);
    daemon.lease(&["verify"]).ok();
}
