//! Mirrors: replicate every `refs/leases/*` of a remote into this repository, verified.
//!
//! One fetch brings the remote's ledgers into the remote-tracking refs. Each local ledger then
//! moves only forward: a new segment is verified step by step with [`crate::verify`] before
//! the local ref moves (by compare-and-swap), and a ledger the remote rewound or rewrote is
//! refused and reported, never copied over.

use gix::ObjectId;
use serde::Serialize;

use crate::error::Result;
use crate::issue::IssueId;
use crate::ledger::Ledger;
use crate::remote::{Fetched, Remote};
use crate::store::{Swap, ARCHIVE_REF};
use crate::verify::{self, Finding};

/// A ledger that moved forward.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    /// The issue.
    pub issue: String,
    /// The local tip before (null for a new ledger).
    pub from: Option<String>,
    /// The local tip now, equal to the remote's.
    pub to: String,
    /// How many commits were verified and added.
    pub commits: usize,
}

/// A ledger that was not copied.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The issue.
    pub issue: String,
    /// The local tip (null if there is none).
    pub local: Option<String>,
    /// The remote tip (null if the remote no longer has the ledger).
    pub remote: Option<String>,
    /// Why, in one line.
    pub reason: String,
    /// The rules the remote's new segment breaks, if that is why.
    pub findings: Vec<Finding>,
}

/// What a sync did.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// The remote synced from.
    pub remote: String,
    /// Ledgers that existed here and moved forward.
    pub updated: Vec<Moved>,
    /// Ledgers that are new here.
    pub new: Vec<Moved>,
    /// How many ledgers were already up to date.
    pub unchanged: usize,
    /// Ledgers that were refused.
    pub refused: Vec<Refused>,
    /// Ledgers whose ref names an id that is not valid ([`IssueId::new`]): no git-lease writes
    /// one, and none can be kept here, so each is reported and left alone, run after run,
    /// without failing the sync.
    pub skipped: Vec<Refused>,
    /// Diverged local ledgers replaced by the remote's (`--adopt`), each kept under another
    /// ref.
    pub adopted: Vec<Adopted>,
    /// The remote's archive (`refs/lease-archive`) as it is here now, if it has one.
    pub archive: Option<String>,
    /// Ledgers the remote archived that this copy now keeps in its archive: their refs here
    /// were removed (each at the tip the archive records) or never existed.
    pub archived: Vec<String>,
}

/// A local ledger that had diverged from the remote's and was replaced by it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// The issue.
    pub issue: String,
    /// The ref that keeps the local ledger.
    pub kept: String,
    /// The local tip before.
    pub from: String,
    /// The remote's tip, the local tip now.
    pub to: String,
}

/// Where `sync --adopt` keeps a local ledger it replaced: `refs/lease-diverged/<issue>`
/// (with `-2`, `-3`, … if that is taken). Never deleted, never read as a lease.
pub const DIVERGED_PREFIX: &str = "refs/lease-diverged/";

/// Replaces the local ledger of `issue` (at `local`) by the remote's (at `remote_tip`, already
/// verified against what this clone saw of the remote), keeping the local one under
/// [`DIVERGED_PREFIX`]. Returns the ref that keeps it, or why nothing was done.
fn adopt_remote(
    ledger: &Ledger,
    issue: &IssueId,
    local: ObjectId,
    remote_tip: ObjectId,
) -> Result<std::result::Result<String, String>> {
    let store = ledger.store();
    let reading = ledger.reading();
    let check = verify::verify_segment(
        store,
        issue.as_str(),
        remote_tip,
        None,
        crate::step::Judgement::reader(reading.as_ref()),
    );
    if let Some(first) = check.findings.first() {
        return Ok(Err(format!("the remote's ledger breaks a rule: {first}")));
    }
    // Adopting never goes back over a token this clone saw issued: the next claim would
    // issue it again.
    let (here, there) = (
        store.entry(issue.as_str(), local)?,
        store.entry(issue.as_str(), remote_tip)?,
    );
    if there.lease.token < here.lease.token {
        return Ok(Err(format!(
            "the remote's ledger is at token {}, behind token {} seen here: adopting it would issue a token again (tokens never go back); wait until the remote's ledger passes token {}",
            there.lease.token, here.lease.token, here.lease.token
        )));
    }
    let kept = keep_diverged(
        store,
        issue,
        local,
        "git-lease: sync --adopt keeps the diverged local ledger",
    )?;
    Ok(
        match store.swap(issue, remote_tip, Some(local), "git-lease: sync --adopt")? {
            Swap::Done => Ok(kept),
            Swap::Lost => Err("the local ref moved during the sync; run it again".into()),
        },
    )
}

