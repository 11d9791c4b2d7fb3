//! Faults and unusual repositories: ledgers corrupted by hand with plain git, stale lock files,
//! file/directory ref clashes, reftable, sha256 and unknown repository formats, bare repositories, `-C`,
//! `GIT_DIR`, subdirectories, linked worktrees, packed refs and gc.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::env::{at_min, TestRepo, T0};
use crate::forge::{acquired, lease_bytes};

/// A valid `lease.json` for `issue`, held by `holder` with `token`, as the tool writes it.
fn lease_doc(issue: &str, holder: &str, token: u64) -> Value {
    acquired(issue, holder, token, 0, Some(3600))
}

/// Builds a commit by hand: a tree of `files` (name, content), with `parents`.
fn hand_commit(repo: &TestRepo, files: &[(&str, &[u8])], parents: &[&str]) -> String {
    let mut tree_text = String::new();
    for (name, content) in files {
        let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], content);
        tree_text += &format!("100644 blob {blob}\t{name}\n");
    }
    let tree = repo.git_stdin(&["mktree"], tree_text.as_bytes());
    let mut args = vec![
        "commit-tree".to_owned(),
        tree,
        "-m".into(),
        "by hand".into(),
    ];
    for p in parents {
        args.push("-p".into());
        args.push((*p).to_owned());
    }
    repo.git(&args)
}

/// Claims the issues `<prefix>0` to `<prefix><count - 1>` for `holder`, in one command.
fn acquire_many(repo: &TestRepo, prefix: &str, count: usize, holder: &str) {
    let issues: Vec<String> = (0..count).map(|i| format!("{prefix}{i}")).collect();
    let mut args: Vec<&str> = vec!["acquire"];
    args.extend(issues.iter().map(String::as_str));
    args.extend(["--holder", holder]);
    repo.json_at(T0, 0, &args);
}

fn point(repo: &TestRepo, issue: &str, commit: &str) {
    repo.git(&["update-ref", &format!("refs/leases/{issue}"), commit]);
}

/// Asserts that every command reading the ledger of `issue` fails with exit 1 naming `commit`
/// and `reason`, and that none of them moves the ref or writes a ref.
#[track_caller]
fn assert_corrupt(repo: &TestRepo, issue: &str, commit: &str, reason: &str) {
    let before = repo.tip(issue);
    let refs = repo.lease_refs();
    let now = at_min(1);
    let cases: Vec<Vec<&str>> = vec![
        vec!["show", issue],
        vec!["--json", "show", issue],
        vec!["acquire", issue, "--holder", "bob"],
        vec!["acquire", issue, "--holder", "alice"],
        vec!["renew", issue, "--holder", "alice"],
        vec!["release", issue, "--holder", "alice"],
        vec!["log", issue],
        vec!["check", issue, "--token", "1"],
    ];
    for args in &cases {
        repo.run_at(&now, args)
            .code(1)
            .stderr_has("corrupt")
            .stderr_has(commit)
            .stderr_has(reason);
        assert_eq!(repo.tip(issue), before, "{args:?} moved the ref");
    }
    assert_eq!(repo.lease_refs(), refs, "no ref was created or moved");
}

#[test]
fn a_ledger_commit_without_lease_json_is_corrupt() {
    let repo = TestRepo::new();
    let commit = hand_commit(&repo, &[("notes.txt", b"hello\n")], &[]);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "lease.json");
}

#[test]
fn a_ledger_commit_with_an_empty_tree_is_corrupt() {
    let repo = TestRepo::new();
    let commit = hand_commit(&repo, &[], &[]);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "lease.json");
}

#[test]
fn a_lease_json_that_is_not_json_is_corrupt() {
    let repo = TestRepo::new();
    let commit = hand_commit(&repo, &[("lease.json", b"not json at all\n")], &[]);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "lease.json");
}

