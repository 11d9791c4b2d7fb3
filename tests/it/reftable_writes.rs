//! Writes in a reftable repository, which git makes: each claim, renewal or release is one
//! `git update-ref -z --stdin` transaction, and its tables are read by `git for-each-ref`,
//! `git show-ref`, `git fsck` and `git refs verify`; a claim whose git is killed before it
//! commits leaves the ledger as it was, and after it commits one step on; git's writers and
//! git-lease's race on one stack and nothing is lost; the lease refs that keep a reflog keep it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use crate::env::{at_min, TestRepo};

/// The `git` on `PATH`, which the stand-in of [`logged_git`] runs.
fn real_git() -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH is set");
    std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|git| git.is_file())
        .expect("git is on PATH")
}

/// A `git` that logs its arguments, one line a run, then runs the real one: put first on
/// `PATH`, it shows every git command git-lease ran. Returns its directory and the log.
fn logged_git(repo: &TestRepo) -> (PathBuf, PathBuf) {
    let dir = repo.scratch("logged-git");
    std::fs::create_dir_all(&dir).expect("create the stand-in's directory");
    let log = dir.join("ran.log");
    std::fs::write(&log, "").expect("create the log");
    crate::env::write_program(
        &dir.join("git"),
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real_git().display()
        ),
        0o755,
    );
    (dir, log)
}

/// The names in the stack's `tables.list`.
fn tables(repo: &TestRepo) -> Vec<String> {
    let list = std::fs::read_to_string(repo.git_dir().join("reftable/tables.list"))
        .expect("read tables.list");
    list.lines().map(str::to_owned).collect()
}

/// Every ref as git lists it: name → `objectname peeled symref`.
fn git_refs(repo: &TestRepo) -> BTreeMap<String, String> {
    repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname) %(*objectname) %(symref)",
    ])
    .lines()
    .map(|line| {
        let (name, rest) = line.split_once(' ').expect("a name and values");
        (name.to_owned(), rest.to_owned())
    })
    .collect()
}

/// git's checks of the whole repository: `fsck` and `refs verify`.
fn git_checks(repo: &TestRepo) {
    repo.assert_fsck();
    let run = repo.git_run(&["refs", "verify", "--strict"]);
    assert_eq!(run.code, 0, "git refs verify failed\n{run}");
    assert!(run.stderr.trim().is_empty(), "{run}");
}

fn claims_are_transactions_of_git_that_git_reads(object_format: &str) {
    let repo = TestRepo::init(&[
        "--ref-format=reftable",
        &format!("--object-format={object_format}"),
    ]);
    let (bin, log) = logged_git(&repo);
    let issue = |i: usize| format!("area/a-longer-issue-name-{i:03}");
    let mut live = BTreeSet::new();
    let mut writes = 0;
    for i in 0..30 {
        let lease = |min: i64, args: &[&str]| {
            repo.lease()
                .path_first(&bin)
                .now(&at_min(min))
                .args(args)
                .run()
                .code(0);
        };
        lease(
            0,
            &["acquire", &issue(i), "--holder", "alice", "--ttl", "1h"],
        );
        live.insert(issue(i));
        writes += 1;
        if i % 10 == 9 {
            lease(
                1,
                &["renew", &issue(i - 1), "--holder", "alice", "--ttl", "2h"],
            );
            lease(1, &["release", &issue(i - 2), "--holder", "alice"]);
            writes += 2;
        }
    }
    // One transaction of git's a write, and no other git command but its version.
    let ran = std::fs::read_to_string(&log).expect("read the log");
    let transactions = ran.lines().filter(|l| l.contains("update-ref -z --stdin"));
    assert_eq!(transactions.count(), writes, "{ran}");
    assert!(
        ran.lines()
            .all(|l| l.contains("update-ref -z --stdin") || l == "--version"),
        "{ran}"
    );

    // git lists every ledger, and finds each alone.
    let listed: BTreeSet<String> = git_refs(&repo)
        .keys()
        .filter_map(|name| name.strip_prefix("refs/leases/"))
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, live);
    let mut verify = vec!["show-ref".to_owned(), "--verify".to_owned()];
    verify.extend(live.iter().map(|issue| format!("refs/leases/{issue}")));
    assert_eq!(repo.git(&verify).lines().count(), live.len());
    git_checks(&repo);
    repo.lease().now(&at_min(2)).args(["verify"]).run().code(0);

    // git compacts its stack, and it all reads the same after.
    let before = git_refs(&repo);
    repo.git(&["pack-refs", "--all"]);
    assert_eq!(tables(&repo).len(), 1);
    assert_eq!(git_refs(&repo), before);
    repo.lease()
        .now(&at_min(3))
        .args(["acquire", "after-git", "--holder", "bob"])
        .run()
        .code(0);
    assert!(repo.tip("after-git").is_some());
    git_checks(&repo);
}

