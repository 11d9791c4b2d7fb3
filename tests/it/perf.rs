//! Performance machinery must never change an answer: the list cache against cache-less
//! listings (and against corrupt or forged cache files), `git lease gc` and the automatic
//! packing trigger against what plain git sees, fsync mode against the default, and the batch
//! API (one ref transaction; a concurrent writer causes a retry, not a lost update).

use std::path::{Path, PathBuf};
use std::sync::Barrier;

use chrono::Duration;
use git_lease::batch::Operation;
use git_lease::cache::ListCache;
use git_lease::{Claim, Ending, Holder, IssueId, Ledger, Outcome, Store, Ttl};

use crate::env::{at_min, t0, TestRepo};

/// Opens the repository in-process without reading any configuration outside it.
fn open(path: &Path) -> Ledger {
    let repo = gix::open_opts(path, gix::open::Options::isolated()).expect("open the repository");
    Ledger::from_store(Store::from_repo(repo).expect("a files-backend repository"))
}

fn cache_file(repo: &TestRepo) -> PathBuf {
    ListCache::for_leases(open(repo.path()).store())
        .path()
        .to_owned()
}

/// `n` issues `p0`.. acquired at T0 by `alice` in one command (one ref transaction).
fn populate(repo: &TestRepo, prefix: &str, n: usize, ttl: &str) {
    let issues: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let mut args: Vec<&str> = vec!["acquire"];
    args.extend(issues.iter().map(String::as_str));
    args.extend(["--holder", "alice", "--ttl", ttl]);
    repo.run_at(&at_min(0), &args).ok();
}

/// Every state, at one instant, as `list --all --json` prints it.
fn listing(repo: &TestRepo, now: &str) -> String {
    let run = repo.run_at(now, &["list", "--all", "--json"]);
    run.ok();
    run.stdout
}

fn cacheless_listing(repo: &TestRepo, now: &str) -> String {
    let file = cache_file(repo);
    let _ = std::fs::remove_file(&file);
    let out = listing(repo, now);
    // Restore nothing: the cache-less run may have rebuilt it, which is fine.
    out
}