#[test]
fn a_lease_json_of_an_unknown_version_is_named_as_such() {
    let repo = TestRepo::new();
    let mut doc = lease_doc("42", "alice", 1);
    doc["version"] = json!(99);
    let commit = hand_commit(&repo, &[("lease.json", &lease_bytes(&doc))], &[]);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "99");
}

#[test]
fn a_lease_json_for_another_issue_is_corrupt() {
    let repo = TestRepo::new();
    let doc = lease_doc("43", "alice", 1);
    let commit = hand_commit(&repo, &[("lease.json", &lease_bytes(&doc))], &[]);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "43");
}

#[test]
fn a_lease_json_with_missing_fields_is_corrupt() {
    let repo = TestRepo::new();
    let commit = hand_commit(
        &repo,
        &[("lease.json", br#"{"version": 1, "issue": "42"}"#)],
        &[],
    );
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "lease.json");
}

#[test]
fn a_ledger_commit_with_extra_files_is_corrupt() {
    let repo = TestRepo::new();
    let doc = lease_bytes(&lease_doc("42", "alice", 1));
    let commit = hand_commit(&repo, &[("lease.json", &doc), ("extra.txt", b"x\n")], &[]);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "extra.txt");
}

#[test]
fn a_ledger_merge_commit_is_corrupt() {
    let repo = TestRepo::new();
    let doc = lease_bytes(&lease_doc("42", "alice", 1));
    let a = hand_commit(&repo, &[("lease.json", &doc)], &[]);
    let b = hand_commit(
        &repo,
        &[("lease.json", &lease_bytes(&lease_doc("42", "bob", 1)))],
        &[],
    );
    let merge = hand_commit(&repo, &[("lease.json", &doc)], &[&a, &b]);
    point(&repo, "42", &merge);
    assert_corrupt(&repo, "42", &merge, "parent");
}

#[test]
fn a_lease_ref_pointing_at_a_blob_is_corrupt() {
    let repo = TestRepo::new();
    let blob = repo.git_stdin(
        &["hash-object", "-w", "--stdin"],
        &lease_bytes(&lease_doc("42", "a", 1)),
    );
    point(&repo, "42", &blob);
    assert_corrupt(&repo, "42", &blob, "not a commit");
}

#[test]
fn a_corrupt_commit_deep_in_the_chain_fails_log_naming_it() {
    let repo = TestRepo::new();
    let root = hand_commit(
        &repo,
        &[("lease.json", &lease_bytes(&lease_doc("42", "a", 1)))],
        &[],
    );
    let bad = hand_commit(&repo, &[("lease.json", b"{broken")], &[&root]);
    let tip = hand_commit(
        &repo,
        &[("lease.json", &lease_bytes(&lease_doc("42", "a", 1)))],
        &[&bad],
    );
    point(&repo, "42", &tip);
    // The tip itself is fine, so show answers...
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "a");
    // ...but the history is not, and log says where.
    repo.run_at(&at_min(1), &["log", "42"])
        .code(1)
        .stderr_has(&bad);
}

#[test]
fn a_hand_built_valid_ledger_is_accepted() {
    // The control case for the corrupt ones above: the same plumbing with a valid record.
    let repo = TestRepo::new();
    let commit = hand_commit(
        &repo,
        &[("lease.json", &lease_bytes(&lease_doc("42", "alice", 5)))],
        &[],
    );
    point(&repo, "42", &commit);
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(
        (v["holder"].clone(), v["token"].clone()),
        (json!("alice"), json!(5))
    );
    let v = repo.json_at(&at_min(60), 0, &["acquire", "42", "--holder", "bob"]);
    assert_eq!(v["token"], 6);
    assert_eq!(
        repo.git(&["rev-parse", "refs/leases/42^"]),
        commit,
        "the new event is on top of the hand-made one"
    );
}

