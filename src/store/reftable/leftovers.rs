//! What killed writers leave in a reftable stack's directory, and its removal by `git lease
//! gc` ([`clean`]).
//!
//! A writer killed (`kill -9`, a crash, a power cut) part-way leaves, beside the tables the
//! list names:
//!
//! - a table under its temporary name (`<table>.temp`, or git's `<table>.temp.XXXXXX`): one
//!   being written, by a transaction or by a compaction;
//! - a table no list names: one renamed to its name under the list's lock, its list never
//!   published;
//! - a table's lock (`<table>.lock`): a compaction's, taken while it merges that table. A
//!   stale one makes every later full compaction (`git pack-refs`, `git lease gc`) give up;
//! - the list's lock (`tables.list.lock`): a write's. That one is never removed here: a
//!   writer that was only paused (`SIGSTOP`, a frozen machine) could wake and rename it over
//!   the list, undoing every write made since. Like git, the error of every later write
//!   names it, for someone who knows that no writer is running to remove.
//!
//! None of them changes what the stack holds: readers read the list and what it names. They
//! are removed under the list's lock, so that no write is in flight, as git's
//! `reftable_stack_clean` removes unlisted tables: a table no list names goes once the stack
//! holds update indices past it (it cannot be one a writer is about to list: a writer holds
//! the lock from its first write to its list's). A table lock goes once it is older than
//! [`crate::gc::MIN_TEMPORARY_AGE`] (an hour): a compaction holds one for the seconds its
//! merge takes, and one that wakes after its locks were removed finds, when it takes the
//! list's lock again, whether the tables it merged still head the list, and publishes
//! nothing when they do not (this crate's compaction, [`super::compact_all`], and git's
//! since 2.47). A temporary table goes once it is older than the cutoff of every other
//! temporary file (`gc.pruneExpire`, [`crate::gc::remove_stale_temporaries`]).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::write::Lock;
use super::{open_file, Stack, Table, TABLES_LIST};
use crate::error::Result;

/// A file of a stack's directory that a killed writer may have left.
#[derive(Debug, PartialEq, Eq)]
enum Leftover<'a> {
    /// A table (`<table>`): left when no list names it.
    Table(&'a str),
    /// A table's lock (`<table>.lock`).
    TableLock,
    /// A table under its temporary name.
    Temporary,
}

impl<'a> Leftover<'a> {
    /// What the file `name` is, if it is one of them: names of git's form only
    /// (`0x<min>-0x<max>-<8 hex digits>.ref`), so that nothing else is ever touched.
    fn of(name: &'a str) -> Option<Leftover<'a>> {
        if let Some(table) = name.strip_suffix(".lock") {
            return is_table(table).then_some(Leftover::TableLock);
        }
        if let Some((table, rest)) = name.split_once(".temp") {
            let table_like = is_table(table) || is_table(&format!("{table}.ref"));
            let suffix = rest.is_empty()
                || rest.strip_prefix('.').is_some_and(|random| {
                    random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric())
                });
            return (table_like && suffix).then_some(Leftover::Temporary);
        }
        is_table(name).then_some(Leftover::Table(name))
    }
}

/// Whether `name` is a table's name as git forms it.
fn is_table(name: &str) -> bool {
    let hex = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let Some(stem) = name.strip_suffix(".ref") else {
        return false;
    };
    let mut parts = stem.split('-');
    let index = |part: Option<&str>| {
        part.and_then(|p| p.strip_prefix("0x"))
            .is_some_and(|h| hex(h, 12, 16))
    };
    index(parts.next())
        && index(parts.next())
        && parts.next().is_some_and(|p| hex(p, 8, 8))
        && parts.next().is_none()
}

/// Removes, under the list's lock of the stack in `dir` (waited on for `lock_wait`), what
/// killed writers left there (see the module documentation): tables no list names whose
/// update indices the stack has passed, table locks last modified before `locks`, and
/// temporary tables last modified before `temporaries` (`None`: never). Returns how many
/// files it removed, or `None`, having removed nothing, when the list's lock stayed held.
/// Only regular files are removed; one that cannot be examined or removed is left alone.
pub(crate) fn clean(
    dir: &Path,
    hash: gix::hash::Kind,
    lock_wait: Duration,
    temporaries: Option<SystemTime>,
    locks: SystemTime,
) -> Result<Option<u64>> {
    let Some(_lock) = Lock::take(&dir.join(format!("{TABLES_LIST}.lock")), lock_wait)? else {
        return Ok(None);
    };
    let stack = Stack::locked(dir, hash)?;
    let newest = stack.newest_update();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Some(0));
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(leftover) = file_name.to_str().and_then(Leftover::of) else {
            continue;
        };
        let path = entry.path();
        // Not followed: a link is left alone, and so is anything but a regular file.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let before = |cutoff: SystemTime| meta.modified().is_ok_and(|m| m < cutoff);
        let stale = meta.file_type().is_file()
            && match leftover {
                Leftover::Table(name) => {
                    !stack.names.iter().any(|listed| listed == name) && passed(&path, hash, newest)
                }
                Leftover::TableLock => before(locks),
                Leftover::Temporary => temporaries.is_some_and(before),
            };
        if stale && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    Ok(Some(removed))
}

/// Whether the table at `path` holds no update index past `newest`, the stack's newest; a
/// table that cannot be read is kept.
fn passed(path: &Path, hash: gix::hash::Kind, newest: u64) -> bool {
    open_file(path)
        .ok()
        .and_then(|file| Table::open(path.to_owned(), file, hash).ok())
        .is_some_and(|table| table.max_update <= newest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_gits_forms_are_leftovers() {
        let table = "0x000000000001-0x00000000000a-0badcafe.ref";
        assert_eq!(Leftover::of(table), Some(Leftover::Table(table)));
        assert_eq!(
            Leftover::of("0x0000000000000001-0x000000000000000a-0badcafe.ref"),
            Some(Leftover::Table(
                "0x0000000000000001-0x000000000000000a-0badcafe.ref"
            ))
        );
        assert_eq!(
            Leftover::of(&format!("{table}.lock")),
            Some(Leftover::TableLock)
        );
        for temp in [
            format!("{table}.temp"),
            format!("{table}.temp.Ab12Cd"),
            "0x000000000001-0x00000000000a-0badcafe.temp.XyZ123".to_owned(),
        ] {
            assert_eq!(Leftover::of(&temp), Some(Leftover::Temporary), "{temp}");
        }
        for other in [
            "tables.list",
            "tables.list.lock",
            "notes.ref",
            "0x1-0x2-0badcafe.ref",
            "0x000000000001-0x00000000000a-0badcafe.ref.bak",
            "0x000000000001-0x00000000000a-0badcafe-1.ref",
            "0x000000000001-0x00000000000a-0badcaf.ref",
            "0x00000000000g-0x00000000000a-0badcafe.ref",
            "0x000000000001-0x00000000000a-0badcafe.ref.temp.toolong",
            "0x000000000001-0x00000000000a-0badcafe.ref.temporary",
            "x0x000000000001-0x00000000000a-0badcafe.ref.lock",
        ] {
            assert_eq!(Leftover::of(other), None, "{other}");
        }
    }
}
