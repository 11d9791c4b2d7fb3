//! The legitimacy of one ledger step: the single judge of whether `next`, recorded on top of
//! `prev`, is a step the rules allow.
//!
//! Every reader that accepts history from elsewhere asks [`judge`]: `verify` (an audit),
//! `sync` and remote reads (a mirror or client taking a remote's new commits), and the server
//! hook (a push arriving). An audit judges each step at its own recorded time, as its author
//! saw it ([`Judgement::Recorded`]). A server judges a push at its own clock, with the
//! authenticated pusher as the only actor it believes ([`Judgement::Arrival`]): the data of a
//! push can say anything about who acted and when, so a step that needs a live lease, and every
//! takeover, is decided at the server's clock, and `by`, the holder, and an administrator's
//! rights are checked against who pushed. Nothing else in the crate restates these rules.

mod rule;

use chrono::{DateTime, Duration, Utc};

use crate::lease::{Event, Lease, Takeover};
use crate::liveness::{Current, LocalHost, ProcessState};
use crate::rules::is_live;
use crate::rules::signers::{self, AllowedSigners, Signed};
use crate::time::{format_instant, short_duration};
pub use rule::{Rule, Violation};

/// Who pushed, as a server established it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pusher {
    /// No identity is configured: who acted cannot be known.
    Unknown,
    /// Identity is configured but the push did not establish one (unsigned, bad signature,
    /// variable unset); the reason.
    Unauthenticated(String),
    /// The authenticated pusher.
    Known(String),
}

/// What a server knows when a push arrives.
#[derive(Clone, Debug)]
pub struct Arrival<'a> {
    /// The server's clock.
    pub now: DateTime<Utc>,
    /// How far a pushed event's time may be from `now`.
    pub max_skew: Duration,
    /// Who pushed.
    pub pusher: &'a Pusher,
    /// The identities that may revoke (`lease.admins`), each a whole identity.
    pub admins: &'a [String],
    /// Where the server stands (its boot and PID namespace), to see holder processes there.
    pub host: Option<&'a LocalHost>,
    /// With `lease.requireSignatures`: the allowed signers every step must be signed by.
    pub signers: Option<&'a AllowedSigners>,
}

/// What a reader knows when it takes history written elsewhere (a remote's new commits, a
/// mirror's, a ledger it audits): its own clock and what it can see of holder processes.
#[derive(Clone, Debug)]
pub struct Reading<'a> {
    /// The reader's clock.
    pub now: DateTime<Utc>,
    /// `lease.maxClockSkew`: an event dated more than twice this ahead of `now` (the server's
    /// allowance, and as much again for this reader's own clock) cannot have happened yet,
    /// whatever its author's clock said.
    pub max_skew: Duration,
    /// What the reader can see of holder processes on its own machine.
    pub host: Option<&'a LocalHost>,
    /// With `lease.requireSignatures`: the allowed signers every step must be signed by.
    pub signers: Option<&'a AllowedSigners>,
}

/// How a step is judged.
#[derive(Clone, Copy, Debug)]
pub enum Judgement<'a> {
    /// The rules alone: each step at its own recorded time, the recorded actors taken as
    /// written.
    Recorded,
    /// A reader taking history from elsewhere (`verify`, `sync`, remote reads): as
    /// [`Judgement::Recorded`], and nothing the reader can see contradicts (a step dated
    /// ahead of its clock beyond the skew; a takeover from a process it sees running).
    Reading(&'a Reading<'a>),
    /// A push arriving at a server: at the server's clock, with the pusher as the only actor,
    /// *and* at the step's own recorded time, as every reader will judge it afterwards.
    Arrival(&'a Arrival<'a>),
}