// ---------------------------------------------------------------------------------------------
// Locks

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
    run.code(1)
        .stderr_has(lock.to_str().expect("UTF-8 path"))
        .stderr_has("lock");
    assert!(
        took < Duration::from_millis(2500),
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
        .stderr_has(lock.to_str().expect("UTF-8 path"));
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(repo.tip("gh/7"), tip);
    // Reads do not need the lock.
    let v = repo.json_at(&at_min(1), 0, &["show", "gh/7"]);
    assert_eq!(v["holder"], "alice");
    // A refusal decides without writing, so it does not need the lock either.
    repo.json_at(&at_min(1), 3, &["acquire", "gh/7", "--holder", "bob"]);
}

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

// ---------------------------------------------------------------------------------------------
// Ref clashes

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

// ---------------------------------------------------------------------------------------------
// Repository formats and layouts

#[test]
fn a_reftable_repository_works_end_to_end() {
    // Explicitly reftable, in both runs of the suite: its refs go through git itself.
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    assert_eq!(repo.git(&["rev-parse", "--show-ref-format"]), "reftable");
    end_to_end(&repo, 40);
    assert!(
        !repo.git_dir().join("refs/leases").exists(),
        "no loose ref was written beside the tables"
    );
    let v = repo.json_at(&at_min(8), 0, &["verify"]);
    assert_eq!(v["clean"], true, "{v}");
}

#[test]
fn a_sha256_reftable_repository_works_end_to_end() {
    let repo = TestRepo::init(&["--ref-format=reftable", "--object-format=sha256"]);
    assert_eq!(repo.git(&["rev-parse", "--show-ref-format"]), "reftable");
    end_to_end(&repo, 64);
}

#[test]
fn an_unknown_ref_storage_is_refused_clearly() {
    let repo = TestRepo::init(&["--ref-format=files"]);
    repo.git(&["config", "core.repositoryFormatVersion", "1"]);
    repo.git(&["config", "extensions.refStorage", "tomorrows-format"]);
    for args in [
        vec!["acquire", "1", "--holder", "a"],
        vec!["show", "1"],
        vec!["list"],
    ] {
        repo.run_at(T0, &args)
            .code(2)
            .stderr_has("tomorrows-format")
            .stderr_has("extensions.refStorage");
    }
    assert!(
        !repo.git_dir().join("refs/leases").exists(),
        "nothing was written"
    );
}

/// Drives a full history through `repo` and checks it with plain git.
fn end_to_end(repo: &TestRepo, hex_len: usize) {
    let v = repo.json_at(
        T0,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "10m"],
    );
    assert_eq!(v["token"], 1);
    let commit = v["commit"].as_str().expect("commit");
    assert_eq!(commit.len(), hex_len, "{commit}");
    assert_eq!(repo.tip("42").as_deref(), Some(commit));
    repo.json_at(&at_min(1), 3, &["acquire", "42", "--holder", "bob"]);
    repo.json_at(&at_min(2), 0, &["renew", "42", "--holder", "alice"]);
    repo.json_at(
        &at_min(3),
        0,
        &["check", "42", "--token", "1", "--holder", "alice"],
    );
    repo.json_at(&at_min(4), 0, &["release", "42", "--holder", "alice"]);
    let v = repo.json_at(&at_min(5), 0, &["acquire", "42", "--holder", "bob"]);
    assert_eq!(v["token"], 2);
    let shown = repo.json_at(&at_min(6), 0, &["show", "4"]);
    assert_eq!(shown["holder"], "bob");
    let log = repo.json_at(&at_min(6), 0, &["log", "42"]);
    assert_eq!(log.as_array().map(Vec::len), Some(4));
    let list = repo.json_at(&at_min(6), 0, &["list"]);
    assert_eq!(list[0]["issue"], "42");
    assert_eq!(repo.lease_json("42")["holder"], "bob");
    assert_eq!(repo.commit_count("42"), 4);
    repo.assert_fsck();

    // A multi-claim writes its nine objects loose, as git would, each readable by git.
    let before = repo.count_objects(["count"])[0];
    repo.json_at(
        &at_min(7),
        0,
        &["acquire", "7", "8", "9", "--holder", "carol"],
    );
    assert_eq!(repo.count_objects(["count", "packs"]), [before + 9, 0]);
    for issue in ["7", "8", "9"] {
        assert_eq!(repo.lease_json(issue)["holder"], "carol");
    }
    repo.assert_fsck();
}

