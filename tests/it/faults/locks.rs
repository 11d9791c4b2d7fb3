//! What others leave in the way: stale lock files (named as the lock held, bounded in time,
//! the ledger untouched), ref clashes between files and directories, a FIFO at the list
//! cache's path, and temporary files of killed writers.

use super::*;

/// A repository whose lock timeout is 300 ms, with alice's lease of `packed` (T0) moved into
/// `packed-refs`.
fn alice_holds_a_packed_lease() -> TestRepo {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.lockTimeout", "300ms"]);
    repo.json_at(T0, 0, &["acquire", "packed", "--holder", "alice"]);
    repo.git(&["pack-refs", "--all", "--prune"]);
    repo
}

#[test]
fn a_stale_lock_file_fails_in_bounded_time_naming_the_lock() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.lockTimeout", "300ms"]);
    // The ref's own lock; with reftable, the lock of every ref.
    let lock = repo.ref_lock("42");
    std::fs::create_dir_all(lock.parent().expect("parent")).expect("mkdir");
    std::fs::write(&lock, b"").expect("create the stale lock");
    let started = Instant::now();
    let run = repo.run_at(T0, &["acquire", "42", "--holder", "alice"]);
    let took = started.elapsed();
    // The wait was the configured one, not the default 3s; and it ended.
    run.code(1)
        .stderr_has(lock.to_str().expect("UTF-8 path"))
        .stderr_has("held for more than 300 ms");
    assert!(
        took < Duration::from_secs(10),
        "lease.lockTimeout=300ms must bound the wait (took {took:?})"
    );
    assert_eq!(repo.tip("42"), None, "nothing was created");
    assert!(lock.exists(), "someone else's lock is never removed");
    // Once the lock is gone, the acquire goes through as the first tenure.
    std::fs::remove_file(&lock).expect("remove the lock");
    let v = repo.json_at(T0, 0, &["acquire", "42", "--holder", "alice"]);
    assert_eq!(v["token"], 1);
}

#[test]
fn a_stale_lock_on_an_existing_ledger_leaves_it_untouched() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.lockTimeout", "300ms"]);
    repo.json_at(T0, 0, &["acquire", "gh/7", "--holder", "alice"]);
    let tip = repo.tip("gh/7");
    let lock = repo.ref_lock("gh/7");
    std::fs::write(&lock, b"").expect("create the stale lock");
    let started = Instant::now();
    repo.run_at(&at_min(1), &["release", "gh/7", "--holder", "alice"])
        .code(1)
        .stderr_has(lock.to_str().expect("UTF-8 path"))
        .stderr_has("held for more than 300 ms");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(repo.tip("gh/7"), tip);
    // Reads do not need the lock.
    let v = repo.json_at(&at_min(1), 0, &["show", "gh/7"]);
    assert_eq!(v["holder"], "alice");
    // A refusal decides without writing, so it does not need the lock either.
    repo.json_at(&at_min(1), 3, &["acquire", "gh/7", "--holder", "bob"]);
}

#[test]
fn a_held_packed_refs_lock_does_not_block_claims() {
    // As in git, a claim locks only its own ref: `git pack-refs` or `git gc` holding
    // packed-refs.lock meanwhile neither blocks it nor is disturbed by it.
    if crate::env::skip_under_reftable(
        "a_held_packed_refs_lock_does_not_block_claims",
        "a reftable repository has no packed-refs, and one lock for every ref",
    ) {
        return;
    }
    let repo = alice_holds_a_packed_lease();
    assert!(!repo.git_dir().join("refs/leases/packed").exists());
    let lock = repo.git_dir().join("packed-refs.lock");
    std::fs::write(&lock, b"held by a packer\n").expect("create packed-refs.lock");

    let v = repo.json_at(&at_min(1), 0, &["acquire", "fresh", "--holder", "bob"]);
    assert_eq!(v["token"], 1);
    // The old value of a packed ref is checked under the ref's own lock.
    let v = repo.json_at(&at_min(2), 0, &["renew", "packed", "--holder", "alice"]);
    assert_eq!(v["token"], 1);
    assert_eq!(repo.commit_count("packed"), 2);
    repo.json_at(&at_min(3), 3, &["acquire", "packed", "--holder", "bob"]);

    assert_eq!(
        std::fs::read(&lock).expect("the lock is still there"),
        b"held by a packer\n"
    );
    std::fs::remove_file(&lock).expect("release packed-refs.lock");
    repo.assert_fsck();
    repo.run_at(&at_min(4), &["verify"]).ok();
}

