//! Listing every ledger at once: each ref's newest entry, from the list cache where it holds a
//! record of the ref's exact tip, decoded from objects otherwise (on several threads when
//! there are many), and the cache rewritten when the misses were many.

use std::borrow::Cow;

use gix::ObjectId;

use crate::cache::{EncodedEntries, ListCache, RecordMatcher, Snapshot};
use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::step::Judgement;
use crate::store::{Entry, Store};
use crate::verify;

/// A listing rewrites the cache only past `max(MIN_REWRITE_MISSES, refs / REWRITE_DIVISOR)`
/// misses: a miss costs ~10–50 µs of object decoding, a rewrite ~0.3 µs per lease, so the
/// rewrite pays for itself once misses reach a few percent of the refs.
const MIN_REWRITE_MISSES: usize = 64;
const REWRITE_DIVISOR: usize = 32;

/// Returns how many misses a listing of `refs` leases tolerates before it rewrites the cache.
pub fn rewrite_threshold(refs: usize) -> usize {
    MIN_REWRITE_MISSES.max(refs / REWRITE_DIVISOR)
}

/// A ledger a listing set aside: its tip cannot be read as a lease (a corrupt record, one
/// over the size every reader accepts) or its ref names an invalid id, so it is named, and
/// every other ledger still listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// The issue.
    pub issue: String,
    /// The commit that cannot be read.
    pub commit: String,
    /// Why.
    pub reason: String,
}

impl Unreadable {
    /// Returns the error a command that needs this ledger fails with ([`Error::Corrupt`]).
    pub fn into_error(self) -> Error {
        Error::Corrupt {
            issue: self.issue,
            commit: self.commit,
            reason: self.reason,
        }
    }

    /// Returns the ledger a corrupt ledger's error names, or gives the error back.
    pub(crate) fn from_error(error: Error) -> std::result::Result<Unreadable, Error> {
        match error {
            Error::Corrupt {
                issue,
                commit,
                reason,
            } => Ok(Unreadable {
                issue,
                commit,
                reason,
            }),
            other => Err(other),
        }
    }
}

/// What one listing did with the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListStats {
    /// Refs listed.
    pub refs: usize,
    /// Refs answered from the cache.
    pub hits: usize,
    /// Refs decoded from objects.
    pub misses: usize,
    /// Whether the cache file was rewritten.
    pub rewritten: bool,
    /// Ledgers verified (`lease.requireSignatures`) because no verified record vouched for
    /// their tip.
    pub verified: usize,
    /// Ledgers left out of the listing because their tip cannot be read as a lease.
    pub unreadable: Vec<Unreadable>,
}

/// Returns the id of every ledger (`refs/leases/*`) in natural order
/// ([`crate::issue::natural_cmp`]): ref names only, no object read, nothing written (shell
/// completion asks it at every keystroke).
pub fn ids(store: &Store) -> Result<Vec<String>> {
    let mut ids: Vec<String> = store
        .refs_listed(crate::issue::REF_PREFIX)?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    ids.sort_by(|a, b| crate::issue::natural_cmp(a, b));
    Ok(ids)
}

/// What a caller does with a listing while its cache is written beside it: `prepare` each
/// entry first (what it observes beside the record), then `show` them all. The cache keeps
/// what the ledgers record, never what `prepare` added.
pub struct ListingConsumer<'a> {
    pub prepare: &'a dyn Fn(&mut Entry),
    pub show: &'a mut dyn FnMut(&Entries),
}

/// A listing's entries, in order: decoded, or kept as their list-cache records (a listing
/// without a cache file, given to a [`ListingConsumer`]), each decoded when asked for.
pub enum Entries {
    /// Decoded.
    Decoded(Vec<Entry>),
    /// Kept as records.
    Encoded(EncodedEntries),
}

impl Entries {
    /// Returns how many entries there are.
    pub fn len(&self) -> usize {
        match self {
            Entries::Decoded(entries) => entries.len(),
            Entries::Encoded(entries) => entries.len(),
        }
    }

    /// Returns true when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the issue of entry `i` (without decoding it).
    pub fn issue(&self, i: usize) -> &str {
        match self {
            Entries::Decoded(entries) => &entries[i].lease.issue,
            Entries::Encoded(entries) => entries.issue(i),
        }
    }

    /// Returns entry `i`.
    pub fn get(&self, i: usize) -> Cow<'_, Entry> {
        match self {
            Entries::Decoded(entries) => Cow::Borrowed(&entries[i]),
            Entries::Encoded(entries) => entries.get(i),
        }
    }

    /// Returns the entries, decoded.
    pub fn into_vec(self) -> Vec<Entry> {
        match self {
            Entries::Decoded(entries) => entries,
            Entries::Encoded(entries) => (0..entries.len())
                .map(|i| entries.get(i).into_owned())
                .collect(),
        }
    }
}