#[test]
fn claims_are_transactions_of_git_that_git_reads_sha1() {
    claims_are_transactions_of_git_that_git_reads("sha1");
}

#[test]
fn claims_are_transactions_of_git_that_git_reads_sha256() {
    claims_are_transactions_of_git_that_git_reads("sha256");
}

/// Installs a `reference-transaction` hook that kills its git (`kill -9`) when the
/// transaction reaches the phase named in `<git dir>/kill-at`, and returns that file.
fn killing_hook(repo: &TestRepo) -> PathBuf {
    let kill_at = repo.git_dir().join("kill-at");
    let hook = repo.git_dir().join("hooks/reference-transaction");
    std::fs::create_dir_all(hook.parent().expect("hooks")).expect("create hooks/");
    crate::env::write_program(
        &hook,
        &format!(
            "#!/bin/sh\ncat >/dev/null\n\
             if [ \"$1\" = \"$(cat '{}' 2>/dev/null)\" ]; then kill -9 $PPID; fi\n",
            kill_at.display()
        ),
        0o755,
    );
    kill_at
}

/// The parent of `commit`, as git reads it.
fn parent_of(repo: &TestRepo, commit: &str) -> String {
    repo.git(&["rev-parse", &format!("{commit}^")])
}

/// Runs alice's release of ledger 7 with its git killed at `phase`; returns the tip before.
fn release_killed_at(repo: &TestRepo, kill_at: &Path, phase: &str) -> String {
    let before = repo.tip("7").expect("ledger 7 exists");
    std::fs::write(kill_at, phase).expect("arm the hook");
    let run = repo
        .lease()
        .now(&at_min(1))
        .args(["release", "7", "--holder", "alice"])
        .run();
    std::fs::write(kill_at, "").expect("disarm the hook");
    assert_ne!(run.code, 0, "git was killed under the write: {run}");
    before
}

#[test]
fn a_claim_whose_git_is_killed_leaves_the_ledger_as_it_was_or_one_step_on() {
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    repo.git(&["config", "lease.lockTimeout", "300ms"]);
    let kill_at = killing_hook(&repo);
    repo.lease()
        .now(&at_min(0))
        .args(["acquire", "7", "--holder", "alice"])
        .run()
        .code(0);

    // Killed once prepared: nothing moved, and git's lock is left, which git's own writers
    // and git-lease's refuse alike, naming it.
    let before = release_killed_at(&repo, &kill_at, "prepared");
    assert_eq!(
        repo.tip("7").as_ref(),
        Some(&before),
        "the ledger is as it was"
    );
    let lock = repo.git_dir().join("reftable/tables.list.lock");
    assert!(lock.exists(), "a killed git leaves its lock");
    repo.lease()
        .now(&at_min(1))
        .args(["release", "7", "--holder", "alice"])
        .run()
        .code(1)
        .stderr_has(lock.to_str().expect("UTF-8 path"));
    assert_ne!(
        repo.git_run(&["branch", "other"]).code,
        0,
        "git refuses too"
    );
    std::fs::remove_file(&lock).expect("remove the dead writer's lock");
    repo.lease().now(&at_min(1)).args(["verify"]).run().code(0);

    // Killed once committed: the ledger is one step on, and reads and writes go on.
    let before = release_killed_at(&repo, &kill_at, "committed");
    let after = repo.tip("7").expect("ledger 7 exists");
    assert_eq!(parent_of(&repo, &after), before, "one step on");
    assert!(!lock.exists(), "git's commit let its lock go");
    let shown = repo.json_at(&at_min(2), 0, &["show", "7"]);
    assert_eq!(shown["state"], "free", "{shown}");
    repo.json_at(&at_min(2), 0, &["acquire", "7", "--holder", "bob"]);
    repo.lease().now(&at_min(2)).args(["verify"]).run().code(0);
    git_checks(&repo);
}

