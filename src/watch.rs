//! A stream of lease events: every ledger commit as it appears, and the moment each live
//! lease's expiry passes.
//!
//! A [`Follower`] remembers the tip of every ledger it has seen, when that tip's event
//! happened, and the expiry still to report if its lease is live: a few words per ledger, not
//! the record, which is read again from its (immutable) commit when an event needs it. It
//! starts from the listing's rule ([`crate::listing::each`]: the list cache's records where
//! they hold the exact tip, objects otherwise). Given the ledger tips read later, every one
//! ([`Follower::update`]) or only those that moved ([`Follower::update_moved`], what
//! [`crate::store::Store::scan`] finds), it walks each moved ledger back to the tip it knew and
//! returns one [`WatchEvent`] per new commit, oldest first; a ledger that moved twice between
//! two reads gives both events. Given an instant ([`Follower::expire`]), it returns a
//! synthesized `expired` event for each lease that was live and whose expiry has passed by
//! then, judged by [`rules::is_live`], the one liveness rule. The expiries due are kept in a
//! heap, soonest first, so the next one is found without looking at every ledger; an entry of
//! a ledger that moved on meanwhile is dropped when it comes up. Expiry is computed, never
//! written: nothing here writes to any repository. An expiry that passed before a later commit
//! (a release of the expired lease, a takeover) comes before that commit's event, at the
//! instant it happened.
//!
//! Time is passed in; nothing here reads the clock.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

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
            Kind::Recorded(_) => [
                l.holder.as_deref(),
                l.previous_holder.as_deref(),
                l.by.as_deref(),
            ]
            .contains(&Some(holder)),
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
            previous_holder: l.previous_holder.as_deref().map(str::to_owned),
            by: l.by.as_deref().map(str::to_owned),
            reason: l.reason.as_deref().map(str::to_owned),
            at: format_instant(e.at),
            acquired_at: l.acquired_at.map(format_instant),
            expires_at: l.expires_at.map(format_instant),
            commit: e.entry.commit.to_string(),
            note: l.note.as_deref().map(str::to_owned),
            task: l.task.as_deref().map(str::to_owned),
        }
    }
}

/// What the follower keeps of one ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Known {
    /// The newest commit seen.
    tip: ObjectId,
    /// When its event happened.
    at: DateTime<Utc>,
    /// The expiry of its lease, while that lease is live and its expiry not yet reported.
    expiry: Option<DateTime<Utc>>,
}

impl Known {
    /// Starts following `entry`, reporting its expiry only if it is live at `from`.
    fn new(entry: &Entry, from: DateTime<Utc>) -> Known {
        let due = has_expiry(&entry.lease) && rules::is_live(entry.current(), from);
        Known {
            tip: entry.commit,
            at: entry.lease.at,
            expiry: entry.lease.expires_at.filter(|_| due),
        }
    }
}

/// Returns the `expired` event of `entry` (the state a [`Known`] followed, whose expiry was
/// due) if its lease is no longer live at `now`.
fn expired_by(entry: &Entry, now: DateTime<Utc>) -> Option<WatchEvent> {
    if rules::is_live(entry.current(), now) {
        return None;
    }
    Some(WatchEvent {
        kind: Kind::Expired,
        at: entry.lease.expires_at?,
        entry: entry.clone(),
    })
}

/// The event `entry` records.
fn recorded(entry: Entry) -> WatchEvent {
    WatchEvent {
        kind: Kind::Recorded(entry.lease.event),
        at: entry.lease.at,
        entry,
    }
}

/// Whether `lease` records a holder with an expiry: a lease that can expire.
fn has_expiry(lease: &Lease) -> bool {
    lease.holder.is_some() && lease.expires_at.is_some()
}

/// A due expiry, soonest first: its instant, the issue, and the tip whose lease it ends.
type Due = Reverse<(DateTime<Utc>, Box<str>, ObjectId)>;

/// How many stale entries the heap of expiries may hold beyond twice the due ones before it is
/// rebuilt from what is followed.
const STALE_SLACK: usize = 1024;

