//! A race of real processes through the daemon: racing clones never share a lease or a token,
//! and concurrent claims in one clone never fail on its tracking refs.

use super::*;

/// One answer of one process.
#[derive(Clone, Debug)]
struct Answer {
    worker: usize,
    round: usize,
    op: &'static str,
    issue: &'static str,
    code: i32,
    outcome: Option<String>,
    token: Option<u64>,
    holder: Option<String>,
    commit: Option<String>,
    wrote: bool,
    stderr: String,
}

fn call(
    repo: &TestRepo,
    worker: usize,
    round: usize,
    op: &'static str,
    issue: &'static str,
) -> Answer {
    let mut args = vec![op, "--remote", "origin", issue];
    if op == "acquire" {
        args.extend(["--ttl", "1h"]);
    }
    let run = repo.lease().arg_json().args(&args).run();
    let v: Option<Value> = (run.code == 0 || run.code == 3).then(|| run.json());
    let field = |name: &str| v.as_ref().and_then(|v| v[name].as_str()).map(str::to_owned);
    Answer {
        worker,
        round,
        op,
        issue,
        code: run.code,
        outcome: field("outcome"),
        token: v.as_ref().and_then(|v| v["token"].as_u64()),
        holder: field("holder"),
        commit: field("commit"),
        wrote: v.as_ref().is_some_and(|v| v["wrote"] == json!(true)),
        stderr: run.stderr,
    }
}

fn holder_of(worker: usize) -> String {
    format!("worker-{worker}@example.com")
}

