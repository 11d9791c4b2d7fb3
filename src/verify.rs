//! The transition rules of recorded ledgers: what a legitimate chain looks like.
//!
//! The rules in [`crate::rules`] *decide* the next state; the rules here *check* a recorded
//! step, whoever wrote it. `git lease verify`, `git lease sync` and the server hook all call
//! [`check_step`] and [`verify_segment`], so a mirror, an audit and a server agree on what is
//! legitimate.

use gix::ObjectId;
use serde::Serialize;

use crate::issue::IssueId;
use crate::lease::{self, DecodeError, Event, Lease, Takeover};
use crate::rules::is_live;
use crate::store::Store;

/// A rule a ledger commit can break. The names are stable: they appear in `--json` output
/// and in hook refusals.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A ledger commit has at most one parent (none for the first).
    SingleParent,
    /// A ledger commit's tree holds exactly one regular file, `lease.json`.
    Tree,
    /// `lease.json` is valid JSON of the documented shape.
    Json,
    /// `lease.json` is of a version this build knows.
    Version,
    /// `lease.json`'s issue is the ref's issue.
    Issue,
    /// A ledger starts with an acquire of token 1.
    FirstToken,
    /// The token grows by exactly one per new tenure and never otherwise.
    TokenStep,
    /// The holder changes only through a free or expired state.
    HolderChange,
    /// Events are in time order and each state's times are consistent.
    TimeOrder,
    /// The event agrees with the state it records (a freed lease has no holder, a renew keeps
    /// the tenure, a release frees something that was held).
    Event,
    /// The ledger was rewound or rewritten: the new tip does not descend from the old one.
    FastForward,
}

impl Rule {
    /// Returns the rule's stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::SingleParent => "single-parent",
            Rule::Tree => "tree",
            Rule::Json => "json",
            Rule::Version => "version",
            Rule::Issue => "issue",
            Rule::FirstToken => "first-token",
            Rule::TokenStep => "token-step",
            Rule::HolderChange => "holder-change",
            Rule::TimeOrder => "time-order",
            Rule::Event => "event",
            Rule::FastForward => "fast-forward",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule, in one commit of one ledger.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The ledger's issue.
    pub issue: String,
    /// The commit that breaks the rule.
    pub commit: String,
    /// The rule.
    pub rule: Rule,
    /// What exactly is wrong.
    pub detail: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Shown to people: the issue and the detail may quote what a ledger says.
        write!(
            f,
            "{} {}: {}: {}",
            crate::text::printable(&self.issue),
            self.commit,
            self.rule,
            crate::text::printable(&self.detail)
        )
    }
}

/// A rule broken by one step, before it is tied to a commit.
pub type Violation = (Rule, String);

