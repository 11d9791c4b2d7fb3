//! An in-process writer of a reftable stack: a transaction of ref updates as git's own
//! `update-ref` makes it, without a git process, and the compaction git runs after it.
//!
//! - The lock is git's: `tables.list.lock`, created with `O_EXCL` and waited on (with backoff)
//!   for the lock timeout. Under it the list is read again and every table opened, so each
//!   compare-and-swap is checked against the stack as it is, as git checks it.
//! - A transaction is one new table, the next update index (one more than the stack's
//!   highest), its records sorted by name: an object id, or a deletion. It is written beside
//!   the stack under a temporary name, fsynced when configured, renamed to git's name for it
//!   (`0x<min>-0x<max>-<random>.ref`); then the new list is written into the lock, fsynced,
//!   and renamed over `tables.list`, the one step that publishes it. A process killed before
//!   that rename leaves the stack as it was (and git's stale lock, which git too leaves).
//! - Compaction is git's auto-compaction: the segment of tables that breaks the geometric
//!   sequence of sizes (factor 2, measured as git measures them) is merged into one table in
//!   the same list update, its tables' `<name>.lock` taken with `O_EXCL` first (a segment
//!   another process is compacting is left alone), deletions dropped when the segment starts
//!   the stack. Log records are carried over byte for byte (their blocks inflated, merged by
//!   key, deflated again). [`compact_all`] is `git pack-refs` in-process: the whole stack,
//!   its tables locked under the list's lock, the merged table written with the list's lock
//!   let go (as git does), then put in place under the lock again.
//! - What this writer does not write, git writes (the caller falls back to `git update-ref`):
//!   a ref that has a reflog, or that git would start one for (`HEAD`, `refs/heads/`,
//!   `refs/remotes/`, `refs/notes/`), a record too large for a block, and any repository whose
//!   settings change how tables are written (see [`Settings`]).
//! - Tables are written as git writes them by default: version 1 for SHA-1 (2 with the hash
//!   id for SHA-256), 4096-byte blocks padded where another block follows, a restart point
//!   every 16 records, log blocks deflated and unpadded, an index of refs or of logs (one level
//!   a time, until a level has at most three blocks) when a section has more than three
//!   blocks; no object index, which readers do without.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gix::ObjectId;

use super::super::refdb::Expect;
use super::{
    read_list, Entry, LogRecord, Stack, Stored, BLOCK_INDEX, BLOCK_LOG, BLOCK_REF, TABLES_LIST,
};
use crate::error::{Error, Result};

const BLOCK_SIZE: usize = 4096;
const RESTART_INTERVAL: usize = 16;
/// The factor of git's geometric compaction.
const GEOMETRIC_FACTOR: u64 = 2;
/// An index level is written while the level below has more blocks than this.
const INDEX_THRESHOLD: usize = 3;

/// How the repository's settings let this writer write: `None` from [`Settings::read`] when
/// they ask for tables it does not write (git writes those).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// `reftable.autoCompaction`: whether a write compacts the stack.
    pub(crate) compact: bool,
    /// Where git would find a `reference-transaction` hook: a write is git's while one is
    /// there (git runs it for every ref update; this writer does not).
    pub(crate) hook: PathBuf,
}

impl Settings {
    /// Reads the settings through `setting` (a configuration lookup): this writer writes
    /// unless `core.logAllRefUpdates` is `always` (every ref would have a reflog),
    /// `core.sharedRepository` is set (files take its modes), or a `reftable.` setting other
    /// than the lock timeout and auto-compaction changes the tables' shape.
    /// `hook` is where the `reference-transaction` hook would be.
    pub(crate) fn read(
        setting: impl Fn(&str) -> Option<String>,
        hook: PathBuf,
    ) -> Option<Settings> {
        let set = |key: &str| setting(key).map(|v| v.trim().to_ascii_lowercase());
        if set("core.logAllRefUpdates").as_deref() == Some("always") {
            return None;
        }
        if set("core.sharedRepository")
            .is_some_and(|v| !matches!(v.as_str(), "false" | "umask" | "0" | "no" | "off" | ""))
        {
            return None;
        }
        for key in [
            "reftable.blockSize",
            "reftable.restartInterval",
            "reftable.indexObjects",
            "reftable.geometricFactor",
        ] {
            if set(key).is_some() {
                return None;
            }
        }
        let compact = !matches!(
            set("reftable.autoCompaction").as_deref(),
            Some("false" | "no" | "off" | "0")
        );
        Some(Settings { compact, hook })
    }
}

/// What a transaction came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every edit is in the stack.
    Done,
    /// A ref was not at its expected value: nothing was written.
    Lost,
    /// The ref `name` cannot be created: `existing` is in its way (full names).
    Clash { name: String, existing: String },
    /// The lock stayed held past the lock timeout.
    Locked,
    /// The object `id` that `name` would point at is not in the repository.
    Missing { name: String, id: ObjectId },
    /// Not for this writer: git is to write it (why, for the record).
    ToGit(&'static str),
}

/// One ref update: the full name, the new id (null: delete), what it must be at.
type Edit = (String, ObjectId, Expect);

