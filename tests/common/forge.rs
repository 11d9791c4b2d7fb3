//! Ledger history built by hand with plain git plumbing (`hash-object`, `mktree`,
//! `commit-tree`, `update-ref`) in any [`TestRepo`]: a client, a local repository, or a
//! server's bare repository ([`crate::server::Server::repo`]); and the `lease.json` documents
//! to put in it, at instants given in seconds after [`crate::env::T0`].
//!
//! Used wherever a ledger is forged: local and upstream ledgers in the verify, mirror,
//! rewound, faults and output tests, and forged pushes in the hook, http, attack and servers'
//! tests.

use serde_json::{json, Value};

use crate::env::{at, TestRepo, T0};

/// Writes `bytes` as a blob (`git hash-object -w --stdin`); returns its id.
pub fn blob(repo: &TestRepo, bytes: &[u8]) -> String {
    repo.git_stdin(&["hash-object", "-w", "--stdin"], bytes)
}

/// Writes a tree (`git mktree`) of `(mode, name, object)` entries; returns its id.
pub fn tree(repo: &TestRepo, entries: &[(&str, &str, &str)]) -> String {
    let mut text = String::new();
    for (mode, name, oid) in entries {
        let kind = match *mode {
            "040000" => "tree",
            "160000" => "commit",
            _ => "blob",
        };
        text += &format!("{mode} {kind} {oid}\t{name}\n");
    }
    repo.git_stdin(&["mktree"], text.as_bytes())
}

/// A commit of one file, `hello`, that is no ledger's: what a test pushes to see a server take
/// a push.
pub fn hello_commit(repo: &TestRepo) -> String {
    let b = blob(repo, b"hello\n");
    let t = tree(repo, &[("100644", "hello", &b)]);
    repo.git(&["commit-tree", &t, "-m", "hello"])
}

/// Writes a commit (`git commit-tree [-p ...]`) of `tree` with `parents` and `message`,
/// authored and committed at `at` (RFC 3339) by the committer the tool uses.
pub fn commit(repo: &TestRepo, tree: &str, parents: &[&str], at: &str, message: &str) -> String {
    commit_signed(repo, tree, parents, at, message, None)
}

/// [`commit`], SSH-signed (`commit-tree -S`, `gpg.format=ssh`) with the private key file
/// `key` when one is given.
pub fn commit_signed(
    repo: &TestRepo,
    tree: &str,
    parents: &[&str],
    at: &str,
    message: &str,
    key: Option<&std::path::Path>,
) -> String {
    let secs = chrono::DateTime::parse_from_rfc3339(at)
        .unwrap_or_else(|e| panic!("{at:?} is not RFC 3339: {e}"))
        .timestamp();
    let date = format!("{secs} +0000");
    let signing = key.map(|k| format!("user.signingKey={}", k.display()));
    let mut args = vec![];
    if let Some(signing) = &signing {
        args.extend(["-c", "gpg.format=ssh", "-c", signing]);
    }
    args.extend(["commit-tree", tree]);
    if signing.is_some() {
        args.push("-S");
    }
    for p in parents {
        args.extend(["-p", p]);
    }
    args.extend(["-m", message]);
    let run = repo
        .git_cmd()
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .env("GIT_COMMITTER_NAME", "git-lease")
        .env("GIT_COMMITTER_EMAIL", "git-lease@localhost")
        .args(&args)
        .run();
    assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
    run.stdout.trim_end_matches('\n').to_owned()
}

/// The bytes the tool stores for `value`: pretty JSON and a final newline.
pub fn lease_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("a JSON value serializes");
    bytes.push(b'\n');
    bytes
}

/// The instant a commit for `value` is dated: its `at`, or [`T0`] if it has none.
fn event_time(value: &Value) -> String {
    value["at"]
        .as_str()
        .filter(|s| chrono::DateTime::parse_from_rfc3339(s).is_ok())
        .unwrap_or(T0)
        .to_owned()
}

/// A commit message describing `value`: `<event> <issue>: <holder> token <token>`.
fn message_for(value: &Value) -> String {
    format!(
        "{} {}: {} token {}",
        value["event"].as_str().unwrap_or("?"),
        value["issue"].as_str().unwrap_or("?"),
        value["holder"]
            .as_str()
            .or(value["previous_holder"].as_str())
            .unwrap_or("nobody"),
        value["token"]
    )
}

