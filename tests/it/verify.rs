//! `git lease verify`: ledgers built by hand with plain git (`hash-object`, `mktree`,
//! `commit-tree`, `update-ref`, see [`crate::forge`]), each breaking exactly one transition
//! rule of docs/FORMAT.md, must be reported with that rule's name; a ledger the tool wrote
//! verifies clean.
//!
//! The `lease.json` constructors here, in minutes after T0, are also used by the mirror tests
//! to forge upstream history.

use serde_json::{json, Value};

use crate::env::{at_min, Run, TestRepo, T0};
use crate::forge::{
    self, blob, build_ledger, commit, lease_bytes, lease_commit, set_ledger, tree, with,
};
use crate::server::Server;

// ---------------------------------------------------------------------------------------------
// `lease.json` in minutes
// ---------------------------------------------------------------------------------------------

/// `lease.json` of an acquire by `holder` of `token` at `at` minutes, for `ttl` minutes.
pub fn acquired(issue: &str, holder: &str, token: u64, at: i64, ttl: i64) -> Value {
    forge::acquired(issue, holder, token, at * 60, Some(ttl * 60))
}

/// `lease.json` of a renew by `holder` at `at` minutes of the tenure begun at `since`.
pub fn renewed(issue: &str, holder: &str, token: u64, since: i64, at: i64, ttl: i64) -> Value {
    forge::renewed(issue, holder, token, since * 60, at * 60, ttl * 60)
}

/// `lease.json` of a release by `previous` of `token` at `at` minutes.
pub fn released(issue: &str, previous: &str, token: u64, at: i64) -> Value {
    forge::freed(issue, "release", previous, token, at * 60)
}

// ---------------------------------------------------------------------------------------------
// Assertions
// ---------------------------------------------------------------------------------------------

/// Runs `git lease --json verify <issues>` and returns the run and its parsed output.
fn verify_json(repo: &TestRepo, issues: &[&str]) -> (Run, Value) {
    let mut args = vec!["--json", "verify"];
    args.extend_from_slice(issues);
    let run = repo.run(&args);
    let value = run.json();
    (run, value)
}

/// Asserts that verify fails (exit 1) with findings that all name `rule` in `issue`, one of
/// them at `commit`; the human output names the rule too.
#[track_caller]
fn assert_only_rule(repo: &TestRepo, issue: &str, rule: &str, commit: &str) {
    let (run, v) = verify_json(repo, &[]);
    run.code(1);
    assert_eq!(v["clean"], json!(false), "{run}");
    let findings = v["findings"].as_array().expect("findings is an array");
    assert!(!findings.is_empty(), "no findings\n{run}");
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap_or("?"))
        .collect();
    assert!(
        rules.iter().all(|r| *r == rule),
        "expected only rule {rule:?}, found {rules:?}\n{run}"
    );
    for f in findings {
        assert_eq!(f["issue"], json!(issue), "{run}");
        assert!(
            f["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "a finding without detail\n{run}"
        );
    }
    assert!(
        findings.iter().any(|f| f["commit"] == json!(commit)),
        "no finding names the offending commit {commit}\n{run}"
    );
    let human = repo.run(&["verify"]);
    human.code(1).stdout_has(rule).stdout_has(commit);
}

fn repo_with(issue: &str, values: &[Value]) -> (TestRepo, Vec<String>) {
    let repo = TestRepo::new();
    let commits = build_ledger(&repo, issue, values);
    (repo, commits)
}

// ---------------------------------------------------------------------------------------------
// A ledger that follows the rules
// ---------------------------------------------------------------------------------------------

