//! The repository's lease refs and ledger commits, and the compare-and-swap: the only module
//! that uses gix for them (other modules run the git command line for what gix cannot do,
//! through `src/git.rs`; reftable refs go through `src/store/refdb.rs`).
//!
//! Every ref read and write goes through one seam, the store's `RefDb`, chosen once from
//! `extensions.refStorage`: git's files backend is read and written in-process (below), any
//! other backend (reftable, git 3.0's default) through git's own commands
//! (`src/store/refdb.rs`), with the same compare-and-swap and the same answers, so that no lease
//! rule is written twice. Objects are read and written in-process in both cases.
//!
//! With the files backend everything is done in-process, with gix for reading and for
//! multi-ref transactions. Two writes follow git's file formats directly, because gix's way
//! of doing them cost more than the rest of a claim: loose objects (`src/store/loose.rs`) and the
//! compare-and-swap of a single ref (`Store::swap`, locked with gix's lock files as git's
//! files backend does it). A ledger commit has exactly one tree entry, `lease.json`, and at
//! most one parent; [`Store::entry`] refuses anything else, naming the commit, so a corrupt
//! ledger is an error and never a guess; and only a real absence is one: every read of refs
//! (`Store::read_refs`) and of objects (`Store::lookup`) is made again when `git gc`, `git
//! repack` or `git pack-refs` moved what it reads meanwhile.

pub mod durability;
pub(crate) mod loose;
pub(crate) mod pack;
mod refdb;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};
use crate::lease::{self, Lease, LEASE_FILE};
use crate::liveness::{Current, Observation};
use crate::pack::WrittenPack;
use refdb::{Expect, Failure, GitRefs};

/// One commit of a tenure ledger, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The commit id.
    pub commit: ObjectId,
    /// Its parent, the previous event (none for the first).
    pub parent: Option<ObjectId>,
    /// The state it records.
    pub lease: Lease,
    /// What the reader saw beside the record (nothing, until a ledger with local liveness
    /// observes it: [`crate::Ledger::observe`]).
    pub seen: Observation,
}

impl Entry {
    /// A commit read from a ledger, with nothing observed beside its record yet.
    pub fn recorded(commit: ObjectId, parent: Option<ObjectId>, lease: Lease) -> Entry {
        Entry {
            commit,
            parent,
            lease,
            seen: Observation::NONE,
        }
    }

    /// Returns the state the rules decide on: the record and what its reader saw.
    pub fn current(&self) -> Current<'_> {
        Current {
            lease: &self.lease,
            seen: self.seen,
        }
    }
}

/// What happened to a compare-and-swap of a lease ref.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Swap {
    /// The ref now points at the new commit.
    Done,
    /// The ref was not at the expected value: someone else moved it first.
    Lost,
}

/// The objects of one event: blob, tree and commit.
const OBJECTS_PER_EVENT: usize = 3;

/// Ledger objects encoded and hashed but not yet written: [`Store::stage`] adds an event's,
/// [`Store::write_staged`] writes them all at once.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    objects: Vec<(gix::objs::Kind, Vec<u8>)>,
    ids: Vec<ObjectId>,
    seen: std::collections::HashSet<ObjectId>,
}

impl Staged {
    /// Adds an object unless it is already staged, and returns its id.
    fn add(
        &mut self,
        hash: gix::hash::Kind,
        kind: gix::objs::Kind,
        data: Vec<u8>,
    ) -> Result<ObjectId> {
        let id = gix::objs::compute_hash(hash, kind, &data).map_err(|e| Error::Git {
            context: format!("cannot hash a ledger {kind}"),
            message: e.to_string(),
        })?;
        if self.seen.insert(id) {
            self.objects.push((kind, data));
            self.ids.push(id);
        }
        Ok(id)
    }
}

/// Where a repository's refs are read and written: the one seam every ref read and write of a
/// [`Store`] goes through ([`Store::tip_of`], [`Store::refs_under`], [`Store::clash`],
/// [`Store::swap`], [`Store::swap_many`], [`Store::move_refs`], [`Store::set_ref`],
/// [`Store::head_name`]).
#[derive(Debug)]
enum RefDb {
    /// git's files backend (loose refs and `packed-refs`): in-process, with gix and git's
    /// lock files.
    Files,
    /// Any other backend git knows, reftable: through git's commands ([`refdb`]).
    Git(GitRefs),
}

