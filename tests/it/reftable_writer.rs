//! The in-process reftable writer (`src/store/reftable/write.rs`) against git's own view of the
//! same repository: claims written with no git on `PATH`, read by `git for-each-ref`,
//! `git show-ref`, `git fsck` and `git refs verify`; a compaction of tables git wrote (annotated
//! tags' peeled ids, symbolic refs, deletions, tens of thousands of refs behind a ref index of
//! two levels) that git lists as it listed them before; git writers and in-process writers
//! racing on one stack, with nothing lost; the refs that keep a reflog, which stay git's
//! to write; and `git lease gc` killed (`kill -9`, by strace) at each of its file-system calls
//! in the stack's directory, after which nothing is lost and a later gc cleans up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Barrier};

use crate::env::{at_min, Skip, TestRepo};

/// A `git` that fails and logs that it was run, in `<scratch>/no-git/`: put first on `PATH`,
/// it proves that nothing ran git. Returns the directory and the log.
fn no_git(repo: &TestRepo) -> (PathBuf, PathBuf) {
    let dir = repo.scratch("no-git");
    std::fs::create_dir_all(&dir).expect("create the stand-in's directory");
    let log = dir.join("ran.log");
    let script = dir.join("git");
    crate::env::write_program(
        &script,
        &format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 97\n", log.display()),
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

fn claims_are_tables_git_reads(object_format: &str) {
    let repo = TestRepo::init(&[
        "--ref-format=reftable",
        &format!("--object-format={object_format}"),
    ]);
    let (bin, log) = no_git(&repo);
    let issue = |i: usize| format!("area/a-longer-issue-name-to-fill-blocks-{i:04}");
    let mut live = BTreeSet::new();
    for i in 0..400 {
        let run = repo
            .lease()
            .path_first(&bin)
            .now(&at_min(0))
            .args(["acquire", &issue(i), "--holder", "alice", "--ttl", "1h"])
            .run();
        run.code(0);
        live.insert(issue(i));
        if i % 40 == 39 {
            // A renewal and a release among the claims: writes on ledgers that exist.
            repo.lease()
                .path_first(&bin)
                .now(&at_min(1))
                .args(["renew", &issue(i - 1), "--holder", "alice", "--ttl", "2h"])
                .run()
                .code(0);
            repo.lease()
                .path_first(&bin)
                .now(&at_min(1))
                .args(["release", &issue(i - 2), "--holder", "alice"])
                .run()
                .code(0);
        }
    }
    assert!(
        !log.exists(),
        "no git ran: {:?}",
        std::fs::read_to_string(&log)
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
    let run = repo.lease().now(&at_min(2)).args(["verify"]).run();
    run.code(0);

    // The stack stays bounded: 400 transactions are a handful of tables.
    let names = tables(&repo);
    assert!(names.len() <= 12, "{} tables: {names:?}", names.len());

    // git compacts what this writer wrote, and it all reads the same after.
    let before = git_refs(&repo);
    repo.git(&["pack-refs"]);
    assert_eq!(tables(&repo).len(), 1);
    assert_eq!(git_refs(&repo), before);
    repo.lease()
        .path_first(&bin)
        .now(&at_min(3))
        .args(["acquire", "after-git", "--holder", "bob"])
        .run()
        .code(0);
    assert!(repo.tip("after-git").is_some());
    git_checks(&repo);
}

#[test]
fn claims_written_in_process_are_tables_git_reads_sha1() {
    claims_are_tables_git_reads("sha1");
}

#[test]
fn claims_written_in_process_are_tables_git_reads_sha256() {
    claims_are_tables_git_reads("sha256");
}

#[test]
fn a_compaction_of_git_tables_carries_every_record_over_as_git_lists_it() {
    let repo = TestRepo::init(&["--ref-format=reftable", "--initial-branch=main"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "c0"]);
    repo.git(&["tag", "-a", "-m", "annotated", "v1"]);
    let commit = repo.git(&["rev-parse", "HEAD"]);
    let tag = repo.git(&["rev-parse", "refs/tags/v1"]);
    // Two large tables, git's, left uncompacted: names spread by a hash (little prefix to
    // share), some at an annotated tag (records with a peeled id); the second deletes part
    // of the first and adds a symbolic ref.
    let name = |batch: &str, i: usize| {
        let digest = spread(&format!("{batch}{i}"));
        format!("refs/bulk/{batch}/{digest}")
    };
    let mut first = String::new();
    for i in 0..25_000 {
        let to = if i % 7 == 0 { &tag } else { &commit };
        first.push_str(&format!("create {} {to}\n", name("a", i)));
    }
    uncompacted(&repo, &first);
    let mut second = String::new();
    for i in 0..25_000 {
        second.push_str(&format!("create {} {commit}\n", name("b", i)));
    }
    for i in (0..25_000).step_by(5) {
        second.push_str(&format!("delete {}\n", name("a", i)));
    }
    second.push_str("symref-create refs/bulk/sym refs/heads/main\n");
    uncompacted(&repo, &second);
    let before_tables = tables(&repo);
    let before = git_refs(&repo);
    assert!(
        before.contains_key("refs/bulk/sym"),
        "{:?}",
        before.get("refs/bulk/sym")
    );

    // One claim: its write restores the geometric sequence by merging the two.
    let (bin, log) = no_git(&repo);
    repo.lease()
        .path_first(&bin)
        .now(&at_min(0))
        .args(["acquire", "7", "--holder", "alice"])
        .run()
        .code(0);
    assert!(!log.exists(), "no git ran");
    let after_tables = tables(&repo);
    assert!(
        after_tables.len() < before_tables.len(),
        "compacted: {before_tables:?} -> {after_tables:?}"
    );
    let mut after = git_refs(&repo);
    let claimed = after.remove("refs/leases/7").expect("the claim");
    assert!(claimed.starts_with(&repo.tip("7").expect("a tip")));
    assert_eq!(
        after, before,
        "every ref, peeled id and symbolic ref carried over"
    );
    for probe in [
        name("a", 1),
        name("a", 24_999),
        name("b", 0),
        name("b", 12_345),
    ] {
        repo.git(&["show-ref", "--verify", &probe]);
    }
    let gone = repo.git_run(&["show-ref", "--verify", &name("a", 5)]);
    assert_ne!(gone.code, 0, "a deleted ref stays deleted\n{gone}");
    assert_eq!(
        repo.git(&["symbolic-ref", "refs/bulk/sym"]),
        "refs/heads/main"
    );
    assert_eq!(
        repo.git(&["reflog", "show", "--format=%gs", "refs/heads/main"]),
        "commit (initial): c0"
    );
    git_checks(&repo);
}

/// Runs `git update-ref --stdin` with `input`, leaving the stack uncompacted (git 2.47 knows
/// the test variable, later gits the setting).
fn uncompacted(repo: &TestRepo, input: &str) {
    repo.git_cmd()
        .env("GIT_TEST_REFTABLE_AUTOCOMPACTION", "false")
        .args([
            "-c",
            "reftable.autoCompaction=false",
            "update-ref",
            "--stdin",
        ])
        .stdin(input)
        .run()
        .ok();
}

/// A 32-digit hex digest of `text` (two FNV-1a passes): names that share little with their
/// neighbours, so that records are long and blocks many.
fn spread(text: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    let mut g = h;
    for b in text.bytes().rev() {
        g ^= u64::from(b);
        g = g.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}{g:016x}")
}

#[test]
fn git_writers_and_in_process_writers_race_on_one_stack_and_nothing_is_lost() {
    const CLAIMERS: usize = 3;
    const CLAIMS: usize = 20;
    const BRANCHERS: usize = 2;
    const BRANCHES: usize = 20;
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
                if i % 5 == 4 {
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
            assert!(
                refs.contains_key(&format!("refs/leases/c{c}-{i}")),
                "c{c}-{i}"
            );
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
    let run = repo.lease().now(&at_min(1)).args(["verify"]).run();
    run.code(0);
    git_checks(&repo);
    assert!(tables(&repo).len() <= 12, "{:?}", tables(&repo));
}

#[test]
fn a_lease_ref_that_keeps_a_reflog_is_written_by_git_and_its_reflog_goes_on() {
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    // Every ref logged: git writes, and starts the ledger's reflog.
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

    // Another ledger has none: written in-process, with no git, and it starts none.
    let (bin, log) = no_git(&repo);
    repo.lease()
        .path_first(&bin)
        .now(&at_min(2))
        .args(["acquire", "plain", "--holder", "alice"])
        .run()
        .code(0);
    assert!(!log.exists(), "no git ran");
    let run = repo.git_run(&["reflog", "exists", "refs/leases/plain"]);
    assert_ne!(run.code, 0, "no reflog was started\n{run}");
    // And a write of the logged ledger with no git to hand is refused, not made without its
    // reflog entry.
    let run = repo
        .lease()
        .path_first(&bin)
        .now(&at_min(3))
        .args(["acquire", "logged", "--holder", "bob"])
        .run();
    assert_ne!(run.code, 0, "{run}");
    assert_eq!(messages("logged"), "git-lease: release\ngit-lease: acquire");
    let shown = repo.json_at(&at_min(3), 0, &["show", "logged"]);
    assert_eq!(shown["state"], "free", "{shown}");
    git_checks(&repo);
}

// ---------------------------------------------------------------------------------------------
// `git lease gc` killed while it compacts

/// The file-system calls `git lease gc` is killed at: every one it makes in the stack's
/// directory is a point where a kill leaves that directory in another state.
const FS_CALLS: &str = "openat,write,rename,renameat,renameat2,unlink,unlinkat,fsync";

/// A stack for `git lease gc` to compact: 3,000 refs in a table of git's, left uncompacted,
/// and three claims written in-process after it (at least two tables).
fn stack_to_compact() -> TestRepo {
    let repo = TestRepo::init(&["--ref-format=reftable", "--initial-branch=main"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "c0"]);
    let commit = repo.git(&["rev-parse", "HEAD"]);
    let bulk: String = (0..3000)
        .map(|i| format!("create refs/bulk/{} {commit}\n", spread(&i.to_string())))
        .collect();
    uncompacted(&repo, &bulk);
    for issue in ["1", "2", "3"] {
        repo.lease()
            .now(&at_min(0))
            .args(["acquire", issue, "--holder", "alice", "--ttl", "1h"])
            .run()
            .code(0);
    }
    assert!(tables(&repo).len() >= 2, "{:?}", tables(&repo));
    repo
}

/// The files in the stack's directory.
fn stack_files(repo: &TestRepo) -> BTreeSet<String> {
    std::fs::read_dir(repo.git_dir().join("reftable"))
        .expect("read the stack's directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .into_string()
                .expect("UTF-8")
        })
        .collect()
}

/// The calls of [`FS_CALLS`] that `git lease gc` makes in the stack's directory, traced in a
/// copy of `template`: each as its system call's name and its ordinal among that call's
/// invocations, which is how strace is told where to kill (`when=`).
fn calls_in_the_stack(template: &TestRepo) -> Option<Vec<(String, usize, String)>> {
    if Command::new("strace").arg("-V").output().is_err() {
        return crate::env::unavailable(Skip::Host, "", "there is no strace");
    }
    let repo = copy_of(template);
    let trace = repo.scratch("trace").join("gc.trace");
    repo.lease()
        .now(&at_min(1))
        .args(["gc"])
        .under(
            "strace",
            &[
                "-y",
                "-o",
                path_str(&trace),
                "-e",
                &format!("trace={FS_CALLS}"),
            ],
        )
        .run()
        .code(0);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut calls = Vec::new();
    let text = std::fs::read_to_string(&trace).expect("read the trace");
    for line in text.lines() {
        let Some((name, _)) = line.split_once('(') else {
            continue;
        };
        if !FS_CALLS.split(',').any(|call| call == name) {
            continue;
        }
        let ordinal = seen.entry(name.to_owned()).or_default();
        *ordinal += 1;
        if line.contains("/reftable") {
            calls.push((name.to_owned(), *ordinal, line.to_owned()));
        }
    }
    Some(calls)
}

/// A repository whose `.git` is a copy of `template`'s.
fn copy_of(template: &TestRepo) -> TestRepo {
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    let git_dir = repo.git_dir();
    std::fs::remove_dir_all(&git_dir).expect("remove the new .git");
    let out = Command::new("cp")
        .arg("-a")
        .arg(template.git_dir())
        .arg(&git_dir)
        .output()
        .expect("run cp");
    assert!(out.status.success(), "cp -a: {out:?}");
    repo
}

fn path_str(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Sets every file of the stack's directory back by `age`, as if the kill was that long ago.
fn age_the_stack(repo: &TestRepo, age: std::time::Duration) {
    let then = std::time::SystemTime::now() - age;
    for name in stack_files(repo) {
        let path = repo.git_dir().join("reftable").join(name);
        let file = std::fs::File::options()
            .append(true)
            .open(&path)
            .expect("open a file of the stack");
        file.set_modified(then).expect("set its time");
    }
}

#[test]
fn gc_killed_at_any_step_of_a_compaction_loses_nothing_and_a_later_gc_cleans_up() {
    let template = stack_to_compact();
    let Some(calls) = calls_in_the_stack(&template) else {
        return;
    };
    // Taking the list's lock, the tables' locks, writing the merged table, publishing the
    // new list, removing what it replaced: each is a point to be killed at.
    assert!(calls.len() >= 10, "{calls:#?}");
    let before = git_refs(&template);
    let before_tables = tables(&template);
    for (call, ordinal, line) in &calls {
        let repo = copy_of(&template);
        repo.git(&["config", "lease.lockTimeout", "200ms"]);
        let inject = format!("inject={call}:signal=SIGKILL:when={ordinal}");
        let run = repo
            .lease()
            .now(&at_min(1))
            .args(["gc"])
            .under(
                "strace",
                &[
                    "-o",
                    "/dev/null",
                    "-e",
                    &format!("trace={call}"),
                    "-e",
                    &inject,
                ],
            )
            .run();
        let at = format!("killed at {call} #{ordinal}: {line}");
        assert_eq!(run.code, -1, "{at}\n{run}");

        // Nothing lost: every ref as git lists it, git's checks and the ledgers'.
        assert_eq!(git_refs(&repo), before, "{at}");
        let verify = repo.git_run(&["refs", "verify", "--strict"]);
        assert_eq!(verify.code, 0, "{at}\n{verify}");
        repo.assert_fsck();
        repo.lease().now(&at_min(2)).args(["verify"]).run().code(0);
        let listed = tables(&repo);
        assert!(
            listed == before_tables || listed.len() == 1,
            "{at}: the old list or the merged table: {listed:?}"
        );

        // A kill while the list's lock is held leaves it: writes fail naming it, until
        // someone who knows that no writer runs removes it, as the error says.
        let list_lock = repo.git_dir().join("reftable/tables.list.lock");
        if list_lock.exists() {
            for args in [&["acquire", "4", "--holder", "bob"][..], &["gc"]] {
                repo.lease()
                    .now(&at_min(2))
                    .args(args)
                    .run()
                    .code(1)
                    .stderr_has(path_str(&list_lock));
            }
            std::fs::remove_file(&list_lock).expect("remove the list's lock");
        }
        repo.lease()
            .now(&at_min(2))
            .args(["acquire", "4", "--holder", "bob"])
            .run()
            .code(0)
            .stdout_has("(token 1)");

        // A month on, gc removes whatever the kill left beside the tables, and compacts.
        age_the_stack(&repo, std::time::Duration::from_secs(31 * 24 * 3600));
        repo.lease().now(&at_min(3)).args(["gc"]).run().code(0);
        let listed = tables(&repo);
        assert_eq!(listed.len(), 1, "{at}: {listed:?}");
        let mut want: BTreeSet<String> = listed.into_iter().collect();
        want.insert("tables.list".to_owned());
        assert_eq!(
            stack_files(&repo),
            want,
            "{at}: only the list and its table"
        );
        let mut after = git_refs(&repo);
        assert!(after.remove("refs/leases/4").is_some(), "{at}");
        assert_eq!(after, before, "{at}");
        git_checks(&repo);
    }
}
