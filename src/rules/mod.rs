//! The lease rules, as pure functions of (current state, request, `now`).
//!
//! Nothing here reads the clock or touches git: the local ledger, the remote ledger and the
//! tests all call the same functions, so the rules exist exactly once. [`is_live`] is *the*
//! definition of liveness; everything else asks it.

pub mod archive;
#[cfg(test)]
mod fixtures;
pub mod queue;
pub mod signers;
pub mod step;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::holder::Holder;
use crate::issue::IssueId;
use crate::lease::{Event, Lease, Takeover};
pub use crate::liveness::{Current, Observation};
use crate::remark::Remark;
use crate::time::Ttl;

/// Returns true if and only if the lease has a holder, has not expired at `now`, and its
/// reader did not see the holder's process gone.
///
/// A lease is live iff it has a holder, (no expiry, or `now < expires_at`), and its holder
/// process was not seen gone. This is the one definition of liveness in git-lease; expiry is
/// a filter applied when reading, never something written. What the reader observed is an
/// input, never part of the record: a reader on the holder's machine that found the holder
/// process gone ([`Observation::process_gone`], see [`crate::liveness`]) does not count the
/// lease as live.
pub fn is_live(current: Current<'_>, now: DateTime<Utc>) -> bool {
    current.lease.holder.is_some()
        && !current.seen.process_gone
        && current.lease.expires_at.is_none_or(|expiry| now < expiry)
}

/// Who asks: a holder name and, for a lease taken with `--session`, the session secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credentials<'a> {
    /// The holder.
    pub holder: &'a Holder,
    /// The session secret, if the caller has one.
    pub secret: Option<&'a str>,
}

impl<'a> From<&'a Holder> for Credentials<'a> {
    fn from(holder: &'a Holder) -> Self {
        Credentials {
            holder,
            secret: None,
        }
    }
}

/// Returns true if `secret` is good enough for `lease`: always without a session, and only
/// the session's own secret with one.
fn proves_session(lease: &Lease, secret: Option<&str>) -> bool {
    lease
        .session
        .as_deref()
        .is_none_or(|stored| crate::session::matches(stored, secret))
}

/// Returns the live holder at `now`, if any.
pub fn live_holder<'a>(current: Current<'a>, now: DateTime<Utc>) -> Option<&'a str> {
    if is_live(current, now) {
        current.lease.holder.as_deref()
    } else {
        None
    }
}

/// What an operation answered. The names are the `outcome` values of `--json` output.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The caller holds the lease now (a new tenure, or an idempotent re-acquire).
    Acquired,
    /// Someone else holds the lease; nothing changed.
    Held,
    /// The caller's lease was extended.
    Renewed,
    /// The caller is not the live holder; nothing changed.
    NotHolder,
    /// The lease was freed; its token is kept.
    Released,
    /// An administrator freed the lease; its token is kept.
    Revoked,
    /// Nothing was held, so there was nothing to release; nothing changed. A success.
    NotHeld,
    /// The caller is the holder by name, but the lease was taken with a session and the
    /// session secret is missing or wrong; nothing changed.
    WrongSecret,
    /// Not taken: another issue of the same all-or-none claim was refused; nothing changed.
    Skipped,
}

impl Outcome {
    /// Returns the `--json` name of the outcome.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Held => "held",
            Outcome::Renewed => "renewed",
            Outcome::NotHolder => "not_holder",
            Outcome::Released => "released",
            Outcome::Revoked => "revoked",
            Outcome::NotHeld => "not_held",
            Outcome::WrongSecret => "wrong_secret",
            Outcome::Skipped => "skipped",
        }
    }

    /// Returns true for outcomes that refuse the caller (exit code 3 on the command line).
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            Outcome::Held | Outcome::NotHolder | Outcome::WrongSecret | Outcome::Skipped
        )
    }
}

/// A request to hold an issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Who claims.
    pub holder: Holder,
    /// How long the claim lasts from now.
    pub ttl: Ttl,
    /// Free text stored with the claim, within its bound.
    pub note: Option<Remark>,
    /// An external task id stored with the claim, within its bound.
    pub task: Option<Remark>,
    /// For a new tenure: the hash of a new session secret (see [`crate::session`]).
    pub session: Option<String>,
    /// The secret of the session that already holds the lease, for an idempotent re-acquire.
    pub secret: Option<String>,
    /// The process that will hold the lease, for local liveness.
    pub process: Option<crate::liveness::HolderProcess>,
}