#[test]
fn the_list_cache_gives_the_same_answers_as_decoding_every_ledger() {
    let repo = TestRepo::new();
    populate(&repo, "p", 150, "30m");
    let file = cache_file(&repo);
    assert!(!file.exists(), "writes never make the cache");
    let first = listing(&repo, &at_min(5));
    assert!(
        file.exists(),
        "150 misses are past the rewrite threshold: the listing wrote {}",
        file.display()
    );
    assert_eq!(first, cacheless_listing(&repo, &at_min(5)));

    // A mix of writes: releases, renewals, a takeover after expiry, new issues, namespaces.
    repo.steps(&[
        (6, "release p1 --holder alice"),
        (6, "complete p2 --holder alice"),
        (7, "renew p3 --holder alice --ttl 2h"),
        (40, "acquire p4 --holder bob"),
        (41, "acquire gh/9 --holder carol --note ünï"),
        (42, "revoke gh/9 --holder admin --reason test"),
    ]);
    // Five refs moved: a handful of misses, well under the rewrite threshold.
    let ledger = open(repo.path());
    let (entries, stats) = git_lease::listing::list_namespace(
        ledger.store(),
        "refs/leases/",
        git_lease::step::Judgement::Recorded,
        None,
    )
    .unwrap();
    assert_eq!(entries.len(), 151);
    assert_eq!((stats.hits, stats.misses, stats.rewritten), (146, 5, false));
    for now in [at_min(8), at_min(45), at_min(200)] {
        let warm = listing(&repo, &now);
        assert!(file.exists());
        assert_eq!(warm, cacheless_listing(&repo, &now), "at {now}");
    }
    // The table and the filters go through the same entries.
    for args in [
        vec!["list"],
        vec!["list", "--all"],
        vec!["list", "--holder", "bob"],
        vec!["list", "p1"],
    ] {
        let warm = repo.run_at(&at_min(45), &args);
        let _ = std::fs::remove_file(&file);
        let cold = repo.run_at(&at_min(45), &args);
        assert_eq!(warm.stdout, cold.stdout, "{args:?}");
    }
    // Reads never write the ledger: the cache is outside refs and objects.
    let before = repo.snapshot();
    listing(&repo, &at_min(45));
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn a_corrupt_or_forged_cache_is_ignored_and_rebuilt() {
    let repo = TestRepo::new();
    populate(&repo, "q", 100, "1h");
    repo.run_at(&at_min(1), &["release", "q7", "--holder", "alice"])
        .ok();
    let reference = cacheless_listing(&repo, &at_min(2));
    let file = cache_file(&repo);

    // Garbage, truncation, an empty file.
    let good = {
        listing(&repo, &at_min(2));
        std::fs::read(&file).expect("the listing wrote the cache")
    };
    let garbage: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
    for bad in [
        garbage,
        good[..good.len() / 2].to_vec(),
        Vec::new(),
        b"GLLCACHE".to_vec(),
    ] {
        std::fs::write(&file, &bad).unwrap();
        assert_eq!(listing(&repo, &at_min(2)), reference);
        assert!(
            ListCache::for_leases(open(repo.path()).store())
                .load()
                .is_some(),
            "100 misses rebuild the cache"
        );
    }

    // One flipped byte in a record: the checksum refuses the file.
    let mut flipped = good.clone();
    let at = flipped.len() - 10;
    flipped[at] ^= 0x40;
    std::fs::write(&file, &flipped).unwrap();
    assert_eq!(listing(&repo, &at_min(2)), reference);

    // A well-formed file whose records lie: q5's tip recorded as issue q6 with another holder,
    // and q8's tip recorded as an issue that does not exist.
    let ledger = open(repo.path());
    let cache = ListCache::for_leases(ledger.store());
    let mut entries = cache.load().expect("a valid cache").entries();
    assert_eq!(entries.len(), 100);
    let tip = |issue: &str| {
        ledger
            .current(&IssueId::new(issue).unwrap())
            .unwrap()
            .unwrap()
            .commit
    };
    let (q5, q8) = (tip("q5"), tip("q8"));
    for e in &mut entries {
        if e.commit == q5 {
            e.lease.issue = "q6".into();
            e.lease.holder = Some("mallory".into());
        }
        if e.commit == q8 {
            e.lease.issue = "zz-not-a-lease".into();
            e.lease.holder = Some("mallory".into());
        }
    }
    cache.save(&entries).unwrap();
    let forged = cache
        .load()
        .expect("the forged file is well-formed")
        .entries();
    assert!(forged
        .iter()
        .any(|e| e.commit == q5 && e.lease.issue == "q6"));
    let out = listing(&repo, &at_min(2));
    assert!(!out.contains("mallory"), "{out}");
    assert_eq!(out, reference);
}

/// Loose objects and packs.
fn count_objects(repo: &TestRepo) -> (u64, u64) {
    let [loose, packs] = repo.count_objects(["count", "packs"]);
    (loose, packs)
}

/// The tables of a reftable repository's stack (`reftable/tables.list`), 0 for the files
/// backend: `git pack-refs` compacts them into one.
fn reftables(repo: &TestRepo) -> usize {
    std::fs::read_to_string(repo.git_dir().join("reftable/tables.list"))
        .map_or(0, |list| list.lines().count())
}

fn loose_lease_refs(repo: &TestRepo) -> usize {
    fn walk(dir: &Path) -> usize {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| {
                if e.path().is_dir() {
                    walk(&e.path())
                } else {
                    1
                }
            })
            .sum()
    }
    walk(&repo.git_dir().join("refs").join("leases"))
}

