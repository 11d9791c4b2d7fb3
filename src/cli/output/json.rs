//! The JSON shapes of `--json` output, a versioned API (see `docs/JSON.md`), and how they
//! are written: one line each, every top-level object led by `schema_version` ([`json_text`]).
//!
//! A view is a lease *as seen at an instant*: `holder` is the live holder or null, so a reader
//! never has to re-apply the expiry rule, and the last recorded holder is still given in
//! `last_holder`.

use std::io::Write;

use chrono::{DateTime, Utc};
use serde::Serialize;

use git_lease::lease::{Event, Lease, Takeover};
use git_lease::ledger::Report;
use git_lease::liveness::HolderProcess;
use git_lease::rules::{self, Outcome};
use git_lease::store::Entry;
use git_lease::time::format_instant;

/// Whether a lease is held, expired or free at an instant, by [`rules::is_live`].
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// A holder, live.
    Held,
    /// A holder, no longer live (its expiry has passed, or its process is gone): free to take.
    Expired,
    /// No holder (released, revoked, completed, abandoned).
    Free,
    /// The issue was never leased.
    None,
}

impl State {
    /// Returns the state of `entry` at `now`.
    pub fn of(entry: Option<&Entry>, now: DateTime<Utc>) -> State {
        match entry {
            None => State::None,
            Some(e) if rules::is_live(e.current(), now) => State::Held,
            Some(e) if e.lease.holder.is_some() => State::Expired,
            Some(_) => State::Free,
        }
    }

    /// Returns the name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Held => "held",
            State::Expired => "expired",
            State::Free => "free",
            State::None => "none",
        }
    }
}

/// A lease as seen at an instant.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    /// The issue id.
    pub issue: String,
    /// The live holder, or null when free, expired or never leased.
    pub holder: Option<String>,
    /// The most recent holder on record (live or not), or null.
    pub last_holder: Option<String>,
    /// The token of the current or last tenure; null if never leased.
    pub token: Option<u64>,
    /// When the recorded tenure began (kept while expired); null when free.
    pub acquired_at: Option<String>,
    /// When the recorded tenure ends; null when free or open-ended.
    pub expires_at: Option<String>,
    /// True iff the lease is live.
    pub held: bool,
    /// `held`, `expired`, `free` or `none`.
    pub state: State,
    /// The last event recorded; null if never leased.
    pub event: Option<Event>,
    /// When the last event happened.
    pub at: Option<String>,
    /// The ledger tip.
    pub commit: Option<String>,
    /// What the claim recorded beside its holder.
    #[serde(flatten)]
    pub claim: ClaimView,
    /// True when this reader, in the holding process's boot and PID namespace, established that
    /// it is gone (the lease is then not live).
    pub process_gone: bool,
    /// True when the tenure was taken with a session (its secret is needed to renew or free it).
    pub session: bool,
}

/// What a claim recorded beside its holder, in `show`, `list` and `log` alike.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimView {
    /// The note attached to the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The task id attached to the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// For an acquire over a lease that still had a holder: why that holder lost it; for a
    /// release of someone else's lease: why it was no longer live.
    pub takeover: Option<Takeover>,
    /// The holding process, when the claim recorded one.
    pub process: Option<HolderProcess>,
}

impl From<&Lease> for ClaimView {
    fn from(l: &Lease) -> ClaimView {
        ClaimView {
            note: l.note.as_deref().map(str::to_owned),
            task: l.task.as_deref().map(str::to_owned),
            takeover: l.takeover,
            process: l.process.as_deref().cloned(),
        }
    }
}

impl LeaseView {
    /// Returns the view of `issue`'s `entry` (or of a never-leased issue) at `now`.
    pub fn new(issue: &str, entry: Option<&Entry>, now: DateTime<Utc>) -> LeaseView {
        let state = State::of(entry, now);
        let lease = entry.map(|e| &e.lease);
        LeaseView {
            issue: issue.to_owned(),
            holder: entry
                .and_then(|e| rules::live_holder(e.current(), now))
                .map(str::to_owned),
            last_holder: lease.and_then(|l| {
                l.holder
                    .clone()
                    .or_else(|| l.previous_holder.as_deref().map(str::to_owned))
            }),
            token: lease.map(|l| l.token),
            acquired_at: lease.and_then(|l| l.acquired_at).map(format_instant),
            expires_at: lease.and_then(|l| l.expires_at).map(format_instant),
            held: state == State::Held,
            state,
            event: lease.map(|l| l.event),
            at: lease.map(|l| format_instant(l.at)),
            commit: entry.map(|e| e.commit.to_string()),
            claim: lease.map(ClaimView::from).unwrap_or_default(),
            process_gone: entry.is_some_and(|e| e.seen.process_gone),
            session: lease.is_some_and(|l| l.session.is_some()),
        }
    }
}

