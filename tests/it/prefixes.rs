//! Prefix resolution: an exact id wins, a unique prefix resolves, an ambiguous or unknown one
//! is refused, and `check` and `revoke` take exact ids only.

use crate::env::{at_min, TestRepo, T0};

#[test]
fn an_exact_id_wins_over_a_longer_id_it_prefixes() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "forty-two"]);
    // acquire takes the exact id: "4" is a new issue, not 42.
    let v = repo.json_at(T0, 0, &["acquire", "4", "--holder", "four"]);
    assert_eq!(v["issue"], "4");
    assert_eq!(v["token"], 1);
    assert_eq!(repo.commit_count("42"), 1, "42 untouched");
    let v = repo.json_at(&at_min(1), 0, &["show", "4"]);
    assert_eq!(
        (v["issue"].clone(), v["holder"].clone()),
        ("4".into(), "four".into())
    );
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "forty-two");
    let v = repo.json_at(&at_min(1), 0, &["log", "4"]);
    assert_eq!(v.as_array().map(Vec::len), Some(1));
    assert_eq!(v[0]["holder"], "four");
    repo.json_at(
        &at_min(1),
        0,
        &["check", "4", "--token", "1", "--holder", "four"],
    );
    let v = repo.json_at(&at_min(1), 0, &["release", "4", "--holder", "four"]);
    assert_eq!(v["issue"], "4");
    assert_eq!(repo.lease_json("42")["holder"], "forty-two");
}

#[test]
fn a_unique_prefix_resolves() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "alpha", "--holder", "a"]);
    repo.json_at(T0, 0, &["acquire", "gh/123", "--holder", "g"]);
    assert_eq!(repo.json_at(T0, 0, &["show", "al"])["issue"], "alpha");
    assert_eq!(repo.json_at(T0, 0, &["show", "gh/"])["issue"], "gh/123");
    assert_eq!(repo.json_at(T0, 0, &["show", "gh/12"])["issue"], "gh/123");
    assert_eq!(repo.json_at(T0, 0, &["log", "al"])[0]["holder"], "a");
    repo.json_at(T0, 0, &["check", "alpha", "--token", "1", "--holder", "a"]);
    let v = repo.json_at(&at_min(1), 0, &["renew", "al", "--holder", "a"]);
    assert_eq!(v["issue"], "alpha");
    let v = repo.json_at(&at_min(1), 0, &["release", "gh/1", "--holder", "g"]);
    assert_eq!(v["issue"], "gh/123");
    assert_eq!(v["outcome"], "released");
    assert_eq!(repo.tip("gh/1"), None, "no ref for the prefix itself");
}

#[test]
fn an_ambiguous_prefix_is_refused_listing_the_candidates() {
    let repo = TestRepo::new();
    for issue in ["beta1", "beta2", "gamma"] {
        repo.json_at(T0, 0, &["acquire", issue, "--holder", "a"]);
    }
    let before = repo.snapshot();
    let cases: &[&[&str]] = &[
        &["show", "beta"],
        &["log", "beta"],
        &["release", "beta", "--holder", "a"],
        &["renew", "beta", "--holder", "a"],
    ];
    for args in cases {
        repo.run_at(&at_min(1), args)
            .code(4)
            .stderr_has("ambiguous")
            .stderr_has("beta1")
            .stderr_has("beta2");
    }
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn check_and_revoke_take_exact_ids_only_and_an_empty_id_is_bad_usage() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "123", "--holder", "a"]);
    let before = repo.snapshot();
    // A prefix is never a fencing answer: issue 12 was never leased.
    let v = repo.json_at(T0, 3, &["check", "12", "--token", "1"]);
    assert_eq!(v["ok"], false);
    assert_eq!(v["issue"], "12");
    repo.run_at(T0, &["check", "12", "--token", "1", "--holder", "a"])
        .code(3)
        .stdout_has("never leased");
    // Nor is it a revoke of the lease it prefixes.
    let v = repo.json_at(T0, 0, &["revoke", "12", "--reason", "r", "--holder", "ops"]);
    assert_eq!(v["outcome"], "not_held");
    assert_eq!(repo.snapshot(), before);
    repo.json_at(T0, 0, &["check", "123", "--token", "1"]);
    // A revoke says so, in text and JSON.
    let v = repo.json_at(
        T0,
        0,
        &["revoke", "123", "--reason", "r", "--holder", "ops"],
    );
    assert_eq!(v["outcome"], "revoked");
    repo.json_at(T0, 0, &["acquire", "123", "--holder", "a"]);
    repo.run_at(T0, &["revoke", "123", "--reason", "r", "--holder", "ops"])
        .ok()
        .stdout_has("revoked 123 held by a (token 2 kept)");
    let before = repo.snapshot();
    for args in [
        &["show", ""][..],
        &["log", ""],
        &["check", "", "--token", "1"],
        &["revoke", "", "--reason", "r", "--holder", "ops"],
        &["release", "", "--holder", "a"],
        &["renew", "", "--holder", "a"],
        &["verify", ""],
    ] {
        repo.run_at(T0, args)
            .code(2)
            .stderr_has("must not be empty");
    }
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn show_and_log_of_an_unknown_prefix_are_not_found() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "alpha", "--holder", "a"]);
    repo.run_at(T0, &["show", "zeta"])
        .code(4)
        .stderr_has("zeta");
    repo.run_at(T0, &["log", "zeta"]).code(4).stderr_has("zeta");
    // A longer id than any existing one is not a prefix match.
    repo.run_at(T0, &["show", "alphabet"]).code(4);
}
