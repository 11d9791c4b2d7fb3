//! Every lease rule at exact instants, through the command line with `GIT_LEASE_NOW`.
//!
//! Scenario clock: `T0 = 2026-11-30T12:00:00Z`; [`at_min`] and [`at`] give instants after it.

use serde_json::Value;

use crate::env::{at, at_min, TestRepo, T0};

/// `alice` acquires 42 at T0 for 10 minutes (expires at T0+10m).
fn alice_holds_42() -> TestRepo {
    let repo = TestRepo::new();
    let v = repo.json_at(
        T0,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "10m"],
    );
    assert_eq!(v["outcome"], "acquired");
    repo
}

#[test]
fn first_acquire_is_token_one() {
    let repo = TestRepo::new();
    let v = repo.json_at(
        T0,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "10m"],
    );
    assert_eq!(v["outcome"], "acquired");
    assert_eq!(v["issue"], "42");
    assert_eq!(v["holder"], "alice");
    assert_eq!(v["token"], 1);
    assert_eq!(v["acquired_at"], T0);
    assert_eq!(v["expires_at"], at_min(10));
    assert_eq!(v["wrote"], true);
    assert_eq!(repo.commit_count("42"), 1);
    let stored = repo.lease_json("42");
    assert_eq!(stored["event"], "acquire");
    assert_eq!(stored["token"], 1);
    assert_eq!(stored["at"], T0);
}

#[test]
fn human_acquire_line_names_token_and_expiry() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["acquire", "42", "--holder", "alice", "--ttl", "10m"])
        .ok()
        .stdout_has("acquired 42 for alice")
        .stdout_has("token 1")
        .stdout_has("12:10");
}

#[test]
fn acquire_by_another_while_live_is_held_and_names_holder_and_expiry() {
    let repo = alice_holds_42();
    // One second before expiry the lease is still live.
    let v = repo.json_at(
        &at(10 * 60 - 1),
        3,
        &["acquire", "42", "--holder", "bob", "--ttl", "10m"],
    );
    assert_eq!(v["outcome"], "held");
    assert_eq!(v["holder"], "alice");
    assert_eq!(v["token"], 1);
    assert_eq!(v["expires_at"], at_min(10));
    assert_eq!(v["wrote"], false);
    // The human form names the holder and the expiry too.
    repo.run_at(&at_min(5), &["acquire", "42", "--holder", "bob"])
        .code(3)
        .stdout_has("alice")
        .stdout_has("12:10");
    assert_eq!(
        repo.commit_count("42"),
        1,
        "a refused acquire writes nothing"
    );
}

#[test]
fn acquire_exactly_at_expiry_by_another_is_a_new_tenure() {
    let repo = alice_holds_42();
    let v = repo.json_at(
        &at_min(10),
        0,
        &["acquire", "42", "--holder", "bob", "--ttl", "5m"],
    );
    assert_eq!(v["outcome"], "acquired");
    assert_eq!(v["holder"], "bob");
    assert_eq!(
        v["token"], 2,
        "expiry is strict: now == expires_at is expired"
    );
    assert_eq!(v["acquired_at"], at_min(10));
    assert_eq!(v["expires_at"], at_min(15));
    let stored = repo.lease_json("42");
    assert_eq!(stored["event"], "acquire");
    assert_eq!(stored["previous_holder"], "alice", "a takeover names whose");
    assert_eq!(repo.commit_count("42"), 2);
}

#[test]
fn acquire_at_expiry_by_the_same_holder_is_also_a_new_tenure() {
    let repo = alice_holds_42();
    let v = repo.json_at(
        &at_min(10),
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "10m"],
    );
    assert_eq!(v["token"], 2);
    assert_eq!(v["acquired_at"], at_min(10));
}

#[test]
fn reacquire_by_the_live_holder_keeps_token_and_start_and_refreshes_expiry() {
    let repo = alice_holds_42();
    let v = repo.json_at(
        &at_min(5),
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "30m"],
    );
    assert_eq!(v["outcome"], "acquired");
    assert_eq!(v["token"], 1);
    assert_eq!(v["acquired_at"], T0);
    assert_eq!(v["expires_at"], at_min(35));
    assert_eq!(v["wrote"], true);
    let stored = repo.lease_json("42");
    assert_eq!(stored["event"], "reacquire");
    assert_eq!(stored["at"], at_min(5));
    assert_eq!(repo.commit_count("42"), 2);
}

