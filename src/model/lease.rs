//! The lease record: what one ledger commit stores in `lease.json`.
//!
//! Every commit of a tenure ledger holds the *whole* state after its event, so any single
//! commit can be read on its own (`git show refs/leases/42:lease.json`) and the chain can be
//! re-checked step by step. The format is versioned; see `docs/FORMAT.md`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::holder::Holder;
use crate::issue::IssueId;
use crate::time::rfc3339;

/// The version of `lease.json` this build writes. Readers refuse versions they do not know.
pub const FORMAT_VERSION: u32 = 1;

/// The name of the one blob in each ledger commit's tree.
pub const LEASE_FILE: &str = "lease.json";

/// The largest `lease.json` a reader accepts, in bytes (64 KiB). What this build writes is a
/// few hundred bytes (a holder is at most 256 bytes); the limit keeps a forged ledger from
/// making every reader inflate and parse megabytes, and is checked before the blob is read
/// whole (or while it is, by an object database that allocates little more).
pub const MAX_LEASE_JSON_BYTES: u64 = 64 * 1024;

/// What a ledger commit did.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A new tenure began: the token went up by one.
    Acquire,
    /// The live holder acquired again: same token, same `acquired_at`, fresh expiry.
    Reacquire,
    /// The live holder extended its expiry: same token.
    Renew,
    /// The holder (or anyone, once it is no longer live) freed the lease: token kept.
    Release,
    /// An administrator freed someone else's live lease: token kept.
    Revoke,
    /// The holder finished the work: the lease is freed, token kept.
    Complete,
    /// The holder gave the work up: the lease is freed, token kept.
    Abandon,
}

impl Event {
    /// Returns the name used in `lease.json`, in `--json` output and in commit messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Acquire => "acquire",
            Event::Reacquire => "reacquire",
            Event::Renew => "renew",
            Event::Release => "release",
            Event::Revoke => "revoke",
            Event::Complete => "complete",
            Event::Abandon => "abandon",
        }
    }

    /// Returns true for the events that end a tenure (the lease is free afterwards).
    pub fn frees(self) -> bool {
        matches!(
            self,
            Event::Release | Event::Revoke | Event::Complete | Event::Abandon
        )
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of one issue's lease after one event, exactly as stored in `lease.json`.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Lease {
    /// The format version, [`FORMAT_VERSION`] for what this build writes.
    pub version: u32,
    /// The issue id; always equal to the ref name below `refs/leases/`.
    pub issue: String,
    /// What this commit did.
    pub event: Event,
    /// Who holds the lease after this event; `None` when it is free.
    pub holder: Option<String>,
    /// The fencing token: the number of tenures so far. It never decreases and is kept when
    /// the lease is freed.
    pub token: u64,
    /// When the current tenure began; `None` when free.
    #[serde(with = "rfc3339::option")]
    pub acquired_at: Option<DateTime<Utc>>,
    /// When the current tenure ends unless renewed; `None` when free or open-ended.
    #[serde(with = "rfc3339::option")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When this event happened.
    #[serde(with = "rfc3339")]
    pub at: DateTime<Utc>,
    /// Who held the lease before this event, when this event changed or cleared the holder
    /// (release, revoke, complete, abandon, or an acquire that took over a lease no longer
    /// live: expired, or its holder process gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<Box<str>>,
    /// Free text the holder attached to the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<Box<str>>,
    /// An external task or job id the holder attached to the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Box<str>>,
    /// Who performed the event when that is not the holder (a revoke by an administrator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Box<str>>,
    /// Why the event happened, when someone said (a revoke's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Box<str>>,
    /// For an acquire over a lease that still had a holder, or a release of it by someone
    /// else: why that holder lost it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover: Option<Takeover>,
    /// The SHA-256 (`sha256:<hex>`) of the session secret that must accompany every renew
    /// or release of this tenure. The secret itself is never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<str>>,
    /// The process holding the lease, for local liveness. Whether it is gone is what a
    /// reader observes ([`crate::liveness::Observation`]), never part of the record. Boxed:
    /// few records name one, and a listing holds a lease for every ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Box<crate::liveness::HolderProcess>>,
}

