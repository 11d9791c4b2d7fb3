//! git's files ref backend (loose refs and `packed-refs`), read and written in-process: the
//! files side of the store's ref seam ([`super::RefDb`]; reftable's side is [`super::refdb`]).
//!
//! Reads survive `git pack-refs` running meanwhile ([`Store::read_refs`]); a listing reads
//! `packed-refs` line by line ([`Store::refs_fast`]); several refs (and one that writes a
//! reflog, or in a ref namespace) move in one gix-ref transaction with the expected previous
//! values, checked again under its locks, and one lease ref under its own lock alone: both in
//! [`super::cas`], which says why. Errors become the store's answers here: a lost race, a
//! lock held too long (named as the lock actually held), a ref clash.

use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;
use gix::ObjectId;

use super::{settle, symbolic, RefDb, Store, Swap, READ_ATTEMPTS};
use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};

impl Store {
    /// The files backend's side of [`Store::tip_of`].
    pub(super) fn files_tip_of(&self, name: &str) -> Result<Option<ObjectId>> {
        let found = self
            .read_refs(|| match self.shared_ref(name) {
                Some(full) => self.read_shared_ref(full),
                None => self
                    .repo
                    .try_find_reference(name)
                    .map(|r| r.map(|r| r.detach().target)),
            })
            .map_err(|e| Error::git(format!("cannot read {name}"), e))?;
        match found {
            None => Ok(None),
            Some(Target::Object(id)) => Ok(Some(id)),
            Some(Target::Symbolic(to)) => Err(symbolic(name, &to.as_bstr().to_str_lossy())),
        }
    }