/// Keeps the local ledger of `issue` (at `local`) as `refs/lease-diverged/<issue>` (or
/// `<issue>-2`, `-3`, … when that is taken), before it is replaced; returns the ref.
pub(crate) fn keep_diverged(
    store: &crate::store::Store,
    issue: &IssueId,
    local: ObjectId,
    message: &str,
) -> Result<String> {
    let mut kept = format!("{DIVERGED_PREFIX}{issue}");
    let mut n = 1;
    while store.tip_of(&kept)?.is_some() {
        n += 1;
        kept = format!("{DIVERGED_PREFIX}{issue}-{n}");
    }
    store.move_refs(&[(kept.clone(), local, None)], message)?;
    Ok(kept)
}

/// Fetches every lease ref of `remote` in one fetch and moves each local ledger forward to
/// it, verified. Calls `progress(done, total)` per ledger.
pub fn sync(
    ledger: &Ledger,
    remote: &Remote<'_>,
    adopt: &[String],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<SyncReport> {
    let store = ledger.store();
    // What this clone had verified from the remote before this fetch (see the ahead case).
    let verified_before = remote.seen_all()?;
    let fetched = remote.fetch_all()?;
    let local_refs = store.lease_refs()?;
    let mut report = SyncReport {
        remote: remote.name().to_owned(),
        ..SyncReport::default()
    };
    let local_tip = |issue: &str| -> Option<ObjectId> {
        local_refs
            .binary_search_by(|(n, _)| n.as_str().cmp(issue))
            .ok()
            .map(|i| local_refs[i].1)
    };
    let syncing = Syncing {
        ledger,
        remote,
        adopt,
        fetched: &fetched,
        verified_before: &verified_before,
    };
    let total = fetched.remote.len();
    for (done, (issue, remote_tip)) in fetched.remote.iter().enumerate() {
        progress(done + 1, total);
        let local = local_tip(issue);
        if local == Some(*remote_tip) {
            report.unchanged += 1;
            continue;
        }
        let tips = Tips {
            issue,
            local,
            remote: *remote_tip,
        };
        syncing.ledger(&tips, &mut report)?;
    }
    sync_archive(ledger, remote, &mut report)?;
    // A ledger the remote had before and no longer has was deleted upstream: lease refs are
    // never deleted, so that is reported, and the local copy is kept.
    for gone in fetched.diverged.iter().filter(|d| d.remote.is_none()) {
        if let Some(local) = local_tip(&gone.issue) {
            report.refused.push(Refused {
                issue: gone.issue.clone(),
                local: Some(local.to_string()),
                remote: None,
                reason: "the remote no longer has this ledger (deleted upstream); the local copy is kept".into(),
                findings: Vec::new(),
            });
        }
    }
    // Each list by issue, in the order people read ids in (2 before 10).
    let by_issue = |a: &str, b: &str| crate::issue::natural_cmp(a, b);
    report.updated.sort_by(|a, b| by_issue(&a.issue, &b.issue));
    report.new.sort_by(|a, b| by_issue(&a.issue, &b.issue));
    report.refused.sort_by(|a, b| by_issue(&a.issue, &b.issue));
    report.skipped.sort_by(|a, b| by_issue(&a.issue, &b.issue));
    report.adopted.sort_by(|a, b| by_issue(&a.issue, &b.issue));
    report.archived.sort_by(|a, b| by_issue(a, b));
    Ok(report)
}

/// One ledger a sync moves: its issue, and its tips here (if any) and on the remote.
struct Tips<'a> {
    issue: &'a String,
    local: Option<ObjectId>,
    remote: ObjectId,
}

impl Tips<'_> {
    /// The refusal of this ledger's sync, for `reason`.
    fn refuse(&self, reason: String, findings: Vec<Finding>) -> Refused {
        Refused {
            issue: self.issue.clone(),
            local: self.local.map(|l| l.to_string()),
            remote: Some(self.remote.to_string()),
            reason,
            findings,
        }
    }
}

/// A sync under way: what each ledger's is decided by.
struct Syncing<'a> {
    ledger: &'a Ledger,
    remote: &'a Remote<'a>,
    /// The issues whose diverged ledgers the remote's replace (`--adopt`).
    adopt: &'a [String],
    fetched: &'a Fetched,
    /// What this clone had verified from the remote before this fetch.
    verified_before: &'a [(String, ObjectId)],
}

