//! What `git lease doctor` found of a remote's compare-and-swap, remembered.
//!
//! A claim through a remote is a push with an expected old value: it is a compare-and-swap only
//! if the server refuses the push when its ref is no longer at that value. A server that
//! ignores it (and still answers "ok") lets two claimers both win. Doctor's probe tells
//! ([`crate::doctor`]); a server found to ignore it is recorded here, and every write through
//! it is then refused ([`crate::Error::UnsafeRemote`], exit 1) until doctor finds it honours
//! old values again, or the user accepts the danger for that remote by name
//! (`remote.<name>.leaseUnsafeCas = true`). Reads still work.
//!
//! The record is a file, `$GIT_COMMON_DIR/lease-doctor/<key>`, one per server: `<key>` is the
//! FNV-1a hash of the URL the remote's pushes go to (`remote.<name>.pushurl`, else
//! `remote.<name>.url`, or the URL given), without its credentials, so a remote's name and its
//! URL share one verdict. It is an observation, not a setting: doctor alone writes and clears
//! it, beside the remote's memory in the repository's own directory (shared by its worktrees,
//! out of reach of any refspec), and nothing in the user's configuration changes behind them.
//! Its presence is the verdict (a record that cannot be read still refuses); its text says
//! what was seen, and when. A write reads it once, before its first push: a file that is
//! normally absent, so the claim path pays one failed open.

use std::path::PathBuf;

use crate::store::Store;

/// The folder of the verdict files, in the repository's common directory.
pub const VERDICT_DIR: &str = "lease-doctor";

/// The setting (`remote.<name>.<KEY>`) that lets writes go through a remote doctor found to
/// ignore expected old values.
pub const UNSAFE_CAS_KEY: &str = "leaseUnsafeCas";

/// The verdict of one server.
pub(crate) struct Verdict {
    path: PathBuf,
}

impl Verdict {
    /// Returns the verdict of the server at `push_url` (credentials removed before it is used).
    pub(crate) fn of(store: &Store, push_url: &str) -> Verdict {
        let url = super::redact_url(push_url);
        Verdict {
            path: store
                .common_dir()
                .join(VERDICT_DIR)
                .join(format!("{:016x}", crate::cache::fnv1a(url.as_bytes()))),
        }
    }

    /// Returns what was recorded when doctor found the server ignores expected old values;
    /// `None` when nothing is recorded.
    pub(crate) fn ignored(&self) -> Option<String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Some(String::from_utf8_lossy(&bytes).trim().to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // There, but unreadable: the verdict stands.
            Err(e) => Some(format!(
                "(its record {} cannot be read: {e})",
                self.path.display()
            )),
        }
    }

    /// Records that the server ignores expected old values: `what`, one line.
    pub(crate) fn record_ignored(&self, what: &str) -> crate::Result<()> {
        let io = |source| crate::Error::Io {
            context: format!("cannot record doctor's verdict in {}", self.path.display()),
            source,
        };
        let dir = self.path.parent().unwrap_or(&self.path);
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, format!("{what}\n").as_bytes()).map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// Forgets the verdict: doctor found the server honours expected old values.
    pub(crate) fn clear(&self) -> crate::Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(crate::Error::Io {
                context: format!("cannot clear doctor's verdict {}", self.path.display()),
                source,
            }),
        }
    }
}
