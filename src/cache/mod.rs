//! The list cache: a derived, verifiable record of what each ledger tip says, so that `list`
//! need not decode two or three objects per lease. This module holds the file; [`codec`] its
//! layout; [`crate::listing`] decides when a listing uses it and when it rewrites it.
//!
//! # Why it exists
//!
//! `list` answers for every lease at once. Reading the state from git means a commit, a tree
//! and a `lease.json` blob per ref: 300,000 object reads and JSON decodes at 100k leases, which
//! takes seconds even when packed. But a commit is immutable, so *"tip commit T of issue I
//! records lease L"* is true forever: once decoded, the answer can be kept. This module keeps
//! those answers in one file, read once per listing; only the refs whose tip moved since the
//! file was written (the *misses*) are decoded from objects.
//!
//! # Why it can be trusted, and why it is not the ledger
//!
//! - The refs and `lease.json` stay the only truth. A record is used only when its issue *and*
//!   its tip equal a ref's name and target exactly (records are matched to refs by issue, then
//!   the tip is compared), so a stale record is never used: it is simply not found.
//! - A missing, truncated, corrupt (checksum) or foreign file (another magic, cache format,
//!   hash length, version of git-lease, or a build whose [`Lease`](crate::Lease) has other
//!   fields) is ignored as a whole, and every ref is decoded from objects. A record that does
//!   not decode is a miss.
//! - Records are written only from entries decoded and checked by [`Store::entry`], and each
//!   record is decoded again and compared before it is written, so the cache never says what
//!   the objects do not.
//! - The file can be deleted at any time. It is rewritten (temp file + rename, so readers see
//!   the old or the new file, never half of one) only when a listing had many misses (more than
//!   [`rewrite_threshold`](crate::listing::rewrite_threshold)); small repositories never get one. It is not fsynced: losing or
//!   tearing it costs one slow listing, never a wrong one.
//! - It lives outside refs and objects (`<common dir>/git-lease/list-cache`, one file per
//!   namespace of refs), so "reads never write the ledger" still holds: a listing may refresh
//!   this derived file, never a ref or an object.
//!
//! # File format (little-endian)
//!
//! ```text
//! header  magic "GLLCACHE" | u32 cache format | u64 schema fingerprint | u8 hash length
//!         | 3 bytes zero | u64 record count | u64 body length | u64 body checksum
//! body    u8 length | the allowed signers version every record's ledger was verified under
//!         (`lease.requireSignatures`; empty: not verified) | records
//! record  u32 length of the rest | tip | u16 issue length | issue | u8 flags (1: has parent,
//!         2: JSON payload) | parent | payload
//! payload binary: u32 version | u64 token | u8 event | u8 takeover | holder | acquired_at
//!         | expires_at | at | previous_holder | note | task | by | reason | session
//!         | process (as its JSON)   (strings: u8 present + u32 length + UTF-8; times: u8
//!         present + i64 unix seconds + u32 nanoseconds; `at` has no present byte)
//!         JSON: `lease.json` as this build writes it, for a record the binary form cannot
//!         carry exactly
//! ```
//!
//! Records are sorted by issue, the order refs are listed in, so matching them to refs is one
//! merge pass with no hash table.
//!
//! A listing that requires signatures trusts the records only of a file verified under the
//! very list it reads (its version, the list's blob id): a changed list, or a file written by a
//! listing that did not verify, has every ledger verified again.

mod checksum;
pub mod codec;
mod encoded;

use std::cmp::Ordering;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::error::{Error, Result};
use crate::issue::REF_PREFIX;
use crate::store::{Entry, Store};
use codec::{Record, Records, HEADER_LEN};
pub use encoded::EncodedEntries;

/// The cache file of one namespace of lease refs.
#[derive(Clone, Debug)]
pub struct ListCache {
    path: PathBuf,
    hash: gix::hash::Kind,
    shared: crate::store::shared::SharedPerm,
}

impl ListCache {
    /// Returns the cache of the refs under `namespace` (`refs/leases/`, or a remote's tracking
    /// prefix) in `store`'s repository.
    pub fn new(store: &Store, namespace: &str) -> ListCache {
        let name = if namespace == REF_PREFIX {
            "list-cache".to_owned()
        } else {
            format!("list-cache-{:016x}", fnv1a(namespace.as_bytes()))
        };
        ListCache {
            path: store.repo().common_dir().join("git-lease").join(name),
            hash: store.repo().object_hash(),
            shared: store.shared(),
        }
    }

