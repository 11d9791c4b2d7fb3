//! What doctor's probe found of a remote's compare-and-swap, remembered.
//!
//! A claim through a remote is a push with an expected old value: it is a compare-and-swap only
//! if the server refuses the push when its ref is no longer at that value. A server that
//! ignores it (and still answers "ok") lets two claimers both win. Doctor's probe tells
//! ([`crate::doctor`]). `git lease doctor` runs it, and so does the first write through a push
//! URL that nothing has judged yet ([`Remote::check_writes_allowed`]), once per URL per user.
//! A server found to ignore it is recorded here, and every write through it is then refused
//! ([`crate::Error::UnsafeRemote`], exit 1) until doctor finds it honours old values again,
//! or the user accepts the danger for that remote by name (`remote.<name>.leaseUnsafeCas =
//! true`, which also spares the probe). Reads still work. A push URL that is a path or
//! `file://` is served by this machine's git receive-pack, which honours old values: it is not
//! probed (unless `remote.<name>.receivepack` names another program).
//!
//! The record is a file named `<key>`, one per server: `<key>` is the FNV-1a hash of the URL
//! the remote's pushes go to (`remote.<name>.pushurl`, else `remote.<name>.url`, or the URL
//! given), without its credentials, so a remote's name and its URL share one verdict. It is
//! kept per user, as ssh keeps known hosts: in `$XDG_STATE_HOME/git-lease/servers/`, else
//! `~/.local/state/git-lease/servers/` ([`crate::os::user_server_dir`]), so that a user's
//! new clone of a server judged before writes without a probe. Without a home, or where that
//! folder cannot be made, it is kept in the repository's `$GIT_COMMON_DIR/lease-doctor/`,
//! which is read too. Its presence is the verdict (a record that cannot be read still
//! refuses); its text says what was seen. A server found safe to write through is recorded as
//! `<key>.allowed` instead, so that it is probed no more. It is an observation, not a
//! setting: the probe alone writes and clears it, out of reach of any refspec. A write reads
//! it once, before its first push.

use std::path::PathBuf;

use chrono::DateTime;

use super::Remote;
use crate::doctor::judge::{self, Finding};
use crate::error::{Error, Result};
use crate::store::Store;

/// The folder of the verdict files, in the repository's common directory.
pub const VERDICT_DIR: &str = "lease-doctor";

/// The line of a `.allowed` record whose server's hook said it judges every fold
/// ([`crate::probe::ProbeReport::judges_archive`]).
const ARCHIVE_JUDGED_LINE: &str = "archive: every fold is judged by the server's hook";

/// The setting (`remote.<name>.<KEY>`) that lets writes go through a remote doctor found to
/// ignore expected old values.
pub const UNSAFE_CAS_KEY: &str = "leaseUnsafeCas";

/// What was judged of one server.
pub(crate) enum Judged {
    /// Nothing yet.
    Never,
    /// Writes go through it: what was seen.
    Allowed,
    /// It ignores expected old values: what was seen.
    Ignored(String),
}

/// The verdict of one server.
pub(crate) struct Verdict {
    /// The record's name ([`Verdict::of`]).
    key: String,
    /// The user's folder of verdicts, where a record is written (`None`: no home).
    user: Option<PathBuf>,
    /// The repository's folder of verdicts, read too, and written where the user's is not.
    repo: PathBuf,
    /// The repository's common directory and its `core.sharedRepository`, for what a record
    /// makes there.
    common: PathBuf,
    shared: crate::store::shared::SharedPerm,
}

impl Verdict {
    /// Returns the verdict of the server at `push_url` (credentials removed before it is used).
    pub(crate) fn of(store: &Store, push_url: &str) -> Verdict {
        let url = super::redact_url(push_url);
        Verdict {
            key: format!("{:016x}", crate::cache::fnv1a(url.as_bytes())),
            user: crate::os::user_server_dir(),
            repo: store.common_dir().join(VERDICT_DIR),
            common: store.common_dir().to_path_buf(),
            shared: store.shared(),
        }
    }