/// Checks one recorded step: `next` recorded on top of `prev` (`None` for a ledger's first
/// commit).
///
/// Returns every rule the step breaks; empty when it is legitimate.
pub fn check_step(prev: Option<&Lease>, next: &Lease) -> Vec<Violation> {
    let mut found = Vec::new();
    check_shape(next, &mut found);
    let Some(prev) = prev else {
        if next.event != Event::Acquire || next.token != 1 {
            found.push((
                Rule::FirstToken,
                format!(
                    "a ledger must start with an acquire of token 1, not {} of token {}",
                    next.event, next.token
                ),
            ));
        }
        return found;
    };
    if next.at < prev.at {
        found.push((
            Rule::TimeOrder,
            format!(
                "event at {} is earlier than the previous event at {}",
                crate::time::format_instant(next.at),
                crate::time::format_instant(prev.at)
            ),
        ));
    }
    let prev_live = is_live(prev, next.at);
    // Only a new tenure moves the token; every other event keeps it.
    if next.event != Event::Acquire && next.token != prev.token {
        found.push((
            Rule::TokenStep,
            format!(
                "a {} keeps token {}, but records {}",
                next.event, prev.token, next.token
            ),
        ));
    }
    match next.event {
        Event::Acquire => {
            // A takeover because the holder's process was gone (local liveness) is legitimate
            // while the TTL still runs, if the previous tenure recorded its process.
            let prev_live = prev_live
                && !(next.takeover == Some(Takeover::ProcessGone) && prev.process.is_some());
            if prev_live && prev.holder != next.holder {
                found.push((
                    Rule::HolderChange,
                    format!(
                        "{} took the lease while {} still held it (until {})",
                        next.holder.as_deref().unwrap_or("nobody"),
                        prev.holder.as_deref().unwrap_or("nobody"),
                        prev.expires_at
                            .map(crate::time::format_instant)
                            .unwrap_or_else(|| "no expiry".into())
                    ),
                ));
            } else if prev_live {
                found.push((
                    Rule::TokenStep,
                    format!(
                        "a new tenure began while the same holder's tenure (token {}) was live; a re-acquire keeps the token",
                        prev.token
                    ),
                ));
            }
            if next.token != prev.token + 1 {
                found.push((
                    Rule::TokenStep,
                    format!(
                        "a new tenure must take token {}, not {}",
                        prev.token + 1,
                        next.token
                    ),
                ));
            }
        }
        Event::Reacquire | Event::Renew => {
            if prev.holder != next.holder {
                found.push((
                    Rule::HolderChange,
                    format!(
                        "a {} cannot change the holder from {} to {}",
                        next.event,
                        prev.holder.as_deref().unwrap_or("nobody"),
                        next.holder.as_deref().unwrap_or("nobody")
                    ),
                ));
            } else if !prev_live {
                found.push((
                    Rule::Event,
                    format!("a {} of a lease that was not live", next.event),
                ));
            } else if next.acquired_at != prev.acquired_at {
                found.push((
                    Rule::Event,
                    format!("a {} must keep the tenure's acquired_at", next.event),
                ));
            } else if prev.session.is_some() && next.session != prev.session {
                found.push((
                    Rule::Event,
                    format!("a {} must keep the tenure's session", next.event),
                ));
            }
        }
        Event::Release | Event::Complete | Event::Abandon | Event::Revoke => {
            match prev.holder.as_deref() {
                None => found.push((
                    Rule::Event,
                    format!("a {} of a lease that was already free", next.event),
                )),
                Some(h) => {
                    if next.previous_holder.as_deref() != Some(h) {
                        found.push((
                            Rule::Event,
                            format!(
                                "a {} must record the previous holder {h}, not {}",
                                next.event,
                                next.previous_holder.as_deref().unwrap_or("nothing")
                            ),
                        ));
                    }
                    let by_other = next.by.as_deref().is_some_and(|b| b != h);
                    let gone =
                        next.takeover == Some(Takeover::ProcessGone) && prev.process.is_some();
                    if prev_live && by_other && !gone && next.event != Event::Revoke {
                        found.push((
                            Rule::HolderChange,
                            format!(
                                "{} freed the lease while {h} still held it",
                                next.by.as_deref().unwrap_or("someone")
                            ),
                        ));
                    }
                }
            }
            if next.event == Event::Revoke && next.by.is_none() {
                found.push((Rule::Event, "a revoke must record who revoked".into()));
            }
        }
    }
    found
}

/// Checks what a single state must satisfy on its own.
fn check_shape(next: &Lease, found: &mut Vec<Violation>) {
    let holds = matches!(next.event, Event::Acquire | Event::Reacquire | Event::Renew);
    match (&next.holder, holds) {
        (None, true) => found.push((
            Rule::Event,
            format!("a {} must record a holder", next.event),
        )),
        (Some(h), false) => found.push((
            Rule::Event,
            format!("a {} frees the lease, but records holder {h}", next.event),
        )),
        _ => {}
    }
    if next.event.frees() && (next.acquired_at.is_some() || next.expires_at.is_some()) {
        found.push((
            Rule::Event,
            format!("a {} must clear acquired_at and expires_at", next.event),
        ));
    }
    if holds {
        match next.acquired_at {
            None => found.push((Rule::Event, "a held lease must record acquired_at".into())),
            Some(acquired) => {
                if acquired > next.at {
                    found.push((Rule::TimeOrder, "acquired_at is after the event".into()));
                }
                if next.event == Event::Acquire && acquired != next.at {
                    found.push((
                        Rule::TimeOrder,
                        "a new tenure's acquired_at must be the time of its acquire".into(),
                    ));
                }
            }
        }
        if next.expires_at.is_some_and(|e| e <= next.at) {
            found.push((
                Rule::TimeOrder,
                "expires_at must be after the event that set it".into(),
            ));
        }
    }
}

/// The result of verifying part of a ledger.
#[derive(Clone, Debug, Default)]
pub struct SegmentCheck {
    /// Every broken rule, oldest commit first.
    pub findings: Vec<Finding>,
    /// How many commits were checked.
    pub commits: usize,
    /// The state at the base (`None` for a check from the root).
    pub base: Option<Lease>,
    /// Every checked commit and the state it records, oldest first, so that a caller with
    /// rules of its own (the server hook) need not read them again.
    pub steps: Vec<(ObjectId, Lease)>,
}