#[test]
fn git_writers_and_git_lease_race_on_one_stack_and_nothing_is_lost() {
    const CLAIMERS: usize = 3;
    const CLAIMS: usize = 12;
    const BRANCHERS: usize = 2;
    const BRANCHES: usize = 12;
    let repo = Arc::new(TestRepo::init(&[
        "--ref-format=reftable",
        "--initial-branch=main",
    ]));
    repo.git(&["commit", "-q", "--allow-empty", "-m", "c0"]);
    let barrier = Arc::new(Barrier::new(CLAIMERS + BRANCHERS));
    let mut handles = Vec::new();
    for c in 0..CLAIMERS {
        let (repo, barrier) = (Arc::clone(&repo), Arc::clone(&barrier));
        handles.push(std::thread::spawn(move || {
            barrier.wait();
            for i in 0..CLAIMS {
                let run = repo
                    .lease()
                    .now(&at_min(0))
                    .args(["acquire", &format!("c{c}-{i}"), "--holder", "alice"])
                    .run();
                run.code(0);
            }
        }));
    }
    for b in 0..BRANCHERS {
        let (repo, barrier) = (Arc::clone(&repo), Arc::clone(&barrier));
        handles.push(std::thread::spawn(move || {
            barrier.wait();
            for i in 0..BRANCHES {
                // git waits for the lock as long as git-lease does (its default is 100 ms).
                let wait = "reftable.lockTimeout=3000";
                repo.git(&["-c", wait, "branch", &format!("b{b}-{i}")]);
                if i % 4 == 3 {
                    // git 2.47 gives up when a write lands between its start and its lock
                    // (244, an outdated stack) or a table it would merge is being merged
                    // (255, "data is locked"): nothing is lost, as the checks below show.
                    let run = repo.git_run(&["-c", wait, "pack-refs"]);
                    assert!(
                        run.code == 0
                            || run.code == 244
                            || run.code == 255 && run.stderr.contains("data is locked"),
                        "{run}"
                    );
                }
            }
        }));
    }
    for h in handles {
        h.join().expect("a writer failed");
    }
    let refs = git_refs(&repo);
    for c in 0..CLAIMERS {
        for i in 0..CLAIMS {
            let name = format!("refs/leases/c{c}-{i}");
            assert!(refs.contains_key(&name), "{name}");
        }
    }
    for b in 0..BRANCHERS {
        for i in 0..BRANCHES {
            let branch = format!("refs/heads/b{b}-{i}");
            assert!(refs.contains_key(&branch), "{branch}");
            let run = repo.git_run(&["reflog", "exists", &branch]);
            assert_eq!(run.code, 0, "the reflog of {branch} is kept\n{run}");
        }
    }
    repo.lease().now(&at_min(1)).args(["verify"]).run().code(0);
    git_checks(&repo);
}

#[test]
fn a_lease_ref_that_keeps_a_reflog_keeps_it() {
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    // Every ref logged: git starts the ledger's reflog.
    repo.git(&["config", "core.logAllRefUpdates", "always"]);
    repo.json_at(&at_min(0), 0, &["acquire", "logged", "--holder", "alice"]);
    repo.git(&["config", "--unset", "core.logAllRefUpdates"]);
    let messages = |issue: &str| {
        repo.git(&[
            "reflog",
            "show",
            "--format=%gs",
            &format!("refs/leases/{issue}"),
        ])
    };
    assert_eq!(messages("logged"), "git-lease: acquire");
    // Its reflog exists: git goes on writing it, although the setting is gone.
    repo.json_at(&at_min(1), 0, &["release", "logged", "--holder", "alice"]);
    assert_eq!(messages("logged"), "git-lease: release\ngit-lease: acquire");
    // Another ledger has none, and none is started.
    repo.json_at(&at_min(2), 0, &["acquire", "plain", "--holder", "alice"]);
    let run = repo.git_run(&["reflog", "exists", "refs/leases/plain"]);
    assert_ne!(run.code, 0, "no reflog was started\n{run}");
    git_checks(&repo);
}
