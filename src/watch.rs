//! A stream of lease events: every ledger commit as it appears, and the moment each live
//! lease's expiry passes.
//!
//! A [`Follower`] remembers the tip of every ledger it has seen and the state that tip
//! records. Given the ledger tips read later ([`Follower::update`]), it walks each moved ledger
//! back to the tip it knew and returns one [`WatchEvent`] per new commit, oldest first. Given
//! an instant ([`Follower::expire`]), it returns a synthesized `expired` event for each lease
//! that was live and whose expiry has passed by then, judged by [`rules::is_live`], the one
//! liveness rule. Expiry is computed, never written: nothing here writes to any repository.
//! An expiry that passed before a later commit (a release of the expired lease, a takeover)
//! comes before that commit's event, at the instant it happened.
//!
//! Time is passed in; nothing here reads the clock.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gix::ObjectId;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::lease::{Event, Lease};
use crate::rules;
use crate::store::{Entry, Store};
use crate::time::format_instant;

/// What a watch event reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A ledger commit recorded this event.
    Recorded(Event),
    /// A live lease's expiry passed (computed, not recorded).
    Expired,
}

impl Kind {
    /// Returns the event's name: a recorded event's, or `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Recorded(e) => e.as_str(),
            Kind::Expired => "expired",
        }
    }
}

/// One event of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// What happened.
    pub kind: Kind,
    /// When: the recorded event's time, or the expiry that passed.
    pub at: DateTime<Utc>,
    /// The ledger commit recording the event, or for an expiry the one recording the state
    /// that expired.
    pub entry: Entry,
}

impl WatchEvent {
    /// Returns the issue.
    pub fn issue(&self) -> &str {
        &self.entry.lease.issue
    }

    /// Whether this event matters to `holder` (`watch --mine`, `--holder`): its own claims
    /// and their ends (`holder` is the holder after the event), the expiry of its lease (the
    /// holder whose lease expired), a revoke or a takeover of it (`holder` is the holder
    /// before the event, `previous_holder`), and what it did to others' leases (`by`).
    pub fn concerns(&self, holder: &str) -> bool {
        let l = &self.entry.lease;
        match self.kind {
            Kind::Expired => l.holder.as_deref() == Some(holder),
            Kind::Recorded(_) => [&l.holder, &l.previous_holder, &l.by]
                .iter()
                .any(|h| h.as_deref() == Some(holder)),
        }
    }
}

/// The `--json` shape of a watch event (see `docs/JSON.md`).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct WatchView {
    /// The issue id.
    pub issue: String,
    /// The recorded event, or `expired`.
    pub event: &'static str,
    /// True for an event computed by the watcher (`expired`), false for a ledger commit.
    pub synthesized: bool,
    /// The token after the event (an expiry keeps it).
    pub token: u64,
    /// The holder after the event as recorded; for `expired`, the holder whose lease expired.
    pub holder: Option<String>,
    /// The holder before the event, when it changed or was cleared.
    pub previous_holder: Option<String>,
    /// Who acted, when not the holder.
    pub by: Option<String>,
    /// Why, when recorded.
    pub reason: Option<String>,
    /// When it happened.
    pub at: String,
    /// The tenure's start.
    pub acquired_at: Option<String>,
    /// The tenure's end as recorded.
    pub expires_at: Option<String>,
    /// The ledger commit (for `expired`, the one recording the state that expired).
    pub commit: String,
    /// The note attached to the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The task id attached to the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

impl From<&WatchEvent> for WatchView {
    fn from(e: &WatchEvent) -> WatchView {
        let l = &e.entry.lease;
        WatchView {
            issue: l.issue.clone(),
            event: e.kind.as_str(),
            synthesized: e.kind == Kind::Expired,
            token: l.token,
            holder: l.holder.clone(),
            previous_holder: l.previous_holder.clone(),
            by: l.by.clone(),
            reason: l.reason.clone(),
            at: format_instant(e.at),
            acquired_at: l.acquired_at.map(format_instant),
            expires_at: l.expires_at.map(format_instant),
            commit: e.entry.commit.to_string(),
            note: l.note.clone(),
            task: l.task.clone(),
        }
    }
}

