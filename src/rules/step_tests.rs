//! The arrival rules at exact instants: who may author each step, judged at the server's
//! clock.
use super::*;
use crate::liveness::Observation;
use crate::rules::fixtures::{h, id, rec, t};
use crate::rules::{self, Claim, Ending};
use crate::time::Ttl;
/// alice's lease, taken at 0 for 10 minutes.
fn alices() -> Lease {
    let claim = Claim::new(h("alice"), Ttl::For(Duration::minutes(10)));
    rules::acquire(&id(), None, &claim, t(0)).next.unwrap()
}
fn rules_at(prev: &Lease, next: &Lease, now: i64, pusher: &str) -> Vec<Rule> {
    let pusher = Pusher::Known(pusher.into());
    let admins = ["ops".to_owned()];
    let arrival = Arrival {
        now: t(now),
        max_skew: Duration::minutes(5),
        pusher: &pusher,
        admins: &admins,
        host: None,
        signers: None,
    };
    judge(Some(prev), next, Judgement::Arrival(&arrival))
        .into_iter()
        .map(|(rule, _)| rule)
        .collect()
}

#[test]
fn the_holders_own_steps_only_by_the_holder() {
    let prev = alices();
    let renew = rules::renew(
        rec(&prev),
        &h("alice"),
        Ttl::For(Duration::minutes(10)),
        t(5),
    )
    .next
    .unwrap();
    assert_eq!(rules_at(&prev, &renew, 5, "alice"), []);
    assert_eq!(rules_at(&prev, &renew, 5, "bob"), [Rule::Identity]);
    let release = rules::release(&id(), rec(&prev), &h("alice"), Ending::Release, t(5))
        .next
        .unwrap();
    assert_eq!(rules_at(&prev, &release, 5, "alice"), []);
    assert_eq!(rules_at(&prev, &release, 5, "bob"), [Rule::Identity]);
}

#[test]
fn a_renew_backdated_before_the_expiry_is_judged_at_the_servers_clock() {
    let prev = alices();
    let renew = rules::renew(
        rec(&prev),
        &h("alice"),
        Ttl::For(Duration::minutes(10)),
        t(9),
    )
    .next
    .unwrap();
    assert_eq!(rules_at(&prev, &renew, 9, "alice"), []);
    assert_eq!(rules_at(&prev, &renew, 12, "alice"), [Rule::Event]);
    assert!(judge(Some(&prev), &renew, Judgement::Recorded).is_empty());
}

#[test]
fn by_is_always_the_pusher_and_a_revoke_needs_an_admin() {
    let prev = alices();
    let free = |by: &str, at| {
        rules::release(&id(), rec(&prev), &h(by), Ending::Release, t(at))
            .next
            .unwrap()
    };
    // After expiry anyone may free it, in their own name only.
    assert_eq!(rules_at(&prev, &free("bob", 11), 11, "bob"), []);
    assert_eq!(
        rules_at(&prev, &free("bob", 11), 11, "carol"),
        [Rule::Identity]
    );
    assert_eq!(
        rules_at(&prev, &free("alice", 11), 11, "bob"),
        [Rule::Identity]
    );
    let revoke = |by: &str| {
        rules::revoke(
            &id(),
            rec(&prev),
            &h(by),
            &crate::Remark::new(crate::RemarkKind::Reason, "r").unwrap(),
            t(5),
        )
        .next
        .unwrap()
    };
    assert_eq!(rules_at(&prev, &revoke("ops"), 5, "ops"), []);
    assert_eq!(rules_at(&prev, &revoke("ops"), 5, "bob"), [Rule::Admin]);
    assert_eq!(rules_at(&prev, &revoke("bob"), 5, "bob"), [Rule::Admin]);
    assert_eq!(
        rules_at(&prev, &revoke("alice"), 5, "ops"),
        [Rule::Identity]
    );
}

#[test]
fn a_new_tenure_only_by_its_holder_and_never_over_a_live_lease() {
    let prev = alices();
    let claim = |who: &str| Claim::new(h(who), Ttl::For(Duration::minutes(10)));
    let bobs = rules::acquire(&id(), rec(&prev), &claim("bob"), t(10))
        .next
        .unwrap();
    assert_eq!(rules_at(&prev, &bobs, 10, "bob"), []);
    assert_eq!(rules_at(&prev, &bobs, 10, "carol"), [Rule::Identity]);
    // Dated after the expiry, but the server's clock says alice still holds it.
    assert_eq!(rules_at(&prev, &bobs, 8, "bob"), [Rule::HolderChange]);
}

#[test]
fn a_process_gone_takeover_the_server_cannot_see_is_unverifiable() {
    let mut prev = alices();
    prev.process = Some(Box::new(crate::liveness::HolderProcess {
        pid: 1,
        boot_id: "another-machine".into(),
        pid_ns: Some(1),
        start_ticks: 1,
    }));
    let seen_gone = Current {
        lease: &prev,
        seen: Observation { process_gone: true },
    };
    let claim = Claim::new(h("bob"), Ttl::For(Duration::minutes(10)));
    let takeover = rules::acquire(&id(), Some(seen_gone), &claim, t(5))
        .next
        .unwrap();
    assert_eq!(takeover.takeover, Some(Takeover::ProcessGone));
    assert_eq!(rules_at(&prev, &takeover, 5, "bob"), [Rule::Unverifiable]);
    assert!(judge(Some(&prev), &takeover, Judgement::Recorded).is_empty());
}
