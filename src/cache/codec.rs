//! The cache file's codec: its header, and each record's binary or JSON form (the layout is
//! in the [module above](super)). Every record is decoded again and compared before it is
//! written, so what the file says is exactly what the objects said.

use chrono::{DateTime, Utc};
use gix::ObjectId;

use super::checksum::checksum;
use crate::lease::{self, Event, Lease, Takeover};
use crate::store::Entry;

pub(super) const MAGIC: &[u8; 8] = b"GLLCACHE";
/// The version of the file layout above; bump it when the layout changes, or when the
/// ledger's rules refuse what an earlier build accepted (its records would vouch for it). 2: a
/// `lease.json` must be mode 100644 and at most [`lease::MAX_LEASE_JSON_BYTES`]. 3: a process
/// records its PID namespace (`pid_ns`), which earlier builds dropped from their records. 4:
/// the body starts with the version of the allowed signers list its records were verified
/// under (`lease.requireSignatures`), empty when they were not.
pub(super) const CACHE_FORMAT: u32 = 4;
pub(super) const HEADER_LEN: usize = 48;
const FLAG_PARENT: u8 = 1;
const FLAG_JSON: u8 = 2;

/// The events in the order of their binary codes. An event missing here is written as JSON.
const EVENTS: [Event; 7] = [
    Event::Acquire,
    Event::Reacquire,
    Event::Renew,
    Event::Release,
    Event::Revoke,
    Event::Complete,
    Event::Abandon,
];

/// The takeovers in the order of their binary codes (0: none).
const TAKEOVERS: [Option<Takeover>; 3] =
    [None, Some(Takeover::Expired), Some(Takeover::ProcessGone)];

/// The smallest version-1 `lease.json`. Decoded, its `Debug` form names every field of this
/// build's [`Lease`], so a cache written by a build whose leases have other fields is
/// recognised as foreign.
const BASE_JSON: &str = r#"{"version":1,"issue":"","event":"acquire","holder":null,"token":0,
"acquired_at":null,"expires_at":null,"at":"1970-01-01T00:00:00Z"}"#;

/// Returns the header of a file whose body is `body_len` bytes with the checksum `sum`
/// ([`checksum`]), holding `count` records of ids of `hash_len` bytes; `None` when this build
/// cannot cache at all (see [`schema_fingerprint`]).
pub(super) fn header(hash_len: usize, count: u64, body_len: u64, sum: u64) -> Option<Vec<u8>> {
    let fingerprint = schema_fingerprint()?;
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&CACHE_FORMAT.to_le_bytes());
    header.extend_from_slice(&fingerprint.to_le_bytes());
    header.push(hash_len as u8);
    header.extend_from_slice(&[0, 0, 0]);
    header.extend_from_slice(&count.to_le_bytes());
    header.extend_from_slice(&body_len.to_le_bytes());
    header.extend_from_slice(&sum.to_le_bytes());
    debug_assert_eq!(header.len(), HEADER_LEN);
    Some(header)
}

/// Checks the header and checksum of a whole file; returns its record count, or `None` when
/// the file is short, corrupt or foreign (another format, build or hash length).
pub(super) fn check_header(data: &[u8], hash_len: usize) -> Option<u64> {
    let header = data.get(..HEADER_LEN)?;
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(header.get(at..at + 8)?.try_into().ok()?))
    };
    if &header[..8] != MAGIC
        || header[8..12] != CACHE_FORMAT.to_le_bytes()
        || Some(u64_at(12)?) != schema_fingerprint()
        || usize::from(header[20]) != hash_len
    {
        return None;
    }
    let count = u64_at(24)?;
    let body_len = u64_at(32)?;
    let sum = u64_at(40)?;
    let body = &data[HEADER_LEN..];
    (body.len() as u64 == body_len && checksum(body) == sum).then_some(count)
}

/// One record, split but not decoded.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    pub(super) tip: &'a [u8],
    pub(super) issue: &'a [u8],
    flags: u8,
    parent: Option<&'a [u8]>,
    payload: &'a [u8],
}