impl Syncing<'_> {
    /// Moves the ledger of `tips` forward to the remote's tip, verified, or says in `report`
    /// why not.
    fn ledger(&self, tips: &Tips<'_>, report: &mut SyncReport) -> Result<()> {
        let (store, issue, local) = (self.ledger.store(), tips.issue, tips.local);
        let id = match IssueId::new(issue) {
            Ok(id) => id,
            Err(e) => {
                let reason = format!("{e}; no git-lease writes such a ledger, it is left alone");
                report.skipped.push(tips.refuse(reason, Vec::new()));
                return Ok(());
            }
        };
        // The remote went back on what this clone verified from it before.
        if let Some(d) = self.fetched.diverged.iter().find(|d| &d.issue == issue) {
            report.refused.push(tips.refuse(
                format!("remote ledger {}: {}", d.divergence.as_str(), d.detail),
                d.findings.clone(),
            ));
            return Ok(());
        }
        // The remote's ledger is consistent with what was seen of it, so where this copy is
        // not behind it, this copy has commits the remote never had: claims made here.
        if let Some(l) = local {
            if !verify::descends_from(store, tips.remote, l) {
                return self.diverged(&id, tips, l, report);
            }
        }
        let reading = self.ledger.reading();
        let check = verify::verify_segment(
            store,
            issue,
            tips.remote,
            local,
            crate::step::Judgement::reader(reading.as_ref()),
        );
        if let Some(first) = check.findings.first() {
            let reason = if first.rule == verify::Rule::FastForward {
                "not a fast-forward: the remote rewrote this ledger".to_owned()
            } else {
                format!(
                    "the remote's new commits break {} rule(s), first: {}",
                    check.findings.len(),
                    first
                )
            };
            report.refused.push(tips.refuse(reason, check.findings));
            return Ok(());
        }
        if local.is_none() {
            if let Some(existing) = store.clash(&id)? {
                let reason = format!("clashes with the existing ref {existing}");
                report.refused.push(tips.refuse(reason, Vec::new()));
                return Ok(());
            }
        }
        match store.swap(&id, tips.remote, local, "git-lease: sync")? {
            Swap::Done => {
                let moved = Moved {
                    issue: issue.clone(),
                    from: local.map(|l| l.to_string()),
                    to: tips.remote.to_string(),
                    commits: check.commits,
                };
                if local.is_some() {
                    report.updated.push(moved);
                } else {
                    report.new.push(moved);
                }
            }
            Swap::Lost => report.refused.push(tips.refuse(
                "the local ref moved during the sync; run it again".into(),
                Vec::new(),
            )),
        }
        Ok(())
    }

    /// A ledger whose copy here (at `local`) has commits the remote's never had: the remote's
    /// adopted where `--adopt` names it, else refused, saying why.
    fn diverged(
        &self,
        id: &IssueId,
        tips: &Tips<'_>,
        local: ObjectId,
        report: &mut SyncReport,
    ) -> Result<()> {
        let (store, issue, remote_tip) = (self.ledger.store(), tips.issue, tips.remote);
        if self.adopt.contains(issue) {
            match adopt_remote(self.ledger, id, local, remote_tip)? {
                Ok(kept) => report.adopted.push(Adopted {
                    issue: issue.clone(),
                    kept,
                    from: local.to_string(),
                    to: remote_tip.to_string(),
                }),
                Err(reason) => report.refused.push(tips.refuse(reason, Vec::new())),
            }
            return Ok(());
        }
        // Ahead of the remote, the commits beyond it were never verified from it (the memory
        // would have refused a rewind). With nothing of this ledger ever verified from the
        // remote, it was copied here by plain git, not claimed here: the remote went back.
        // Otherwise they were made here, most likely.
        let ahead = verify::descends_from(store, local, remote_tip);
        let never_verified = self
            .verified_before
            .binary_search_by(|(n, _)| n.cmp(issue))
            .is_err();
        let reason = if ahead && never_verified {
            format!(
                "remote ledger rewound: {}'s is at {remote_tip}, behind this clone's {local}, whose newer commits were copied here without git-lease",
                self.remote.name()
            )
        } else {
            let how = if ahead {
                "it is ahead of the remote's, with commits this clone never verified from the remote: claims made here, or a rewind of history copied here without git-lease"
            } else {
                "it has commits the remote never had (claims made here)"
            };
            format!(
                "this clone's ledger has diverged from {}'s: {how}; adopt the remote's with `git lease sync --adopt {issue}`, which keeps this one as {}{issue}",
                self.remote.name(),
                DIVERGED_PREFIX
            )
        };
        report.refused.push(tips.refuse(reason, Vec::new()));
        Ok(())
    }
}