#[test]
fn a_ledger_written_by_the_tool_verifies_clean() {
    let repo = TestRepo::new();
    let steps: &[(i64, &[&str])] = &[
        (0, &["acquire", "42", "--holder", "alice", "--ttl", "1h"]),
        (10, &["renew", "42", "--holder", "alice", "--ttl", "1h"]),
        (15, &["acquire", "42", "--holder", "alice", "--ttl", "2h"]),
        (20, &["release", "42", "--holder", "alice"]),
        (30, &["acquire", "42", "--holder", "bob", "--ttl", "15m"]),
        // bob's lease expired at 45: carol takes it over.
        (120, &["acquire", "42", "--holder", "carol", "--ttl", "1h"]),
        (130, &["complete", "42", "--holder", "carol"]),
        (0, &["acquire", "7", "--holder", "dave", "--ttl", "never"]),
        (5, &["abandon", "7", "--holder", "dave"]),
    ];
    for (min, args) in steps {
        repo.run_at(&at_min(*min), args).ok();
    }
    assert_eq!(repo.commit_count("42"), 7);
    assert_eq!(repo.commit_count("7"), 2);

    let human = repo.run(&["verify"]);
    human.ok().stdout_has("ok");
    assert!(
        human.stdout.contains("2 ledgers") && human.stdout.contains("9 commits"),
        "verify should count 2 ledgers and 9 commits\n{human}"
    );
    let (run, v) = verify_json(&repo, &[]);
    run.ok();
    assert_eq!(v["clean"], json!(true), "{run}");
    assert_eq!(v["ledgers"], json!(2), "{run}");
    assert_eq!(v["commits"], json!(9), "{run}");
    assert_eq!(v["findings"], json!([]), "{run}");
}

#[test]
fn a_hand_built_ledger_that_follows_the_rules_verifies_clean() {
    // The control for every test below: the builders themselves produce legitimate ledgers.
    let repo = TestRepo::new();
    build_ledger(
        &repo,
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            renewed("42", "alice", 1, 0, 10, 60),
            released("42", "alice", 1, 20),
            acquired("42", "bob", 2, 30, 60),
        ],
    );
    build_ledger(&repo, "gh/7", &[acquired("gh/7", "carol", 1, 0, 15)]);
    let (run, v) = verify_json(&repo, &[]);
    run.ok();
    assert_eq!(v["clean"], json!(true), "{run}");
    assert_eq!(v["ledgers"], json!(2), "{run}");
    assert_eq!(v["commits"], json!(5), "{run}");
    // The tool reads hand-built ledgers like its own.
    let show = repo.json_at(&at_min(31), 0, &["show", "42"]);
    assert_eq!(show["holder"], json!("bob"));
    assert_eq!(show["token"], json!(2));
}

// ---------------------------------------------------------------------------------------------
// One broken rule each
// ---------------------------------------------------------------------------------------------

#[test]
fn a_merge_commit_breaks_single_parent() {
    let repo = TestRepo::new();
    let left = lease_commit(&repo, &acquired("42", "alice", 1, 0, 60), &[]);
    let right = lease_commit(&repo, &acquired("42", "alice", 1, 0, 120), &[]);
    let merge = lease_commit(
        &repo,
        &renewed("42", "alice", 1, 0, 5, 60),
        &[left.as_str(), right.as_str()],
    );
    set_ledger(&repo, "42", &merge);
    assert_only_rule(&repo, "42", "single-parent", &merge);
}

#[test]
fn an_extra_file_in_the_tree_breaks_tree() {
    let repo = TestRepo::new();
    let lease = blob(&repo, &lease_bytes(&acquired("42", "alice", 1, 0, 60)));
    let extra = blob(&repo, b"hello\n");
    let t = tree(
        &repo,
        &[
            ("100644", "lease.json", &lease),
            ("100644", "notes.txt", &extra),
        ],
    );
    let c = commit(&repo, &t, &[], T0, "acquire 42");
    set_ledger(&repo, "42", &c);
    assert_only_rule(&repo, "42", "tree", &c);
}

#[test]
fn a_tree_without_lease_json_breaks_tree() {
    let repo = TestRepo::new();
    let lease = blob(&repo, &lease_bytes(&acquired("42", "alice", 1, 0, 60)));
    let t = tree(&repo, &[("100644", "other.json", &lease)]);
    let c = commit(&repo, &t, &[], T0, "acquire 42");
    set_ledger(&repo, "42", &c);
    assert_only_rule(&repo, "42", "tree", &c);
}

