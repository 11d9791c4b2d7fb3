//! An in-process reader of a reftable stack (`$GIT_DIR/reftable/`), the format git documents in
//! `Documentation/technical/reftable.txt`: what [`crate::store::refdb`] reads refs with, so that
//! no read of a reftable repository starts a git process. It only reads: git writes, compacts
//! and deletes every table. It is fuzzed against stacks git wrote, compacted and not
//! (`reftable_reader::random_updates_deletions_and_compactions_read_as_git_lists_them`), and
//! against damaged and forged tables (`reftable_hostile`).
//!
//! - The stack is `tables.list`, one table name a line, oldest first; a newer table shadows an
//!   older one for the same name, and a deletion record there hides the ref. A snapshot is taken
//!   as git's readers take it: read the list, open every table; if one has gone (a compaction
//!   replaced the list meanwhile), read the list again and start over. A table missing from a
//!   list that has not changed is an error, not a retry.
//! - A table: its header (`REFT`, version 1 with SHA-1, or 2 with its hash id, block size,
//!   update indices), its footer (the header again, the section positions, a CRC-32 that is
//!   checked), and the ref blocks ('r') in front, with their restart points and
//!   prefix-compressed names, and the ref index ('i', one or more levels) where there is one.
//!   Only what a ref read needs is read, one block at a time with `pread`: the obj and log
//!   sections are passed over (an obj block or a log block ends the ref section).
//! - A ref record is a deletion, one object id, an object id and its peeled value (the first is
//!   the ref's), or a symbolic ref; reserved value types are errors, as are names, lengths and
//!   offsets that do not fit their block.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::refdb::Target;
use crate::error::{Error, Result};

mod bytes;
mod table;
use bytes::{corrupt, io_error};
use table::Table;

/// The name of the stack's list of tables, in the `reftable/` directory.
const TABLES_LIST: &str = "tables.list";

/// How many times a snapshot is started over when tables go while it is taken (each time
/// because the list changed meanwhile).
const SNAPSHOT_ATTEMPTS: usize = 1000;

/// The most tables a stack may list: far more than git's geometric compaction ever leaves
/// (about one per doubling of the refs), few enough that a snapshot's open files and reads
/// stay bounded whatever `tables.list` says.
const MAX_TABLES: usize = 10_000;

/// The largest `tables.list` read: [`MAX_TABLES`] names of git's form are about 500 KiB.
const MAX_LIST_BYTES: u64 = 1 << 20;

/// One table's record of a ref: `None` for a deletion.
type Record = Option<Target>;

/// The tables of a stack, oldest first, open: a consistent snapshot of the refs it holds.
#[derive(Debug, Default)]
pub(crate) struct Stack {
    tables: Vec<Table>,
    /// The tables' names, as `tables.list` gives them.
    names: Vec<String>,
}

impl Stack {
    /// Opens the stack in `dir` (a `reftable/` directory) as it is now, for a repository whose
    /// object ids are of `hash`. A directory without `tables.list` is an empty stack.
    pub(crate) fn open(dir: &Path, hash: gix::hash::Kind) -> Result<Stack> {
        let list_path = dir.join(TABLES_LIST);
        let read_list = || read_list(&list_path);
        let mut list = read_list()?;
        for _ in 0..SNAPSHOT_ATTEMPTS {
            let Some(bytes) = &list else {
                return Ok(Stack::default());
            };
            let missing = match Stack::listed(dir, hash, bytes)? {
                Ok(stack) => return Ok(stack),
                Err(missing) => missing,
            };
            let again = read_list()?;
            if again == list {
                return Err(corrupt(
                    &missing,
                    "is listed in tables.list but does not exist",
                ));
            }
            list = again;
        }
        Err(corrupt(
            &list_path,
            "kept changing while it was read (too many concurrent writers)",
        ))
    }