#[test]
fn a_sha256_repository_works_end_to_end() {
    let repo = TestRepo::init(&["--object-format=sha256"]);
    assert_eq!(repo.git(&["rev-parse", "--show-object-format"]), "sha256");
    end_to_end(&repo, 64);
}

#[test]
fn a_sha1_repository_works_end_to_end() {
    end_to_end(&TestRepo::new(), 40);
}

#[test]
fn a_bare_repository_works_end_to_end() {
    let repo = TestRepo::bare();
    assert_eq!(repo.git(&["rev-parse", "--is-bare-repository"]), "true");
    end_to_end(&repo, 40);
}

#[test]
fn dash_c_runs_as_if_started_in_the_path() {
    let repo = TestRepo::new();
    let elsewhere = repo.scratch("elsewhere");
    let path = repo.path().to_str().expect("UTF-8").to_owned();
    let v = repo
        .lease()
        .now(T0)
        .cwd(&elsewhere)
        .args(["-C", &path, "--json", "acquire", "1", "--holder", "a"])
        .run();
    v.ok();
    assert_eq!(v.json()["token"], 1);
    assert!(repo.tip("1").is_some(), "written into the -C repository");
    // Relative, and repeated as in git: -C <root> -C repo.
    let root = repo.root().to_str().expect("UTF-8").to_owned();
    let run = repo
        .lease()
        .now(T0)
        .cwd(&elsewhere)
        .args(["-C", &root, "-C", "repo", "--json", "show", "1"])
        .run();
    run.ok();
    assert_eq!(run.json()["holder"], "a");
    let run = repo
        .lease()
        .now(T0)
        .cwd(repo.root())
        .args(["show", "1", "-C", "repo"])
        .run();
    run.ok().stdout_has("holder");
    // -C into a directory that does not exist is an error, not a silent no-op.
    let run = repo
        .lease()
        .now(T0)
        .cwd(&elsewhere)
        .args(["-C", "nowhere", "list"])
        .run();
    assert_ne!(run.code, 0, "{run}");
    assert!(run.stderr.contains("nowhere"), "{run}");
}

#[test]
fn git_dir_is_honoured() {
    for repo in [TestRepo::new(), TestRepo::bare()] {
        let elsewhere = repo.scratch("elsewhere");
        let run = repo
            .lease()
            .now(T0)
            .cwd(&elsewhere)
            .env("GIT_DIR", repo.git_dir())
            .args(["--json", "acquire", "1", "--holder", "a"])
            .run();
        run.ok();
        assert!(repo.tip("1").is_some(), "written through GIT_DIR: {run}");
        let run = repo
            .lease()
            .now(T0)
            .cwd(&elsewhere)
            .env("GIT_DIR", repo.git_dir())
            .args(["--json", "show", "1"])
            .run();
        run.ok();
        assert_eq!(run.json()["holder"], "a");
    }
}

#[test]
fn a_subdirectory_of_the_work_tree_finds_the_repository() {
    let repo = TestRepo::new();
    let sub = repo.path().join("src/deep");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let run = repo
        .lease()
        .now(T0)
        .cwd(&sub)
        .args(["--json", "acquire", "1", "--holder", "a"])
        .run();
    run.ok();
    assert!(repo.tip("1").is_some());
}

