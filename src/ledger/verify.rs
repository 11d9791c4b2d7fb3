//! The transition rules of recorded ledgers: what a legitimate chain looks like.
//!
//! The rules in [`crate::rules`] *decide* the next state; [`crate::step::judge`] *checks* a
//! recorded step, whoever wrote it. This module walks a ledger, or the part of it that is new,
//! and asks that judge about each step: `git lease verify`, `git lease sync`, remote reads and
//! the server hook all call [`verify_segment`], so a mirror, an audit, a client and a server
//! agree on what is legitimate.

use gix::ObjectId;
use serde::Serialize;

use crate::issue::IssueId;
use crate::lease::{self, DecodeError, Lease};
use crate::rules::signers::{signature_header, split_commit, Signed};
use crate::step::{judge_signed, Judgement};
pub use crate::step::{Rule, Violation};
use crate::store::Store;

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
/// with the state at `base` as the starting point (`None`: verify from the root), each step
/// judged as `judgement` says.
///
/// If `base` is given and is not an ancestor of `tip`, the single finding is
/// [`Rule::FastForward`].
pub fn verify_segment(
    store: &Store,
    issue: &str,
    tip: ObjectId,
    base: Option<ObjectId>,
    judgement: Judgement<'_>,
) -> SegmentCheck {
    let finding = |commit: ObjectId, rule: Rule, detail: String| Finding {
        issue: issue.to_owned(),
        commit: commit.to_string(),
        rule,
        detail,
    };
    let mut result = SegmentCheck::default();
    if let Err(e) = IssueId::new(issue) {
        result
            .findings
            .push(finding(tip, Rule::Issue, e.to_string()));
        return result;
    }
    // Walk back to the base (or the root), newest first.
    let signatures = judgement.signers().is_some();
    let header = signature_header(store.repo().object_hash());
    let mut walked: Walked = Vec::new();
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
        let decoded = decode_record(issue, raw.lease_json);
        next = raw.parents.first().copied();
        let signed = signatures.then(|| split_commit(&raw.commit, header));
        walked.push((commit, decoded, signed));
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
    result.judge(issue, walked, judgement);
    result
}

/// The state `lease_json` (a commit's `lease.json`, or why it has none) records for `issue`, or
/// the rule it breaks.
fn decode_record(issue: &str, lease_json: Result<Vec<u8>, String>) -> Result<Lease, Violation> {
    match lease_json {
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
    }
}

impl SegmentCheck {
    /// Judges the commits of `issue` `walked` (newest first: each, its record or the rule it
    /// breaks, and its signature), each on top of the one before it, from the base.
    fn judge(&mut self, issue: &str, walked: Walked, judgement: Judgement<'_>) {
        for (commit, decoded, signed) in walked.into_iter().rev() {
            self.commits += 1;
            let finding = |rule, detail| Finding {
                issue: issue.to_owned(),
                commit: commit.to_string(),
                rule,
                detail,
            };
            match decoded {
                Err((rule, detail)) => {
                    self.findings.push(finding(rule, detail));
                    // Without a readable state the following step cannot be judged.
                    return;
                }
                Ok(lease) => {
                    let prev = self.steps.last().map(|(_, l)| l).or(self.base.as_ref());
                    for (rule, detail) in judge_signed(prev, &lease, signed.as_ref(), judgement) {
                        self.findings.push(finding(rule, detail));
                    }
                    self.steps.push((commit, lease));
                }
            }
        }
    }
}

/// The commits a verification walked, newest first: each, its record or the rule it breaks,
/// and its signature where signatures are judged.
type Walked = Vec<(ObjectId, Result<Lease, Violation>, Option<Signed>)>;

/// Verifies the commits from `tip` back to `base` as [`verify_segment`] does, for a reader
/// that uses the ledger only if every step is legitimate (a local read with
/// `lease.requireSignatures`): the first finding is [`crate::Error::Unverified`].
pub fn require_legitimate(
    store: &Store,
    issue: &str,
    tip: ObjectId,
    base: Option<ObjectId>,
    judgement: Judgement<'_>,
) -> crate::Result<()> {
    let check = verify_segment(store, issue, tip, base, judgement);
    match check.findings.into_iter().next() {
        None => Ok(()),
        Some(f) => Err(crate::Error::Unverified {
            issue: f.issue,
            commit: f.commit,
            rule: f.rule.to_string(),
            detail: f.detail,
        }),
    }
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

/// The verdict on a whole set of ledgers, for the `verify` command.
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

/// Verifies every ledger in `refs` (`(issue, tip)`), each step as `judgement` says (by the
/// rules alone, or also by what the auditor knows: [`Judgement::reader`]), calling
/// `progress(done, total)` as it goes. The ledgers of a block of [`AUDIT_BLOCK`] are verified
/// together, on several threads when there are many ([`Store::per_ref`]).
pub fn audit(
    store: &Store,
    refs: &[(String, ObjectId)],
    judgement: Judgement<'_>,
    progress: &mut dyn FnMut(usize, usize),
) -> Audit {
    let mut audit = Audit::default();
    let check = |store: &Store, issue: &str, tip: ObjectId| {
        let check = verify_segment(store, issue, tip, None, judgement);
        (check.commits, check.findings)
    };
    for block in refs.chunks(AUDIT_BLOCK) {
        // Verifying a ledger never fails (what it finds is the answer); only a thread that
        // could not open its store would, and then the block is verified here alone.
        let checks = store
            .per_ledger(block, |store, issue, tip| Ok(check(store, issue, tip)))
            .unwrap_or_else(|_| {
                block
                    .iter()
                    .map(|(issue, tip)| check(store, issue, *tip))
                    .collect()
            });
        for (commits, findings) in checks {
            audit.ledgers += 1;
            audit.commits += commits;
            audit.findings.extend(findings);
        }
        progress(audit.ledgers, refs.len());
    }
    audit.clean = audit.findings.is_empty();
    audit.sort();
    audit
}

/// How many ledgers [`audit`] verifies between two reports of its progress.
pub const AUDIT_BLOCK: usize = 4096;

impl Audit {
    /// Orders the findings by issue, in natural order ([`crate::issue::natural_cmp`]), each
    /// ledger's in the order they were found.
    pub fn sort(&mut self) {
        self.findings
            .sort_by(|a, b| crate::issue::natural_cmp(&a.issue, &b.issue));
    }
}
