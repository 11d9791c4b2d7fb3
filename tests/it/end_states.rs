//! How a tenure ends and what a claim carries: `complete` and `abandon` are events of their
//! own that keep the token, and `--note` and `--task` are stored with the claim and shown by
//! every command.

use serde_json::{json, Value};

use crate::env::{assert_fields, at_min, issues, jrun, TestRepo};
use crate::session::{acquire, assert_verify_clean, events, listed, ALICE, BOB};

#[test]
fn complete_and_abandon_are_recorded_as_their_own_events_and_keep_the_token() {
    let repo = TestRepo::new();
    for issue in ["done", "dropped", "freed"] {
        acquire(&repo, 0, issue, ALICE, "1h").ok();
    }
    for (op, issue) in [
        ("complete", "done"),
        ("abandon", "dropped"),
        ("release", "freed"),
    ] {
        let run = jrun(&repo, 1, &[op, issue, "--holder", ALICE]);
        run.outcome(0, "released");
        run.json_has(&[
            ("event", json!(op)),
            ("token", json!(1)),
            ("held", json!(false)),
        ]);

        let log = repo.json_at(&at_min(1), 0, &["log", issue]);
        assert_fields(
            &log[0],
            &[
                ("event", json!(op)),
                ("token", json!(1)),
                ("holder", Value::Null),
                ("previous_holder", json!(ALICE)),
            ],
        );
        assert_eq!(log[1]["event"], json!("acquire"), "{log}");
        let human = repo.run_at(&at_min(1), &["log", issue]);
        human.ok();
        assert!(
            human.stdout.lines().next().is_some_and(|l| l.contains(op)),
            "log shows {op} first\n{human}"
        );
        // A second end of the same tenure is a release of nothing.
        jrun(&repo, 2, &[op, issue, "--holder", ALICE]).outcome(0, "not_held");
        assert_eq!(events(&repo, issue), vec!["acquire", op]);
    }

    // list --all shows them free, with their last event and token.
    let all = repo.json_at(&at_min(2), 0, &["list", "--all"]);
    let rows: Vec<(Value, Value, Value, Value)> = all
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| {
            (
                v["issue"].clone(),
                v["state"].clone(),
                v["event"].clone(),
                v["token"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (json!("done"), json!("free"), json!("complete"), json!(1)),
            (json!("dropped"), json!("free"), json!("abandon"), json!(1)),
            (json!("freed"), json!("free"), json!("release"), json!(1)),
        ]
    );
    let human = repo.run_at(&at_min(2), &["list", "--all"]);
    human.ok();
    for issue in ["done", "dropped", "freed"] {
        assert!(
            human
                .stdout
                .lines()
                .any(|l| l.starts_with(issue) && l.contains("free")),
            "list --all shows {issue} free\n{human}"
        );
    }
    // Live-only list: nothing.
    assert!(issues(&repo.json_at(&at_min(2), 0, &["list"])).is_empty());
    // The next tenure counts on.
    let run = jrun(&repo, 3, &["acquire", "done", "--holder", BOB]);
    run.ok();
    run.json_has(&[("token", json!(2))]);
    assert_verify_clean(&repo, 3);
}

#[test]
fn note_and_task_are_stored_with_the_claim_and_shown_everywhere() {
    let repo = TestRepo::new();
    let note = "flaky test in CI: see run 7";
    let run = jrun(
        &repo,
        0,
        &[
            "acquire", "n1", "--holder", ALICE, "--ttl", "1h", "--note", note, "--task", "JOB-42",
        ],
    );
    run.ok();
    let v = run.json();
    assert_eq!(
        (v["note"].clone(), v["task"].clone()),
        (json!(note), json!("JOB-42"))
    );
    acquire(&repo, 0, "n2", BOB, "1h").ok();

    let stored = repo.lease_json("n1");
    assert_eq!(stored["note"], json!(note), "{stored}");
    assert_eq!(stored["task"], json!("JOB-42"), "{stored}");

    let shown = repo.json_at(&at_min(1), 0, &["show", "n1"]);
    assert_eq!(shown["note"], json!(note), "{shown}");
    assert_eq!(shown["task"], json!("JOB-42"), "{shown}");
    let human = repo.run_at(&at_min(1), &["show", "n1"]);
    human.ok();
    human.stdout_has(note).stdout_has("JOB-42");

    let list = repo.json_at(&at_min(1), 0, &["list"]);
    let n1 = listed(&list, "n1");
    assert_eq!(n1["note"], json!(note), "{list}");
    assert_eq!(n1["task"], json!("JOB-42"), "{list}");
    let n2 = listed(&list, "n2");
    assert!(
        n2.get("note").is_none() && n2.get("task").is_none(),
        "{list}"
    );

    // A renew keeps the context; log shows it on every event of the tenure.
    jrun(&repo, 2, &["renew", "n1", "--holder", ALICE, "--ttl", "1h"]).ok();
    let stored = repo.lease_json("n1");
    assert_eq!(
        (stored["note"].clone(), stored["task"].clone()),
        (json!(note), json!("JOB-42"))
    );
    let log = repo.json_at(&at_min(2), 0, &["log", "n1"]);
    for entry in log.as_array().expect("an array") {
        assert_eq!(entry["note"], json!(note), "{log}");
        assert_eq!(entry["task"], json!("JOB-42"), "{log}");
    }
    assert_eq!(log.as_array().map(Vec::len), Some(2), "{log}");

    // A re-acquire can change it.
    jrun(
        &repo,
        3,
        &["acquire", "n1", "--holder", ALICE, "--task", "JOB-43"],
    )
    .ok();
    let stored = repo.lease_json("n1");
    assert_eq!(stored["task"], json!("JOB-43"), "{stored}");
    assert_eq!(stored["note"], json!(note), "{stored}");
}