pub(super) struct Records<'a> {
    /// The records not yet read.
    pub(super) rest: &'a [u8],
    /// The length of an object id.
    pub(super) hash_len: usize,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let mut outer = Reader(self.rest);
        let len = outer.u32()? as usize;
        let record = outer.take(len)?;
        self.rest = outer.0;
        let mut r = Reader(record);
        let tip = r.take(self.hash_len)?;
        let issue_len = usize::from(r.u16()?);
        let issue = r.take(issue_len)?;
        let flags = r.u8()?;
        let parent = if flags & FLAG_PARENT != 0 {
            Some(r.take(self.hash_len)?)
        } else {
            None
        };
        Some(Record {
            tip,
            issue,
            flags,
            parent,
            payload: r.0,
        })
    }
}

impl Record<'_> {
    /// Decodes the record as the entry of `issue` at `tip` (both already matched by the
    /// caller); gives `issue` back if it does not decode, which makes it a miss.
    #[inline]
    pub fn decode(&self, issue: String, tip: ObjectId) -> std::result::Result<Entry, String> {
        let parent = match self.parent.map(ObjectId::try_from) {
            Some(Ok(p)) => Some(p),
            Some(Err(_)) => return Err(issue),
            None => None,
        };
        let lease = if self.flags & FLAG_JSON != 0 {
            match lease::decode(self.payload) {
                Ok(lease) if lease.issue == issue => lease,
                _ => return Err(issue),
            }
        } else {
            decode_binary(self.payload, issue)?
        };
        Ok(Entry::recorded(tip, parent, lease))
    }
}

/// Appends the record of `entry` to `body`; returns false (appending nothing) when neither
/// form carries the entry exactly.
pub(super) fn encode_record(body: &mut Vec<u8>, entry: &Entry, hash_len: usize) -> bool {
    let issue = entry.lease.issue.as_bytes();
    if issue.len() > usize::from(u16::MAX) {
        return false;
    }
    let mut record = Vec::with_capacity(128);
    record.extend_from_slice(entry.commit.as_slice());
    record.extend_from_slice(&(issue.len() as u16).to_le_bytes());
    record.extend_from_slice(issue);
    let mut flags = 0;
    if entry.parent.is_some() {
        flags |= FLAG_PARENT;
    }
    let flags_at = record.len();
    record.push(flags);
    if let Some(p) = &entry.parent {
        if p.as_slice().len() != hash_len {
            return false;
        }
        record.extend_from_slice(p.as_slice());
    }
    let payload_at = record.len();
    let exact = |record: &[u8]| {
        let raw = Record {
            tip: &record[..hash_len],
            issue,
            flags: record[flags_at],
            parent: entry.parent.as_ref().map(|p| p.as_slice()),
            payload: &record[payload_at..],
        };
        // What the record keeps: a reader's observations beside it are not its to keep.
        raw.decode(entry.lease.issue.clone(), entry.commit)
            .is_ok_and(|decoded| {
                decoded.commit == entry.commit
                    && decoded.parent == entry.parent
                    && decoded.lease == entry.lease
                    && decoded.place == entry.place
            })
    };
    if !(encode_binary(&mut record, &entry.lease) && exact(&record)) {
        record.truncate(payload_at);
        record[flags_at] |= FLAG_JSON;
        record.extend_from_slice(&entry.lease.to_json());
        if !exact(&record) {
            return false;
        }
    }
    let Ok(len) = u32::try_from(record.len()) else {
        return false;
    };
    body.extend_from_slice(&len.to_le_bytes());
    body.extend_from_slice(&record);
    true
}

fn encode_binary(out: &mut Vec<u8>, l: &Lease) -> bool {
    let Some(event) = EVENTS.iter().position(|e| *e == l.event) else {
        return false;
    };
    let Some(takeover) = TAKEOVERS.iter().position(|t| *t == l.takeover) else {
        return false;
    };
    let process = match &l.process {
        Some(p) => match serde_json::to_string(p) {
            Ok(text) => Some(text),
            Err(_) => return false,
        },
        None => None,
    };
    out.extend_from_slice(&l.version.to_le_bytes());
    out.extend_from_slice(&l.token.to_le_bytes());
    out.push(event as u8);
    out.push(takeover as u8);
    put_opt_str(out, l.holder.as_deref());
    put_opt_time(out, l.acquired_at);
    put_opt_time(out, l.expires_at);
    put_time(out, l.at);
    put_opt_str(out, l.previous_holder.as_deref());
    put_opt_str(out, l.note.as_deref());
    put_opt_str(out, l.task.as_deref());
    put_opt_str(out, l.by.as_deref());
    put_opt_str(out, l.reason.as_deref());
    put_opt_str(out, l.session.as_deref());
    put_opt_str(out, process.as_deref());
    true
}

