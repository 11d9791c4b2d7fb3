//! Settling an ordered claim: a claimer of an ordered queue ([`Order::Priority`]) that began
//! a tenure looks at the candidates ahead of the one it holds. While one of them is free, it
//! moves up to the first such one, leaving the one it holds in the same atomic write (one
//! ref transaction locally, one atomic push through a remote). A lost write reads again. It
//! stops when no candidate ahead of it is free.
//!
//! Why no candidate stays free ahead of a claimed one once every claimer has stopped (and
//! nobody released meanwhile): say claimer X stopped at `c` after a read at `t` showed every
//! candidate ahead of `c` taken, and `h < c` is free at the end. Then `h` was freed after
//! `t`, and only a move frees a candidate. Take the first move after `t` that frees one
//! ahead of `c`: it left `w < c` for some `g < w`, and its atomic write needed `g` free both
//! when it read and when it landed. No earlier candidate ahead of `c` was freed after `t`, so
//! `g` was free at `t` too, which X's read would have seen. So X could not have stopped.
//!
//! [`Order::Priority`]: super::one_of_many::Order::Priority

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gix::ObjectId;

use super::one_of_many::{available, AnyReport, States};
use super::remote::{PushResult, Remote};
use super::{Ledger, Report, SwapEdit};
use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::lease::Event;
use crate::rules::{self, Claim, Outcome};
use crate::store::{Entry, Staged, Swap};

/// The most writes one claim spends on settling, lost ones included: each landed move goes
/// up by at least one candidate, and each lost one means another claimer moved, so this is
/// reached only by a queue of more candidates than claimers ever race over.
const MAX_SETTLE_WRITES: u32 = 64;

/// The longest a remote claim waits before it reads again the candidates ahead of it.
const MAX_QUIET_WAIT: Duration = Duration::from_millis(1000);

/// The most waits a remote claim spends for the candidates ahead of it to stay unchanged
/// between two reads before it moves up anyway.
const MAX_QUIET_WAITS: u32 = 20;

/// Returns true if `report` began a tenure: a claim that settling may move.
pub(crate) fn began_tenure(report: &Report) -> bool {
    report.wrote && report.lease().is_some_and(|l| l.event == Event::Acquire)
}

/// Returns the candidates of `ahead` that `claim` could take as a new tenure in `state`, in
/// order.
fn free_among(
    ahead: &[IssueId],
    state: &States,
    claim: &Claim,
    now: DateTime<Utc>,
) -> Vec<IssueId> {
    ahead
        .iter()
        .filter(|c| available(c, state, claim, now) == Some(false))
        .cloned()
        .collect()
}

/// Returns true if `state` still has `claimed`'s ledger at the tenure it began: a claim whose
/// tenure was revoked or ended meanwhile has nothing left to move.
fn still_held(claimed: &Report, state: &States) -> bool {
    let read = state.get(&claimed.issue).and_then(Option::as_ref);
    read.map(|e| e.commit) == claimed.entry.as_ref().map(|e| e.commit)
}

/// Returns the candidates ahead of `held`, in order.
fn ahead_of<'a>(candidates: &'a [IssueId], held: &IssueId) -> &'a [IssueId] {
    let at = candidates.iter().position(|c| c == held);
    &candidates[..at.unwrap_or(0)]
}

/// The two writes of a move, their objects written: the report of leaving the held tenure,
/// the report of the new one, and the ref edits that make both at once.
struct Move {
    left: Report,
    taken: Report,
    edits: Vec<SwapEdit>,
}

impl Ledger {
    /// Decides a move of `claim` from `held` (the report of the tenure it began) to `to`, in
    /// state `to_state`, and writes both commits; `None` if the rules refuse either step.
    fn plan_move(
        &self,
        held: &Report,
        to: &IssueId,
        to_state: Option<&Entry>,
        claim: &Claim,
        now: DateTime<Utc>,
    ) -> Result<Option<Move>> {
        let Some(from) = held.entry.as_ref() else {
            return Ok(None);
        };
        let leave =
            rules::queue::leave_for_one_ahead(&held.issue, Some(from.current()), &from.lease, now);
        let take = rules::acquire(to, to_state.map(Entry::current), claim, now);
        let (Some(left), Some(next)) = (leave.next, take.next) else {
            return Ok(None);
        };
        if take.outcome != Outcome::Acquired || next.event != Event::Acquire {
            return Ok(None);
        }
        let mut staged = Staged::default();
        let left_commit = self.store.stage(&mut staged, &left, Some(from.commit))?;
        let to_parent = to_state.map(|e| e.commit);
        let taken_commit = self.store.stage(&mut staged, &next, to_parent)?;
        self.store.write_staged(&staged)?;
        let to_expected = to_state.and_then(Entry::expected);
        Ok(Some(Move {
            edits: vec![
                (held.issue.clone(), left_commit, Some(from.commit)),
                (to.clone(), taken_commit, to_expected),
            ],
            left: Report::written(
                leave.outcome,
                &held.issue,
                left_commit,
                Some(from.commit),
                left,
            ),
            taken: Report::written(take.outcome, to, taken_commit, to_parent, next),
        }))
    }

