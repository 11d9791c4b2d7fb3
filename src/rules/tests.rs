//! Each rule at exact instants, on issue 42 (see `fixtures`).
use super::fixtures::{h, id, rec, t, ttl};
use super::*;
fn held(holder: &str, token: u64, from: i64, until: Option<i64>) -> Lease {
    Lease::tenure(&id(), &h(holder), token, t(from), until.map(t))
}

#[test]
fn liveness_is_strictly_before_expiry() {
    let l = held("a", 1, 0, Some(10));
    assert!(is_live(Current::recorded(&l), t(9)));
    assert!(
        !is_live(Current::recorded(&l), t(10)),
        "expired exactly at expires_at"
    );
    assert!(
        is_live(Current::recorded(&held("a", 1, 0, None)), t(100_000)),
        "open-ended"
    );
    let mut free = l.clone();
    free.holder = None;
    assert!(!is_live(Current::recorded(&free), t(1)));
    let gone = Observation { process_gone: true };
    let seen_gone = Current {
        lease: &l,
        seen: gone,
    };
    assert!(
        !is_live(seen_gone, t(1)),
        "the reader saw the holder process gone"
    );
}

#[test]
fn a_tenure_is_its_token_and_start_not_its_holder_name() {
    let ours = held("a", 1, 0, None);
    let tenure = Tenure::of(&ours).unwrap();
    let renewed = renew_tenure(rec(&ours), &tenure, &h("a"), Ttl::Never, t(5));
    assert_eq!(renewed.outcome, Outcome::Renewed);
    // Revoked, then taken again under the same name (no session): `renew` by the name
    // alone extends the new tenure; `renew_tenure` of the old one refuses.
    let again = held("a", 2, 6, None);
    assert_eq!(
        renew(rec(&again), &h("a"), Ttl::Never, t(7)).outcome,
        Outcome::Renewed
    );
    assert_eq!(
        renew_tenure(rec(&again), &tenure, &h("a"), Ttl::Never, t(7)),
        Transition::answer(Outcome::NotHolder)
    );
    assert_eq!(
        release_tenure(&id(), rec(&again), &tenure, &h("a"), Ending::Complete, t(7)),
        Transition::answer(Outcome::NotHolder)
    );
    // Even expired, another tenure is not this one's to free.
    let expired = held("b", 2, 6, Some(8));
    assert_eq!(
        release_tenure(
            &id(),
            rec(&expired),
            &tenure,
            &h("a"),
            Ending::Release,
            t(9)
        ),
        Transition::answer(Outcome::NotHolder)
    );
    let mut revoked = Lease::freed(&id(), Event::Revoke, t(6), 1);
    revoked.previous_holder = Some("a".into());
    assert_eq!(
        release_tenure(
            &id(),
            rec(&revoked),
            &tenure,
            &h("a"),
            Ending::Release,
            t(7)
        ),
        Transition::answer(Outcome::NotHeld)
    );
    let ended = release_tenure(&id(), rec(&ours), &tenure, &h("a"), Ending::Complete, t(7));
    assert_eq!(ended.outcome, Outcome::Released);
    assert_eq!(Tenure::of(&revoked), None);
}

#[test]
fn first_acquire_is_token_one() {
    let tr = acquire(&id(), None, &Claim::new(h("a"), ttl(10)), t(0));
    assert_eq!(tr.outcome, Outcome::Acquired);
    let next = tr.next.unwrap();
    assert_eq!((next.token, next.event), (1, Event::Acquire));
    assert_eq!(next.expires_at, Some(t(10)));
    assert_eq!(next.acquired_at, Some(t(0)));
}

#[test]
fn acquire_after_expiry_is_a_new_tenure_and_a_takeover() {
    let cur = held("a", 3, 0, Some(10));
    let next = acquire(&id(), rec(&cur), &Claim::new(h("b"), ttl(5)), t(10))
        .next
        .unwrap();
    assert_eq!(next.token, 4);
    assert_eq!(next.holder.as_deref(), Some("b"));
    assert_eq!(next.previous_holder.as_deref(), Some("a"));
}

#[test]
fn acquire_by_the_live_holder_is_idempotent() {
    let cur = held("a", 3, 0, Some(10));
    let tr = acquire(&id(), rec(&cur), &Claim::new(h("a"), ttl(30)), t(5));
    assert_eq!(tr.outcome, Outcome::Acquired);
    let next = tr.next.unwrap();
    assert_eq!(next.token, 3);
    assert_eq!(next.acquired_at, Some(t(0)));
    assert_eq!(next.expires_at, Some(t(35)));
    assert_eq!(next.event, Event::Reacquire);
}

#[test]
fn open_ended_reacquire_writes_nothing() {
    let cur = held("a", 1, 0, None);
    let tr = acquire(&id(), rec(&cur), &Claim::new(h("a"), Ttl::Never), t(5));
    assert_eq!(tr, Transition::answer(Outcome::Acquired));
}