#[test]
fn a_lease_cannot_be_a_directory_of_an_existing_lease() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "a", "--holder", "x"]);
    let refs = repo.lease_refs();
    for id in ["a/b", "a/b/c"] {
        repo.run_at(T0, &["acquire", id, "--holder", "x"])
            .code(2)
            .stderr_has("clash")
            .stderr_has("refs/leases/a");
    }
    assert_eq!(repo.lease_refs(), refs);
    // Still a clash once a is free: refs are never deleted.
    repo.json_at(&at_min(1), 0, &["release", "a", "--holder", "x"]);
    repo.run_at(&at_min(2), &["acquire", "a/b", "--holder", "x"])
        .code(2)
        .stderr_has("refs/leases/a");
}

#[test]
fn a_lease_cannot_be_named_like_an_existing_directory_of_leases() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "a/b", "--holder", "x"]);
    let refs = repo.lease_refs();
    repo.run_at(T0, &["acquire", "a", "--holder", "x"])
        .code(2)
        .stderr_has("clash")
        .stderr_has("refs/leases/a/b");
    assert_eq!(repo.lease_refs(), refs);
    // A sibling is fine.
    repo.json_at(T0, 0, &["acquire", "a/c", "--holder", "x"]);
    repo.json_at(T0, 0, &["acquire", "ab", "--holder", "x"]);
    repo.assert_fsck();
}

#[test]
fn a_fifo_at_the_list_cache_path_is_neither_read_nor_kept() {
    use std::sync::mpsc;
    let repo = TestRepo::new();
    // Enough leases for a listing to rewrite the cache (more misses than 64).
    acquire_many(&repo, "c", 70, "alice");
    let cache = repo.git_dir().join("git-lease").join("list-cache");
    std::fs::create_dir_all(cache.parent().expect("parent")).expect("mkdir git-lease");
    let made = std::process::Command::new("mkfifo")
        .arg(&cache)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo {}", cache.display());

    let mut list = repo
        .lease()
        .now(&at_min(1))
        .args(["--json", "list", "--all"])
        .command();
    list.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = list.spawn().expect("spawn list");
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    // A guard against hanging the test run, not a measure: a listing that opened the FIFO
    // for reading waits for a writer forever, so one is given (which closes at once, ending
    // the read) before the failure is reported.
    let out = match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out.expect("wait for list"),
        Err(_) => {
            let _ = std::fs::OpenOptions::new().write(true).open(&cache);
            panic!("`list` blocked reading the FIFO at {}", cache.display());
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(70));
    // The rewrite replaced the FIFO with a cache file, which the next listing uses.
    let kind = std::fs::symlink_metadata(&cache).expect("stat").file_type();
    assert!(kind.is_file(), "{kind:?}");
    let again = repo.json_at(&at_min(1), 0, &["list", "--all"]);
    assert_eq!(again, listed);
}