#[inline]
fn decode_binary(payload: &[u8], issue: String) -> std::result::Result<Lease, String> {
    let mut r = Reader(payload);
    let mut read = || -> Option<Lease> {
        let version = r.u32()?;
        let token = r.u64()?;
        let event = *EVENTS.get(usize::from(r.u8()?))?;
        let takeover = *TAKEOVERS.get(usize::from(r.u8()?))?;
        // Every field is named, so a field added to `Lease` must be added here too.
        Some(Lease {
            version,
            issue: String::new(),
            event,
            holder: r.opt_str()?,
            token,
            acquired_at: r.opt_time()?,
            expires_at: r.opt_time()?,
            at: r.time()?,
            previous_holder: r.opt_str()?.map(String::into_boxed_str),
            note: r.opt_str()?.map(String::into_boxed_str),
            task: r.opt_str()?.map(String::into_boxed_str),
            by: r.opt_str()?.map(String::into_boxed_str),
            reason: r.opt_str()?.map(String::into_boxed_str),
            takeover,
            session: r.opt_str()?.map(String::into_boxed_str),
            process: match r.opt_str()? {
                Some(text) => Some(serde_json::from_str(&text).ok()?),
                None => None,
            },
        })
    };
    match read() {
        Some(mut lease) if r.0.is_empty() => {
            lease.issue = issue;
            Ok(lease)
        }
        _ => Err(issue),
    }
}

/// Returns the smallest lease, version 1 with every optional field empty, as a reader of
/// `lease.json` makes it: the probe of the schema fingerprint.
fn base_lease() -> Option<&'static Lease> {
    static BASE: std::sync::OnceLock<Option<Lease>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| lease::decode(BASE_JSON.as_bytes()).ok())
        .as_ref()
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
        None => out.push(0),
    }
}

fn put_time(out: &mut Vec<u8>, t: DateTime<Utc>) {
    out.extend_from_slice(&t.timestamp().to_le_bytes());
    out.extend_from_slice(&t.timestamp_subsec_nanos().to_le_bytes());
}

fn put_opt_time(out: &mut Vec<u8>, t: Option<DateTime<Utc>>) {
    match t {
        Some(t) => {
            out.push(1);
            put_time(out, t);
        }
        None => out.push(0),
    }
}

/// A cursor over bytes that answers `None` instead of reading past the end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }

    fn present(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    fn opt_str(&mut self) -> Option<Option<String>> {
        if !self.present()? {
            return Some(None);
        }
        let len = self.u32()? as usize;
        let bytes = self.take(len)?;
        Some(Some(std::str::from_utf8(bytes).ok()?.to_owned()))
    }

    fn time(&mut self) -> Option<DateTime<Utc>> {
        let secs = i64::from_le_bytes(self.array()?);
        let nanos = self.u32()?;
        DateTime::from_timestamp(secs, nanos)
    }

    fn opt_time(&mut self) -> Option<Option<DateTime<Utc>>> {
        if !self.present()? {
            return Some(None);
        }
        Some(Some(self.time()?))
    }
}

