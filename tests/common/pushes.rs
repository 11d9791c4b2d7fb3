//! Ledger commits forged with plain git plumbing in a client and pushed for real, and what
//! the server's hook answers: a refusal naming its rule ([`assert_refused`], [`assert_fenced`])
//! or a push that lands ([`push_accepted`]). Used by the hook, fence, archive, http and
//! servers' tests.

use serde_json::Value;

use crate::env::{Run, TestRepo};
use crate::forge;
use crate::server::Server;

/// The message of every commit forged here.
const FORGED: &str = "forged ledger commit";

/// Writes a commit of `tree` on top of `parents`, dated `when` (RFC 3339); see
/// [`forge::commit`].
pub fn commit(repo: &TestRepo, tree: &str, parents: &[&str], when: &str) -> String {
    forge::commit(repo, tree, parents, when, FORGED)
}

/// A ledger commit whose tree holds exactly `lease.json` = `value`, on top of `parents`.
pub fn lease_commit(repo: &TestRepo, value: &Value, parents: &[&str]) -> String {
    forge::lease_commit_saying(repo, value, parents, FORGED)
}

/// A chain of ledger commits on top of `base` (a root if `None`); ids oldest first.
pub fn chain_on(repo: &TestRepo, base: Option<&str>, values: &[Value]) -> Vec<String> {
    forge::chain_with(repo, base, values, lease_commit)
}

/// Plain `git push origin <refspecs>` from `client` (with `--force` if asked); the whole run.
pub fn push(client: &TestRepo, force: bool, refspecs: &[&str]) -> Run {
    let mut args = vec!["push"];
    if force {
        args.push("--force");
    }
    args.push("origin");
    args.extend_from_slice(refspecs);
    client.git_run(&args)
}

/// Asserts that `run` (a push) was refused by the hook for `issue` at `commit` with `rule`.
#[track_caller]
pub fn assert_refused(run: &Run, issue: &str, commit: &str, rule: &str) {
    if let Err(why) = check_refused(run, issue, commit, rule) {
        panic!("{why}");
    }
}

/// Whether `run` was refused as [`assert_refused`] asserts; why not, if not.
pub fn check_refused(run: &Run, issue: &str, commit: &str, rule: &str) -> Result<(), String> {
    let line = format!(
        "remote: git-lease: refused issue {issue} at {}: {rule}: ",
        &commit[..12]
    );
    if run.code == 0 {
        return Err(format!(
            "`{}` was accepted; expected {line:?}\n{run}",
            run.command
        ));
    }
    if !run.stderr.contains(&line) {
        return Err(format!("`{}` should say {line:?}\n{run}", run.command));
    }
    if !run.stderr.contains("hook declined") {
        return Err(format!(
            "`{}` should report `hook declined`\n{run}",
            run.command
        ));
    }
    Ok(())
}

/// Pushes `commits` (oldest first) to `refs/leases/<issue>` one tip at a time, asserting each
/// is accepted and lands.
#[track_caller]
pub fn push_accepted(server: &Server, client: &TestRepo, issue: &str, commits: &[String]) {
    let Some(tip) = commits.last() else { return };
    let run = push(client, false, &[&format!("{tip}:refs/leases/{issue}")]);
    assert_eq!(run.code, 0, "a legitimate push was refused\n{run}");
    assert_eq!(server.tip(issue).as_deref(), Some(tip.as_str()));
}

/// Asserts that a push to a fenced branch was refused by the hook's `fence` rule with a
/// detail mentioning every one of `needles`.
#[track_caller]
pub fn assert_fenced(run: &Run, branch: &str, needles: &[&str]) {
    assert_ne!(run.code, 0, "the fenced push was accepted\n{run}");
    let prefix = format!("remote: git-lease: refused refs/heads/{branch} at ");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no refusal of refs/heads/{branch} in stderr\n{run}"));
    assert!(
        line.contains(": fence: "),
        "the refusal should name the fence rule\n{run}"
    );
    for needle in needles {
        assert!(
            line.contains(needle),
            "the refusal should mention {needle:?}\n{run}"
        );
    }
}
