//! The probe namespace, `refs/lease-probe/*`, and the hook's report of itself to a push there.
//!
//! `git lease doctor` checks a remote as the engine it will be by pushing to scratch refs of
//! its own, `refs/lease-probe/<random>` ([`PROBE_PREFIX`]): it creates one, moves it, and
//! deletes it. The hook lets every update in the namespace pass (it holds no ledger and no
//! work), and answers a push that touches it with one line about itself on stderr, which git
//! relays to the pusher as `remote: git-lease: probe: …`: the hook's version, its clock, its
//! policy, and who it takes the pusher to be ([`ProbeReport`]).
//!
//! The line is [`PROBE_MARK`] followed by space-separated `key=value` fields. A value is
//! percent-encoded: every byte outside `A-Z a-z 0-9 - . _ ~ / * @ + :` is written `%XX`, so no
//! value holds a space, a comma, an `=` or a control character. A list is its encoded items
//! joined by `,` (empty: no item). The fields, in this order:
//!
//! | key | value |
//! |---|---|
//! | `format` | `1`, the format of this line |
//! | `version` | the hook's git-lease version |
//! | `now` | the hook's clock (RFC 3339) |
//! | `max_skew` | `lease.maxClockSkew`, in whole seconds |
//! | `identity` | `none`, `push-cert` or `env` |
//! | `pusher_env` | the variable the pusher is read from (only with `env`) |
//! | `pusher` | the authenticated pusher (only when the identity is established) |
//! | `unauthenticated` | why it is not (only when an identity is configured but not established) |
//! | `fences` | `lease.fence`, a list |
//! | `require_token` | `true` or `false` |
//! | `admins` | `lease.admins`, a list |
//! | `refs` | the served repository's ref storage: `files` or `reftable` |
//! | `archive` | `judged`: the hook refuses a fold that forgets an entry and a ledger started over after its fold, so a clone may claim from the newest fold alone ([`ARCHIVE_JUDGED`]) |
//!
//! A push that carries the push option [`REPORT_ONLY_OPTION`] gets the line, and its scratch
//! refs are refused: the first write through a server asks that way, and a hook that says
//! `archive=judged` spares it the race of doctor's probe (a hook of git-lease runs in git's
//! own receive-pack, which refuses a stale expected old value).
//!
//! A reader ignores the fields it does not know, and fields are only ever added; a field that
//! changed meaning would take a new `format`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::hook::{Identity, Policy};
use crate::step::Pusher;

/// The namespace of the scratch refs `git lease doctor` pushes, which the hook lets pass.
pub const PROBE_PREFIX: &str = "refs/lease-probe/";

/// The push option that asks the hook for its report alone: it answers a push to a scratch
/// ref that carries it, then refuses the ref, so that nothing is written.
pub const REPORT_ONLY_OPTION: &str = "lease-probe=report";

/// How the hook's report line begins.
pub const PROBE_MARK: &str = "git-lease: probe:";

/// The `archive` field of a hook that judges every fold and every claim against the archive:
/// what lets a clone trust the remote's newest fold by default (docs/SECURITY.md).
pub const ARCHIVE_JUDGED: &str = "judged";

/// The format of the report line this build writes.
pub const PROBE_FORMAT: u32 = 1;

/// What the hook says of itself to a probe push; see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeReport {
    /// The hook's git-lease version.
    pub version: String,
    /// The hook's clock when it judged the push.
    #[serde(with = "crate::time::rfc3339")]
    pub now: DateTime<Utc>,
    /// `lease.maxClockSkew` of the server, in seconds.
    pub max_skew_secs: i64,
    /// `none`, `push-cert` or `env`.
    pub identity: String,
    /// The variable the pusher is read from, with `env`.
    pub pusher_env: Option<String>,
    /// The authenticated pusher, when the identity is established.
    pub pusher: Option<String>,
    /// Why the identity is not established, when one is configured.
    pub unauthenticated: Option<String>,
    /// `lease.fence`.
    pub fences: Vec<String>,
    /// `lease.requireToken`.
    pub require_token: bool,
    /// `lease.admins`.
    pub admins: Vec<String>,
    /// The served repository's ref storage (`files`, `reftable`), when said.
    pub refs: Option<String>,
    /// [`ARCHIVE_JUDGED`] when the hook judges every fold, when said.
    pub archive: Option<String>,
}

