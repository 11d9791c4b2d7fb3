//! The checker's own tests: histories written by hand, each a rule of what linearizability
//! against the lease rules allows, and histories that must be caught.

#![cfg(test)]

use chrono::Duration;

use super::{check, Input, Model, Op, Output};
use crate::env::t0;

fn op(client: usize, call: u64, ret: Option<u64>, input: Input, output: Option<Output>) -> Op {
    Op {
        client,
        issue: "7".into(),
        call,
        ret,
        input,
        output,
    }
}

fn acquire(holder: &str, secs: i64) -> Input {
    Input::Acquire {
        holder: holder.into(),
        ttl_secs: 60,
        now: t0() + Duration::seconds(secs),
    }
}

fn release(holder: &str, secs: i64) -> Input {
    Input::Release {
        holder: holder.into(),
        now: t0() + Duration::seconds(secs),
    }
}

fn renew(holder: &str, secs: i64) -> Input {
    Input::Renew {
        holder: holder.into(),
        ttl_secs: 60,
        now: t0() + Duration::seconds(secs),
    }
}

fn fence(token: u64, secs: i64) -> Input {
    Input::Check {
        token,
        now: t0() + Duration::seconds(secs),
    }
}

const GOT: fn(u64) -> Option<Output> = |token| Some(Output::Acquired { token });

#[test]
fn concurrent_acquires_linearize_with_one_winner() {
    let history = [
        op(0, 0, Some(10), acquire("a", 0), GOT(1)),
        op(1, 1, Some(9), acquire("b", 0), Some(Output::Held)),
    ];
    check(Model::default(), &history).unwrap();
}

#[test]
fn two_winners_of_one_tenure_are_caught() {
    let history = [
        op(0, 0, Some(10), acquire("a", 0), GOT(1)),
        op(1, 1, Some(9), acquire("b", 0), GOT(1)),
    ];
    let violation = check(Model::default(), &history).unwrap_err();
    assert!(!violation.gave_up);
    assert_eq!(violation.issue, "7");
    assert!(
        violation.to_string().contains("is not linearizable"),
        "{violation}"
    );
}

#[test]
fn a_stale_read_after_a_completed_write_is_caught() {
    // a's acquire returned before the check began: the check must see token 1 live.
    let history = [
        op(0, 0, Some(5), acquire("a", 0), GOT(1)),
        op(1, 6, Some(8), fence(1, 1), Some(Output::CheckFailed)),
    ];
    assert!(check(Model::default(), &history).is_err());
    // Overlapping, the check may come first.
    let overlapping = [
        op(0, 0, Some(5), acquire("a", 0), GOT(1)),
        op(1, 4, Some(8), fence(1, 1), Some(Output::CheckFailed)),
    ];
    check(Model::default(), &overlapping).unwrap();
}

#[test]
fn an_unknown_outcome_may_have_happened() {
    // a's acquire lost its reply; b is then refused and a renews: it did happen.
    let history = [
        op(0, 0, None, acquire("a", 0), None),
        op(1, 10, Some(12), acquire("b", 1), Some(Output::Held)),
        op(
            0,
            13,
            Some(15),
            renew("a", 2),
            Some(Output::Renewed { token: 1 }),
        ),
    ];
    check(Model::default(), &history).unwrap();
}

#[test]
fn an_unknown_outcome_may_never_have_happened() {
    let history = [
        op(0, 0, None, acquire("a", 0), None),
        op(1, 10, Some(12), acquire("b", 1), GOT(1)),
    ];
    check(Model::default(), &history).unwrap();
}

#[test]
fn an_unknown_outcome_may_take_effect_after_later_operations() {
    // a's acquire was invoked first but landed after b's release: c then sees it held.
    let history = [
        op(0, 0, None, acquire("a", 5), None),
        op(1, 1, Some(2), acquire("b", 0), GOT(1)),
        op(1, 3, Some(4), release("b", 1), Some(Output::Released)),
        op(2, 20, Some(21), acquire("c", 6), Some(Output::Held)),
        op(2, 22, Some(23), fence(2, 6), Some(Output::CheckOk)),
    ];
    check(Model::default(), &history).unwrap();
}

#[test]
fn an_unknown_outcome_does_not_excuse_a_token_granted_twice() {
    let history = [
        op(0, 0, None, acquire("a", 0), None),
        op(1, 10, Some(12), acquire("b", 1), GOT(1)),
        op(2, 13, Some(15), acquire("c", 2), GOT(1)),
    ];
    assert!(check(Model::default(), &history).is_err());
}

#[test]
fn a_takeover_at_the_expiry_instant_passes_the_rules_and_fails_a_rule_off_by_one_second() {
    // a's lease, taken at 0 for 60s, expires at 60: b takes it over at exactly 60.
    let history = [
        op(0, 0, Some(1), acquire("a", 0), GOT(1)),
        op(1, 2, Some(3), acquire("b", 60), GOT(2)),
        op(0, 4, Some(5), fence(1, 60), Some(Output::CheckFailed)),
    ];
    check(Model::default(), &history).unwrap();
    // The same history against a build of the rules whose expiry comparison is off by one
    // second (live up to and including the expiry instant) is not linearizable.
    let broken = Model { expiry_off_by: 1 };
    let violation = check(broken, &history).unwrap_err();
    assert!(!violation.gave_up, "{violation}");
}

#[test]
fn issues_are_independent_registers() {
    // Token 1 of issue 7 and token 1 of issue 8, granted at once to different holders.
    let mut other = op(1, 1, Some(9), acquire("b", 0), GOT(1));
    other.issue = "8".into();
    let history = [op(0, 0, Some(10), acquire("a", 0), GOT(1)), other];
    check(Model::default(), &history).unwrap();
}

#[test]
fn a_violation_names_its_issue_and_the_other_issues_still_pass() {
    let mut fine = op(2, 0, Some(3), acquire("c", 0), GOT(1));
    fine.issue = "8".into();
    let history = [
        fine,
        op(0, 0, Some(10), acquire("a", 0), GOT(1)),
        op(1, 11, Some(12), acquire("b", 0), GOT(2)),
    ];
    let violation = check(Model::default(), &history).unwrap_err();
    assert_eq!(violation.issue, "7");
    assert!(violation.to_string().contains("client 1"), "{violation}");
}

#[test]
fn a_long_concurrent_history_is_decided_quickly() {
    // Sixteen clients, each acquiring then releasing at once, all concurrent: the search must
    // find the order (every acquire refused but one) without exploring every permutation.
    let mut history = vec![op(0, 0, Some(1000), acquire("c0", 0), GOT(1))];
    for c in 1..16 {
        history.push(op(
            c,
            c as u64,
            Some(900 + c as u64),
            acquire(&format!("c{c}"), 0),
            Some(Output::Held),
        ));
        history.push(op(
            c,
            950,
            Some(990),
            release(&format!("c{c}"), 0),
            Some(Output::NotHolder),
        ));
    }
    check(Model::default(), &history).unwrap();
}
