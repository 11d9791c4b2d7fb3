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
//! Locally every attempt is the ledger's compare-and-swap ([`Ledger::apply`]). Through a
//! remote ([`Remote::acquire_any`]), one fetch learns the state of every candidate, and then
//! every attempt is exactly one push with an expected old value, decided from the verified
//! tracking copy. A push that loses the race does not retry the contended issue: after a
//! random part of the lost push's own duration (so that the other losers of the same race
//! spread out), one fetch of the untried candidates' refs alone tells which of them moved
//! meanwhile, and the next push goes to one that did not. Every candidate is fetched and
//! verified again only when nothing else is left, and retried only if free again.
//! Nothing is pushed when no candidate is free.
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
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};
use crate::ledger::{settle, Ledger, Report};
use crate::remote::{Diverged, PushResult, Remote};
use crate::rules::{self, Claim, Outcome};
use crate::store::{Entry, Place, ARCHIVE_REF};

/// Every character a lease ref name may hold right after an issue id, in ASCII (see
/// [`Remote::fetch_scoped`]): the printable ones but space and `~ ^ : ? * [ \\`.
const LONGER: &str =
    "!\"#$%&'()+,-./0123456789;<=>@ABCDEFGHIJKLMNOPQRSTUVWXYZ]_`abcdefghijklmnopqrstuvwxyz{|}";

