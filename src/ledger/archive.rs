//! The archive of quiet ledgers applied to a repository (docs/FORMAT.md, "The archive"):
//! folding (`git lease archive`), judging a fold for the server hook and for readers, and
//! auditing the archive's history.
//!
//! A fold is two steps, each safe on its own: the archive ref moves to a fold that records
//! the tips of free, quiet ledgers; then each folded ref is deleted against the very tip the
//! archive records. Whoever claims such an issue meanwhile moves its ref first, so the
//! deletion loses its compare-and-swap and the ledger stays, a step on from its archived tip.
//! A claim of an archived issue creates its ref again on the archived tip: the token goes on
//! from the archived one ([`crate::Ledger::apply`] through [`Store::locate`]).

use chrono::{DateTime, Duration, Utc};
use gix::ObjectId;
use serde::Serialize;

use crate::error::Result;
use crate::issue::IssueId;
use crate::lease::Lease;
use crate::liveness::Current;
use crate::rules::archive::{self as rules, FoldStep, Judge, Recorded};
use crate::step::Rule;
use crate::store::{Staged, Store, ARCHIVE_REF};
use crate::verify::{descends_from, Finding};
use crate::Ledger;

/// How quiet a ledger must be, by default, before `git lease archive` folds it.
pub const DEFAULT_QUIET: &str = "30d";

/// How many times a fold is tried when the archive ref moved under it.
const FOLD_ATTEMPTS: u32 = 5;

/// A ledger's tip: `(issue, commit)`.
pub type Tip = (String, ObjectId);

/// One ledger a fold recorded.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Folded {
    /// The issue.
    pub issue: String,
    /// Its last token, kept by the archive.
    pub token: u64,
    /// The tip recorded.
    pub tip: String,
}

/// What `git lease archive` did (or, with `dry_run`, would do).
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldReport {
    /// The ledgers the fold recorded (or would).
    pub folded: Vec<Folded>,
    /// The lease refs deleted, their tips recorded (by this fold or an earlier one whose
    /// deletions did not finish).
    pub removed: usize,
    /// Folded refs a claim moved before they could be deleted: they stay, live again.
    pub moved_meanwhile: Vec<String>,
    /// The newest fold (the archive ref's value after the run).
    pub archive: Option<String>,
    /// Ledger refs left as they are: live, or not quiet for long enough.
    pub kept: usize,
    /// Nothing was written.
    pub dry_run: bool,
}