#[test]
fn a_cold_listing_of_many_leases_decodes_on_threads_with_the_same_answers() {
    let repo = TestRepo::new();
    populate(&repo, "m", 1500, "30m");
    repo.run_at(&at_min(1), &["release", "m7", "--holder", "alice"])
        .ok();
    let ledger = open(repo.path());
    let store = ledger.store();
    let refs = store.lease_refs().unwrap();
    assert_eq!(refs.len(), 1500);
    let serial: Vec<_> = refs
        .iter()
        .map(|(issue, tip)| store.entry(issue, *tip).unwrap())
        .collect();
    assert_eq!(store.entries(&refs).unwrap(), serial);
    let (listed, stats) = git_lease::listing::list_namespace(
        store,
        "refs/leases/",
        git_lease::step::Judgement::Recorded,
        None,
    )
    .unwrap();
    assert_eq!(
        (stats.misses, stats.hits),
        (1500, 0),
        "no cache yet: all decoded"
    );
    assert_eq!(listed.into_vec(), serial);
    // Kept as cache records from the moment they are decoded, they decode as they were.
    let encoded = store.encoded_entries(&refs, true).unwrap();
    assert_eq!(encoded.len(), 1500);
    assert_eq!(encoded.issue(7), serial[7].lease.issue);
    let encoded = git_lease::listing::Entries::Encoded(encoded);
    assert_eq!(encoded.into_vec(), serial);
}

#[test]
fn a_cold_listing_of_many_leases_prints_what_a_warm_one_prints() {
    let repo = TestRepo::new();
    // More ledgers than one thread decodes: the cold listing keeps them as records in parts.
    populate(&repo, "m", 1500, "30m");
    repo.steps(&[
        (1, "release m7 --holder alice"),
        (2, "acquire n8 --holder bob --note ünï --task job-8"),
        (3, "renew m9 --holder alice --ttl 2h"),
    ]);
    let file = cache_file(&repo);
    for (args, shown) in [
        (&["list"][..], "m1499"),
        (&["list", "--all"], "m7"),
        (&["list", "--json"], "job-8"),
        (&["list", "--all", "--json", "--state", "free"], "m7"),
    ] {
        let _ = std::fs::remove_file(&file);
        let cold = repo.run_at(&at_min(20), args);
        cold.ok();
        assert!(file.exists(), "{args:?}: the cold listing wrote no cache");
        let warm = repo.run_at(&at_min(20), args);
        warm.ok();
        assert!(cold.stdout.contains(shown), "{args:?}: {}", cold.stdout);
        assert_eq!(cold.stdout, warm.stdout, "{args:?}");
    }
}

#[test]
fn a_corrupt_ledger_among_many_is_reported_first_in_order() {
    let repo = TestRepo::new();
    populate(&repo, "m", 1500, "30m");
    // Two refs pointed at a commit that is not a ledger commit (an empty tree), far apart in
    // name order so that different threads decode them.
    let names: Vec<String> = open(repo.path())
        .store()
        .lease_refs()
        .unwrap()
        .into_iter()
        .map(|(issue, _)| issue)
        .collect();
    let (first_bad, later_bad) = (names[100].clone(), names[1400].clone());
    let empty_tree = repo.git_stdin(&["mktree"], b"");
    let bogus = repo.git(&["commit-tree", &empty_tree, "-m", "not a ledger"]);
    for issue in [&later_bad, &first_bad] {
        repo.git(&["update-ref", &format!("refs/leases/{issue}"), &bogus]);
    }
    let ledger = open(repo.path());
    let refs = ledger.store().lease_refs().unwrap();
    match ledger.store().entries(&refs) {
        Err(git_lease::Error::Corrupt { issue, commit, .. }) => {
            assert_eq!((&issue, &commit), (&first_bad, &bogus));
        }
        other => panic!("expected the corrupt {first_bad}, got {other:?}"),
    }
    repo.run_at(&at_min(1), &["list"])
        .code(1)
        .stderr_has(&first_bad)
        .stderr_has(&bogus);
}