impl ProbeReport {
    /// Returns the report of this build's hook, under `policy`, for a push by `pusher`, at
    /// `now`, in a repository whose refs are stored as `refs`.
    pub fn of(policy: &Policy, pusher: &Pusher, refs: &str, now: DateTime<Utc>) -> ProbeReport {
        let (identity, pusher_env) = match &policy.identity {
            Identity::None => ("none", None),
            Identity::PushCert => ("push-cert", None),
            Identity::Env(var) => ("env", Some(var.clone())),
        };
        let (pusher, unauthenticated) = match pusher {
            Pusher::Unknown => (None, None),
            Pusher::Known(who) => (Some(who.clone()), None),
            Pusher::Unauthenticated(why) => (None, Some(why.clone())),
        };
        ProbeReport {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            now,
            max_skew_secs: policy.max_skew.num_seconds(),
            identity: identity.to_owned(),
            pusher_env,
            pusher,
            unauthenticated,
            fences: policy.fences.clone(),
            require_token: policy.require_token,
            admins: policy.admins.clone(),
            refs: Some(refs.to_owned()),
            archive: Some(ARCHIVE_JUDGED.to_owned()),
        }
    }

    /// Whether the hook said it judges every fold of the archive ([`ARCHIVE_JUDGED`]).
    pub fn judges_archive(&self) -> bool {
        self.archive.as_deref() == Some(ARCHIVE_JUDGED)
    }

    /// Returns the report as its one line (see the module documentation).
    pub fn line(&self) -> String {
        let mut fields: Vec<(&str, String)> = vec![
            ("format", PROBE_FORMAT.to_string()),
            ("version", encode(&self.version)),
            ("now", encode(&crate::time::format_instant(self.now))),
            ("max_skew", self.max_skew_secs.to_string()),
            ("identity", encode(&self.identity)),
        ];
        let optional = [
            ("pusher_env", &self.pusher_env),
            ("pusher", &self.pusher),
            ("unauthenticated", &self.unauthenticated),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                fields.push((key, encode(value)));
            }
        }
        fields.push(("fences", encode_list(&self.fences)));
        fields.push(("require_token", self.require_token.to_string()));
        fields.push(("admins", encode_list(&self.admins)));
        if let Some(refs) = &self.refs {
            fields.push(("refs", encode(refs)));
        }
        if let Some(archive) = &self.archive {
            fields.push(("archive", encode(archive)));
        }
        let mut line = PROBE_MARK.to_owned();
        for (key, value) in fields {
            line.push_str(&format!(" {key}={value}"));
        }
        line
    }

    /// Reads a report line (surrounding whitespace allowed); `None` when it is not one, or
    /// lacks `version`, `now` or `identity`.
    pub fn parse(line: &str) -> Option<ProbeReport> {
        let rest = line.trim().strip_prefix(PROBE_MARK)?;
        let mut report = ProbeReport {
            version: String::new(),
            now: DateTime::<Utc>::UNIX_EPOCH,
            max_skew_secs: crate::config::DEFAULT_MAX_CLOCK_SKEW.as_secs() as i64,
            identity: String::new(),
            pusher_env: None,
            pusher: None,
            unauthenticated: None,
            fences: Vec::new(),
            require_token: false,
            admins: Vec::new(),
            refs: None,
            archive: None,
        };
        let mut now = None;
        for field in rest.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            match key {
                "version" => report.version = decode(value)?,
                "now" => now = crate::time::parse_instant(&decode(value)?).ok(),
                "max_skew" => report.max_skew_secs = value.parse().ok()?,
                "identity" => report.identity = decode(value)?,
                "pusher_env" => report.pusher_env = Some(decode(value)?),
                "pusher" => report.pusher = Some(decode(value)?),
                "unauthenticated" => report.unauthenticated = Some(decode(value)?),
                "fences" => report.fences = decode_list(value)?,
                "require_token" => report.require_token = value == "true",
                "admins" => report.admins = decode_list(value)?,
                "refs" => report.refs = Some(decode(value)?),
                "archive" => report.archive = Some(decode(value)?),
                _ => {}
            }
        }
        report.now = now?;
        (!report.version.is_empty() && !report.identity.is_empty()).then_some(report)
    }

    /// Returns the first report among the `remote:` lines of a push's `stderr`, as git relays
    /// what the server's hooks print.
    pub fn find(stderr: &str) -> Option<ProbeReport> {
        stderr
            .lines()
            .filter_map(|l| l.strip_prefix("remote:"))
            .find_map(ProbeReport::parse)
    }
}