impl Ledger {
    /// Folds every ledger that is free and whose last event is at least `quiet_for` old at
    /// `now` into the archive, then deletes their refs (docs/FORMAT.md, "The archive"); with
    /// `dry_run`, says what it would fold and writes nothing.
    pub fn fold(
        &self,
        quiet_for: Duration,
        now: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<FoldReport> {
        let store = self.store();
        crate::cas::retry(
            FOLD_ATTEMPTS,
            || ARCHIVE_REF.to_owned(),
            |_| {
                let entries = self.list_refs()?;
                let base = store
                    .archive_tip()?
                    .map(|tip| store.fold(tip))
                    .transpose()?;
                let mut report = FoldReport {
                    dry_run,
                    archive: base.as_ref().map(|f| f.commit.to_string()),
                    ..FoldReport::default()
                };
                let mut record = Vec::new();
                let mut remove = Vec::new();
                for (issue, tip, lease) in entries {
                    if !rules::foldable(Current::recorded(&lease), quiet_for, now) {
                        report.kept += 1;
                        continue;
                    }
                    let archived = match &base {
                        Some(fold) => store.archived_in(fold, issue.as_str())?,
                        None => None,
                    };
                    if archived != Some(tip) {
                        report.folded.push(Folded {
                            issue: issue.to_string(),
                            token: lease.token,
                            tip: tip.to_string(),
                        });
                        record.push((issue.clone(), tip));
                    }
                    remove.push((issue, tip));
                }
                if dry_run {
                    report.removed = remove.len();
                    return Ok(crate::cas::Attempt::Done(report));
                }
                if !record.is_empty() {
                    let mut staged = Staged::default();
                    let fold = store.stage_fold(&mut staged, base.as_ref(), &record, now)?;
                    store.write_staged(&staged)?;
                    let moved = store.archive_transaction(
                        &[(
                            ARCHIVE_REF.to_owned(),
                            Some(fold),
                            base.as_ref().map(|f| f.commit),
                        )],
                        &format!("git-lease: fold {} ledgers", record.len()),
                    )?;
                    if !moved {
                        return Ok(crate::cas::Attempt::Again);
                    }
                    report.archive = Some(fold.to_string());
                }
                let (removed, moved) = remove_folded(store, &remove)?;
                report.removed = removed;
                report.moved_meanwhile = moved;
                if removed > 0 || !record.is_empty() {
                    self.note_write();
                }
                Ok(crate::cas::Attempt::Done(report))
            },
        )
    }

    /// Returns every ledger ref's tip and its state, sorted by issue.
    fn list_refs(&self) -> Result<Vec<(IssueId, ObjectId, Lease)>> {
        self.list()?
            .into_iter()
            .map(|e| Ok((IssueId::new(&e.lease.issue)?, e.commit, e.lease)))
            .collect()
    }
}

/// Deletes each lease ref of `remove` (`(issue, tip)`) if it is still at that tip: in one
/// transaction, or, when one of them moved meanwhile, one by one. Returns how many went and
/// the issues whose ref moved.
fn remove_folded(store: &Store, remove: &[(IssueId, ObjectId)]) -> Result<(usize, Vec<String>)> {
    if remove.is_empty() {
        return Ok((0, Vec::new()));
    }
    let edit = |(issue, tip): &(IssueId, ObjectId)| (issue.ref_name(), None, Some(*tip));
    let all: Vec<_> = remove.iter().map(edit).collect();
    let message = "git-lease: archived";
    if store.archive_transaction(&all, message)? {
        return Ok((remove.len(), Vec::new()));
    }
    let mut removed = 0;
    let mut moved = Vec::new();
    for one in remove {
        if store.archive_transaction(&[edit(one)], message)? {
            removed += 1;
        } else {
            moved.push(one.0.to_string());
        }
    }
    Ok((removed, moved))
}

/// Judges the fold `new` over `previous` (the archive's first fold for `None`): every rule
/// of [`rules::judge_fold`], with `ref_tip` telling where each recorded issue's ref is (for
/// [`Judge::Arrival`]). Returns the findings, empty for a legitimate fold.
pub fn judge_fold(
    store: &Store,
    previous: Option<ObjectId>,
    new: ObjectId,
    judge: Judge,
    ref_tip: &dyn Fn(&IssueId) -> Result<Option<ObjectId>>,
) -> Vec<Finding> {
    let finding = |detail: String| Finding {
        issue: ARCHIVE_REF.to_owned(),
        commit: new.to_string(),
        rule: Rule::Archive,
        detail,
    };
    match gather(store, previous, new, judge, ref_tip) {
        Ok(broken) => broken.into_iter().map(|(_, d)| finding(d)).collect(),
        Err(e) => vec![finding(e.to_string())],
    }
}

fn gather(
    store: &Store,
    previous: Option<ObjectId>,
    new: ObjectId,
    judge: Judge,
    ref_tip: &dyn Fn(&IssueId) -> Result<Option<ObjectId>>,
) -> Result<Vec<(Rule, String)>> {
    let fold = store.fold(new)?;
    let before = previous.map(|p| store.fold(p)).transpose()?;
    let changes = store.archive_diff(before.as_ref(), &fold)?;
    // The state at every recorded tip, decoded together (on several threads when there are
    // many: a first fold, or a mirror's first look at an archive, records every quiet ledger).
    let recorded_tips: Vec<(String, ObjectId)> = changes
        .iter()
        .filter_map(|(issue, _, now)| now.map(|tip| (issue.clone(), tip)))
        .collect();
    let states: Vec<std::result::Result<Lease, String>> =
        store.per_ref(&recorded_tips, |store, issue, tip| {
            Ok(store
                .entry(issue, tip)
                .map(|e| e.lease)
                .map_err(|e| e.to_string()))
        })?;
    drop(recorded_tips);
    let mut facts = Vec::new();
    let mut dropped = Vec::new();
    for (issue, was, now) in &changes {
        let Some(tip) = now else {
            dropped.push(issue.as_str());
            continue;
        };
        let id = IssueId::new(issue)?;
        let ref_at = match judge {
            Judge::Arrival { .. } => ref_tip(&id)?,
            Judge::History => None,
        };
        let descends = was.is_none_or(|b| descends_from(store, *tip, b));
        facts.push((issue.as_str(), *was, *tip, ref_at, descends));
    }
    let recorded: Vec<Recorded<'_>> = facts
        .iter()
        .zip(&states)
        .map(|((issue, was, tip, ref_at, descends), state)| Recorded {
            issue,
            before: *was,
            tip: *tip,
            state: state.as_ref().map_err(Clone::clone),
            ref_tip: *ref_at,
            descends: *descends,
        })
        .collect();
    let (first, tips, carriers) = store.fold_parents(&fold);
    let parents: Vec<ObjectId> = first.into_iter().chain(tips).collect();
    Ok(rules::judge_fold(
        &FoldStep {
            previous,
            parents: &parents,
            carriers,
            recorded: &recorded,
            dropped,
            at: fold.at,
        },
        judge,
    ))
}

/// Audits the archive's whole history, newest fold first: each fold judged over the one
/// before it at its own time, and every ledger ref of `refs` that the archive also records
/// continuing from the archived tip. Returns the ledgers only the archive holds (to be
/// audited like any ledger) and the findings.
pub fn audit(store: &Store, refs: &[(String, ObjectId)]) -> Result<(Vec<Tip>, Vec<Finding>)> {
    let Some(tip) = store.archive_tip()? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut findings = Vec::new();
    let mut next = Some(tip);
    let mut seen = std::collections::HashSet::new();
    while let Some(commit) = next {
        if !seen.insert(commit) {
            break;
        }
        let fold = store.fold(commit)?;
        // The first fold has no fold before it: its first parent is a ledger tip.
        let previous = fold.parents.first().copied().filter(|p| store.is_fold(*p));
        findings.extend(judge_fold(store, previous, commit, Judge::History, &|_| {
            Ok(None)
        }));
        next = previous;
    }
    let newest = store.fold(tip)?;
    let archived = store.archive_entries(&newest)?;
    let by_ref: std::collections::HashMap<&str, ObjectId> =
        refs.iter().map(|(i, t)| (i.as_str(), *t)).collect();
    let mut only_archived = Vec::new();
    for (issue, tip) in archived {
        match by_ref.get(issue.as_str()) {
            None => only_archived.push((issue, tip)),
            Some(at) if descends_from(store, *at, tip) => {}
            Some(at) => findings.push(Finding {
                issue: issue.clone(),
                commit: at.to_string(),
                rule: Rule::Archive,
                detail: format!(
                    "the ledger does not continue from {tip}, the tip the archive records: it \
                     started over"
                ),
            }),
        }
    }
    Ok((only_archived, findings))
}