    /// Returns the cache of `refs/leases/*`.
    pub fn for_leases(store: &Store) -> ListCache {
        ListCache::new(store, REF_PREFIX)
    }

    /// Returns the path of the cache file (which may not exist).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the cache file; `None` when it is missing, unreadable, corrupt or foreign, or
    /// not a regular file.
    ///
    /// Anything else at the path (a FIFO, a device, a directory, a symbolic link) is never
    /// read: the file is opened without following a link and without blocking (opening a
    /// FIFO for reading would wait for a writer forever), and used only if the opened file
    /// is a regular one. The next rewrite replaces whatever is there.
    pub fn load(&self) -> Option<Snapshot> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
            .open(&self.path)
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() {
            return None;
        }
        let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut data).ok()?;
        Snapshot::parse(data, self.hash.len_in_bytes())
    }

    /// Replaces the cache file with records of `entries` (each entry's commit is a tip),
    /// atomically. Entries whose state the file cannot carry exactly are left out.
    pub fn save(&self, entries: &[Entry]) -> Result<()> {
        self.save_verified(entries, None)
    }

    /// As [`ListCache::save`], the file saying that every entry's ledger was verified under
    /// the allowed signers list of version `verified` (`None`: not verified).
    pub fn save_verified(&self, entries: &[Entry], verified: Option<&str>) -> Result<()> {
        let hash_len = self.hash.len_in_bytes();
        let mut order: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.commit.as_slice().len() == hash_len)
            .collect();
        order.sort_by(|a, b| a.lease.issue.cmp(&b.lease.issue));
        let records = order.into_iter().filter_map(|entry| {
            let mut record = Vec::with_capacity(256);
            codec::encode_record(&mut record, entry, hash_len).then_some(record.into())
        });
        self.replace(records, verified)
    }

    /// [`ListCache::save_verified`] of entries kept as their records: the records are
    /// written as they are, not encoded again.
    pub fn save_encoded(&self, entries: &EncodedEntries, verified: Option<&str>) -> Result<()> {
        self.replace(entries.records_by_issue(self.hash.len_in_bytes()), verified)
    }

    /// Replaces the cache file with `records` (each as the file holds it, in the order of
    /// their issues), atomically.
    fn replace<'r>(
        &self,
        records: impl Iterator<Item = std::borrow::Cow<'r, [u8]>>,
        verified: Option<&str>,
    ) -> Result<()> {
        let io = |context: &str, source: std::io::Error| Error::Io {
            context: format!("{context} {}", self.path.display()),
            source,
        };
        let hash_len = self.hash.len_in_bytes();
        let verified = verified.unwrap_or_default().as_bytes();
        // Its length is one byte of the file.
        if u8::try_from(verified.len()).is_err() {
            return Ok(());
        }
        // The body goes to the file as it is encoded, its checksum taken on the way, and the
        // header is written over the room left for it once both are known: at 100k ledgers a
        // body held whole would be 13 MB more at the peak of a cold listing.
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| io("cannot create the directory of", e))?;
        self.shared.adjust(dir)?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{:08x}",
            self.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id(),
            fastrand::u32(..)
        ));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| write_records(&mut f, records, verified, hash_len));
        match written {
            Ok(true) => {
                if let Err(e) = self.shared.adjust(&tmp) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            }
            // This build cannot cache at all: nothing is left behind.
            Ok(false) => {
                let _ = std::fs::remove_file(&tmp);
                return Ok(());
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(io("cannot write", e));
            }
        }
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io("cannot write", e));
        }
        Ok(())
    }
}

/// A cache file as read: verified header and checksum, records not yet decoded.
pub struct Snapshot {
    data: Vec<u8>,
    hash_len: usize,
    count: u64,
    /// Where the records start.
    records_at: usize,
}

impl Snapshot {
    pub(crate) fn parse(data: Vec<u8>, hash_len: usize) -> Option<Snapshot> {
        let count = codec::check_header(&data, hash_len)?;
        let len = usize::from(*data.get(HEADER_LEN)?);
        let records_at = HEADER_LEN + 1 + len;
        std::str::from_utf8(data.get(HEADER_LEN + 1..records_at)?).ok()?;
        Some(Snapshot {
            data,
            hash_len,
            count,
            records_at,
        })
    }

