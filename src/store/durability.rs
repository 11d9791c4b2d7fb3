//! Durability: fsync what a write creates, following git's own settings, because gix never
//! fsyncs anything.
//!
//! # Why it exists
//!
//! A claim is durable only if, after a power loss, the ref still points at a commit whose
//! objects are all on disk. gix 0.90 writes loose objects and refs with plain writes and
//! renames and never calls fsync, and it does not read `core.fsync`. So the write path does it:
//!
//! 1. after writing a commit's objects and **before** the ref moves: fsync each new loose
//!    object file (written by gix, in `crate::loose`), its `objects/xx` directory and
//!    `objects/` (so a ref can never point at an object that a crash lost);
//! 2. after the ref transaction: fsync each ref file and its directories up to `refs/` (so an
//!    answer "acquired" is not forgotten by a crash right after it was given).
//!
//! What is synced follows git: `core.fsync` components `loose-object` (also in `objects`,
//! `committed`, `added`, `all`) for objects and `reference` (also in `committed`, `added`,
//! `all`) for refs, parsed as git parses them (starting from git's default, which has neither
//! loose objects nor refs; `none` clears the default; `-component` removes one); the legacy
//! `core.fsyncObjectFiles=true` for objects. `lease.fsync` overrides them all: `true` syncs
//! objects and refs, `false` neither. git-lease writes no packs: those of `git gc` are git's.
//! docs/DURABILITY.md says what a power loss can lose in each mode.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::error::{Error, Result};

const LOOSE_OBJECT: u32 = 1 << 0;
const PACK: u32 = 1 << 1;
const PACK_METADATA: u32 = 1 << 2;
const COMMIT_GRAPH: u32 = 1 << 3;
const INDEX: u32 = 1 << 4;
const REFERENCE: u32 = 1 << 5;
/// git's default (`FSYNC_COMPONENTS_DEFAULT`): packs and derived metadata, no loose objects,
/// no refs.
const GIT_DEFAULT: u32 = PACK | PACK_METADATA | COMMIT_GRAPH;

/// What the write path fsyncs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fsync {
    /// Fsync new loose objects and their directories before a ref moves.
    pub objects: bool,
    /// Fsync ref files and their directories after a ref moves.
    pub refs: bool,
}

impl Fsync {
    /// Nothing synced at all (`lease.fsync=false`, and git's default for what git-lease
    /// writes).
    pub const NONE: Fsync = Fsync {
        objects: false,
        refs: false,
    };

    /// Objects and refs (`lease.fsync=true`).
    pub const ALL: Fsync = Fsync {
        objects: true,
        refs: true,
    };

    /// Decides from the three settings, as described in the module documentation.
    ///
    /// `core_fsync` is the value of `core.fsync` (a comma-separated list), `fsync_object_files`
    /// that of `core.fsyncObjectFiles`, `lease_fsync` that of `lease.fsync`.
    pub fn from_settings(
        core_fsync: Option<&str>,
        fsync_object_files: Option<bool>,
        lease_fsync: Option<bool>,
    ) -> Fsync {
        match lease_fsync {
            Some(true) => return Fsync::ALL,
            Some(false) => return Fsync::NONE,
            None => {}
        }
        let components = core_fsync.map_or(GIT_DEFAULT, parse_core_fsync);
        Fsync {
            objects: components & LOOSE_OBJECT != 0 || fsync_object_files == Some(true),
            refs: components & REFERENCE != 0,
        }
    }

    /// Reads the settings from a repository's configuration (every scope).
    pub fn from_repo(repo: &gix::Repository) -> crate::Result<Fsync> {
        let config = repo.config_snapshot();
        let setting = |key: &str| config.string(key).map(|s| s.to_str_lossy().into_owned());
        let boolean = |key: &str| crate::config::boolean(key, super::flag(&config, key).as_deref());
        Ok(Fsync::from_settings(
            setting("core.fsync").as_deref(),
            boolean("core.fsyncObjectFiles")?,
            boolean("lease.fsync")?,
        ))
    }

    /// Fsyncs the loose objects `ids` under `objects_dir`, their fan-out directories and
    /// `objects_dir` itself, so that the files and their renames into place are durable
    /// before a ref names them. git fsyncs a file before its rename; gix does not, so here it
    /// is done after, which gives a ref the same guarantee. Objects that are not loose
    /// (packed, or from an alternate) are skipped.
    pub(crate) fn sync_objects(&self, objects_dir: &Path, ids: &[ObjectId]) -> Result<()> {
        if !self.objects {
            return Ok(());
        }
        let mut dirs = BTreeSet::new();
        for id in ids {
            let path = crate::loose::path(objects_dir, *id);
            if let (true, Some(dir)) = (sync_file_if_present(&path)?, path.parent()) {
                dirs.insert(dir.to_owned());
            }
        }
        if dirs.is_empty() {
            return Ok(());
        }
        for dir in &dirs {
            sync_dir(dir)?;
        }
        sync_dir(objects_dir)
    }