#[test]
fn a_stale_packed_refs_lock_is_named_as_the_lock_held() {
    if crate::env::skip_under_reftable(
        "a_stale_packed_refs_lock_is_named_as_the_lock_held",
        "a reftable repository has no packed-refs (its one lock is tested in reftable.rs)",
    ) {
        return;
    }
    let repo = alice_holds_a_packed_lease();
    let lock = repo.git_dir().join("packed-refs.lock");
    std::fs::write(&lock, b"").expect("create a stale packed-refs.lock");
    // A claim of several issues is one transaction, which also locks packed-refs.
    let run = repo.run_at(&at_min(1), &["acquire", "x", "y", "--holder", "bob"]);
    run.code(1)
        .stderr_has(lock.to_str().expect("UTF-8 path"))
        .stderr_has("rm ");
    assert!(
        !run.stderr.contains("refs/leases/x.lock") && !run.stderr.contains("refs/leases/y.lock"),
        "a lock that does not exist is blamed:\n{run}"
    );
    assert_eq!(repo.tip("x"), None);
    assert_eq!(repo.tip("y"), None);
    std::fs::remove_file(&lock).expect("remove the lock");
    repo.json_at(&at_min(2), 0, &["acquire", "x", "y", "--holder", "bob"]);
}

#[test]
fn gc_removes_only_old_temporary_files() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a"]);
    let git_dir = repo.git_dir();
    let objects = git_dir.join("objects");
    let now = std::time::SystemTime::now();
    let day = Duration::from_secs(24 * 3600);
    let make = |path: std::path::PathBuf, age: Duration| {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let file = std::fs::File::create(&path).expect("create");
        file.set_modified(now - age).expect("set its time");
        path
    };
    let month = 30 * day;
    let stale = [
        make(objects.join("tmp_obj_aB3dE9"), month),
        make(objects.join(".tmpGx1x2Y"), month),
        make(objects.join("17").join("tmp_obj_x1Y2z3"), month),
        make(objects.join("pack").join(".tmpQ1w2E3"), month),
        make(objects.join("pack").join("tmp_pack_Zz9Yy8"), month),
        make(
            git_dir
                .join("git-lease")
                .join(".list-cache.tmp-4242-0badcafe"),
            month,
        ),
    ];
    let kept = [
        // Fresh ones: a write in progress.
        make(objects.join("tmp_obj_fresh1"), Duration::ZERO),
        make(objects.join("pack").join(".tmpFresh1"), Duration::ZERO),
        make(
            git_dir.join("git-lease").join(".list-cache.tmp-1-00000000"),
            Duration::ZERO,
        ),
        // Younger than gc.pruneExpire (two weeks by default).
        make(objects.join("tmp_obj_week01"), 7 * day),
        // Old, but not a temporary file.
        make(objects.join("pack").join("notes.txt"), month),
        make(objects.join("pack").join(".tmpTooLongName"), month),
        make(git_dir.join("git-lease").join("list-cache-old"), month),
    ];
    let v = repo.json_at(&at_min(1), 0, &["gc"]);
    assert_eq!(v["temporary_files_removed"], stale.len(), "{v}");
    for path in &stale {
        assert!(!path.exists(), "{} was left", path.display());
    }
    for path in &kept {
        assert!(path.exists(), "{} was removed", path.display());
    }

    // gc.pruneExpire=now: anything older than an hour goes, still never a fresh one.
    repo.git(&["config", "gc.pruneExpire", "now"]);
    let hours = make(
        objects.join("tmp_obj_hours1"),
        2 * 3600 * Duration::from_secs(1),
    );
    let v = repo.json_at(&at_min(2), 0, &["gc"]);
    assert_eq!(v["temporary_files_removed"], 2, "{v}");
    assert!(!hours.exists() && !kept[3].exists());
    assert!(kept[0].exists() && kept[1].exists() && kept[2].exists());

    // gc.pruneExpire=never: nothing goes.
    repo.git(&["config", "gc.pruneExpire", "never"]);
    let old = make(objects.join("tmp_obj_never1"), month);
    let v = repo.json_at(&at_min(3), 0, &["gc"]);
    assert_eq!(v["temporary_files_removed"], 0, "{v}");
    assert!(old.exists());
    repo.assert_fsck();
    repo.json_at(&at_min(4), 0, &["show", "1"]);
}