    /// Returns the version of the allowed signers list every record's ledger was verified
    /// under, if they were.
    pub fn verified(&self) -> Option<&str> {
        std::str::from_utf8(&self.data[HEADER_LEN + 1..self.records_at])
            .ok()
            .filter(|v| !v.is_empty())
    }

    /// Returns how many records the file holds.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Returns true when the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn records(&self) -> Records<'_> {
        Records {
            rest: &self.data[self.records_at..],
            hash_len: self.hash_len,
        }
    }

    /// Returns the issue and tip of every record.
    pub fn tips(&self) -> Vec<(String, ObjectId)> {
        self.records()
            .filter_map(|r| {
                let issue = std::str::from_utf8(r.issue).ok()?.to_owned();
                Some((issue, ObjectId::try_from(r.tip).ok()?))
            })
            .collect()
    }

    /// Returns a matcher of refs to records, for refs asked in sorted order.
    pub fn matcher(&self) -> RecordMatcher<'_> {
        RecordMatcher::new(Some(self))
    }

    /// Decodes every record as an entry (the commit is the tip it is keyed by); records that
    /// do not decode are skipped. For inspection and tests; listing decodes only what it uses.
    pub fn entries(&self) -> Vec<Entry> {
        self.records()
            .filter_map(|r| {
                let issue = std::str::from_utf8(r.issue).ok()?.to_owned();
                let tip = ObjectId::try_from(r.tip).ok()?;
                r.decode(issue, tip).ok()
            })
            .collect()
    }
}

/// Finds the record of each ref, asked in the refs' (sorted) order, in one merge pass over
/// the snapshot's records.
pub struct RecordMatcher<'s> {
    records: Option<Records<'s>>,
    pending: Option<Record<'s>>,
}

impl<'s> RecordMatcher<'s> {
    /// Returns a matcher over `snapshot`'s records; without a snapshot, nothing matches.
    pub fn new(snapshot: Option<&'s Snapshot>) -> RecordMatcher<'s> {
        let mut records = snapshot.map(Snapshot::records);
        let pending = records.as_mut().and_then(Iterator::next);
        RecordMatcher { records, pending }
    }

    /// The record with this issue and exact tip, if any. Records of issues before this one
    /// are skipped; among records of this issue (one, unless the file was tampered with), the
    /// one with this tip is used.
    pub fn find(&mut self, issue: &str, tip: &ObjectId) -> Option<Record<'s>> {
        let mut matched = None;
        while let Some(raw) = self.pending {
            match raw.issue.cmp(issue.as_bytes()) {
                Ordering::Greater => break,
                Ordering::Less => {}
                Ordering::Equal => {
                    if raw.tip == tip.as_slice() && matched.is_none() {
                        matched = Some(raw);
                    }
                }
            }
            self.pending = self.records.as_mut().and_then(Iterator::next);
        }
        matched
    }
}

/// FNV-1a: a stable, dependency-free hash, for cache names, the schema fingerprint and the
/// tracking namespace of a remote given as a URL.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes to `file` a cache of `records` (each as the file holds it, of ids `hash_len` bytes
/// long), the body saying that they were verified under the allowed signers list of version
/// `verified`: the body first, its checksum taken on the way, then the header over the room
/// left for it. Returns false when this build cannot cache at all ([`codec::header`]).
fn write_records<'r>(
    file: &mut std::fs::File,
    records: impl Iterator<Item = std::borrow::Cow<'r, [u8]>>,
    verified: &[u8],
    hash_len: usize,
) -> std::io::Result<bool> {
    let mut out = std::io::BufWriter::new(&mut *file);
    out.write_all(&[0; HEADER_LEN])?;
    let mut sum = checksum::Checksum::default();
    let mut put = |bytes: &[u8]| {
        sum.update(bytes);
        out.write_all(bytes)
    };
    let Ok(len) = u8::try_from(verified.len()) else {
        return Ok(false);
    };
    put(&[len])?;
    put(verified)?;
    let mut count = 0u64;
    for record in records {
        put(&record)?;
        count += 1;
    }
    out.flush()?;
    drop(out);
    let Some(header) = codec::header(hash_len, count, sum.total(), sum.finish()) else {
        return Ok(false);
    };
    file.seek(std::io::SeekFrom::Start(0))?;
    file.write_all(&header)?;
    Ok(true)
}
