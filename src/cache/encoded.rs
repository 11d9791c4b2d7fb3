//! Entries kept as the list cache's records ([`super::codec`]), one after another: what a cold
//! listing holds for every ledger until it is shown, in about half the memory of decoded
//! entries, and what the list cache it rewrites is made of, so no second copy is encoded.
//! Each entry is decoded again only when it is asked for.

use std::borrow::Cow;

use super::codec::{self, Records};
use crate::liveness::Observation;
use crate::store::Entry;

/// Entries in order, each kept as its cache record, or whole where no record carries it
/// exactly (or a reader observed something beside it).
#[derive(Default)]
pub struct EncodedEntries {
    parts: Vec<Part>,
    /// How many entries come before each part.
    before: Vec<usize>,
}

/// A run of entries encoded together (one thread's share of a listing).
struct Part {
    hash_len: usize,
    /// The records, each as the cache file holds it: its length, then the record.
    body: Vec<u8>,
    spots: Vec<Spot>,
    whole: Vec<Entry>,
}

#[derive(Clone, Copy)]
enum Spot {
    /// A record at this offset of the body; `process`: its lease names a holder process, which
    /// a reader may observe.
    Record { at: usize, process: bool },
    /// The entry at this index of `whole`.
    Whole(usize),
}

/// Parts smaller than this are copied into the part before them rather than kept apart: a
/// listing that reads its ledgers one by one gives one part each.
const SMALL_PART_BYTES: usize = 64 * 1024;

impl EncodedEntries {
    /// Returns the entries of `entries`, in order, encoded for ids of `hash_len` bytes.
    pub(crate) fn encode(
        hash_len: usize,
        entries: impl IntoIterator<Item = Entry>,
    ) -> EncodedEntries {
        let mut part = Part {
            hash_len,
            body: Vec::new(),
            spots: Vec::new(),
            whole: Vec::new(),
        };
        entries.into_iter().for_each(|entry| part.push(entry));
        part.body.shrink_to_fit();
        part.spots.shrink_to_fit();
        EncodedEntries {
            before: vec![0],
            parts: vec![part],
        }
    }

    /// Appends the entries of `other`, in order.
    pub(crate) fn append(&mut self, other: EncodedEntries) {
        for part in other.parts {
            match self.parts.last_mut() {
                Some(last)
                    if part.body.len() < SMALL_PART_BYTES && last.hash_len == part.hash_len =>
                {
                    last.absorb(part)
                }
                _ => {
                    self.before.push(self.len());
                    self.parts.push(part);
                }
            }
        }
    }

    /// Returns how many entries there are.
    pub fn len(&self) -> usize {
        match (self.before.last(), self.parts.last()) {
            (Some(before), Some(last)) => before + last.spots.len(),
            _ => 0,
        }
    }

    /// Returns true when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The part holding entry `i`, and the entry's index in it.
    fn locate(&self, i: usize) -> (&Part, usize) {
        let p = self.before.partition_point(|before| *before <= i) - 1;
        (&self.parts[p], i - self.before[p])
    }

    /// Returns the issue of entry `i`, without decoding the entry.
    pub fn issue(&self, i: usize) -> &str {
        let (part, i) = self.locate(i);
        match part.spots[i] {
            Spot::Record { at, .. } => std::str::from_utf8(part.record(at).issue).unwrap_or(""),
            Spot::Whole(w) => &part.whole[w].lease.issue,
        }
    }

    /// Returns entry `i`, decoded from its record.
    pub fn get(&self, i: usize) -> Cow<'_, Entry> {
        let (part, i) = self.locate(i);
        part.get(i)
    }

    /// Gives each entry whose lease names a holder process to `observe` (what a reader sees
    /// beside the record), and keeps it whole when `observe` saw something.
    pub(crate) fn observe(&mut self, observe: &dyn Fn(&mut Entry)) {
        for part in &mut self.parts {
            for i in 0..part.spots.len() {
                if let Spot::Record { process: true, .. } = part.spots[i] {
                    let mut entry = part.get(i).into_owned();
                    observe(&mut entry);
                    if entry.seen != Observation::NONE {
                        part.spots[i] = Spot::Whole(part.whole.len());
                        part.whole.push(entry);
                    }
                }
            }
        }
    }

    /// Returns the record of every entry (its length first, as the cache file holds it) in
    /// the order of their issues, but for those no record carries exactly; ids of `hash_len`
    /// bytes.
    pub(super) fn records_by_issue(&self, hash_len: usize) -> impl Iterator<Item = Cow<'_, [u8]>> {
        let mut order: Vec<usize> = (0..self.len()).collect();
        if !order.is_sorted_by(|a, b| self.issue(*a) <= self.issue(*b)) {
            order.sort_by(|a, b| self.issue(*a).cmp(self.issue(*b)));
        }
        order.into_iter().filter_map(move |i| {
            let (part, i) = self.locate(i);
            match part.spots[i] {
                Spot::Record { at, .. } if part.hash_len == hash_len => {
                    let len = part.record_len(at);
                    Some(Cow::Borrowed(&part.body[at..at + 4 + len]))
                }
                _ => {
                    let mut record = Vec::new();
                    let entry = part.get(i);
                    let fits = entry.commit.as_slice().len() == hash_len;
                    (fits && codec::encode_record(&mut record, &entry, hash_len))
                        .then_some(Cow::Owned(record))
                }
            }
        })
    }
}

