//! Faults and unusual repositories: ledgers corrupted by hand with plain git, stale lock files,
//! file/directory ref clashes, reftable, sha256 and unknown repository formats, bare repositories, `-C`,
//! `GIT_DIR`, subdirectories, linked worktrees, packed refs and gc.

mod corrupt;
mod layouts;
mod locks;

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
