//! Ledger commits as objects: reading and checking them (a commit, its one-entry tree and
//! its `lease.json`, each looked up again in a fresh object database when packing moved it).
//! Many are decoded at once in [`super::many_entries`]; new ones are encoded in
//! [`super::encode`].

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::many_entries::graphed;
use super::{Entry, Store, READ_ATTEMPTS};
use crate::error::{Error, Result};
use crate::lease::{self, LEASE_FILE};

impl Store {
    /// Reads and checks one ledger commit of `issue`.
    ///
    /// Returns [`Error::Corrupt`] naming the commit when it is not a commit, has more than one
    /// parent, has a tree other than exactly `lease.json`, or its `lease.json` is invalid, of
    /// an unknown version, or for another issue.
    pub fn entry(&self, issue: &str, commit: ObjectId) -> Result<Entry> {
        self.entry_in(issue, commit, None)
    }

    /// [`Store::entry`], the commit's tree and parents taken from `graph` (git's commit-graph
    /// of this repository) when it records the commit: one object fewer to look up and
    /// inflate per ledger. git derives the graph from the very objects and git itself reads
    /// trees and parents from it; a record that leads nowhere valid (a damaged file) is not
    /// believed: the commit itself is read instead, and its answer, good or bad, stands.
    pub(super) fn entry_in(
        &self,
        issue: &str,
        commit: ObjectId,
        graph: Option<&gix::commitgraph::Graph>,
    ) -> Result<Entry> {
        if let Some((tree, parents)) = graph.and_then(|g| graphed(g, commit)) {
            if let Ok(entry) = self.checked_entry(issue, commit, parents, self.lease_blob(tree)) {
                return Ok(entry);
            }
        }
        let raw = self.raw_entry(commit).map_err(|reason| Error::Corrupt {
            issue: issue.to_owned(),
            commit: commit.to_string(),
            reason,
        })?;
        self.checked_entry(issue, commit, raw.parents, raw.lease_json)
    }

    /// The entry of `issue` at `commit`, from its parents and its `lease.json` as read, if
    /// they keep the rules [`Store::entry`] names.
    fn checked_entry(
        &self,
        issue: &str,
        commit: ObjectId,
        parents: Vec<ObjectId>,
        lease_json: std::result::Result<Vec<u8>, String>,
    ) -> Result<Entry> {
        let corrupt = |reason: String| Error::Corrupt {
            issue: issue.to_owned(),
            commit: commit.to_string(),
            reason,
        };
        if parents.len() > 1 {
            return Err(corrupt(format!(
                "a ledger commit has at most one parent, this one has {}",
                parents.len()
            )));
        }
        let bytes = lease_json.map_err(corrupt)?;
        let lease = lease::decode(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if lease.issue != issue {
            return Err(corrupt(format!(
                "lease.json is for issue {:?}, not {issue:?}",
                lease.issue
            )));
        }
        Ok(Entry::recorded(commit, parents.first().copied(), lease))
    }

    /// Returns the blob id and content of the file at `path` (`/`-separated) in the tree of
    /// `HEAD`'s commit: `None` when `HEAD` has no commit yet or the tree has no such file. Read
    /// from the object database, never from a working tree.
    pub fn head_file(&self, path: &str) -> Result<Option<(ObjectId, Vec<u8>)>> {
        let head = match self.head_name()? {
            Some(name) => self.tip_of(&name)?,
            None => self.tip_of("HEAD")?,
        };
        match head {
            Some(head) => self.file_at(head, "HEAD", path),
            None => Ok(None),
        }
    }

    /// Returns the blob id and content of the file at `path` (`/`-separated) in the tree of
    /// the commit `commit` (named `shown` in messages): `None` when it is no commit or the
    /// tree has no such file.
    pub fn file_at(
        &self,
        commit: ObjectId,
        shown: &str,
        path: &str,
    ) -> Result<Option<(ObjectId, Vec<u8>)>> {
        let head = commit;
        let failed = |reason: String| Error::InvalidInput(format!("{shown}'s {path}: {reason}"));
        let (kind, data) = self.find(head).map_err(failed)?;
        if kind != gix::object::Kind::Commit {
            return Ok(None);
        }
        let commit = gix::objs::CommitRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| failed(e.to_string()))?;
        let mut id = commit.tree();
        for (i, name) in path.split('/').enumerate() {
            let (kind, data) = self.find(id).map_err(failed)?;
            if kind != gix::object::Kind::Tree {
                return Ok(None);
            }
            let tree = gix::objs::TreeRef::from_bytes(&data, self.repo.object_hash())
                .map_err(|e| failed(e.to_string()))?;
            let Some(entry) = tree.entries.iter().find(|e| e.filename == name) else {
                return Ok(None);
            };
            let last = i + 1 == path.split('/').count();
            if last != entry.mode.is_blob() {
                return Ok(None);
            }
            id = entry.oid.to_owned();
        }
        let (kind, data) = self.find(id).map_err(failed)?;
        Ok((kind == gix::object::Kind::Blob).then_some((id, data)))
    }

