//! The repository's lease refs and ledger commits, its configuration, and the
//! compare-and-swap: the only part of the crate that reads or writes the repository through
//! gix (elsewhere gix gives only values: object ids, ref-name rules, SHA-256; other modules run
//! the git command line for what gix cannot do, through `src/git.rs`).
//!
//! - This module opens the repository, reads its configuration and holds the ref seam,
//!   `RefDb`, chosen once from `extensions.refStorage`: every ref read and write of the store
//!   ([`Store::tip_of`], [`Store::refs_under`], `Store::swap`, `Store::swap_many`, ...)
//!   goes to git's files backend, in-process (`files`), or to reftable (git 3.0's default),
//!   read in-process (`reftable`) and written through git's own commands (`refdb`), with the
//!   same compare-and-swap and the same answers, so that no lease rule is written twice; any other ref storage is refused.
//! - `objects` reads and checks ledger commits (exactly one tree entry, `lease.json`, and at
//!   most one parent: [`Store::entry`] refuses anything else, naming the commit, so a corrupt
//!   ledger is an error and never a guess) and encodes new ones; `loose` writes them through
//!   gix; `durability` fsyncs as git's settings say.
//! - Only a real absence is one: every read of refs (`Store::read_refs`) and of objects
//!   (`Store::lookup`) is made again when `git gc`, `git repack` or `git pack-refs` moved what
//!   it reads meanwhile.

mod archive;
mod cas;
pub mod durability;
mod files;
pub(crate) mod loose;
pub mod nofollow;
mod objects;
mod refdb;
mod reftable;
mod scan;
pub mod shared;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::error::{Error, Result};
use crate::git::version::Need;
use crate::issue::{IssueId, REF_PREFIX};
use crate::lease::Lease;
use crate::liveness::{Current, Observation};
pub(crate) use archive::ArchivePath;
pub use archive::{entry_path, Fold, ARCHIVE_REF};
use files::PackedRefsStat;
pub(crate) use loose::Staged;
use refdb::{Expect, Failure, GitRefs};
pub use scan::{Moved, RefScan};

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
    /// Where the tip was found: the ledger's ref, or (for a tip) the archive.
    pub place: Place,
}

impl Entry {
    /// A commit read from a ledger, with nothing observed beside its record yet.
    pub fn recorded(commit: ObjectId, parent: Option<ObjectId>, lease: Lease) -> Entry {
        Entry {
            commit,
            parent,
            lease,
            seen: Observation::NONE,
            place: Place::Ref,
        }
    }

    /// The value a compare-and-swap of this tip's ref expects ([`Place::expected`]).
    pub fn expected(&self) -> Option<ObjectId> {
        self.place.expected(self.commit)
    }

    /// Returns the state the rules decide on: the record and what its reader saw.
    pub fn current(&self) -> Current<'_> {
        Current {
            lease: &self.lease,
            seen: self.seen,
        }
    }
}

/// Where a ledger's tip was found ([`Store::locate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Its ref, `refs/leases/<issue>`.
    Ref,
    /// The archive: the ref does not exist, the newest fold records the tip.
    Archive,
}