#[test]
fn lease_json_as_a_symlink_or_directory_breaks_tree() {
    let repo = TestRepo::new();
    let lease = blob(&repo, &lease_bytes(&acquired("42", "alice", 1, 0, 60)));
    let link = tree(&repo, &[("120000", "lease.json", &lease)]);
    let c = commit(&repo, &link, &[], T0, "acquire 42");
    set_ledger(&repo, "42", &c);
    assert_only_rule(&repo, "42", "tree", &c);

    let repo = TestRepo::new();
    let lease = blob(&repo, &lease_bytes(&acquired("42", "alice", 1, 0, 60)));
    let inner = tree(&repo, &[("100644", "lease.json", &lease)]);
    let outer = tree(&repo, &[("040000", "lease.json", &inner)]);
    let c = commit(&repo, &outer, &[], T0, "acquire 42");
    set_ledger(&repo, "42", &c);
    assert_only_rule(&repo, "42", "tree", &c);
}

#[test]
fn lease_json_that_is_not_json_breaks_json() {
    let repo = TestRepo::new();
    let root = lease_commit(&repo, &acquired("42", "alice", 1, 0, 60), &[]);
    let garbage = blob(&repo, b"this is not json\n");
    let t = tree(&repo, &[("100644", "lease.json", &garbage)]);
    let c = commit(&repo, &t, &[&root], &at_min(5), "renew 42");
    set_ledger(&repo, "42", &c);
    assert_only_rule(&repo, "42", "json", &c);
}

#[test]
fn findings_are_listed_by_issue_in_natural_order() {
    let repo = TestRepo::new();
    for issue in ["10", "9", "issue-10", "issue-2"] {
        let root = lease_commit(&repo, &acquired(issue, "alice", 1, 0, 60), &[]);
        let garbage = blob(&repo, b"this is not json\n");
        let t = tree(&repo, &[("100644", "lease.json", &garbage)]);
        let c = commit(&repo, &t, &[&root], &at_min(5), "renew");
        set_ledger(&repo, issue, &c);
    }
    let (run, v) = verify_json(&repo, &[]);
    run.code(1);
    let order: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings is an array")
        .iter()
        .map(|f| f["issue"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(order, ["9", "10", "issue-2", "issue-10"], "{run}");
}

#[test]
fn lease_json_missing_a_field_breaks_json() {
    let mut broken = acquired("42", "alice", 1, 0, 60);
    broken.as_object_mut().unwrap().remove("token");
    let (repo, commits) = repo_with("42", &[broken]);
    assert_only_rule(&repo, "42", "json", &commits[0]);
}

#[test]
fn an_unknown_version_breaks_version() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            with(renewed("42", "alice", 1, 0, 5, 60), "version", json!(99)),
        ],
    );
    assert_only_rule(&repo, "42", "version", &commits[1]);
}

#[test]
fn an_issue_field_that_differs_from_the_ref_breaks_issue() {
    let (repo, commits) = repo_with("42", &[acquired("43", "alice", 1, 0, 60)]);
    assert_only_rule(&repo, "42", "issue", &commits[0]);
}

#[test]
fn a_root_with_token_2_breaks_first_token() {
    let (repo, commits) = repo_with("42", &[acquired("42", "alice", 2, 0, 60)]);
    assert_only_rule(&repo, "42", "first-token", &commits[0]);
}

#[test]
fn a_root_that_is_not_an_acquire_breaks_first_token() {
    let (repo, commits) = repo_with("42", &[renewed("42", "alice", 1, 0, 0, 60)]);
    // A renew at the same instant as its tenure began is otherwise well-formed.
    assert_only_rule(&repo, "42", "first-token", &commits[0]);
}

#[test]
fn an_acquire_that_skips_a_token_breaks_token_step() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            released("42", "alice", 1, 10),
            acquired("42", "bob", 3, 20, 60),
        ],
    );
    assert_only_rule(&repo, "42", "token-step", &commits[2]);
}