/// Returns the fingerprint of what this build writes: cache format, crate version, ledger
/// format and the fields of [`Lease`]. `None` (no caching at all) if the base does not decode.
pub(super) fn schema_fingerprint() -> Option<u64> {
    static FINGERPRINT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *FINGERPRINT.get_or_init(|| {
        let probe = base_lease()?;
        let text = format!(
            "{CACHE_FORMAT}|{}|{}|{}|{probe:?}",
            env!("CARGO_PKG_VERSION"),
            lease::FORMAT_VERSION,
            std::mem::size_of::<Lease>()
        );
        Some(super::fnv1a(text.as_bytes()))
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cache::checksum::Checksum;
    use crate::cache::Snapshot;
    use crate::liveness::Observation;
    use chrono::TimeZone;

    /// A ledger entry of `issue` whose ids are made of `n`, with a parent or not.
    pub(in crate::cache) fn entry(issue: &str, n: u8, parent: bool) -> Entry {
        let t = Utc.with_ymd_and_hms(2026, 11, 30, 14, 0, 0).unwrap();
        Entry {
            commit: ObjectId::from_bytes_or_panic(&[n; 20]),
            parent: parent.then(|| ObjectId::from_bytes_or_panic(&[n.wrapping_add(1); 20])),
            lease: Lease {
                version: 1,
                issue: issue.into(),
                event: Event::Acquire,
                holder: Some("alice@example.com".into()),
                token: u64::from(n) + 1,
                acquired_at: Some(t),
                expires_at: Some(t + chrono::Duration::minutes(15)),
                at: t,
                previous_holder: parent.then(|| "bob".into()),
                note: Some("ünïcode note".into()),
                task: None,
                by: None,
                reason: None,
                takeover: parent.then_some(Takeover::Expired),
                session: Some("sha256:00".into()),
                process: None,
            },
            seen: Observation::NONE,
            place: crate::store::Place::Ref,
        }
    }

    #[test]
    fn the_schema_probe_decodes() {
        assert!(schema_fingerprint().is_some());
    }

    #[test]
    fn records_round_trip_binary_and_json() {
        let mut odd = entry("b", 2, true);
        // Sub-second times are kept exactly by the binary form.
        odd.lease.at = DateTime::from_timestamp(1_800_000_000, 500).unwrap();
        odd.lease.process = Some(Box::new(crate::liveness::HolderProcess {
            pid: 7,
            boot_id: "b".into(),
            pid_ns: Some(11),
            start_ticks: 9,
        }));
        let entries = vec![entry("a", 1, false), odd, entry("c/d", 3, true)];
        let mut body = Vec::new();
        for e in &entries {
            assert!(encode_record(&mut body, e, 20));
        }
        let decoded: Vec<Entry> = Records {
            rest: &body,
            hash_len: 20,
        }
        .map(|r| {
            let issue = std::str::from_utf8(r.issue).unwrap().to_owned();
            r.decode(issue, ObjectId::try_from(r.tip).unwrap()).unwrap()
        })
        .collect();
        assert_eq!(decoded, entries);
    }

    #[test]
    fn truncated_and_damaged_bodies_do_not_decode() {
        let mut body = Vec::new();
        assert!(encode_record(&mut body, &entry("a", 1, true), 20));
        for cut in 0..body.len() {
            let records = Records {
                rest: &body[..cut],
                hash_len: 20,
            };
            for r in records {
                let _ = r.decode("a".into(), ObjectId::from_bytes_or_panic(&[1; 20]));
            }
        }
        let sum = checksum(&body);
        body[30] ^= 1;
        assert_ne!(checksum(&body), sum);
    }

    #[test]
    fn a_checksum_given_in_pieces_is_the_checksum_of_the_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for len in [0, 1, 31, 32, 33, 64, 95, 1000] {
            let whole = checksum(&data[..len]);
            for piece in [1, 3, 31, 32, 33, 100] {
                let mut sum = Checksum::default();
                data[..len].chunks(piece).for_each(|p| sum.update(p));
                assert_eq!(sum.finish(), whole, "{len} bytes in pieces of {piece}");
            }
        }
    }

    #[test]
    fn json_records_decode_and_an_observation_beside_one_is_not_kept() {
        let e = entry("j", 4, true);
        let mut record = e.commit.as_slice().to_vec();
        record.extend_from_slice(&1u16.to_le_bytes());
        record.extend_from_slice(b"j");
        record.push(FLAG_PARENT | FLAG_JSON);
        record.extend_from_slice(e.parent.unwrap().as_slice());
        record.extend_from_slice(&e.lease.to_json());
        let mut body = (record.len() as u32).to_le_bytes().to_vec();
        body.extend_from_slice(&record);
        let raw = Records {
            rest: &body,
            hash_len: 20,
        }
        .next()
        .unwrap();
        assert_eq!(raw.decode("j".into(), e.commit), Ok(e.clone()));
        assert!(raw.decode("k".into(), e.commit).is_err(), "another issue");

        // A reader's observation is not part of the recorded state: the record keeps the
        // state alone, and reads back without it.
        let mut observed = e.clone();
        observed.seen.process_gone = true;
        let mut body = Vec::new();
        assert!(encode_record(&mut body, &observed, 20));
        let raw = Records {
            rest: &body,
            hash_len: 20,
        }
        .next()
        .unwrap();
        assert_eq!(raw.decode("j".into(), e.commit), Ok(e));
    }

    #[test]
    fn garbage_is_not_a_snapshot() {
        assert!(Snapshot::parse(b"garbage".to_vec(), 20).is_none());
        assert!(Snapshot::parse(vec![0; 4096], 20).is_none());
    }
}
