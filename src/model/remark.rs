//! Remarks: the free text a user or an agent attaches to an event (a claim's note and task, a
//! revoke's reason).
//!
//! Every record must stay within [`MAX_LEASE_JSON_BYTES`], or no reader would accept its
//! ledger again. So each remark is bounded where it is made ([`Remark::new`]), counted in the
//! bytes `lease.json` stores it in (JSON escaping included), and every writer takes a
//! [`Remark`]. The bounds leave room for every other field at its own bound: the test
//! `a_record_with_every_field_at_its_bound_is_within_the_limit` checks it.
//!
//! [`MAX_LEASE_JSON_BYTES`]: crate::lease::MAX_LEASE_JSON_BYTES

use crate::error::Error;

/// What a remark is, and so its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemarkKind {
    /// A claim's note (`acquire --note`, MCP `note`).
    Note,
    /// A claim's task or job id (`acquire --task`, MCP `task`).
    Task,
    /// A revoke's reason (`revoke --reason`, MCP `reason`).
    Reason,
}

impl RemarkKind {
    /// Returns the name of the field in `lease.json`, on the command line (`--note`) and in
    /// MCP's arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            RemarkKind::Note => "note",
            RemarkKind::Task => "task",
            RemarkKind::Reason => "reason",
        }
    }

    /// Returns the most bytes the remark may take as `lease.json` stores it.
    pub fn max_bytes(self) -> usize {
        match self {
            RemarkKind::Note => MAX_NOTE_BYTES,
            RemarkKind::Task => MAX_TASK_BYTES,
            RemarkKind::Reason => MAX_REASON_BYTES,
        }
    }
}

/// The longest note, in bytes as `lease.json` stores it (52 KiB).
pub const MAX_NOTE_BYTES: usize = 52 * 1024;
/// The longest task, in bytes as `lease.json` stores it (2 KiB).
pub const MAX_TASK_BYTES: usize = 2 * 1024;
/// The longest reason, in bytes as `lease.json` stores it (4 KiB).
pub const MAX_REASON_BYTES: usize = 4 * 1024;

/// Free text that fits its field's bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Remark(Box<str>);

impl Remark {
    /// Checks `text` against the bound of `kind`.
    ///
    /// Returns [`Error::TooLong`] when `text` takes more than [`RemarkKind::max_bytes`] bytes
    /// as `lease.json` stores it.
    pub fn new(kind: RemarkKind, text: impl Into<String>) -> Result<Remark, Error> {
        let text = text.into();
        let bytes = stored_len(&text);
        if bytes > kind.max_bytes() {
            return Err(Error::TooLong {
                field: kind.as_str(),
                bytes,
                max: kind.max_bytes(),
            });
        }
        Ok(Remark(text.into_boxed_str()))
    }

    /// Checks an optional remark: `None` stays `None`.
    pub fn optional(kind: RemarkKind, text: Option<String>) -> Result<Option<Remark>, Error> {
        text.map(|t| Remark::new(kind, t)).transpose()
    }

    /// Returns the text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Remark {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Remark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Returns how many bytes `text` takes inside a JSON string as `lease.json` writes it: its
/// UTF-8 bytes, plus one for each `"` and `\`, plus five for each other control character
/// written `\u00XX` (the short escapes `\n`, `\t`, `\r`, `\b`, `\f` take two).
pub fn stored_len(text: &str) -> usize {
    text.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\t' | '\r' | '\u{8}' | '\u{c}' => 2,
            c if u32::from(c) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holder::{Holder, MAX_HOLDER_BYTES};
    use crate::issue::IssueId;
    use crate::lease::{Event, Lease, Takeover, MAX_LEASE_JSON_BYTES};
    use chrono::TimeZone;

    #[test]
    fn stored_len_is_what_serde_json_writes() {
        for text in [
            "",
            "plain",
            "é🦀",
            "a\"b\\c",
            "\n\t\r\u{8}\u{c}",
            "\u{1}\u{1f}\u{7f}",
        ] {
            let written = serde_json::to_string(text).expect("a string serializes");
            assert_eq!(stored_len(text), written.len() - 2, "{text:?}");
        }
    }

    #[test]
    fn a_remark_at_its_bound_is_kept_and_one_byte_more_refused() {
        for kind in [RemarkKind::Note, RemarkKind::Task, RemarkKind::Reason] {
            let max = kind.max_bytes();
            assert!(Remark::new(kind, "x".repeat(max)).is_ok());
            match Remark::new(kind, "x".repeat(max + 1)) {
                Err(Error::TooLong { field, bytes, .. }) => {
                    assert_eq!((field, bytes), (kind.as_str(), max + 1));
                }
                other => panic!("{kind:?}: {other:?}"),
            }
            // Escaping counts: a sixth of the bound in control characters is over it.
            assert!(Remark::new(kind, "\u{1}".repeat(max / 6 + 1)).is_err());
        }
    }

    #[test]
    fn a_record_with_every_field_at_its_bound_is_within_the_limit() {
        let at = chrono::Utc
            .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
            .unwrap();
        // The longest id; a holder of `"` only doubles in JSON.
        let issue = IssueId::new(&"9".repeat(200)).expect("an id of 200 bytes");
        let holder = Holder::new("\"".repeat(MAX_HOLDER_BYTES)).expect("a holder");
        let worst = |kind: RemarkKind| "\u{1}".repeat(kind.max_bytes() / 6);
        let mut lease = Lease::tenure(&issue, &holder, u64::MAX, at, Some(at));
        lease.event = Event::Reacquire;
        lease.previous_holder = Some(holder.as_str().into());
        lease.by = Some(holder.as_str().into());
        lease.note = Some(worst(RemarkKind::Note).into());
        lease.task = Some(worst(RemarkKind::Task).into());
        lease.reason = Some(worst(RemarkKind::Reason).into());
        lease.takeover = Some(Takeover::ProcessGone);
        lease.session = Some(format!("sha256:{}", "f".repeat(64)).into());
        lease.process = Some(Box::new(crate::liveness::HolderProcess {
            pid: u32::MAX,
            boot_id: "f".repeat(36),
            pid_ns: Some(u64::MAX),
            start_ticks: u64::MAX,
        }));
        let len = lease.to_json().len() as u64;
        assert!(len <= MAX_LEASE_JSON_BYTES, "{len} bytes");
    }
}
