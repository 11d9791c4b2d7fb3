//! Whether a remote shares claims: what [`crate::backend::choose`] asks of the remote the
//! team uses when nothing says where claims go.

use super::Remote;
use crate::error::Result;
use crate::store::ARCHIVE_REF;

impl Remote<'_> {
    /// Returns true when this clone verified lease refs of this remote before (its memory, or
    /// its archive as last verified, is here): it shares claims, with no round trip to say so.
    pub fn seen_sharing(&self) -> Result<bool> {
        Ok(self.memory.exists()
            || self
                .ledger
                .store()
                .tip_of(&self.archive_tracking_ref())?
                .is_some())
    }

    /// Returns whether the remote holds a lease ref or an archive of them, as it answers now
    /// (one `git ls-remote`, within `lease.networkTimeout`).
    pub fn holds_leases(&self) -> Result<bool> {
        let listed = self.ls_remote(&["refs/leases/*", ARCHIVE_REF])?;
        Ok(listed.lines().any(|line| {
            line.split_once('\t').is_some_and(|(_, name)| {
                name == ARCHIVE_REF || name.starts_with(crate::issue::REF_PREFIX)
            })
        }))
    }
}
