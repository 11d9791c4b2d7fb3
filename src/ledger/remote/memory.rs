//! The durable memory of what was verified from each remote, where no refspec reaches.
//!
//! The tracking refs (`refs/lease-remotes/<remote>/<issue>`) say what each remote was last
//! seen to hold, verified; but they are refs, and any fetch a user runs with a broad refspec
//! and `--prune` (`git fetch --prune origin '+refs/*:refs/*'`) deletes them. A clone that
//! forgot them would accept a rewound remote and issue a token again that it saw issued. So
//! every tip a tracking ref is moved to is also appended to a file of the repository's own,
//! `$GIT_COMMON_DIR/lease-memory/<remote>`, one `<issue> <tip>` line per move, the last line
//! of an issue winning; and a tracking ref found missing is recalled from it.
//!
//! A recalled tip whose commit is no longer in the object database (pruned with the refs)
//! still judges: the remote's ledger must contain it, and a fetch of a ledger that does
//! brings it back. The file is written best effort (a failure to append never fails a read),
//! only for tracking refs that did move, and compacted when most of its lines are outdated or
//! it grows past 4 MiB. Compaction renames a rewritten file over it, so an append another
//! command makes at that very moment can be lost: the memory then holds an older verified tip
//! of that issue, which still refuses every rewind behind it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use gix::ObjectId;

use crate::store::shared::SharedPerm;
use crate::store::Store;

/// The folder of the memory files, in the repository's common directory.
pub const MEMORY_DIR: &str = "lease-memory";

/// The folder of what was verified under each allowed signers list, in the repository's
/// common directory: `lease-verified/<remote>/<list version>`, the same lines as a memory
/// file, each tip's ledger verified whole under that list. A read requiring signatures trusts
/// a tip verified before only when this file records it, so a change of list (or of the rules'
/// edition) verifies every ledger again, once.
pub const VERIFIED_DIR: &str = "lease-verified";

/// The memory of one remote.
pub(crate) struct Memory {
    path: PathBuf,
    /// The repository's common directory and its `core.sharedRepository`: what this memory
    /// makes there is shared as git shares what it makes.
    common: PathBuf,
    shared: SharedPerm,
    /// The file as last read, so that one command reads it once.
    loaded: std::cell::RefCell<Option<BTreeMap<String, ObjectId>>>,
}

/// A file larger than this is compacted when it is next appended to.
const COMPACT_ABOVE: u64 = 4 << 20;

impl Memory {
    /// Returns the memory of the remote whose tracking refs live under `slug`.
    pub(crate) fn of(store: &Store, slug: &str) -> Memory {
        Memory {
            path: store.common_dir().join(MEMORY_DIR).join(slug),
            loaded: Default::default(),
            common: store.common_dir().to_path_buf(),
            shared: store.shared(),
        }
    }

    /// Returns the record of the tips of the remote under `slug` whose ledgers were verified
    /// whole under the allowed signers list of version `version` ([`VERIFIED_DIR`]).
    pub(crate) fn verified_under(store: &Store, slug: &str, version: &str) -> Memory {
        Memory {
            path: store
                .common_dir()
                .join(VERIFIED_DIR)
                .join(slug)
                .join(version),
            loaded: Default::default(),
            common: store.common_dir().to_path_buf(),
            shared: store.shared(),
        }
    }

    /// Removes the records of every other list version beside this one, best effort: what
    /// was verified under them is verified again under this one.
    pub(crate) fn forget_siblings(&self) {
        let Some(dir) = self.path.parent() else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if Some(name.as_os_str()) != self.path.file_name()
                && !name.to_string_lossy().starts_with('.')
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Returns true when anything was ever remembered of this remote here.
    pub(crate) fn exists(&self) -> bool {
        self.path.exists()
    }

    /// Appends `moves` (`(issue, tip)`), best effort.
    pub(crate) fn remember<'a>(&self, moves: impl IntoIterator<Item = (&'a str, ObjectId)>) {
        let mut text = String::new();
        let mut loaded = self.loaded.borrow_mut();
        for (issue, tip) in moves {
            text.push_str(&format!("{} {tip}\n", escape(issue)));
            // The file as read, with these lines last: no second read of it.
            if let Some(tips) = loaded.as_mut() {
                tips.insert(issue.to_owned(), tip);
            }
        }
        drop(loaded);
        if text.is_empty() {
            return;
        }
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(text.as_bytes()));
        let _ = self.shared.adjust_up_to(&self.path, &self.common);
        // A clone that only ever renews never reads the memory back: compact it here too.
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() > COMPACT_ABOVE) {
            self.recall();
        }
    }

    /// Returns `issue`'s last remembered tip (the file read once per command).
    pub(crate) fn recall_one(&self, issue: &str) -> Option<ObjectId> {
        if self.loaded.borrow().is_none() {
            let tips = self.recall();
            *self.loaded.borrow_mut() = Some(tips);
        }
        self.loaded
            .borrow()
            .as_ref()
            .and_then(|tips| tips.get(issue).copied())
    }

    /// Returns every issue's last remembered tip; rewrites the file without its outdated
    /// lines when they are most of it.
    pub(crate) fn recall(&self) -> BTreeMap<String, ObjectId> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return BTreeMap::new();
        };
        let mut tips = BTreeMap::new();
        let mut lines = 0usize;
        for line in text.lines() {
            lines += 1;
            let Some((issue, tip)) = line.rsplit_once(' ') else {
                continue;
            };
            if let (Some(issue), Ok(tip)) = (unescape(issue), ObjectId::from_hex(tip.as_bytes())) {
                tips.insert(issue, tip);
            }
        }
        if lines > 2 * tips.len() + 64 {
            self.compact(&tips);
        }
        tips
    }

    /// Rewrites the file with one line per issue (a temporary file renamed over it).
    fn compact(&self, tips: &BTreeMap<String, ObjectId>) {
        let Some(dir) = self.path.parent() else {
            return;
        };
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
            return;
        };
        let mut text = String::with_capacity(tips.len() * 64);
        for (issue, tip) in tips {
            text.push_str(&format!("{} {tip}\n", escape(issue)));
        }
        if tmp.write_all(text.as_bytes()).is_ok() && tmp.persist(&self.path).is_ok() {
            let _ = self.shared.adjust_up_to(&self.path, &self.common);
        }
    }
}

/// Issue ids are valid ref names, so they hold no space or newline; percent-escaping keeps
/// the file one record per line whatever a caller passes.
fn escape(issue: &str) -> String {
    let mut out = String::with_capacity(issue.len());
    for c in issue.chars() {
        match c {
            '%' | ' ' | '\n' | '\r' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> Option<String> {
    crate::text::percent_decode(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_round_trip_through_the_escaping() {
        for issue in ["42", "gh/7", "a%b", "ünï"] {
            assert_eq!(unescape(&escape(issue)).as_deref(), Some(issue));
        }
    }
}
