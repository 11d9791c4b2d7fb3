//! Claim any one of several issues: the building block of a fleet of workers that share a
//! queue of issues without any coordinator.
//!
//! Each claimer tries the candidates in its own random order (a shuffle seeded from fresh
//! randomness), so that claimers who start together spread over the candidates instead of all
//! racing for the first one. A candidate is taken only where [`rules::acquire`] answers
//! [`Outcome::Acquired`] for the claim: a free, released or expired lease, or one whose holder
//! process is gone (a new tenure), or one the claimant already holds live (an idempotent
//! re-acquire, tried first, so that a claimer that retries never ends up with two issues).
//!
//! Locally every attempt is the ledger's compare-and-swap ([`Ledger::apply`]). Through a remote
//! ([`Remote::acquire_any`]), one fetch learns the state of every candidate, and then every
//! attempt is exactly one push with an expected old value, decided from the verified tracking
//! copy. Where the server's hook judges every claim against its archive, a clone reads no
//! archive for a candidate the remote has no ref of (up to 256 candidates): it claims it as
//! never leased, and reads the archive only if the hook refuses that. A clone that never saw any of the candidates
//! makes its first push there (in a random order) before any fetch, to one of them at random:
//! one the remote has a ledger of loses it before anything is sent. A push that loses the race
//! does not retry the contended issue: after a random part of the lost push's own duration (so
//! that the other losers of the same race spread out), one fetch of the untried candidates'
//! refs alone tells which of them moved meanwhile, and the next push goes to one that did not.
//! Every candidate is fetched and verified again only when nothing else is left, and retried
//! only if free again.
//! Nothing is written when no candidate is free.
//!
//! With [`Order::Priority`] the candidates are a priority order, the first the most urgent.
//! The claimer's first write goes to the first candidate it read as free (after its own live
//! lease, which is always kept first). Only once a write of this claim was lost to another
//! claimer does it spread: each later write goes to one chosen at random among those it last
//! read as free, as in a random order. So a claimer that meets no racer takes the queue in
//! strict order, and it passes over a candidate it last read as free only after it lost a
//! race in this claim. Once it holds a tenure it began, it settles
//! (the ledger's `settle` module): while a candidate ahead of it is free, it moves up to it. So
//! claimers that start together end on the first free candidates of the queue.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::ledger::{settle, Ledger, Report};
use crate::remote::{Diverged, PushResult, Remote, Unseen};
use crate::rules::{self, Claim, Outcome};
use crate::store::Entry;

/// The longest a remote claim waits after a lost push before it looks again (it waits a
/// random part of the lost push's own duration, up to this).
const MAX_SPREAD: Duration = Duration::from_millis(500);

/// How a claim of any one candidate orders its candidates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Each claimer in a random order of its own (claimers spread over the candidates).
    #[default]
    Random,
    /// The candidates as given are a priority order: the first free one is taken, and the
    /// claimer spreads over the first few only after a lost race (see the module
    /// documentation).
    Priority,
}

/// What a claim of any one candidate did.
#[derive(Clone, Debug)]
pub struct AnyReport {
    /// The claim, or `None` when no candidate was free (nothing was written then).
    pub claimed: Option<Report>,
    /// How many distinct candidates were given.
    pub candidates: usize,
    /// How many writes were attempted: compare-and-swaps locally, pushes through a remote.
    pub attempts: u32,
    /// The order the candidates were tried in.
    pub order: Order,
    /// How many of those writes were lost to another claimer.
    pub lost: u32,
    /// With [`Order::Priority`]: the candidates ahead of the claimed one, in order, that this
    /// claimer last read as free and did not try (empty unless a write was lost first).
    pub passed_over: Vec<IssueId>,
    /// With [`Order::Priority`]: the candidates this claim took and then left, in order, each
    /// for a free one ahead of it (see the ledger's `settle` module).
    pub moved_from: Vec<IssueId>,
    /// Remote ledgers left out because the remote rewound or rewrote them.
    pub diverged: Vec<Diverged>,
}

/// The newest verified entry of each issue (`None`: never leased).
pub type States = HashMap<IssueId, Option<Entry>>;

