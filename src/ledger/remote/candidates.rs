//! A remote's ledgers of several issues, in one fetch: the state of a claim's candidates
//! ([`Remote::fetch_some`]), and which of them moved since ([`Remote::remote_tips`]).

use std::collections::HashMap;

use gix::ObjectId;

use super::{Diverged, Remote};
use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};
use crate::one_of_many::States;
use crate::store::{Place, ARCHIVE_REF};

/// Every character a lease ref name may hold right after an issue id, in ASCII (see
/// [`Remote::fetch_scoped`]): the printable ones but space and `~ ^ : ? * [ \\`.
const LONGER: &str =
    "!\"#$%&'()+,-./0123456789;<=>@ABCDEFGHIJKLMNOPQRSTUVWXYZ]_`abcdefghijklmnopqrstuvwxyz{|}";

/// Past this many candidates, a remote claim learns their state by fetching every lease ref
/// of the remote (one refspec) rather than one refspec per candidate on the command line.
const MAX_REFSPECS: usize = 256;

/// How a remote claim reads a candidate the remote has no ref of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unseen {
    /// From the remote's archive: verified, or its newest fold where that is trusted.
    FromArchive,
    /// As never leased, unread, where the server's hook judges every claim against its
    /// archive ([`Remote::hook_judges_claims`]): it refuses one that would start an archived
    /// ledger over, and the claim then reads the archive. Elsewhere, from the archive.
    NewWhereHookJudges,
}

impl Remote<'_> {
    /// Fetches the remote's ledgers of `issues` in one `git fetch` and verifies what is new,
    /// as [`Remote::fetch_one`] does for one.
    ///
    /// Returns the newest verified entry of each issue (`None`: the remote has no such
    /// ledger), and the ledgers the remote rewound or rewrote (left out of the map).
    pub fn fetch_some(&self, issues: &[IssueId]) -> Result<(States, Vec<Diverged>)> {
        self.fetch_some_reading(issues, Unseen::FromArchive)
    }

    /// As [`Remote::fetch_some`], reading the issues the remote has no ref of as `unseen`
    /// says.
    pub(crate) fn fetch_some_reading(
        &self,
        issues: &[IssueId],
        unseen: Unseen,
    ) -> Result<(States, Vec<Diverged>)> {
        self.settled(
            || self.fetch_some_once(issues, unseen),
            |(_, d)| !d.is_empty(),
        )
    }

    fn fetch_some_once(
        &self,
        issues: &[IssueId],
        unseen_read: Unseen,
    ) -> Result<(States, Vec<Diverged>)> {
        self.begin_claim();
        let store = self.ledger().store();
        let mut state = HashMap::with_capacity(issues.len());
        let mut diverged = Vec::new();
        if issues.is_empty() {
            return Ok((state, diverged));
        }
        if issues.len() > MAX_REFSPECS {
            return self.fetch_many(issues);
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
        let as_new = unseen_read == Unseen::NewWhereHookJudges
            && !unseen.is_empty()
            && self.hook_judges_claims()?;
        if !as_new {
            self.fetch_index_paths(&unseen);
        }
        for (issue, tip, place) in tips {
            let entry = match tip {
                Some(tip) => {
                    let mut entry = store.entry(issue.as_str(), tip)?;
                    entry.place = place;
                    Some(self.ledger().observe(entry))
                }
                // Never seen here, and not on the remote: the archive may have it.
                None if as_new => None,
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
    pub(crate) fn remote_tips(&self, issues: &[IssueId]) -> Result<HashMap<String, ObjectId>> {
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

    /// As [`Remote::fetch_some_once`] for more than [`MAX_REFSPECS`] issues: every lease ref
    /// of the remote in one fetch, and an issue it has no ref of read from its archive,
    /// whatever [`Unseen`] a claim asked for.
    fn fetch_many(&self, issues: &[IssueId]) -> Result<(States, Vec<Diverged>)> {
        let store = self.ledger().store();
        let mut state = HashMap::with_capacity(issues.len());
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
        let wanted: std::collections::HashSet<&str> = issues.iter().map(IssueId::as_str).collect();
        let diverged = fetched
            .diverged
            .into_iter()
            .filter(|d| wanted.contains(d.issue.as_str()))
            .collect();
        Ok((state, diverged))
    }
}