/// Applies `edits` to the stack in `dir` in one transaction, all or none; `has_object` tells
/// whether a new value is in the object database (checked under the lock, as git checks it).
pub(crate) fn transact(
    dir: &Path,
    hash: gix::hash::Kind,
    settings: &Settings,
    lock_wait: Duration,
    fsync: bool,
    edits: &[Edit],
    has_object: &dyn Fn(&ObjectId) -> bool,
) -> Result<Outcome> {
    if edits.is_empty() {
        return Ok(Outcome::Done);
    }
    if edits.iter().any(|(name, _, _)| starts_reflog(name)) {
        return Ok(Outcome::ToGit("git starts a reflog for this ref"));
    }
    if is_executable(&settings.hook) {
        return Ok(Outcome::ToGit("git runs the reference-transaction hook"));
    }
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(pair) = sorted.windows(2).find(|p| p[0].0 == p[1].0) {
        return Err(Error::Git {
            context: "cannot update references (reftable)".into(),
            message: format!("multiple updates for ref '{}' not allowed", pair[0].0),
        });
    }
    let Some(lock) = Lock::take(&dir.join(format!("{TABLES_LIST}.lock")), lock_wait)? else {
        return Ok(Outcome::Locked);
    };
    let list_path = dir.join(TABLES_LIST);
    let stack = Stack::locked(dir, hash)?;
    if let Some(outcome) = check(&stack, &sorted, has_object)? {
        return Ok(outcome);
    }
    let names: Vec<&str> = sorted.iter().map(|(name, _, _)| name.as_str()).collect();
    for table in &stack.tables {
        if table.logs_any(&names)? {
            return Ok(Outcome::ToGit("the ref has a reflog"));
        }
    }
    let update = stack
        .newest_update()
        .checked_add(1)
        .ok_or_else(|| super::corrupt(&list_path, "lists a table of the last update index"))?;
    let records: Vec<(Vec<u8>, Entry)> = sorted
        .iter()
        .map(|(name, new, _)| {
            let value = if new.is_null() {
                Stored::Deletion
            } else {
                Stored::Object(*new)
            };
            (name.as_bytes().to_vec(), Entry { update, value })
        })
        .collect();
    let Some(bytes) = encode(hash, update, update, &records, &[]) else {
        return Ok(Outcome::ToGit("a ref record does not fit in a block"));
    };
    let new = NewTable {
        update,
        records,
        bytes,
    };
    let mut plan = Plan::new(dir, fsync);
    let segment = if settings.compact {
        plan.lock_segment(&stack, &new.bytes)
    } else {
        None
    };
    let result = plan.commit(&stack, lock, hash, segment, Some(&new));
    plan.clean_up();
    result.map(|_| Outcome::Done)
}

/// Compacts the whole stack in `dir` into one table, as `git pack-refs` does, and as git
/// does it: under the list's lock (waited on for `lock_wait`) every table's `<name>.lock` is
/// taken, then the list's lock is let go while the merged table is written (at 100k refs that
/// takes tens of milliseconds, which a writer waiting for the list need not wait), and taken
/// again to put the merged table in place of the tables it merged, before those that were
/// added meanwhile. No other writer can merge or remove the locked tables, so this never
/// gives up for a stack that grew meanwhile. Returns false, having changed nothing, when the
/// lock stayed held, a table is being compacted by another process, a record does not fit in
/// a block, or the merged tables no longer head the list: git's to do then.
pub(crate) fn compact_all(
    dir: &Path,
    hash: gix::hash::Kind,
    lock_wait: Duration,
    fsync: bool,
) -> Result<bool> {
    let lock_path = dir.join(format!("{TABLES_LIST}.lock"));
    let Some(lock) = Lock::take(&lock_path, lock_wait)? else {
        return Ok(false);
    };
    let stack = Stack::locked(dir, hash)?;
    let n = stack.tables.len();
    if n <= 1 {
        return Ok(true);
    }
    let mut plan = Plan::new(dir, fsync);
    if !plan.lock_tables(&stack, (0, n)) {
        return Ok(false);
    }
    drop(lock);
    let result = plan.compact_unlisted(&stack, &lock_path, hash, lock_wait);
    plan.clean_up();
    result
}

/// The table of a transaction: its update index, records and bytes.
struct NewTable {
    update: u64,
    records: Vec<(Vec<u8>, Entry)>,
    bytes: Vec<u8>,
}

/// Checks every edit against the stack: the compare-and-swap, ref names in each other's way,
/// and the new objects. `None` when the transaction may go on.
fn check(
    stack: &Stack,
    sorted: &[&Edit],
    has_object: &dyn Fn(&ObjectId) -> bool,
) -> Result<Option<Outcome>> {
    for (name, _, expect) in sorted {
        let now = stack.get(name)?;
        let holds = match (expect, &now) {
            (Expect::Any, _) => true,
            (Expect::Absent, now) => now.is_none(),
            (Expect::At(old), Some(super::Target::Object(id))) => id == old,
            (Expect::At(_), _) => false,
        };
        if !holds {
            return Ok(Some(Outcome::Lost));
        }
    }
    let deleted = |n: &str| {
        sorted
            .iter()
            .any(|(name, new, _)| name == n && new.is_null())
    };
    for (name, new, _) in sorted.iter().filter(|(_, new, _)| !new.is_null()) {
        // A ref named by a directory of this one: in the stack, or among the edits.
        for (at, _) in name.match_indices('/') {
            let dir = &name[..at];
            let created = sorted.iter().any(|(n, id, _)| n == dir && !id.is_null());
            if created || (stack.get(dir)?.is_some() && !deleted(dir)) {
                return Ok(Some(Outcome::Clash {
                    name: name.clone(),
                    existing: dir.to_owned(),
                }));
            }
        }
        // A ref under this one as a directory.
        let under = format!("{name}/");
        if let Some((existing, _)) = stack
            .under(&under)?
            .into_iter()
            .find(|(existing, _)| !deleted(existing))
        {
            return Ok(Some(Outcome::Clash {
                name: name.clone(),
                existing,
            }));
        }
        if !has_object(new) {
            return Ok(Some(Outcome::Missing {
                name: name.clone(),
                id: *new,
            }));
        }
    }
    Ok(None)
}