/// A repository's lease refs and objects.
pub struct Store {
    repo: gix::Repository,
    refdb: RefDb,
    lock_wait: Duration,
    quarantine: Option<gix::odb::Handle>,
    fsync: crate::durability::Fsync,
    auto_gc: crate::autogc::AutoGc,
    /// The identity, size and times of `packed-refs` (`None`: absent) when this store last
    /// made gix read it; see [`Store::refresh_packed_refs`].
    packed_refs_seen: std::cell::Cell<Option<Option<PackedRefsStat>>>,
    /// The pack [`Store::write_staged`] wrote last, kept (`.keep`) until a ref update makes
    /// its objects reachable, or until the store is dropped.
    kept_pack: std::cell::RefCell<Option<WrittenPack>>,
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

/// The reads [`Store::lookup`] makes, by any handle of an object database.
trait Objects: gix::objs::Find + gix::objs::FindHeader {}

impl<T: gix::objs::Find + gix::objs::FindHeader> Objects for T {}

/// The one mode `lease.json` may have in a ledger tree: a regular, non-executable file.
const LEASE_FILE_MODE: u16 = 0o100644;

/// How many times a read of refs or objects that raced with packing is made (see
/// [`Store::read_refs`] and [`Store::find`]).
const READ_ATTEMPTS: usize = 10;

/// Waits before attempt `attempt` (from 1) of a read that raced with packing: a moment that
/// doubles from 1 ms, so that a `git pack-refs --prune` deleting loose refs one by one has
/// finished before the walk is made again (about 0.5 s in all, only ever spent while packing).
fn settle(attempt: usize) {
    let ms = 1u64 << attempt.saturating_sub(1).min(8);
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Below this many ledgers to decode, [`Store::entries`] stays on one thread.
const PARALLEL_DECODE_MIN: usize = 1024;

/// The most threads [`Store::entries`] decodes on.
const MAX_DECODE_THREADS: usize = 8;

/// How long to wait for a ref lock held by another process before reporting it.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(3);

impl Store {
    /// Opens the repository containing `dir` the way git finds it (searching upwards and
    /// honouring `GIT_DIR`).
    ///
    /// Returns [`Error::NotARepository`] when there is none, and [`Error::RefStorage`] for a
    /// repository whose ref storage is neither files nor reftable.
    pub fn discover(dir: &Path) -> Result<Store> {
        let repo = gix::ThreadSafeRepository::discover_with_environment_overrides(dir)
            .map_err(|e| Error::NotARepository {
                path: dir.to_owned(),
                message: first_line(&format!("{e}")),
            })?
            .to_thread_local();
        Store::from_repo(repo)
    }

    /// Opens exactly the repository at `path` (a work tree or a git dir), without searching.
    pub fn open(path: &Path) -> Result<Store> {
        let repo = gix::open(path).map_err(|e| Error::NotARepository {
            path: path.to_owned(),
            message: first_line(&format!("{e}")),
        })?;
        Store::from_repo(repo)
    }

    /// Wraps an open repository, with the ref database its `extensions.refStorage` names:
    /// files (the default) in-process, reftable through git.
    pub fn from_repo(repo: gix::Repository) -> Result<Store> {
        let config = repo.config_snapshot();
        let setting = |key: &str| config.string(key).map(|s| s.to_str_lossy().into_owned());
        let lock_wait =
            crate::config::duration("lease.lockTimeout", setting("lease.lockTimeout").as_deref())?
                .unwrap_or(DEFAULT_LOCK_WAIT);
        let storage = setting("extensions.refStorage").map(|s| s.to_ascii_lowercase());
        let refdb = match storage.as_deref() {
            None | Some("files") => RefDb::Files,
            Some("reftable") => RefDb::Git(GitRefs::new(
                repo.git_dir(),
                repo.common_dir(),
                repo.refs
                    .namespace
                    .as_ref()
                    .map(|ns| ns.as_bstr().to_str_lossy().into_owned()),
                lock_wait,
            )),
            Some(other) => {
                return Err(Error::RefStorage {
                    path: repo.git_dir().to_owned(),
                    format: other.to_owned(),
                })
            }
        };
        Ok(Store {
            refdb,
            fsync: crate::durability::Fsync::from_repo(&repo)?,
            auto_gc: crate::autogc::AutoGc::from_repo(&repo)?,
            repo,
            lock_wait,
            quarantine: None,
            packed_refs_seen: std::cell::Cell::new(None),
            kept_pack: std::cell::RefCell::new(None),
        })
    }

    /// Also reads objects from `GIT_QUARANTINE_PATH`, where git keeps a push's objects while
    /// its pre-receive and update hooks run. Returns the store unchanged outside a hook.
    pub fn with_push_quarantine(mut self) -> Result<Store> {
        if let Some(dir) = std::env::var_os("GIT_QUARANTINE_PATH") {
            let odb = gix::odb::at(std::path::PathBuf::from(dir), self.repo.object_hash())
                .map_err(|e| Error::Io {
                    context: "cannot open the push quarantine".into(),
                    source: e,
                })?;
            self.quarantine = Some(odb);
        }
        Ok(self)
    }

    /// Sets what the write path fsyncs, whatever the configuration says (see
    /// [`crate::durability`]): for an embedder that decides durability itself.
    pub fn with_fsync(mut self, fsync: crate::durability::Fsync) -> Store {
        self.fsync = fsync;
        self
    }

    /// Returns what the write path fsyncs.
    pub fn fsync(&self) -> crate::durability::Fsync {
        self.fsync
    }

    /// Returns the underlying repository. Its objects and configuration are this store's; its
    /// refs only when [`Store::ref_format`] is `files` (gix cannot read reftable).
    pub fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    /// Returns the ref storage format of the repository: `files` or `reftable`.
    pub fn ref_format(&self) -> &'static str {
        match self.refdb {
            RefDb::Files => "files",
            RefDb::Git(_) => "reftable",
        }
    }

    /// Returns the ref `HEAD` names (`refs/heads/…`), or `None` when it is detached.
    pub fn head_name(&self) -> Result<Option<String>> {
        match &self.refdb {
            RefDb::Files => Ok(self
                .repo
                .head_name()
                .map_err(|e| Error::git("cannot read HEAD", e))?
                .map(|name| name.as_bstr().to_str_lossy().into_owned())),
            RefDb::Git(git) => git.head(),
        }
    }

    /// Returns the repository's git dir.
    pub fn git_dir(&self) -> &Path {
        self.repo.git_dir()
    }

    /// Returns a string value of the repository's configuration (all scopes).
    pub fn config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .string(key)
            .map(|s| s.to_str_lossy().into_owned())
    }