impl<'a> Judgement<'a> {
    /// Returns how a reader judges: by what it knows ([`Judgement::Reading`]) when it has a
    /// clock, else by the rules alone.
    pub fn reader(reading: Option<&'a Reading<'a>>) -> Judgement<'a> {
        reading.map_or(Judgement::Recorded, Judgement::Reading)
    }

    /// Returns the allowed signers every step must be signed by, when signatures are required.
    pub fn signers(&self) -> Option<&'a AllowedSigners> {
        match self {
            Judgement::Recorded => None,
            Judgement::Reading(r) => r.signers,
            Judgement::Arrival(a) => a.signers,
        }
    }

    /// Returns `lease.maxClockSkew`: how far a signed commit's committer time may be from
    /// its event's (the rules alone check no signature).
    pub fn max_skew(&self) -> Duration {
        match self {
            Judgement::Recorded => Duration::zero(),
            Judgement::Reading(Reading { max_skew, .. })
            | Judgement::Arrival(Arrival { max_skew, .. }) => *max_skew,
        }
    }
}

/// Judges `next` recorded on top of `prev` as [`judge`] does and, when `judgement` requires
/// signatures, also who signed it ([`crate::rules::signers::judge`]): what every walker of a
/// ledger asks of each step.
pub fn judge_signed(
    prev: Option<&Lease>,
    next: &Lease,
    signed: Option<&Signed>,
    judgement: Judgement<'_>,
) -> Vec<Violation> {
    let mut found = judge(prev, next, judgement);
    if let Some(list) = judgement.signers() {
        let unsigned = Signed::default();
        found.extend(signers::judge(
            prev,
            next,
            signed.unwrap_or(&unsigned),
            list,
            judgement.max_skew(),
        ));
    }
    found
}

/// Judges `next` recorded on top of `prev` (`None` for a ledger's first commit).
///
/// Returns every rule the step breaks; empty when it is legitimate. A step a server accepts
/// ([`Judgement::Arrival`]) is a step every reader accepts: an arrival is judged at the
/// server's clock and then at the step's own time, as an audit will judge it.
pub fn judge(prev: Option<&Lease>, next: &Lease, judgement: Judgement<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    match judgement {
        Judgement::Recorded => judge_at(prev, next, next.at, None, &mut found),
        Judgement::Reading(r) => {
            // A server takes events up to the skew ahead of its clock, and the reader's clock
            // may be as far behind it: only beyond both is a step implausible.
            let allowed = r.max_skew + r.max_skew;
            if next.at - r.now > allowed {
                found.push((
                    Rule::ClockSkew,
                    format!(
                        "the event is dated {}, more than {} ahead of this reader's clock {} (twice lease.maxClockSkew)",
                        format_instant(next.at),
                        short_duration(allowed),
                        format_instant(r.now)
                    ),
                ));
            }
            judge_at(prev, next, next.at, None, &mut found);
            if let Some(prev) = prev {
                check_seen_process(prev, next, r.host, &mut found);
            }
        }
        Judgement::Arrival(a) => {
            if let Pusher::Unauthenticated(why) = a.pusher {
                return vec![(Rule::Identity, why.clone())];
            }
            if (next.at - a.now).abs() > a.max_skew {
                found.push((
                    Rule::ClockSkew,
                    format!(
                        "the event time {} is more than {} from the server's clock {}",
                        format_instant(next.at),
                        short_duration(a.max_skew),
                        format_instant(a.now)
                    ),
                ));
            }
            judge_at(prev, next, a.now, Some(a), &mut found);
            if found.is_empty() {
                // Legitimate now; it must also be legitimate when it says it happened, or
                // every reader would refuse the ledger the server kept.
                judge_at(prev, next, next.at, Some(a), &mut found);
                for (_, detail) in &mut found {
                    detail.push_str(" (judged at the event's own time, as every reader will)");
                }
            }
            check_actor(prev, next, a.now, a, &mut found);
        }
    }
    found
}

/// Judges the shape and the transition of `next`, with liveness decided at `decided_at`, and
/// holder processes as `arrival`'s server sees them (as recorded without one).
fn judge_at(
    prev: Option<&Lease>,
    next: &Lease,
    decided_at: DateTime<Utc>,
    arrival: Option<&Arrival<'_>>,
    found: &mut Vec<Violation>,
) {
    check_shape(next, found);
    match prev {
        None => check_first(next, found),
        Some(prev) => check_transition(prev, next, decided_at, arrival, found),
    }
}