#[test]
fn renew_by_the_holder_keeps_token_with_new_expiry() {
    let repo = alice_holds_42();
    let v = repo.json_at(
        &at_min(8),
        0,
        &["renew", "42", "--holder", "alice", "--ttl", "20m"],
    );
    assert_eq!(v["outcome"], "renewed");
    assert_eq!(v["token"], 1);
    assert_eq!(v["acquired_at"], T0);
    assert_eq!(v["expires_at"], at_min(28));
    assert_eq!(repo.lease_json("42")["event"], "renew");
    assert_eq!(repo.commit_count("42"), 2);
    // The new expiry is what counts now: bob is refused until T0+28m.
    repo.json_at(&at_min(27), 3, &["acquire", "42", "--holder", "bob"]);
}

#[test]
fn renew_by_another_is_not_holder() {
    let repo = alice_holds_42();
    let v = repo.json_at(&at_min(5), 3, &["renew", "42", "--holder", "bob"]);
    assert_eq!(v["outcome"], "not_holder");
    assert_eq!(v["holder"], "alice");
    assert_eq!(v["wrote"], false);
    assert_eq!(repo.commit_count("42"), 1);
}

#[test]
fn renew_at_or_after_expiry_is_not_holder() {
    let repo = alice_holds_42();
    for now in [at_min(10), at_min(11)] {
        let v = repo.json_at(&now, 3, &["renew", "42", "--holder", "alice"]);
        assert_eq!(v["outcome"], "not_holder", "renew at {now}");
        assert_eq!(v["holder"], Value::Null);
    }
    assert_eq!(repo.commit_count("42"), 1);
}

#[test]
fn renew_of_a_never_leased_issue_is_not_holder() {
    let repo = TestRepo::new();
    let v = repo.json_at(T0, 3, &["renew", "7", "--holder", "alice"]);
    assert_eq!(v["outcome"], "not_holder");
    assert_eq!(repo.lease_refs(), "", "no ref is created");
}

#[test]
fn release_by_the_holder_keeps_the_token_for_the_next_tenure() {
    let repo = alice_holds_42();
    let v = repo.json_at(&at_min(3), 0, &["release", "42", "--holder", "alice"]);
    assert_eq!(v["outcome"], "released");
    assert_eq!(v["token"], 1);
    assert_eq!(v["holder"], Value::Null);
    assert_eq!(v["held"], false);
    let stored = repo.lease_json("42");
    assert_eq!(stored["event"], "release");
    assert_eq!(stored["holder"], Value::Null);
    assert_eq!(stored["previous_holder"], "alice");
    assert_eq!(stored["token"], 1);
    // The next tenure, by anyone, is token 2.
    let v = repo.json_at(&at_min(4), 0, &["acquire", "42", "--holder", "bob"]);
    assert_eq!(v["token"], 2);
    assert_eq!(repo.commit_count("42"), 3);
}

#[test]
fn release_again_is_not_held_and_writes_nothing() {
    let repo = alice_holds_42();
    repo.json_at(&at_min(3), 0, &["release", "42", "--holder", "alice"]);
    let before = repo.snapshot();
    assert_eq!(repo.commit_count("42"), 2);
    for holder in ["alice", "bob"] {
        let v = repo.json_at(&at_min(4), 0, &["release", "42", "--holder", holder]);
        assert_eq!(v["outcome"], "not_held");
        assert_eq!(v["token"], 1);
        assert_eq!(v["wrote"], false);
    }
    assert_eq!(
        repo.commit_count("42"),
        2,
        "no commit for a release of nothing"
    );
    assert_eq!(repo.snapshot(), before);
    repo.run_at(&at_min(4), &["release", "42", "--holder", "alice"])
        .ok()
        .stdout_has("not held");
}