    /// Settles `claimed`, a tenure this claim began on one of `candidates`, in this
    /// repository's refs (see the module documentation). Returns what the claim holds at
    /// the end, and counts its writes in `report`.
    pub(crate) fn settle(
        &self,
        candidates: &[IssueId],
        mut claimed: Report,
        claim: &Claim,
        now: DateTime<Utc>,
        report: &mut AnyReport,
    ) -> Result<Report> {
        let mut writes = 0;
        while writes < MAX_SETTLE_WRITES {
            let ahead = ahead_of(candidates, &claimed.issue);
            let mut state = States::with_capacity(ahead.len() + 1);
            for issue in ahead.iter().chain([&claimed.issue]) {
                state.insert(issue.clone(), self.current(issue)?);
            }
            if !still_held(&claimed, &state) {
                break;
            }
            report.passed_over = free_among(ahead, &state, claim, now);
            let Some(to) = report.passed_over.first() else {
                break;
            };
            let to_state = state.get(to).cloned().flatten();
            if to_state.as_ref().and_then(Entry::expected).is_none() {
                self.store.ensure_no_clash(to)?;
            }
            let Some(step) = self.plan_move(&claimed, to, to_state.as_ref(), claim, now)? else {
                break;
            };
            writes += 1;
            report.attempts += 1;
            match self.store.swap_many(&step.edits, "git-lease: move up")? {
                Swap::Done => {
                    self.note_write();
                    report.moved_from.push(step.left.issue);
                    claimed = step.taken;
                }
                Swap::Lost => report.lost += 1,
            }
        }
        Ok(claimed)
    }
}

impl Remote<'_> {
    /// Settles `claimed`, a tenure this claim began on one of `candidates`, on the remote, as
    /// [`Ledger::settle`] does locally: each read is one fetch of the candidates ahead, each
    /// move one atomic push. A candidate ahead read free may be one a racer is about to take:
    /// a move goes only once two reads, a wait apart, found every candidate ahead where it
    /// was (the claimers ahead have settled), or once [`MAX_QUIET_WAITS`] waits are spent.
    pub(crate) fn settle(
        &self,
        candidates: &[IssueId],
        mut claimed: Report,
        (claim, now): (&Claim, DateTime<Utc>),
        report: &mut AnyReport,
        rng: &mut fastrand::Rng,
    ) -> Result<Report> {
        let mut writes = 0;
        let mut waits = 0;
        let mut last_read: Option<Vec<Option<ObjectId>>> = None;
        while writes < MAX_SETTLE_WRITES {
            let ahead = ahead_of(candidates, &claimed.issue);
            if ahead.is_empty() {
                report.passed_over.clear();
                break;
            }
            let reading = Instant::now();
            let read: Vec<IssueId> = ahead.iter().chain([&claimed.issue]).cloned().collect();
            let (state, _diverged) = self.fetch_some(&read)?;
            if !still_held(&claimed, &state) {
                break;
            }
            report.passed_over = free_among(ahead, &state, claim, now);
            let Some(to) = report.passed_over.first() else {
                break;
            };
            let tips = tips_of(ahead, &state);
            if last_read.as_ref() != Some(&tips) && waits < MAX_QUIET_WAITS {
                waits += 1;
                last_read = Some(tips);
                let wait = (2 * reading.elapsed()).min(MAX_QUIET_WAIT);
                let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(0);
                std::thread::sleep(Duration::from_millis(rng.u64(wait_ms / 2..=wait_ms)));
                continue;
            }
            last_read = None;
            let to_state = state.get(to).cloned().flatten();
            let Some(step) =
                self.ledger()
                    .plan_move(&claimed, to, to_state.as_ref(), claim, now)?
            else {
                break;
            };
            writes += 1;
            report.attempts += 1;
            let pushed = match self.push(&step.edits) {
                // A server without atomic pushes cannot take a move: keep what is held.
                Err(Error::AtomicUnsupported { .. }) => break,
                pushed => pushed?,
            };
            match pushed {
                PushResult::Done => {
                    for r in [&step.left, &step.taken] {
                        if let Some(e) = &r.entry {
                            self.record_accepted(&r.issue, e.commit, e.parent, &e.lease);
                        }
                    }
                    report.moved_from.push(step.left.issue);
                    claimed = step.taken;
                }
                PushResult::Lost | PushResult::Locked(_) => report.lost += 1,
                // The hook refused the move: keep the candidate this claim holds.
                PushResult::Declined(_) => break,
            }
        }
        Ok(claimed)
    }
}

/// The tip each of `ahead` was read at in `state` (`None`: never leased).
fn tips_of(ahead: &[IssueId], state: &States) -> Vec<Option<ObjectId>> {
    ahead
        .iter()
        .map(|i| state.get(i).and_then(Option::as_ref).map(|e| e.commit))
        .collect()
}