#[test]
fn linked_worktrees_share_the_ledgers() {
    let repo = TestRepo::new();
    repo.git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    let wt = repo.root().join("wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().expect("UTF-8"),
    ]);
    let run = repo
        .lease()
        .now(T0)
        .cwd(&wt)
        .args(["--json", "acquire", "1", "--holder", "a"])
        .run();
    run.ok();
    // Seen from the main work tree...
    let v = repo.json_at(&at_min(1), 3, &["acquire", "1", "--holder", "b"]);
    assert_eq!(v["holder"], "a");
    // ...and the ref lives in the common dir, not the worktree's private one.
    if !crate::env::skip_under_reftable(
        "linked_worktrees_share_the_ledgers",
        "the loose ref file in the common dir (the lease is seen from both work trees)",
    ) {
        assert!(repo.git_dir().join("refs/leases/1").exists());
    }
    repo.json_at(&at_min(2), 0, &["release", "1", "--holder", "a"]);
    let run = repo
        .lease()
        .now(&at_min(3))
        .cwd(&wt)
        .args(["--json", "show", "1"])
        .run();
    run.ok();
    assert_eq!(run.json()["state"], "free");
}

#[test]
fn packed_refs_and_gc_keep_the_ledger_working() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a"]);
    repo.json_at(T0, 0, &["acquire", "gh/2", "--holder", "a"]);
    repo.git(&["pack-refs", "--all"]);
    assert!(!repo.git_dir().join("refs/leases/1").exists(), "ref packed");
    if repo.ref_format() == "reftable" {
        // Packed, for reftable: the tables compacted into one.
        let tables = std::fs::read_to_string(repo.git_dir().join("reftable/tables.list"))
            .expect("reftable/tables.list");
        assert_eq!(tables.lines().count(), 1, "{tables}");
    }
    // Reads and compare-and-swap work against a packed ref.
    repo.json_at(&at_min(1), 3, &["acquire", "1", "--holder", "b"]);
    repo.json_at(&at_min(1), 0, &["release", "1", "--holder", "a"]);
    let v = repo.json_at(&at_min(2), 0, &["acquire", "1", "--holder", "b"]);
    assert_eq!(v["token"], 2);
    assert_eq!(repo.commit_count("1"), 3);
    repo.git(&["gc", "-q", "--prune=now"]);
    let v = repo.json_at(&at_min(3), 0, &["log", "1"]);
    assert_eq!(
        v.as_array().map(Vec::len),
        Some(3),
        "gc kept the whole ledger"
    );
    let v = repo.json_at(&at_min(3), 0, &["list"]);
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    repo.json_at(&at_min(4), 0, &["release", "gh/2", "--holder", "a"]);
    repo.assert_fsck();
}

#[test]
fn a_lease_ref_to_a_missing_object_is_a_failure_naming_it() {
    let repo = TestRepo::new();
    let refs = || repo.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let missing = if crate::env::reftable() {
        // git writes no ref to an object it does not have, and a reftable has no file to
        // write by hand: the ref is set to a real commit whose object is then lost.
        let commit = hand_commit(&repo, &[("lease.json", b"{}")], &[]);
        point(&repo, "42", &commit);
        let objects = repo.git_dir().join("objects");
        std::fs::remove_file(objects.join(&commit[..2]).join(&commit[2..])).expect("lose it");
        commit
    } else {
        let missing = "1234567890123456789012345678901234567890";
        let ref_file = repo.git_dir().join("refs/leases/42");
        std::fs::create_dir_all(ref_file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&ref_file, format!("{missing}\n")).expect("write the ref by hand");
        missing.to_owned()
    };
    let before = refs();
    assert!(before.contains(&missing), "{before}");
    repo.run_at(T0, &["show", "42"])
        .code(1)
        .stderr_has(&missing);
    repo.run_at(T0, &["acquire", "42", "--holder", "a"])
        .code(1)
        .stderr_has(&missing);
    assert_eq!(refs(), before, "the ref is untouched");
}