#[test]
fn release_of_a_never_leased_issue_is_not_held_and_creates_no_ref() {
    let repo = TestRepo::new();
    let before = repo.snapshot();
    let v = repo.json_at(T0, 0, &["release", "99", "--holder", "alice"]);
    assert_eq!(v["outcome"], "not_held");
    assert_eq!(v["token"], Value::Null);
    assert_eq!(repo.tip("99"), None);
    assert_eq!(repo.lease_refs(), "");
    assert_eq!(repo.snapshot(), before);
    for cmd in ["complete", "abandon"] {
        repo.json_at(T0, 0, &[cmd, "99", "--holder", "alice"]);
    }
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn release_of_an_expired_lease_by_anyone_frees_it() {
    let repo = alice_holds_42();
    let v = repo.json_at(&at_min(10), 0, &["release", "42", "--holder", "bob"]);
    assert_eq!(v["outcome"], "released");
    assert_eq!(v["token"], 1);
    let stored = repo.lease_json("42");
    assert_eq!(stored["holder"], Value::Null);
    assert_eq!(stored["previous_holder"], "alice");
    assert_eq!(
        stored["by"], "bob",
        "who cleared someone else's lease is recorded"
    );
    assert_eq!(repo.commit_count("42"), 2);
}

#[test]
fn release_of_an_expired_lease_by_its_holder_frees_it() {
    let repo = alice_holds_42();
    let v = repo.json_at(&at_min(20), 0, &["release", "42", "--holder", "alice"]);
    assert_eq!(v["outcome"], "released");
    assert_eq!(repo.commit_count("42"), 2);
}

#[test]
fn release_of_a_live_lease_by_someone_else_is_not_holder() {
    let repo = alice_holds_42();
    let before = repo.snapshot();
    let v = repo.json_at(&at(10 * 60 - 1), 3, &["release", "42", "--holder", "bob"]);
    assert_eq!(v["outcome"], "not_holder");
    assert_eq!(v["holder"], "alice");
    assert_eq!(v["wrote"], false);
    assert_eq!(repo.snapshot(), before);
    for cmd in ["complete", "abandon"] {
        let v = repo.json_at(&at_min(1), 3, &[cmd, "42", "--holder", "bob"]);
        assert_eq!(v["outcome"], "not_holder");
    }
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn complete_and_abandon_free_the_lease_and_record_their_event() {
    let repo = TestRepo::new();
    for (issue, cmd) in [("1", "complete"), ("2", "abandon")] {
        repo.json_at(T0, 0, &["acquire", issue, "--holder", "alice"]);
        let v = repo.json_at(&at_min(1), 0, &[cmd, issue, "--holder", "alice"]);
        assert_eq!(v["outcome"], "released");
        assert_eq!(v["token"], 1);
        assert_eq!(repo.lease_json(issue)["event"], cmd);
        let v = repo.json_at(&at_min(2), 0, &["acquire", issue, "--holder", "bob"]);
        assert_eq!(v["token"], 2);
    }
}

#[test]
fn check_passes_only_for_the_live_token() {
    let repo = alice_holds_42();
    // Success, with and without the holder.
    repo.run_at(&at_min(5), &["check", "42", "--token", "1"])
        .ok();
    let v = repo.json_at(
        &at_min(5),
        0,
        &["check", "42", "--token", "1", "--holder", "alice"],
    );
    assert_eq!(v["ok"], true);
    assert_eq!(v["token"], 1);
    // Wrong holder.
    let v = repo.json_at(
        &at_min(5),
        3,
        &["check", "42", "--token", "1", "--holder", "bob"],
    );
    assert_eq!(v["ok"], false);
    // Wrong token.
    repo.json_at(&at_min(5), 3, &["check", "42", "--token", "2"]);
    repo.json_at(&at_min(5), 3, &["check", "42", "--token", "0"]);
    // Exactly at expiry the token is no longer live.
    let v = repo.json_at(&at_min(10), 3, &["check", "42", "--token", "1"]);
    assert_eq!(v["ok"], false);
    repo.run_at(&at(10 * 60 - 1), &["check", "42", "--token", "1"])
        .ok();
}

#[test]
fn check_of_a_stale_token_fails_after_a_new_tenure() {
    let repo = alice_holds_42();
    repo.json_at(&at_min(10), 0, &["acquire", "42", "--holder", "bob"]);
    let v = repo.json_at(
        &at_min(11),
        3,
        &["check", "42", "--token", "1", "--holder", "alice"],
    );
    assert_eq!(v["ok"], false);
    assert!(
        v["reason"].as_str().unwrap_or_default().contains('2'),
        "the reason names the live token: {v}"
    );
    repo.run_at(&at_min(11), &["check", "42", "--token", "1"])
        .code(3)
        .stdout_has("refused");
    repo.json_at(
        &at_min(11),
        0,
        &["check", "42", "--token", "2", "--holder", "bob"],
    );
}

#[test]
fn check_after_release_or_of_a_never_leased_issue_fails() {
    let repo = alice_holds_42();
    repo.json_at(&at_min(1), 0, &["release", "42", "--holder", "alice"]);
    let v = repo.json_at(&at_min(2), 3, &["check", "42", "--token", "1"]);
    assert_eq!(v["ok"], false);
    let v = repo.json_at(&at_min(2), 3, &["check", "777", "--token", "1"]);
    assert_eq!(v["ok"], false);
    assert_eq!(repo.tip("777"), None);
}

#[test]
fn ttl_never_is_open_ended() {
    let repo = TestRepo::new();
    let v = repo.json_at(
        T0,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "never"],
    );
    assert_eq!(v["expires_at"], Value::Null);
    assert_eq!(repo.lease_json("42")["expires_at"], Value::Null);
    let far = "2099-01-01T00:00:00Z";
    let v = repo.json_at(far, 3, &["acquire", "42", "--holder", "bob"]);
    assert_eq!(v["outcome"], "held");
    repo.json_at(
        far,
        0,
        &["check", "42", "--token", "1", "--holder", "alice"],
    );
    let v = repo.json_at(far, 0, &["show", "42"]);
    assert_eq!(v["held"], true);
    repo.run_at(far, &["show", "42"]).ok().stdout_has("never");
    // An open-ended re-acquire changes nothing, so it writes nothing.
    let before = repo.snapshot();
    let v = repo.json_at(
        far,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "never"],
    );
    assert_eq!(v["outcome"], "acquired");
    assert_eq!(v["wrote"], false);
    assert_eq!(repo.snapshot(), before);
    // Renewing with a TTL gives it an expiry again.
    let v = repo.json_at(far, 0, &["renew", "42", "--holder", "alice", "--ttl", "1h"]);
    assert_eq!(v["expires_at"], "2099-01-01T01:00:00Z");
}

