//! Ledger commits as objects: reading and checking them (a commit, its one-entry tree and
//! its `lease.json`, each looked up again in a fresh object database when packing moved it),
//! decoding many on threads, and encoding an event's blob, tree and commit to be written as
//! loose objects ([`super::loose`]).

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::{Entry, Staged, Store, READ_ATTEMPTS};
use crate::error::{Error, Result};
use crate::lease::{self, Lease, LEASE_FILE};

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
    fn entry_in(
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

    /// Decodes the ledger tips `wanted` (issue, tip commit) as [`Store::entry`] does, in order,
    /// on several threads when there are many: a listing without its cache decodes two or
    /// three objects per lease, and that work divides. The first error in `wanted`'s order
    /// wins.
    pub fn entries(&self, wanted: &[(String, ObjectId)]) -> Result<Vec<Entry>> {
        let graph = self.commit_graph(wanted.len());
        if wanted.len() >= BOUNDED_READS_MIN {
            self.small_objects.get_or_init(|| self.open_small_objects());
        }
        let graph = graph.as_ref();
        self.per_ref(wanted, |store, issue, tip| {
            store.entry_in(issue, tip, graph)
        })
    }

    /// [`Store::entries`], every commit read itself, never through git's commit-graph: a
    /// listing that verified those commits' signatures shows what they signed.
    pub fn entries_of_commits(&self, wanted: &[(String, ObjectId)]) -> Result<Vec<Entry>> {
        self.per_ref(wanted, |store, issue, tip| store.entry(issue, tip))
    }

    /// The repository's object database opened again, refusing to allocate more than
    /// [`SMALL_OBJECT_BYTES`] for one object, delta bases included (as gix counts them), with
    /// the same delta-base cache: `None` in a push's quarantine, whose objects it cannot see.
    fn open_small_objects(&self) -> Option<gix::odb::Handle> {
        if self.quarantine.is_some() {
            return None;
        }
        let mut handle = gix::odb::at_opts(
            self.repo.objects.store_ref().path(),
            self.object_hash(),
            // Objects as they are, as this store reads them (no replacements).
            std::iter::empty(),
            gix::odb::store::init::Options {
                alloc_limit_bytes: Some(SMALL_OBJECT_BYTES),
                ..Default::default()
            },
        )
        .ok()?;
        let limit = self
            .repo
            .config_snapshot()
            .integer("core.deltaBaseCacheLimit");
        super::give_delta_base_cache(&mut handle, limit);
        Some(handle)
    }

    /// The repository's commit-graph, unless `core.commitGraph` is false: the file
    /// `objects/info/commit-graph` (as `git gc` and `git lease gc` write it) or, where there is
    /// none, the chain of files in `objects/info/commit-graphs/` (as `git maintenance` and
    /// `fetch.writeCommitGraph` write it), as git reads them. Only whole files are read: each
    /// file's checksum is verified first, as the list cache's is, a chain's files must be
    /// named by it, and each must name the ones below it. `None` too in a push's quarantine,
    /// whose new commits it cannot hold, and when verifying the files would cost more than
    /// the graph saves on `tips` commits ([`GRAPH_BYTES_PER_TIP`]): a listing whose cache
    /// answers for all but a few ledgers reads their commits.
    fn commit_graph(&self, tips: usize) -> Option<gix::commitgraph::Graph> {
        if self.quarantine.is_some() || tips == 0 {
            return None;
        }
        let enabled = self.repo.config_snapshot().boolean("core.commitGraph");
        if enabled == Some(false) {
            return None;
        }
        let info = self.repo.objects.store_ref().path().join("info");
        let single = info.join("commit-graph");
        let paths: Vec<(std::path::PathBuf, Option<String>)> = if single.exists() {
            vec![(single, None)]
        } else {
            let dir = info.join("commit-graphs");
            let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).ok()?;
            chain
                .lines()
                .take(MAX_COMMIT_GRAPH_FILES + 1)
                .map(|hex| (dir.join(format!("graph-{hex}.graph")), Some(hex.to_owned())))
                .collect()
        };
        let size: u64 = paths
            .iter()
            .map(|(path, _)| std::fs::metadata(path).map_or(u64::MAX, |m| m.len()))
            .fold(0, u64::saturating_add);
        if size > (tips as u64).saturating_mul(GRAPH_BYTES_PER_TIP) {
            return None;
        }
        let files = paths
            .into_iter()
            .map(|(path, named)| {
                let file = gix::commitgraph::File::at(path).ok()?;
                let sum = file.verify_checksum().ok()?;
                let named_right =
                    named.is_none_or(|hex| ObjectId::from_hex(hex.as_bytes()).ok() == Some(sum));
                (file.object_hash() == self.object_hash() && named_right).then_some((file, sum))
            })
            .collect::<Option<Vec<_>>>()?;
        // Each file names the files below it, in order (none for the first): its parents'
        // positions count from theirs.
        let stacked = files.iter().enumerate().all(|(i, (file, _))| {
            usize::from(file.base_graph_count()) == i
                && file
                    .iter_base_graph_ids()
                    .zip(&files[..i])
                    .all(|(base, (_, sum))| base == sum.as_ref())
        });
        if !stacked {
            return None;
        }
        let files = files.into_iter().map(|(file, _)| file).collect();
        gix::commitgraph::Graph::new(files).ok()
    }

    /// Returns `read(store, issue, tip)` for each of `wanted`, in order, on several threads
    /// when there are many (each with its own [`Store`] of the same repository): what
    /// [`Store::entries`] does for tips, and `verify` and a timeline for whole ledgers. The
    /// first error in `wanted`'s order wins.
    pub fn per_ref<T: Send>(
        &self,
        wanted: &[(String, ObjectId)],
        read: impl Fn(&Store, &str, ObjectId) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_DECODE_THREADS);
        if wanted.len() < PARALLEL_DECODE_MIN || threads < 2 || self.quarantine.is_some() {
            return wanted
                .iter()
                .map(|(issue, tip)| read(self, issue, *tip))
                .collect();
        }
        // One vector for all, each thread filling its own stretch of it in place: no thread
        // builds a part of its own to be moved over afterwards (at 100k ledgers, tens of
        // megabytes more at the peak of a cold listing).
        let size = wanted.len().div_ceil(threads);
        let mut slots: Vec<Option<T>> =
            std::iter::repeat_with(|| None).take(wanted.len()).collect();
        let read = &read;
        let fill = |store: &Store, part: &[(String, ObjectId)], out: &mut [Option<T>]| {
            part.iter().zip(out).try_for_each(|((issue, tip), slot)| {
                *slot = Some(read(store, issue, *tip)?);
                Ok(())
            })
        };
        let fill = &fill;
        let failure = std::thread::scope(|scope| {
            let mut jobs = wanted.chunks(size).zip(slots.chunks_mut(size));
            let first = jobs.next();
            let others: Vec<_> = jobs
                .map(|(part, out)| {
                    // A clone shares this repository's object database: its packs and
                    // indexes are mapped once for every thread, not once each (which counted
                    // their pages twice in a cold listing's resident memory).
                    let repo = self.repo.clone();
                    let small = self.small_objects.get().cloned();
                    scope.spawn(move || -> Result<()> {
                        let store = Store::from_repo(repo)?;
                        if let Some(small) = small {
                            let _ = store.small_objects.set(small);
                        }
                        fill(&store, part, out)
                    })
                })
                .collect();
            // The first failure in order is the answer; later parts are still joined.
            let mut failure = first.and_then(|(part, out)| fill(self, part, out).err());
            for handle in others {
                let done = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                if let Err(e) = done {
                    failure = failure.or(Some(e));
                }
            }
            failure
        });
        if let Some(e) = failure {
            return Err(e);
        }
        // Every slot is filled when no part failed. `map_while` (unlike `flatten`) lets the
        // standard library collect in place, into the same allocation.
        Ok(slots.into_iter().map_while(|slot| slot).collect())
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

    /// Writes the blob, tree and commit recording `lease` on top of `parent`, as loose
    /// objects, made durable when the configuration asks for it.
    ///
    /// The commit is authored by the actor (the holder, or whoever acted) and committed by
    /// git-lease, both at the event's own time, so a ledger is reproducible from its inputs.
    pub(crate) fn write(&self, lease: &Lease, parent: Option<ObjectId>) -> Result<ObjectId> {
        let mut staged = Staged::default();
        let commit = self.stage(&mut staged, lease, parent)?;
        self.write_staged(&staged)?;
        Ok(commit)
    }

    /// Encodes and hashes the blob, tree and commit of an event into `staged`, without
    /// writing anything, and returns the commit id.
    pub(crate) fn stage(
        &self,
        staged: &mut Staged,
        lease: &Lease,
        parent: Option<ObjectId>,
    ) -> Result<ObjectId> {
        let blob = staged.add(self.object_hash(), gix::objs::Kind::Blob, lease.to_json())?;
        let tree = gix::objs::Tree {
            entries: vec![gix::objs::tree::Entry {
                mode: gix::objs::tree::EntryKind::Blob.into(),
                filename: LEASE_FILE.into(),
                oid: blob,
            }],
        };
        let tree = staged.add(self.object_hash(), gix::objs::Kind::Tree, encode(&tree)?)?;
        let time = gix::date::Time::new(lease.at.timestamp(), 0);
        let actor = lease.actor().unwrap_or("git-lease");
        let commit = gix::objs::Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: signature(actor, time),
            committer: gix::actor::Signature {
                name: "git-lease".into(),
                email: "git-lease@localhost".into(),
                time,
            },
            encoding: None,
            message: commit_message(lease).into(),
            extra_headers: Vec::new(),
        };
        let mut data = encode(&commit)?;
        if let Some(signer) = self.signer()? {
            data = signer.sign_commit(self.object_hash(), &data)?;
        }
        staged.add(self.object_hash(), gix::objs::Kind::Commit, data)
    }

    /// Returns how ledger commits are signed, `None` for unsigned ([`crate::sign`]): decided
    /// once per store, by the first commit it encodes (the key itself is loaded once per
    /// process), so that a command that writes nothing never needs the key, and one that fails
    /// to load it has written nothing.
    pub(super) fn signer(&self) -> Result<Option<&crate::sign::Signer>> {
        if let Some(signer) = self.signer.get() {
            return Ok(signer.as_deref());
        }
        let signer = crate::sign::Signer::from_config(
            |key| self.config_flag(key),
            |key| self.config_string(key),
        )?;
        Ok(self.signer.get_or_init(|| signer).as_deref())
    }

    /// Writes the commits of doctor's probe of a remote, as loose objects: a root commit of
    /// the empty tree and two children of it, each message naming `nonce`, dated `now`.
    /// Returns them as `[root, first child, second child]`. They belong to no ledger.
    pub(crate) fn write_probe(
        &self,
        nonce: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<[ObjectId; 3]> {
        let time = gix::date::Time::new(now.timestamp(), 0);
        let commit = |tree, parent: Option<ObjectId>, which: &str| gix::objs::Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: signature("git-lease", time),
            committer: signature("git-lease", time),
            encoding: None,
            message: format!("git-lease doctor: probe {nonce} ({which})\n").into(),
            extra_headers: Vec::new(),
        };
        let hash = self.object_hash();
        let mut staged = Staged::default();
        let empty = encode(&gix::objs::Tree::empty())?;
        let tree = staged.add(hash, gix::objs::Kind::Tree, empty)?;
        let root = encode(&commit(tree, None, "root"))?;
        let root = staged.add(hash, gix::objs::Kind::Commit, root)?;
        let moved = encode(&commit(tree, Some(root), "moved"))?;
        let moved = staged.add(hash, gix::objs::Kind::Commit, moved)?;
        let stale = encode(&commit(tree, Some(root), "stale"))?;
        let stale = staged.add(hash, gix::objs::Kind::Commit, stale)?;
        self.write_staged(&staged)?;
        Ok([root, moved, stale])
    }

    fn object_hash(&self) -> gix::hash::Kind {
        self.repo.object_hash()
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

/// The most a listing's first read of one ledger object may allocate
/// ([`Store::open_small_objects`]): four times the largest `lease.json` a ledger may hold,
/// room for gix's two buffers of the object and its deltas.
pub(super) const SMALL_OBJECT_BYTES: usize = 4 * lease::MAX_LEASE_JSON_BYTES as usize;

/// Below this many ledgers to decode, [`Store::entries`] reads through the repository's
/// object database alone: opening the bounded one ([`Store::open_small_objects`]) would cost
/// more than it saves (a warm listing decodes none, or a few).
const BOUNDED_READS_MIN: usize = 1024;

/// Below this many ledgers to decode, [`Store::entries`] stays on one thread.
const PARALLEL_DECODE_MIN: usize = 1024;

/// The most threads [`Store::entries`] decodes on.
const MAX_DECODE_THREADS: usize = 8;

fn signature(actor: &str, time: gix::date::Time) -> gix::actor::Signature {
    // A holder is free text; keep the signature well-formed for every git reader.
    let clean: String = actor
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r' | '\0'))
        .collect();
    let email = if clean.contains('@') {
        clean.clone()
    } else {
        String::new()
    };
    gix::actor::Signature {
        name: clean.into(),
        email: email.into(),
        time,
    }
}

/// Returns the commit message of a ledger commit: one line that `git log --oneline` makes
/// readable. The state itself lives only in `lease.json`.
fn commit_message(lease: &Lease) -> String {
    let who = lease
        .holder
        .as_deref()
        .or(lease.previous_holder.as_deref())
        .unwrap_or("nobody");
    let until = match lease.expires_at {
        Some(t) if lease.holder.is_some() => format!(" until {}", crate::time::format_instant(t)),
        None if lease.holder.is_some() => " (open-ended)".into(),
        _ => String::new(),
    };
    format!(
        "{} {}: {} token {}{}\n",
        lease.event, lease.issue, who, lease.token, until
    )
}

/// Serialises a tree or commit the way git hashes it.
pub(super) fn encode(object: &dyn gix::objs::WriteTo) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    object
        .write_to(&mut out)
        .map_err(|e| Error::git("cannot encode a ledger object", e))?;
    Ok(out)
}

/// How many bytes of commit-graph a listing verifies for each tip it would read through it:
/// a tip read from the graph saves inflating and parsing its commit (about 2.7 µs at 100k
/// ledgers), the time the checksum of about 5 KB takes (3 ms for the 6 MB graph of 100k
/// ledgers, SHA-1 with the CPU's SHA instructions); this leaves a margin of 2.5 times.
const GRAPH_BYTES_PER_TIP: u64 = 2048;

/// The most files a commit-graph chain may have (git's limit too).
const MAX_COMMIT_GRAPH_FILES: usize = 256;

/// A commit's tree and parents as `graph` records them (`None`: it does not hold the commit,
/// or its record cannot be read).
fn graphed(graph: &gix::commitgraph::Graph, commit: ObjectId) -> Option<(ObjectId, Vec<ObjectId>)> {
    let found = graph.commit_by_id(commit)?;
    let tree = found.root_tree_id().to_owned();
    let parents = found
        .iter_parents()
        .map(|p| p.ok().map(|p| graph.id_at(p).to_owned()))
        .collect::<Option<Vec<_>>>()?;
    Some((tree, parents))
}