/// The bytes a value keeps as they are; every other is written `%XX`.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/*@+:".contains(&b)
}

fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn encode_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| encode(i))
        .collect::<Vec<_>>()
        .join(",")
}

fn decode(value: &str) -> Option<String> {
    crate::text::percent_decode(value)
}

fn decode_list(value: &str) -> Option<Vec<String>> {
    if value.is_empty() {
        return Some(Vec::new());
    }
    value.split(',').map(decode).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sample() -> ProbeReport {
        ProbeReport {
            version: "0.1.0".into(),
            now: Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap(),
            max_skew_secs: 300,
            identity: "env".into(),
            pusher_env: Some("REMOTE_USER".into()),
            pusher: Some("Zoë, the admin=1 %".into()),
            unauthenticated: None,
            fences: vec!["refs/heads/issue/*".into(), "refs/heads/*-wip".into()],
            require_token: true,
            admins: vec!["Ops Team".into(), "zoë".into()],
            refs: Some("reftable".into()),
            archive: Some(ARCHIVE_JUDGED.into()),
        }
    }

    #[test]
    fn a_report_reads_back_from_its_line() {
        let report = sample();
        let line = report.line();
        assert!(
            line.starts_with("git-lease: probe: format=1 version=0.1.0 "),
            "{line}"
        );
        assert!(line.contains(" now=2026-11-30T12:00:00Z "), "{line}");
        assert!(
            line.contains(" fences=refs/heads/issue/*,refs/heads/*-wip "),
            "{line}"
        );
        assert!(line.contains(" admins=Ops%20Team,zo%C3%AB "), "{line}");
        assert!(!line.contains('\n') && line.split(' ').all(|f| !f.is_empty()));
        assert_eq!(ProbeReport::parse(&line), Some(report));
    }

    #[test]
    fn a_report_is_found_among_what_git_relays() {
        let mut report = sample();
        report.pusher = None;
        report.unauthenticated = Some("the server did not set REMOTE_USER".into());
        report.admins.clear();
        // git pads each relayed line with spaces when its stderr is no terminal.
        let stderr = format!(
            "remote: some other hook said hello        \nremote: {}        \n\
             To git://127.0.0.1:9/leases.git\n *\tx:refs/lease-probe/1\t[new reference]\n",
            report.line()
        );
        assert_eq!(ProbeReport::find(&stderr), Some(report));
        assert_eq!(ProbeReport::find("remote: hello\n"), None);
        // Only what the server said: a line of the client's own is no report.
        assert_eq!(ProbeReport::find(&sample().line()), None);
    }

    #[test]
    fn unknown_fields_are_ignored_and_missing_ones_refuse_the_line() {
        let line = "git-lease: probe: format=2 version=9.0.0 now=2027-01-01T00:00:00Z \
                    identity=none colour=blue fences= require_token=false admins=";
        let report = ProbeReport::parse(line).expect("a report");
        assert_eq!(report.version, "9.0.0");
        assert_eq!(report.identity, "none");
        assert!(report.fences.is_empty() && report.admins.is_empty());
        assert_eq!((report.pusher, report.refs), (None, None));
        for broken in [
            "git-lease: probe: version=0.1.0 identity=none",
            "git-lease: probe: now=2027-01-01T00:00:00Z identity=none",
            "git-lease: probe: version=0.1.0 now=soon identity=none",
            "git-lease: probe: version=0.1.0 now=2027-01-01T00:00:00Z identity=none pusher=%ZZ",
            "git-lease: refused issue 7 at 0123: identity: x",
        ] {
            assert_eq!(ProbeReport::parse(broken), None, "{broken}");
        }
    }
}