/// Returns true for a ref git starts a reflog for when it moves (in a repository with a work
/// tree): this writer leaves those to git.
fn starts_reflog(name: &str) -> bool {
    name == "HEAD"
        || ["refs/heads/", "refs/remotes/", "refs/notes/"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// Returns true if `path` is a file git would run as a hook (executable by someone).
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The files a transaction writes, to remove if it does not go through, and the locks of the
/// tables it compacts.
struct Plan<'a> {
    dir: &'a Path,
    fsync: bool,
    /// New tables in place (removed on failure).
    written: Vec<PathBuf>,
    /// New tables written under their temporary names, not yet renamed (removed on failure).
    staged: Vec<PathBuf>,
    table_locks: Vec<PathBuf>,
}

impl<'a> Plan<'a> {
    fn new(dir: &'a Path, fsync: bool) -> Plan<'a> {
        Plan {
            dir,
            fsync,
            written: Vec::new(),
            staged: Vec::new(),
            table_locks: Vec::new(),
        }
    }

    /// Writes the tables and the new list, renamed over the old one: the tables `[start, end)`
    /// of `segment` merged into one (with `new`'s records when `end` is past the last table),
    /// and `new`'s table unless it was merged. A segment whose merge does not fit in blocks
    /// is left as it is. Returns false when the segment was left. What it wrote and did not
    /// publish is removed while the list's lock is still held, as git removes it.
    fn commit(
        &mut self,
        stack: &Stack,
        mut lock: Lock,
        hash: gix::hash::Kind,
        segment: Option<(usize, usize)>,
        new: Option<&NewTable>,
    ) -> Result<bool> {
        let published = self.commit_locked(stack, &mut lock, hash, segment, new);
        self.remove_unpublished();
        drop(lock);
        published
    }

    /// [`Plan::commit`], under `lock`.
    fn commit_locked(
        &mut self,
        stack: &Stack,
        lock: &mut Lock,
        hash: gix::hash::Kind,
        segment: Option<(usize, usize)>,
        new: Option<&NewTable>,
    ) -> Result<bool> {
        let n = stack.tables.len();
        let mut names: Vec<String> = Vec::with_capacity(n + 1);
        let mut replaced: Vec<&str> = Vec::new();
        let merged = segment.and_then(|(start, end)| {
            let (min, max, refs, logs) = merge(stack, start, end, new)?;
            Some((start, end, encode(hash, min, max, &refs, &logs)?, min, max))
        });
        let compacted = merged.is_some();
        match merged {
            Some((start, end, bytes, min, max)) => {
                names.extend(stack.names[..start].iter().cloned());
                names.push(self.place(&bytes, min, max)?);
                names.extend(stack.names[end.min(n)..].iter().cloned());
                replaced.extend(stack.names[start..end.min(n)].iter().map(String::as_str));
                if let Some(new) = new.filter(|_| end <= n) {
                    names.push(self.place(&new.bytes, new.update, new.update)?);
                }
            }
            None => {
                names.extend(stack.names.iter().cloned());
                if let Some(new) = new {
                    names.push(self.place(&new.bytes, new.update, new.update)?);
                }
            }
        }
        if new.is_none() && !compacted {
            return Ok(false);
        }
        let mut list = String::new();
        for name in &names {
            list.push_str(name);
            list.push('\n');
        }
        lock.publish(list.as_bytes(), self.fsync)?;
        self.written.clear();
        if self.fsync {
            sync_dir(self.dir)?;
        }
        // The replaced tables: readers that listed them retry with the new list.
        for name in replaced {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        Ok(true)
    }

    /// Chooses the segment to compact (git's geometric rule over the sizes of the tables, the
    /// new one last) and takes its tables' locks: the segment `[start, end)` of the stack's
    /// tables, where `end` past the last means the new table is in it; `None` when nothing is
    /// to be compacted or a table is locked.
    fn lock_segment(&mut self, stack: &Stack, table: &[u8]) -> Option<(usize, usize)> {
        // git's measure of a table: its size without the footer, less its header but a byte.
        let measure = |size: u64, header_len: u64| size.saturating_sub(2 * header_len + 44 - 1);
        let header_len = stack.tables.first().map_or(24, |t| t.header_len) as u64;
        let mut sizes: Vec<u64> = stack
            .tables
            .iter()
            .map(|t| measure(t.size, t.header_len as u64))
            .collect();
        sizes.push(measure(table.len() as u64, header_len));
        let segment = segment(&sizes)?;
        self.lock_tables(stack, segment).then_some(segment)
    }

    /// Takes the `<name>.lock` of each table of `[start, end)` (those of the stack), as git's
    /// compaction does; false, with none taken, when one is held.
    fn lock_tables(&mut self, stack: &Stack, (start, end): (usize, usize)) -> bool {
        for name in &stack.names[start..end.min(stack.names.len())] {
            let path = self.dir.join(format!("{name}.lock"));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => self.table_locks.push(path),
                Err(_) => {
                    self.release_table_locks();
                    return false;
                }
            }
        }
        true
    }

    /// The rest of [`compact_all`], its tables locked and the list's lock let go: writes the
    /// merged table, takes the list's lock again and, if the merged tables still head the
    /// list, publishes it with the merged table in their place.
    fn compact_unlisted(
        &mut self,
        stack: &Stack,
        lock_path: &Path,
        hash: gix::hash::Kind,
        lock_wait: Duration,
    ) -> Result<bool> {
        let n = stack.tables.len();
        let Some((min, max, refs, logs)) = merge(stack, 0, n, None) else {
            return Ok(false);
        };
        let Some(bytes) = encode(hash, min, max, &refs, &logs) else {
            return Ok(false);
        };
        // Written beside the stack under a temporary name, and renamed to a table's name only
        // under the list's lock: a table of that name outside the list is then only ever one
        // a killed writer left, which a clean-up under the lock may remove ([`super::clean`]).
        let (merged, temp) = self.stage(&bytes, min, max)?;
        let Some(mut lock) = Lock::take(lock_path, lock_wait)? else {
            return Ok(false);
        };
        // What is not published goes while the list's lock is still held, as git removes it.
        let published = self.publish_merged(stack, &mut lock, &merged, &temp);
        self.remove_unpublished();
        drop(lock);
        published
    }

    /// The end of [`Plan::compact_unlisted`], under `lock`: if the tables merged into
    /// `merged` (written at `temp`) still head the list, renames it into place and publishes
    /// the list with it in their place.
    fn publish_merged(
        &mut self,
        stack: &Stack,
        lock: &mut Lock,
        merged: &str,
        temp: &Path,
    ) -> Result<bool> {
        let n = stack.tables.len();
        let list = read_list(&self.dir.join(TABLES_LIST))?.unwrap_or_default();
        let now: Vec<&[u8]> = list
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let heads = now.len() >= n
            && now
                .iter()
                .zip(&stack.names)
                .all(|(listed, name)| *listed == name.as_bytes());
        if !heads {
            return Ok(false);
        }
        self.settle(temp, merged)?;
        let mut out = Vec::with_capacity(list.len());
        out.extend_from_slice(merged.as_bytes());
        out.push(b'\n');
        for name in &now[n..] {
            out.extend_from_slice(name);
            out.push(b'\n');
        }
        lock.publish(&out, self.fsync)?;
        self.written.clear();
        if self.fsync {
            sync_dir(self.dir)?;
        }
        // The merged tables: readers that listed them retry with the new list.
        for name in &stack.names {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        Ok(true)
    }

    /// Writes `bytes` as a new table of the update indices `min` to `max` under git's name
    /// for it; returns the name.
    fn place(&mut self, bytes: &[u8], min: u64, max: u64) -> Result<String> {
        let (name, temp) = self.stage(bytes, min, max)?;
        self.settle(&temp, &name)?;
        Ok(name)
    }

    /// Writes `bytes` beside the stack as `<name>.temp`, where `name` is git's name for a
    /// table of the update indices `min` to `max`; returns the name and the temporary path.
    fn stage(&mut self, bytes: &[u8], min: u64, max: u64) -> Result<(String, PathBuf)> {
        let name = format!("0x{min:012x}-0x{max:012x}-{:08x}.ref", fastrand::u32(..));
        let temp = self.dir.join(format!("{name}.temp"));
        self.staged.push(temp.clone());
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut file| {
                file.write_all(bytes)?;
                if self.fsync {
                    file.sync_all()?;
                }
                Ok(())
            })
            .map_err(|e| io_error(&temp, "cannot write", e))?;
        Ok((name, temp))
    }

    /// Renames the table [`Plan::stage`] wrote at `temp` to its name.
    fn settle(&mut self, temp: &Path, name: &str) -> Result<()> {
        let path = self.dir.join(name);
        std::fs::rename(temp, &path).map_err(|e| io_error(&path, "cannot write", e))?;
        self.staged.retain(|t| t != temp);
        self.written.push(path);
        Ok(())
    }

    fn release_table_locks(&mut self) {
        for path in self.table_locks.drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Removes the tables of a list that was not published.
    fn remove_unpublished(&mut self) {
        for path in self.written.drain(..).chain(self.staged.drain(..)) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Removes the tables of a list that was not published, and the table locks.
    fn clean_up(&mut self) {
        self.remove_unpublished();
        self.release_table_locks();
    }
}

/// Returns the segment `[start, end)` of `sizes` (oldest first) whose merging restores the
/// geometric sequence, as git's auto-compaction chooses it: the newest table that a bigger
/// successor breaks the sequence at ends it, and it reaches back as far as an older table is
/// smaller than the factor times what the segment holds after it. `None` when the sizes are
/// geometric already.
fn segment(sizes: &[u64]) -> Option<(usize, usize)> {
    let n = sizes.len();
    if n <= 1 {
        return None;
    }
    let mut i = n - 1;
    let mut end = None;
    while i > 0 {
        if sizes[i - 1] < sizes[i].saturating_mul(GEOMETRIC_FACTOR) {
            end = Some(i + 1);
            break;
        }
        i -= 1;
    }
    let end = end?;
    let mut bytes = sizes[i];
    let mut start = None;
    while i > 0 {
        let current = bytes;
        bytes = bytes.saturating_add(sizes[i - 1]);
        if sizes[i - 1] < current.saturating_mul(GEOMETRIC_FACTOR) {
            start = Some(i - 1);
        }
        i -= 1;
    }
    start.map(|start| (start, end))
}

/// The records a merge writes: refs `(name, entry)` and logs, each sorted.
type Merged = (u64, u64, Vec<(Vec<u8>, Entry)>, Vec<LogRecord>);

/// Merges the tables `[start, end)` of the stack (`end` past its last: `new`'s records too)
/// into one run of ref records and one of log records, newer shadowing older, deletions
/// dropped when the segment starts the stack; returns its update indices and records, or
/// `None` if a table cannot be read whole or holds a record outside its own update indices
/// (left for git to compact).
fn merge(stack: &Stack, start: usize, end: usize, new: Option<&NewTable>) -> Option<Merged> {
    let n = stack.tables.len();
    let mut refs: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
    let mut logs: BTreeMap<Vec<u8>, LogRecord> = BTreeMap::new();
    for table in &stack.tables[start..end.min(n)] {
        if let Some(mut iter) = table.seek(b"").ok()? {
            while let Some((key, entry)) = iter.next().ok()? {
                if entry.update < table.min_update || entry.update > table.max_update {
                    return None;
                }
                refs.insert(key.to_vec(), entry);
            }
        }
        for log in table.logs().ok()? {
            logs.insert(log.key.clone(), log);
        }
    }
    let mut max = stack.tables[end.min(n) - 1].max_update;
    if let Some(new) = new.filter(|_| end > n) {
        refs.extend(new.records.iter().cloned());
        max = new.update;
    }
    let min = stack.tables.get(start).map_or(max, |t| t.min_update);
    let refs = refs
        .into_iter()
        .filter(|(_, entry)| start > 0 || entry.value != Stored::Deletion)
        .collect();
    let logs = logs
        .into_values()
        .filter(|log| start > 0 || log.kind != 0)
        .collect();
    Some((min, max, refs, logs))
}

/// Encodes a table of the update indices `min` to `max` holding `records` (sorted by name,
/// each update index in that range) and `logs` (sorted by key); `None` when a record does not
/// fit in a block.
fn encode(
    hash: gix::hash::Kind,
    min: u64,
    max: u64,
    records: &[(Vec<u8>, Entry)],
    logs: &[LogRecord],
) -> Option<Vec<u8>> {
    let mut header = b"REFT".to_vec();
    match hash {
        gix::hash::Kind::Sha1 => header.push(1),
        _ => header.push(2),
    }
    header.extend_from_slice(&(BLOCK_SIZE as u32).to_be_bytes()[1..]);
    header.extend_from_slice(&min.to_be_bytes());
    header.extend_from_slice(&max.to_be_bytes());
    if hash != gix::hash::Kind::Sha1 {
        header.extend_from_slice(b"s256");
    }
    let mut w = Writer {
        out: Vec::new(),
        padding: 0,
        header,
    };
    let refs = records.iter().map(|(name, entry)| {
        let mut value = Vec::new();
        put_varint(&mut value, entry.update - min);
        let kind = match &entry.value {
            Stored::Deletion => 0,
            Stored::Object(id) => {
                value.extend_from_slice(id.as_bytes());
                1
            }
            Stored::Peeled(id, peeled) => {
                value.extend_from_slice(id.as_bytes());
                value.extend_from_slice(peeled.as_bytes());
                2
            }
            Stored::Symbolic(to) => {
                put_varint(&mut value, to.len() as u64);
                value.extend_from_slice(to);
                3
            }
        };
        (name.clone(), kind, value)
    });
    let level = w.section(BLOCK_REF, refs)?;
    let ref_index = w.index(level)?;
    // A table of logs alone has them at its start, where the footer's offset is 0.
    let log_at = w.next_offset();
    let logs = logs
        .iter()
        .map(|log| (log.key.clone(), log.kind, log.value.clone()));
    let level = w.section(BLOCK_LOG, logs)?;
    let log_at = if level.is_empty() { 0 } else { log_at };
    let log_index = w.index(level)?;
    let mut out = w.out;
    if out.is_empty() {
        out.extend_from_slice(&w.header);
    }
    let mut footer = w.header;
    for field in [ref_index, 0, 0, log_at, log_index] {
        footer.extend_from_slice(&field.to_be_bytes());
    }
    let crc = crc32fast::hash(&footer);
    footer.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&footer);
    Some(out)
}

/// A table being written: what is written so far, the padding owed before the next block
/// (the last block of a file is not padded), and the file header the first block begins with.
struct Writer {
    out: Vec<u8>,
    padding: usize,
    header: Vec<u8>,
}

impl Writer {
    /// Where the next block begins.
    fn next_offset(&self) -> u64 {
        (self.out.len() + self.padding) as u64
    }

    fn block(&self, kind: u8) -> BlockBuf {
        let mut buf = if self.out.is_empty() && self.padding == 0 {
            self.header.clone()
        } else {
            Vec::new()
        };
        let hdr = buf.len();
        buf.push(kind);
        buf.extend_from_slice(&[0, 0, 0]);
        BlockBuf {
            buf,
            hdr,
            restarts: Vec::new(),
            entries: 0,
            last: Vec::new(),
        }
    }

    /// Writes `records` (`(key, value type, value)`, sorted) as blocks of `kind`; returns
    /// each block's last key and offset, what the index above them holds.
    fn section(
        &mut self,
        kind: u8,
        records: impl Iterator<Item = (Vec<u8>, u8, Vec<u8>)>,
    ) -> Option<Vec<(Vec<u8>, u64)>> {
        let mut blocks = Vec::new();
        let mut block = self.block(kind);
        for (key, value_type, value) in records {
            if block.add(&key, value_type, &value) {
                continue;
            }
            if block.entries == 0 {
                return None;
            }
            let full = std::mem::take(&mut block);
            blocks.push(self.flush(kind, full)?);
            block = self.block(kind);
            if !block.add(&key, value_type, &value) {
                return None;
            }
        }
        if block.entries > 0 {
            blocks.push(self.flush(kind, block)?);
        }
        Some(blocks)
    }

    /// Writes the index of a section's blocks (`(last key, offset)` each), one level after
    /// another until a level has at most [`INDEX_THRESHOLD`] blocks; returns where the top
    /// level begins, 0 for a section too small to have an index.
    fn index(&mut self, mut level: Vec<(Vec<u8>, u64)>) -> Option<u64> {
        let mut at = 0;
        while level.len() > INDEX_THRESHOLD {
            at = self.next_offset();
            let entries = level.into_iter().map(|(key, off)| {
                let mut value = Vec::new();
                put_varint(&mut value, off);
                (key, 0, value)
            });
            level = self.section(BLOCK_INDEX, entries)?;
        }
        Some(at)
    }

    /// Ends `block` (its restart table, its length) and writes it after the padding owed: as
    /// it is, padded to the block size if another follows, or, a log block, its records and
    /// restarts deflated, unpadded. `None` if deflate fails.
    fn flush(&mut self, kind: u8, mut block: BlockBuf) -> Option<(Vec<u8>, u64)> {
        let at = self.next_offset();
        for restart in &block.restarts {
            block.buf.extend_from_slice(&restart.to_be_bytes()[1..]);
        }
        block
            .buf
            .extend_from_slice(&(block.restarts.len() as u16).to_be_bytes());
        let len = block.buf.len() as u32;
        block.buf[block.hdr + 1..block.hdr + 4].copy_from_slice(&len.to_be_bytes()[1..]);
        self.out.resize(self.out.len() + self.padding, 0);
        if kind == BLOCK_LOG {
            let (head, body) = block.buf.split_at(block.hdr + 4);
            let mut deflate =
                gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::DEFAULT);
            deflate
                .write_all(body)
                .and_then(|()| deflate.flush())
                .ok()?;
            self.out.extend_from_slice(head);
            self.out.extend_from_slice(&deflate.into_inner());
            self.padding = 0;
        } else {
            self.out.extend_from_slice(&block.buf);
            self.padding = BLOCK_SIZE.saturating_sub(block.buf.len());
        }
        Some((block.last, at))
    }
}

/// A block being filled.
#[derive(Default)]
struct BlockBuf {
    buf: Vec<u8>,
    /// Where the block's own header is (after the file header, in the first block).
    hdr: usize,
    restarts: Vec<u32>,
    entries: usize,
    last: Vec<u8>,
}

impl BlockBuf {
    /// Adds a record if it fits (with the restart table the block will end with).
    fn add(&mut self, key: &[u8], value_type: u8, value: &[u8]) -> bool {
        let restart = self.entries.is_multiple_of(RESTART_INTERVAL);
        let prefix = if restart {
            0
        } else {
            self.last
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let mut record = Vec::with_capacity(key.len() + value.len() + 4);
        put_varint(&mut record, prefix as u64);
        put_varint(
            &mut record,
            ((key.len() - prefix) as u64) << 3 | u64::from(value_type),
        );
        record.extend_from_slice(&key[prefix..]);
        record.extend_from_slice(value);
        let restarts = self.restarts.len() + usize::from(restart);
        if self.buf.len() + record.len() + 3 * restarts + 2 > BLOCK_SIZE {
            return false;
        }
        if restart {
            self.restarts.push(self.buf.len() as u32);
        }
        self.buf.extend_from_slice(&record);
        self.entries += 1;
        self.last = key.to_vec();
        true
    }
}

/// Writes git's variable-length integer (the reader's [`super::varint`]).
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    let mut bytes = [0u8; 10];
    let mut at = bytes.len() - 1;
    bytes[at] = (value & 0x7f) as u8;
    while value >> 7 != 0 {
        value = (value >> 7) - 1;
        at -= 1;
        bytes[at] = 0x80 | (value & 0x7f) as u8;
    }
    out.extend_from_slice(&bytes[at..]);
}

/// `tables.list.lock`, held: removed when dropped, unless it was renamed into place.
pub(super) struct Lock {
    path: PathBuf,
    file: Option<File>,
}

impl Lock {
    /// Takes the lock at `path`, waiting for it with backoff for `wait`; `None` when it stayed
    /// held that long.
    pub(super) fn take(path: &Path, wait: Duration) -> Result<Option<Lock>> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(file) => {
                    return Ok(Some(Lock {
                        path: path.to_owned(),
                        file: Some(file),
                    }))
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(None);
                    }
                    let jitter = Duration::from_micros(fastrand::u64(..=pause.as_micros() as u64));
                    std::thread::sleep((pause + jitter).min(deadline - now));
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(e) => return Err(io_error(path, "cannot create", e)),
            }
        }
    }

    /// Writes `list` into the lock and renames it over `tables.list`.
    fn publish(&mut self, list: &[u8], fsync: bool) -> Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let target = self.path.with_extension("");
        file.write_all(list)
            .and_then(|()| if fsync { file.sync_all() } else { Ok(()) })
            .and_then(|()| std::fs::rename(&self.path, &target))
            .map_err(|e| {
                self.file = Some(file);
                io_error(&target, "cannot write", e)
            })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, "cannot fsync the directory", e))
}