/// What the follower knows of one ledger.
#[derive(Clone, Debug)]
struct Known {
    /// The newest entry seen.
    entry: Entry,
    /// Whether its lease is live and its expiry has not been reported yet.
    expiry_due: bool,
}

impl Known {
    /// Starts following `entry`, reporting its expiry only if it is live at `from`.
    fn new(entry: Entry, from: DateTime<Utc>) -> Known {
        let expiry_due = has_expiry(&entry.lease) && rules::is_live(entry.current(), from);
        Known { entry, expiry_due }
    }

    /// Returns the expiry event of the known state if it is due and the lease is no longer
    /// live at `now`, marking it reported.
    fn expired_by(&mut self, now: DateTime<Utc>) -> Option<WatchEvent> {
        if !self.expiry_due || rules::is_live(self.entry.current(), now) {
            return None;
        }
        self.expiry_due = false;
        let at = self.entry.lease.expires_at?;
        Some(WatchEvent {
            kind: Kind::Expired,
            at,
            entry: self.entry.clone(),
        })
    }

    /// Records `entry` as the newest, after the expiry of the previous state if that passed
    /// before it; returns the events in order.
    fn advance(&mut self, entry: Entry, events: &mut Vec<WatchEvent>) {
        events.extend(self.expired_by(entry.lease.at));
        events.push(WatchEvent {
            kind: Kind::Recorded(entry.lease.event),
            at: entry.lease.at,
            entry: entry.clone(),
        });
        *self = Known::new(entry.clone(), entry.lease.at);
    }
}

/// Whether `lease` records a holder with an expiry: a lease that can expire.
fn has_expiry(lease: &Lease) -> bool {
    lease.holder.is_some() && lease.expires_at.is_some()
}

/// Follows the ledgers whose issue starts with a prefix; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Follower {
    prefix: String,
    known: BTreeMap<String, Known>,
    /// Tips that could not be read, by issue: not tried again until they move.
    bad: BTreeMap<String, ObjectId>,
}