/// Returns the newest entry of every ref under `namespace`, sorted by name; see [`list`]. The
/// refs are listed the cheap way when the store can ([`Store::refs_listed`]). With `consumer`, its
/// work is done to the entries on this thread while another writes the list cache, when this
/// listing rewrites it (a cold listing of 100k ledgers spends tens of milliseconds on that);
/// without a cache file, the entries it is given are kept as records ([`Entries::Encoded`]).
pub fn list_namespace(
    store: &Store,
    namespace: &str,
    judgement: Judgement<'_>,
    consumer: Option<ListingConsumer<'_>>,
) -> Result<(Entries, ListStats)> {
    let refs = store.refs_listed(namespace)?;
    let cache = ListCache::new(store, namespace);
    let snapshot = cache.load();
    match (snapshot, consumer) {
        (None, Some(consumer)) => show_cold(store, &cache, refs, judgement, consumer),
        (snapshot, consumer) => list_from(store, &cache, snapshot, refs, judgement, consumer),
    }
}

/// [`list_namespace`] without a cache file, for a consumer: every ref is decoded, each entry
/// kept as its record from the moment it is decoded, and the cache written from those records.
fn show_cold(
    store: &Store,
    cache: &ListCache,
    refs: Vec<(String, ObjectId)>,
    judgement: Judgement<'_>,
    ListingConsumer { prepare, show }: ListingConsumer<'_>,
) -> Result<(Entries, ListStats)> {
    let signers = judgement.signers();
    let mut stats = ListStats {
        refs: refs.len(),
        misses: refs.len(),
        ..ListStats::default()
    };
    if signers.is_some() {
        stats.verified = verify(store, None, &refs, judgement)?;
    }
    // A listing that verified signatures shows what the commits signed (no commit-graph).
    let read = |refs: &[(String, ObjectId)]| store.encoded_entries(refs, signers.is_none());
    let mut encoded = set_aside_unreadable(&refs, read, &mut stats.unreadable)?;
    drop(refs);
    encoded.observe(prepare);
    let entries = Entries::Encoded(encoded);
    let rewrite = stats.misses.max(stats.verified) > rewrite_threshold(stats.refs);
    let verified = signers.map(|l| l.version());
    let save = rewrite.then_some((cache, verified));
    stats.rewritten = show_beside(&entries, save, show);
    Ok((entries, stats))
}