/// Verifies the commits from `tip` back to (not including) `base`, each against its parent,
/// with the state at `base` as the starting point (`None`: verify from the root).
///
/// If `base` is given and is not an ancestor of `tip`, the single finding is
/// [`Rule::FastForward`].
pub fn verify_segment(
    store: &Store,
    issue: &str,
    tip: ObjectId,
    base: Option<ObjectId>,
) -> SegmentCheck {
    let finding = |commit: ObjectId, rule: Rule, detail: String| Finding {
        issue: issue.to_owned(),
        commit: commit.to_string(),
        rule,
        detail,
    };
    let mut result = SegmentCheck::default();
    if IssueId::new(issue).is_err() {
        result.findings.push(finding(
            tip,
            Rule::Issue,
            format!("{issue:?} is not a valid issue id"),
        ));
        return result;
    }
    // Walk back to the base (or the root), newest first.
    let mut walked: Vec<(ObjectId, Result<Lease, Violation>)> = Vec::new();
    let mut next = Some(tip);
    let mut reached_base = base.is_none();
    while let Some(commit) = next {
        if Some(commit) == base {
            reached_base = true;
            break;
        }
        let raw = match store.raw_entry(commit) {
            Ok(raw) => raw,
            Err(reason) => {
                result.findings.push(finding(commit, Rule::Tree, reason));
                return result;
            }
        };
        if raw.parents.len() > 1 {
            result.findings.push(finding(
                commit,
                Rule::SingleParent,
                format!("a ledger commit has {} parents", raw.parents.len()),
            ));
            return result;
        }
        let decoded = match raw.lease_json {
            Err(reason) => Err((Rule::Tree, reason)),
            Ok(bytes) => match lease::decode(&bytes) {
                Ok(lease) if lease.issue != issue => Err((
                    Rule::Issue,
                    format!("lease.json is for issue {:?}, not {issue:?}", lease.issue),
                )),
                Ok(lease) => Ok(lease),
                Err(e @ DecodeError::UnknownVersion(_)) => Err((Rule::Version, e.to_string())),
                Err(e) => Err((Rule::Json, e.to_string())),
            },
        };
        walked.push((commit, decoded));
        next = raw.parents.first().copied();
    }
    if !reached_base {
        let base = base.expect("reached_base is only false with a base");
        result.findings.push(finding(
            tip,
            Rule::FastForward,
            format!("{tip} does not descend from {base}: the ledger was rewound or rewritten"),
        ));
        return result;
    }
    result.base = match base {
        None => None,
        Some(b) => match store.entry(issue, b) {
            Ok(e) => Some(e.lease),
            Err(e) => {
                result.findings.push(finding(
                    b,
                    Rule::Json,
                    format!("the base is unreadable: {e}"),
                ));
                return result;
            }
        },
    };
    for (commit, decoded) in walked.into_iter().rev() {
        result.commits += 1;
        match decoded {
            Err((rule, detail)) => {
                result.findings.push(finding(commit, rule, detail));
                // Without a readable state the following step cannot be judged.
                return result;
            }
            Ok(lease) => {
                let prev = result.steps.last().map(|(_, l)| l).or(result.base.as_ref());
                for (rule, detail) in check_step(prev, &lease) {
                    result.findings.push(finding(commit, rule, detail));
                }
                result.steps.push((commit, lease));
            }
        }
    }
    result
}

/// Returns true if `ancestor` is `tip` or one of its first-parent ancestors.
pub fn descends_from(store: &Store, tip: ObjectId, ancestor: ObjectId) -> bool {
    let mut next = Some(tip);
    while let Some(commit) = next {
        if commit == ancestor {
            return true;
        }
        next = store
            .raw_entry(commit)
            .ok()
            .and_then(|raw| raw.parents.first().copied());
    }
    false
}

/// Returns the verdict for a whole set of ledgers, for the `verify` command.
#[derive(Serialize, Clone, Debug, Default)]
pub struct Audit {
    /// True iff no rule is broken.
    pub clean: bool,
    /// How many ledgers were checked.
    pub ledgers: usize,
    /// How many commits were checked.
    pub commits: usize,
    /// Every broken rule.
    pub findings: Vec<Finding>,
}

/// Verifies every ledger in `refs` (`(issue, tip)`), calling `progress(done, total)` as it
/// goes.
pub fn audit(
    store: &Store,
    refs: &[(String, ObjectId)],
    progress: &mut dyn FnMut(usize, usize),
) -> Audit {
    let mut audit = Audit::default();
    for (i, (issue, tip)) in refs.iter().enumerate() {
        let check = verify_segment(store, issue, *tip, None);
        audit.ledgers += 1;
        audit.commits += check.commits;
        audit.findings.extend(check.findings);
        progress(i + 1, refs.len());
    }
    audit.clean = audit.findings.is_empty();
    audit
}