impl Follower {
    /// Starts following the ledgers `tips` (`(issue, tip)`) of `store` whose issue starts
    /// with `prefix`, as they are at `now`: no events for what is already recorded; the
    /// expiry of each lease live at `now` will be reported.
    pub fn start(
        store: &Store,
        tips: &[(String, ObjectId)],
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Follower> {
        let mut follower = Follower {
            prefix: prefix.to_owned(),
            ..Follower::default()
        };
        for (issue, tip) in tips.iter().filter(|(i, _)| i.starts_with(prefix)) {
            let entry = store.entry(issue, *tip)?;
            follower.known.insert(issue.clone(), Known::new(entry, now));
        }
        Ok(follower)
    }

    /// Starts following as [`Follower::start`] does, and returns the history since `since`:
    /// every event recorded at or after it and every expiry that passed from then to `now`,
    /// oldest first.
    pub fn replay(
        store: &Store,
        tips: &[(String, ObjectId)],
        prefix: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Follower, Vec<WatchEvent>)> {
        let mut follower = Follower {
            prefix: prefix.to_owned(),
            ..Follower::default()
        };
        let mut events = Vec::new();
        for (issue, tip) in tips.iter().filter(|(i, _)| i.starts_with(prefix)) {
            let mut history = store.history(issue, Some(*tip))?;
            history.reverse();
            let split = history.partition_point(|e| e.lease.at < since);
            let mut newer = history.split_off(split);
            let mut known = match history.pop() {
                Some(before) => Known::new(before, since),
                None => {
                    // The first event is at or after `since`.
                    let first = newer.remove(0);
                    events.push(WatchEvent {
                        kind: Kind::Recorded(first.lease.event),
                        at: first.lease.at,
                        entry: first.clone(),
                    });
                    Known::new(first.clone(), first.lease.at)
                }
            };
            for entry in newer {
                known.advance(entry, &mut events);
            }
            events.extend(known.expired_by(now));
            follower.known.insert(issue.clone(), known);
        }
        sort(&mut events);
        Ok((follower, events))
    }

    /// Takes in the ledger tips read now, `(issue, tip)`, and returns the events of every
    /// commit new since the last read, oldest first (with the expiries that passed before
    /// them). Ledgers missing from `tips` are forgotten. A ledger that cannot be read (a
    /// corrupt commit) is left where it was and its error returned, once per tip.
    pub fn update(
        &mut self,
        store: &Store,
        tips: &[(String, ObjectId)],
    ) -> (Vec<WatchEvent>, Vec<Error>) {
        let mut events = Vec::new();
        let mut errors = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (issue, tip) in tips.iter().filter(|(i, _)| i.starts_with(&self.prefix)) {
            seen.insert(issue.as_str());
            let old = self.known.get(issue);
            if old.is_some_and(|k| k.entry.commit == *tip) || self.bad.get(issue) == Some(tip) {
                continue;
            }
            let new = match new_entries(store, issue, *tip, old.map(|k| &k.entry)) {
                Ok(new) => new,
                Err(e) => {
                    self.bad.insert(issue.clone(), *tip);
                    errors.push(e);
                    continue;
                }
            };
            self.bad.remove(issue);
            let mut new = new.into_iter();
            let known = match self.known.get_mut(issue) {
                Some(known) => known,
                None => {
                    let Some(first) = new.next() else { continue };
                    events.push(WatchEvent {
                        kind: Kind::Recorded(first.lease.event),
                        at: first.lease.at,
                        entry: first.clone(),
                    });
                    let at = first.lease.at;
                    self.known
                        .entry(issue.clone())
                        .or_insert(Known::new(first, at))
                }
            };
            for entry in new {
                known.advance(entry, &mut events);
            }
        }
        self.known.retain(|issue, _| seen.contains(issue.as_str()));
        sort(&mut events);
        (events, errors)
    }

    /// Returns an `expired` event for every followed lease that was live, is not at `now`,
    /// and whose expiry was not reported yet; oldest first.
    pub fn expire(&mut self, now: DateTime<Utc>) -> Vec<WatchEvent> {
        let mut events: Vec<WatchEvent> = self
            .known
            .values_mut()
            .filter_map(|k| k.expired_by(now))
            .collect();
        sort(&mut events);
        events
    }

    /// Returns the earliest expiry still to be reported.
    pub fn next_expiry(&self) -> Option<DateTime<Utc>> {
        self.known
            .values()
            .filter(|k| k.expiry_due)
            .filter_map(|k| k.entry.lease.expires_at)
            .min()
    }

    /// Returns how many ledgers are followed.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Returns true if no ledger is followed.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }
}

/// Returns the entries of `issue`'s ledger from `tip` back to (not including) `known`,
/// oldest first. If the ledger no longer descends from `known` (a rewritten local ref), the
/// walk stops at the first entry older than it: time never runs backwards along a ledger.
fn new_entries(
    store: &Store,
    issue: &str,
    tip: ObjectId,
    known: Option<&Entry>,
) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut next = Some(tip);
    while let Some(commit) = next {
        if known.is_some_and(|k| k.commit == commit) {
            break;
        }
        let entry = store.entry(issue, commit)?;
        if known.is_some_and(|k| entry.lease.at < k.lease.at) {
            break;
        }
        next = entry.parent;
        out.push(entry);
    }
    out.reverse();
    Ok(out)
}

/// Sorts events by time, then by issue in natural order, keeping the order of one ledger's
/// events at the same instant (its own order, and an expiry before the event that followed
/// it).
fn sort(events: &mut [WatchEvent]) {
    events.sort_by(|a, b| {
        a.at.cmp(&b.at)
            .then_with(|| crate::issue::natural_cmp(&a.entry.lease.issue, &b.entry.lease.issue))
    });
}
