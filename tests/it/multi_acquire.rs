//! Several issues in one `acquire`: all or none, a refusal reports no untaken issue as
//! acquired, and clashing or repeated ids are not git failures.

use crate::env::{at_min, TestRepo, T0};

#[test]
fn acquiring_several_issues_is_all_or_none() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "2", "--holder", "other"]);
    let before = repo.snapshot();
    let run = repo.run_at(
        &at_min(1),
        &["--json", "acquire", "1", "2", "3", "--holder", "me"],
    );
    run.code(3);
    let v = run.json();
    let reports = v.as_array().expect("one report per issue");
    assert_eq!(reports.len(), 3);
    assert_eq!(reports[1]["outcome"], "held");
    assert_eq!(reports[1]["holder"], "other");
    assert_eq!(repo.snapshot(), before, "nothing was written");
    // When none is held, all are taken in one go.
    let v = repo.json_at(&at_min(1), 0, &["acquire", "4", "5", "6", "--holder", "me"]);
    let reports = v.as_array().expect("array");
    assert_eq!(reports.len(), 3);
    for (r, id) in reports.iter().zip(["4", "5", "6"]) {
        assert_eq!(r["issue"], id);
        assert_eq!(r["outcome"], "acquired");
        assert_eq!(r["token"], 1);
        assert_eq!(repo.lease_json(id)["holder"], "me");
    }
}

#[test]
fn a_refused_multi_acquire_does_not_report_untaken_issues_as_acquired() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "2", "--holder", "other"]);
    let run = repo.run_at(
        &at_min(1),
        &["--json", "acquire", "1", "2", "3", "--holder", "me"],
    );
    run.code(3);
    let v = run.json();
    for r in v.as_array().expect("array") {
        if r["issue"] != "2" {
            assert_ne!(
                r["outcome"], "acquired",
                "issue {} was not acquired (nothing was written, holder {}), yet reported as \
                 acquired: {r}",
                r["issue"], r["holder"]
            );
        }
    }
    let human = repo.run_at(&at_min(1), &["acquire", "1", "2", "3", "--holder", "me"]);
    human.code(3);
    assert!(
        !human.stdout.lines().any(|l| l.starts_with("acquired")),
        "the human report claims an acquire that did not happen:\n{human}"
    );
}

#[test]
fn one_acquire_of_clashing_ids_is_refused_as_a_clash() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["acquire", "x", "x/y", "--holder", "me"]);
    run.code(2).stderr_has("clash");
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn one_acquire_naming_an_issue_twice_is_not_a_git_failure() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["--json", "acquire", "5", "5", "--holder", "me"]);
    assert!(
        run.code == 0 || run.code == 2,
        "a repeated id is either taken once or refused as bad usage, not a failure:\n{run}"
    );
    if run.code == 0 {
        assert_eq!(repo.commit_count("5"), 1);
        assert_eq!(repo.lease_json("5")["token"], 1);
    } else {
        assert_eq!(repo.lease_refs(), "");
    }
}