#[test]
fn a_renew_that_changes_the_token_breaks_token_step() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            renewed("42", "alice", 2, 0, 5, 60),
        ],
    );
    assert_only_rule(&repo, "42", "token-step", &commits[1]);
}

#[test]
fn a_release_that_changes_the_token_breaks_token_step() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            released("42", "alice", 2, 5),
        ],
    );
    assert_only_rule(&repo, "42", "token-step", &commits[1]);
}

#[test]
fn an_acquire_over_a_live_lease_breaks_holder_change() {
    // alice holds until minute 60; bob "acquires" at minute 30 with the next token.
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            acquired("42", "bob", 2, 30, 60),
        ],
    );
    assert_only_rule(&repo, "42", "holder-change", &commits[1]);
}

#[test]
fn an_acquire_after_expiry_is_a_legitimate_takeover() {
    // The same step as above, but at minute 60 alice's lease has expired (now < expires_at
    // is false): no rule is broken. This pins the instant holder-change is judged at.
    let repo = TestRepo::new();
    build_ledger(
        &repo,
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            with(
                acquired("42", "bob", 2, 60, 60),
                "previous_holder",
                json!("alice"),
            ),
        ],
    );
    let (run, v) = verify_json(&repo, &[]);
    run.ok();
    assert_eq!(v["clean"], json!(true), "{run}");
}

#[test]
fn a_renew_that_changes_the_holder_breaks_holder_change() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            renewed("42", "bob", 1, 0, 5, 60),
        ],
    );
    assert_only_rule(&repo, "42", "holder-change", &commits[1]);
}

#[test]
fn an_event_earlier_than_its_parent_breaks_time_order() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 10, 60),
            released("42", "alice", 1, 5),
        ],
    );
    assert_only_rule(&repo, "42", "time-order", &commits[1]);
}

#[test]
fn an_expiry_before_the_acquire_breaks_time_order() {
    let (repo, commits) = repo_with(
        "42",
        &[with(
            acquired("42", "alice", 1, 10, 60),
            "expires_at",
            json!(at_min(5)),
        )],
    );
    assert_only_rule(&repo, "42", "time-order", &commits[0]);
}

#[test]
fn a_release_recording_a_holder_breaks_event() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            with(released("42", "alice", 1, 10), "holder", json!("alice")),
        ],
    );
    assert_only_rule(&repo, "42", "event", &commits[1]);
}

#[test]
fn a_release_of_a_free_lease_breaks_event() {
    let (repo, commits) = repo_with(
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            released("42", "alice", 1, 10),
            released("42", "alice", 1, 20),
        ],
    );
    assert_only_rule(&repo, "42", "event", &commits[2]);
}