/// Gives `entries` to `show` on this thread while another writes them to `to`'s cache (as
/// verified under the allowed signers list of the version it names, if any); returns whether
/// the cache was written (false without one to write).
fn show_beside(
    entries: &Entries,
    to: Option<(&ListCache, Option<&str>)>,
    show: &mut dyn FnMut(&Entries),
) -> bool {
    let save = |(cache, verified): (&ListCache, Option<&str>)| {
        match entries {
            Entries::Decoded(decoded) => cache.save_verified(decoded, verified),
            Entries::Encoded(encoded) => cache.save_encoded(encoded, verified),
        }
        .is_ok()
    };
    std::thread::scope(|scope| {
        let saving = to.map(|to| scope.spawn(move || save(to)));
        show(entries);
        saving.is_some_and(|saving| {
            saving
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
}

/// Returns the newest entry of every ref in `refs` (sorted by name, as [`Store::refs_under`]
/// returns them; names relative to `namespace`), answering from the cache where it can and
/// decoding the rest from objects; rewrites the cache when the misses were many.
///
/// A ledger that cannot be decoded (or whose ref names an invalid id, decoded from objects) is
/// left out and named in [`ListStats::unreadable`]. A cache that cannot be written is not an
/// error: the listing is still right, only the next one is slower.
///
/// When `judgement` requires signatures ([`Judgement::signers`]), every listed ledger must
/// also be legitimate and signed as needed ([`verify::require_legitimate`], the first refused
/// one is the error): a ledger is verified only where no record of a file verified under the
/// same allowed signers list vouches for its tip, from the tip such a record had for it when
/// it has one, from its root otherwise; the cache is rewritten as verified under that list.
pub fn list(
    store: &Store,
    namespace: &str,
    refs: Vec<(String, ObjectId)>,
    judgement: Judgement<'_>,
) -> Result<(Vec<Entry>, ListStats)> {
    let cache = ListCache::new(store, namespace);
    let snapshot = cache.load();
    list_from(store, &cache, snapshot, refs, judgement, None)
        .map(|(entries, stats)| (entries.into_vec(), stats))
}

/// Gives `sink` the newest entry of every ref in `refs`, in their order, by the rule of
/// [`list`] (the cache's record where it holds the exact tip, objects otherwise), without
/// holding every entry at once: with a cache that answers for most refs, each entry is decoded
/// from its record as it is given. Where [`list`] would rewrite the cache (no cache, or the
/// refs without a record past [`rewrite_threshold`]), it is [`list`], entries given in turn.
/// It verifies nothing: its caller (`watch`) has verified the refs it gives.
pub fn each(
    store: &Store,
    namespace: &str,
    refs: Vec<(String, ObjectId)>,
    mut sink: impl FnMut(Entry),
) -> Result<ListStats> {
    let cache = ListCache::new(store, namespace);
    let snapshot = cache.load();
    let unrecorded = snapshot
        .as_ref()
        .map(|snapshot| unrecorded(snapshot, &refs));
    let Some(unrecorded) = unrecorded.filter(|u| u.len() <= rewrite_threshold(refs.len())) else {
        let (entries, stats) = list_from(store, &cache, snapshot, refs, Judgement::Recorded, None)?;
        entries.into_vec().into_iter().for_each(sink);
        return every_one_read(stats);
    };
    let mut stats = ListStats {
        refs: refs.len(),
        ..ListStats::default()
    };
    let decoded = store.entries(&unrecorded)?;
    drop(unrecorded);
    merge(
        store,
        snapshot.as_ref(),
        refs,
        decoded,
        &mut stats,
        &mut sink,
    )?;
    every_one_read(stats)
}

/// `stats`, or the error of the first ledger it set aside: [`each`] gives every ref it is
/// given, or fails.
fn every_one_read(stats: ListStats) -> Result<ListStats> {
    match stats.unreadable.first() {
        Some(first) => Err(first.clone().into_error()),
        None => Ok(stats),
    }
}

/// The refs of `refs` that `snapshot` holds no record of their exact tip for.
fn unrecorded(snapshot: &Snapshot, refs: &[(String, ObjectId)]) -> Vec<(String, ObjectId)> {
    let mut matcher = RecordMatcher::new(Some(snapshot));
    refs.iter()
        .filter(|(issue, tip)| matcher.find(issue, tip).is_none())
        .cloned()
        .collect()
}

/// [`list`], with the cache file already read.
fn list_from(
    store: &Store,
    cache: &ListCache,
    snapshot: Option<Snapshot>,
    refs: Vec<(String, ObjectId)>,
    judgement: Judgement<'_>,
    consumer: Option<ListingConsumer<'_>>,
) -> Result<(Entries, ListStats)> {
    let signers = judgement.signers();
    let mut unreadable = Vec::new();
    let mut decode = |refs: &[(String, ObjectId)]| {
        let read = |refs: &[(String, ObjectId)]| match signers {
            Some(_) => store.entries_of_commits(refs),
            None => store.entries(refs),
        };
        set_aside_unreadable(refs, read, &mut unreadable)
    };
    // With signatures required, a record vouches for its tip only in a file verified under
    // this very list: then the refs to verify are exactly those without a record.
    let trusted = signers
        .is_some_and(|list| snapshot.as_ref().and_then(Snapshot::verified) == Some(list.version()));
    let mut stats = ListStats {
        refs: refs.len(),
        ..ListStats::default()
    };
    // The refs without a record are decoded first, all together (on several threads when
    // there are many); the listing then takes them in order, so no entry is moved twice.
    // Without a cache file (a cold listing) that is every ref, and the decoded entries are the
    // listing: no second vector of them is built.
    let mut out = match snapshot.as_ref() {
        None => {
            if signers.is_some() {
                stats.verified = verify(store, None, &refs, judgement)?;
            }
            stats.misses = refs.len();
            decode(&refs)?
        }
        Some(snapshot) => {
            let unrecorded = unrecorded(snapshot, &refs);
            if trusted {
                stats.verified = verify(store, Some(snapshot), &unrecorded, judgement)?;
            } else if signers.is_some() {
                stats.verified = verify(store, None, &refs, judgement)?;
            }
            let decoded = decode(&unrecorded)?;
            drop(unrecorded);
            let mut out = Vec::with_capacity(refs.len());
            merge(store, Some(snapshot), refs, decoded, &mut stats, &mut |e| {
                out.push(e)
            })?;
            out
        }
    };
    stats.unreadable.append(&mut unreadable);
    drop(snapshot);
    let rewrite = stats.misses.max(stats.verified) > rewrite_threshold(stats.refs);
    let verified = signers.map(|l| l.version().to_owned());
    let save = |entries: &[Entry]| cache.save_verified(entries, verified.as_deref()).is_ok();
    match consumer {
        None => {
            if rewrite {
                stats.rewritten = save(&out);
            }
            Ok((Entries::Decoded(out), stats))
        }
        Some(ListingConsumer { prepare, show }) => {
            out.iter_mut().for_each(prepare);
            let entries = Entries::Decoded(out);
            let to = rewrite.then_some((cache, verified.as_deref()));
            stats.rewritten = show_beside(&entries, to, show);
            Ok((entries, stats))
        }
    }
}

/// Verifies the ledgers of `refs` (none of which a verified record vouches for), each from
/// the tip `verified`, a file verified under the same allowed signers list, recorded for it
/// when it has one (the ledger grew since), else from its root, on several threads when there
/// are many; returns how many were verified. The first refused ledger, in `refs`' order, is
/// the error.
fn verify(
    store: &Store,
    verified: Option<&Snapshot>,
    refs: &[(String, ObjectId)],
    judgement: Judgement<'_>,
) -> Result<usize> {
    if refs.is_empty() {
        return Ok(0);
    }
    let bases: std::collections::HashMap<String, ObjectId> = verified
        .map(Snapshot::tips)
        .unwrap_or_default()
        .into_iter()
        .collect();
    store.per_ref(refs, |store, issue, tip| {
        let base = bases
            .get(issue)
            .copied()
            .filter(|b| verify::descends_from(store, tip, *b));
        verify::require_legitimate(store, issue, tip, base, judgement)
    })?;
    Ok(refs.len())
}

/// The listing of `refs`, given to `sink` in order: each from its record in `snapshot` when it
/// has one that decodes, else the next of `decoded` (the refs without a record, in order),
/// else decoded now.
fn merge(
    store: &Store,
    snapshot: Option<&Snapshot>,
    refs: Vec<(String, ObjectId)>,
    decoded: Vec<Entry>,
    stats: &mut ListStats,
    sink: &mut dyn FnMut(Entry),
) -> Result<()> {
    let mut decoded = decoded.into_iter().peekable();
    let mut matcher = RecordMatcher::new(snapshot);
    for (issue, tip) in refs {
        let issue = match matcher.find(&issue, &tip) {
            Some(raw) => match raw.decode(issue, tip) {
                Ok(entry) => {
                    stats.hits += 1;
                    sink(entry);
                    continue;
                }
                // A record that does not decode is a miss like any other.
                Err(issue) => issue,
            },
            None => match decoded.next_if(|e| e.commit == tip && e.lease.issue == issue) {
                Some(entry) => {
                    stats.misses += 1;
                    sink(entry);
                    continue;
                }
                None => issue,
            },
        };
        stats.misses += 1;
        match invalid_id(&issue, tip).map_or_else(|| store.entry(&issue, tip), Err) {
            Ok(entry) => sink(entry),
            Err(e) => stats.unreadable.push(Unreadable::from_error(e)?),
        }
    }
    Ok(())
}

/// Returns the error of a ledger whose ref names an invalid id ([`IssueId::new`]): none is
/// written by git-lease, and readers set it aside as they set aside a corrupt one.
pub(crate) fn invalid_id(issue: &str, tip: ObjectId) -> Option<Error> {
    IssueId::new(issue).err().map(|e| Error::Corrupt {
        issue: issue.to_owned(),
        commit: tip.to_string(),
        reason: e.to_string(),
    })
}

/// The entries of `refs` by `read`, in order, but for the ledgers whose tip cannot be read as
/// a lease, or whose id is invalid, which go to `unreadable`: one bad ledger costs the listing
/// only itself. `read` takes them all at once; only when one is bad are they read one by one.
fn set_aside_unreadable<T: Gathered>(
    refs: &[(String, ObjectId)],
    read: impl Fn(&[(String, ObjectId)]) -> Result<T>,
    unreadable: &mut Vec<Unreadable>,
) -> Result<T> {
    if refs.iter().all(|(issue, _)| IssueId::new(issue).is_ok()) {
        match read(refs) {
            Err(Error::Corrupt { .. }) => {}
            answer => return answer,
        }
    }
    let mut entries = T::default();
    for one in refs.chunks(1) {
        match invalid_id(&one[0].0, one[0].1).map_or_else(|| read(one), Err) {
            Ok(entry) => entries.gather(entry),
            Err(e) => unreadable.push(Unreadable::from_error(e)?),
        }
    }
    Ok(entries)
}

/// Entries read in parts and put together, in order.
trait Gathered: Default {
    /// Appends `part`.
    fn gather(&mut self, part: Self);
}

impl Gathered for Vec<Entry> {
    fn gather(&mut self, mut part: Self) {
        self.append(&mut part);
    }
}

impl Gathered for EncodedEntries {
    fn gather(&mut self, part: Self) {
        self.append(part);
    }
}