#[test]
fn the_default_ttl_is_one_hour_and_config_lease_ttl_overrides_it() {
    let repo = TestRepo::new();
    let v = repo.json_at(T0, 0, &["acquire", "1", "--holder", "alice"]);
    assert_eq!(v["expires_at"], at_min(60));
    repo.git(&["config", "lease.ttl", "15m"]);
    let v = repo.json_at(T0, 0, &["acquire", "2", "--holder", "alice"]);
    assert_eq!(v["expires_at"], at_min(15));
    let v = repo.json_at(T0, 0, &["acquire", "3", "--holder", "alice", "--ttl", "2h"]);
    assert_eq!(v["expires_at"], at_min(120));
}

#[test]
fn the_holder_comes_from_config_when_not_given() {
    let repo = TestRepo::new();
    // No --holder and nothing configured: bad usage, nothing written.
    repo.run_at(T0, &["acquire", "1"])
        .code(2)
        .stderr_has("holder");
    assert_eq!(repo.lease_refs(), "");
    repo.git(&["config", "user.email", "dev@example.com"]);
    let v = repo.json_at(T0, 0, &["acquire", "1"]);
    assert_eq!(v["holder"], "dev@example.com");
    repo.git(&["config", "lease.holder", "bot-7"]);
    let v = repo.json_at(T0, 0, &["acquire", "2"]);
    assert_eq!(v["holder"], "bot-7");
}

#[test]
fn git_lease_now_accepts_unix_seconds_and_any_offset() {
    let unix = crate::env::t0().timestamp().to_string();
    for now in [unix.as_str(), "2026-11-30T13:00:00+01:00", T0] {
        let repo = TestRepo::new();
        let v = repo.json_at(now, 0, &["acquire", "1", "--holder", "a", "--ttl", "1m"]);
        assert_eq!(v["acquired_at"], T0, "GIT_LEASE_NOW={now}");
        assert_eq!(v["expires_at"], at_min(1), "GIT_LEASE_NOW={now}");
    }
}

#[test]
fn reads_never_write() {
    let repo = alice_holds_42();
    repo.json_at(&at_min(1), 0, &["acquire", "gh/7", "--holder", "bob"]);
    repo.json_at(&at_min(2), 0, &["release", "gh/7", "--holder", "bob"]);
    let before = repo.snapshot();
    let reads: &[&[&str]] = &[
        &["show", "42"],
        &["--json", "show", "42"],
        &["show", "gh/7"],
        &["list"],
        &["list", "--all"],
        &["--json", "list", "--all"],
        &["list", "--state", "expired"],
        &["log", "42"],
        &["--json", "log", "gh/7"],
        &["check", "42", "--token", "1"],
        &["--json", "check", "42", "--token", "9"],
        &["check", "nope", "--token", "1"],
        &["show", "nope"],
    ];
    // Before expiry, at it, and long after: expiry is a filter, never a write.
    for now in [at_min(5), at_min(10), at_min(600)] {
        for args in reads {
            let run = repo.run_at(&now, args);
            assert!(
                [0, 3, 4].contains(&run.code),
                "`{}` at {now}\n{run}",
                run.command
            );
            assert_eq!(
                repo.snapshot(),
                before,
                "`{}` at {now} must not write",
                run.command
            );
        }
    }
}
