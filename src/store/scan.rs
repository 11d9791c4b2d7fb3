//! Which refs of a namespace moved since the last look, found without reading every ref: what
//! `watch` asks on each change notification, so that a notification costs what changed and not
//! every ledger.
//!
//! A [`RefScan`] remembers what it last saw of the ref storage, and [`Store::scan`] answers
//! with the refs that may have moved since ([`Moved::Some`]), or with every ref when it cannot
//! tell ([`Moved::All`]). The answer is a superset of what moved: a ref reported with the tip
//! it already had is simply one the caller finds unchanged.
//!
//! - Files backend: `packed-refs` is looked at by its identity, size and times (as git and
//!   [`Store::read_refs`] do), and the loose refs under the namespace by each file's identity,
//!   size and times; only a loose file that changed is read. A changed `packed-refs`, a loose
//!   ref gone, or a loose file this reader does not expect (anything but a direct ref under a
//!   name git reads as one) is an answer of every ref, read as [`Store::refs_listed`] reads
//!   them. The walk of the loose
//!   refs costs one `stat` per loose ref: a repository whose ledgers are packed (`git lease
//!   gc`, `git pack-refs`) pays for the few refs moved since.
//! - Reftable: `reftable/tables.list`, which every ref update renames into place, is looked at
//!   the same way; unchanged, nothing moved; changed, every ref is read (in-process, by the
//!   reftable reader).
//! - A ref namespace (`GIT_NAMESPACE`), or a namespace of refs that does not end in `/`: every
//!   ref, each time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::{RefDb, Store};
use crate::error::{Error, Result};

/// What a scan found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Every ref of the namespace, `(name without it, tip)`, sorted by name: the scan could not
    /// tell which moved (the first scan, a repacked or rewritten ref storage).
    All(Vec<(String, ObjectId)>),
    /// The refs that may have moved, with their tips now; every other ref is where it was.
    Some(Vec<(String, ObjectId)>),
}

/// The identity, size and times of a file, by which a rewrite is told from no change.
type FileStat = (u64, u64, u64, i64, i64, i64, i64);

/// What a scan last saw of a namespace of refs.
#[derive(Clone, Debug)]
pub struct RefScan {
    namespace: String,
    /// `None` before the first scan, or after one that must not be trusted.
    seen: Option<Seen>,
}

#[derive(Clone, Debug)]
enum Seen {
    /// Files backend: `packed-refs` (`None`: absent) and each loose ref under the namespace.
    Files {
        packed: Option<FileStat>,
        loose: HashMap<String, (FileStat, ObjectId)>,
    },
    /// Reftable: `tables.list` (`None`: absent).
    Tables(Option<FileStat>),
}

impl RefScan {
    /// A scan of the refs under `namespace` (ending in `/`) that has seen nothing yet: its
    /// first [`Store::scan`] answers with every ref.
    pub fn new(namespace: &str) -> RefScan {
        RefScan {
            namespace: namespace.to_owned(),
            seen: None,
        }
    }
}

/// What a walk of the loose refs found, or why it cannot be trusted.
enum Walk {
    Loose(HashMap<String, (FileStat, ObjectId)>),
    /// A loose file that is not a direct ref, or cannot be read: let the full reader decide.
    Unexpected,
}

impl Store {
    /// Returns the refs under `scan`'s namespace that may have moved since the last scan (every
    /// ref on the first one); see the module documentation.
    pub fn scan(&self, scan: &mut RefScan) -> Result<Moved> {
        let namespace = scan.namespace.clone();
        let incremental = namespace.ends_with('/') && self.repo.refs.namespace.is_none();
        match &self.refdb {
            _ if !incremental => {
                scan.seen = None;
                Ok(Moved::All(self.refs_listed(&namespace)?))
            }
            RefDb::Git(git) => {
                let tables = file_stat(&git.tables_list_path())?;
                if let Some(Seen::Tables(before)) = &scan.seen {
                    if *before == tables {
                        return Ok(Moved::Some(Vec::new()));
                    }
                }
                let all = self.refs_listed(&namespace)?;
                scan.seen = Some(Seen::Tables(tables));
                Ok(Moved::All(all))
            }
            RefDb::Files => self.scan_files(scan),
        }
    }