#[test]
fn racing_clones_never_share_a_lease_or_a_token() {
    let daemon = Server::daemon();
    let clones: Vec<TestRepo> = (0..WORKERS).map(|w| daemon.client(&holder_of(w))).collect();
    let barrier = Arc::new(Barrier::new(WORKERS));
    let started = std::time::Instant::now();

    let answers: Vec<Answer> = std::thread::scope(|s| {
        let handles: Vec<_> = clones
            .iter()
            .enumerate()
            .map(|(w, repo)| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(0x1ea5e + w as u64);
                    let mut answers = Vec::new();
                    barrier.wait();
                    for round in 0..ROUNDS {
                        let issue = ISSUES[rng.usize(..ISSUES.len())];
                        let got = call(repo, w, round, "acquire", issue);
                        let acquired = got.code == 0 && got.outcome.as_deref() == Some("acquired");
                        answers.push(got);
                        if acquired {
                            for _ in 0..=RELEASE_RETRIES {
                                let freed = call(repo, w, round, "release", issue);
                                let lost = freed.code == 5;
                                answers.push(freed);
                                if !lost {
                                    break;
                                }
                            }
                        }
                    }
                    answers
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a worker panicked"))
            .collect()
    });
    let elapsed = started.elapsed();

    let dump = |what: &str, a: &Answer| -> String {
        format!(
            "{what}: worker {} round {} {} {} -> exit {} {:?} token {:?} holder {:?} commit {:?}\n{}",
            a.worker, a.round, a.op, a.issue, a.code, a.outcome, a.token, a.holder, a.commit, a.stderr
        )
    };

    // Every answer is one of the documented ones.
    for a in &answers {
        let fine = match (a.op, a.code, a.outcome.as_deref()) {
            ("acquire", 0, Some("acquired")) => a.wrote,
            ("acquire", 3, Some("held")) => !a.wrote,
            ("release", 0, Some("released")) => a.wrote,
            (_, 5, None) => a.stderr.contains("lost the race"),
            _ => false,
        };
        assert!(fine, "{}", dump("unexpected answer", a));
    }

    // The server's chains, read with plain git.
    let mut by_commit: HashMap<String, (&str, Value)> = HashMap::new();
    let mut acquires_of: HashMap<&str, HashSet<(String, u64)>> = HashMap::new();
    for issue in ISSUES {
        let chain = daemon.chain(issue);
        let mut tokens = HashSet::new();
        for (i, (commit, lease)) in chain.iter().enumerate() {
            let event = lease["event"].as_str().unwrap_or("?");
            let token = lease["token"].as_u64().unwrap_or(0);
            if i % 2 == 0 {
                // An acquire, on top of nothing or a free state: never two live holders.
                assert_eq!(event, "acquire", "{issue} #{i} {commit}: {lease}");
                assert_eq!(token, i as u64 / 2 + 1, "{issue} #{i} {commit}: {lease}");
                assert!(tokens.insert(token), "{issue}: token {token} issued twice");
                if i > 0 {
                    let prev = &chain[i - 1].1;
                    assert_eq!(
                        prev["holder"],
                        json!(null),
                        "{issue} #{i}: previous state held"
                    );
                }
                acquires_of
                    .entry(issue)
                    .or_default()
                    .insert((lease["holder"].as_str().unwrap().to_owned(), token));
            } else {
                let prev = &chain[i - 1].1;
                assert_eq!(event, "release", "{issue} #{i} {commit}: {lease}");
                assert_eq!(lease["token"], prev["token"], "{issue} #{i}: {lease}");
                assert_eq!(
                    lease["previous_holder"], prev["holder"],
                    "{issue} #{i}: released by someone else: {lease}"
                );
                assert_eq!(lease["by"], json!(null), "{issue} #{i}: {lease}");
            }
            by_commit.insert(commit.clone(), (issue, lease.clone()));
        }
    }

    // Every success is in the chain exactly as answered, and every commit of the chains is
    // one success: refusals and lost races wrote nothing.
    let mut claimed: HashSet<String> = HashSet::new();
    for a in answers.iter().filter(|a| a.code == 0) {
        let commit = a.commit.clone().unwrap_or_default();
        let Some((issue, lease)) = by_commit.get(&commit) else {
            panic!("{}", dump("a success that is not in the server's chain", a));
        };
        assert_eq!(*issue, a.issue, "{}", dump("wrong ledger", a));
        assert_eq!(
            lease["token"].as_u64(),
            a.token,
            "{}",
            dump("wrong token", a)
        );
        match a.op {
            "acquire" => {
                assert_eq!(
                    lease["event"],
                    json!("acquire"),
                    "{}",
                    dump("not an acquire", a)
                );
                assert_eq!(
                    lease["holder"],
                    json!(holder_of(a.worker)),
                    "{}",
                    dump("holder", a)
                );
            }
            _ => {
                assert_eq!(
                    lease["event"],
                    json!("release"),
                    "{}",
                    dump("not a release", a)
                );
                assert_eq!(
                    lease["previous_holder"],
                    json!(holder_of(a.worker)),
                    "{}",
                    dump("released someone else's", a)
                );
            }
        }
        assert!(
            claimed.insert(commit),
            "{}",
            dump("two answers claim one commit", a)
        );
    }
    let unclaimed: Vec<&String> = by_commit.keys().filter(|c| !claimed.contains(*c)).collect();
    assert!(
        unclaimed.is_empty(),
        "commits no answer accounts for: {unclaimed:?}"
    );

    // Every "held" names a tenure that really existed, and someone else's.
    for a in answers.iter().filter(|a| a.code == 3) {
        let holder = a.holder.clone().unwrap_or_default();
        let token = a.token.unwrap_or(0);
        assert!(
            acquires_of
                .get(a.issue)
                .is_some_and(|s| s.contains(&(holder.clone(), token))),
            "{}",
            dump("held by a tenure the chain never had", a)
        );
        assert_ne!(holder, holder_of(a.worker), "{}", dump("held by myself", a));
    }

    // Every worker freed what it took: all three issues end free.
    for issue in ISSUES {
        if let Some((_, last)) = daemon.chain(issue).last() {
            assert_eq!(last["holder"], json!(null), "{issue} ends held: {last}");
        }
    }

    // Lost races are allowed, but a small minority.
    let lost = answers.iter().filter(|a| a.code == 5).count();
    let acquired = answers
        .iter()
        .filter(|a| a.op == "acquire" && a.code == 0)
        .count();
    assert!(
        lost * 10 <= answers.len(),
        "{lost} of {} answers lost the race",
        answers.len()
    );
    assert!(acquired > 0, "nobody ever acquired anything");

    // Each clone's local ref is a state the server accepted.
    for (w, clone) in clones.iter().enumerate() {
        for issue in ISSUES {
            if let Some(tip) = clone.tip(issue) {
                assert!(
                    by_commit.contains_key(&tip),
                    "worker {w}'s local {issue} is {tip}, which the server never had"
                );
            }
        }
    }

    // The race really raced: some pushes lost the compare-and-swap and were decided again.
    let commits = by_commit.len();
    let pushes = requests(&daemon, "receive-pack");
    eprintln!(
        "race: {} answers ({acquired} acquires, {lost} lost races, {pushes} pushes for {commits} \
         commits) in {elapsed:?}",
        answers.len()
    );
    assert!(
        pushes > commits,
        "no push ever lost the race ({pushes} pushes, {commits} commits): nothing was contended"
    );

    // The server's ledgers verify, and so does a mirror synced from them (checked together,
    // so a failure shows all three verdicts).
    let server = daemon.lease(&["--json", "verify"]);
    let mirror = daemon.mirror();
    let synced = mirror.run(&["--json", "sync"]);
    let mirrored = mirror.run(&["verify"]);
    assert!(
        server.code == 0 && synced.code == 0 && mirrored.code == 0,
        "the raced ledgers do not verify ({} answers, {lost} lost, {elapsed:?})\n\
         server verify: {server}\nmirror sync: {synced}\nmirror verify: {mirrored}",
        answers.len()
    );
    mirrored.stdout_has("ok");
    assert_eq!(mirror.lease_refs(), daemon.lease_refs());
}

#[test]
fn concurrent_remote_claims_in_one_clone_never_fail_on_its_tracking_refs() {
    // Eight processes of one clone claim, read and release through one remote at once: they
    // contend for the same remote-tracking and incoming refs, which are only a cache.
    const CLAIMERS: usize = 8;
    let daemon = Server::daemon();
    let clone = daemon.client(ALICE);
    // Reflogs of every ref, the tracking refs included.
    clone.git(&["config", "core.logAllRefUpdates", "always"]);
    claim(&clone, 0, "seed").ok();
    let barrier = Barrier::new(CLAIMERS);
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLAIMERS)
            .map(|w| {
                let (clone, barrier) = (&clone, &barrier);
                s.spawn(move || {
                    let issue = format!("c{w}");
                    barrier.wait();
                    let mut runs = vec![claim(clone, 1, &issue)];
                    runs.push(via_origin(clone, 1, "list", &["--all"]));
                    runs.push(via_origin(clone, 1, "show", &["seed"]));
                    runs.push(via_origin(clone, 2, "release", &[&issue]));
                    runs
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a claimer panicked"))
            .collect()
    });
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| r.code != 0)
        .map(|r| r.to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    for w in 0..CLAIMERS {
        let chain = daemon.leases(&format!("c{w}"));
        assert_eq!(chain.len(), 2, "c{w}: acquire and release");
    }
}
