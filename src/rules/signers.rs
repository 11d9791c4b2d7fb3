//! Who signed a ledger step, and whether that signer may have made it.
//!
//! With `lease.requireSignatures`, every step a reader takes must be an SSH-signed commit
//! (git's `gpg.format=ssh`, namespace `git`) by a key of the allowed signers list whose
//! principals name the one the step needs: its holder for the holder's own steps (renew,
//! re-acquire, release, complete, abandon of a live lease), its new holder for a new tenure,
//! the recorded actor for freeing a lease that is no longer live, an administrator for a
//! revoke. The list is ssh-keygen's "ALLOWED SIGNERS" format ([`AllowedSigners::parse`]), with
//! the administrators named in a comment directive git and ssh-keygen ignore
//! (`# lease-admins: alice, ops`). A lease's holder name is the principal.
//!
//! [`judge`] is called for each step by the one walker of ledgers
//! ([`crate::verify::verify_segment`]), so every reader and the server hook apply it alike.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use ssh_key::public::KeyData;
use ssh_key::{HashAlg, PublicKey, SshSig};

use crate::lease::{Event, Lease, Takeover};
use crate::liveness::Current;
use crate::rules::is_live;
use crate::step::{Rule, Violation};

/// The namespace git signs commits in (`ssh-keygen -Y sign -n git`).
pub const NAMESPACE: &str = "git";

/// The file of the default branch that holds the list when `lease.allowedSigners` is unset.
pub const DEFAULT_PATH: &str = ".git-lease/allowed_signers";

/// The comment directive that names the administrators, who may revoke.
pub const ADMINS_DIRECTIVE: &str = "lease-admins:";

/// One line of an allowed signers list.
#[derive(Clone, Debug)]
struct Signer {
    /// The principal patterns (`*`, `?`, `!` negation), comma-separated in the file.
    principals: Vec<String>,
    /// `cert-authority`: the key signs certificates, never commits itself.
    cert_authority: bool,
    /// `namespaces="..."`: the namespace patterns the key may sign in (any, when absent).
    namespaces: Option<Vec<String>>,
    /// `valid-after`, `valid-before`: when the key may sign (inclusive).
    valid_after: Option<DateTime<Utc>>,
    valid_before: Option<DateTime<Utc>>,
    /// The key.
    key: KeyData,
    /// Where it was read (1-based line number).
    line: usize,
}

/// A parsed allowed signers list, with its administrators and the version that names it.
#[derive(Clone, Debug)]
pub struct AllowedSigners {
    signers: Vec<Signer>,
    admins: Vec<String>,
    version: String,
    source: String,
}

/// A malformed line of an allowed signers list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl AllowedSigners {
    /// Parses `text` as ssh-keygen's allowed signers format; `source` names where it came from
    /// (for messages) and `version` identifies its content (a blob id).
    pub fn parse(source: &str, version: &str, text: &[u8]) -> Result<AllowedSigners, ParseError> {
        let text = std::str::from_utf8(text).map_err(|e| ParseError {
            line: text[..e.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1,
            reason: "the line is not UTF-8".into(),
        })?;
        let mut signers = Vec::new();
        let mut admins = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim_start_matches([' ', '\t']).trim_end();
            if let Some(comment) = trimmed.strip_prefix('#') {
                if let Some(names) = comment.trim_start().strip_prefix(ADMINS_DIRECTIVE) {
                    admins.extend(
                        names
                            .split(',')
                            .map(str::trim)
                            .filter(|n| !n.is_empty())
                            .map(str::to_owned),
                    );
                }
                continue;
            }
            if trimmed.is_empty() {
                continue;
            }
            let signer = parse_line(trimmed).map_err(|reason| ParseError { line, reason })?;
            signers.push(Signer { line, ..signer });
        }
        Ok(AllowedSigners {
            signers,
            admins,
            version: version.to_owned(),
            source: source.to_owned(),
        })
    }

    /// Returns what identifies this list's content: a change of it changes the version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Returns where the list was read from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Returns the administrators (`# lease-admins:`).
    pub fn admins(&self) -> &[String] {
        &self.admins
    }

    /// Returns the lines whose key is `key` and that allow it to sign a commit at `at`.
    fn allowing(&self, key: &KeyData, at: DateTime<Utc>) -> Vec<&Signer> {
        self.signers
            .iter()
            .filter(|s| !s.cert_authority && &s.key == key)
            .filter(|s| {
                s.namespaces
                    .as_ref()
                    .is_none_or(|n| matches_list(NAMESPACE, n))
            })
            .filter(|s| s.valid_after.is_none_or(|t| at >= t))
            .filter(|s| s.valid_before.is_none_or(|t| at <= t))
            .collect()
    }
}