/// Refuses a takeover that says `prev`'s holder process is gone when the reader sees that
/// very process running on its own machine.
fn check_seen_process(
    prev: &Lease,
    next: &Lease,
    host: Option<&LocalHost>,
    found: &mut Vec<Violation>,
) {
    if next.takeover != Some(Takeover::ProcessGone) {
        return;
    }
    let Some(process) = prev.process.as_ref() else {
        return;
    };
    if host.is_some_and(|h| h.state(process) == ProcessState::Alive) {
        found.push((
            Rule::HolderChange,
            format!(
                "the takeover says {}'s process {} is gone, but it is running on this machine",
                prev.holder.as_deref().unwrap_or("nobody"),
                process.pid
            ),
        ));
    }
}

fn check_first(next: &Lease, found: &mut Vec<Violation>) {
    if next.event != Event::Acquire || next.token != 1 {
        found.push((
            Rule::FirstToken,
            format!(
                "a ledger must start with an acquire of token 1, not {} of token {}",
                next.event, next.token
            ),
        ));
    }
}

/// Returns true if `next` takes over from a holder process that `prev` recorded and that is
/// gone: as recorded, for an audit; only if the server establishes that the process is gone
/// ([`crate::liveness::ProcessState::Gone`]: its own boot and PID namespace, nothing hidden
/// from it), for an arrival.
fn process_gone_takeover(prev: &Lease, next: &Lease, arrival: Option<&Arrival<'_>>) -> bool {
    if prev.process.is_none() || next.takeover != Some(Takeover::ProcessGone) {
        return false;
    }
    match arrival {
        None => true,
        // What the server itself observes, as any reader on its machine would.
        Some(a) => a.host.is_some_and(|h| h.observe(prev).process_gone),
    }
}

fn check_transition(
    prev: &Lease,
    next: &Lease,
    decided_at: DateTime<Utc>,
    arrival: Option<&Arrival<'_>>,
    found: &mut Vec<Violation>,
) {
    if next.at < prev.at {
        found.push((
            Rule::TimeOrder,
            format!(
                "event at {} is earlier than the previous event at {}",
                format_instant(next.at),
                format_instant(prev.at)
            ),
        ));
    }
    // Only a new tenure moves the token; every other event keeps it.
    if next.event != Event::Acquire && next.token != prev.token {
        found.push((
            Rule::TokenStep,
            format!(
                "a {} keeps token {}, but records {}",
                next.event, prev.token, next.token
            ),
        ));
    }
    let step = Step {
        prev,
        next,
        // The record alone decides liveness here: a gone holder process counts only as the
        // recorded takeover says (an audit) or as this server sees it (an arrival), below.
        prev_live: is_live(Current::recorded(prev), decided_at),
        gone: process_gone_takeover(prev, next, arrival),
        arrival: arrival.is_some(),
        clock: if arrival.is_some_and(|a| a.now == decided_at) {
            " by the server's clock"
        } else {
            ""
        },
    };
    match next.event {
        Event::Acquire => step.check_new_tenure(found),
        Event::Reacquire | Event::Renew => step.check_same_tenure(found),
        Event::Release | Event::Complete | Event::Abandon | Event::Revoke => {
            step.check_ending(found)
        }
    }
}

/// One step from `prev` to `next`, with what its judgement decided of `prev`.
struct Step<'a> {
    prev: &'a Lease,
    next: &'a Lease,
    /// Whether `prev` was live when the step is decided.
    prev_live: bool,
    /// Whether the step takes over from a holder process that is gone.
    gone: bool,
    /// Whether a server judges the step as it arrives.
    arrival: bool,
    /// How a message says whose clock decided: the server's, or nothing.
    clock: &'static str,
}