impl Claim {
    /// Returns a claim by `holder` for `ttl`, without note, task, session or process.
    pub fn new(holder: Holder, ttl: Ttl) -> Claim {
        Claim {
            holder,
            ttl,
            note: None,
            task: None,
            session: None,
            secret: None,
            process: None,
        }
    }
}

/// The decision of one rule: what to answer, and the state to record if anything changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// What the operation answers.
    pub outcome: Outcome,
    /// The state to commit, or `None` when nothing is written.
    pub next: Option<Lease>,
}

impl Transition {
    fn answer(outcome: Outcome) -> Transition {
        Transition {
            outcome,
            next: None,
        }
    }

    /// Records `next` unless it is the same state as `current` (nothing to write then).
    fn write(outcome: Outcome, current: Option<Current<'_>>, next: Lease) -> Transition {
        let changed = current.is_none_or(|c| !c.lease.same_state(&next));
        Transition {
            outcome,
            next: changed.then_some(next),
        }
    }
}

/// Returns the instant a decision on top of `current` is made at: `now`, or the time of the
/// ledger's last event if `now` is earlier (a clock behind another writer's). Time never
/// runs backwards along a ledger, so every recorded step stays in order.
pub fn ledger_time(current: Option<Current<'_>>, now: DateTime<Utc>) -> DateTime<Utc> {
    current.map_or(now, |c| now.max(c.lease.at))
}

/// Returns why the holder of the current lease, which is not live at `now`, lost it.
fn takeover_reason(current: Current<'_>, now: DateTime<Utc>) -> Takeover {
    let expired = current.lease.expires_at.is_some_and(|e| now >= e);
    if current.seen.process_gone && !expired {
        Takeover::ProcessGone
    } else {
        Takeover::Expired
    }
}

/// Decides an acquire.
///
/// - Not live (free, released, expired, its holder process gone) or never seen: a new tenure
///   with token = previous + 1.
/// - Live and held by the claimant: idempotent; same token and `acquired_at`, fresh expiry
///   ([`Outcome::WrongSecret`], nothing written, if the tenure's session secret is not given).
/// - Live and held by someone else: [`Outcome::Held`], nothing written.
pub fn acquire(
    issue: &IssueId,
    current: Option<Current<'_>>,
    claim: &Claim,
    now: DateTime<Utc>,
) -> Transition {
    let now = ledger_time(current, now);
    match current {
        Some(c) if is_live(c, now) => {
            let lease = c.lease;
            if lease.holder.as_deref() == Some(claim.holder.as_str()) {
                if !proves_session(lease, claim.secret.as_deref()) {
                    return Transition::answer(Outcome::WrongSecret);
                }
                let mut next = lease.clone();
                next.takeover = None;
                if next.session.is_none() {
                    next.session = claim.session.as_deref().map(Box::from);
                }
                if claim.process.is_some() {
                    next.process = claim.process.clone().map(Box::new);
                }
                next.event = Event::Reacquire;
                next.at = now;
                next.expires_at = claim.ttl.expiry_from(now);
                next.previous_holder = None;
                next.by = None;
                next.reason = None;
                if claim.note.is_some() {
                    next.note = claim.note.as_deref().map(Box::from);
                }
                if claim.task.is_some() {
                    next.task = claim.task.as_deref().map(Box::from);
                }
                Transition::write(Outcome::Acquired, current, next)
            } else {
                Transition::answer(Outcome::Held)
            }
        }
        _ => {
            let token = current.map_or(0, |c| c.lease.token) + 1;
            let expiry = claim.ttl.expiry_from(now);
            let mut next = Lease::tenure(issue, &claim.holder, token, now, expiry);
            // An acquire over a tenure that still records a holder is a takeover: say whose
            // and why.
            next.previous_holder = current.and_then(|c| c.lease.holder.as_deref().map(Box::from));
            next.takeover = current
                .filter(|c| c.lease.holder.is_some())
                .map(|c| takeover_reason(c, now));
            next.note = claim.note.as_deref().map(Box::from);
            next.task = claim.task.as_deref().map(Box::from);
            next.session = claim.session.as_deref().map(Box::from);
            next.process = claim.process.clone().map(Box::new);
            Transition::write(Outcome::Acquired, current, next)
        }
    }
}