/// The signed part of a commit: the commit object without its signature header (git's rule),
/// the armored signature, and the committer's time (what git checks a key's validity at, which
/// [`judge`] holds to the event's own time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signed {
    /// The commit object minus its `gpgsig` (and `gpgsig-sha256`) header.
    pub payload: Vec<u8>,
    /// The signature, continuation lines joined (`None`: unsigned).
    pub signature: Option<Vec<u8>>,
    /// The committer's time, in unix seconds.
    pub committed_at: Option<i64>,
}

/// Returns the header that holds a commit's signature in a repository of `hash` objects, as
/// git names it: `gpgsig` for SHA-1, `gpgsig-sha256` for SHA-256.
pub fn signature_header(hash: gix_hash::Kind) -> &'static [u8] {
    match hash {
        gix_hash::Kind::Sha256 => b"gpgsig-sha256",
        _ => b"gpgsig",
    }
}

/// Splits a commit object's bytes into what was signed (the commit without either signature
/// header, as git signs it) and the signature held in `header` ([`signature_header`]).
pub fn split_commit(data: &[u8], header: &[u8]) -> Signed {
    let mut out = Signed::default();
    let mut rest = data;
    let mut in_signature = false;
    let mut skip_other = false;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let (line, after) = rest.split_at(end);
        rest = after;
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if body.is_empty() {
            // The end of the headers: the message is signed as it is.
            out.payload.extend_from_slice(line);
            out.payload.extend_from_slice(rest);
            break;
        }
        if in_signature {
            if let Some(cont) = body.strip_prefix(b" ") {
                if skip_other {
                    continue;
                }
                if let Some(sig) = out.signature.as_mut() {
                    sig.push(b'\n');
                    sig.extend_from_slice(cont);
                }
                continue;
            }
            in_signature = false;
            skip_other = false;
        }
        let name = body.split(|b| *b == b' ').next().unwrap_or_default();
        if name == b"gpgsig" || name == b"gpgsig-sha256" {
            in_signature = true;
            // Another hash's signature (or a second one) is stripped from the payload, and
            // is not this commit's signature.
            skip_other = name != header || out.signature.is_some();
            if !skip_other {
                out.signature = Some(body.get(name.len() + 1..).unwrap_or_default().to_vec());
            }
            continue;
        }
        if let Some(who) = body.strip_prefix(b"committer ") {
            out.committed_at = committer_time(who);
        }
        out.payload.extend_from_slice(line);
    }
    out
}

/// Reads the unix time of a `committer` header's value (`Name <mail> 1700000000 +0000`).
fn committer_time(value: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let after_mail = &text[text.rfind('>')? + 1..];
    after_mail.split_whitespace().next()?.parse().ok()
}

/// What a step needs of its signer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needed {
    /// The principal whose key must sign (`None`: the step names nobody who could).
    pub principal: Option<String>,
    /// Whether the principal must also be an administrator (a revoke).
    pub admin: bool,
    /// The role, for messages.
    pub role: &'static str,
}

/// Returns who must sign `next` recorded on top of `prev`, by the rules of the server hook:
/// the holder's own steps by that holder, a new tenure by its new holder, a lease that is no
/// longer live (at the step's own time) freed by whoever the step names as acting, a revoke by
/// an administrator named in `by`.
pub fn needed(prev: Option<&Lease>, next: &Lease) -> Needed {
    let prev_holder = prev.and_then(|p| p.holder.clone());
    let need = |principal: Option<String>, role| Needed {
        principal,
        admin: false,
        role,
    };
    match next.event {
        Event::Acquire => need(next.holder.clone(), "the new holder"),
        Event::Reacquire | Event::Renew => need(prev_holder.or(next.holder.clone()), "the holder"),
        Event::Release | Event::Complete | Event::Abandon => {
            let live = prev.is_some_and(|p| is_live(Current::recorded(p), next.at));
            let gone = prev.is_some_and(|p| p.process.is_some())
                && next.takeover == Some(Takeover::ProcessGone);
            if live && !gone {
                need(prev_holder, "the holder")
            } else {
                need(next.actor().map(str::to_owned), "the one freeing it")
            }
        }
        Event::Revoke => Needed {
            principal: next.by.as_deref().map(str::to_owned),
            admin: true,
            role: "an administrator",
        },
    }
}