impl Step<'_> {
    /// When `prev` expires, as a message says it.
    fn until(&self) -> String {
        self.prev
            .expires_at
            .map(format_instant)
            .unwrap_or_else(|| "no expiry".into())
    }

    /// Checks an acquire: a new tenure, over a lease no longer live, with the next token.
    fn check_new_tenure(&self, found: &mut Vec<Violation>) {
        let (prev, next, clock) = (self.prev, self.next, self.clock);
        if self.prev_live && prev.holder != next.holder && !self.gone {
            let unverifiable = next.takeover == Some(Takeover::ProcessGone)
                && prev.process.is_some()
                && self.arrival;
            if unverifiable {
                found.push((
                    Rule::Unverifiable,
                    format!(
                        "the takeover says {}'s process is gone, which this server cannot check (it ran on another machine or in another PID namespace, is hidden from the server, or is running); wait until {} or ask an administrator to revoke",
                        prev.holder.as_deref().unwrap_or("nobody"),
                        self.until()
                    ),
                ));
            } else {
                found.push((
                    Rule::HolderChange,
                    format!(
                        "{} took the lease while {} still held it (token {}, until {}{clock})",
                        next.holder.as_deref().unwrap_or("nobody"),
                        prev.holder.as_deref().unwrap_or("nobody"),
                        prev.token,
                        self.until()
                    ),
                ));
            }
        } else if self.prev_live && !self.gone {
            found.push((
                Rule::TokenStep,
                format!(
                    "a new tenure began while the same holder's tenure (token {}) was live; a re-acquire keeps the token",
                    prev.token
                ),
            ));
        }
        if Some(next.token) != prev.token.checked_add(1) {
            found.push((
                Rule::TokenStep,
                format!(
                    "a new tenure must take token {}, not {}",
                    prev.token.saturating_add(1),
                    next.token
                ),
            ));
        }
    }

    /// Checks a re-acquire or a renew: the same tenure, live, kept as it was.
    fn check_same_tenure(&self, found: &mut Vec<Violation>) {
        let (prev, next, clock) = (self.prev, self.next, self.clock);
        if prev.holder != next.holder {
            found.push((
                Rule::HolderChange,
                format!(
                    "a {} cannot change the holder from {} to {}",
                    next.event,
                    prev.holder.as_deref().unwrap_or("nobody"),
                    next.holder.as_deref().unwrap_or("nobody")
                ),
            ));
        } else if !self.prev_live {
            found.push((
                Rule::Event,
                format!(
                    "a {} of a lease that was not live{clock} (it expired at {})",
                    next.event,
                    self.until()
                ),
            ));
        } else if next.acquired_at != prev.acquired_at {
            found.push((
                Rule::Event,
                format!("a {} must keep the tenure's acquired_at", next.event),
            ));
        } else if prev.session.is_some() && next.session != prev.session {
            found.push((
                Rule::Event,
                format!("a {} must keep the tenure's session", next.event),
            ));
        }
    }

    /// Checks a release, a complete, an abandon or a revoke: of a held lease, recording its
    /// holder, by that holder while it is live (a revoke excepted).
    fn check_ending(&self, found: &mut Vec<Violation>) {
        let (prev, next, clock) = (self.prev, self.next, self.clock);
        match prev.holder.as_deref() {
            None => found.push((
                Rule::Event,
                format!("a {} of a lease that was already free", next.event),
            )),
            Some(h) => {
                if next.previous_holder.as_deref() != Some(h) {
                    found.push((
                        Rule::Event,
                        format!(
                            "a {} must record the previous holder {h}, not {}",
                            next.event,
                            next.previous_holder.as_deref().unwrap_or("nothing")
                        ),
                    ));
                }
                let by_other = next.by.as_deref().is_some_and(|b| b != h);
                if self.prev_live && by_other && !self.gone && next.event != Event::Revoke {
                    found.push((
                        Rule::HolderChange,
                        format!(
                            "{} freed the lease while {h} still held it (until {}{clock})",
                            next.by.as_deref().unwrap_or("someone"),
                            self.until()
                        ),
                    ));
                }
            }
        }
        if next.event == Event::Revoke && next.by.is_none() {
            found.push((Rule::Event, "a revoke must record who revoked".into()));
        }
    }
}