/// Decides an all-or-none claim of several issues, each given with its current state.
///
/// Returns one transition per issue: the acquires, if every issue can be taken; otherwise
/// nothing is written, the refused issues say why and the others are [`Outcome::Skipped`].
pub fn acquire_all(
    claims: &[(&IssueId, Option<Current<'_>>)],
    claim: &Claim,
    now: DateTime<Utc>,
) -> Vec<Transition> {
    let decided: Vec<Transition> = claims
        .iter()
        .map(|(issue, current)| acquire(issue, *current, claim, now))
        .collect();
    if decided.iter().all(|t| t.outcome == Outcome::Acquired) {
        return decided;
    }
    decided
        .into_iter()
        .map(|t| match t.outcome {
            Outcome::Acquired => Transition::answer(Outcome::Skipped),
            refused => Transition::answer(refused),
        })
        .collect()
}

/// Decides a renew: only the live holder may extend; same token, expiry from `ttl`.
pub fn renew<'a>(
    current: Option<Current<'_>>,
    who: impl Into<Credentials<'a>>,
    ttl: Ttl,
    now: DateTime<Utc>,
) -> Transition {
    let who = who.into();
    let now = ledger_time(current, now);
    match current {
        Some(c) if live_holder(c, now) == Some(who.holder.as_str()) => {
            let lease = c.lease;
            if !proves_session(lease, who.secret) {
                return Transition::answer(Outcome::WrongSecret);
            }
            let mut next = lease.clone();
            next.event = Event::Renew;
            next.at = now;
            next.expires_at = ttl.expiry_from(now);
            next.takeover = None;
            next.previous_holder = None;
            next.by = None;
            next.reason = None;
            Transition::write(Outcome::Renewed, current, next)
        }
        _ => Transition::answer(Outcome::NotHolder),
    }
}

/// One tenure as its holder knows it: the holder, the token, when it began and its session.
///
/// A revoke followed by a new acquire begins another tenure, even under the same holder name,
/// and a tenure without a session can be renewed or released by its holder's name alone. A
/// holder that must act only on the tenure it began (`run`) names it: [`renew_tenure`] and
/// [`release_tenure`] refuse any other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The holder.
    pub holder: String,
    /// The fencing token of the tenure.
    pub token: u64,
    /// When it began.
    pub acquired_at: DateTime<Utc>,
    /// The hash of its session secret, if it has one.
    pub session: Option<String>,
}

impl Tenure {
    /// Returns the tenure `lease` records, or `None` for a free lease.
    pub fn of(lease: &Lease) -> Option<Tenure> {
        Some(Tenure {
            holder: lease.holder.clone()?,
            token: lease.token,
            acquired_at: lease.acquired_at?,
            session: lease.session.as_deref().map(str::to_owned),
        })
    }

    /// Returns true if `lease` records this tenure (live or not).
    pub fn is_recorded_in(&self, lease: &Lease) -> bool {
        lease.holder.as_deref() == Some(self.holder.as_str())
            && lease.token == self.token
            && lease.acquired_at == Some(self.acquired_at)
            && lease.session.as_deref() == self.session.as_deref()
    }
}

/// Decides a renew of `tenure` only: as [`renew`], and [`Outcome::NotHolder`] (nothing
/// written) when the lease records no longer that tenure but another, or none.
pub fn renew_tenure<'a>(
    current: Option<Current<'_>>,
    tenure: &Tenure,
    who: impl Into<Credentials<'a>>,
    ttl: Ttl,
    now: DateTime<Utc>,
) -> Transition {
    match current {
        Some(c) if tenure.is_recorded_in(c.lease) => renew(current, who, ttl, now),
        _ => Transition::answer(Outcome::NotHolder),
    }
}

/// Decides a release (or complete, or abandon) of `tenure` only: as [`release`] while the
/// lease records that tenure or is free ([`Outcome::NotHeld`]), and [`Outcome::NotHolder`]
/// (nothing written) when it records another tenure, live or not: that one is not the
/// caller's to end.
pub fn release_tenure<'a>(
    issue: &IssueId,
    current: Option<Current<'_>>,
    tenure: &Tenure,
    who: impl Into<Credentials<'a>>,
    ending: Ending,
    now: DateTime<Utc>,
) -> Transition {
    match current {
        Some(c) if c.lease.holder.is_some() && !tenure.is_recorded_in(c.lease) => {
            Transition::answer(Outcome::NotHolder)
        }
        _ => release(issue, current, who, ending, now),
    }
}

/// How a tenure is ended by its holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// `release`: the holder frees the lease.
    Release,
    /// `complete`: the work is done.
    Complete,
    /// `abandon`: the work is given up.
    Abandon,
}