/// Judges the signature of `next` (recorded on top of `prev`) against `list`: empty when a
/// key of the list allowed for the principal the step needs, valid at the event's own time
/// (`at`), made a good signature over the commit in the `git` namespace, and the commit's
/// committer time (the time git checks a key's validity at) is within `max_skew` of `at`.
pub fn judge(
    prev: Option<&Lease>,
    next: &Lease,
    signed: &Signed,
    list: &AllowedSigners,
    max_skew: chrono::Duration,
) -> Vec<Violation> {
    let needed = needed(prev, next);
    match signer_lines(next, &needed, signed, list, max_skew)
        .and_then(|(lines, fingerprint)| fits(next, &needed, &lines, &fingerprint, list))
    {
        Ok(()) => Vec::new(),
        Err(detail) => vec![(Rule::Signature, detail)],
    }
}

/// Returns the lines of `list` that allow the key that made `signed`'s good signature to sign
/// at `next`'s own time, and its fingerprint; or why there are none.
fn signer_lines<'l>(
    next: &Lease,
    needed: &Needed,
    signed: &Signed,
    list: &'l AllowedSigners,
    max_skew: chrono::Duration,
) -> Result<(Vec<&'l Signer>, String), String> {
    let who = needed.principal.as_deref().unwrap_or("nobody");
    let Some(armored) = signed.signature.as_deref() else {
        return Err(format!(
            "unsigned: a {} needs a signature by {} ({who}) with a key of {}",
            next.event,
            needed.role,
            list.source()
        ));
    };
    let sig = SshSig::from_pem(armored)
        .map_err(|e| format!("the commit's signature is not a readable SSH signature ({e})"))?;
    if sig.namespace() != NAMESPACE {
        return Err(format!(
            "signed in the namespace {:?}, not {NAMESPACE:?}",
            sig.namespace()
        ));
    }
    let key = sig.public_key();
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    if let Err(e) = PublicKey::from(key.clone()).verify(NAMESPACE, &signed.payload, &sig) {
        return Err(format!(
            "bad signature by {fingerprint}: it does not sign this commit ({e})"
        ));
    }
    // A key is valid or not at the event's own time: the committer time is the signer's to
    // choose, so it must agree with the event's, or git would judge the key at another time.
    let committed = signed
        .committed_at
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .ok_or("the signed commit has no readable committer time")?;
    if (committed - next.at).abs() > max_skew {
        return Err(format!(
            "the commit is dated {}, more than {} from its event's time {} (lease.maxClockSkew)",
            crate::time::format_instant(committed),
            crate::time::short_duration(max_skew),
            crate::time::format_instant(next.at)
        ));
    }
    let lines = list.allowing(key, next.at);
    if lines.is_empty() {
        return Err(format!(
            "signed by {fingerprint}, a key {} does not allow to sign commits at the event's time {}",
            list.source(),
            crate::time::format_instant(next.at)
        ));
    }
    Ok((lines, fingerprint))
}

/// Returns `Ok` if one of `lines` (a signer's) names the principal `next` needs, and that
/// principal is an administrator where a revoke needs one; or why not.
fn fits(
    next: &Lease,
    needed: &Needed,
    lines: &[&Signer],
    fingerprint: &str,
    list: &AllowedSigners,
) -> Result<(), String> {
    let Some(principal) = needed.principal.as_deref() else {
        return Err(format!(
            "a {} names no one who could sign it as {}",
            next.event, needed.role
        ));
    };
    if !lines.iter().any(|s| matches_list(principal, &s.principals)) {
        let allowed: Vec<&str> = lines
            .iter()
            .flat_map(|s| s.principals.iter().map(String::as_str))
            .collect();
        return Err(format!(
            "signed by a key not allowed for {principal} ({} needed; {fingerprint} is allowed for {}, line {})",
            needed.role,
            allowed.join(","),
            lines[0].line
        ));
    }
    if needed.admin && !list.admins().iter().any(|a| a == principal) {
        return Err(format!(
            "{principal} revoked, but is not an administrator (# {ADMINS_DIRECTIVE} in {})",
            list.source()
        ));
    }
    Ok(())
}

/// Returns true if `text` matches the comma-separated pattern list as ssh does: some pattern
/// matches and no negated one (`!pattern`) does.
fn matches_list(text: &str, patterns: &[String]) -> bool {
    let mut positive = false;
    for pattern in patterns {
        match pattern.strip_prefix('!') {
            Some(negated) if matches(text.as_bytes(), negated.as_bytes()) => return false,
            Some(_) => {}
            None => positive |= matches(text.as_bytes(), pattern.as_bytes()),
        }
    }
    positive
}