    /// Fsyncs the loose ref files `names` (full names, `refs/…`) under `common_dir`, and every
    /// directory from each file's up to `refs/`. Refs that are not loose are skipped.
    pub(crate) fn sync_refs<'a>(
        &self,
        common_dir: &Path,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        if !self.refs {
            return Ok(());
        }
        let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
        for name in names {
            let file = common_dir.join(name);
            if !sync_file_if_present(&file)? {
                continue;
            }
            let mut dir = file.parent();
            while let Some(d) = dir {
                if !d.starts_with(common_dir) || d == common_dir {
                    break;
                }
                dirs.insert(d.to_owned());
                dir = d.parent();
            }
        }
        // Deepest first, so that a new directory's entry is synced after its contents.
        for dir in dirs.iter().rev() {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

/// Parses `core.fsync` the way git does: start from git's default; `none` clears it;
/// `component` adds, `-component` removes (from the default, not from what this value adds);
/// unknown components are ignored.
fn parse_core_fsync(value: &str) -> u32 {
    let mut current = GIT_DEFAULT;
    let (mut positive, mut negative) = (0, 0);
    for token in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if token.eq_ignore_ascii_case("none") {
            current = 0;
            continue;
        }
        let (negated, name) = match token.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, token),
        };
        let mask = match name.to_ascii_lowercase().as_str() {
            "loose-object" => LOOSE_OBJECT,
            "pack" => PACK,
            "pack-metadata" => PACK_METADATA,
            "commit-graph" => COMMIT_GRAPH,
            "index" => INDEX,
            "reference" => REFERENCE,
            "objects" => LOOSE_OBJECT | PACK,
            "derived-metadata" => PACK_METADATA | COMMIT_GRAPH,
            "committed" => LOOSE_OBJECT | PACK | REFERENCE,
            "added" => LOOSE_OBJECT | PACK | REFERENCE | INDEX,
            "all" => LOOSE_OBJECT | PACK | PACK_METADATA | COMMIT_GRAPH | INDEX | REFERENCE,
            _ => 0,
        };
        if negated {
            negative |= mask;
        } else {
            positive |= mask;
        }
    }
    (current & !negative) | positive
}

fn sync_dir(dir: &Path) -> Result<()> {
    let synced = File::open(dir).and_then(|d| d.sync_all());
    match synced {
        Ok(()) => Ok(()),
        // Directories cannot be opened or synced this way everywhere (Windows); there the
        // file system orders the rename itself.
        Err(_) if cfg!(not(unix)) => Ok(()),
        Err(e) => Err(io_error("cannot fsync the directory", dir, e)),
    }
}

/// Fsyncs `file`; false if it does not exist.
fn sync_file_if_present(file: &Path) -> Result<bool> {
    match File::open(file) {
        Ok(f) => f
            .sync_all()
            .map(|()| true)
            .map_err(|e| io_error("cannot fsync", file, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("cannot open", file, e)),
    }
}

fn io_error(what: &str, path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        context: format!("{what} {}", path.display()),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(core: Option<&str>, legacy: Option<bool>, lease: Option<bool>) -> (bool, bool) {
        let f = Fsync::from_settings(core, legacy, lease);
        (f.objects, f.refs)
    }

    #[test]
    fn follows_core_fsync_like_git() {
        assert_eq!(decide(None, None, None), (false, false), "git's default");
        assert_eq!(decide(Some("committed"), None, None), (true, true));
        assert_eq!(decide(Some("added"), None, None), (true, true));
        assert_eq!(decide(Some("all"), None, None), (true, true));
        assert_eq!(decide(Some("objects"), None, None), (true, false));
        assert_eq!(decide(Some("loose-object"), None, None), (true, false));
        assert_eq!(decide(Some("reference"), None, None), (false, true));
        assert_eq!(decide(Some("pack,index"), None, None), (false, false));
        assert_eq!(
            decide(Some("all,-reference"), None, None),
            (true, true),
            "as git: a negation only removes from the default"
        );
        assert_eq!(decide(Some("none"), None, None), (false, false));
        assert_eq!(decide(Some("none, Reference"), None, None), (false, true));
        assert_eq!(decide(Some("bogus"), None, None), (false, false));
    }

    #[test]
    fn legacy_and_lease_settings() {
        assert_eq!(decide(None, Some(true), None), (true, false));
        assert_eq!(decide(None, Some(false), None), (false, false));
        assert_eq!(decide(None, None, Some(true)), (true, true));
        assert_eq!(decide(Some("committed"), None, Some(false)), (false, false));
    }

    #[test]
    fn syncs_existing_directories_and_files_and_skips_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let id = ObjectId::from_hex(b"17aa00000000000000000000000000000000aaaa").unwrap();
        let missing = ObjectId::from_hex(b"18bb00000000000000000000000000000000bbbb").unwrap();
        std::fs::create_dir_all(objects.join("17")).unwrap();
        std::fs::write(objects.join("17").join(&id.to_hex().to_string()[2..]), b"x").unwrap();
        Fsync::ALL.sync_objects(&objects, &[id, missing]).unwrap();
        std::fs::create_dir_all(dir.path().join("refs/leases/gh")).unwrap();
        std::fs::write(dir.path().join("refs/leases/gh/1"), b"x\n").unwrap();
        Fsync::ALL
            .sync_refs(dir.path(), ["refs/leases/gh/1", "refs/leases/none"])
            .unwrap();
    }
}