/// Why an acquire took, or someone else released, a lease that still recorded a holder.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Takeover {
    /// The previous tenure had expired.
    Expired,
    /// The previous holder's process was gone from its machine (local liveness).
    ProcessGone,
}

impl Lease {
    /// The state after `event` (a release, revoke, complete or abandon) at `at`: free, with
    /// the last tenure's `token` kept as the high-water mark. The rule that frees it records
    /// who held it and who acted.
    pub fn freed(issue: &IssueId, event: Event, at: DateTime<Utc>, token: u64) -> Lease {
        Lease {
            version: FORMAT_VERSION,
            issue: issue.as_str().to_owned(),
            event,
            holder: None,
            token,
            acquired_at: None,
            expires_at: None,
            at,
            previous_holder: None,
            note: None,
            task: None,
            by: None,
            reason: None,
            takeover: None,
            session: None,
            process: None,
        }
    }

    /// The state after an acquire at `at` that began a tenure of `holder` with `token`,
    /// ending at `expires_at` (never, when `None`). The rule that grants it records what the
    /// claim carries (note, task, session, process) and whom it took over from.
    pub fn tenure(
        issue: &IssueId,
        holder: &Holder,
        token: u64,
        at: DateTime<Utc>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Lease {
        Lease {
            holder: Some(holder.to_string()),
            acquired_at: Some(at),
            expires_at,
            ..Lease::freed(issue, Event::Acquire, at, token)
        }
    }

    /// Returns the bytes stored as `lease.json`: pretty JSON with a final newline, so that
    /// `git show` output reads well and diffs between commits are line by line.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).expect("a Lease always serializes");
        out.push(b'\n');
        out
    }

    /// Returns who performed this event: whoever is named in `by`, else the holder (acquire,
    /// renew), else the holder it freed (a release by the holder).
    pub fn actor(&self) -> Option<&str> {
        self.by
            .as_deref()
            .or(self.holder.as_deref())
            .or(self.previous_holder.as_deref())
    }

    /// Returns true if `other` records the same state, ignoring what describes the event
    /// itself (the event, its time, `previous_holder`, `by`, `reason`, `takeover`).
    ///
    /// Used to skip writing a commit for an operation that changes nothing (an open-ended
    /// re-acquire, a renew to the same instant).
    pub fn same_state(&self, other: &Lease) -> bool {
        self.holder == other.holder
            && self.token == other.token
            && self.acquired_at == other.acquired_at
            && self.expires_at == other.expires_at
            && self.note == other.note
            && self.task == other.task
            && self.session == other.session
            && self.process == other.process
    }
}

/// Why a `lease.json` could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not JSON of the expected shape.
    #[error("lease.json is not valid: {0}")]
    Invalid(String),
    /// The record is larger than [`MAX_LEASE_JSON_BYTES`].
    #[error("lease.json is {0} bytes, more than the {MAX_LEASE_JSON_BYTES} bytes allowed")]
    TooLarge(u64),
    /// The record is of a version this build does not know.
    #[error("lease.json has unknown format version {0} (this build reads version {FORMAT_VERSION}); upgrade git-lease")]
    UnknownVersion(u64),
}

/// Parses `lease.json` bytes, checking the size first ([`MAX_LEASE_JSON_BYTES`]), then the
/// version before the shape so that a newer format is reported as such rather than as garbage.
///
/// A record of this version is parsed once; the version is read on its own only when the
/// whole does not parse, to say why.
pub fn decode(bytes: &[u8]) -> Result<Lease, DecodeError> {
    let len = bytes.len() as u64;
    if len > MAX_LEASE_JSON_BYTES {
        return Err(DecodeError::TooLarge(len));
    }
    match serde_json::from_slice::<Lease>(bytes) {
        Ok(lease) if lease.version == FORMAT_VERSION => Ok(lease),
        Ok(lease) => Err(DecodeError::UnknownVersion(u64::from(lease.version))),
        Err(e) => {
            check_version(bytes)?;
            Err(DecodeError::Invalid(e.to_string()))
        }
    }
}