    /// The files backend's side of [`Store::scan`].
    fn scan_files(&self, scan: &mut RefScan) -> Result<Moved> {
        let packed_path = self.repo.refs.packed_refs_path();
        let dir = self.repo.common_dir().join(&scan.namespace);
        let previous = match scan.seen.take() {
            Some(Seen::Files { packed, loose }) => Some((packed, loose)),
            _ => None,
        };
        let packed = file_stat(&packed_path)?;
        let empty = HashMap::new();
        let known = previous.as_ref().map_or(&empty, |(_, loose)| loose);
        let walk = walk_loose(&dir, &scan.namespace, known, self.repo.object_hash())?;
        let packed_after = file_stat(&packed_path)?;
        let incremental = match (&previous, &walk) {
            (Some((before, old)), Walk::Loose(now)) => {
                *before == packed
                    && packed_after == packed
                    && old.keys().all(|name| now.contains_key(name))
            }
            _ => false,
        };
        let Walk::Loose(loose) = walk else {
            // Nothing kept: the next scan reads everything again, as this one does.
            return Ok(Moved::All(self.refs_listed(&scan.namespace)?));
        };
        let moved = if incremental {
            let old = previous.as_ref().map_or(&empty, |(_, old)| old);
            let mut moved: Vec<(String, ObjectId)> = loose
                .iter()
                .filter(|(name, (_, id))| old.get(*name).is_none_or(|(_, was)| was != id))
                .map(|(name, (_, id))| (name.clone(), *id))
                .collect();
            moved.sort_by(|a, b| a.0.cmp(&b.0));
            Moved::Some(moved)
        } else {
            // Read after the loose refs and `packed-refs` were looked at, so whatever changes
            // from now on differs from what is kept, and is read again next time.
            Moved::All(self.refs_listed(&scan.namespace)?)
        };
        scan.seen = Some(Seen::Files { packed, loose });
        Ok(moved)
    }
}

/// Walks the loose refs under `dir` (the directory of the refs under `namespace`), reading
/// only the files whose stat differs from `known`'s.
fn walk_loose(
    dir: &Path,
    namespace: &str,
    known: &HashMap<String, (FileStat, ObjectId)>,
    hash: gix::hash::Kind,
) -> Result<Walk> {
    let mut found = HashMap::with_capacity(known.len());
    let mut pending: Vec<(PathBuf, String)> = vec![(dir.to_owned(), String::new())];
    while let Some((path, prefix)) = pending.pop() {
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            // A namespace without loose refs, or a directory that `git pack-refs` just
            // removed: whatever it held is in `packed-refs`, whose change is seen.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(&path, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&path, e))?;
            let Ok(file) = entry.file_name().into_string() else {
                return Ok(Walk::Unexpected);
            };
            let name = format!("{prefix}{file}");
            let path = entry.path();
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&path, e)),
            };
            if meta.is_dir() {
                pending.push((path, format!("{name}/")));
                continue;
            }
            // A lock (an update in progress) or one of git's temporary files: not a ref.
            if file.ends_with(".lock") || file.starts_with('.') {
                continue;
            }
            if !meta.is_file() {
                return Ok(Walk::Unexpected);
            }
            let stat = stat_of(&meta);
            if let Some((was, id)) = known.get(&name) {
                if *was == stat {
                    found.insert(name, (stat, *id));
                    continue;
                }
            }
            // A name git would not read as a ref: the full reader decides what it is.
            let full = format!("{namespace}{name}");
            if gix::refs::FullName::try_from(full.as_str()).is_err() {
                return Ok(Walk::Unexpected);
            }
            let data = match std::fs::read(&path) {
                Ok(data) => data,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&path, e)),
            };
            let hex = data.strip_suffix(b"\n").unwrap_or(&data);
            match ObjectId::from_hex(hex) {
                Ok(id) if id.kind() == hash => {
                    found.insert(name, (stat, id));
                }
                _ => return Ok(Walk::Unexpected),
            }
        }
    }
    Ok(Walk::Loose(found))
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        context: format!("cannot read {}", path.display()),
        source,
    }
}

fn stat_of(m: &std::fs::Metadata) -> FileStat {
    use std::os::unix::fs::MetadataExt;
    (
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
}

/// Returns the identity, size and times of the file at `path` (`None`: absent).
fn file_stat(path: &Path) -> Result<Option<FileStat>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(stat_of(&m))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, e)),
    }
}
