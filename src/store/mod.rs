//! The repository's lease refs and ledger commits, its configuration, and the
//! compare-and-swap: the only part of the crate that reads or writes the repository through
//! gix (elsewhere gix gives only values: object ids, ref-name rules, SHA-256; other modules run
//! the git command line for what gix cannot do, through `src/git.rs`).
//!
//! - This module holds the ref seam, `RefDb`, chosen once from `extensions.refStorage` when
//!   the repository is opened (`open`); its configuration is read in `settings`. Every ref
//!   read (`refs`) and write (`ref_updates`) of the store ([`Store::tip_of`],
//!   [`Store::refs_under`], `Store::swap`, `Store::swap_many`, ...) goes to git's files
//!   backend, in-process (`files`), or to reftable (git 3.0's default), read in-process
//!   (`reftable`) and written through git's own commands (`refdb`), with the same
//!   compare-and-swap and the same answers, so that no lease rule is written twice; any other
//!   ref storage is refused.
//! - `objects` reads and checks ledger commits (exactly one tree entry, `lease.json`, and at
//!   most one parent: [`Store::entry`] refuses anything else, naming the commit, so a corrupt
//!   ledger is an error and never a guess), `many_entries` many tips at once; `encode` encodes
//!   new ones, `loose` writes them through gix; `durability` fsyncs as git's settings say.
//! - Only a real absence is one: every read of refs (`Store::read_refs`) and of objects
//!   (`Store::lookup`) is made again when `git gc`, `git repack` or `git pack-refs` moved what
//!   it reads meanwhile.

mod archive;
mod cas;
pub mod durability;
mod encode;
mod files;
pub(crate) mod loose;
mod many_entries;
pub mod nofollow;
mod objects;
mod open;
mod ref_updates;
mod refdb;
mod refs;
mod reftable;
mod scan;
mod settings;
pub mod shared;

use std::path::Path;
use std::time::Duration;

use gix::ObjectId;

use crate::error::Result;
use crate::git::version::Need;
use crate::lease::Lease;
use crate::liveness::{Current, Observation};
pub(crate) use archive::ArchivePath;
pub use archive::{entry_path, Fold, ARCHIVE_REF};
use files::PackedRefsStat;
pub(crate) use loose::Staged;
use open::give_delta_base_cache;
pub use open::{DEFAULT_LOCK_WAIT, DELTA_BASE_CACHE};
use refdb::{Expect, Failure, GitRefs};
use refs::symbolic;
pub use scan::{Moved, RefScan};
pub(crate) use settings::flag;
use settings::CONFIG;

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
    /// more than [`many_entries::SMALL_OBJECT_BYTES`] for one object (`None` inside: not to be
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

impl Store {
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

    /// Returns the repository's git dir.
    pub fn git_dir(&self) -> &Path {
        self.repo.git_dir()
    }

    /// Returns the repository's common directory: the git dir, or, in a linked work tree,
    /// the main repository's, where refs and objects shared by every work tree live.
    pub fn common_dir(&self) -> &Path {
        self.repo.common_dir()
    }
}
