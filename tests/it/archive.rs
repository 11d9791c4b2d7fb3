//! The archive of quiet ledgers (docs/FORMAT.md, "The archive"): a fold records free, quiet
//! ledgers' tips and removes their refs; a claim revives a ledger on its archived tip with the
//! next token; the server hook refuses a ledger started over after its fold, a fold that drops
//! an entry, and the deletion of a ledger the archive does not record.

use std::process::Command;

use crate::env::{at, t0, TestRepo, BIN};
use crate::forge::acquired;
use crate::pushes::{chain_on, lease_commit, push, push_accepted};
use crate::server::{lease, Server};

#[test]
fn a_fold_keeps_every_token_and_a_claim_revives_the_ledger_with_the_next_one() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", "alice"]);
    repo.run_at(&at(0), &["acquire", "1", "--ttl", "1m"]).ok();
    repo.run_at(&at(1), &["release", "1"]).ok();
    repo.run_at(&at(0), &["acquire", "2", "--ttl", "1h"]).ok();

    // A dry run writes nothing; it names each ledger only when asked.
    let run = repo.run_at(&at(120), &["archive", "--quiet-for", "1m", "--dry-run"]);
    assert_eq!(
        run.ok().stdout,
        "would fold 1 ledger(s) into refs/lease-archive, 1 lease ref(s) to remove, 1 kept \
         (live or not quiet for 1m)\n"
    );
    repo.run_at(
        &at(120),
        &["archive", "--quiet-for", "1m", "-n", "--verbose"],
    )
    .ok()
    .stdout_has("would fold 1 (token 1)\n");
    assert!(repo.tip("1").is_some());

    let run = repo.run_at(&at(120), &["archive", "--quiet-for", "1m", "-v"]);
    run.ok().stdout_has("folded 1 (token 1)");
    assert!(
        !run.stdout.contains("folded 2"),
        "a live lease is never folded\n{run}"
    );
    assert_eq!(repo.tip("1"), None, "the folded ref is removed");
    assert!(repo.tip("2").is_some());
    // The archive keeps the tip reachable: plain git finds nothing missing.
    repo.git(&["fsck", "--no-dangling"]);

    repo.run_at(&at(130), &["show", "1"])
        .ok()
        .stdout_has("free");
    // Listed with the free ones, as before its fold; not among the held ones.
    repo.run_at(&at(130), &["list", "--all"])
        .ok()
        .stdout_has("1 ")
        .stdout_has("free");
    let held = repo.run_at(&at(130), &["--json", "list"]);
    assert!(!held.ok().stdout.contains("\"issue\":\"1\""), "{held}");
    let all = repo.run_at(&at(130), &["--json", "list", "--state", "free"]);
    all.ok().stdout_has("\"issue\":\"1\"");
    repo.run_at(&at(130), &["log", "1"])
        .ok()
        .stdout_has("release");
    repo.run_at(&at(140), &["acquire", "1", "--holder", "bob"])
        .ok()
        .stdout_has("(token 2)");
    let log = repo.run_at(&at(150), &["log", "1"]);
    log.ok().stdout_has("token 2").stdout_has("token 1");
    repo.run_at(&at(150), &["verify"]).ok();

    // Folded again once quiet, the archive moves its entry forward; nothing else changes.
    repo.run_at(&at(160), &["release", "1", "--holder", "bob"])
        .ok();
    repo.run_at(&at(300), &["archive", "--quiet-for", "1m", "-v"])
        .ok()
        .stdout_has("folded 1 (token 2)");
    repo.run_at(&at(310), &["acquire", "1"])
        .ok()
        .stdout_has("(token 3)");
}

/// Runs `git lease` in the server's own repository at `now`.
pub fn on_server(server: &Server, now: &str, args: &[&str]) -> std::process::Output {
    let out = Command::new(BIN)
        .arg("-C")
        .arg(server.bare())
        .args(args)
        .env("GIT_LEASE_NOW", now)
        .output()
        .expect("git-lease runs");
    assert!(out.status.success(), "{out:?}");
    out
}