#[test]
fn git_namespace_keeps_ledgers_inside_the_namespace() {
    let repo = TestRepo::new();
    let ns = |args: &[&str], min: i64| {
        repo.lease()
            .now(&at_min(min))
            .env("GIT_NAMESPACE", "team")
            .args(args)
            .run()
    };
    ns(&["acquire", "x", "--holder", "alice"], 0).ok();
    ns(&["renew", "x", "--holder", "alice"], 1).ok();
    ns(&["release", "x", "--holder", "alice"], 2).ok();
    let refs = repo.git(&["for-each-ref", "--format=%(refname)"]);
    assert!(
        refs.lines()
            .any(|r| r == "refs/namespaces/team/refs/leases/x"),
        "{refs}"
    );
    assert!(!refs.lines().any(|r| r == "refs/leases/x"), "{refs}");
    assert_eq!(
        repo.git(&["rev-list", "--count", "refs/namespaces/team/refs/leases/x"]),
        "3"
    );
    // Outside the namespace there is no such lease.
    repo.run_at(&at_min(3), &["show", "x"]).code(4);
}

// ---------------------------------------------------------------------------------------------
// lease.json: only a regular file, and a bounded one

/// Builds a commit by hand whose tree holds one entry `lease.json` of `mode` (`100644`,
/// `100755`, `120000` with a blob, or `160000` with a commit) pointing at `object`.
fn hand_commit_with_mode(repo: &TestRepo, mode: &str, object: &str) -> String {
    let kind = if mode == "160000" { "commit" } else { "blob" };
    let tree = repo.git_stdin(
        &["mktree"],
        format!("{mode} {kind} {object}\tlease.json\n").as_bytes(),
    );
    repo.git(&["commit-tree", &tree, "-m", "by hand"])
}

#[test]
fn a_lease_json_that_is_not_a_plain_regular_file_is_corrupt() {
    let repo = TestRepo::new();
    let doc = lease_bytes(&lease_doc("42", "alice", 1));
    let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], &doc);
    // The very same valid record, as an executable and as a symbolic link...
    for mode in ["100755", "120000"] {
        let commit = hand_commit_with_mode(&repo, mode, &blob);
        point(&repo, "42", &commit);
        assert_corrupt(&repo, "42", &commit, mode);
        repo.run_at(&at_min(1), &["verify"])
            .code(1)
            .stdout_has(&commit)
            .stdout_has(mode);
    }
    // ...and a submodule (gitlink) named lease.json.
    let valid = hand_commit(&repo, &[("lease.json", &doc)], &[]);
    let commit = hand_commit_with_mode(&repo, "160000", &valid);
    point(&repo, "42", &commit);
    assert_corrupt(&repo, "42", &commit, "160000");
    // The control: mode 100644 is read.
    let commit = hand_commit_with_mode(&repo, "100644", &blob);
    point(&repo, "42", &commit);
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "alice");
}

/// A valid `lease.json` for issue 42 of exactly `len` bytes (its note pads it).
fn lease_json_of_len(len: usize) -> Vec<u8> {
    let mut doc = lease_doc("42", "alice", 1);
    doc["note"] = json!("");
    let base = lease_bytes(&doc).len();
    doc["note"] = json!("n".repeat(len - base));
    let bytes = lease_bytes(&doc);
    assert_eq!(bytes.len(), len);
    bytes
}

#[test]
fn a_lease_json_over_64_kib_is_corrupt() {
    let repo = TestRepo::new();
    // Enough other ledgers that a listing reads through the bounded object database first.
    acquire_many(&repo, "o", 1100, "bob");
    // At the limit, a record is read.
    let at_limit = hand_commit(&repo, &[("lease.json", &lease_json_of_len(65536))], &[]);
    point(&repo, "42", &at_limit);
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "alice");
    repo.run_at(&at_min(1), &["verify"]).ok();
    // One byte more, or 30 MB, and it is refused, naming its size.
    for len in [65537, 30 << 20] {
        let commit = hand_commit(&repo, &[("lease.json", &lease_json_of_len(len))], &[]);
        point(&repo, "42", &commit);
        assert_corrupt(&repo, "42", &commit, &format!("{len} bytes"));
        repo.run_at(&at_min(1), &["verify"])
            .code(1)
            .stdout_has(&commit)
            .stdout_has("65536");
        let cache = repo.git_dir().join("git-lease").join("list-cache");
        let _ = std::fs::remove_file(&cache);
        let run = repo.run_at(&at_min(1), &["list", "--all"]);
        run.code(1)
            .stderr_has(&commit)
            .stderr_has(&format!("{len} bytes"));
    }
}

