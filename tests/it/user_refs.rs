//! What git-lease leaves of the user's own refs: every claim, release, archive and
//! `git lease gc` leaves branches, tags, `HEAD` and their reflogs byte-identical, as
//! `git for-each-ref` and `git reflog` print them, in both ref formats.

use crate::env::{at_min, TestRepo};

/// Whether a line of `git for-each-ref` or `git reflog list` names one of git-lease's refs
/// (`refs/leases/`, `refs/lease-archive`, `refs/lease-*/`).
fn is_lease_ref(line: &str) -> bool {
    line.starts_with("refs/lease")
}

/// The user's refs as git prints them: every ref but git-lease's (name, object, peeled
/// object, symbolic target, creator and date), `HEAD`, and every reflog, raw dates included.
fn user_view(repo: &TestRepo) -> String {
    let mut view = String::new();
    let refs = repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname) %(*objectname) %(symref) %(creator)",
    ]);
    for line in refs.lines().filter(|line| !is_lease_ref(line)) {
        view.push_str(line);
        view.push('\n');
    }
    view.push_str(&format!(
        "HEAD -> {}\n",
        repo.git(&["symbolic-ref", "HEAD"])
    ));
    for name in repo.git(&["reflog", "list"]).lines() {
        if is_lease_ref(name) {
            continue;
        }
        let log = repo.git(&[
            "reflog",
            "show",
            "--date=raw",
            "--format=%H %gD %gn <%ge> %gs",
            name,
        ]);
        view.push_str(&format!("reflog {name}:\n{log}\n"));
    }
    view
}

/// A repository of `format` with branches (one checked out and back, so `HEAD` has a
/// reflog), a lightweight and an annotated tag, a remote-tracking ref and a note.
fn user_repository(format: &str) -> TestRepo {
    let repo = TestRepo::init(&[&format!("--ref-format={format}"), "--initial-branch=main"]);
    // git's own expiry of old reflog entries is not git-lease's to test: `gc --full` runs
    // `git gc`, which would expire these entries once they are 90 days old.
    repo.git(&["config", "gc.reflogExpire", "never"]);
    repo.git(&["config", "gc.reflogExpireUnreachable", "never"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "first"]);
    repo.git(&["switch", "-q", "-c", "topic"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "on topic"]);
    repo.git(&["switch", "-q", "main"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "second"]);
    repo.git(&["tag", "light"]);
    repo.git(&["tag", "-a", "-m", "annotated", "v1", "topic"]);
    repo.git(&["update-ref", "refs/remotes/origin/main", "main~1"]);
    repo.git(&["notes", "add", "-m", "a note", "main"]);
    repo
}

fn claims_and_gc_leave_the_user_refs_byte_identical(format: &str) {
    let repo = user_repository(format);
    assert_eq!(repo.ref_format(), format);
    let before = user_view(&repo);
    assert!(before.contains("refs/tags/v1 "), "{before}");
    assert!(before.contains("reflog refs/heads/topic:"), "{before}");
    let steps: [(i64, &[&str]); 9] = [
        (0, &["acquire", "1", "--holder", "alice"]),
        (0, &["acquire", "2", "3", "--holder", "alice"]),
        (1, &["renew", "1", "--holder", "alice", "--ttl", "2h"]),
        (1, &["release", "2", "--holder", "alice"]),
        (2, &["acquire", "--any", "2", "4", "--holder", "bob"]),
        (3, &["release", "3", "--holder", "alice"]),
        (600, &["archive", "--quiet-for", "1h"]),
        (601, &["gc"]),
        (602, &["gc", "--full"]),
    ];
    for (min, args) in steps {
        repo.lease().now(&at_min(min)).args(args).run().code(0);
        assert_eq!(user_view(&repo), before, "after git lease {args:?}");
    }
    // The archive folded the free ledgers; a claim revives one, and the user's refs stay.
    assert!(repo.tip("3").is_none(), "ledger 3 was archived");
    repo.lease()
        .now(&at_min(603))
        .args(["acquire", "3", "--holder", "carol"])
        .run()
        .code(0);
    assert!(repo.tip("3").is_some(), "ledger 3 revived");
    assert_eq!(user_view(&repo), before, "after the revival");
    repo.assert_fsck();
}

#[test]
fn claims_and_gc_leave_branches_tags_and_reflogs_byte_identical_files() {
    claims_and_gc_leave_the_user_refs_byte_identical("files");
}

#[test]
fn claims_and_gc_leave_branches_tags_and_reflogs_byte_identical_reftable() {
    claims_and_gc_leave_the_user_refs_byte_identical("reftable");
}