#[test]
fn the_hook_refuses_a_ledger_started_over_after_its_fold_and_a_fold_that_forgets() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let client: TestRepo = server.client("alice");
    // A lease that expired a minute ago.
    let good = chain_on(&client, None, &[acquired("7", "alice", 1, -90, Some(30))]);
    push_accepted(&server, &client, "7", &good);

    // Not recorded by the archive: its deletion is refused.
    let run = push(&client, false, &[":refs/leases/7"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("deletion");

    on_server(&server, &at(0), &["archive", "--quiet-for", "1s"]);
    assert_eq!(server.tip("7"), None);

    // Started over at token 1 with no parent: the token count would be lost.
    let forged = lease_commit(&client, &acquired("7", "alice", 1, 0, Some(600)), &[]);
    let run = push(&client, false, &[&format!("{forged}:refs/leases/7")]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease: refused");
    assert_eq!(server.tip("7"), None);

    // A fold that forgets issue 7.
    client.git(&[
        "fetch",
        "-q",
        "origin",
        "refs/lease-archive:refs/lease-archive",
    ]);
    let archive = client.git(&["rev-parse", "refs/lease-archive"]);
    let empty = client.git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let forgetful = client.git(&["commit-tree", empty.trim(), "-p", archive.trim(), "-m", "x"]);
    let run = push(
        &client,
        false,
        &[&format!("{}:refs/lease-archive", forgetful.trim())],
    );
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease: refused refs/lease-archive")
        .stderr_has("the fold drops issue 7");
    // The archive cannot be deleted either.
    let run = push(&client, false, &[":refs/lease-archive"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("the archive is never deleted");

    // The honest revival continues from the archived tip, with the next token.
    let revival = lease_commit(
        &client,
        &acquired("7", "alice", 2, 0, Some(600)),
        &[&good[0]],
    );
    let run = push(&client, false, &[&format!("{revival}:refs/leases/7")]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(server.tip("7").as_deref(), Some(revival.as_str()));
}

/// A hooked server where Alice claimed 7 for a minute and released it, and holds 8 for an
/// hour, all pushed at the start.
pub fn seven_free_and_eight_held() -> (Server, TestRepo) {
    seven_free_and_eight_held_on(Server::with_hook())
}

/// As [`seven_free_and_eight_held`], on `server` (hooked, not started yet).
pub fn seven_free_and_eight_held_on(mut server: Server) -> (Server, TestRepo) {
    server.start_at(&at(0));
    let alice = server.client("alice");
    lease(
        &alice,
        0,
        &["acquire", "7", "--ttl", "1m", "--remote", "origin"],
    )
    .ok();
    lease(&alice, 1, &["release", "7", "--remote", "origin"]).ok();
    lease(
        &alice,
        2,
        &["acquire", "8", "--ttl", "1h", "--remote", "origin"],
    )
    .ok();
    (server, alice)
}

#[test]
fn a_remote_claim_revives_an_archived_ledger_and_a_client_that_saw_it_reads_on() {
    revives_through(seven_free_and_eight_held());
}

/// Over http (`git http-backend`), where each request is its own connection: the push
/// guarded by a stale archive loses the same way, all or none.
#[test]
fn a_remote_claim_revives_an_archived_ledger_over_http_as_over_git_daemon() {
    revives_through(seven_free_and_eight_held_on(Server::http(&[
        "alice", "bob",
    ])));
}

/// Folds on `server` under Alice and Bob's claims (Alice saw 7 before its fold, Bob never
/// did), each claim going on from the archived tip with the next token.
fn revives_through((server, alice): (Server, TestRepo)) {
    let bob = server.client("bob");

    server.config("lease.hookNow", &at(200));
    on_server(&server, &at(200), &["archive", "--quiet-for", "1m"]);
    assert_eq!(
        server.tip("7"),
        None,
        "the fold removed the quiet ledger's ref"
    );

    // Alice saw the ledger before its fold: its ref is gone, the archive has its tip.
    lease(&alice, 210, &["list", "--remote", "origin"])
        .ok()
        .stdout_has("8");
    lease(&alice, 210, &["show", "7", "--remote", "origin"])
        .ok()
        .stdout_has("free");
    // Listed once with the free ones, by a client that saw it and by one that did not.
    for client in [&alice, &bob] {
        let run = lease(
            client,
            210,
            &["--json", "list", "--all", "--remote", "origin"],
        );
        assert_eq!(
            run.ok().stdout.matches("\"issue\":\"7\"").count(),
            1,
            "{run}"
        );
    }

    // Bob never saw it: his claim goes on from the archived tip, with the next token.
    lease(&bob, 220, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    lease(&bob, 221, &["release", "7", "--remote", "origin"]).ok();
    lease(
        &alice,
        230,
        &["acquire", "9", "--ttl", "1m", "--remote", "origin"],
    )
    .ok();
    lease(&alice, 231, &["release", "9", "--remote", "origin"]).ok();

    // Folded again; Alice's copy is a tenure behind, and her claim still goes on.
    server.config("lease.hookNow", &at(400));
    on_server(&server, &at(400), &["archive", "--quiet-for", "1m"]);
    assert_eq!(server.tip("7"), None);
    lease(&alice, 410, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 3)");
    // Bob never saw 9, and his copy of the archive is older than the fold that took it: his
    // first push, guarded by that copy, loses; he reads the new fold and goes on from it.
    assert_eq!(server.tip("9"), None);
    lease(&bob, 412, &["acquire", "9", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");

    // One of several candidates, all archived but one taken: `--any` revives a free one.
    lease(&alice, 411, &["release", "7", "--remote", "origin"]).ok();
    server.config("lease.hookNow", &at(600));
    on_server(&server, &at(600), &["archive", "--quiet-for", "1m"]);
    lease(
        &bob,
        610,
        &["acquire", "--any", "7", "8", "--remote", "origin"],
    )
    .ok()
    .stdout_has("7")
    .stdout_has("(token 4)");
    on_server(&server, &at(620), &["verify"]);
    server.git(&["fsck", "--no-dangling"]);
}

#[test]
fn a_mirror_of_an_archived_server_takes_its_archive_verified_and_refuses_a_forged_one() {
    let (server, _alice) = seven_free_and_eight_held();
    let mirror = server.mirror();
    lease(&mirror, 10, &["sync", "origin"]).ok();
    assert!(mirror.tip("7").is_some());

    server.config("lease.hookNow", &at(200));
    on_server(&server, &at(200), &["archive", "--quiet-for", "1m"]);
    let archive = server.rev("refs/lease-archive");
    assert!(archive.is_some());

    // The mirror that had the ledger keeps it in its archive now, as the server does.
    lease(&mirror, 210, &["sync", "origin"])
        .ok()
        .stdout_has("1 archived");
    assert_eq!(mirror.tip("7"), None);
    assert_eq!(
        Some(
            mirror
                .git(&["rev-parse", "refs/lease-archive"])
                .trim()
                .to_owned()
        ),
        archive
    );
    lease(&mirror, 210, &["verify"]).ok();
    lease(&mirror, 210, &["show", "7"]).ok().stdout_has("free");
    mirror.git(&["fsck", "--no-dangling"]);

    // A new mirror gets the archived ledger through the archive alone.
    let fresh = server.mirror();
    let json = lease(&fresh, 220, &["--json", "sync", "origin"]);
    json.ok().stdout_has("\"archived\":[\"7\"]");
    lease(&fresh, 220, &["verify"]).ok();

    // Revived on the server, the ledger comes back to the mirror with its history.
    let bob = server.client("bob");
    lease(&bob, 230, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    lease(&mirror, 240, &["sync", "origin"])
        .ok()
        .stdout_has("1 new");
    lease(&mirror, 240, &["show", "7"])
        .ok()
        .stdout_has("holder:     bob");
    lease(&mirror, 240, &["verify"]).ok();

    // An archive rewritten on the server (by its own account, past the hook) is refused:
    // a fold that forgets issue 7's archived tip.
    let empty = server.git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let archive = archive.expect("an archive");
    let forged = server.git(&["commit-tree", empty.trim(), "-p", &archive, "-m", "x"]);
    server.git(&["update-ref", "refs/lease-archive", forged.trim()]);
    let run = lease(&fresh, 250, &["sync", "origin"]);
    assert_eq!(run.code, 1, "{run}");
    run.stdout_has("refs/lease-archive");
    assert_eq!(
        fresh.git(&["rev-parse", "refs/lease-archive"]).trim(),
        archive,
        "the mirror's archive stays where it was verified"
    );
}

/// The tokens of the tenures one ledger records, oldest first, read on the server by
/// `git lease log --json` (which follows the archive when the ref is folded).
fn tenures(server: &Server, issue: &str) -> Vec<u64> {
    let out = on_server(server, &at(0), &["--json", "log", issue]);
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("log --json");
    let mut tokens: Vec<u64> = log
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["event"] == "acquire")
        .map(|e| e["token"].as_u64().expect("a token"))
        .collect();
    tokens.reverse();
    tokens
}

#[test]
fn racing_claimers_and_folds_never_issue_a_token_twice() {
    racing_claimers_and_folds(&[]);
}

/// As above, half of the claimers trusting the remote's newest fold on first sight
/// (`lease.trustArchive`): they read the newest fold alone until a claim of the archived
/// ledger makes them verify the archive.
#[test]
fn racing_claimers_and_folds_never_issue_a_token_twice_with_trusting_claimers() {
    racing_claimers_and_folds(&[1, 3]);
}

/// Claimers race to claim, release and claim again one ledger the server keeps folding;
/// those numbered in `trusting` set `lease.trustArchive`.
fn racing_claimers_and_folds(trusting: &[usize]) {
    const CLAIMERS: usize = 4;
    const ROUNDS: usize = 5;
    const FOLDS: usize = 12;
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let clients: Vec<TestRepo> = (0..CLAIMERS)
        .map(|w| {
            let client = server.client(&format!("w{w}"));
            if trusting.contains(&w) {
                client.git(&["config", "lease.trustArchive", "true"]);
            }
            client
        })
        .collect();
    // The ledger starts archived: every claimer's first claim races to revive it.
    lease(&clients[0], 0, &["acquire", "x", "--remote", "origin"]).ok();
    lease(&clients[0], 0, &["release", "x", "--remote", "origin"]).ok();
    on_server(&server, &at(10), &["archive", "--quiet-for", "1s"]);
    assert_eq!(server.tip("x"), None);
    let claiming = std::sync::atomic::AtomicBool::new(true);
    // Every claim is a new tenure: each claimer releases what it got before it claims again,
    // while the server folds whatever is free in between (quiet for ten seconds by then),
    // until the claimers are done.
    let won: Vec<Vec<u64>> = std::thread::scope(|s| {
        let folder = s.spawn(|| {
            let mut folds = 0;
            while folds < FOLDS || claiming.load(std::sync::atomic::Ordering::SeqCst) {
                folds += 1;
                let out = Command::new(BIN)
                    .arg("-C")
                    .arg(server.bare())
                    .args(["archive", "--quiet-for", "1s"])
                    .env("GIT_LEASE_NOW", at(10))
                    .output()
                    .expect("git-lease runs");
                assert!(out.status.success(), "{out:?}");
            }
        });
        let claimers: Vec<_> = clients
            .iter()
            .map(|client| {
                s.spawn(move || {
                    let mut tokens = Vec::new();
                    for _ in 0..ROUNDS {
                        let run =
                            lease(client, 0, &["--json", "acquire", "x", "--remote", "origin"]);
                        if run.code == 0 {
                            let v: serde_json::Value =
                                serde_json::from_str(&run.stdout).expect("acquire --json");
                            tokens.push(v["token"].as_u64().expect("a token"));
                            lease(client, 0, &["release", "x", "--remote", "origin"]).ok();
                        } else {
                            assert!(
                                [3, 5].contains(&run.code),
                                "held by another, or lost every race: nothing else\n{run}"
                            );
                        }
                    }
                    tokens
                })
            })
            .collect();
        let won = claimers
            .into_iter()
            .map(|c| c.join().expect("a claimer"))
            .collect();
        claiming.store(false, std::sync::atomic::Ordering::SeqCst);
        folder.join().expect("the folder");
        won
    });
    let mut granted: Vec<u64> = won.into_iter().flatten().collect();
    granted.sort_unstable();
    let before = granted.len();
    granted.dedup();
    assert_eq!(granted.len(), before, "a token granted twice: {granted:?}");
    // The ledger's tenures are 1, 2, 3, … with no gap and no repeat, across every fold and
    // revival, and each granted token is one of them.
    let recorded = tenures(&server, "x");
    let expected: Vec<u64> = (1..=recorded.len() as u64).collect();
    assert_eq!(recorded, expected);
    assert_eq!(
        granted,
        recorded[1..],
        "every tenure after the first was granted to one claimer"
    );
    on_server(&server, &at(0), &["verify"]);
    server.git(&["fsck", "--no-dangling"]);
}

#[test]
fn a_fold_of_many_ledgers_carries_their_tips_256_to_a_commit_nested_under_one() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", "alice"]);
    let issues: Vec<String> = (0..300).map(|i| format!("i{i}")).collect();
    // 260 claimed at 0, the last 40 ten seconds later: the oldest tips ride first, 256 and
    // then 4 of those claimed at 0 with the 40.
    for (batch, time) in [(&issues[..260], 0), (&issues[260..], 10)] {
        let mut args = vec!["acquire", "--ttl", "1m"];
        args.extend(batch.iter().map(String::as_str));
        repo.run_at(&at(time), &args).ok();
    }
    repo.run_at(&at(120), &["archive", "--quiet-for", "1m"])
        .ok()
        .stdout_has("300 lease ref(s) removed");
    // The fold's parent: one carrier (of the empty tree, as every carrier) of two carriers,
    // of 256 tips and 44.
    let parents = |rev: &str| -> Vec<String> {
        let line = repo.git(&["rev-list", "--parents", "-n1", rev]);
        line.split_whitespace().skip(1).map(str::to_owned).collect()
    };
    let top = parents("refs/lease-archive");
    assert_eq!(top.len(), 1, "{top:?}");
    let carriers = parents(&top[0]);
    assert_eq!(carriers.len(), 2, "{carriers:?}");
    for carrier in top.iter().chain(&carriers) {
        assert_eq!(
            repo.git(&["rev-parse", &format!("{carrier}^{{tree}}")]),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }
    let held: Vec<usize> = carriers.iter().map(|c| parents(c).len()).collect();
    assert_eq!(held, [256, 44]);
    // The fold is dated when it was made, every carrier at the epoch (so git's walks back
    // from anything a push brings end before they reach one).
    let time = |rev: &str| repo.git(&["log", "-1", "--format=%ct %at", rev]);
    let epoch = |s: i64| format!("{0} {0}", (t0() + chrono::Duration::seconds(s)).timestamp());
    assert_eq!(time("refs/lease-archive"), epoch(120));
    for carrier in top.iter().chain(&carriers) {
        assert_eq!(time(carrier), "0 0", "{carrier}");
    }
    repo.git(&["fsck", "--no-dangling"]);
    repo.run_at(&at(130), &["verify"]).ok();
    repo.run_at(&at(130), &["acquire", "i299"])
        .ok()
        .stdout_has("(token 2)");
}

/// A `reference-transaction` hook that kills, once, the `git-lease` process whose git
/// transaction of `refs/lease-archive` reaches its `committed` state (the archive moved, the
/// folded refs not yet removed): it walks up from the hook's parent (`git update-ref`) to
/// the first process running the binary under test, and sends it SIGKILL.
fn kill_after_the_archive_moves(repo: &TestRepo) {
    let armed = repo.git_dir().join("kill-armed");
    std::fs::write(&armed, "").expect("arm");
    let hook = format!(
        "#!/bin/sh\n\
         lines=$(cat)\n\
         [ \"$1\" = committed ] || exit 0\n\
         printf '%s\\n' \"$lines\" | grep -q ' refs/lease-archive$' || exit 0\n\
         rm '{armed}' 2>/dev/null || exit 0\n\
         p=$PPID\n\
         while [ \"$p\" -gt 1 ] && ! tr '\\000' '\\n' < /proc/$p/cmdline | grep -qxF '{bin}'; do\n\
         \tread -r _ _ _ p _ < /proc/$p/stat || p=1\n\
         done\n\
         [ \"$p\" -gt 1 ] && kill -KILL \"$p\"\n\
         exit 0\n",
        armed = armed.display(),
        bin = BIN,
    );
    let path = repo.git_dir().join("hooks").join("reference-transaction");
    std::fs::create_dir_all(path.parent().expect("hooks")).expect("hooks dir");
    crate::env::write_program(&path, &hook, 0o755);
}

#[test]
fn a_fold_killed_between_its_two_steps_loses_nothing_and_the_next_one_finishes_it() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", "alice"]);
    repo.run_at(&at(0), &["acquire", "1", "2", "3", "--ttl", "1m"])
        .ok();
    repo.run_at(&at(0), &["acquire", "4", "--ttl", "1h"]).ok();
    let before: Vec<Option<String>> = ["1", "2", "3"].iter().map(|i| repo.tip(i)).collect();
    kill_after_the_archive_moves(&repo);
    let run = repo.run_at(&at(120), &["archive", "--quiet-for", "1m"]);
    assert_eq!(run.code, -1, "killed by the hook\n{run}");
    assert!(
        !repo.git_dir().join("kill-armed").exists(),
        "the hook fired"
    );

    // The archive moved and records the three; their refs are still there, where they were.
    let archived = repo.git(&["ls-tree", "-r", "refs/lease-archive"]);
    for (issue, tip) in ["1", "2", "3"].iter().zip(&before) {
        let tip = tip.as_deref().expect("a tip");
        assert!(
            archived.contains(tip),
            "{issue} archived at {tip}\n{archived}"
        );
        assert_eq!(
            repo.tip(issue).as_deref(),
            Some(tip),
            "{issue} kept its ref"
        );
    }
    repo.git(&["fsck", "--no-dangling"]);
    repo.run_at(&at(130), &["verify"]).ok();
    // Each read the same, listed once.
    let all = repo.run_at(&at(130), &["--json", "list", "--all"]);
    for issue in ["1", "2", "3", "4"] {
        let needle = format!("\"issue\":\"{issue}\"");
        assert_eq!(
            all.ok().stdout.matches(&needle).count(),
            1,
            "{issue}\n{all}"
        );
    }

    // A claim meanwhile goes on from the ref with the next token ...
    repo.run_at(&at(130), &["acquire", "1", "--holder", "bob"])
        .ok()
        .stdout_has("(token 2)");
    // ... and the next fold finishes the first: it removes the refs the archive records at
    // their tips, folds nothing new, and keeps the ledger claimed meanwhile.
    let out = repo.run_at(&at(140), &["--json", "archive", "--quiet-for", "1m"]);
    let report: serde_json::Value = serde_json::from_str(&out.ok().stdout).expect("JSON");
    assert_eq!(report["folded"], serde_json::json!([]), "{report}");
    assert_eq!(report["removed"], 2, "{report}");
    assert_eq!(repo.tip("2"), None);
    assert_eq!(repo.tip("3"), None);
    assert!(repo.tip("1").is_some());
    repo.run_at(&at(150), &["acquire", "2"])
        .ok()
        .stdout_has("(token 2)");
    repo.git(&["fsck", "--no-dangling"]);
    repo.run_at(&at(150), &["verify"]).ok();
}

/// A hooked server where Alice claimed `m0` to `m1099` for a minute at the start: more
/// ledgers than a reader decodes on one thread (1,024).
fn many_claimed_for_a_minute() -> Server {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let issues: Vec<String> = (0..1100).map(|i| format!("m{i}")).collect();
    let mut args = vec!["acquire", "--holder", "alice", "--ttl", "1m"];
    args.extend(issues.iter().map(String::as_str));
    on_server(&server, &at(0), &args);
    server
}

/// A first fold of more ledgers than a reader decodes on one thread (1,024): a new clone's
/// first claim judges it, every recorded state decoded on threads, and takes it; the same fold
/// dated back to when those leases were still held, set on the server past its hook, is
/// refused by the next new clone, which pushes nothing.
#[test]
fn a_new_clone_judges_a_fold_of_many_ledgers_and_refuses_one_that_records_live_leases() {
    let server = many_claimed_for_a_minute();
    server.config("lease.hookNow", &at(600));
    on_server(&server, &at(600), &["archive", "--quiet-for", "1m"]);
    let honest = server.rev("refs/lease-archive").expect("an archive");
    assert_eq!(server.tip("m7"), None);

    let bob = server.client("bob");
    lease(&bob, 610, &["acquire", "n1", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    lease(&bob, 610, &["acquire", "m1099", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");

    // The honest fold's tree and parents, dated 30 s after the claims: every lease it records
    // was held then. The server's own account sets it, past the hook.
    let line = server.git(&["rev-list", "--parents", "-n1", &honest]);
    let parents: Vec<&str> = line.split_whitespace().skip(1).collect();
    let tree = server.git(&["rev-parse", &format!("{honest}^{{tree}}")]);
    let mut commit_tree = vec!["commit-tree", tree.trim(), "-m", "fold"];
    for parent in &parents {
        commit_tree.extend(["-p", parent]);
    }
    let when = format!(
        "{} +0000",
        (t0() + chrono::Duration::seconds(30)).timestamp()
    );
    let out = Command::new("git")
        .arg("-C")
        .arg(server.bare())
        .args(&commit_tree)
        .env("GIT_COMMITTER_DATE", &when)
        .env("GIT_AUTHOR_DATE", &when)
        .output()
        .expect("git commit-tree runs");
    assert!(out.status.success(), "{out:?}");
    let forged = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let revived = server.rev("refs/leases/m1099");
    server.git(&["update-ref", "refs/lease-archive", &forged]);
    let before = server.refs();

    // The server's hook judges every fold, so a clone would trust the newest one by default:
    // carol verifies it.
    let carol = server.client("carol");
    carol.git(&["config", "lease.trustArchive", "false"]);
    let run = lease(&carol, 620, &["acquire", "n2", "--remote", "origin"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("refs/lease-archive")
        .stderr_has("held by alice");
    assert_eq!(server.refs(), before, "nothing pushed");
    assert_eq!(server.tip("n2"), None);
    assert_eq!(server.rev("refs/leases/m1099"), revived);
}

/// A mirror's first sync of an archive of many ledgers verifies them on several threads: the
/// ledgers land in its archive, and one whose history breaks a rule is refused.
#[test]
fn a_mirrors_first_sync_of_many_archived_ledgers_refuses_the_one_that_breaks_a_rule() {
    let server = many_claimed_for_a_minute();
    // Past the hook: Mallory takes m7 over from Alice 10 s into her minute.
    let forged = crate::forge::build_chain(
        server.repo(),
        &[
            acquired("m7", "alice", 1, 0, Some(60)),
            acquired("m7", "mallory", 2, 10, Some(60)),
        ],
    );
    crate::forge::set_ledger(server.repo(), "m7", &forged[1]);
    server.config("lease.hookNow", &at(600));
    on_server(&server, &at(600), &["archive", "--quiet-for", "1m"]);
    assert_eq!(server.tip("m8"), None, "m8 is archived");

    let mirror = server.mirror();
    let run = lease(&mirror, 610, &["--json", "sync", "origin"]);
    let summary = run.json();
    let refused: Vec<&str> = summary["refused"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|r| r["issue"].as_str())
        .collect();
    assert_eq!(refused, ["m7"], "{summary}");
    assert_eq!(
        summary["archived"].as_array().map(Vec::len),
        Some(1099),
        "{summary}"
    );
}