impl Ending {
    fn event(self) -> Event {
        match self {
            Ending::Release => Event::Release,
            Ending::Complete => Event::Complete,
            Ending::Abandon => Event::Abandon,
        }
    }
}

/// Decides a release (or complete, or abandon).
///
/// - Held live by the caller, or no longer live (anyone may clear an expired lease, or one
///   whose holder process is gone): freed, token kept ([`Outcome::WrongSecret`], nothing
///   written, if the caller's live tenure has a session and its secret is not given).
/// - Nothing held (free, or never leased): [`Outcome::NotHeld`], a success that writes nothing.
/// - Held live by someone else: [`Outcome::NotHolder`], nothing written.
pub fn release<'a>(
    issue: &IssueId,
    current: Option<Current<'_>>,
    who: impl Into<Credentials<'a>>,
    ending: Ending,
    now: DateTime<Utc>,
) -> Transition {
    let who = who.into();
    let holder = who.holder.as_str();
    let now = ledger_time(current, now);
    let Some(c) = current else {
        return Transition::answer(Outcome::NotHeld);
    };
    let lease = c.lease;
    let Some(previous) = lease.holder.as_deref() else {
        return Transition::answer(Outcome::NotHeld);
    };
    let live = is_live(c, now);
    if live && previous != holder {
        return Transition::answer(Outcome::NotHolder);
    }
    if live && !proves_session(lease, who.secret) {
        return Transition::answer(Outcome::WrongSecret);
    }
    let mut next = Lease::freed(issue, ending.event(), now, lease.token);
    next.previous_holder = Some(previous.into());
    if previous != holder {
        next.by = Some(holder.into());
        // Freeing someone else's lease is legitimate only because it is no longer live:
        // record why, as an acquire over it would.
        next.takeover = Some(takeover_reason(c, now));
    }
    Transition::write(Outcome::Released, current, next)
}

/// Decides a revoke: an administrator frees a lease, live or not, keeping the token.
pub fn revoke(
    issue: &IssueId,
    current: Option<Current<'_>>,
    by: &Holder,
    reason: &Remark,
    now: DateTime<Utc>,
) -> Transition {
    let now = ledger_time(current, now);
    let Some(Current { lease, .. }) = current else {
        return Transition::answer(Outcome::NotHeld);
    };
    let Some(previous) = lease.holder.as_deref() else {
        return Transition::answer(Outcome::NotHeld);
    };
    let mut next = Lease::freed(issue, Event::Revoke, now, lease.token);
    next.previous_holder = Some(previous.into());
    next.by = Some(by.to_string().into());
    next.reason = Some(reason.as_str().into());
    Transition::write(Outcome::Revoked, current, next)
}

/// Why a fencing check failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FenceFailure {
    /// No tenure is live.
    NotLive {
        /// The last token issued, if the issue was ever leased.
        last_token: Option<u64>,
    },
    /// A tenure is live but with another token.
    StaleToken {
        /// The token of the live tenure.
        current: u64,
        /// Its holder.
        holder: String,
    },
    /// The token matches but the holder does not.
    WrongHolder {
        /// The live holder.
        holder: String,
    },
}

impl std::fmt::Display for FenceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FenceFailure::NotLive {
                last_token: Some(t),
            } => write!(f, "no tenure is live (last token {t})"),
            FenceFailure::NotLive { last_token: None } => f.write_str("the issue was never leased"),
            FenceFailure::StaleToken { current, holder } => write!(
                f,
                "the live tenure has token {current} (held by {})",
                crate::text::printable(holder)
            ),
            FenceFailure::WrongHolder { holder } => write!(
                f,
                "the live tenure is held by {}",
                crate::text::printable(holder)
            ),
        }
    }
}

/// The fencing check: succeeds only if `token` is the live tenure's (and `holder` its holder).
pub fn check(
    current: Option<Current<'_>>,
    token: u64,
    holder: Option<&str>,
    now: DateTime<Utc>,
) -> Result<(), FenceFailure> {
    let Some(c) = current else {
        return Err(FenceFailure::NotLive { last_token: None });
    };
    let lease = c.lease;
    let Some(live) = live_holder(c, now) else {
        return Err(FenceFailure::NotLive {
            last_token: Some(lease.token),
        });
    };
    if lease.token != token {
        return Err(FenceFailure::StaleToken {
            current: lease.token,
            holder: live.to_owned(),
        });
    }
    if holder.is_some_and(|h| h != live) {
        return Err(FenceFailure::WrongHolder {
            holder: live.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