/// Checks, for an arrival, that the authenticated pusher is the one the step needs: the
/// holder for the holder's own steps, the new holder for a new tenure, anyone (named in `by`)
/// for freeing an expired lease, an administrator for a revoke. `by`, when present, is always
/// the pusher.
fn check_actor(
    prev: Option<&Lease>,
    next: &Lease,
    decided_at: DateTime<Utc>,
    arrival: &Arrival<'_>,
    found: &mut Vec<Violation>,
) {
    let Pusher::Known(who) = arrival.pusher else {
        return;
    };
    let who = who.as_str();
    let mismatch = |role: &str, named: Option<&str>| {
        (
            Rule::Identity,
            format!(
                "the commit records {} as {role}, but {who} pushed it (a holder is named as the server knows its pusher: `git config lease.holder {who}`)",
                named.unwrap_or("nobody")
            ),
        )
    };
    if next.event == Event::Revoke && !arrival.admins.iter().any(|a| a == who) {
        found.push((
            Rule::Admin,
            format!("{who} is not in lease.admins and may not revoke"),
        ));
        return;
    }
    if let Some(by) = next.by.as_deref() {
        if by != who {
            found.push(mismatch("acting (by)", Some(by)));
            return;
        }
    }
    let prev_holder = prev.and_then(|p| p.holder.as_deref());
    match next.event {
        Event::Acquire => {
            if next.holder.as_deref() != Some(who) {
                found.push(mismatch("the new holder", next.holder.as_deref()));
            }
        }
        Event::Reacquire | Event::Renew => {
            if prev_holder != Some(who) {
                found.push(mismatch("the holder", prev_holder));
            }
        }
        Event::Release | Event::Complete | Event::Abandon => {
            // A live lease is freed only by its holder; an expired one by whoever says so.
            let live = prev.is_some_and(|p| is_live(Current::recorded(p), decided_at));
            let gone = prev.is_some_and(|p| process_gone_takeover(p, next, Some(arrival)));
            let acting = if live && !gone {
                prev_holder
            } else {
                next.actor()
            };
            if acting != Some(who) {
                found.push(mismatch("acting", acting));
            }
        }
        // An administrator, checked above, named in `by`, checked above too.
        Event::Revoke => {}
    }
}

/// Checks what a single state must satisfy on its own.
fn check_shape(next: &Lease, found: &mut Vec<Violation>) {
    let holds = matches!(next.event, Event::Acquire | Event::Reacquire | Event::Renew);
    match (&next.holder, holds) {
        (None, true) => found.push((
            Rule::Event,
            format!("a {} must record a holder", next.event),
        )),
        (Some(h), false) => found.push((
            Rule::Event,
            format!("a {} frees the lease, but records holder {h}", next.event),
        )),
        _ => {}
    }
    if next.event.frees() && (next.acquired_at.is_some() || next.expires_at.is_some()) {
        found.push((
            Rule::Event,
            format!("a {} must clear acquired_at and expires_at", next.event),
        ));
    }
    if holds {
        match next.acquired_at {
            None => found.push((Rule::Event, "a held lease must record acquired_at".into())),
            Some(acquired) => {
                if acquired > next.at {
                    found.push((Rule::TimeOrder, "acquired_at is after the event".into()));
                }
                if next.event == Event::Acquire && acquired != next.at {
                    found.push((
                        Rule::TimeOrder,
                        "a new tenure's acquired_at must be the time of its acquire".into(),
                    ));
                }
            }
        }
        if next.expires_at.is_some_and(|e| e <= next.at) {
            found.push((
                Rule::TimeOrder,
                "expires_at must be after the event that set it".into(),
            ));
        }
    }
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
