//! Where a remote write of one issue starts: from what this clone tracked, from the archive
//! it verified, blind where the server's hook judges every claim, or from a fetch.

use super::Remote;
use crate::error::Result;
use crate::issue::IssueId;
use crate::store::Entry;

/// Where a remote write of one issue starts ([`Remote::start`]).
pub(super) struct Start {
    /// The issue's newest entry as known here (`None`: none, or not read).
    pub(super) current: Option<Entry>,
    /// The fold the first push is guarded by: it holds only while the archive is at it.
    pub(super) guard: Option<gix::ObjectId>,
    /// Whether `current` was fetched by this command.
    pub(super) fresh: bool,
    /// Whether the first push goes without a read of the remote: a server whose hook judges
    /// every claim against its archive refuses one it must not take, and a lost or refused
    /// blind push decides again from a fetch.
    pub(super) blind: bool,
}

impl Remote<'_> {
    /// Where a write of `issue` starts (see [`Start`]).
    pub(super) fn start(&self, issue: &IssueId) -> Result<Start> {
        let mut start = Start {
            current: None,
            guard: None,
            fresh: false,
            blind: false,
        };
        if let Some(tracked) = self.tracked_entry(issue)? {
            start.current = Some(tracked);
            return Ok(start);
        }
        // Never seen here, the issue may be in the remote's archive, and a claim must go on
        // from there, never start it over: the first push of such a claim holds only while
        // the remote's archive is the one verified here (`guard`), which records it or not.
        if let Some(seen) = self.seen_archive()? {
            start.guard = Some(seen);
            start.current = self.archived_in_seen(issue, seen)?;
            return Ok(start);
        }
        // A server whose hook judges every claim against its archive refuses one that would
        // start an archived ledger over: the first push goes blind, with no fetch at all.
        if self.hook_judges_claims()? {
            start.blind = true;
            return Ok(start);
        }
        // The remote's newest fold as last taken on sight, if it does not record the issue:
        // the push holds only while it is the newest.
        start.guard = self.fold_without(issue)?;
        if start.guard.is_none() {
            // No archive verified here yet: one fetch asks for the ref and the archive (when
            // the newest fold is trusted, for the ref alone; the fold comes in a second fetch
            // if the remote has no such ref).
            let (mut states, diverged) = self.fetch_some(std::slice::from_ref(issue))?;
            if let Some(d) = diverged.into_iter().next() {
                return Err(d.into_error(&self.shown));
            }
            start.fresh = true;
            start.current = states.remove(issue).flatten();
        }
        Ok(start)
    }
}