    /// Returns the id git gives `data` as a blob of this repository.
    pub fn blob_id(&self, data: &[u8]) -> Result<ObjectId> {
        gix::objs::compute_hash(self.repo.object_hash(), gix::object::Kind::Blob, data)
            .map_err(|e| Error::git("cannot hash a blob", e))
    }

    /// Reads a commit's parents and its `lease.json` bytes without judging them, for
    /// verification that wants to report every problem by its own rule.
    pub(crate) fn raw_entry(&self, commit: ObjectId) -> std::result::Result<RawEntry, String> {
        let (kind, data) = self.find_small_first(commit)?;
        if kind != gix::object::Kind::Commit {
            return Err(format!("it is a {kind}, not a commit"));
        }
        let decoded = gix::objs::CommitRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| format!("cannot decode the commit: {e}"))?;
        let tree_id = decoded.tree();
        let parents: Vec<ObjectId> = decoded.parents().collect();
        drop(decoded);
        let lease_json = self.lease_blob(tree_id);
        Ok(RawEntry {
            parents,
            lease_json,
            commit: data,
        })
    }

    /// Reads one object's kind and bytes; see [`Store::lookup`].
    pub(super) fn find(
        &self,
        id: ObjectId,
    ) -> std::result::Result<(gix::object::Kind, Vec<u8>), String> {
        let mut buf = Vec::new();
        let kind = self.lookup(id, |odb| {
            Ok(odb.try_find(&id, &mut buf)?.map(|data| data.kind))
        })?;
        Ok((kind, buf))
    }

    /// Reads one object's kind and bytes through the bounded object database a listing
    /// opened, where it answers, else as [`Store::find`] does.
    fn find_small_first(
        &self,
        id: ObjectId,
    ) -> std::result::Result<(gix::object::Kind, Vec<u8>), String> {
        match self.find_small(id) {
            Some(found) => Ok(found),
            None => self.find(id),
        }
    }

    /// Reads one object's kind and bytes through the bounded object database a listing
    /// opened ([`Store::open_small_objects`]): `None` where there is none, or it has no
    /// answer (the object missing, unreadable or too large for it). A listing reads each
    /// ledger's objects there alone, so the pages of the packs it reads are mapped once.
    fn find_small(&self, id: ObjectId) -> Option<(gix::object::Kind, Vec<u8>)> {
        let small = self.small_objects.get()?.as_ref()?;
        let mut data = Vec::new();
        let kind = gix::objs::Find::try_find(small, &id, &mut data).ok()??.kind;
        Some((kind, data))
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
                    // Objects as they are, as this store reads them (no replacements).
                    std::iter::empty(),
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
        let (kind, data) = self
            .find_small_first(tree_id)
            .map_err(|e| format!("its tree: {e}"))?;
        if kind != gix::object::Kind::Tree {
            return Err(format!("its tree {tree_id} is a {kind}"));
        }
        let decoded = gix::objs::TreeRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| format!("cannot decode its tree: {e}"))?;
        // The names, for the error only: a ledger's tree is read for every listed lease.
        let names = || {
            decoded
                .entries
                .iter()
                .map(|e| e.filename.to_str_lossy())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let entry = match decoded.entries.as_slice() {
            [only] if only.filename == LEASE_FILE => only,
            [] => return Err(format!("its tree has no {LEASE_FILE}")),
            entries if !entries.iter().any(|e| e.filename == LEASE_FILE) => {
                return Err(format!(
                    "its tree has no {LEASE_FILE} (it has: {})",
                    names()
                ))
            }
            _ => {
                return Err(format!(
                    "its tree must hold only {LEASE_FILE} as a regular file (it has: {})",
                    names()
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
        // Where a listing opened the bounded object database, the blob is read through it
        // first: what it reads whole needed at most `SMALL_OBJECT_BYTES`, and its size is
        // then checked from what was read. Whatever it does not answer (too large, not a
        // blob, not found) is read as everywhere else, and that answer stands.
        let small = self.find_small(id).filter(|(kind, data)| {
            *kind == gix::object::Kind::Blob && data.len() as u64 <= lease::MAX_LEASE_JSON_BYTES
        });
        if let Some((_, data)) = small {
            return Ok(data);
        }
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
}

/// A commit's parents and its `lease.json` bytes (or why it has none), undecoded.
pub(crate) struct RawEntry {
    pub parents: Vec<ObjectId>,
    pub lease_json: std::result::Result<Vec<u8>, String>,
    /// The commit object itself, for its signature ([`crate::rules::signers::split_commit`]).
    pub commit: Vec<u8>,
}

/// The reads [`Store::lookup`] makes, by any handle of an object database.
trait Objects: gix::objs::Find + gix::objs::FindHeader {}

impl<T: gix::objs::Find + gix::objs::FindHeader> Objects for T {}

/// The one mode `lease.json` may have in a ledger tree: a regular, non-executable file.
const LEASE_FILE_MODE: u16 = 0o100644;