impl Part {
    /// Keeps `entry` as its record, or whole where no record carries it exactly.
    fn push(&mut self, entry: Entry) {
        let at = self.body.len();
        let fits =
            entry.commit.as_slice().len() == self.hash_len && entry.seen == Observation::NONE;
        if fits && codec::encode_record(&mut self.body, &entry, self.hash_len) {
            let process = entry.lease.process.is_some();
            self.spots.push(Spot::Record { at, process });
        } else {
            self.spots.push(Spot::Whole(self.whole.len()));
            self.whole.push(entry);
        }
    }

    /// Appends the entries of `other`, a part of the same id length.
    fn absorb(&mut self, other: Part) {
        let (body, whole) = (self.body.len(), self.whole.len());
        self.body.extend_from_slice(&other.body);
        self.spots
            .extend(other.spots.into_iter().map(|spot| match spot {
                Spot::Record { at, process } => Spot::Record {
                    at: at + body,
                    process,
                },
                Spot::Whole(w) => Spot::Whole(w + whole),
            }));
        self.whole.extend(other.whole);
    }

    /// The length of the record at `at` (after its own four bytes of length).
    fn record_len(&self, at: usize) -> usize {
        let mut len = [0; 4];
        len.copy_from_slice(&self.body[at..at + 4]);
        u32::from_le_bytes(len) as usize
    }

    /// The record at `at`, split.
    fn record(&self, at: usize) -> codec::Record<'_> {
        let mut records = Records {
            rest: &self.body[at..],
            hash_len: self.hash_len,
        };
        records
            .next()
            .expect("a record kept here splits as it did when it was written")
    }

    fn get(&self, i: usize) -> Cow<'_, Entry> {
        match self.spots[i] {
            Spot::Record { at, .. } => {
                let record = self.record(at);
                let issue = String::from_utf8_lossy(record.issue).into_owned();
                let tip = gix::ObjectId::try_from(record.tip)
                    .expect("a record kept here holds an id of its part's length");
                Cow::Owned(
                    record
                        .decode(issue, tip)
                        .expect("a record kept here decodes: it was decoded before it was kept"),
                )
            }
            Spot::Whole(w) => Cow::Borrowed(&self.whole[w]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::codec::tests::entry;

    #[test]
    fn entries_kept_as_records_decode_as_they_were_in_any_number_of_parts() {
        let mut whole = entry("c", 3, true);
        // An id of another length than its part's: no record carries it.
        whole.commit = gix::ObjectId::from_bytes_or_panic(&[3; 32]);
        let mut seen = entry("d", 4, false);
        seen.lease.process = Some(Box::new(crate::liveness::HolderProcess {
            pid: 7,
            boot_id: "boot".into(),
            pid_ns: Some(1),
            start_ticks: 9,
        }));
        let firsts = [entry("b", 2, true), entry("a", 1, false), whole.clone()];
        let mut entries = EncodedEntries::encode(20, firsts.clone());
        entries.append(EncodedEntries::encode(20, [seen.clone()]));
        entries.append(EncodedEntries::default());
        assert_eq!(entries.len(), 4);
        assert_eq!(entries.issue(2), "c");
        assert_eq!(entries.issue(3), "d");
        let all: Vec<Entry> = (0..4).map(|i| entries.get(i).into_owned()).collect();
        assert_eq!(all, [&firsts[..], &[seen.clone()]].concat());
        // What a reader observes is kept beside the record, never in it.
        entries.observe(&|e| e.seen.process_gone = e.lease.process.is_some());
        assert!(entries.get(3).seen.process_gone);
        assert!(!entries.get(0).seen.process_gone);
        let records: Vec<Vec<u8>> = entries
            .records_by_issue(20)
            .map(|r| r.into_owned())
            .collect();
        let mut expected = Vec::new();
        for e in [&firsts[1], &firsts[0], &seen] {
            let mut record = Vec::new();
            assert!(codec::encode_record(&mut record, e, 20));
            expected.push(record);
        }
        assert_eq!(
            records, expected,
            "by issue, the id of another length left out"
        );
    }
}