/// The answer to an operation: its outcome and the lease as it stands afterwards.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ReportView {
    /// What the operation answered (see [`Outcome`]).
    pub outcome: Outcome,
    /// Whether a ledger commit was written.
    pub wrote: bool,
    /// The lease after the operation.
    #[serde(flatten)]
    pub lease: LeaseView,
}

impl ReportView {
    /// Returns the view of `report` at `now`.
    pub fn new(report: &Report, now: DateTime<Utc>) -> ReportView {
        ReportView {
            outcome: report.outcome,
            wrote: report.wrote,
            lease: LeaseView::new(report.issue.as_str(), report.entry.as_ref(), now),
        }
    }
}

/// One entry of `log`: an event as recorded (not filtered by any instant).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct LogView {
    /// The commit recording the event.
    pub commit: String,
    /// What happened.
    pub event: Event,
    /// When it happened.
    pub at: String,
    /// The token after the event.
    pub token: u64,
    /// The holder after the event (null once freed).
    pub holder: Option<String>,
    /// The holder before the event, when it changed or was cleared.
    pub previous_holder: Option<String>,
    /// Who acted, when not the holder.
    pub by: Option<String>,
    /// Why, when recorded.
    pub reason: Option<String>,
    /// The tenure's start.
    pub acquired_at: Option<String>,
    /// The tenure's end as recorded.
    pub expires_at: Option<String>,
    /// What the claim recorded beside its holder.
    #[serde(flatten)]
    pub claim: ClaimView,
    /// True when the tenure has a session.
    pub session: bool,
}

impl From<&Entry> for LogView {
    fn from(e: &Entry) -> LogView {
        let l = &e.lease;
        LogView {
            commit: e.commit.to_string(),
            event: l.event,
            at: format_instant(l.at),
            token: l.token,
            holder: l.holder.clone(),
            previous_holder: l.previous_holder.as_deref().map(str::to_owned),
            by: l.by.as_deref().map(str::to_owned),
            reason: l.reason.as_deref().map(str::to_owned),
            acquired_at: l.acquired_at.map(format_instant),
            expires_at: l.expires_at.map(format_instant),
            claim: ClaimView::from(l),
            session: l.session.is_some(),
        }
    }
}

/// The version of every `--json` shape (docs/JSON.md); it changes only when a field changes
/// meaning or goes away, never when one is added.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Writes `value` as one JSON document on one line ([`json_text`]).
pub(crate) fn json_line(out: &mut dyn Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    out.write_all(json_text(value)?.as_bytes())?;
    out.write_all(b"\n")
}

/// Returns `value` as one line of JSON. An object starts with `"schema_version"`
/// ([`SCHEMA_VERSION`]); arrays (`list`, `log`, a multi-issue `acquire`) are documented under
/// the same version.
pub(crate) fn json_text(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let text = serde_json::to_string(value)?;
    Ok(match text.strip_prefix('{') {
        Some("}") => format!("{{\"schema_version\":{SCHEMA_VERSION}}}"),
        Some(rest) => format!("{{\"schema_version\":{SCHEMA_VERSION},{rest}"),
        None => text,
    })
}

/// Returns the JSON error object of a failed command (docs/JSON.md, Errors):
/// `{"schema_version", "error": {"kind", "message", "exit_code"}, "hints"}`, with `hints`
/// what the command said before it failed.
pub(crate) fn error_text(kind: &str, message: &str, code: u8, hints: &[String]) -> String {
    let hints: Vec<String> = hints.iter().map(|h| git_lease::redact::urls(h)).collect();
    let error = serde_json::json!({
        "error": {"kind": kind, "message": git_lease::redact::urls(message), "exit_code": code},
        "hints": hints,
    });
    json_text(&error).unwrap_or_default()
}

/// Writes `items` as one JSON array on one line, as [`json_line`] of a `Vec` would, one item at
/// a time (a list of 100k leases never holds all its views at once).
pub(crate) fn json_array_line<T: serde::Serialize>(
    out: &mut dyn Write,
    items: impl Iterator<Item = T>,
) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &item)?;
    }
    out.write_all(b"]\n")
}
