//! Where ledgers live for one command: this repository's refs ([`Ledger`]), or a remote's
//! ([`Remote`]). Both answer the same questions and apply the same rules; a command holds a
//! `Box<dyn Backend>` ([`open`]) and never asks which it has.
//!
//! A third kind, a repository whose refs only git itself can write (reftable), sits below
//! this seam, in the store: the ledger above it does not change.

use chrono::{DateTime, Utc};
use gix::ObjectId;

use crate::error::Result;
use crate::issue::IssueId;
use crate::ledger::{Ledger, Listed, Report};
use crate::listing::{Entries, Unreadable};
use crate::liveness::Current;
use crate::one_of_many::{AnyReport, Order};
use crate::remote::{Diverged, Remote};
use crate::rules::{Claim, Transition};
use crate::store::Entry;

use super::sharing::ReadOnly;
pub use super::sharing::{choose, found, stated, Target, Unshared, LOCAL_REMOTE};

/// Every ledger's newest entry, with the remote ledgers refused as rewound or rewritten (left
/// out of the entries; always empty locally).
#[derive(Debug, Default)]
pub struct Listing {
    /// The newest entry of each ledger, sorted by issue.
    pub entries: Vec<Entry>,
    /// The ledgers a remote went back on.
    pub diverged: Vec<Diverged>,
    /// The ledgers whose tip cannot be read as a lease (left out of the entries).
    pub unreadable: Vec<Unreadable>,
}

/// Every ledger's tip, `(issue, tip)`, with the remote ledgers refused as rewound or rewritten.
pub type Tips = (Vec<(String, ObjectId)>, Vec<Diverged>);

/// The operations every command needs, on whichever side holds the ledgers.
pub trait Backend {
    /// Returns the newest entry of `issue`, if it was ever leased.
    fn current(&self, issue: &IssueId) -> Result<Option<Entry>>;
    /// Returns every ledger's newest entry.
    fn list(&self) -> Result<Listing>;
    /// [`Backend::list`], `show` given the entries and the ledgers a remote went back on
    /// (locally, while the list cache is rewritten beside it); returns the entries, with the
    /// ledgers set aside as unreadable.
    fn list_then(&self, show: &mut dyn FnMut(&Entries, &[Diverged])) -> Result<Listed> {
        let listing = self.list()?;
        let entries = Entries::Decoded(listing.entries);
        show(&entries, &listing.diverged);
        Ok((entries, listing.unreadable))
    }
    /// Returns the newest entry of every ledger only the archive holds (its ref folded and
    /// not revived), sorted by issue: free ledgers, which `list --all` shows beside the rest.
    fn archived(&self) -> Result<Vec<Entry>>;

    /// Returns `issue`'s ledger, newest first.
    fn log(&self, issue: &IssueId) -> Result<Vec<Entry>>;
    /// Resolves an id or unique prefix against the ledgers that exist.
    fn resolve(&self, prefix: &str) -> Result<IssueId>;
    /// Returns every ledger's tip, `(issue, tip)`, for an audit, with the remote ledgers
    /// refused as rewound or rewritten.
    fn tips(&self) -> Result<Tips>;
    /// Applies one rule to `issue` under compare-and-swap, deciding again on each lost race.
    fn apply(
        &self,
        issue: &IssueId,
        decide: &mut dyn FnMut(Option<Current<'_>>) -> Transition,
    ) -> Result<Report>;
    /// Claims all of `issues`, or none.
    fn acquire_all(
        &self,
        issues: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
    ) -> Result<Vec<Report>>;
    /// Claims exactly one free issue of `candidates`, tried in `order`.
    fn acquire_any(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        order: Order,
        rng: &mut fastrand::Rng,
    ) -> Result<AnyReport>;
}

/// Returns the backend of `ledger`'s repository at `target`: its own refs, a remote's, or its
/// own refs for reading only ([`Target::Unshared`]).
pub fn open<'a>(ledger: &'a Ledger, target: &Target) -> Result<Box<dyn Backend + 'a>> {
    Ok(match target {
        Target::Remote(name) => Box::new(Remote::new(ledger, name)?),
        Target::Local => Box::new(ledger),
        Target::Unshared(unshared) => Box::new(ReadOnly {
            ledger,
            unshared: unshared.clone(),
            noted: std::cell::Cell::new(false),
        }),
    })
}

impl Backend for &Ledger {
    fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        Ledger::current(self, issue)
    }
    fn list(&self) -> Result<Listing> {
        let (entries, unreadable) = self.listed(None)?;
        let mut entries = entries.into_vec();
        entries.iter_mut().for_each(|e| self.observe_in_place(e));
        Ok(Listing {
            entries,
            diverged: Vec::new(),
            unreadable,
        })
    }
    fn list_then(&self, show: &mut dyn FnMut(&Entries, &[Diverged])) -> Result<Listed> {
        Ledger::list_then(self, &mut |entries| show(entries, &[]))
    }
    fn archived(&self) -> Result<Vec<Entry>> {
        let store = self.store();
        // Without an archive there is nothing to read (one is never deleted); with one, the
        // refs are read before its tip, so a fold under way cannot leave a ledger out of both.
        if store.archive_tip()?.is_none() {
            return Ok(Vec::new());
        }
        let refs = store.lease_refs()?;
        match store.archive_tip()? {
            Some(tip) => only_archived(self, &store.fold(tip)?, &refs),
            None => Ok(Vec::new()),
        }
    }

    fn log(&self, issue: &IssueId) -> Result<Vec<Entry>> {
        Ledger::log(self, issue)
    }
    fn resolve(&self, prefix: &str) -> Result<IssueId> {
        Ledger::resolve(self, prefix)
    }
    fn tips(&self) -> Result<Tips> {
        Ok((self.store().lease_refs()?, Vec::new()))
    }
    fn apply(
        &self,
        issue: &IssueId,
        decide: &mut dyn FnMut(Option<Current<'_>>) -> Transition,
    ) -> Result<Report> {
        Ledger::apply(self, issue, decide)
    }
    fn acquire_all(
        &self,
        issues: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
    ) -> Result<Vec<Report>> {
        Ledger::acquire_all(self, issues, claim, now)
    }
    fn acquire_any(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        order: Order,
        rng: &mut fastrand::Rng,
    ) -> Result<AnyReport> {
        Ledger::acquire_any(self, candidates, claim, now, order, rng)
    }
}

/// Returns the newest entry of each ledger `fold` records that has no ref among `refs`
/// (`(issue, tip)`, sorted by issue), as `ledger` observes it.
pub(crate) fn only_archived(
    ledger: &Ledger,
    fold: &crate::store::Fold,
    refs: &[(String, ObjectId)],
) -> Result<Vec<Entry>> {
    let store = ledger.store();
    let mut out = Vec::new();
    for (issue, tip) in store.archive_entries(fold)? {
        if refs
            .binary_search_by(|(n, _)| n.as_str().cmp(issue.as_str()))
            .is_ok()
        {
            continue;
        }
        let mut entry = store.entry(&issue, tip)?;
        entry.place = crate::store::Place::Archive;
        out.push(ledger.observe(entry));
    }
    Ok(out)
}
