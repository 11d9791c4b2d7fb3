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
//!   the same way; unchanged, nothing moved. Changed, the tables it lists now are compared
//!   with those it listed (a table never changes once written): only the records of the
//!   tables after the run both lists begin with are read, which after a claim is its own
//!   table, or the few small tables a compaction merged into the write, never the large old
//!   ones below. Every ref is read (in-process, by the reftable reader) when no table is
//!   shared (the first scan, `git pack-refs`, `git lease gc`), when a newer record deletes a
//!   ref, or when the stack's newest update index went back (an old `tables.list` restored
//!   over newer ones). A list published from a stale view that also reuses the update
//!   indices it went back over (what git's locking exists to prevent) looks like a
//!   compaction: the refs it took back are seen at the next full read.
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
    /// Reftable: `tables.list` (`None`: absent), the tables it listed (oldest first) and the
    /// stack's newest update index.
    Tables {
        list: Option<FileStat>,
        tables: (Vec<String>, u64),
    },
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
                // Looked at before the tables are read: whatever changes from now on differs
                // from what is kept, and is read next time.
                let list = file_stat(&git.tables_list_path())?;
                let seen = match scan.seen.take() {
                    Some(Seen::Tables {
                        list: before,
                        tables,
                    }) if before == list => {
                        scan.seen = Some(Seen::Tables { list, tables });
                        return Ok(Moved::Some(Vec::new()));
                    }
                    Some(Seen::Tables { tables, .. }) => tables,
                    _ => (Vec::new(), 0),
                };
                let (tables, moved) = git.moved_since(&seen, &namespace)?;
                scan.seen = Some(Seen::Tables { list, tables });
                let strip = |refs: Vec<(String, ObjectId)>| -> Vec<(String, ObjectId)> {
                    refs.into_iter()
                        .filter_map(|(name, id)| {
                            Some((name.strip_prefix(namespace.as_str())?.to_owned(), id))
                        })
                        .collect()
                };
                Ok(match moved {
                    Ok(moved) => Moved::Some(strip(moved)),
                    Err(all) => Moved::All(strip(all)),
                })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::process::Command;

    /// Runs git in `dir` with fixed identities and no configuration but the repository's;
    /// returns its standard output, trimmed.
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "a")
            .env("GIT_AUTHOR_EMAIL", "a@example.com")
            .env("GIT_COMMITTER_NAME", "a")
            .env("GIT_COMMITTER_EMAIL", "a@example.com")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout)
            .expect("UTF-8")
            .trim()
            .to_owned()
    }

    /// The refs of a scan's answer that are among the 2,000 in the stack's oldest table.
    fn old_ones(refs: &[(String, ObjectId)]) -> usize {
        refs.iter()
            .filter(|(name, _)| name.starts_with("old-"))
            .count()
    }

    /// Makes `repo` a reftable repository with 2,000 ledgers in one table, all at one commit;
    /// returns the ids of that commit and of another.
    fn two_thousand_ledgers(repo: &std::path::Path) -> (String, String) {
        git(repo, &["init", "-q", "--ref-format=reftable"]);
        let tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let one = git(repo, &["commit-tree", tree, "-m", "one"]);
        let two = git(repo, &["commit-tree", tree, "-m", "two"]);
        // 2,000 ledgers in one table, which git's geometric compaction leaves alone under the
        // small tables of later updates (it merges those among themselves).
        let bulk: String = (0..2000)
            .map(|i| format!("create refs/leases/old-{i:04} {one}\n"))
            .collect();
        let out = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["update-ref", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child
                    .stdin
                    .take()
                    .expect("its standard input")
                    .write_all(bulk.as_bytes())?;
                child.wait_with_output()
            })
            .expect("git update-ref --stdin runs");
        assert!(out.status.success(), "{out:?}");
        (one, two)
    }

    /// Runs `git update-ref` with `args`, which may name a ref that is not UTF-8, in `repo`.
    fn update_ref_raw(repo: &std::path::Path, args: &[&OsStr]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(repo)
            .arg("update-ref")
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git update-ref runs");
        assert!(out.status.success(), "{out:?}");
    }

    /// What `scan` finds moved in `store`, which must be the refs of the tables appended
    /// since it last looked.
    fn appended(store: &Store, scan: &mut RefScan) -> Vec<(String, ObjectId)> {
        match store.scan(scan).expect("a scan") {
            Moved::Some(moved) => moved,
            other => panic!("an appended table is read alone, not {other:?}"),
        }
    }

    #[test]
    fn a_reftable_scan_reads_the_tables_added_since_it_looked_and_all_when_none_is_shared() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let repo = dir.path();
        let (one, two) = two_thousand_ledgers(repo);
        let store = Store::open(repo).expect("the repository opens");
        let mut scan = RefScan::new("refs/leases/");
        let scanned = |scan: &mut RefScan| store.scan(scan).expect("a scan");
        let id = |hex: &str| ObjectId::from_hex(hex.as_bytes()).expect("an id");

        let Moved::All(all) = scanned(&mut scan) else {
            panic!("the first scan reads every ref");
        };
        assert_eq!(all.len(), 2000);
        assert_eq!(scanned(&mut scan), Moved::Some(Vec::new()));

        // Each update: its own records (those of the small tables merged with it at most),
        // never the oldest table's; a ref outside the namespace is not a move.
        git(repo, &["update-ref", "refs/leases/c", &one]);
        git(repo, &["update-ref", "refs/heads/main", &one]);
        let moved = appended(&store, &mut scan);
        assert!(moved.contains(&("c".to_owned(), id(&one))), "{moved:?}");
        assert_eq!(old_ones(&moved), 0, "{moved:?}");
        git(repo, &["update-ref", "refs/leases/old-0007", &two]);
        let moved = appended(&store, &mut scan);
        assert!(
            moved.contains(&("old-0007".to_owned(), id(&two))),
            "{moved:?}"
        );
        assert_eq!(old_ones(&moved), 1, "{moved:?}");

        // A deletion among the newer records: every ref, as it is now.
        git(repo, &["update-ref", "-d", "refs/leases/old-0008"]);
        let Moved::All(all) = scanned(&mut scan) else {
            panic!("a deletion makes a scan read every ref");
        };
        assert_eq!(all.len(), 2000);
        assert!(all.iter().all(|(name, _)| name != "old-0008"));
        assert!(all.contains(&("old-0007".to_owned(), id(&two))));

        // An older `tables.list` put back over a newer one (its tables still there): the
        // stack's newest update index went back, every ref as it is now.
        let list = repo.join(".git/reftable/tables.list");
        let before = std::fs::read(&list).expect("read tables.list");
        git(repo, &["update-ref", "refs/leases/old-0009", &two]);
        let moved = appended(&store, &mut scan);
        assert!(
            moved.contains(&("old-0009".to_owned(), id(&two))),
            "{moved:?}"
        );
        std::fs::write(&list, &before).expect("put the older list back");
        let Moved::All(all) = scanned(&mut scan) else {
            panic!("a stack that went back is read whole");
        };
        assert!(all.contains(&("old-0009".to_owned(), id(&one))), "{all:?}");

        // A ref git took by a name that is not UTF-8, then deleted: the deletion's record
        // (kept while the tables it is in are not merged with the oldest) reads as one.
        let odd = OsStr::from_bytes(b"refs/leases/x\xff");
        update_ref_raw(repo, &[odd, OsStr::new(&one)]);
        update_ref_raw(repo, &[OsStr::new("-d"), odd]);
        let Moved::All(all) = scanned(&mut scan) else {
            panic!("a deletion makes a scan read every ref");
        };
        assert_eq!(all.len(), 2000);
        assert_eq!(
            store.refs_under("refs/leases/").expect("a listing").len(),
            2000
        );

        // Every table merged into one: none is shared, every ref; then appended ones again.
        git(repo, &["pack-refs", "--all"]);
        assert!(matches!(scanned(&mut scan), Moved::All(all) if all.len() == 2000));
        git(repo, &["update-ref", "refs/leases/c", &two]);
        assert_eq!(
            scanned(&mut scan),
            Moved::Some(vec![("c".to_owned(), id(&two))])
        );
    }
}