    /// The record of a server found to ignore expected old values (`allowed` false), or found
    /// safe to write through (true), in each folder, the user's first.
    fn records(&self, allowed: bool) -> impl Iterator<Item = PathBuf> + '_ {
        let name = self.name(allowed);
        self.user
            .iter()
            .chain(std::iter::once(&self.repo))
            .map(move |dir| dir.join(&name))
    }

    /// Returns what was judged of the server.
    pub(crate) fn read(&self) -> Judged {
        match self.ignored() {
            Some(detail) => Judged::Ignored(detail),
            None if self.records(true).any(|p| p.exists()) => Judged::Allowed,
            None => Judged::Never,
        }
    }

    /// Returns what was recorded when the server was found to ignore expected old values;
    /// `None` when nothing is recorded.
    pub(crate) fn ignored(&self) -> Option<String> {
        self.records(false)
            .find_map(|path| match std::fs::read(&path) {
                Ok(bytes) => Some(String::from_utf8_lossy(&bytes).trim().to_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                // There, but unreadable: the verdict stands.
                Err(e) => Some(format!(
                    "(its record {} cannot be read: {e})",
                    path.display()
                )),
            })
    }

    /// Records that the server ignores expected old values: `what`, one line.
    pub(crate) fn record_ignored(&self, what: &str) -> Result<()> {
        self.clear()?;
        self.write(false, what)
    }

    /// Records that writes go through the server: `what` was seen, one line, and whether its
    /// hook said it judges every fold ([`ARCHIVE_JUDGED_LINE`]).
    pub(crate) fn record_allowed(&self, what: &str, archive_judged: bool) -> Result<()> {
        self.clear()?;
        let text = if archive_judged {
            format!("{what}\n{ARCHIVE_JUDGED_LINE}")
        } else {
            what.to_owned()
        };
        self.write(true, &text)
    }

    /// Whether the probe found writes go through the server and its hook judges every fold:
    /// what lets claims trust its newest fold when `lease.trustArchive` is not set.
    pub(crate) fn archive_judged(&self) -> bool {
        self.records(true).any(|path| {
            std::fs::read_to_string(path)
                .is_ok_and(|text| text.lines().any(|line| line == ARCHIVE_JUDGED_LINE))
        })
    }

    /// Removes every record of the server, in both folders.
    fn clear(&self) -> Result<()> {
        for path in self.records(false).chain(self.records(true)) {
            remove(&path)?;
        }
        Ok(())
    }

    /// Writes a record in the user's folder, or, where it cannot be made, the repository's.
    fn write(&self, allowed: bool, what: &str) -> Result<()> {
        if let Some(user) = &self.user {
            let path = user.join(self.name(allowed));
            if std::fs::create_dir_all(user).is_ok() && write_record(&path, what).is_ok() {
                return Ok(());
            }
        }
        let path = self.repo.join(self.name(allowed));
        std::fs::create_dir_all(&self.repo).map_err(|source| record_error(&path, source))?;
        write_record(&path, what)?;
        self.shared.adjust_up_to(&path, &self.common)
    }

    fn name(&self, allowed: bool) -> String {
        if allowed {
            format!("{}.allowed", self.key)
        } else {
            self.key.clone()
        }
    }
}

/// Writes `what` and a newline to `path`, replacing it whole.
fn write_record(path: &std::path::Path, what: &str) -> Result<()> {
    let io = |source| record_error(path, source);
    let dir = path.parent().unwrap_or(path);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, format!("{what}\n").as_bytes()).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

fn record_error(path: &std::path::Path, source: std::io::Error) -> Error {
    Error::Io {
        context: format!("cannot record doctor's verdict in {}", path.display()),
        source,
    }
}

/// Removes a record; one already absent is fine.
fn remove(path: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            context: format!("cannot clear doctor's verdict {}", path.display()),
            source,
        }),
    }
}

/// Returns true for a push URL that git serves with this machine's receive-pack: a path, or a
/// `file://` URL.
pub(crate) fn is_local(url: &str) -> bool {
    if let Some((scheme, _)) = url.split_once("://") {
        return scheme == "file";
    }
    if url.contains("::") {
        return false;
    }
    // git's scp-like `host:path` has a colon before any slash.
    match (url.find(':'), url.find('/')) {
        (Some(colon), Some(slash)) => slash < colon,
        (Some(_), None) => false,
        _ => true,
    }
}