/// Matches `text` against a pattern of `*` (any run) and `?` (any one character).
fn matches(text: &[u8], pattern: &[u8]) -> bool {
    // Iterative wildcard matching with one backtrack point.
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            t += 1;
            p += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|b| *b == b'*')
}

/// Splits off the first whitespace-delimited token of `s`, honouring double quotes.
fn token(s: &str) -> (String, &str) {
    let mut out = String::new();
    let mut quoted = false;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ' ' | '\t' if !quoted => {
                end = i;
                break;
            }
            _ => out.push(c),
        }
    }
    (out, s[end..].trim_start_matches([' ', '\t']))
}

/// Returns true if `word` is a key type ssh knows (what follows the options).
fn is_key_type(word: &str) -> bool {
    word.starts_with("ssh-")
        || word.starts_with("ecdsa-sha2-")
        || word.starts_with("sk-ssh-")
        || word.starts_with("sk-ecdsa-")
}

fn parse_line(line: &str) -> Result<Signer, String> {
    let (principals, rest) = token(line);
    if principals.is_empty() || rest.is_empty() {
        return Err("expected principals, optional options, a key type and a key".into());
    }
    let mut signer = Signer {
        principals: principals.split(',').map(str::to_owned).collect(),
        cert_authority: false,
        namespaces: None,
        valid_after: None,
        valid_before: None,
        key: KeyData::Ed25519(ssh_key::public::Ed25519PublicKey([0; 32])),
        line: 0,
    };
    let first = rest.split([' ', '\t']).next().unwrap_or_default();
    let key_text = if is_key_type(first) {
        rest
    } else {
        let (options, key_text) = options_token(rest);
        for option in split_options(options) {
            apply_option(&mut signer, &option)?;
        }
        key_text
    };
    let key = PublicKey::from_openssh(key_text).map_err(|e| {
        format!(
            "cannot read the key {:?}: {e}",
            key_text.split(' ').next().unwrap_or_default()
        )
    })?;
    signer.key = key.key_data().clone();
    Ok(signer)
}

/// Splits off the options (up to the first whitespace outside quotes).
fn options_token(s: &str) -> (&str, &str) {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ' ' | '\t' if !quoted => return (&s[..i], s[i..].trim_start_matches([' ', '\t'])),
            _ => {}
        }
    }
    (s, "")
}

/// Splits options at commas outside quotes.
fn split_options(s: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                if let Some(last) = out.last_mut() {
                    last.push(c);
                }
            }
            ',' if !quoted => out.push(String::new()),
            _ => {
                if let Some(last) = out.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    out
}

fn apply_option(signer: &mut Signer, option: &str) -> Result<(), String> {
    let (name, value) = match option.split_once('=') {
        Some((name, value)) => (name, Some(unquote(value)?)),
        None => (option, None),
    };
    match (name.to_ascii_lowercase().as_str(), value) {
        ("cert-authority", None) => signer.cert_authority = true,
        ("namespaces", Some(v)) => {
            signer.namespaces = Some(v.split(',').map(str::to_owned).collect())
        }
        ("valid-after", Some(v)) => signer.valid_after = Some(valid_time(&v)?),
        ("valid-before", Some(v)) => signer.valid_before = Some(valid_time(&v)?),
        _ => return Err(format!("unknown or malformed option {option:?}")),
    }
    Ok(())
}

fn unquote(value: &str) -> Result<String, String> {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) if !inner.contains('"') => Ok(inner.to_owned()),
        _ if !value.contains('"') => Ok(value.to_owned()),
        _ => Err(format!("badly quoted option value {value}")),
    }
}

/// Reads a `valid-after`/`valid-before` time: `YYYYMMDD[HHMM[SS]]Z`, in UTC. A time without
/// `Z` (local time to ssh-keygen) is refused, since the same list must mean the same instant
/// on every machine.
fn valid_time(value: &str) -> Result<DateTime<Utc>, String> {
    let bad = || format!("the time {value:?} is not YYYYMMDD[HHMM[SS]]Z (UTC, ending in Z)");
    let digits = value.strip_suffix(['Z', 'z']).ok_or_else(bad)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let naive = match digits.len() {
        8 => NaiveDate::parse_from_str(digits, "%Y%m%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0)),
        12 => NaiveDateTime::parse_from_str(digits, "%Y%m%d%H%M").ok(),
        14 => NaiveDateTime::parse_from_str(digits, "%Y%m%d%H%M%S").ok(),
        _ => None,
    };
    naive.map(|n| n.and_utc()).ok_or_else(bad)
}

#[cfg(test)]
#[path = "signers_tests.rs"]
mod tests;