/// Writes a ledger commit whose tree holds exactly `lease.json` = `value`, on top of
/// `parents`, dated at its `at`, with `message`.
pub fn lease_commit_saying(
    repo: &TestRepo,
    value: &Value,
    parents: &[&str],
    message: &str,
) -> String {
    let b = blob(repo, &lease_bytes(value));
    let t = tree(repo, &[("100644", "lease.json", &b)]);
    commit(repo, &t, parents, &event_time(value), message)
}

/// [`lease_commit`], SSH-signed with the private key file `key` (unsigned when `None`).
pub fn signed_lease_commit(
    repo: &TestRepo,
    value: &Value,
    parents: &[&str],
    key: Option<&std::path::Path>,
) -> String {
    let b = blob(repo, &lease_bytes(value));
    let t = tree(repo, &[("100644", "lease.json", &b)]);
    commit_signed(
        repo,
        &t,
        parents,
        &event_time(value),
        &message_for(value),
        key,
    )
}

/// [`lease_commit_saying`] with a message describing `value`.
pub fn lease_commit(repo: &TestRepo, value: &Value, parents: &[&str]) -> String {
    lease_commit_saying(repo, value, parents, &message_for(value))
}

/// Writes a linear chain of ledger commits with `lease_commit` (such as [`lease_commit`]),
/// one per `lease.json` value, the first on top of `base` (a root if `None`); returns the
/// commit ids oldest first. Refs are not touched.
pub fn chain_with(
    repo: &TestRepo,
    base: Option<&str>,
    values: &[Value],
    lease_commit: impl Fn(&TestRepo, &Value, &[&str]) -> String,
) -> Vec<String> {
    let mut commits: Vec<String> = Vec::new();
    let mut parent = base.map(str::to_owned);
    for value in values {
        let parents: Vec<&str> = parent.iter().map(String::as_str).collect();
        let c = lease_commit(repo, value, &parents);
        parent = Some(c.clone());
        commits.push(c);
    }
    commits
}

/// [`chain_with`] [`lease_commit`].
pub fn build_chain_on(repo: &TestRepo, base: Option<&str>, values: &[Value]) -> Vec<String> {
    chain_with(repo, base, values, lease_commit)
}

/// A chain from a root; see [`build_chain_on`].
pub fn build_chain(repo: &TestRepo, values: &[Value]) -> Vec<String> {
    build_chain_on(repo, None, values)
}

/// Points `refs/leases/<issue>` at `commit` (forced, as plain git allows).
pub fn set_ledger(repo: &TestRepo, issue: &str, commit: &str) {
    repo.git(&["update-ref", &format!("refs/leases/{issue}"), commit]);
}

/// Builds a chain from `values` and points `refs/leases/<issue>` at its tip; returns the
/// commit ids oldest first.
pub fn build_ledger(repo: &TestRepo, issue: &str, values: &[Value]) -> Vec<String> {
    let commits = build_chain(repo, values);
    set_ledger(repo, issue, commits.last().expect("at least one value"));
    commits
}

/// `lease.json` of an acquire at `at_s` (seconds after T0) lasting `ttl_s` (`None`: never).
pub fn acquired(issue: &str, holder: &str, token: u64, at_s: i64, ttl_s: Option<i64>) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": "acquire",
        "holder": holder,
        "token": token,
        "acquired_at": at(at_s),
        "expires_at": ttl_s.map(|t| at(at_s + t)),
        "at": at(at_s),
    })
}

/// `lease.json` of a renew at `at_s` of the tenure begun at `since_s`, until `at_s + ttl_s`.
pub fn renewed(
    issue: &str,
    holder: &str,
    token: u64,
    since_s: i64,
    at_s: i64,
    ttl_s: i64,
) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": "renew",
        "holder": holder,
        "token": token,
        "acquired_at": at(since_s),
        "expires_at": at(at_s + ttl_s),
        "at": at(at_s),
    })
}

/// `lease.json` of a freeing `event` (release, revoke, ...) of `previous`'s tenure at `at_s`.
pub fn freed(issue: &str, event: &str, previous: &str, token: u64, at_s: i64) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": event,
        "holder": null,
        "token": token,
        "acquired_at": null,
        "expires_at": null,
        "at": at(at_s),
        "previous_holder": previous,
    })
}

/// `value` with `field` set to `to`.
pub fn with(mut value: Value, field: &str, to: Value) -> Value {
    value[field] = to;
    value
}

/// `value` without `field`.
pub fn without(mut value: Value, field: &str) -> Value {
    value.as_object_mut().expect("an object").remove(field);
    value
}