    /// Returns a string value from the repository's own configuration file (`$GIT_DIR/config`)
    /// alone, ignoring the system, global and environment scopes: for settings that whoever
    /// runs a command must not be able to override, such as the server hook's test clock.
    pub fn repository_config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .plumbing()
            .string_filter(key, |meta| meta.source == gix::config::Source::Local)
            .map(|s| s.to_str_lossy().into_owned())
    }

    /// Returns the names of the configured remotes (those with a `remote.<name>.url`).
    pub fn remote_names(&self) -> Vec<String> {
        self.repo
            .remote_names()
            .into_iter()
            .map(|name| name.to_str_lossy().into_owned())
            .filter(|name| self.config_string(&format!("remote.{name}.url")).is_some())
            .collect()
    }

    /// Returns every value of a multi-valued configuration key, in order.
    pub fn config_strings(&self, key: &str) -> Vec<String> {
        self.repo
            .config_snapshot()
            .strings(key)
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.to_str_lossy().into_owned())
            .collect()
    }

    /// Returns the commit `refs/leases/<issue>` points at, if the ref exists.
    pub fn tip(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        self.tip_of(&issue.ref_name())
    }

    /// Returns the commit the ref `name` points at, if it exists.
    ///
    /// Read as `Store::read_refs` reads: a ref that `git pack-refs` moves meanwhile is found
    /// where it went.
    pub fn tip_of(&self, name: &str) -> Result<Option<ObjectId>> {
        if let RefDb::Git(git) = &self.refdb {
            return match git.read(name)? {
                None => Ok(None),
                Some(refdb::Target::Object(id)) => Ok(Some(id)),
                Some(refdb::Target::Symbolic(to)) => Err(symbolic(name, &to)),
            };
        }
        let found = self
            .read_refs(|| {
                self.repo
                    .try_find_reference(name)
                    .map(|r| r.map(gix::Reference::detach))
            })
            .map_err(|e| Error::git(format!("cannot read {name}"), e))?;
        match found {
            None => Ok(None),
            Some(r) => match r.target {
                Target::Object(id) => Ok(Some(id)),
                Target::Symbolic(to) => Err(symbolic(name, &to.as_bstr().to_str_lossy())),
            },
        }
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

    /// Reads and checks one ledger commit of `issue`.
    ///
    /// Returns [`Error::Corrupt`] naming the commit when it is not a commit, has more than one
    /// parent, has a tree other than exactly `lease.json`, or its `lease.json` is invalid, of
    /// an unknown version, or for another issue.
    pub fn entry(&self, issue: &str, commit: ObjectId) -> Result<Entry> {
        let corrupt = |reason: String| Error::Corrupt {
            issue: issue.to_owned(),
            commit: commit.to_string(),
            reason,
        };
        let raw = self.raw_entry(commit).map_err(corrupt)?;
        if raw.parents.len() > 1 {
            return Err(corrupt(format!(
                "a ledger commit has at most one parent, this one has {}",
                raw.parents.len()
            )));
        }
        let bytes = raw.lease_json.map_err(corrupt)?;
        let lease = lease::decode(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if lease.issue != issue {
            return Err(corrupt(format!(
                "lease.json is for issue {:?}, not {issue:?}",
                lease.issue
            )));
        }
        Ok(Entry::recorded(commit, raw.parents.first().copied(), lease))
    }

    /// Decodes the ledger tips `wanted` (issue, tip commit) as [`Store::entry`] does, in order,
    /// on several threads when there are many: a listing without its cache decodes three
    /// objects per lease, and that work divides. The first error in `wanted`'s order wins.
    pub fn entries(&self, wanted: &[(String, ObjectId)]) -> Result<Vec<Entry>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_DECODE_THREADS);
        if wanted.len() < PARALLEL_DECODE_MIN || threads < 2 || self.quarantine.is_some() {
            return wanted
                .iter()
                .map(|(issue, tip)| self.entry(issue, *tip))
                .collect();
        }
        let mut parts = wanted.chunks(wanted.len().div_ceil(threads));
        let first = parts.next().unwrap_or_default();
        let git_dir = self.repo.git_dir().to_owned();
        let options = self.repo.open_options().clone();
        std::thread::scope(|scope| {
            let others: Vec<_> = parts
                .map(|part| {
                    let (git_dir, options) = (git_dir.clone(), options.clone());
                    scope.spawn(move || -> Result<Vec<Entry>> {
                        // gix's Repository stays on its thread (built without gix's
                        // `parallel` feature): each thread opens the repository again.
                        let repo = gix::open_opts(&git_dir, options).map_err(|e| {
                            Error::NotARepository {
                                path: git_dir.clone(),
                                message: first_line(&format!("{e}")),
                            }
                        })?;
                        let store = Store::from_repo(repo)?;
                        part.iter()
                            .map(|(issue, tip)| store.entry(issue, *tip))
                            .collect()
                    })
                })
                .collect();
            // One vector for all, filled in order: the threads' parts are moved into it. The
            // first failure in order is the answer; later parts are still joined.
            let mut out = Vec::with_capacity(wanted.len());
            let mut failure = first
                .iter()
                .try_for_each(|(issue, tip)| {
                    out.push(self.entry(issue, *tip)?);
                    Ok(())
                })
                .err();
            for handle in others {
                let part = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                match part {
                    Ok(part) if failure.is_none() => out.extend(part),
                    Ok(_) => {}
                    Err(e) => failure = failure.or(Some(e)),
                }
            }
            match failure {
                Some(e) => Err(e),
                None => Ok(out),
            }
        })
    }

    /// Reads a commit's parents and its `lease.json` bytes without judging them, for
    /// verification that wants to report every problem by its own rule.
    pub(crate) fn raw_entry(&self, commit: ObjectId) -> std::result::Result<RawEntry, String> {
        let (kind, data) = self.find(commit)?;
        if kind != gix::object::Kind::Commit {
            return Err(format!("it is a {kind}, not a commit"));
        }
        let decoded = gix::objs::CommitRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| format!("cannot decode the commit: {e}"))?;
        let tree_id = decoded.tree();
        let parents: Vec<ObjectId> = decoded.parents().collect();
        let lease_json = self.lease_blob(tree_id);
        Ok(RawEntry {
            parents,
            lease_json,
        })
    }

    /// Reads one object's kind and bytes; see [`Store::lookup`].
    fn find(&self, id: ObjectId) -> std::result::Result<(gix::object::Kind, Vec<u8>), String> {
        let mut buf = Vec::new();
        let kind = self.lookup(id, |odb| {
            Ok(odb.try_find(&id, &mut buf)?.map(|data| data.kind))
        })?;
        Ok((kind, buf))
    }

    /// Reads one object's kind and size without its content (for a loose object, the start
    /// of its file; for a packed one, its entry's header); see [`Store::lookup`].
    fn header(&self, id: ObjectId) -> std::result::Result<gix::objs::Header, String> {
        self.lookup(id, |odb| odb.try_header(&id))
    }

    /// Looks `id` up with `look`: in the repository's object database, and inside a server
    /// hook in the push's quarantine too (which gix does not see by itself).
    ///
    /// An object that is not found, or that fails to read, is looked up again in an object
    /// database opened afresh, up to [`READ_ATTEMPTS`] times in all: `git repack -d` and
    /// `git gc` move objects from loose files into packs and from packs into new ones under
    /// a reader's feet (the new pack is in place before the old copy goes), and an open
    /// handle's view of them can lag behind the disk. Only an object that no fresh look finds
    /// is missing; the last error stands for one that cannot be read.
    fn lookup<T>(
        &self,
        id: ObjectId,
        mut look: impl FnMut(&dyn Objects) -> std::result::Result<Option<T>, gix::Error>,
    ) -> std::result::Result<T, String> {
        let mut failure = None;
        for attempt in 0..READ_ATTEMPTS {
            let fresh;
            let odb: &dyn Objects = if attempt == 0 {
                &self.repo.objects
            } else {
                let store = self.repo.objects.store_ref();
                match gix::odb::at_opts(
                    store.path(),
                    self.object_hash(),
                    store.replacements(),
                    Default::default(),
                ) {
                    Ok(handle) => {
                        fresh = handle;
                        &fresh
                    }
                    Err(e) => {
                        failure = Some(format!("cannot open the object database: {e}"));
                        continue;
                    }
                }
            };
            match look(odb) {
                Ok(Some(found)) => return Ok(found),
                Ok(None) => {}
                Err(e) => failure = Some(format!("cannot read object {id}: {e}")),
            }
            if attempt == 0 {
                if let Some(quarantine) = &self.quarantine {
                    match look(quarantine) {
                        Ok(Some(found)) => return Ok(found),
                        Ok(None) => {}
                        Err(e) => failure = Some(format!("cannot read object {id}: {e}")),
                    }
                }
            }
        }
        Err(failure.unwrap_or_else(|| format!("object {id} is missing")))
    }

    fn lease_blob(&self, tree_id: ObjectId) -> std::result::Result<Vec<u8>, String> {
        let (kind, data) = self.find(tree_id).map_err(|e| format!("its tree: {e}"))?;
        if kind != gix::object::Kind::Tree {
            return Err(format!("its tree {tree_id} is a {kind}"));
        }
        let decoded = gix::objs::TreeRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| format!("cannot decode its tree: {e}"))?;
        let names: Vec<String> = decoded
            .entries
            .iter()
            .map(|e| e.filename.to_str_lossy().into_owned())
            .collect();
        let entry = match decoded.entries.as_slice() {
            [only] if only.filename == LEASE_FILE => only,
            [] => return Err(format!("its tree has no {LEASE_FILE}")),
            _ if !names.iter().any(|n| n == LEASE_FILE) => {
                return Err(format!(
                    "its tree has no {LEASE_FILE} (it has: {})",
                    names.join(", ")
                ))
            }
            _ => {
                return Err(format!(
                    "its tree must hold only {LEASE_FILE} as a regular file (it has: {})",
                    names.join(", ")
                ))
            }
        };
        // Exactly a regular, non-executable file, as this build writes it: not an executable,
        // a symbolic link, a submodule or a directory, nor git's old group-writable mode.
        if entry.mode.value() != LEASE_FILE_MODE {
            let mut octal = [0; 6];
            return Err(format!(
                "{LEASE_FILE} must be a regular file (mode 100644), not mode {}",
                entry.mode.as_bytes(&mut octal)
            ));
        }
        let id = entry.oid.to_owned();
        // The size is checked from the object's header, before its content is read.
        let header = self.header(id).map_err(|e| format!("{LEASE_FILE}: {e}"))?;
        if header.kind != gix::object::Kind::Blob {
            return Err(format!("{LEASE_FILE} is a {}, not a file", header.kind));
        }
        if header.size > lease::MAX_LEASE_JSON_BYTES {
            return Err(lease::DecodeError::TooLarge(header.size).to_string());
        }
        let (kind, data) = self.find(id).map_err(|e| format!("{LEASE_FILE}: {e}"))?;
        if kind != gix::object::Kind::Blob {
            return Err(format!("{LEASE_FILE} is a {kind}, not a file"));
        }
        Ok(data)
    }

    /// Returns the current entry of `issue`, if its ref exists.
    pub fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        self.tip(issue)?
            .map(|tip| self.entry(issue.as_str(), tip))
            .transpose()
    }

    /// Returns every lease ref as `(issue, tip)`, sorted by issue.
    pub fn lease_refs(&self) -> Result<Vec<(String, ObjectId)>> {
        self.refs_under(REF_PREFIX)
    }

    /// Returns every ref under `prefix` (which ends with `/`) as `(name without prefix, tip)`,
    /// read as `Store::read_refs` reads.
    pub fn refs_under(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        if let RefDb::Git(git) = &self.refdb {
            let mut out: Vec<(String, ObjectId)> = git
                .list(&[prefix])?
                .into_iter()
                .filter_map(|(name, target)| match target {
                    refdb::Target::Object(id) => Some((name.strip_prefix(prefix)?.to_owned(), id)),
                    refdb::Target::Symbolic(_) => None,
                })
                .collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            return Ok(out);
        }
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

    /// Returns every direct ref under `namespace` as `(name without it, target)`, sorted by
    /// name: the cheap way where it can (loose refs through gix, then `packed-refs` line by
    /// line, without gix's per-ref validation and conversions), else as
    /// [`Store::refs_under`] does (a ref namespace, a line that reader does not expect, or a
    /// ref storage other than files). Either is read as `Store::read_refs` reads, so that
    /// `git pack-refs` running meanwhile hides no ref.
    pub fn refs_listed(&self, namespace: &str) -> Result<Vec<(String, ObjectId)>> {
        match self.read_refs(|| self.refs_fast(namespace)) {
            Ok(Some(refs)) => Ok(refs),
            // Unusual, or failing each time: gix's reader decides, or says what is wrong.
            Ok(None) | Err(_) => self.refs_under(namespace),
        }
    }

    /// Lists the direct (non-symbolic) refs under `namespace` as `(name without it, target)`,
    /// sorted by name, loose refs winning over packed ones; `None` to let gix do it, an error
    /// when a file or directory could not be read.
    fn refs_fast(
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

    /// Returns the existing ref that `issue` would clash with as file versus directory.
    pub(crate) fn clash(&self, issue: &IssueId) -> Result<Option<String>> {
        if let RefDb::Git(git) = &self.refdb {
            // The ancestors alone (not their other leases, which may be many), then what is
            // below the issue: a listing each, the first only for an id with a `/`.
            let ancestors: Vec<String> = issue
                .ancestors()
                .map(|a| format!("{REF_PREFIX}{a}"))
                .collect();
            let found = git.existing(&ancestors)?;
            if let Some(hit) = ancestors.into_iter().find(|a| found.contains(a)) {
                return Ok(Some(hit));
            }
            let below = format!("{}/", issue.ref_name());
            return Ok(git
                .list(&[&below])?
                .into_iter()
                .next()
                .map(|(name, _)| name));
        }
        for ancestor in issue.ancestors() {
            let name = format!("{REF_PREFIX}{ancestor}");
            if self.tip_of(&name)?.is_some() {
                return Ok(Some(name));
            }
        }
        let below = format!("{}/", issue.ref_name());
        Ok(self
            .refs_under(&below)?
            .into_iter()
            .next()
            .map(|(rest, _)| format!("{below}{rest}")))
    }

    /// Returns [`Error::RefClash`] if a new ref for `issue` would clash with an existing one.
    pub(crate) fn ensure_no_clash(&self, issue: &IssueId) -> Result<()> {
        match self.clash(issue)? {
            Some(existing) => Err(Error::RefClash {
                issue: issue.to_string(),
                existing,
            }),
            None => Ok(()),
        }
    }

    /// Returns the ledger of `issue` from `tip` back to its first commit, newest first.
    pub fn history(&self, issue: &str, tip: Option<ObjectId>) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut next = tip;
        while let Some(commit) = next {
            let entry = self.entry(issue, commit)?;
            next = entry.parent;
            out.push(entry);
        }
        Ok(out)
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

    /// Writes the blob, tree and commit recording `lease` on top of `parent`, as loose
    /// objects, made durable when the configuration asks for it.
    ///
    /// The commit is authored by the actor (the holder, or whoever acted) and committed by
    /// git-lease, both at the event's own time, so a ledger is reproducible from its inputs.
    pub(crate) fn write(&self, lease: &Lease, parent: Option<ObjectId>) -> Result<ObjectId> {
        let mut staged = Staged::default();
        let commit = self.stage(&mut staged, lease, parent)?;
        self.write_staged(&staged)?;
        Ok(commit)
    }

    /// Encodes and hashes the blob, tree and commit of an event into `staged`, without
    /// writing anything, and returns the commit id.
    pub(crate) fn stage(
        &self,
        staged: &mut Staged,
        lease: &Lease,
        parent: Option<ObjectId>,
    ) -> Result<ObjectId> {
        let blob = staged.add(self.object_hash(), gix::objs::Kind::Blob, lease.to_json())?;
        let tree = gix::objs::Tree {
            entries: vec![gix::objs::tree::Entry {
                mode: gix::objs::tree::EntryKind::Blob.into(),
                filename: LEASE_FILE.into(),
                oid: blob,
            }],
        };
        let tree = staged.add(self.object_hash(), gix::objs::Kind::Tree, encode(&tree)?)?;
        let time = gix::date::Time::new(lease.at.timestamp(), 0);
        let actor = lease.actor().unwrap_or("git-lease");
        let commit = gix::objs::Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: signature(actor, time),
            committer: gix::actor::Signature {
                name: "git-lease".into(),
                email: "git-lease@localhost".into(),
                time,
            },
            encoding: None,
            message: commit_message(lease).into(),
            extra_headers: Vec::new(),
        };
        staged.add(
            self.object_hash(),
            gix::objs::Kind::Commit,
            encode(&commit)?,
        )
    }

    /// Writes `staged` and makes it durable when the configuration asks for it: one event's
    /// objects as loose objects, more as one pack ([`crate::pack`]), which keeps its `.keep`
    /// until the next ref update of this store (or the store's end).
    pub(crate) fn write_staged(&self, staged: &Staged) -> Result<()> {
        let objects_dir = self.repo.objects.store_ref().path();
        if staged.objects.len() <= OBJECTS_PER_EVENT {
            for ((kind, data), id) in staged.objects.iter().zip(&staged.ids) {
                crate::loose::write(objects_dir, *id, *kind, data, self.fsync.objects)?;
            }
            self.auto_gc.note_written(&staged.ids);
            self.fsync.sync_objects(objects_dir, &staged.ids)?;
            return Ok(());
        }
        // An earlier attempt's pack is garbage now (or the very same pack, which keeps its
        // own `.keep` again below).
        self.kept_pack.borrow_mut().take();
        let pack = crate::pack::write(objects_dir, self.object_hash(), &staged.objects)?;
        self.fsync.sync_pack(&pack.pack, &pack.index)?;
        self.auto_gc.note_pack_written();
        *self.kept_pack.borrow_mut() = Some(pack);
        Ok(())
    }

    fn object_hash(&self) -> gix::hash::Kind {
        self.repo.object_hash()
    }

    /// Moves `refs/leases/<issue>` from `expected` (absent when `None`) to `new`, atomically.
    ///
    /// Returns [`Swap::Lost`] when the ref was not at `expected`. A lock held by another
    /// process is waited on for the lock timeout, then reported as [`Error::Locked`].
    pub(crate) fn swap(
        &self,
        issue: &IssueId,
        new: ObjectId,
        expected: Option<ObjectId>,
        log_message: &str,
    ) -> Result<Swap> {
        let edit = [(issue.clone(), new, expected)];
        if let RefDb::Git(git) = &self.refdb {
            let name = issue.ref_name();
            return match git.update(
                &[(&name, new, expected.into())],
                log_message,
                self.fsync.refs,
            ) {
                Ok(()) => {
                    self.after_swap(&edit)?;
                    Ok(Swap::Done)
                }
                // As with the files backend: a ref already at the new commit is a done swap.
                Err(Failure::Lost) if self.tip(issue)? == Some(new) => {
                    self.after_swap(&edit)?;
                    Ok(Swap::Done)
                }
                Err(failure) => self.failed_git_swap(failure, &name),
            };
        }
        if self.writes_reflog(issue) || self.repo.refs.namespace.is_some() {
            return self.swap_many(&edit, log_message);
        }
        let swapped = match self.swap_loose(issue, new, expected)? {
            Ok(swapped) => swapped,
            Err(err) => return self.failed_swap(&edit, err),
        };
        if swapped == Swap::Done {
            self.after_swap(&edit)?;
        }
        Ok(swapped)
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

    /// The compare-and-swap of one lease ref, done the way git's files backend does it: lock
    /// the loose ref, read its value under the lock (the loose file, else `packed-refs`),
    /// compare, write the lock file and rename it over the ref.
    ///
    /// A gix transaction also locks `packed-refs` and reads it again for every update: one
    /// more file created and deleted per claim, a re-read of `packed-refs` that grows with
    /// the number of leases, and one lock that every claim in the repository contends for.
    /// git does without, because everything that changes a ref, `git pack-refs` included,
    /// holds the ref's own lock first; so does this.
    fn swap_loose(
        &self,
        issue: &IssueId,
        new: ObjectId,
        expected: Option<ObjectId>,
    ) -> Result<std::result::Result<Swap, gix::Error>> {
        use std::io::Write;
        let common = self.repo.common_dir();
        let path = common.join(issue.ref_name());
        let fail = gix::lock::acquire::Fail::AfterDurationWithBackoff(self.lock_wait);
        let mut lock = match gix::lock::File::acquire_to_update_resource(
            &path,
            fail,
            Some(common.join("refs")),
            0,
        ) {
            Ok(lock) => lock,
            Err(err) => return Ok(Err(err)),
        };
        // Under the lock, as git does: a ref only in packed-refs is read from the file on
        // disk now, and a new ref must not clash with one packed meanwhile.
        if !path.exists() {
            if let Err(err) = self.refresh_packed_refs() {
                return Ok(Err(err));
            }
        }
        if expected.is_none() {
            if let Some(existing) = self.clash(issue)? {
                return Err(Error::RefClash {
                    issue: issue.to_string(),
                    existing,
                });
            }
        }
        let current = self.tip_of(&issue.ref_name())?;
        if current == Some(new) {
            return Ok(Ok(Swap::Done));
        }
        if current != expected {
            return Ok(Ok(Swap::Lost));
        }
        if let Err(err) = lock.write_all(format!("{new}\n").as_bytes()) {
            return Ok(Err(gix::Error::from_error(err)));
        }
        Ok(match lock.commit() {
            Ok(_) => Ok(Swap::Done),
            // An empty directory where the ref goes (left by refs that were beneath it) is
            // cleared, as git does; a directory with refs in it is a clash.
            Err(err) if path.is_dir() => {
                match gix::lock::tempfile::remove_dir::empty_depth_first(path.clone()) {
                    Ok(()) => err
                        .instance
                        .commit()
                        .map(|_| Swap::Done)
                        .map_err(|e| gix::Error::from_error(e.error)),
                    Err(_) => Err(gix::Error::from_error(err.error)),
                }
            }
            Err(err) => Err(gix::Error::from_error(err.error)),
        })
    }

    /// Moves several lease refs in one transaction: all are locked and checked first, and
    /// either all move or none does.
    pub(crate) fn swap_many(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
        log_message: &str,
    ) -> Result<Swap> {
        if let RefDb::Git(git) = &self.refdb {
            let names: Vec<String> = edits.iter().map(|(i, _, _)| i.ref_name()).collect();
            let git_edits: Vec<(&str, ObjectId, Expect)> = names
                .iter()
                .zip(edits)
                .map(|(name, (_, new, expected))| (name.as_str(), *new, (*expected).into()))
                .collect();
            return match git.update(&git_edits, log_message, self.fsync.refs) {
                Ok(()) => {
                    self.after_swap(edits)?;
                    Ok(Swap::Done)
                }
                Err(failure) => self.failed_git_swap(failure, &names[0]),
            };
        }
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
                name: issue.full_name(),
                deref: false,
            })
            .collect();
        let fail = gix::lock::acquire::Fail::AfterDurationWithBackoff(self.lock_wait);
        let committer = reflog_committer();
        let mut time_buf = Default::default();
        let prepared = self.repo.refs.transaction().prepare(ref_edits, fail, fail);
        let result = prepared.and_then(|t| t.commit(Some(committer.to_ref(&mut time_buf))));
        match result {
            Ok(_) => {
                self.after_swap(edits)?;
                Ok(Swap::Done)
            }
            Err(err) => self.failed_swap(edits, err),
        }
    }

    /// Makes gix read `packed-refs` again if the file changed since this store last made
    /// sure of it, and returns what the file was then (`None`: absent). gix reloads it only
    /// when its modification time is newer, which a rewrite within the same clock tick (or
    /// with an older time) does not show; git compares the file's identity, size and times,
    /// and so does this. The file is looked at before it is read, so a rewrite in between
    /// only makes the next call read it once more.
    pub(crate) fn refresh_packed_refs(
        &self,
    ) -> std::result::Result<Option<PackedRefsStat>, gix::Error> {
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

    /// What follows a successful swap: see [`Store::after_ref_update`].
    fn after_swap(&self, edits: &[(IssueId, ObjectId, Option<ObjectId>)]) -> Result<()> {
        let names: Vec<String> = edits.iter().map(|(i, _, _)| i.ref_name()).collect();
        self.after_ref_update(names.iter().map(String::as_str))
    }

    /// What follows every ref update: the refs `names` made durable when configured, the kept
    /// pack released (the refs reach its objects now, so it counts like any other pack), and
    /// the automatic packing check.
    ///
    /// With a ref database other than files, git made the refs durable itself (see
    /// [`refdb`]).
    fn after_ref_update<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        if let RefDb::Files = self.refdb {
            self.fsync.sync_refs(self.repo.common_dir(), names)?;
        }
        self.kept_pack.borrow_mut().take();
        self.auto_gc
            .after_write(self.repo.git_dir(), self.repo.objects.store_ref().path());
        Ok(())
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
        {
            return Ok(Swap::Lost);
        }
        // A directory made for a ref's lock was removed before the lock file went in: a
        // concurrent writer of a ref with the directory's name clears an empty directory out
        // of its way, as git does, and so do `git pack-refs --prune` and a lock dropped
        // without a commit. Decide again, as git retries: by then the way is clear, or the
        // clash is there to see.
        if err
            .downcast_any_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
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

    /// Turns the failure of a transaction through git into its answer, as
    /// [`Store::failed_swap`] does for the files backend: a lost race, a lock held too long, a
    /// ref clash (when creating a lease ref), or a git error.
    fn failed_git_swap(&self, failure: Failure, first: &str) -> Result<Swap> {
        match failure {
            Failure::Lost => Ok(Swap::Lost),
            Failure::Clash { name, existing } => Err(Error::RefClash {
                issue: name.strip_prefix(REF_PREFIX).unwrap_or(&name).to_owned(),
                existing,
            }),
            Failure::Locked(path) => Err(Error::Locked {
                path,
                waited_ms: self.lock_wait.as_millis(),
            }),
            Failure::Git(Error::Git { context, message }) => Err(Error::Git {
                context: format!("cannot update {first} ({context})"),
                message,
            }),
            Failure::Git(other) => Err(other),
        }
    }

    /// Returns the path of the lock file git uses for `refs/leases/<issue>` (for reftable,
    /// the one lock of every ref update, `reftable/tables.list.lock`).
    pub fn lock_path(&self, issue: &IssueId) -> PathBuf {
        if let RefDb::Git(git) = &self.refdb {
            return git.lock_path();
        }
        self.repo
            .common_dir()
            .join(format!("{}.lock", issue.ref_name()))
    }

    /// Moves each bookkeeping ref of `moves` (`(name, new, expected)`, `None`: absent) to its
    /// new value if it is at the expected one, as compare-and-swaps: in one transaction, or
    /// one by one if that fails; for remote-tracking refs, never ledger refs.
    ///
    /// Returns the first error when a ref was elsewhere or its lock was held.
    pub(crate) fn move_refs(
        &self,
        moves: &[(String, ObjectId, Option<ObjectId>)],
        log_message: &str,
    ) -> Result<()> {
        if let RefDb::Git(git) = &self.refdb {
            let edits: Vec<(&str, ObjectId, Expect)> = moves
                .iter()
                .map(|(name, new, expected)| (name.as_str(), *new, (*expected).into()))
                .collect();
            let names = || moves.iter().map(|(name, _, _)| name.as_str());
            if moves.len() > 1 && git.update(&edits, log_message, self.fsync.refs).is_ok() {
                return self.after_ref_update(names());
            }
            let mut first_error = None;
            for edit in edits {
                if let Err(failure) = git.update(&[edit], log_message, self.fsync.refs) {
                    first_error.get_or_insert(self.bookkeeping_failure(failure, edit.0));
                }
            }
            self.after_ref_update(names())?;
            return first_error.map_or(Ok(()), Err);
        }
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

    /// Sets a ref to `new` unconditionally; for mirror bookkeeping refs, never ledger refs.
    pub(crate) fn set_ref(&self, name: &str, new: ObjectId, log_message: &str) -> Result<()> {
        if let RefDb::Git(git) = &self.refdb {
            git.update(&[(name, new, Expect::Any)], log_message, self.fsync.refs)
                .map_err(|failure| self.bookkeeping_failure(failure, name))?;
            return self.after_ref_update([name]);
        }
        let edit = bookkeeping_edit(name, new, PreviousValue::Any, log_message)?;
        self.commit_bookkeeping(vec![edit], [name])?;
        self.after_ref_update([name])
    }

    /// Turns the failure of a bookkeeping update through git into an error, as
    /// [`Store::commit_bookkeeping`] reports them: a lock held too long, else a git error.
    fn bookkeeping_failure(&self, failure: Failure, name: &str) -> Error {
        match failure {
            Failure::Locked(path) => Error::Locked {
                path,
                waited_ms: self.lock_wait.as_millis(),
            },
            Failure::Lost => Error::Git {
                context: format!("cannot update {name}"),
                message: "it was not at the expected value".into(),
            },
            Failure::Clash { existing, .. } => Error::Git {
                context: format!("cannot update {name}"),
                message: format!("the ref {existing} is in the way"),
            },
            Failure::Git(Error::Git { context, message }) => Error::Git {
                context: format!("cannot update {name} ({context})"),
                message,
            },
            Failure::Git(other) => other,
        }
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

/// A commit's parents and its `lease.json` bytes (or why it has none), undecoded.
pub(crate) struct RawEntry {
    pub parents: Vec<ObjectId>,
    pub lease_json: std::result::Result<Vec<u8>, String>,
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

fn signature(actor: &str, time: gix::date::Time) -> gix::actor::Signature {
    // A holder is free text; keep the signature well-formed for every git reader.
    let clean: String = actor
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r' | '\0'))
        .collect();
    let email = if clean.contains('@') {
        clean.clone()
    } else {
        String::new()
    };
    gix::actor::Signature {
        name: clean.into(),
        email: email.into(),
        time,
    }
}

/// Returns the commit message of a ledger commit: one line that `git log --oneline` makes
/// readable. The state itself lives only in `lease.json`.
fn commit_message(lease: &Lease) -> String {
    let who = lease
        .holder
        .as_deref()
        .or(lease.previous_holder.as_deref())
        .unwrap_or("nobody");
    let until = match lease.expires_at {
        Some(t) if lease.holder.is_some() => format!(" until {}", crate::time::format_instant(t)),
        None if lease.holder.is_some() => " (open-ended)".into(),
        _ => String::new(),
    };
    format!(
        "{} {}: {} token {}{}\n",
        lease.event, lease.issue, who, lease.token, until
    )
}

/// Serialises a tree or commit the way git hashes it.
fn encode(object: &dyn gix::objs::WriteTo) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    object
        .write_to(&mut out)
        .map_err(|e| Error::git("cannot encode a ledger object", e))?;
    Ok(out)
}

/// The error of a lease ref that is symbolic (to `to`), which no ledger can be.
fn symbolic(name: &str, to: &str) -> Error {
    Error::Corrupt {
        issue: name.trim_start_matches(REF_PREFIX).to_owned(),
        commit: format!("(symbolic ref to {to})"),
        reason: "a lease ref must point at a commit, not at another ref".into(),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