#[test]
fn a_packed_refs_rewrite_that_keeps_its_time_is_still_seen_by_a_claim() {
    // gix reloads packed-refs only when its modification time is newer. Another writer's
    // update, packed by `git pack-refs` into a file with the old time, must still be the old
    // value a claim compares against, or that update would be lost.
    if crate::env::skip_under_reftable(
        "a_packed_refs_rewrite_that_keeps_its_time_is_still_seen_by_a_claim",
        "a reftable repository has no packed-refs (git compares the old value under its lock)",
    ) {
        return;
    }
    let repo = TestRepo::new();
    repo.run_at(&at_min(0), &["acquire", "p", "--holder", "alice"])
        .ok();
    repo.git(&["pack-refs", "--all", "--prune"]);
    let ledger = open(repo.path());
    let now = t0();
    // A first claim: this store has now read packed-refs as it is.
    ledger
        .acquire(&id("q"), &claim("bob"), now + Duration::minutes(1))
        .unwrap();
    assert_eq!(ledger.current(&id("p")).unwrap().unwrap().lease.token, 1);

    // Another process renews p, and p is packed again into a file with the old time.
    let packed = repo.git_dir().join("packed-refs");
    let time = std::fs::metadata(&packed).unwrap().modified().unwrap();
    repo.run_at(
        &at_min(2),
        &["renew", "p", "--holder", "alice", "--ttl", "3h"],
    )
    .ok();
    repo.git(&["pack-refs", "--all", "--prune"]);
    std::fs::File::options()
        .write(true)
        .open(&packed)
        .unwrap()
        .set_modified(time)
        .unwrap();
    assert!(!repo.git_dir().join("refs/leases/p").exists());

    // This store's release must build on the renewal, not on what it read before.
    let r = ledger
        .release(
            &id("p"),
            &Holder::new("alice").unwrap(),
            Ending::Release,
            now + Duration::minutes(3),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Released);
    let events: Vec<String> = repo
        .chain("p")
        .into_iter()
        .map(|(_, lease)| lease["event"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        events,
        ["acquire", "renew", "release"],
        "oldest first, none lost"
    );
    repo.assert_fsck();
}

#[test]
fn gc_packs_lease_objects_and_refs_and_everything_still_reads() {
    let repo = TestRepo::new();
    populate(&repo, "g", 20, "1h");
    repo.run_at(&at_min(1), &["release", "g3", "--holder", "alice"])
        .ok();
    repo.run_at(&at_min(2), &["acquire", "gh/1", "--holder", "bob"])
        .ok();
    assert_eq!(
        count_objects(&repo),
        (66, 0),
        "every event's objects are loose, as git writes them, a multi-claim's too"
    );
    let reftable = repo.ref_format() == "reftable";
    // With reftable, refs are never loose: git keeps them in tables, which it compacts
    // (geometrically after each write, into one with `git pack-refs`).
    assert_eq!(loose_lease_refs(&repo), if reftable { 0 } else { 21 });
    let before = listing(&repo, &at_min(3));
    let log_before = repo.run_at(&at_min(3), &["log", "g3"]).stdout;

    let v = repo.json_at(&at_min(3), 0, &["gc"]);
    assert_eq!(v["loose_objects_after"], 0, "{v}");
    // The loose objects are packed by their ids, with no walk from every ref (`git repack`).
    let commands = v["commands"].to_string();
    assert!(commands.contains("git pack-objects"), "{v}");
    assert!(commands.contains("git prune-packed"), "{v}");
    assert!(!commands.contains("repack"), "{v}");
    assert_eq!(v["loose_lease_refs_after"], 0, "{v}");
    assert_eq!(count_objects(&repo).0, 0);
    assert_eq!(loose_lease_refs(&repo), 0);
    if reftable {
        assert_eq!(reftables(&repo), 1, "the tables were compacted into one");
        assert_eq!(repo.lease_refs().lines().count(), 21);
    } else {
        let packed = std::fs::read_to_string(repo.git_dir().join("packed-refs")).unwrap();
        assert_eq!(packed.matches(" refs/leases/").count(), 21, "{packed}");
    }

    assert_eq!(listing(&repo, &at_min(3)), before);
    assert_eq!(repo.run_at(&at_min(3), &["log", "g3"]).stdout, log_before);
    repo.run_at(&at_min(3), &["verify"]).ok();
    repo.assert_fsck();
    // Writes go on on top of packed refs and objects.
    repo.run_at(&at_min(4), &["acquire", "g3", "--holder", "carol"])
        .ok();
    assert_eq!(repo.lease_json("g3")["token"], 2);
    repo.run_at(&at_min(5), &["gc", "--full"]).ok();
    assert_eq!(count_objects(&repo), (0, 1));
    repo.assert_fsck();
}

/// Runs commands acquiring `per_command` new issues each until `done` says so, at most
/// `limit` commands; returns how many ran.
fn acquire_until(
    repo: &TestRepo,
    per_command: usize,
    env: &[(&str, &str)],
    limit: usize,
    mut done: impl FnMut() -> bool,
) -> usize {
    for round in 0..limit {
        let issues: Vec<String> = (0..per_command).map(|i| format!("r{round}x{i}")).collect();
        let mut cmd = repo.lease().now(&at_min(0)).args(["acquire"]);
        cmd = cmd.args(&issues).args(["--holder", "alice"]);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        cmd.run().ok();
        if done() {
            return round + 1;
        }
    }
    panic!("the automatic packing never ran in {limit} commands");
}

#[test]
fn the_write_path_packs_loose_objects_automatically_past_the_threshold() {
    // Synchronous (GIT_LEASE_GC_SYNC=1): deterministic. git's estimate needs more than
    // ceil(5 / 256) = 1 object in objects/17: a few hundred objects of single claims.
    let repo = TestRepo::new();
    repo.git(&["config", "lease.gcAuto", "5"]);
    let sync = [("GIT_LEASE_GC_SYNC", "1")];
    let commands = acquire_until(&repo, 1, &sync, 2000, || count_objects(&repo).1 > 0);
    let (loose, _) = count_objects(&repo);
    assert!(loose < 3, "{loose} loose objects after {commands} claims");
    assert_eq!(loose_lease_refs(&repo), 0, "git gc --auto packs refs too");
    let listed = repo.json_at(&at_min(1), 0, &["list"]);
    assert_eq!(listed.as_array().unwrap().len(), commands);
    repo.assert_fsck();

    // lease.gcAuto=0 disables it.
    let repo = TestRepo::new();
    repo.git(&["config", "lease.gcAuto", "0"]);
    for i in 0..300 {
        repo.lease()
            .now(&at_min(0))
            .env("GIT_LEASE_GC_SYNC", "1")
            .args(["acquire", &format!("s{i}"), "--holder", "alice"])
            .run()
            .ok();
    }
    assert_eq!(count_objects(&repo), (900, 0));
}

#[test]
fn a_claim_leaves_git_gc_auto_to_run_in_the_background() {
    // A multi-claim writes loose objects; past the threshold the claim starts
    // `git gc --auto` and returns at once. git packs the refs in the foreground, then lets
    // go of `gc.pid` before its background part takes it again to repack: so `git fsck`
    // waits (bounded) for what that part leaves (one pack, nothing loose, no `gc.pid`).
    let repo = TestRepo::new();
    repo.git(&["config", "lease.gcAuto", "5"]);
    let reftable = repo.ref_format() == "reftable";
    // git's estimate is past 5 with two objects in objects/17: the claim that puts them
    // there starts git (which may have packed them already when this looks).
    let seventeen = repo.git_dir().join("objects/17");
    let in_seventeen = || std::fs::read_dir(&seventeen).map_or(0, |d| d.count());
    let commands = acquire_until(&repo, 60, &[], 20, || {
        in_seventeen() >= 2 || count_objects(&repo).1 > 0
    });
    let gc_pid = repo.git_dir().join("gc.pid");
    let done = (0..600).any(|_| {
        let refs_packed = reftable || loose_lease_refs(&repo) == 0;
        if count_objects(&repo) == (0, 1) && refs_packed && !gc_pid.exists() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        false
    });
    assert!(done, "git gc --auto did not finish within 30 s");
    let listed = repo.json_at(&at_min(1), 0, &["list"]);
    assert_eq!(listed.as_array().unwrap().len(), 60 * commands);
    repo.assert_fsck();
}

#[test]
fn fsync_mode_changes_nothing_but_durability() {
    let plain = TestRepo::new();
    let synced = TestRepo::new();
    synced.git(&["config", "lease.fsync", "true"]);
    let legacy = TestRepo::new();
    legacy.git(&["config", "core.fsync", "committed"]);
    let script: Vec<(i64, Vec<&str>)> = vec![
        (0, vec!["acquire", "a", "b", "gh/1", "--holder", "alice"]),
        (1, vec!["renew", "a", "--holder", "alice", "--ttl", "2h"]),
        (2, vec!["release", "b", "--holder", "alice"]),
        (3, vec!["acquire", "b", "--holder", "bob"]),
        (4, vec!["acquire", "a", "--holder", "bob"]),
        (5, vec!["complete", "gh/1", "--holder", "alice"]),
    ];
    for (min, args) in &script {
        let want = plain.run_at(&at_min(*min), args);
        for repo in [&synced, &legacy] {
            let got = repo.run_at(&at_min(*min), args);
            assert_eq!(
                (got.code, &got.stdout),
                (want.code, &want.stdout),
                "{args:?}"
            );
        }
    }
    // Commits are reproducible from their inputs, so the ledgers are identical.
    assert_eq!(synced.lease_refs(), plain.lease_refs());
    assert_eq!(legacy.lease_refs(), plain.lease_refs());
    synced.assert_fsck();
}

fn claim(holder: &str) -> Claim {
    Claim::new(Holder::new(holder).unwrap(), Ttl::parse("1h").unwrap())
}

fn id(s: &str) -> IssueId {
    IssueId::new(s).unwrap()
}

#[test]
fn a_batch_of_fifty_operations_is_one_ref_transaction() {
    let repo = TestRepo::new();
    repo.git(&["config", "core.logAllRefUpdates", "always"]);
    let ledger = open(repo.path());
    let now = t0();
    for i in 0..10 {
        ledger
            .acquire(&id(&format!("old{i}")), &claim("alice"), now)
            .unwrap();
    }
    let later = now + Duration::minutes(5);
    let mut ops = Vec::new();
    for i in 0..40 {
        ops.push((id(&format!("new{i}")), Operation::Acquire(claim("bob"))));
    }
    for i in 0..5 {
        ops.push((
            id(&format!("old{i}")),
            Operation::Renew {
                holder: Holder::new("alice").unwrap(),
                secret: None,
                ttl: Ttl::parse("2h").unwrap(),
            },
        ));
    }
    for i in 5..10 {
        ops.push((
            id(&format!("old{i}")),
            Operation::Release {
                holder: Holder::new("alice").unwrap(),
                secret: None,
                ending: Ending::Complete,
            },
        ));
    }
    assert_eq!(ops.len(), 50);
    let mut transactions = 0;
    let reports = ledger
        .apply_batch_with(&ops, later, &mut |_| transactions += 1)
        .unwrap();
    assert_eq!(transactions, 1, "one ref transaction, not retried");
    assert_eq!(reports.len(), 50);
    for (report, (issue, _)) in reports.iter().zip(&ops) {
        assert_eq!(&report.issue, issue);
        assert!(report.wrote, "{report:?}");
        let tip = ledger.store().tip(issue).unwrap();
        assert_eq!(tip, report.entry.as_ref().map(|e| e.commit), "{issue}");
    }
    for r in &reports[..40] {
        assert_eq!(r.outcome, Outcome::Acquired);
        assert_eq!(r.lease().unwrap().token, 1);
        assert_eq!(r.lease().unwrap().holder.as_deref(), Some("bob"));
    }
    for r in &reports[40..45] {
        assert_eq!(r.outcome, Outcome::Renewed);
        assert_eq!(r.lease().unwrap().token, 1);
    }
    for r in &reports[45..] {
        assert_eq!(r.outcome, Outcome::Released);
        assert_eq!(r.lease().unwrap().holder, None);
    }
    // Every ref moved in the same transaction: one reflog entry each, by the batch.
    let reflog = repo.git(&["reflog", "show", "--format=%gs", "refs/leases/new7"]);
    assert_eq!(reflog, "git-lease: batch");
    assert_eq!(
        repo.git(&["reflog", "show", "--format=%gs", "refs/leases/old2"]),
        "git-lease: batch\ngit-lease: acquire"
    );
    repo.assert_fsck();
    repo.run_at(&at_min(6), &["verify"]).ok();

    // Several operations on one issue apply in order; refusals are per operation.
    let ops = vec![
        (id("new0"), Operation::Acquire(claim("carol"))),
        (
            id("seq"),
            Operation::Release {
                holder: Holder::new("dave").unwrap(),
                secret: None,
                ending: Ending::Release,
            },
        ),
        (id("seq"), Operation::Acquire(claim("dave"))),
        (
            id("seq"),
            Operation::Release {
                holder: Holder::new("dave").unwrap(),
                secret: None,
                ending: Ending::Release,
            },
        ),
        (id("seq"), Operation::Acquire(claim("erin"))),
    ];
    let reports = ledger.apply_batch(&ops, later).unwrap();
    let outcomes: Vec<Outcome> = reports.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Held,
            Outcome::NotHeld,
            Outcome::Acquired,
            Outcome::Released,
            Outcome::Acquired
        ]
    );
    assert_eq!(reports[4].lease().unwrap().token, 2);
    assert_eq!(repo.commit_count("seq"), 3);
    assert_eq!(repo.lease_json("seq")["holder"], "erin");
    repo.run_at(&at_min(6), &["verify"]).ok();
}