/// Returns `candidates` without repeats, in the order first given.
pub fn distinct(candidates: &[IssueId]) -> Vec<IssueId> {
    let mut seen = std::collections::HashSet::new();
    candidates
        .iter()
        .filter(|c| seen.insert((*c).clone()))
        .cloned()
        .collect()
}

/// Returns a random number generator seeded from fresh operating-system randomness, so that
/// claimers started at the same instant (even from one parent) order their candidates
/// differently.
pub fn fresh_rng() -> fastrand::Rng {
    use std::hash::{BuildHasher, Hasher};
    // std seeds each RandomState from the operating system's random source.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    fastrand::Rng::with_seed(hasher.finish())
}

/// How `claim` could take `issue` in `state`: `Some(true)` as a re-acquire of its own live
/// lease, `Some(false)` as a new tenure, `None` if the rules refuse it or its state is unknown
/// (missing from `state`: a diverged remote ledger).
pub(crate) fn available(
    issue: &IssueId,
    state: &States,
    claim: &Claim,
    now: DateTime<Utc>,
) -> Option<bool> {
    let current = state.get(issue)?.as_ref().map(Entry::current);
    (rules::acquire(issue, current, claim, now).outcome == Outcome::Acquired)
        .then(|| current.is_some_and(|c| rules::is_live(c, now)))
}

/// Orders `candidates` for trying: those `claim` would re-acquire (already its own, live)
/// first, then the free ones, in `rng`'s random order or, with [`Order::Priority`], in the
/// order given; the others are left out.
fn plan(
    candidates: &[IssueId],
    state: &States,
    claim: &Claim,
    now: DateTime<Utc>,
    order: Order,
    rng: &mut fastrand::Rng,
) -> Vec<IssueId> {
    let mut own = Vec::new();
    let mut free = Vec::new();
    for issue in candidates {
        match available(issue, state, claim, now) {
            Some(true) => own.push(issue.clone()),
            Some(false) => free.push(issue.clone()),
            None => {}
        }
    }
    if order == Order::Random {
        rng.shuffle(&mut own);
        rng.shuffle(&mut free);
    }
    own.extend(free);
    own
}

/// Takes the next candidate to try out of `untried`: the first one, except in a priority
/// order once the claimer lost a race (`spread`), where it is one at random. Returns it with
/// the candidates left ahead of it, which this try passes over (they stay untried).
fn next(
    untried: &mut Vec<IssueId>,
    order: Order,
    spread: bool,
    rng: &mut fastrand::Rng,
) -> Option<(IssueId, Vec<IssueId>)> {
    if untried.is_empty() {
        return None;
    }
    let pick = match order {
        Order::Priority if spread => rng.usize(0..untried.len()),
        Order::Priority | Order::Random => 0,
    };
    let ahead = untried[..pick].to_vec();
    Some((untried.remove(pick), ahead))
}

impl Ledger {
    /// Claims exactly one of `candidates` for `claim.holder` in this repository's refs: the
    /// first free one in `order` (see the module documentation).
    ///
    /// Returns [`AnyReport::claimed`] `None`, having moved no ref, when none is free.
    pub fn acquire_any(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        order: Order,
        rng: &mut fastrand::Rng,
    ) -> Result<AnyReport> {
        let candidates = distinct(candidates);
        let mut state = HashMap::with_capacity(candidates.len());
        for issue in &candidates {
            state.insert(issue.clone(), self.current(issue)?);
        }
        let mut report = AnyReport::none(candidates.len(), order);
        let mut untried = plan(&candidates, &state, claim, now, order, rng);
        loop {
            // Once every candidate tried or read taken is spent, all are read again: a
            // claimer of an ordered queue that moves up frees the one it leaves.
            if untried.is_empty() && report.attempts > 0 {
                for issue in &candidates {
                    state.insert(issue.clone(), self.current(issue)?);
                }
                untried = plan(&candidates, &state, claim, now, order, rng);
            }
            let Some((issue, ahead)) = next(&mut untried, order, report.lost > 0, rng) else {
                return Ok(report);
            };
            report.attempts += 1;
            // The compare-and-swap re-reads and decides again on a lost swap; a candidate
            // taken meanwhile answers `held`, and the next one is tried.
            let claimed = self.apply(&issue, |cur| rules::acquire(&issue, cur, claim, now))?;
            if claimed.outcome == Outcome::Acquired {
                report.passed_over = ahead;
                let claimed = if order == Order::Priority && settle::began_tenure(&claimed) {
                    self.settle(&candidates, claimed, claim, now, &mut report)?
                } else {
                    claimed
                };
                report.claimed = Some(claimed);
                return Ok(report);
            }
            report.lost += 1;
            if order == Order::Priority {
                // Read the untried ones again: those taken meanwhile are left out.
                let mut still = Vec::with_capacity(untried.len());
                for other in untried {
                    state.insert(other.clone(), self.current(&other)?);
                    if available(&other, &state, claim, now).is_some() {
                        still.push(other);
                    }
                }
                untried = still;
            }
        }
    }
}