    /// Opens the tables that `list` (the bytes of `dir`'s `tables.list`) names: the stack, or
    /// the path of the first table that does not exist.
    fn listed(
        dir: &Path,
        hash: gix::hash::Kind,
        list: &[u8],
    ) -> Result<std::result::Result<Stack, PathBuf>> {
        let list_path = dir.join(TABLES_LIST);
        let mut stack = Stack::default();
        for name in list.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if stack.tables.len() == MAX_TABLES {
                return Err(corrupt(
                    &list_path,
                    &format!("lists more than {MAX_TABLES} tables"),
                ));
            }
            let name = table_name(&list_path, name)?;
            let path = dir.join(name);
            match open_file(&path) {
                Ok(file) => stack.tables.push(Table::open(path, file, hash)?),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(path)),
                Err(e) => return Err(io_error(&path, e)),
            }
            stack.names.push(name.to_owned());
        }
        Ok(Ok(stack))
    }

    /// Returns what the ref `name` is, if it exists: the newest table with a record of it
    /// decides.
    pub(crate) fn get(&self, name: &str) -> Result<Option<Target>> {
        for table in self.tables.iter().rev() {
            if let Some(mut iter) = table.seek(name.as_bytes())? {
                if let Some((key, entry)) = iter.next()? {
                    if key == name.as_bytes() {
                        return Ok(entry.record());
                    }
                }
            }
        }
        Ok(None)
    }

    /// Returns every ref whose name starts with `prefix`, sorted by name, merged across the
    /// stack (newer tables shadow older ones, deletions hide).
    pub(crate) fn under(&self, prefix: &str) -> Result<Vec<(String, Target)>> {
        Ok(self
            .records_under(0, prefix)?
            .into_iter()
            .filter_map(|(name, record)| Some((name, record?)))
            .collect())
    }

    /// The tables' names, oldest first, as `tables.list` gave them.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The update index of the stack's last transaction (0 when it has none).
    pub(crate) fn newest_update(&self) -> u64 {
        self.tables.iter().map(|t| t.max_update).max().unwrap_or(0)
    }

    /// Returns the newest record of every ref whose name starts with `prefix` that the tables
    /// from the `from`-th on (the newest ones) hold, sorted by name: `None` where the newest
    /// of them deletes it. From 0, the whole stack, deletions kept.
    pub(crate) fn records_under(&self, from: usize, prefix: &str) -> Result<Vec<(String, Record)>> {
        let prefix = prefix.as_bytes();
        let mut merged: Vec<(Vec<u8>, Record)> = Vec::new();
        for table in self.tables.iter().skip(from) {
            let mut records = Vec::new();
            if let Some(mut iter) = table.seek(prefix)? {
                while let Some((key, entry)) = iter.next()? {
                    if !key.starts_with(prefix) {
                        break;
                    }
                    records.push((key.to_vec(), entry.record()));
                }
            }
            merged = if merged.is_empty() {
                records
            } else {
                shadow(merged, records)
            };
        }
        merged
            .into_iter()
            .map(|(name, record)| match (String::from_utf8(name), record) {
                (Ok(name), record) => Ok((name, record)),
                // Only a ref that exists needs a name to be read by: a deletion of one git
                // took without UTF-8 stays a deletion (which no listing shows).
                (Err(e), None) => Ok((String::from_utf8_lossy(e.as_bytes()).into_owned(), None)),
                (Err(e), Some(_)) => Err(Error::Git {
                    context: "cannot read references (reftable)".into(),
                    message: format!(
                        "the ref name {:?} is not UTF-8",
                        String::from_utf8_lossy(e.as_bytes())
                    ),
                }),
            })
            .collect()
    }
}

/// Reads the list of tables at `path`: `None` when there is none; an error when it is not a
/// regular file (a FIFO would block the reader) or larger than any list git writes.
fn read_list(path: &Path) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = match open_file(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_LIST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > MAX_LIST_BYTES {
        return Err(corrupt(
            path,
            &format!("is larger than {MAX_LIST_BYTES} bytes, more than any stack has"),
        ));
    }
    Ok(Some(bytes))
}

/// Opens `path` for reading, refusing anything but a regular file: it is opened without
/// blocking (a FIFO opens at once, then is refused), as the stack's files are git's plain ones.
fn open_file(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "is not a regular file",
        ));
    }
    Ok(file)
}

/// Merges two sorted runs of records, `newer` winning where both have a name.
fn shadow(older: Vec<(Vec<u8>, Record)>, newer: Vec<(Vec<u8>, Record)>) -> Vec<(Vec<u8>, Record)> {
    let mut out = Vec::with_capacity(older.len() + newer.len());
    let mut older = older.into_iter().peekable();
    let mut newer = newer.into_iter().peekable();
    loop {
        let next = match (older.peek(), newer.peek()) {
            (None, None) => break,
            (Some(_), None) => older.next(),
            (None, Some(_)) => newer.next(),
            (Some((a, _)), Some((b, _))) => match a.cmp(b) {
                std::cmp::Ordering::Less => older.next(),
                std::cmp::Ordering::Greater => newer.next(),
                std::cmp::Ordering::Equal => {
                    older.next();
                    newer.next()
                }
            },
        };
        out.extend(next);
    }
    out
}

/// Returns the table name `name` of the list at `list`, refusing one that is not a plain file
/// name in the same directory.
fn table_name<'a>(list: &Path, name: &'a [u8]) -> Result<&'a str> {
    match std::str::from_utf8(name) {
        Ok(name) if !name.starts_with('.') && !name.contains('/') && !name.contains('\0') => {
            Ok(name)
        }
        _ => Err(corrupt(
            list,
            &format!(
                "names a table that is not a file beside it: {:?}",
                String::from_utf8_lossy(name)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::ObjectId;

    #[test]
    fn a_newer_run_shadows_an_older_one() {
        let id = |b: u8| Some(Target::Object(ObjectId::from([b; 20])));
        let older = vec![
            (b"a".to_vec(), id(1)),
            (b"b".to_vec(), id(2)),
            (b"d".to_vec(), id(4)),
        ];
        let newer = vec![
            (b"b".to_vec(), None),
            (b"c".to_vec(), id(3)),
            (b"d".to_vec(), id(5)),
        ];
        assert_eq!(
            shadow(older, newer),
            vec![
                (b"a".to_vec(), id(1)),
                (b"b".to_vec(), None),
                (b"c".to_vec(), id(3)),
                (b"d".to_vec(), id(5)),
            ]
        );
    }
}