#[test]
fn acquire_of_a_live_lease_by_another_is_held() {
    let cur = held("a", 1, 0, Some(10));
    assert_eq!(
        acquire(&id(), rec(&cur), &Claim::new(h("b"), ttl(10)), t(9)),
        Transition::answer(Outcome::Held)
    );
}

#[test]
fn renew_only_by_the_live_holder() {
    let cur = held("a", 2, 0, Some(10));
    let tr = renew(rec(&cur), &h("a"), ttl(10), t(5));
    assert_eq!(tr.outcome, Outcome::Renewed);
    assert_eq!(tr.next.unwrap().expires_at, Some(t(15)));
    assert_eq!(
        renew(rec(&cur), &h("b"), ttl(10), t(5)).outcome,
        Outcome::NotHolder
    );
    assert_eq!(
        renew(rec(&cur), &h("a"), ttl(10), t(10)).outcome,
        Outcome::NotHolder
    );
    assert_eq!(
        renew(None, &h("a"), ttl(10), t(10)).outcome,
        Outcome::NotHolder
    );
}

#[test]
fn release_keeps_the_token() {
    let cur = held("a", 2, 0, Some(10));
    let tr = release(&id(), rec(&cur), &h("a"), Ending::Release, t(5));
    assert_eq!(tr.outcome, Outcome::Released);
    let next = tr.next.unwrap();
    assert_eq!((next.token, next.holder.clone()), (2, None));
    assert_eq!(next.previous_holder.as_deref(), Some("a"));
    let again = release(&id(), rec(&next), &h("a"), Ending::Release, t(6));
    assert_eq!(again, Transition::answer(Outcome::NotHeld));
}

#[test]
fn release_of_nothing_is_not_held() {
    assert_eq!(
        release(&id(), None, &h("a"), Ending::Release, t(0)),
        Transition::answer(Outcome::NotHeld)
    );
}

#[test]
fn release_of_an_expired_lease_is_open_to_anyone() {
    let cur = held("a", 2, 0, Some(10));
    let tr = release(&id(), rec(&cur), &h("b"), Ending::Release, t(10));
    assert_eq!(tr.outcome, Outcome::Released);
    assert_eq!(tr.next.unwrap().by.as_deref(), Some("b"));
    assert_eq!(
        release(&id(), rec(&cur), &h("b"), Ending::Release, t(9)),
        Transition::answer(Outcome::NotHolder)
    );
}

#[test]
fn a_clock_behind_the_ledger_never_records_a_step_back() {
    let mut freed = Lease::freed(&id(), Event::Release, t(11), 1);
    freed.previous_holder = Some("b".into());
    let next = acquire(&id(), rec(&freed), &Claim::new(h("a"), ttl(60)), t(5))
        .next
        .unwrap();
    assert_eq!(next.at, t(11));
    assert_eq!(next.acquired_at, Some(t(11)));
    assert_eq!(next.expires_at, Some(t(71)));
    assert!(crate::step::judge(Some(&freed), &next, crate::step::Judgement::Recorded).is_empty());
}

#[test]
fn an_all_or_none_claim_takes_everything_or_nothing() {
    let (a, b) = (IssueId::new("a").unwrap(), IssueId::new("b").unwrap());
    let claim = Claim::new(h("me"), ttl(10));
    let taken = acquire_all(&[(&a, None), (&b, None)], &claim, t(0));
    assert!(taken
        .iter()
        .all(|t| t.outcome == Outcome::Acquired && t.next.is_some()));
    let held_b = held("other", 1, 0, Some(10));
    let refused = acquire_all(&[(&a, None), (&b, rec(&held_b))], &claim, t(1));
    assert_eq!(
        refused,
        vec![
            Transition::answer(Outcome::Skipped),
            Transition::answer(Outcome::Held)
        ]
    );
}

#[test]
fn fencing_check() {
    let cur = held("a", 4, 0, Some(10));
    assert_eq!(check(rec(&cur), 4, None, t(1)), Ok(()));
    assert_eq!(check(rec(&cur), 4, Some("a"), t(1)), Ok(()));
    assert!(matches!(
        check(rec(&cur), 3, None, t(1)),
        Err(FenceFailure::StaleToken { current: 4, .. })
    ));
    assert!(matches!(
        check(rec(&cur), 4, Some("b"), t(1)),
        Err(FenceFailure::WrongHolder { .. })
    ));
    assert!(matches!(
        check(rec(&cur), 4, None, t(10)),
        Err(FenceFailure::NotLive { .. })
    ));
    assert!(matches!(
        check(None, 1, None, t(1)),
        Err(FenceFailure::NotLive { last_token: None })
    ));
}
