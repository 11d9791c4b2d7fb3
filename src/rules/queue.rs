//! The rule of an ordered queue's settling: a claimer that took a candidate while one ahead
//! of it was free moves up, and leaves the one it took in the same atomic write.

use chrono::{DateTime, Utc};

use super::{ledger_time, Current, Outcome, Transition};
use crate::issue::IssueId;
use crate::lease::{Event, Lease};

/// Decides how a claim of an ordered queue leaves `issue`, whose tenure `begun` it began
/// itself and now gives up for a candidate ahead of it: freed, token kept, if the ledger
/// still records exactly that tenure; otherwise [`Outcome::NotHolder`], nothing written.
///
/// No session secret is asked: the claimer proves the tenure is its own by writing on top
/// of the very record it wrote, which a compare-and-swap of the ref then holds it to.
pub fn leave_for_one_ahead(
    issue: &IssueId,
    current: Option<Current<'_>>,
    begun: &Lease,
    now: DateTime<Utc>,
) -> Transition {
    let Some(c) = current.filter(|c| c.lease == begun && c.lease.event == Event::Acquire) else {
        return Transition::answer(Outcome::NotHolder);
    };
    let mut next = Lease::freed(
        issue,
        Event::Release,
        ledger_time(current, now),
        begun.token,
    );
    next.previous_holder = c.lease.holder.as_deref().map(Box::from);
    Transition::write(Outcome::Released, current, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::acquire;
    use crate::rules::fixtures::{h, id, rec, t, ttl};
    use crate::rules::Claim;

    fn begun(previous: Option<&Lease>) -> Lease {
        let claim = Claim::new(h("agent"), ttl(60));
        let current = previous.and_then(rec);
        acquire(&id(), current, &claim, t(0))
            .next
            .expect("a new tenure")
    }

    #[test]
    fn leaving_the_tenure_just_begun_frees_it_and_keeps_its_token() {
        let freed = Lease::freed(&id(), Event::Release, t(-5), 4);
        let lease = begun(Some(&freed));
        let left = leave_for_one_ahead(&id(), rec(&lease), &lease, t(1));
        assert_eq!(left.outcome, Outcome::Released);
        let next = left.next.expect("a release is written");
        assert_eq!(next.event, Event::Release);
        assert_eq!((next.token, next.holder), (5, None));
        assert_eq!(next.previous_holder.as_deref(), Some("agent"));
    }

    #[test]
    fn a_tenure_changed_since_it_was_begun_is_not_left() {
        let lease = begun(None);
        let mut renewed = lease.clone();
        renewed.event = Event::Renew;
        let left = leave_for_one_ahead(&id(), rec(&renewed), &lease, t(1));
        assert_eq!((left.outcome, left.next), (Outcome::NotHolder, None));
        let left = leave_for_one_ahead(&id(), None, &lease, t(1));
        assert_eq!((left.outcome, left.next), (Outcome::NotHolder, None));
    }
}
