//! Many ledger tips decoded at once, as a listing reads them: on several threads, through git's
//! commit-graph where one is whole, and from an object database that refuses oversized objects.

use gix::ObjectId;

use super::{Entry, Store};
use crate::cache::EncodedEntries;
use crate::error::Result;
use crate::lease;

impl Store {
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

    /// [`Store::entries`] (or, without `through_graph`, [`Store::entries_of_commits`]), each
    /// entry kept as its list-cache record as soon as it is decoded: a cold listing of 100k
    /// ledgers holds about half the memory it would hold in decoded entries.
    pub fn encoded_entries(
        &self,
        wanted: &[(String, ObjectId)],
        through_graph: bool,
    ) -> Result<EncodedEntries> {
        let graph = through_graph
            .then(|| self.commit_graph(wanted.len()))
            .flatten();
        if through_graph && wanted.len() >= BOUNDED_READS_MIN {
            self.small_objects.get_or_init(|| self.open_small_objects());
        }
        let graph = graph.as_ref();
        let hash_len = self.object_hash().len_in_bytes();
        let parts = self.per_part(wanted, |store, part| {
            // Each entry is encoded as it is decoded: no part holds its entries decoded.
            let mut failure = None;
            let decoded = part.iter().map_while(|(issue, tip)| {
                store
                    .entry_in(issue, *tip, graph)
                    .map_err(|e| failure = Some(e))
                    .ok()
            });
            let encoded = EncodedEntries::encode(hash_len, decoded);
            match failure {
                Some(e) => Err(e),
                None => Ok(encoded),
            }
        })?;
        let mut encoded = EncodedEntries::default();
        parts.into_iter().for_each(|part| encoded.append(part));
        Ok(encoded)
    }

    /// [`Store::entries`], every commit read itself, never through git's commit-graph: a
    /// listing that verified those commits' signatures shows what they signed.
    pub fn entries_of_commits(&self, wanted: &[(String, ObjectId)]) -> Result<Vec<Entry>> {
        self.per_ref(wanted, |store, issue, tip| store.entry(issue, tip))
    }