/// Reads the version of a record alone: an error when it is missing, not a positive integer
/// or not [`FORMAT_VERSION`].
fn check_version(bytes: &[u8]) -> Result<(), DecodeError> {
    #[derive(Deserialize)]
    struct VersionOnly {
        version: Option<serde_json::Value>,
    }
    let probe: VersionOnly =
        serde_json::from_slice(bytes).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    match probe.version {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(u64::from(FORMAT_VERSION)) => {
            Ok(())
        }
        Some(serde_json::Value::Number(n)) => Err(match n.as_u64() {
            Some(v) => DecodeError::UnknownVersion(v),
            None => DecodeError::Invalid(format!("version {n} is not a positive integer")),
        }),
        Some(other) => Err(DecodeError::Invalid(format!(
            "version must be an integer, found {other}"
        ))),
        None => Err(DecodeError::Invalid("missing field `version`".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sample() -> Lease {
        let at = Utc.with_ymd_and_hms(2026, 11, 30, 14, 0, 0).unwrap();
        let alice = Holder::new("alice@example.com").unwrap();
        Lease::tenure(&IssueId::new("42").unwrap(), &alice, 1, at, None)
    }

    #[test]
    fn round_trips_and_writes_rfc3339_utc() {
        let lease = sample();
        let json = lease.to_json();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(text.contains("\"acquired_at\": \"2026-11-30T14:00:00Z\""));
        assert!(text.contains("\"expires_at\": null"));
        assert_eq!(decode(&json).unwrap(), lease);
    }

    #[test]
    fn unknown_version_is_named() {
        let err = decode(br#"{"version": 7, "issue": "x"}"#).unwrap_err();
        assert_eq!(err, DecodeError::UnknownVersion(7));
    }

    #[test]
    fn a_newer_version_is_named_whether_or_not_its_shape_is_this_ones() {
        let mut newer = serde_json::to_value(sample()).unwrap();
        newer["version"] = 2.into();
        let bytes = serde_json::to_vec(&newer).unwrap();
        assert_eq!(decode(&bytes).unwrap_err(), DecodeError::UnknownVersion(2));
        newer["version"] = (u64::from(u32::MAX) + 1).into();
        let bytes = serde_json::to_vec(&newer).unwrap();
        assert_eq!(
            decode(&bytes).unwrap_err(),
            DecodeError::UnknownVersion(u64::from(u32::MAX) + 1)
        );
        newer["version"] = 0.into();
        let bytes = serde_json::to_vec(&newer).unwrap();
        assert_eq!(decode(&bytes).unwrap_err(), DecodeError::UnknownVersion(0));
        for bad in [
            serde_json::json!(1.5),
            serde_json::json!("1"),
            serde_json::json!(-1),
        ] {
            newer["version"] = bad;
            let bytes = serde_json::to_vec(&newer).unwrap();
            assert!(matches!(decode(&bytes), Err(DecodeError::Invalid(_))));
        }
        newer.as_object_mut().unwrap().remove("version");
        let bytes = serde_json::to_vec(&newer).unwrap();
        assert_eq!(
            decode(&bytes).unwrap_err(),
            DecodeError::Invalid("missing field `version`".into())
        );
    }

    #[test]
    fn garbage_is_invalid() {
        assert!(matches!(decode(b"not json"), Err(DecodeError::Invalid(_))));
        assert!(matches!(decode(b"{}"), Err(DecodeError::Invalid(_))));
    }
}
