//! Ledgers corrupted by hand with plain git: a commit without `lease.json`, with extra files or
//! parents, JSON that is not the format, a ref at a missing object or a blob; each is named,
//! and every other ledger still read.

use super::*;

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