    /// The repository's object database opened again, refusing to allocate more than
    /// [`SMALL_OBJECT_BYTES`] for one object, delta bases included (as gix counts them), with
    /// the same delta-base cache: `None` in a push's quarantine, whose objects it cannot see.
    pub(super) fn open_small_objects(&self) -> Option<gix::odb::Handle> {
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
    pub(super) fn commit_graph(&self, tips: usize) -> Option<gix::commitgraph::Graph> {
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
        self.per_ref_reading(wanted, read, Reads::Tips)
    }

    /// As [`Store::per_ref`], for reads of whole ledger histories (`verify`, `sync`, a
    /// timeline): when there are many, every part on a thread of its own, whose delta-base
    /// cache is [`HISTORY_DELTA_BASE_CACHE`] unless `core.deltaBaseCacheLimit` is set. A
    /// history's objects are deltas of one another, and a listing's small cache would inflate
    /// their bases again and again (a mirror's first sync of 99,000 archived ledgers: 13.8 s
    /// of CPU against 11.8 s, git's children included).
    pub fn per_ledger<T: Send>(
        &self,
        wanted: &[(String, ObjectId)],
        read: impl Fn(&Store, &str, ObjectId) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        self.per_ref_reading(wanted, read, Reads::Histories)
    }

    fn per_ref_reading<T: Send>(
        &self,
        wanted: &[(String, ObjectId)],
        read: impl Fn(&Store, &str, ObjectId) -> Result<T> + Sync,
        reads: Reads,
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
            let first = match reads {
                Reads::Tips => jobs.next(),
                Reads::Histories => None,
            };
            let others: Vec<_> = jobs
                .map(|(part, out)| {
                    // A clone shares this repository's object database: its packs and
                    // indexes are mapped once for every thread, not once each (which counted
                    // their pages twice in a cold listing's resident memory).
                    let repo = self.repo.clone();
                    let small = self.small_objects.get().cloned();
                    scope.spawn(move || -> Result<()> {
                        let mut store = Store::from_repo(repo)?;
                        if reads == Reads::Histories {
                            super::open::widen_delta_base_cache(&mut store.repo);
                        }
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
}

impl Store {
    /// Returns `read(store, part)` for each part of `wanted`, in order: one part per thread
    /// when there are many (each with its own [`Store`] of the same repository), else one
    /// part. The first error in `wanted`'s order wins.
    fn per_part<T: Send>(
        &self,
        wanted: &[(String, ObjectId)],
        read: impl Fn(&Store, &[(String, ObjectId)]) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_DECODE_THREADS);
        if wanted.len() < PARALLEL_DECODE_MIN || threads < 2 || self.quarantine.is_some() {
            return Ok(vec![read(self, wanted)?]);
        }
        let read = &read;
        std::thread::scope(|scope| {
            let mut parts = wanted.chunks(wanted.len().div_ceil(threads));
            let first = parts.next().unwrap_or_default();
            let others: Vec<_> = parts
                .map(|part| {
                    // A clone shares this repository's object database (see `per_ref`).
                    let repo = self.repo.clone();
                    let small = self.small_objects.get().cloned();
                    scope.spawn(move || -> Result<T> {
                        let store = Store::from_repo(repo)?;
                        if let Some(small) = small {
                            let _ = store.small_objects.set(small);
                        }
                        read(&store, part)
                    })
                })
                .collect();
            let mut done = vec![read(self, first)];
            for handle in others {
                done.push(
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                );
            }
            done.into_iter().collect()
        })
    }
}

/// The most a listing's first read of one ledger object may allocate
/// ([`Store::open_small_objects`]): four times the largest `lease.json` a ledger may hold,
/// room for gix's two buffers of the object and its deltas.
pub(super) const SMALL_OBJECT_BYTES: usize = 4 * lease::MAX_LEASE_JSON_BYTES as usize;

/// Below this many ledgers to decode, [`Store::entries`] reads through the repository's
/// object database alone: opening the bounded one ([`Store::open_small_objects`]) would cost
/// more than it saves (a warm listing decodes none, or a few).
pub(super) const BOUNDED_READS_MIN: usize = 1024;

/// What the reads of [`Store::per_ref`] and [`Store::per_ledger`] are of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// Ledger tips, a few objects each: the first part on this thread, whose cache stays
    /// small, so that a listing's memory stays bounded.
    Tips,
    /// Whole ledger histories, each part on a thread with a wide cache.
    Histories,
}

/// The delta-base cache of each thread of [`Store::per_ledger`] (git's own default is 96 MiB).
pub(super) const HISTORY_DELTA_BASE_CACHE: usize = 32 << 20;

/// Below this many ledgers to decode, [`Store::entries`] stays on one thread.
pub(super) const PARALLEL_DECODE_MIN: usize = 1024;

/// The most threads [`Store::entries`] decodes on.
pub(super) const MAX_DECODE_THREADS: usize = 8;

/// How many bytes of commit-graph a listing verifies for each tip it would read through it:
/// a tip read from the graph saves inflating and parsing its commit (about 2.7 µs at 100k
/// ledgers), the time the checksum of about 5 KB takes (3 ms for the 6 MB graph of 100k
/// ledgers, SHA-1 with the CPU's SHA instructions); this leaves a margin of 2.5 times.
pub(super) const GRAPH_BYTES_PER_TIP: u64 = 2048;

/// The most files a commit-graph chain may have (git's limit too).
pub(super) const MAX_COMMIT_GRAPH_FILES: usize = 256;

/// A commit's tree and parents as `graph` records them (`None`: it does not hold the commit,
/// or its record cannot be read).
pub(super) fn graphed(
    graph: &gix::commitgraph::Graph,
    commit: ObjectId,
) -> Option<(ObjectId, Vec<ObjectId>)> {
    let found = graph.commit_by_id(commit)?;
    let tree = found.root_tree_id().to_owned();
    let parents = found
        .iter_parents()
        .map(|p| p.ok().map(|p| graph.id_at(p).to_owned()))
        .collect::<Option<Vec<_>>>()?;
    Some((tree, parents))
}