/// Brings the remote's archive here, verified (docs/FORMAT.md, "The archive"): the local
/// archive moves forward to the remote's newest fold when it is one of that fold's ancestors
/// (or there is none here); then each ledger the new folds record is verified up to its
/// archived tip, and its ref here, if it is at that tip or behind it, is removed against it,
/// as the fold's own second step does. A ledger that goes on here beyond its archived tip
/// (claimed here after the fold) keeps its ref. A remote archive that went back on what was
/// verified, or a local archive the remote's does not follow, is refused and reported.
fn sync_archive(ledger: &Ledger, remote: &Remote<'_>, report: &mut SyncReport) -> Result<()> {
    let store = ledger.store();
    let local = store.archive_tip()?;
    report.archive = local.map(|l| l.to_string());
    let refuse = |remote_tip: Option<ObjectId>, reason: String, findings| Refused {
        issue: ARCHIVE_REF.to_owned(),
        local: local.map(|l| l.to_string()),
        remote: remote_tip.map(|r| r.to_string()),
        reason,
        findings,
    };
    let fold = match remote.fetched_archive() {
        Ok(Some(fold)) => fold,
        Ok(None) => return Ok(()),
        Err(crate::Error::RemoteDiverged {
            divergence, detail, ..
        }) => {
            report.refused.push(refuse(
                None,
                format!("remote archive {divergence}: {detail}"),
                Vec::new(),
            ));
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if local == Some(fold.commit) {
        return Ok(());
    }
    if let Some(l) = local {
        if !follows(store, fold.commit, l) {
            report.refused.push(refuse(
                Some(fold.commit),
                format!(
                    "this copy's archive has folds {}'s does not follow (folded here); it is kept",
                    remote.name()
                ),
                Vec::new(),
            ));
            return Ok(());
        }
    }
    let before = local.map(|l| store.fold(l)).transpose()?;
    let take = archived_to_take(ledger, before.as_ref(), &fold, report)?;
    // Every ledger of the new folds is verified: only then does the archive move.
    let message = format!("git-lease: archive synced from {}", remote.name());
    if !store.archive_transaction(
        &[(ARCHIVE_REF.to_owned(), Some(fold.commit), local)],
        &message,
    )? {
        report.refused.push(refuse(
            Some(fold.commit),
            "the local archive moved during the sync; run it again".into(),
            Vec::new(),
        ));
        return Ok(());
    }
    report.archive = Some(fold.commit.to_string());
    for (id, here, _tip) in take {
        if let Some(h) = here {
            // Against the tip read: a claim here meanwhile keeps its ref.
            if !store.archive_transaction(&[(id.ref_name(), None, Some(h))], &message)? {
                continue;
            }
        }
        report.archived.push(id.to_string());
    }
    Ok(())
}

/// The ledgers the folds from `before` to `fold` archive, each verified up to its archived tip,
/// as `(issue, its tip here, its archived tip)`: a ledger claimed here after the fold is left
/// out (a revival keeps its ref), and one that breaks a rule is refused in `report`.
fn archived_to_take(
    ledger: &Ledger,
    before: Option<&crate::store::Fold>,
    fold: &crate::store::Fold,
    report: &mut SyncReport,
) -> Result<Vec<(IssueId, Option<ObjectId>, ObjectId)>> {
    let store = ledger.store();
    let reading = ledger.reading();
    let judgement = crate::step::Judgement::reader(reading.as_ref());
    let archived: Vec<(String, ObjectId)> = store
        .archive_diff(before, fold)?
        .into_iter()
        .filter_map(|(issue, _, tip)| Some((issue, tip?)))
        .filter(|(issue, _)| IssueId::new(issue).is_ok())
        .collect();
    // The refs here, read once (a fresh mirror's first sync archives every quiet ledger), and
    // every archived ledger verified, on several threads when there are many.
    let refs_here: std::collections::HashMap<String, ObjectId> =
        store.lease_refs()?.into_iter().collect();
    let checks = store.per_ledger(&archived, |store, issue, tip| {
        let here = refs_here.get(issue).copied();
        if here.is_some_and(|h| h != tip && verify::descends_from(store, h, tip)) {
            // Claimed here after the fold: a revival, which keeps its ref.
            return Ok(None);
        }
        let base = here.filter(|h| verify::descends_from(store, tip, *h));
        let check = verify::verify_segment(store, issue, tip, base, judgement);
        Ok(Some((here, check.findings)))
    })?;
    let mut take = Vec::new();
    for ((issue, tip), check) in archived.into_iter().zip(checks) {
        let Some((here, findings)) = check else {
            continue;
        };
        if let Some(first) = findings.first() {
            report.refused.push(Refused {
                issue: issue.clone(),
                local: here.map(|h| h.to_string()),
                remote: Some(tip.to_string()),
                reason: format!("the remote's archived ledger breaks a rule: {first}"),
                findings,
            });
            continue;
        }
        take.push((IssueId::new(&issue)?, here, tip));
    }
    Ok(take)
}

/// Whether the fold `newer` follows `older`: `older` is `newer` or one of the folds before it
/// (by first parents).
fn follows(store: &crate::store::Store, newer: ObjectId, older: ObjectId) -> bool {
    let mut next = Some(newer);
    let mut walked = std::collections::HashSet::new();
    while let Some(commit) = next {
        if commit == older {
            return true;
        }
        if !walked.insert(commit) {
            return false;
        }
        next = store
            .fold(commit)
            .ok()
            .and_then(|f| f.parents.first().copied())
            .filter(|p| store.is_fold(*p));
    }
    false
}