impl Remote<'_> {
    /// Returns the setting that lets writes through this remote although doctor found it
    /// ignores expected old values: `remote.<name>.leaseUnsafeCas`.
    pub fn unsafe_cas_key(&self) -> String {
        format!("remote.{}.{}", self.shown, UNSAFE_CAS_KEY)
    }

    /// Returns whether `remote.<name>.leaseUnsafeCas` is set to true.
    pub fn unsafe_cas_allowed(&self) -> Result<bool> {
        let key = self.unsafe_cas_key();
        let set = self.ledger.store().config_string(&key);
        Ok(crate::config::boolean(&key, set.as_deref())?.unwrap_or(false))
    }

    /// Records doctor's finding that the server ignores a push's expected old value (`what`
    /// it saw, one line), or, with `None`, that it honours it (and whether its hook said it
    /// judges every fold).
    pub(crate) fn record_cas(&self, ignored: Option<&str>, archive_judged: bool) -> Result<()> {
        match ignored {
            Some(what) => self.verdict.record_ignored(what),
            None => self.verdict.record_allowed(
                "git lease doctor: it refused a stale expected old value",
                archive_judged,
            ),
        }
    }

    /// Records doctor's finding that the server serves one connection at a time (within
    /// `secs`): a push's advertisement and its update stay together, so claims through it hold.
    pub(crate) fn record_one_at_a_time(&self, secs: u64) -> Result<()> {
        self.verdict.record_allowed(
            &format!(
                "git lease doctor: it took no second connection within {secs}s: one connection \
                 at a time"
            ),
            false,
        )
    }

    /// Refuses a write, before its first push, through a server found to ignore expected old
    /// values, unless the user accepted that for this remote. A server nothing has judged is
    /// probed first, once ([`judge::cas`]), unless it needs none.
    pub(super) fn check_writes_allowed(&self) -> Result<()> {
        if self.writes_allowed.get() {
            return Ok(());
        }
        let refused = match self.verdict.read() {
            Judged::Allowed => None,
            Judged::Ignored(detail) => Some(detail),
            Judged::Never if self.local_push || self.unsafe_cas_allowed()? => None,
            Judged::Never => self.probe_once()?,
        };
        if let Some(detail) = refused {
            if !self.unsafe_cas_allowed()? {
                return Err(Error::UnsafeRemote {
                    remote: self.shown.clone(),
                    key: self.unsafe_cas_key(),
                    detail,
                });
            }
        }
        self.writes_allowed.set(true);
        Ok(())
    }

    /// Runs doctor's compare-and-swap probe and records what it found; returns what the server
    /// did when it ignores expected old values. A probe that could not tell, this time, is
    /// [`Error::Transport`]: the write is not made blind.
    pub(super) fn probe_once(&self) -> Result<Option<String>> {
        let now = self
            .ledger
            .reading()
            .map_or(DateTime::UNIX_EPOCH, |reading| reading.now);
        // Recorded best effort: a record that cannot be written costs a probe next time.
        let judged = judge::cas(self.ledger, self, now)?;
        Ok(match judged.finding {
            Finding::Holds(what) | Finding::Untold(what) => {
                let _ = self.verdict.record_allowed(&what, judged.archive_judged);
                None
            }
            Finding::Ignored(what) => {
                let _ = self.verdict.record_ignored(&what);
                Some(what)
            }
            Finding::Failed(why) => {
                return Err(Error::Transport {
                    command: format!("doctor's compare-and-swap probe of {}", self.shown),
                    message: format!(
                        "cannot tell whether it honours a push's expected old value, so nothing \
                         was written: {why}; run `git lease doctor --remote {}`",
                        self.shown
                    ),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::is_local;

    #[test]
    fn paths_and_file_urls_are_served_here_and_the_rest_elsewhere() {
        for url in [
            "/srv/r.git",
            "../r.git",
            "r.git",
            "file:///srv/r.git",
            "./a:b",
        ] {
            assert!(is_local(url), "{url}");
        }
        for url in [
            "git://127.0.0.1/r.git",
            "http://h/r.git",
            "git@github.com:o/r.git",
            "host:r.git",
            "ssh://h/r",
            "ext::ssh h git-%s",
        ] {
            assert!(!is_local(url), "{url}");
        }
    }
}