#[test]
fn findings_name_the_first_bad_commit_and_every_ledger() {
    // Two broken ledgers and a good one: each finding belongs to its own ledger.
    let repo = TestRepo::new();
    let a = build_ledger(
        &repo,
        "a",
        &[
            acquired("a", "alice", 1, 0, 60),
            acquired("a", "bob", 2, 30, 60),
        ],
    );
    let b = build_ledger(&repo, "b", &[acquired("b", "alice", 5, 0, 60)]);
    build_ledger(&repo, "c", &[acquired("c", "alice", 1, 0, 60)]);
    let (run, v) = verify_json(&repo, &[]);
    run.code(1);
    assert_eq!(v["ledgers"], json!(3), "{run}");
    let findings = v["findings"].as_array().unwrap();
    let pairs: Vec<(String, String, String)> = findings
        .iter()
        .map(|f| {
            (
                f["issue"].as_str().unwrap().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
                f["commit"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        pairs.contains(&("a".into(), "holder-change".into(), a[1].clone())),
        "{run}"
    );
    assert!(
        pairs.contains(&("b".into(), "first-token".into(), b[0].clone())),
        "{run}"
    );
    assert!(pairs.iter().all(|(issue, _, _)| issue != "c"), "{run}");
}

// ---------------------------------------------------------------------------------------------
// Choosing ledgers
// ---------------------------------------------------------------------------------------------

#[test]
fn issue_arguments_restrict_verify_to_those_ledgers() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["acquire", "good", "--holder", "alice"])
        .ok();
    repo.run_at(&at_min(1), &["release", "good", "--holder", "alice"])
        .ok();
    repo.run_at(T0, &["acquire", "other", "--holder", "alice"])
        .ok();
    let bad = build_ledger(&repo, "bad", &[acquired("bad", "mallory", 2, 0, 60)]);

    // Everything: the bad ledger makes it fail.
    let (run, v) = verify_json(&repo, &[]);
    run.code(1);
    assert_eq!(v["ledgers"], json!(3), "{run}");

    // Only the good one: clean, one ledger, two commits.
    let (run, v) = verify_json(&repo, &["good"]);
    run.ok();
    assert_eq!(v["clean"], json!(true), "{run}");
    assert_eq!(v["ledgers"], json!(1), "{run}");
    assert_eq!(v["commits"], json!(2), "{run}");
    repo.run(&["verify", "good"]).ok().stdout_has("ok");

    // A unique prefix is enough.
    let (run, v) = verify_json(&repo, &["goo"]);
    run.ok();
    assert_eq!(v["ledgers"], json!(1), "{run}");

    // Only the bad one: its finding and nothing else.
    let (run, v) = verify_json(&repo, &["bad"]);
    run.code(1);
    assert_eq!(v["ledgers"], json!(1), "{run}");
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{run}");
    assert_eq!(findings[0]["issue"], json!("bad"));
    assert_eq!(findings[0]["rule"], json!("first-token"));
    assert_eq!(findings[0]["commit"], json!(bad[0]));

    // Two named ledgers.
    let (run, v) = verify_json(&repo, &["good", "other"]);
    run.ok();
    assert_eq!(v["ledgers"], json!(2), "{run}");

    // A ledger that does not exist is not silently "clean".
    let run = repo.run(&["verify", "nosuch"]);
    assert_ne!(
        run.code, 0,
        "verify of a missing ledger must not succeed\n{run}"
    );
    assert_eq!(run.code, 4, "no such lease is exit 4\n{run}");
}

#[test]
fn verify_reads_only() {
    let repo = TestRepo::new();
    build_ledger(
        &repo,
        "42",
        &[
            acquired("42", "alice", 1, 0, 60),
            acquired("42", "bob", 2, 30, 60),
        ],
    );
    let before = repo.snapshot();
    repo.run(&["verify"]).code(1);
    repo.run(&["--json", "verify", "42"]).code(1);
    assert_eq!(repo.snapshot(), before, "verify wrote something");
}

#[test]
fn verify_on_a_bare_server_and_through_a_remote() {
    // Forge a broken ledger on the server; `verify -C <bare>` and `verify --remote` both see it.
    let daemon = Server::daemon();
    let good = daemon.client("alice");
    good.run_at(T0, &["acquire", "--remote", "origin", "ok", "--ttl", "1h"])
        .ok();
    let forged = build_ledger(
        daemon.repo(),
        "forged",
        &[
            acquired("forged", "alice", 1, 0, 60),
            released("forged", "alice", 3, 5),
        ],
    );

    let run = daemon.lease(&["--json", "verify"]);
    run.code(1);
    let v = run.json();
    assert_eq!(v["ledgers"], json!(2), "{run}");
    let findings = v["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .all(|f| f["issue"] == json!("forged") && f["rule"] == json!("token-step")),
        "{run}"
    );
    assert!(
        findings.iter().any(|f| f["commit"] == json!(forged[1])),
        "{run}"
    );
    daemon.lease(&["verify", "ok"]).ok().stdout_has("ok");

    let auditor = daemon.mirror();
    let run = auditor.run(&["--json", "verify", "--remote", "origin"]);
    run.code(1);
    let v = run.json();
    assert_eq!(v["ledgers"], json!(2), "{run}");
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["rule"] == json!("token-step") && f["issue"] == json!("forged")));
    // Auditing through a remote does not adopt the remote's ledgers as local ones.
    assert_eq!(
        auditor.lease_refs(),
        "",
        "verify --remote wrote local lease refs"
    );
}