/// A listing of many ledgers reads each `lease.json` first through an object database that
/// allocates at most 256 KiB for one object, delta bases included. A valid record that git
/// packed as a delta of a larger blob needs more than that, and is read as every other reader
/// reads it.
#[test]
fn a_lease_json_packed_as_a_delta_of_a_large_blob_is_listed() {
    let repo = TestRepo::new();
    // Enough other ledgers for a listing to open the bounded object database (1024).
    acquire_many(&repo, "o", 1100, "bob");
    let record = lease_json_of_len(60_000);
    // A blob of 1 MiB more that begins with the record, under the same name on a branch.
    let mut large = record.clone();
    large.extend(std::iter::repeat_n(b'n', 1 << 20));
    let aside = hand_commit(&repo, &[("lease.json", &large)], &[]);
    repo.git(&["update-ref", "refs/heads/aside", &aside]);
    let commit = hand_commit(&repo, &[("lease.json", &record)], &[]);
    point(&repo, "42", &commit);
    repo.git(&["repack", "-a", "-d", "-f", "-q"]);
    // The premise, as git packed it: the record is a delta whose base is the large blob.
    let record_id = repo.git_stdin(&["hash-object", "--stdin"], &record);
    let large_id = repo.git_stdin(&["hash-object", "--stdin"], &large);
    let pack_dir = repo.git_dir().join("objects").join("pack");
    let index = std::fs::read_dir(&pack_dir)
        .expect("read the pack directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .expect("a pack index");
    let packed = repo.git(&["verify-pack", "-v", &index.to_string_lossy()]);
    let line = packed
        .lines()
        .find(|l| l.starts_with(&record_id))
        .expect("the record in the pack");
    assert!(
        line.ends_with(&large_id),
        "not a delta of the large blob: {line}"
    );

    let cache = repo.git_dir().join("git-lease").join("list-cache");
    let _ = std::fs::remove_file(&cache);
    let listed = repo.json_at(&at_min(1), 0, &["list", "--all"]);
    let rows = listed.as_array().expect("a JSON array");
    assert_eq!(rows.len(), 1101);
    let record_row = rows
        .iter()
        .find(|row| row["issue"] == "42")
        .expect("42 listed");
    assert_eq!(record_row["holder"], "alice");
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "alice");
}

/// `verify` checks thousands of ledgers a block at a time, on several threads: every ledger
/// and commit is counted, and broken ledgers in different blocks, and on either side of a
/// block's halves, are all reported, in issue order.
#[test]
fn verify_of_thousands_of_ledgers_reports_every_broken_one_in_issue_order() {
    let repo = TestRepo::new();
    // 13,500 loose objects would start `git gc --auto` in the background, whose
    // `pack-refs --prune` verify would then read through (gc_race.rs tests that).
    repo.git(&["config", "lease.gcAuto", "0"]);
    acquire_many(&repo, "v", 4500, "bob");
    // Each of these now points at a first commit recording issue 42.
    let forged = hand_commit(
        &repo,
        &[("lease.json", &lease_bytes(&lease_doc("42", "alice", 1)))],
        &[],
    );
    let broken = ["v7", "v1500", "v2100", "v4400"];
    for issue in broken {
        point(&repo, issue, &forged);
    }
    let v = repo.json_at(&at_min(1), 1, &["verify"]);
    assert_eq!(v["clean"], false, "{v}");
    assert_eq!(v["ledgers"], 4500, "{v}");
    assert_eq!(v["commits"], 4500, "{v}");
    let named: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["issue"].as_str().expect("an issue"))
        .collect();
    assert_eq!(named, broken, "{v}");
}

// ---------------------------------------------------------------------------------------------
// The list cache

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

// ---------------------------------------------------------------------------------------------
// Locks held by others are named as they are

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

// ---------------------------------------------------------------------------------------------
// Temporary files of killed writers

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