impl AnyReport {
    fn none(candidates: usize, order: Order) -> AnyReport {
        AnyReport {
            claimed: None,
            candidates,
            order,
            attempts: 0,
            lost: 0,
            passed_over: Vec::new(),
            moved_from: Vec::new(),
            diverged: Vec::new(),
        }
    }
}

impl Remote<'_> {
    /// Claims exactly one of `candidates` on the remote for `claim.holder`: one fetch, then
    /// one push per attempt (see the module documentation).
    ///
    /// After a lost push, one fetch of the untried candidates' refs alone tells which of
    /// them moved since they were verified; those are set aside, and the next
    /// push goes to one that did not move, decided from its verified state. Only when none is
    /// left is every candidate fetched again (one fetch) and verified, and any of them that
    /// is free again is tried.
    ///
    /// Returns [`AnyReport::claimed`] `None` when none is free, or every free one went to a
    /// racer first (no push of this claim landed then); [`Error::LostRace`] when the attempt
    /// limit (`lease.pushAttempts`) is spent while a candidate still looked free.
    pub fn acquire_any(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        order: Order,
        rng: &mut fastrand::Rng,
    ) -> Result<AnyReport> {
        let store = self.ledger().store();
        let candidates = distinct(candidates);
        let mut report = AnyReport::none(candidates.len(), order);
        // A fresh clone reads no fold where the server's hook judges every claim.
        let mut unseen = Unseen::NewWhereHookJudges;
        match self.blind_first(&candidates, claim, now, order, rng, &mut report)? {
            Blind::Claimed(claimed) => {
                report.claimed = Some(*claimed);
                return Ok(report);
            }
            Blind::Refused => unseen = Unseen::FromArchive,
            Blind::NotMade | Blind::Lost => {}
        }
        let (mut state, mut diverged) = self.fetch_some_reading(&candidates, unseen)?;
        // The candidates to try, in order. Those lost to a racer or moved on the remote since
        // they were verified are set aside: every candidate is read again only if nothing
        // else is free.
        let mut untried = plan(&candidates, &state, claim, now, order, rng);
        loop {
            // Once every candidate tried or read taken is spent, all are fetched again: a
            // claimer of an ordered queue that moves up frees the one it leaves.
            if untried.is_empty() && report.attempts > 0 {
                let (fresh, more) = self.fetch_some_reading(&candidates, unseen)?;
                state = fresh;
                diverged = more;
                untried = plan(&candidates, &state, claim, now, order, rng);
            }
            let Some((issue, ahead)) = next(&mut untried, order, report.lost > 0, rng) else {
                report.diverged = diverged;
                return Ok(report);
            };
            if report.attempts >= self.attempts() {
                return Err(Error::LostRace {
                    issue: issue.to_string(),
                    attempts: report.attempts,
                });
            }
            let current = state.get(&issue).cloned().flatten();
            let transition =
                rules::acquire(&issue, current.as_ref().map(Entry::current), claim, now);
            let Some(next) = transition.next else {
                // Already the claimant's, with nothing to refresh: nothing to push.
                report.claimed = Some(Report::unchanged(transition.outcome, &issue, current));
                report.passed_over = ahead;
                report.diverged = diverged;
                return Ok(report);
            };
            let parent = current.as_ref().map(|e| e.commit);
            let expected = current.as_ref().and_then(Entry::expected);
            let commit = store.write(&next, parent)?;
            report.attempts += 1;
            let pushing = Instant::now();
            match self.push(&[(issue.clone(), commit, expected)])? {
                PushResult::Done => {
                    self.record_accepted(&issue, commit, parent, &next);
                    let claimed = Report::written(transition.outcome, &issue, commit, parent, next);
                    report.passed_over = ahead;
                    let claimed = if order == Order::Priority && settle::began_tenure(&claimed) {
                        self.settle(&candidates, claimed, (claim, now), &mut report, rng)?
                    } else {
                        claimed
                    };
                    report.claimed = Some(claimed);
                    report.diverged = diverged;
                    return Ok(report);
                }
                // A candidate claimed as never leased that the hook refused: its archive
                // records it, most likely. Every candidate is read again, the archive too.
                PushResult::Declined(_)
                    if unseen == Unseen::NewWhereHookJudges
                        && current.is_none()
                        && self.hook_judges_claims()? =>
                {
                    unseen = Unseen::FromArchive;
                    (state, diverged) = self.fetch_some_reading(&candidates, unseen)?;
                    untried = plan(&candidates, &state, claim, now, order, rng);
                }
                PushResult::Declined(verdict) => {
                    return Err(verdict.into_error(std::slice::from_ref(&issue)))
                }
                PushResult::Lost | PushResult::Locked(_) => {
                    // Someone else moved it first (or holds its lock): set it aside, and every
                    // untried candidate that moved too, and go on with one that did not.
                    report.lost += 1;
                    // The other losers of this race learn of it at the same moment: spread the
                    // retries over one push's time, so that a later one sees the claims of the
                    // earlier ones instead of colliding with them again.
                    let spread = pushing.elapsed().min(MAX_SPREAD);
                    let spread_ms = u64::try_from(spread.as_millis()).unwrap_or(0);
                    if spread_ms > 0 {
                        std::thread::sleep(Duration::from_millis(rng.u64(0..spread_ms)));
                    }
                    let tips = self.remote_tips(&untried)?;
                    // Where each ref was verified to be (an archived ledger has none).
                    let verified = |i: &IssueId| {
                        state
                            .get(i)
                            .and_then(|e| e.as_ref())
                            .and_then(Entry::expected)
                    };
                    untried.retain(|i| tips.get(i.as_str()).copied() == verified(i));
                }
            }
        }
    }

    /// The first push of a claim in a random order, made without a fetch where none of
    /// `candidates` was ever seen here and the server's hook judges every claim against its
    /// archive, as a single claim's is ([`Remote::hook_judges_claims`]): it creates the
    /// ledger of one candidate at random, expecting none. A candidate the remote has a ledger
    /// of loses the push as soon as git reads the server's refs, before anything is sent; one
    /// the archive records is refused by the hook. Either way the claim goes on from a fetch.
    fn blind_first(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        order: Order,
        rng: &mut fastrand::Rng,
        report: &mut AnyReport,
    ) -> Result<Blind> {
        if order != Order::Random || candidates.is_empty() || self.attempts() == 0 {
            return Ok(Blind::NotMade);
        }
        let store = self.ledger().store();
        for candidate in candidates {
            if store.tip_of(&self.tracking_ref(candidate))?.is_some() {
                return Ok(Blind::NotMade);
            }
        }
        if !self.hook_judges_claims()? {
            return Ok(Blind::NotMade);
        }
        let issue = candidates[rng.usize(..candidates.len())].clone();
        let transition = rules::acquire(&issue, None, claim, now);
        let Some(next) = transition.next else {
            return Ok(Blind::NotMade);
        };
        let commit = store.write(&next, None)?;
        report.attempts += 1;
        Ok(match self.push(&[(issue.clone(), commit, None)])? {
            PushResult::Done => {
                self.record_accepted(&issue, commit, None, &next);
                Blind::Claimed(Box::new(Report::written(
                    transition.outcome,
                    &issue,
                    commit,
                    None,
                    next,
                )))
            }
            PushResult::Lost | PushResult::Locked(_) => {
                report.lost += 1;
                Blind::Lost
            }
            PushResult::Declined(_) => Blind::Refused,
        })
    }
}

/// What a claim's first push made without a fetch did ([`Remote::blind_first`]).
enum Blind {
    /// None was made: a candidate was seen here, or the hook does not judge claims.
    NotMade,
    /// It landed.
    Claimed(Box<Report>),
    /// A racer, or a ledger the remote has, was there first.
    Lost,
    /// The hook refused it: the archive records the candidate, most likely.
    Refused,
}
