//! Repository formats and layouts: reftable, sha256 and sha1, an unknown ref storage refused,
//! bare repositories, `-C`, `GIT_DIR`, subdirectories, linked worktrees, packed refs and gc,
//! and `GIT_NAMESPACE`.

use super::*;

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