    /// Returns `name` when it is a full ref name that every worktree shares and that this
    /// store reads as it is written (no ref namespace, no precomposed Unicode): a name read by
    /// [`Store::read_shared_ref`]. Every lease ref is one.
    fn shared_ref<'a>(&self, name: &'a str) -> Option<&'a gix::refs::FullNameRef> {
        let refs = &self.repo.refs;
        if refs.namespace.is_some() || refs.precompose_unicode {
            return None;
        }
        let per_worktree = ["refs/bisect/", "refs/worktree/", "refs/rewritten/"];
        if !name.starts_with("refs/") || per_worktree.iter().any(|p| name.starts_with(p)) {
            return None;
        }
        name.try_into().ok()
    }

    /// Reads the shared ref `name` as git reads a full ref name: its loose file in the common
    /// directory, else its line in `packed-refs` (a directory where the file would be is no
    /// ref, as for git).
    ///
    /// gix's lookup takes every name as one git may complete, and so also reads files in the
    /// git directory that are not refs (`tags/refs/leases/<id>`, `remotes/refs/leases/<id>/HEAD`):
    /// a ref that does not exist reads as absent here, whatever else the directory holds.
    fn read_shared_ref(
        &self,
        name: &gix::refs::FullNameRef,
    ) -> std::result::Result<Option<Target>, gix::Error> {
        let path = self
            .repo
            .common_dir()
            .join(gix::path::from_bstr(name.as_bstr())?);
        match std::fs::read(&path) {
            Ok(contents) => {
                let loose = gix::refs::file::loose::Reference::try_from_path(
                    name.to_owned(),
                    &contents,
                    self.repo.object_hash(),
                )?;
                return Ok(Some(loose.target));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::NotADirectory
                        | std::io::ErrorKind::IsADirectory
                ) => {}
            Err(e) => return Err(gix::Error::from_error(e)),
        }
        let Some(packed) = self.repo.refs.cached_packed_buffer()? else {
            return Ok(None);
        };
        Ok(packed.try_find(name)?.map(|r| Target::Object(r.target())))
    }

    /// The files backend's side of [`Store::refs_under`].
    pub(super) fn files_refs_under(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        let mut out = self
            .read_refs(|| {
                let platform = self.repo.references()?;
                let mut out = Vec::new();
                for r in platform.prefixed(prefix)? {
                    let r = r?;
                    let name = r.name().as_bstr().to_str_lossy();
                    let Some(short) = name.strip_prefix(prefix) else {
                        continue;
                    };
                    if let gix::refs::TargetRef::Object(id) = r.target() {
                        out.push((short.to_owned(), id.to_owned()));
                    }
                }
                Ok(out)
            })
            .map_err(|e| Error::git("cannot list references", e))?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The files backend's side of [`Store::swap`]: under the ref's own lock alone
    /// ([`Store::swap_one`]), or as [`Store::files_swap_many`] of one ref when git would write
    /// a reflog or a ref namespace is set. A ref already at `new` (this very swap, made by an
    /// earlier attempt) is a done swap, as in git.
    pub(super) fn files_swap(
        &self,
        issue: &IssueId,
        new: ObjectId,
        expected: Option<ObjectId>,
        log_message: &str,
    ) -> Result<Swap> {
        let edit = [(issue.clone(), new, expected)];
        let swapped = if self.writes_reflog(issue) || self.repo.refs.namespace.is_some() {
            self.files_swap_many(&edit, log_message)?
        } else {
            match self.swap_one(issue, new, expected)? {
                Ok(Swap::Done) => {
                    self.after_swap(&edit)?;
                    Swap::Done
                }
                Ok(Swap::Lost) => Swap::Lost,
                Err(err) => self.failed_swap(&edit, err)?,
            }
        };
        match swapped {
            Swap::Lost if self.tip(issue)? == Some(new) => {
                self.after_swap(&edit)?;
                Ok(Swap::Done)
            }
            swapped => Ok(swapped),
        }
    }

    /// Returns true if moving `issue`'s ref writes a reflog entry: with
    /// `core.logAllRefUpdates=always`, or when its reflog exists (git appends to it).
    fn writes_reflog(&self, issue: &IssueId) -> bool {
        self.repo.refs.write_reflog == gix::refs::store::WriteReflog::Always
            || self
                .repo
                .common_dir()
                .join("logs")
                .join(issue.ref_name())
                .exists()
    }

    /// The files backend's side of [`Store::swap_many`]: one gix-ref transaction that locks
    /// every ref and compares it with its expected value, checked again under those locks
    /// ([`Store::check_under_locks`]) before it commits.
    pub(super) fn files_swap_many(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
        log_message: &str,
    ) -> Result<Swap> {
        let ref_edits: Vec<RefEdit> = edits
            .iter()
            .map(|(issue, new, expected)| RefEdit {
                change: Change::Update {
                    log: LogChange {
                        mode: RefLog::AndReference,
                        force_create_reflog: false,
                        message: log_message.into(),
                    },
                    expected: match expected {
                        Some(old) => PreviousValue::MustExistAndMatch(Target::Object(*old)),
                        None => PreviousValue::MustNotExist,
                    },
                    new: Target::Object(*new),
                },
                // Every issue id is a valid ref name component (`IssueId::new`).
                name: gix::refs::FullName::try_from(issue.ref_name()).expect("a valid ref name"),
                deref: false,
            })
            .collect();
        let fail = gix::lock::acquire::Fail::AfterDurationWithBackoff(self.lock_wait);
        let transaction = match self.repo.refs.transaction().prepare(ref_edits, fail, fail) {
            Ok(transaction) => transaction,
            Err(err) => return self.failed_swap(edits, err),
        };
        // The locks go with the transaction when it is dropped here.
        if let Some(answer) = self.check_under_locks(edits)? {
            return Ok(answer);
        }
        let committer = reflog_committer();
        let mut time_buf = Default::default();
        match transaction.commit(Some(committer.to_ref(&mut time_buf))) {
            Ok(_) => {
                self.after_swap(edits)?;
                Ok(Swap::Done)
            }
            Err(err) => self.failed_swap(edits, err),
        }
    }

    /// The files backend's side of [`Store::move_refs`].
    pub(super) fn files_move_refs(
        &self,
        moves: &[(String, ObjectId, Option<ObjectId>)],
        log_message: &str,
    ) -> Result<()> {
        let edits = moves
            .iter()
            .map(|(name, new, expected)| {
                let expected = match expected {
                    Some(old) => PreviousValue::MustExistAndMatch(Target::Object(*old)),
                    None => PreviousValue::MustNotExist,
                };
                bookkeeping_edit(name, *new, expected, log_message)
            })
            .collect::<Result<Vec<_>>>()?;
        let names = || moves.iter().map(|(name, _, _)| name.as_str());
        if moves.len() > 1 && self.commit_bookkeeping(edits.clone(), names()).is_ok() {
            return self.after_ref_update(names());
        }
        let mut first_error = None;
        for (edit, (name, _, _)) in edits.into_iter().zip(moves) {
            if let Err(e) = self.commit_bookkeeping(vec![edit], [name.as_str()]) {
                first_error.get_or_insert(e);
            }
        }
        self.after_ref_update(names())?;
        first_error.map_or(Ok(()), Err)
    }

    /// The files backend's side of [`Store::set_ref`].
    pub(super) fn files_set_ref(&self, name: &str, new: ObjectId, log_message: &str) -> Result<()> {
        let edit = bookkeeping_edit(name, new, PreviousValue::Any, log_message)?;
        self.commit_bookkeeping(vec![edit], [name])?;
        self.after_ref_update([name])
    }

    /// Runs `read`, a read of refs, so that packing cannot make it fail or miss a ref: with
    /// gix's `packed-refs` buffer the file on disk (see [`Store::refresh_packed_refs`]), and
    /// again when `packed-refs` changed while it ran or it failed, up to [`READ_ATTEMPTS`]
    /// times; the last answer stands.
    ///
    /// `git pack-refs --prune` (and `git gc`) first writes every loose ref into a new
    /// `packed-refs`, then deletes the loose files and the directories they leave empty. A
    /// reader that took the old `packed-refs` and then finds a loose file gone, or a
    /// directory it was listing gone, has missed a ref or fails on it; both happen only when
    /// `packed-refs` was replaced after the reader took it (so it differs now), or while the
    /// loose files were being deleted (an I/O error). Reading again then finds the ref in the
    /// new `packed-refs`. An answer given while `packed-refs` stayed the same is the truth at
    /// that moment, an absent ref included.
    ///
    /// A ref database other than files has no `packed-refs`: `read` runs once.
    pub(crate) fn read_refs<T>(
        &self,
        mut read: impl FnMut() -> std::result::Result<T, gix::Error>,
    ) -> std::result::Result<T, gix::Error> {
        if let RefDb::Git(_) = self.refdb {
            return read();
        }
        let mut attempt = 1;
        loop {
            let answer = self.refresh_packed_refs().and_then(|before| {
                let answer = read()?;
                Ok((before, answer))
            });
            let settled = match &answer {
                Ok((before, _)) => packed_refs_stat(&self.repo.refs.packed_refs_path())
                    .is_ok_and(|after| after == *before),
                Err(_) => false,
            };
            if settled || attempt >= READ_ATTEMPTS {
                return answer.map(|(_, answer)| answer);
            }
            settle(attempt);
            attempt += 1;
        }
    }

    /// Lists the direct (non-symbolic) refs under `namespace` as `(name without it, target)`,
    /// sorted by name, loose refs winning over packed ones; `None` to let gix do it, an error
    /// when a file or directory could not be read.
    pub(super) fn refs_fast(
        &self,
        namespace: &str,
    ) -> std::result::Result<Option<Vec<(String, ObjectId)>>, gix::Error> {
        let refs = &self.repo.refs;
        if self.ref_format() != "files" || refs.namespace.is_some() || !namespace.ends_with('/') {
            return Ok(None);
        }
        let Ok(prefix) = <&gix::path::RelativePath>::try_from(namespace) else {
            return Ok(None);
        };
        // Loose first: `git pack-refs` writes packed-refs before it deletes the loose files, so
        // reading in this order never misses a ref that is being packed.
        let mut loose = Vec::new();
        for r in refs
            .loose_iter_prefixed(prefix)
            .map_err(gix::Error::from_error)?
        {
            let r = r?;
            let name = r.name.as_bstr().to_str_lossy();
            if let (Some(short), gix::refs::Target::Object(id)) =
                (name.strip_prefix(namespace), &r.target)
            {
                loose.push((short.to_owned(), *id));
            }
        }
        loose.sort_by(|a, b| a.0.cmp(&b.0));
        let mut packed = Vec::new();
        if let Some(buffer) = refs.cached_packed_buffer()? {
            // gix has already stripped the header and sorted the records.
            let hex_len = self.repo.object_hash().len_in_hex();
            let mut rest: &[u8] = (**buffer).as_ref();
            while !rest.is_empty() {
                let end = rest.find_byte(b'\n').unwrap_or(rest.len());
                let line = rest[..end].strip_suffix(b"\r").unwrap_or(&rest[..end]);
                rest = rest.get(end + 1..).unwrap_or_default();
                if line.first() == Some(&b'^') {
                    continue; // the peeled target of the ref above
                }
                if line.get(hex_len) != Some(&b' ') {
                    return Ok(None);
                }
                let name = &line[hex_len + 1..];
                match name.strip_prefix(namespace.as_bytes()) {
                    Some(short) => {
                        let Ok(id) = ObjectId::from_hex(&line[..hex_len]) else {
                            return Ok(None);
                        };
                        packed.push((short.to_str_lossy().into_owned(), id));
                    }
                    None if name > namespace.as_bytes() => break,
                    None => {}
                }
            }
        }
        if loose.is_empty() {
            return Ok(Some(packed));
        }
        let mut out = Vec::with_capacity(loose.len() + packed.len());
        let mut packed = packed.into_iter().peekable();
        for (name, id) in loose {
            while let Some(p) = packed.next_if(|p| p.0 < name) {
                out.push(p);
            }
            packed.next_if(|p| p.0 == name);
            out.push((name, id));
        }
        out.extend(packed);
        Ok(Some(out))
    }

    /// Makes gix read `packed-refs` again if the file changed since this store last made
    /// sure of it, and returns what the file was then (`None`: absent). gix reloads it only
    /// when its modification time is newer, which a rewrite within the same clock tick (or
    /// with an older time) does not show; git compares the file's identity, size and times,
    /// and so does this. The file is looked at before it is read, so a rewrite in between
    /// only makes the next call read it once more.
    fn refresh_packed_refs(&self) -> std::result::Result<Option<PackedRefsStat>, gix::Error> {
        if let RefDb::Git(_) = self.refdb {
            return Ok(None);
        }
        let now =
            packed_refs_stat(&self.repo.refs.packed_refs_path()).map_err(gix::Error::from_error)?;
        if self.packed_refs_seen.get() == Some(now) {
            return Ok(now);
        }
        if now.is_some() {
            self.repo.refs.force_refresh_packed_buffer()?;
        }
        self.packed_refs_seen.set(Some(now));
        Ok(now)
    }

    /// Turns the error of a swap into its answer: a lost race, a lock held too long, a ref
    /// clash, or a git error.
    fn failed_swap(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
        err: gix::Error,
    ) -> Result<Swap> {
        if err
            .downcast_any_ref::<gix::refs::file::transaction::prepare::ReferenceOutOfDate>()
            .is_some()
            || err
                .downcast_any_ref::<gix::refs::file::transaction::prepare::MustNotExist>()
                .is_some()
            || err.classify().is_conflict()
            // A ref expected to exist that was gone when its lock was taken (deleted by a
            // fold, or packed by `git pack-refs` after gix read `packed-refs`): decide again.
            || err.is_not_found()
        {
            return Ok(Swap::Lost);
        }
        // A directory made for a ref's lock was removed before the lock file went in: a
        // concurrent writer of a ref with the directory's name clears an empty directory out
        // of its way, as git does, and so do `git pack-refs --prune` and a lock dropped
        // without a commit. Decide again, as git retries: by then the way is clear, or the
        // clash is there to see.
        let io = err.downcast_any_ref::<std::io::Error>().map(|e| e.kind());
        if io == Some(std::io::ErrorKind::NotFound) {
            return Ok(Swap::Lost);
        }
        // The same race the other way round: making that directory found something there
        // (EEXIST), and by the time it was looked at, `git pack-refs --prune` or a fold had
        // removed it empty, so gix reports no directory (NotADirectory). Unless a ref is in
        // the way (reported below), the way is clear on the next try. (An EEXIST of the
        // lock file itself is a held lock, reported as one.)
        if io == Some(std::io::ErrorKind::NotADirectory) && !self.any_clash(edits)? {
            return Ok(Swap::Lost);
        }
        if err.classify().is_retryable() {
            let common = self.repo.common_dir();
            return Err(Error::Locked {
                path: self.held_lock(edits.iter().map(|(i, _, _)| common.join(i.ref_name()))),
                waited_ms: self.lock_wait.as_millis(),
            });
        }
        // A ref created meanwhile by another process as a file where this one needs a
        // directory (or the reverse) fails late, as an I/O error: name the clash.
        for (issue, _, expected) in edits {
            if expected.is_none() {
                if let Some(existing) = self.clash(issue)?.or_else(|| self.clash_on_disk(issue)) {
                    return Err(Error::RefClash {
                        issue: issue.to_string(),
                        existing,
                    });
                }
            }
        }
        Err(Error::git(
            format!("cannot update {}", edits[0].0.ref_name()),
            err,
        ))
    }

    /// Whether a ref of `edits` that must be created has another ref in its way, a file
    /// where it needs a directory or the reverse ([`Error::RefClash`]).
    fn any_clash(&self, edits: &[(IssueId, ObjectId, Option<ObjectId>)]) -> Result<bool> {
        for (issue, _, expected) in edits {
            if expected.is_none()
                && (self.clash(issue)?.is_some() || self.clash_on_disk(issue).is_some())
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Returns the lock file that kept a ref update of the files `refs` (paths of the refs
    /// themselves) from going through: the first of their locks that exists, else
    /// `packed-refs.lock` if it exists (a multi-ref transaction also locks `packed-refs`),
    /// else the first ref's lock. Locks this process held are gone by then, so a lock found
    /// is someone else's.
    fn held_lock(&self, refs: impl IntoIterator<Item = PathBuf>) -> PathBuf {
        let locks: Vec<PathBuf> = refs
            .into_iter()
            .map(|r| {
                let mut lock = r.into_os_string();
                lock.push(".lock");
                PathBuf::from(lock)
            })
            .collect();
        let packed = self.repo.common_dir().join("packed-refs.lock");
        locks
            .iter()
            .chain(std::iter::once(&packed))
            .find(|lock| lock.exists())
            .or(locks.first())
            .cloned()
            .unwrap_or(packed)
    }

    /// Returns the ref path that makes `issue`'s loose ref impossible on disk right now: a
    /// directory where its file must go (another ledger being created beneath it), or a file
    /// where one of its directories must go.
    fn clash_on_disk(&self, issue: &IssueId) -> Option<String> {
        let root = self.repo.common_dir();
        if root.join(issue.ref_name()).is_dir() {
            return Some(format!("{}/ (another ledger beneath it)", issue.ref_name()));
        }
        issue
            .ancestors()
            .map(|a| format!("{REF_PREFIX}{a}"))
            .find(|name| root.join(name).is_file())
    }

    /// Commits `edits` of bookkeeping refs `names` in one gix transaction, logging git-lease
    /// as the committer where git would write a reflog.
    fn commit_bookkeeping<'a>(
        &self,
        edits: Vec<RefEdit>,
        names: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<()> {
        let fail = gix::lock::acquire::Fail::AfterDurationWithBackoff(self.lock_wait);
        let committer = reflog_committer();
        let mut time_buf = Default::default();
        self.repo
            .refs
            .transaction()
            .prepare(edits, fail, fail)
            .and_then(|t| t.commit(Some(committer.to_ref(&mut time_buf))))
            .map(|_| ())
            .map_err(|e| {
                let common = self.repo.common_dir();
                if e.classify().is_retryable() {
                    Error::Locked {
                        path: self.held_lock(names.clone().into_iter().map(|n| common.join(n))),
                        waited_ms: self.lock_wait.as_millis(),
                    }
                } else {
                    let shown: Vec<&str> = names.into_iter().collect();
                    Error::git(format!("cannot update {}", shown.join(", ")), e)
                }
            })
    }
}

/// `(dev, ino, size, mtime, mtime_nsec, ctime_nsec)` of `packed-refs`.
pub(crate) type PackedRefsStat = (u64, u64, u64, i64, i64, i64);

/// Returns the identity, size and times of `packed-refs` at `path` (`None`: absent).
fn packed_refs_stat(path: &Path) -> std::io::Result<Option<PackedRefsStat>> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some((
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime_nsec(),
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A change of the bookkeeping ref `name` to `new`, expecting `expected`, logged with
/// `log_message` where git would write a reflog.
fn bookkeeping_edit(
    name: &str,
    new: ObjectId,
    expected: PreviousValue,
    log_message: &str,
) -> Result<RefEdit> {
    let full = gix::refs::FullName::try_from(name)
        .map_err(|e| Error::InvalidInput(format!("invalid ref name {name:?}: {e}")))?;
    Ok(RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: log_message.into(),
            },
            expected,
            new: Target::Object(new),
        },
        name: full,
        deref: false,
    })
}

/// The identity of the reflog entries git-lease writes (when `core.logAllRefUpdates=always`,
/// or a ref's reflog exists), for ledger refs and bookkeeping refs alike: git-lease, as in
/// the committer of every ledger commit, so that an update never depends on a configured
/// user (which a server or a CI runner often lacks) and never fails after a remote accepted
/// it. The time is now, in UTC: finding the local zone scans the whole time zone database,
/// which cost more than the rest of an acquire.
fn reflog_committer() -> gix::actor::Signature {
    gix::actor::Signature {
        name: "git-lease".into(),
        email: "git-lease@localhost".into(),
        time: gix::date::Time::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0)),
            0,
        ),
    }
}