/// Follows the ledgers whose issue starts with a prefix; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Follower {
    prefix: String,
    known: HashMap<Box<str>, Known>,
    /// The expiries due, soonest first; stale entries (a ledger that moved on, an expiry
    /// reported) are dropped when they reach the top.
    due: BinaryHeap<Due>,
    /// How many followed ledgers have an expiry due.
    live: usize,
    /// Tips that could not be read, by issue: not tried again until they move.
    bad: BTreeMap<String, ObjectId>,
    /// The archive of the refs followed ([`Follower::with_archive`]).
    archive: Option<String>,
}

impl Follower {
    fn new(prefix: &str) -> Follower {
        Follower {
            prefix: prefix.to_owned(),
            ..Follower::default()
        }
    }

    /// Starts following the ledgers `tips` (`(issue, tip)`, every ref under `namespace` of
    /// `store`, sorted by issue) whose issue starts with `prefix`, as they are at `now`: no
    /// events for what is already recorded; the expiry of each lease live at `now` will be
    /// reported. The tips are read as a listing reads them ([`crate::listing::each`]), all of
    /// them, so that the list cache stays whole.
    pub fn start(
        store: &Store,
        namespace: &str,
        tips: Vec<(String, ObjectId)>,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Follower> {
        let mut follower = Follower::new(prefix);
        crate::listing::each(store, namespace, tips, |entry| {
            if entry.lease.issue.starts_with(prefix) {
                follower.set(&entry.lease.issue, Known::new(&entry, now));
            }
        })?;
        Ok(follower)
    }

    /// Starts following as [`Follower::start`] does, and returns the history since `since`:
    /// every event recorded at or after it and every expiry that passed from then to `now`,
    /// oldest first. Only the ledgers whose tip is at or after `since` are read back.
    pub fn replay(
        store: &Store,
        namespace: &str,
        tips: Vec<(String, ObjectId)>,
        prefix: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Follower, Vec<WatchEvent>)> {
        let mut follower = Follower::new(prefix);
        let mut events = Vec::new();
        let mut recent = Vec::new();
        crate::listing::each(store, namespace, tips, |entry| {
            if !entry.lease.issue.starts_with(prefix) {
                return;
            }
            if entry.lease.at >= since {
                recent.push((entry.lease.issue.clone(), entry.commit));
                return;
            }
            let mut known = Known::new(&entry, since);
            if known.expiry.is_some() {
                if let Some(expired) = expired_by(&entry, now) {
                    events.push(expired);
                    known.expiry = None;
                }
            }
            follower.set(&entry.lease.issue, known);
        })?;
        for (issue, tip) in recent {
            let mut history = store.history(&issue, Some(tip))?;
            history.reverse();
            let split = history.partition_point(|e| e.lease.at < since);
            let newer = history.split_off(split);
            let mut newer = newer.into_iter();
            let (known, previous) = match history.pop() {
                Some(before) => (Known::new(&before, since), before),
                None => {
                    // The first event is at or after `since`.
                    let Some(first) = newer.next() else { continue };
                    events.push(recorded(first.clone()));
                    (Known::new(&first, first.lease.at), first)
                }
            };
            let mut errors = Vec::new();
            let (mut known, last) = advance(
                store,
                &issue,
                known,
                Some(previous),
                newer,
                &mut events,
                &mut errors,
            );
            if let Some(e) = errors.into_iter().next() {
                return Err(e);
            }
            if let (Some(_), Some(last)) = (known.expiry, last) {
                if let Some(expired) = expired_by(&last, now) {
                    events.push(expired);
                    known.expiry = None;
                }
            }
            follower.set(&issue, known);
        }
        sort(&mut events);
        Ok((follower, events))
    }

    /// Takes in every ledger tip read now, `(issue, tip)`, and returns the events of every
    /// commit new since the last read, oldest first (with the expiries that passed before
    /// them). Ledgers missing from `tips` are forgotten. A ledger that cannot be read (a
    /// corrupt commit) is left where it was and its error returned, once per tip.
    pub fn update(
        &mut self,
        store: &Store,
        tips: &[(String, ObjectId)],
    ) -> (Vec<WatchEvent>, Vec<Error>) {
        let (events, errors) = self.update_moved(store, tips);
        let listed: HashSet<&str> = tips.iter().map(|(issue, _)| issue.as_str()).collect();
        let gone: Vec<Box<str>> = self
            .known
            .keys()
            .filter(|issue| !listed.contains(issue.as_ref()))
            .cloned()
            .collect();
        for issue in gone {
            self.forget(&issue);
        }
        (events, errors)
    }

    /// Takes in the tips of the ledgers that may have moved, `(issue, tip)`, every other ledger
    /// being where it was, and returns the events of every commit new since the last read, as
    /// [`Follower::update`] does; a ledger not followed yet is one that appeared.
    pub fn update_moved(
        &mut self,
        store: &Store,
        moved: &[(String, ObjectId)],
    ) -> (Vec<WatchEvent>, Vec<Error>) {
        let mut events = Vec::new();
        let mut errors = Vec::new();
        for (issue, tip) in moved {
            if issue.starts_with(&self.prefix) {
                self.follow(store, issue, *tip, &mut events, &mut errors);
            }
        }
        sort(&mut events);
        (events, errors)
    }

    /// Reads a ledger that appears where `archive` (the archive ref of the refs followed)
    /// records it as revived from its archived tip: what came before that tip was reported
    /// before the fold, so only what follows it is new.
    pub fn with_archive(mut self, archive: &str) -> Follower {
        self.archive = Some(archive.to_owned());
        self
    }

    /// What `issue`'s archived tip says, if the archive followed records one (an archive
    /// that cannot be read records nothing here; `verify` tells what is wrong with it).
    fn archived(&self, store: &Store, issue: &str) -> Option<Known> {
        let fold = store.tip_of(self.archive.as_deref()?).ok()??;
        let tip = store.archived_in(&store.fold(fold).ok()?, issue).ok()??;
        let entry = store.entry(issue, tip).ok()?;
        Some(Known::new(&entry, entry.lease.at))
    }

    /// Follows `issue` to `tip`, adding the events of its new commits.
    fn follow(
        &mut self,
        store: &Store,
        issue: &str,
        tip: ObjectId,
        events: &mut Vec<WatchEvent>,
        errors: &mut Vec<Error>,
    ) {
        let followed = self.known.get(issue).copied();
        // A ledger that appears may be one revived from the archive: read on from there.
        let old = followed.or_else(|| self.archived(store, issue));
        if old.is_some_and(|k| k.tip == tip) || self.bad.get(issue) == Some(&tip) {
            if let (None, Some(known)) = (followed, old) {
                self.set(issue, known);
            }
            return;
        }
        let new = match new_entries(store, issue, tip, old.as_ref()) {
            Ok(new) => new,
            Err(e) => {
                self.bad.insert(issue.to_owned(), tip);
                errors.push(e);
                return;
            }
        };
        self.bad.remove(issue);
        let mut new = new.into_iter();
        let (known, previous) = match old {
            Some(known) => (known, None),
            None => {
                let Some(first) = new.next() else { return };
                events.push(recorded(first.clone()));
                (Known::new(&first, first.lease.at), Some(first))
            }
        };
        let (known, _) = advance(store, issue, known, previous, new, events, errors);
        self.set(issue, known);
    }

    /// Records `known` as what is followed of `issue`, its expiry (if due) in the heap.
    fn set(&mut self, issue: &str, known: Known) {
        let before = self.known.insert(issue.into(), known);
        if before.is_some_and(|k| k.expiry.is_some()) {
            self.live -= 1;
        }
        if let Some(at) = known.expiry {
            self.live += 1;
            self.due.push(Reverse((at, issue.into(), known.tip)));
            if self.due.len() > 2 * self.live + STALE_SLACK {
                self.rebuild_due();
            }
        }
    }

    /// Stops following `issue`.
    fn forget(&mut self, issue: &str) {
        if self.known.remove(issue).is_some_and(|k| k.expiry.is_some()) {
            self.live -= 1;
        }
    }

    /// Rebuilds the heap of expiries from what is followed, without its stale entries.
    fn rebuild_due(&mut self) {
        self.due = self
            .known
            .iter()
            .filter_map(|(issue, k)| k.expiry.map(|at| Reverse((at, issue.clone(), k.tip))))
            .collect();
    }

    /// Whether a heap entry is still what is followed: the ledger at that tip, the expiry due.
    fn is_current(&self, at: DateTime<Utc>, issue: &str, tip: ObjectId) -> bool {
        self.known
            .get(issue)
            .is_some_and(|k| k.tip == tip && k.expiry == Some(at))
    }

    /// Returns an `expired` event for every followed lease that was live, is not at `now`,
    /// and whose expiry was not reported yet, oldest first; and the errors of the records that
    /// could not be read again (their expiries are not reported).
    pub fn expire(&mut self, store: &Store, now: DateTime<Utc>) -> (Vec<WatchEvent>, Vec<Error>) {
        let mut events = Vec::new();
        let mut errors = Vec::new();
        while let Some(top) = self.due.peek() {
            if top.0 .0 > now {
                break;
            }
            let Some(Reverse((at, issue, tip))) = self.due.pop() else {
                break;
            };
            if !self.is_current(at, &issue, tip) {
                continue;
            }
            match store.entry(&issue, tip) {
                Ok(entry) => match expired_by(&entry, now) {
                    Some(event) => events.push(event),
                    // Live still (it cannot be, past its expiry): nothing to say.
                    None => continue,
                },
                Err(e) => errors.push(e),
            }
            if let Some(k) = self.known.get_mut(&issue) {
                k.expiry = None;
                self.live -= 1;
            }
        }
        sort(&mut events);
        (events, errors)
    }

    /// Returns the earliest expiry still to be reported.
    pub fn next_expiry(&mut self) -> Option<DateTime<Utc>> {
        while let Some(top) = self.due.peek() {
            let Reverse((at, issue, tip)) = top;
            if self.is_current(*at, issue, *tip) {
                return Some(*at);
            }
            self.due.pop();
        }
        None
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

/// Follows `issue` from `known` through `newer` (its next commits, oldest first): each
/// commit's event, after the expiry of the state before it if that passed first. `previous`
/// is the entry of `known`'s tip if at hand (it is read when an expiry needs it). Returns what
/// is followed after the last commit, and that commit's entry (`previous` without any).
fn advance(
    store: &Store,
    issue: &str,
    mut known: Known,
    mut previous: Option<Entry>,
    newer: impl Iterator<Item = Entry>,
    events: &mut Vec<WatchEvent>,
    errors: &mut Vec<Error>,
) -> (Known, Option<Entry>) {
    for entry in newer {
        if known.expiry.is_some_and(|expiry| expiry <= entry.lease.at) {
            let before = match previous.take() {
                Some(before) => Ok(before),
                None => store.entry(issue, known.tip),
            };
            match before {
                Ok(before) => events.extend(expired_by(&before, entry.lease.at)),
                Err(e) => errors.push(e),
            }
        }
        known = Known::new(&entry, entry.lease.at);
        events.push(recorded(entry.clone()));
        previous = Some(entry);
    }
    (known, previous)
}

/// Returns the entries of `issue`'s ledger from `tip` back to (not including) `known`'s,
/// oldest first. If the ledger no longer descends from `known` (a rewritten local ref), the
/// walk stops at the first entry older than it: time never runs backwards along a ledger.
fn new_entries(
    store: &Store,
    issue: &str,
    tip: ObjectId,
    known: Option<&Known>,
) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    let mut next = Some(tip);
    while let Some(commit) = next {
        if known.is_some_and(|k| k.tip == commit) {
            break;
        }
        let entry = store.entry(issue, commit)?;
        if known.is_some_and(|k| entry.lease.at < k.at) {
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