impl Place {
    /// The value a compare-and-swap of the ref expects, for a ledger whose tip is `tip`:
    /// the tip itself, or must-not-exist for an archived ledger (which a claim revives).
    pub fn expected(self, tip: ObjectId) -> Option<ObjectId> {
        match self {
            Place::Ref => Some(tip),
            Place::Archive => None,
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

/// Where a repository's refs are read and written: the one seam every ref read and write of a
/// [`Store`] goes through ([`Store::tip_of`], [`Store::refs_under`], [`Store::clash`],
/// [`Store::swap`], [`Store::swap_many`], [`Store::move_refs`], [`Store::set_ref`],
/// [`Store::head_name`]).
#[derive(Debug)]
enum RefDb {
    /// git's files backend (loose refs and `packed-refs`): in-process, with gix and git's
    /// lock files.
    Files,
    /// reftable: read in-process ([`reftable`]), written through git's commands ([`refdb`]).
    Git(GitRefs),
}

/// A repository's lease refs and objects.
pub struct Store {
    repo: gix::Repository,
    refdb: RefDb,
    lock_wait: Duration,
    quarantine: Option<gix::odb::Handle>,
    fsync: crate::durability::Fsync,
    /// The modes files and directories this store makes are given (`core.sharedRepository`).
    shared: shared::SharedPerm,
    auto_gc: crate::autogc::AutoGc,
    /// The identity, size and times of `packed-refs` (`None`: absent) when this store last
    /// made gix read it; see [`Store::refresh_packed_refs`].
    packed_refs_seen: std::cell::Cell<Option<Option<PackedRefsStat>>>,
    /// How ledger commits are signed (`None` inside: unsigned), decided and its key loaded by
    /// the first commit this store encodes ([`crate::sign`]), then kept for every other.
    signer: std::cell::OnceCell<Option<std::sync::Arc<crate::sign::Signer>>>,
    /// The object database that reads of ledger commits, trees and `lease.json` try first,
    /// once a listing opened it ([`Store::entries`]): the repository's, refusing to allocate
    /// more than [`objects::SMALL_OBJECT_BYTES`] for one object (`None` inside: not to be
    /// had).
    small_objects: std::cell::OnceCell<Option<gix::odb::Handle>>,
}

/// How many times a read of refs or objects that raced with packing is made (see
/// [`Store::read_refs`] and [`Store::lookup`]).
const READ_ATTEMPTS: usize = 10;

/// Waits before attempt `attempt` (from 1) of a read that raced with packing: a moment that
/// doubles from 1 ms, so that a `git pack-refs --prune` deleting loose refs one by one has
/// finished before the walk is made again (about 0.5 s in all, only ever spent while packing).
fn settle(attempt: usize) {
    let ms = 1u64 << attempt.saturating_sub(1).min(8);
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Returns `repo` seeing every object as it is: gix honours replacement refs
/// (`refs/replace/*`) on every read unless told not to, and anyone who can push a ref could
/// then make every reader, the server's hook included, see another holder in a ledger.
fn without_replacements(mut repo: gix::Repository) -> gix::Repository {
    repo.objects.ignore_replacements = true;
    repo
}

/// How much decoded object data one reader keeps to resolve delta chains in packs, unless
/// `core.deltaBaseCacheLimit` says otherwise (git's own default is 96 MiB).
pub const DELTA_BASE_CACHE: usize = 1 << 20;

/// Returns `repo` reading packed objects with a delta-base cache, as git does: without one,
/// gix inflates every base of a delta chain again for each object, and the bases of ledger
/// objects (similar `lease.json` blobs and commits) are shared by thousands of them. Its size
/// is `core.deltaBaseCacheLimit` where set (0 or less: no cache), else [`DELTA_BASE_CACHE`];
/// the cache holds what it caps, so a listing's memory stays bounded at any number of ledgers.
fn with_delta_base_cache(mut repo: gix::Repository) -> gix::Repository {
    let limit = repo.config_snapshot().integer("core.deltaBaseCacheLimit");
    give_delta_base_cache(&mut repo.objects, limit);
    repo
}

/// Gives `handle`'s readers the delta-base cache of [`with_delta_base_cache`], of the size
/// `core.deltaBaseCacheLimit` (`limit`, where set) says.
fn give_delta_base_cache(handle: &mut gix::odb::Handle, limit: Option<i64>) {
    let bytes = limit.map_or(Some(DELTA_BASE_CACHE), |n| {
        usize::try_from(n).ok().filter(|n| *n > 0)
    });
    match bytes {
        Some(bytes) => handle.set_pack_cache(move || {
            Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(bytes))
        }),
        None => handle.unset_pack_cache(),
    }
}

/// The repository's own configuration file, in its git dir.
const CONFIG: &str = "config";
/// The temporary file [`Store::set_repository_config`] writes before renaming it over
/// [`CONFIG`].
const CONFIG_TMP: &str = "config.git-lease-tmp";

/// How long to wait for a ref lock held by another process before reporting it.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(3);

impl Store {
    /// Opens the repository containing `dir` the way git finds it (searching upwards and
    /// honouring `GIT_DIR`).
    ///
    /// Returns [`Error::NotARepository`] when there is none, and [`Error::RefStorage`] for a
    /// repository whose ref storage is neither files nor reftable.
    pub fn discover(dir: &Path) -> Result<Store> {
        use gix::sec::trust::DefaultForLevel;
        let settings = CommandLine::read()?;
        let options = |level| settings.apply(gix::open::Options::default_for_level(level));
        let trust = gix::sec::trust::Mapping {
            full: options(gix::sec::Trust::Full),
            reduced: options(gix::sec::Trust::Reduced),
        };
        let repo = gix::ThreadSafeRepository::discover_with_environment_overrides_opts(
            dir,
            Default::default(),
            trust,
        )
        .map_err(|e| not_a_repository(dir, &e))?
        .to_thread_local();
        Store::from_repo(settings.after_open(repo)?)
    }

    /// Opens exactly the repository at `path` (a work tree or a git dir), without searching.
    pub fn open(path: &Path) -> Result<Store> {
        let settings = CommandLine::read()?;
        let repo = gix::open_opts(path, settings.apply(gix::open::Options::default()))
            .map_err(|e| not_a_repository(path, &e))?;
        Store::from_repo(settings.after_open(repo)?)
    }

    /// Opens the repository as [`Store::open`] (`exact`) or [`Store::discover`] does, after
    /// checking, without following a link, that its git dir is no link and its configuration
    /// file a regular file of its own ([`nofollow::Dir::read`]): for a command that may run as
    /// root in a repository someone else owns (`install-hook`), so that git's configuration is
    /// not read from a file the owner pointed `config` at.
    pub fn open_unfollowed(path: &Path, exact: bool) -> Result<Store> {
        let git_dir = if exact {
            [path.to_owned(), path.join(".git")]
                .into_iter()
                .find(|dir| gix::discover::is_git(dir).is_ok())
        } else if let Some(dir) = std::env::var_os("GIT_DIR") {
            Some(PathBuf::from(dir))
        } else {
            gix::discover::upwards(path)
                .ok()
                .map(|(found, _)| found.into_repository_and_work_tree_directories().0)
        };
        // Where none is found, opening reports it.
        if let Some(git_dir) = git_dir {
            nofollow::Dir::open(&git_dir)?.read(CONFIG)?;
        }
        if exact {
            Store::open(path)
        } else {
            Store::discover(path)
        }
    }

    /// Wraps an open repository, with the ref database its `extensions.refStorage` names:
    /// files (the default) in-process, reftable through git.
    pub fn from_repo(repo: gix::Repository) -> Result<Store> {
        let repo = with_delta_base_cache(without_replacements(repo));
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
                repo.object_hash(),
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
            shared: shared::SharedPerm::from_repo(&repo)?,
            auto_gc: crate::autogc::AutoGc::from_settings(setting)?,
            repo,
            lock_wait,
            quarantine: None,
            packed_refs_seen: std::cell::Cell::new(None),
            signer: std::cell::OnceCell::new(),
            small_objects: std::cell::OnceCell::new(),
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

    /// Returns the modes what this store's repository gets made are given
    /// (`core.sharedRepository`, [`shared`]).
    pub fn shared(&self) -> shared::SharedPerm {
        self.shared
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

    /// Returns what this repository needs of the git that works in it
    /// ([`crate::git::version`]): a reftable repository needs a git that has reftable.
    pub fn git_needs(&self) -> &'static [Need] {
        match self.refdb {
            RefDb::Files => &[],
            RefDb::Git(_) => &[Need::Reftable],
        }
    }

    /// Checks, before anything is written, that the refs can be moved afterwards: a reftable
    /// repository's writes are git's `update-ref`, which needs a git that has reftable (read
    /// from `git --version` once per process). Reads need no git.
    fn ensure_writable(&self) -> Result<()> {
        match &self.refdb {
            RefDb::Files => Ok(()),
            RefDb::Git(_) => crate::git::version::require(&[Need::Reftable]),
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

    /// Returns the ref the symbolic ref `name` names (`refs/remotes/origin/HEAD` names
    /// `refs/remotes/origin/main`): `None` when `name` does not exist or is not symbolic.
    pub fn symbolic_target(&self, name: &str) -> Result<Option<String>> {
        if let RefDb::Git(git) = &self.refdb {
            return Ok(match git.read(name)? {
                Some(refdb::Target::Symbolic(to)) => Some(to),
                _ => None,
            });
        }
        let found = self
            .repo
            .try_find_reference(name)
            .map_err(|e| Error::git(format!("cannot read {name}"), e))?;
        Ok(found.and_then(|r| match r.target() {
            gix::refs::TargetRef::Symbolic(to) => Some(to.as_bstr().to_str_lossy().into_owned()),
            gix::refs::TargetRef::Object(_) => None,
        }))
    }

    /// Returns the repository's git dir.
    pub fn git_dir(&self) -> &Path {
        self.repo.git_dir()
    }

    /// Returns the repository's common directory: the git dir, or, in a linked work tree,
    /// the main repository's, where refs and objects shared by every work tree live.
    pub fn common_dir(&self) -> &Path {
        self.repo.common_dir()
    }

    /// Returns a string value of the repository's configuration (all scopes).
    pub fn config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .string(key)
            .map(|s| s.to_str_lossy().into_owned())
    }

    /// Returns the value of a boolean setting for [`crate::config::boolean`]: its string, or
    /// `true` for a key given without a value (`[lease] requireToken`), which git reads as true
    /// (and an empty value, `requireToken =`, as false).
    pub fn config_flag(&self, key: &str) -> Option<String> {
        flag(&self.repo.config_snapshot(), key)
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

    /// Opens this repository's git dir without following a link ([`nofollow::Dir::open`]): the
    /// directory that [`Store::set_repository_config`] and `install-hook` work in.
    pub fn open_git_dir(&self) -> Result<nofollow::Dir> {
        nofollow::Dir::open(self.git_dir())
    }

    /// Checks, reading it as [`Store::set_repository_config`] does, that the repository's own
    /// configuration file in `git_dir` can be replaced: a regular file of its own, and nothing
    /// but a file left by a stopped run at the name of its temporary file.
    pub fn check_repository_config(&self, git_dir: &nofollow::Dir) -> Result<()> {
        git_dir.read(CONFIG)?;
        git_dir.expect_file_or_nothing(CONFIG_TMP)
    }

    /// Sets `section.key` to `value` in the repository's own configuration file, `config` in
    /// `git_dir` (this repository's git dir, from [`Store::open_git_dir`]), replacing the file
    /// whole, every step relative to the directory's descriptor: the file is read without
    /// following a link (a link there, or a file with other names, is refused:
    /// [`Error::UnsafePath`]), and the new one, with the old one's permission bits, is created
    /// exclusively
    /// as `config.git-lease-tmp`, given to `owner` when one is given (through its descriptor),
    /// and renamed over it.
    pub fn set_repository_config(
        &self,
        git_dir: &nofollow::Dir,
        section: &str,
        key: &str,
        value: &str,
        owner: Option<nofollow::Owner>,
    ) -> Result<()> {
        let path = git_dir.path().join(CONFIG);
        let old = git_dir.read(CONFIG)?.ok_or_else(|| Error::UnsafePath {
            path: path.clone(),
            reason: "is missing: the repository has no configuration file".into(),
        })?;
        let mut file = gix::config::File::from_bytes_no_includes(
            &old.bytes,
            gix::config::file::Metadata::from(gix::config::Source::Local).at(&path),
            Default::default(),
        )
        .map_err(|e| Error::git(format!("cannot read {}", path.display()), e))?;
        file.set_raw_value_by(section, None, key, value)
            .map_err(|e| Error::git(format!("cannot set {section}.{key}"), e))?;
        git_dir.create(CONFIG_TMP, &file.to_bstring(), old.mode & 0o777, owner)?;
        git_dir.rename(CONFIG_TMP, CONFIG)
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
        self.files_tip_of(name)
    }

    /// Returns the current entry of `issue`: its ref's tip, else the tip the archive records
    /// for it (docs/FORMAT.md, "The archive"), else `None` (never leased).
    pub fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        self.locate(issue)?
            .map(|(tip, place)| {
                let mut entry = self.entry(issue.as_str(), tip)?;
                entry.place = place;
                Ok(entry)
            })
            .transpose()
    }

    /// Returns where the ledger of `issue` ends: its ref's tip ([`Place::Ref`]), else the tip
    /// the archive records ([`Place::Archive`]: the ref does not exist, and a claim creates
    /// it on that tip), else `None`.
    pub fn locate(&self, issue: &IssueId) -> Result<Option<(ObjectId, Place)>> {
        if let Some(tip) = self.tip(issue)? {
            return Ok(Some((tip, Place::Ref)));
        }
        Ok(self.archived(issue)?.map(|tip| (tip, Place::Archive)))
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
                .list(prefix)?
                .into_iter()
                .filter_map(|(name, target)| match target {
                    refdb::Target::Object(id) => Some((name.strip_prefix(prefix)?.to_owned(), id)),
                    refdb::Target::Symbolic(_) => None,
                })
                .collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            return Ok(out);
        }
        self.files_refs_under(prefix)
    }

    /// Returns every direct ref under `namespace` as `(name without it, target)`, sorted by
    /// name: the cheap way where it can (loose refs through gix, then `packed-refs` line by
    /// line, without gix's per-ref validation and conversions), else as
    /// [`Store::refs_under`] does (a ref namespace, a line that reader does not expect, or a
    /// ref storage other than files). Either is read as `Store::read_refs` reads, so that
    /// `git pack-refs` running meanwhile hides no ref.
    pub fn refs_listed(&self, namespace: &str) -> Result<Vec<(String, ObjectId)>> {
        match self.read_refs(|| self.refs_fast(namespace)) {
            Ok(Some(mut refs)) => {
                // Grown by doubling: at 100k refs, 2 MB a listing would hold for nothing.
                refs.shrink_to_fit();
                Ok(refs)
            }
            // Unusual, or failing each time: gix's reader decides, or says what is wrong.
            Ok(None) | Err(_) => self.refs_under(namespace),
        }
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
            return Ok(git.list(&below)?.into_iter().next().map(|(name, _)| name));
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
        self.files_swap(issue, new, expected, log_message)
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
        self.files_swap_many(edits, log_message)
    }

    /// What follows a successful swap: see [`Store::after_ref_update`].
    fn after_swap(&self, edits: &[(IssueId, ObjectId, Option<ObjectId>)]) -> Result<()> {
        let names: Vec<String> = edits.iter().map(|(i, _, _)| i.ref_name()).collect();
        self.after_ref_update(names.iter().map(String::as_str))
    }

    /// What follows every ref update: the refs `names` made durable when configured, and the
    /// automatic packing check.
    ///
    /// With a ref database other than files, git made the refs durable itself (see
    /// [`refdb`]).
    fn after_ref_update<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        if let RefDb::Files = self.refdb {
            let names: Vec<&str> = names.into_iter().collect();
            self.share_refs(&names)?;
            self.fsync.sync_refs(self.repo.common_dir(), names)?;
        }
        self.auto_gc
            .after_write(self.repo.git_dir(), self.repo.objects.store_ref().path());
        Ok(())
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
    /// one by one if that fails; for bookkeeping refs (remote-tracking refs, the refs `sync
    /// --adopt` keeps a replaced ledger under), never ledger refs.
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
        self.files_move_refs(moves, log_message)
    }

    /// Sets a ref to `new` unconditionally, as a bookkeeping ref: the local copy of a lease
    /// ref a remote just accepted ([`crate::Remote`]), never a compare-and-swap of a ledger.
    pub(crate) fn set_ref(&self, name: &str, new: ObjectId, log_message: &str) -> Result<()> {
        if let RefDb::Git(git) = &self.refdb {
            git.update(&[(name, new, Expect::Any)], log_message, self.fsync.refs)
                .map_err(|failure| self.bookkeeping_failure(failure, name))?;
            return self.after_ref_update([name]);
        }
        self.files_set_ref(name, new, log_message)
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
}

/// The error of a lease ref that is symbolic (to `to`), which no ledger can be.
pub(super) fn symbolic(name: &str, to: &str) -> Error {
    Error::Corrupt {
        issue: name.trim_start_matches(REF_PREFIX).to_owned(),
        commit: format!("(symbolic ref to {to})"),
        reason: "a lease ref must point at a commit, not at another ref".into(),
    }
}

/// The `-c` settings of the git that started this process ([`crate::config::command_line`]),
/// as the repository is opened with them: as gix's command-line overrides, which come after
/// every configuration file and `GIT_CONFIG_COUNT`, as in git, and count while the repository
/// is being opened; or, when one of them cannot be carried that way (gix reads an override as
/// `key=value`, split at the first `=` and trimmed, so a subsection holding `=` or a value
/// with white space at either end would change), all of them appended in order once it is
/// open.
struct CommandLine {
    settings: Vec<crate::config::Parameter>,
    as_overrides: Option<Vec<gix::bstr::BString>>,
}

impl CommandLine {
    fn read() -> Result<CommandLine> {
        let settings = crate::config::command_line()?;
        let as_overrides = settings
            .iter()
            .map(|p| {
                let mut text = gix::bstr::BString::from(p.key.clone());
                if let Some(value) = &p.value {
                    if p.key.contains(&b'=') || value.trim() != value.as_slice() {
                        return None;
                    }
                    text.push(b'=');
                    text.extend_from_slice(value);
                }
                Some(text)
            })
            .collect();
        Ok(CommandLine {
            settings,
            as_overrides,
        })
    }

    fn apply(&self, options: gix::open::Options) -> gix::open::Options {
        match &self.as_overrides {
            Some(overrides) if !overrides.is_empty() => options.cli_overrides(overrides.clone()),
            _ => options,
        }
    }

    fn after_open(&self, mut repo: gix::Repository) -> Result<gix::Repository> {
        if self.as_overrides.is_some() {
            return Ok(repo);
        }
        let refuse =
            |e: &dyn std::fmt::Display| Error::CommandLineConfig(first_line(&format!("{e}")));
        let mut file =
            gix::config::File::new(gix::config::file::Metadata::from(gix::config::Source::Cli));
        for setting in &self.settings {
            let key = gix::config::KeyRef::parse_unvalidated(setting.key.as_bstr())
                .ok_or_else(|| refuse(&format!("invalid key: {}", setting.key.as_bstr())))?;
            file.section_mut_or_create_new(key.section_name, key.subsection_name)
                .map_err(|e| refuse(&e))?
                .push(
                    key.value_name,
                    setting.value.as_deref().map(ByteSlice::as_bstr),
                )
                .map_err(|e| refuse(&e))?;
        }
        let mut config = repo.config_snapshot_mut();
        config.append(file).map_err(|e| refuse(&e))?;
        config.commit().map_err(|e| refuse(&e))?;
        Ok(repo)
    }
}

/// Returns a boolean setting's value as [`Store::config_flag`] does.
pub(crate) fn flag(config: &gix::config::Snapshot<'_>, key: &str) -> Option<String> {
    config
        .plumbing()
        .string_implicit(key)
        .map(|value| value.map_or_else(|| "true".to_owned(), |v| v.to_str_lossy().into_owned()))
}

/// The error of a repository that cannot be opened from `path`: none found there or above
/// it, as git says it, or the reason it cannot be opened.
fn not_a_repository(path: &Path, e: &dyn std::fmt::Display) -> Error {
    let message = first_line(&format!("{e}"));
    Error::NotARepository {
        path: path.to_owned(),
        // gix's "Could not find a git repository in <path> or in any of its parents" says
        // what the error's own words say.
        message: if message.starts_with("Could not find a git repository") {
            String::new()
        } else {
            message
        },
    }
}

pub(super) fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
