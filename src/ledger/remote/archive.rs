//! A remote's archive (docs/FORMAT.md, "The archive"), fetched and verified like its ledgers:
//! the fetch lands in `refs/lease-incoming-archive/<remote>`, every fold between the one last
//! verified and the new one is judged ([`crate::ledger::archive::judge_fold`]), and only then
//! does `refs/lease-remote-archive/<remote>` move. A claim of an issue whose ref the remote no
//! longer has reads its tip there, and revives the ledger on it: the push creates the ref
//! (expected old value: none) on a commit whose parent is the archived tip, so the token goes
//! on from the archived one.

use gix::ObjectId;

use super::fetch::{Diverged, Divergence};
use super::Remote;
use crate::error::Result;
use crate::issue::IssueId;
use crate::rules::archive::Judge;
use crate::store::{Entry, Fold, Place, ARCHIVE_REF};

/// The namespace of the remotes' archives as last verified, one ref per remote.
pub const ARCHIVE_TRACKING_PREFIX: &str = "refs/lease-remote-archive/";

/// The namespace a remote's archive is fetched into before its new folds are verified.
pub const ARCHIVE_INCOMING_PREFIX: &str = "refs/lease-incoming-archive/";

impl Remote<'_> {
    /// The ref that keeps this remote's archive as last verified.
    pub fn archive_tracking_ref(&self) -> String {
        format!("{ARCHIVE_TRACKING_PREFIX}{}", self.slug)
    }

    pub(crate) fn archive_incoming_ref(&self) -> String {
        format!("{ARCHIVE_INCOMING_PREFIX}{}", self.slug)
    }

    /// Fetches the remote's archive and verifies its new folds against the one verified
    /// before (at most once per read: the answer is kept until [`Remote::forget_archive`]).
    ///
    /// Returns the newest verified fold (`None`: the remote has no archive and never had one
    /// here); [`Error::RemoteDiverged`] (for `refs/lease-archive`) when the remote deleted,
    /// rewound or rewrote it, or a new fold breaks a rule of the archive.
    pub(crate) fn fetched_archive(&self) -> Result<Option<Fold>> {
        if let Some(known) = self.archive.borrow().as_ref() {
            return Ok(known.clone());
        }
        let fold = self.fetch_archive()?;
        *self.archive.borrow_mut() = Some(fold.clone());
        Ok(fold)
    }

    /// Forgets the archive [`Remote::fetched_archive`] kept: the next read fetches it again.
    pub(crate) fn forget_archive(&self) {
        self.archive.borrow_mut().take();
        self.indexed.borrow_mut().take();
    }

    fn fetch_archive(&self) -> Result<Option<Fold>> {
        let incoming = self.archive_incoming_ref();
        let seen = self.seen_archive()?;
        if !self.fetch_exact(ARCHIVE_REF, &incoming)? {
            return self.archive_gone(seen);
        }
        self.take_archive(seen)
    }

    /// Keeps the archive just fetched (by [`Remote::fetch_archive`], or with the ledgers of
    /// [`Remote::fetch_some`]) for this read, verified against `seen`, the fold verified
    /// before the fetch.
    pub(crate) fn keep_fetched_archive(&self, seen: Option<ObjectId>) -> Result<()> {
        let fold = self.take_archive(seen)?;
        *self.archive.borrow_mut() = Some(fold);
        Ok(())
    }

    /// Returns the fold verified last from this remote, read before a fetch of its archive.
    pub(crate) fn seen_archive(&self) -> Result<Option<ObjectId>> {
        self.ledger.store().tip_of(&self.archive_tracking_ref())
    }

    /// The answer when the remote has no archive: none, unless one was verified here before
    /// (an archive is never deleted).
    fn archive_gone(&self, seen: Option<ObjectId>) -> Result<Option<Fold>> {
        match seen {
            None => Ok(None),
            Some(seen) => Err(Diverged {
                issue: ARCHIVE_REF.to_owned(),
                divergence: Divergence::Rewound,
                seen: Some(seen.to_string()),
                remote: None,
                detail: format!("the remote no longer has its archive, which was at {seen} here"),
                findings: Vec::new(),
            }
            .into_error(&self.shown)),
        }
    }

    fn take_archive(&self, seen: Option<ObjectId>) -> Result<Option<Fold>> {
        let store = self.ledger.store();
        let tracking = self.archive_tracking_ref();
        let diverged = |divergence, remote: Option<ObjectId>, detail: String, findings| Diverged {
            issue: ARCHIVE_REF.to_owned(),
            divergence,
            seen: seen.map(|s| s.to_string()),
            remote: remote.map(|r| r.to_string()),
            detail,
            findings,
        };
        let Some(tip) = store.tip_of(&self.archive_incoming_ref())? else {
            return self.archive_gone(seen);
        };
        if Some(tip) != seen {
            if let Err(d) = self.judge_archive(seen, tip) {
                return Err(diverged(d.0, Some(tip), d.1, d.2).into_error(&self.shown));
            }
            // Best effort, as for a ledger's tracking ref: the next read verifies again.
            let _ = store.move_refs(
                &[(tracking, tip, seen)],
                &format!("git-lease: archive verified from {}", self.shown),
            );
        }
        store.fold(tip).map(Some)
    }

    /// Judges the remote's archive at `tip` against the fold verified before (`seen`): `tip`
    /// must reach it by the folds' first parents, and each fold on the way must keep the
    /// archive's rules.
    #[allow(clippy::type_complexity)]
    fn judge_archive(
        &self,
        seen: Option<ObjectId>,
        tip: ObjectId,
    ) -> std::result::Result<(), (Divergence, String, Vec<crate::verify::Finding>)> {
        let store = self.ledger.store();
        let mut findings = Vec::new();
        let mut next = Some(tip);
        let mut walked = std::collections::HashSet::new();
        while let Some(commit) = next {
            if Some(commit) == seen {
                break;
            }
            if !walked.insert(commit) {
                break;
            }
            let fold = match store.fold(commit) {
                Ok(fold) => fold,
                Err(e) => return Err((Divergence::Rewritten, e.to_string(), Vec::new())),
            };
            let previous = fold.parents.first().copied().filter(|p| store.is_fold(*p));
            findings.extend(crate::ledger::archive::judge_fold(
                store,
                previous,
                commit,
                Judge::History,
                &|_| Ok(None),
            ));
            next = previous;
        }
        if let Some(seen) = seen.filter(|_| next.is_none()) {
            let detail = if crate::verify::descends_from(store, seen, tip) {
                format!("the remote's archive is at {tip}, behind {seen} seen here before")
            } else {
                format!(
                    "the remote's archive is at {tip}, which does not follow from {seen} seen here before"
                )
            };
            let how = if crate::verify::descends_from(store, seen, tip) {
                Divergence::Rewound
            } else {
                Divergence::Rewritten
            };
            return Err((how, detail, Vec::new()));
        }
        match findings.first() {
            None => Ok(()),
            Some(first) => Err((
                Divergence::Rewritten,
                format!("the remote's new folds break a rule: {first}"),
                findings.clone(),
            )),
        }
    }

    /// Returns the tip the remote's archive records for `issue` (`None`: it records none),
    /// the archive fetched and verified ([`Remote::fetched_archive`]).
    ///
    /// With `lease.trustArchive` and no fold verified here, the remote's newest fold alone
    /// says whether the archive records `issue` ([`Remote::newest_fold`]); only when it does,
    /// or the index cannot say, is the archive fetched and verified, for the ledger a claim
    /// goes on from.
    pub(crate) fn archived_tip(&self, issue: &str) -> Result<Option<ObjectId>> {
        if self.archive.borrow().is_none() && self.may_trust_newest_fold()? {
            // An index that cannot answer (a fetch killed in it left a lock, its files were
            // damaged) is passed over: the verified archive answers instead, and from then on.
            // A remote without an archive needs no trust; one with an archive is trusted
            // once its probe, if it was yet to be made, found its hook judges every fold.
            match self.newest_fold() {
                Ok(None) => return Ok(None),
                Ok(Some(fold))
                    if self.trusts_newest_fold_once_judged()?
                        && matches!(self.fold_records(&fold, issue), Ok(false)) =>
                {
                    return Ok(None)
                }
                _ => {}
            }
        }
        match self.fetched_archive()? {
            Some(fold) => self.ledger.store().archived_in(&fold, issue),
            None => Ok(None),
        }
    }

    /// Returns the newest entry of `issue` as the fold `seen`, the remote's archive as last
    /// verified here, records it (`None`: it records none), read without a fetch.
    pub(crate) fn archived_in_seen(
        &self,
        issue: &IssueId,
        seen: ObjectId,
    ) -> Result<Option<Entry>> {
        let store = self.ledger.store();
        let Some(tip) = store.archived_in(&store.fold(seen)?, issue.as_str())? else {
            return Ok(None);
        };
        let mut entry = store.entry(issue.as_str(), tip)?;
        entry.place = Place::Archive;
        Ok(Some(self.ledger.observe(entry)))
    }

    /// Returns the newest entry of `issue`'s ledger as the remote's archive records it, its
    /// ledger verified from the tip seen here before (`seen`), to be revived by a claim
    /// ([`Place::Archive`]); `None` when the archive does not record it.
    pub(crate) fn archived_entry(
        &self,
        issue: &IssueId,
        seen: Option<ObjectId>,
    ) -> Result<Option<Entry>> {
        let Some(tip) = self.archived_tip(issue.as_str())? else {
            return Ok(None);
        };
        match self.judge_fetched(issue.as_str(), seen, Some(tip))? {
            Ok(Some(tip)) => {
                let mut entry = self.ledger.store().entry(issue.as_str(), tip)?;
                entry.place = Place::Archive;
                Ok(Some(self.ledger.observe(entry)))
            }
            Ok(None) => Ok(None),
            Err(d) => Err(d.into_error(&self.shown)),
        }
    }
}