/// Past this many candidates, a remote claim learns their state by fetching every lease ref
/// of the remote (one refspec) rather than one refspec per candidate on the command line.
const MAX_REFSPECS: usize = 256;

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
    /// Fetches the remote's ledgers of `issues` in one `git fetch` and verifies what is new,
    /// as [`Remote::fetch_one`] does for one.
    ///
    /// Returns the newest verified entry of each issue (`None`: the remote has no such
    /// ledger), and the ledgers the remote rewound or rewrote (left out of the map).
    pub fn fetch_some(&self, issues: &[IssueId]) -> Result<(States, Vec<Diverged>)> {
        self.settled(|| self.fetch_some_once(issues), |(_, d)| !d.is_empty())
    }

    fn fetch_some_once(&self, issues: &[IssueId]) -> Result<(States, Vec<Diverged>)> {
        self.begin_claim();
        let store = self.ledger().store();
        let mut state = HashMap::with_capacity(issues.len());
        let mut diverged = Vec::new();
        if issues.is_empty() {
            return Ok((state, diverged));
        }
        if issues.len() > MAX_REFSPECS {
            let fetched = self.fetch_all_once()?;
            let tips: HashMap<&str, ObjectId> = fetched
                .verified
                .iter()
                .map(|(issue, tip)| (issue.as_str(), *tip))
                .collect();
            let on_remote: std::collections::HashSet<&str> =
                fetched.remote.iter().map(|(i, _)| i.as_str()).collect();
            let unseen: Vec<&str> = issues
                .iter()
                .map(IssueId::as_str)
                .filter(|issue| !tips.contains_key(issue))
                .collect();
            self.fetch_index_paths(&unseen);
            for issue in issues {
                let entry = match tips.get(issue.as_str()) {
                    Some(tip) => {
                        let mut entry = store.entry(issue.as_str(), *tip)?;
                        if !on_remote.contains(issue.as_str()) {
                            entry.place = Place::Archive;
                        }
                        Some(self.ledger().observe(entry))
                    }
                    None => self.archived_entry(issue, None)?,
                };
                state.insert(issue.clone(), entry);
            }
            let wanted: std::collections::HashSet<&str> =
                issues.iter().map(IssueId::as_str).collect();
            diverged = fetched
                .diverged
                .into_iter()
                .filter(|d| wanted.contains(d.issue.as_str()))
                .collect();
            return Ok((state, diverged));
        }
        self.forget_archive();
        // What was verified is read before the fetch (see `Remote::fetch_one`).
        let seen = issues
            .iter()
            .map(|issue| self.seen_tip(issue))
            .collect::<Result<Vec<_>>>()?;
        self.fetch_scoped(issues)?;
        let mut moves = Vec::new();
        let mut tips = Vec::with_capacity(issues.len());
        for (issue, seen) in issues.iter().zip(seen) {
            let fetched = store.tip_of(&self.incoming_ref(issue))?;
            let place = if fetched.is_some() {
                Place::Ref
            } else {
                Place::Archive
            };
            match self.judge_fetched(issue.as_str(), seen, fetched)? {
                Ok(tip) => {
                    if let Some(tip) = tip.filter(|t| Some(*t) != seen) {
                        moves.push((issue.as_str(), tip, seen));
                    }
                    tips.push((issue, tip, place));
                }
                Err(d) => diverged.push(d),
            }
        }
        self.track(&moves);
        // Never seen here, and not on the remote: the archive may have them. With
        // `lease.trustArchive`, the trees of the newest fold on their paths come in one fetch.
        let unseen: Vec<&str> = tips
            .iter()
            .filter(|(_, tip, _)| tip.is_none())
            .map(|(issue, _, _)| issue.as_str())
            .collect();
        self.fetch_index_paths(&unseen);
        for (issue, tip, place) in tips {
            let entry = match tip {
                Some(tip) => {
                    let mut entry = store.entry(issue.as_str(), tip)?;
                    entry.place = place;
                    Some(self.ledger().observe(entry))
                }
                // Never seen here, and not on the remote: the archive may have it.
                None => self.archived_entry(issue, None)?,
            };
            state.insert(issue.clone(), entry);
        }
        Ok((state, diverged))
    }

    /// Fetches the remote's ledgers of `issues` into the staging refs, in one `git fetch` that
    /// asks the remote for those refs alone, so that what it lists and sends does not grow with
    /// the number of ledgers it holds.
    ///
    /// An exact refspec fails the whole fetch when the remote lacks that ref (a never claimed
    /// issue), so each candidate is fetched by the pattern `refs/leases/<issue>*`, whose
    /// prefix protocol version 2 sends as the listing's `ref-prefix`: the remote lists only
    /// the refs whose names begin with it. Negative refspecs, `^refs/leases/<issue><c>*` for
    /// every character `c` a ref name may hold, then leave out the longer ids it also matches
    /// (`<issue>0`, `<issue>/x`), client-side, except where that would leave out another
    /// candidate (`<issue>0` among them); a longer id that slips through so (or continues with
    /// a non-ASCII character) is fetched into its own staging ref, which nothing reads without
    /// fetching it first. Without protocol version 2 (an older server), the remote lists
    /// every ref and the same refspecs pick the same ledgers. No automatic maintenance: one
    /// process less per claim.
    fn fetch_scoped(&self, issues: &[IssueId]) -> Result<()> {
        let incoming = self.incoming_prefix();
        let mut refspecs = Vec::with_capacity(issues.len() * (1 + LONGER.len()));
        for issue in issues {
            refspecs.push(format!("+{REF_PREFIX}{issue}*:{incoming}{issue}*"));
            for c in LONGER.chars() {
                // `@{` is never part of a ref name, nor of a refspec git accepts.
                if c == '{' && issue.as_str().ends_with('@') {
                    continue;
                }
                let longer = format!("{issue}{c}");
                // A negative refspec leaves a ref out of every pattern: never one that would
                // leave out another candidate.
                if issues.iter().any(|i| i.as_str().starts_with(&longer)) {
                    continue;
                }
                refspecs.push(format!("^{REF_PREFIX}{longer}*"));
            }
        }
        // The archive comes in the same exchange, by the same kind of pattern: a remote
        // without one is no error, and a claim of an issue whose ref it folded goes on from
        // the archived tip.
        // With `lease.trustArchive` and no fold verified here, the remote's newest fold alone
        // is read, when an issue has no ref there (`Remote::archived_tip`).
        let seen_archive = self.seen_archive()?;
        let whole_archive = !self.may_trust_newest_fold()?;
        if whole_archive {
            let archive = self.archive_incoming_ref();
            refspecs.push(format!("+{ARCHIVE_REF}*:{archive}*"));
            for c in LONGER.chars() {
                refspecs.push(format!("^{ARCHIVE_REF}{c}*"));
            }
        }
        let mut args = vec!["--quiet", "--no-tags", "--", self.target()];
        args.extend(refspecs.iter().map(String::as_str));
        let shown = format!(
            "git fetch {} {} (one refspec for each of {} candidates)",
            self.name(),
            refspecs[0],
            issues.len()
        );
        let out = self.fetch_configured(&["protocol.version=2"], &args, &shown)?;
        if !out.status.success() {
            return Err(Error::Transport {
                command: shown,
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        if whole_archive {
            self.keep_fetched_archive(seen_archive)?;
        }
        Ok(())
    }

    /// Returns the remote's tip of each of `issues` that it has, fetched as
    /// [`Remote::fetch_scoped`] does: one exchange that lists only those refs. Nothing is
    /// verified or recorded; this only tells which ledgers moved.
    fn remote_tips(&self, issues: &[IssueId]) -> Result<HashMap<String, ObjectId>> {
        let mut tips = HashMap::new();
        if issues.is_empty() {
            return Ok(tips);
        }
        self.fetch_scoped(issues)?;
        let store = self.ledger().store();
        for issue in issues {
            if let Some(tip) = store.tip_of(&self.incoming_ref(issue))? {
                tips.insert(issue.as_str().to_owned(), tip);
            }
        }
        Ok(tips)
    }

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
        let (mut state, mut diverged) = self.fetch_some(&candidates)?;
        let mut report = AnyReport::none(candidates.len(), order);
        // The candidates to try, in order. Those lost to a racer or moved on the remote since
        // they were verified are set aside: every candidate is read again only if nothing
        // else is free.
        let mut untried = plan(&candidates, &state, claim, now, order, rng);
        loop {
            // Once every candidate tried or read taken is spent, all are fetched again: a
            // claimer of an ordered queue that moves up frees the one it leaves.
            if untried.is_empty() && report.attempts > 0 {
                let (fresh, more) = self.fetch_some(&candidates)?;
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
}