#[test]
fn a_conflicting_writer_makes_a_batch_retry_not_lose_an_update() {
    let repo = TestRepo::new();
    let path = repo.path().to_owned();
    let now = t0();
    let decided = Barrier::new(2);
    let written = Barrier::new(2);
    let (reports, attempts) = std::thread::scope(|s| {
        let batch = s.spawn(|| {
            let ledger = open(&path);
            let ops: Vec<(IssueId, Operation)> = (0..50)
                .map(|i| (id(&format!("c{i}")), Operation::Acquire(claim("alice"))))
                .collect();
            let mut attempts = Vec::new();
            let reports = ledger
                .apply_batch_with(&ops, now, &mut |attempt| {
                    attempts.push(attempt);
                    if attempt == 0 {
                        decided.wait(); // alice decided and wrote her objects
                        written.wait(); // bob took c25 meanwhile
                    }
                })
                .unwrap();
            (reports, attempts)
        });
        s.spawn(|| {
            let ledger = open(&path);
            decided.wait();
            let r = ledger.acquire(&id("c25"), &claim("bob"), now).unwrap();
            assert_eq!(r.outcome, Outcome::Acquired);
            written.wait();
        });
        batch.join().unwrap()
    });
    assert_eq!(attempts, [0, 1], "the lost transaction was retried once");
    for (i, r) in reports.iter().enumerate() {
        let lease = r.lease().unwrap();
        assert_eq!(lease.token, 1);
        if i == 25 {
            assert_eq!(r.outcome, Outcome::Held);
            assert!(!r.wrote);
            assert_eq!(lease.holder.as_deref(), Some("bob"));
        } else {
            assert_eq!(r.outcome, Outcome::Acquired, "c{i}");
            assert_eq!(lease.holder.as_deref(), Some("alice"));
        }
    }
    // No lost update: bob's claim stands alone in its ledger; alice holds the other 49.
    assert_eq!(repo.commit_count("c25"), 1);
    assert_eq!(repo.lease_json("c25")["holder"], "bob");
    for i in (0..50).filter(|i| *i != 25) {
        assert_eq!(repo.lease_json(&format!("c{i}"))["holder"], "alice");
        assert_eq!(repo.commit_count(&format!("c{i}")), 1);
    }
    repo.run_at(&at_min(1), &["verify"]).ok();
}