fn io_error(path: &Path, what: &str, e: io::Error) -> Error {
    Error::Io {
        context: format!("{what} {}", path.display()),
        source: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_written_as_the_reader_reads_them() {
        for value in [
            0u64,
            1,
            127,
            128,
            255,
            256,
            16511,
            16512,
            1 << 40,
            u64::MAX >> 1,
        ] {
            let mut bytes = Vec::new();
            put_varint(&mut bytes, value);
            let mut pos = 0;
            assert_eq!(super::super::varint(&bytes, &mut pos), Some(value));
            assert_eq!(pos, bytes.len());
        }
    }

    /// Records of every value type, `n` of them, sorted, their update indices in 5..=9.
    fn records(n: usize, seed: u64) -> Vec<(Vec<u8>, Entry)> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let id = |rng: &mut fastrand::Rng| {
            let mut bytes = [0u8; 20];
            rng.fill(&mut bytes);
            ObjectId::from(bytes)
        };
        let mut names = BTreeMap::new();
        while names.len() < n {
            let name = format!(
                "refs/{}/{:x}{:x}",
                ["heads", "leases", "tags"][rng.usize(..3)],
                rng.u64(..) >> rng.u32(..60),
                rng.u64(..)
            );
            let value = match rng.u8(..4) {
                0 => Stored::Deletion,
                1 => Stored::Object(id(&mut rng)),
                2 => Stored::Peeled(id(&mut rng), id(&mut rng)),
                _ => Stored::Symbolic(b"refs/heads/main".to_vec()),
            };
            let update = rng.u64(5..=9);
            names.insert(name.into_bytes(), Entry { update, value });
        }
        names.into_iter().collect()
    }

    /// Log records, `n` of them, sorted: entries and deletions, messages up to 300 bytes.
    fn logs(n: usize, seed: u64) -> Vec<LogRecord> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut all = BTreeMap::new();
        while all.len() < n {
            let mut key = format!("refs/heads/{:x}", rng.u16(..)).into_bytes();
            key.push(0);
            key.extend_from_slice(&(u64::MAX - rng.u64(5..=9)).to_be_bytes());
            let (kind, value) = if rng.u8(..5) == 0 {
                (0, Vec::new())
            } else {
                let mut value = vec![0u8; 40];
                rng.fill(&mut value);
                for field in [&b"A U Thor"[..], b"author@example.com"] {
                    put_varint(&mut value, field.len() as u64);
                    value.extend_from_slice(field);
                }
                put_varint(&mut value, rng.u64(..1 << 40));
                value.extend_from_slice(&[0, 60]);
                let message = "m".repeat(rng.usize(..300));
                put_varint(&mut value, message.len() as u64);
                value.extend_from_slice(message.as_bytes());
                (1, value)
            };
            all.insert(key.clone(), LogRecord { key, kind, value });
        }
        all.into_values().collect()
    }

    #[test]
    fn log_records_read_back_byte_for_byte_with_or_without_refs_before_them() {
        for (refs, n, seed) in [(0, 1, 11), (0, 500, 12), (300, 40, 13), (2000, 3000, 14)] {
            let dir = tempfile::tempdir().expect("a directory");
            let records = records(refs, seed);
            let logs = logs(n, seed);
            let bytes = encode(gix::hash::Kind::Sha1, 5, 9, &records, &logs).expect("encoded");
            let stack = stack_of(dir.path(), &bytes);
            let table = &stack.tables[0];
            assert_eq!(table.logs().expect("logs"), logs, "{refs} refs, {n} logs");
            let name = std::str::from_utf8(&logs[n / 2].key[..logs[n / 2].key.len() - 9])
                .expect("UTF-8")
                .to_owned();
            assert!(table.logs_any(&[name.as_str()]).expect("logs"));
            assert!(!table.logs_any(&["refs/leases/none"]).expect("logs"));
            let mut read = 0;
            if let Some(mut iter) = table.seek(b"").expect("seek") {
                while iter.next().expect("next").is_some() {
                    read += 1;
                }
            }
            assert_eq!(read, refs);
        }
    }

    /// Writes `bytes` as the one table of a stack in `dir` and opens it.
    fn stack_of(dir: &Path, bytes: &[u8]) -> Stack {
        let name = "0x000000000005-0x000000000009-00000000.ref";
        std::fs::write(dir.join(name), bytes).expect("write the table");
        std::fs::write(dir.join(TABLES_LIST), format!("{name}\n")).expect("write the list");
        Stack::open(dir, gix::hash::Kind::Sha1).expect("open the stack")
    }

    #[test]
    fn tables_read_back_as_they_were_written_from_empty_to_a_two_level_index() {
        for (n, seed) in [
            (0, 1),
            (1, 2),
            (15, 3),
            (16, 4),
            (17, 5),
            (700, 6),
            (60_000, 7),
        ] {
            let dir = tempfile::tempdir().expect("a directory");
            let records = records(n, seed);
            let bytes = encode(gix::hash::Kind::Sha1, 5, 9, &records, &[]).expect("encoded");
            let stack = stack_of(dir.path(), &bytes);
            let table = &stack.tables[0];
            assert_eq!((table.min_update, table.max_update), (5, 9));
            // Every record, in order, with its update index and value as written.
            let mut read = Vec::new();
            if let Some(mut iter) = table.seek(b"").expect("seek") {
                while let Some((key, entry)) = iter.next().expect("next") {
                    read.push((key.to_vec(), entry));
                }
            }
            assert_eq!(read, records, "{n} records");
            // Each found alone, through the index where there is one.
            for (name, entry) in records.iter().step_by(97) {
                let name = std::str::from_utf8(name).expect("UTF-8");
                assert_eq!(stack.get(name).expect("get"), entry.record(), "{name}");
            }
            assert_eq!(stack.get("refs/zzz").expect("get"), None);
            if n == 60_000 {
                // The top of the index points at index blocks: two levels.
                let top = table
                    .block(table.ref_index, table.index_end)
                    .expect("read")
                    .expect("the index");
                assert_eq!(top.kind, BLOCK_INDEX);
                let mut cursor = top.seek(table, table.ref_index, b"").expect("seek");
                let Some(super::super::Value::Position(below)) = cursor.peeked.take() else {
                    panic!("an index record first");
                };
                let below = table
                    .block(below, table.index_end)
                    .expect("read")
                    .expect("a block");
                assert_eq!(below.kind, BLOCK_INDEX, "a second level");
            }
        }
    }

    #[test]
    fn a_record_larger_than_a_block_is_not_written() {
        let name = format!("refs/leases/{}", "x".repeat(BLOCK_SIZE));
        let records = vec![(
            name.into_bytes(),
            Entry {
                update: 1,
                value: Stored::Deletion,
            },
        )];
        assert!(encode(gix::hash::Kind::Sha1, 1, 1, &records, &[]).is_none());
    }

    #[test]
    fn the_segment_is_what_restores_the_geometric_sequence() {
        assert_eq!(segment(&[]), None);
        assert_eq!(segment(&[5]), None);
        assert_eq!(segment(&[64, 32, 16, 8, 4, 2, 1]), None);
        // The segment reaches back as long as an older table is less than twice what it holds.
        assert_eq!(segment(&[64, 32, 16, 8, 4, 3, 1]), Some((0, 6)));
        assert_eq!(segment(&[128, 32, 16, 8, 4, 3, 1]), Some((1, 6)));
        assert_eq!(segment(&[100, 100]), Some((0, 2)));
        assert_eq!(segment(&[1000, 10, 10]), Some((1, 3)));
    }

    /// A claim of `name` at an id made of `byte`, through [`transact`] with auto-compaction
    /// as configured.
    fn claim(dir: &Path, compact: bool, name: &str, byte: u8) -> Outcome {
        let settings = Settings {
            compact,
            hook: dir.join("no-hook"),
        };
        let edit = (
            name.to_owned(),
            ObjectId::from_bytes_or_panic(&[byte; 20]),
            Expect::Absent,
        );
        transact(
            dir,
            gix::hash::Kind::Sha1,
            &settings,
            Duration::from_millis(100),
            false,
            &[edit],
            &|_| true,
        )
        .expect("a claim")
    }

    #[test]
    fn a_full_compaction_lets_writers_add_tables_while_it_merges_and_keeps_them_after() {
        let dir = tempfile::tempdir().expect("a directory");
        let dir = dir.path();
        for (i, name) in ["refs/leases/a", "refs/leases/b", "refs/leases/c"]
            .iter()
            .enumerate()
        {
            assert_eq!(claim(dir, false, name, i as u8 + 1), Outcome::Done);
        }
        let lock_path = dir.join(format!("{TABLES_LIST}.lock"));
        let stack = Stack::open(dir, gix::hash::Kind::Sha1).expect("open");
        assert_eq!(stack.tables.len(), 3);
        // What `compact_all` does before it lets the list's lock go: the tables locked.
        let mut plan = Plan::new(dir, false);
        assert!(plan.lock_tables(&stack, (0, 3)));
        // Meanwhile a writer takes the list's lock and adds its table; its own compaction
        // finds the tables locked and leaves them.
        assert_eq!(claim(dir, true, "refs/leases/d", 4), Outcome::Done);
        let grown = Stack::open(dir, gix::hash::Kind::Sha1).expect("open");
        assert_eq!(grown.tables.len(), 4, "{:?}", grown.names);
        assert!(plan
            .compact_unlisted(&stack, &lock_path, gix::hash::Kind::Sha1, Duration::ZERO)
            .expect("compacted"));
        plan.clean_up();
        let after = Stack::open(dir, gix::hash::Kind::Sha1).expect("open");
        assert_eq!(after.tables.len(), 2, "{:?}", after.names);
        assert_eq!(
            after.names[1], grown.names[3],
            "the writer's table stays last"
        );
        assert_eq!(
            (after.tables[0].min_update, after.tables[0].max_update),
            (grown.tables[0].min_update, grown.tables[2].max_update)
        );
        for (byte, name) in (1u8..).zip(["a", "b", "c", "d"]) {
            let id = ObjectId::from_bytes_or_panic(&[byte; 20]);
            assert!(
                matches!(after.get(&format!("refs/leases/{name}")).expect("read"),
                    Some(super::super::Target::Object(found)) if found == id),
                "{name}"
            );
        }
        let left: Vec<_> = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".lock") || n.ends_with(".temp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // A list whose head changed under the merge (tables no longer first) is not published.
        let stack = Stack::open(dir, gix::hash::Kind::Sha1).expect("open");
        let mut plan = Plan::new(dir, false);
        assert!(plan.lock_tables(&stack, (0, 2)));
        std::fs::write(dir.join(TABLES_LIST), format!("{}\n", after.names[1])).expect("write");
        assert!(!plan
            .compact_unlisted(&stack, &lock_path, gix::hash::Kind::Sha1, Duration::ZERO)
            .expect("left"));
        plan.clean_up();
        let list = std::fs::read_to_string(dir.join(TABLES_LIST)).expect("read");
        assert_eq!(list, format!("{}\n", after.names[1]));
        let files = std::fs::read_dir(dir).expect("list").count();
        assert_eq!(
            files, 3,
            "the list and the two tables, no merged table left behind"
        );
    }
}
