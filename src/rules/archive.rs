//! The rules of the archive of quiet ledgers (docs/FORMAT.md, "The archive"), as pure
//! functions of what a fold records and what its judge sees: which ledgers may be folded,
//! whether a fold keeps every token, and when a ledger ref may go.
//!
//! A fold records the tip of each ledger it archives; the ledger's ref may then be deleted,
//! and a claim of the issue later creates the ref again on that tip (a *revival*, judged as
//! any step from the archived tip). So the archive never holds a live lease, never forgets a
//! tip, and never lets a ledger start over at token 1.

use chrono::{DateTime, Duration, Utc};
use gix_hash::ObjectId;

use crate::lease::Lease;
use crate::liveness::Current;
use crate::rules::is_live;
use crate::step::Rule;

/// Whether the ledger whose newest state is `current` may be folded at `now`, by a folder
/// that folds only ledgers quiet for `quiet_for`: it is not live, and its last event is at
/// least that old.
pub fn foldable(current: Current<'_>, quiet_for: Duration, now: DateTime<Utc>) -> bool {
    !is_live(current, now) && current.lease.at + quiet_for <= now
}

/// One entry a fold adds or changes, as its judge sees it.
#[derive(Clone, Debug)]
pub struct Recorded<'a> {
    /// The issue.
    pub issue: &'a str,
    /// The tip the previous fold recorded for it (`None`: newly archived).
    pub before: Option<ObjectId>,
    /// The tip this fold records.
    pub tip: ObjectId,
    /// The state at that tip (`Err`: why it cannot be read as this issue's ledger).
    pub state: Result<&'a Lease, String>,
    /// Where the issue's ref is, for the judge (`None`: it does not exist).
    pub ref_tip: Option<ObjectId>,
    /// Whether `tip` descends from `before` through the ledger's own chain.
    pub descends: bool,
}

/// What a judge knows of one fold.
#[derive(Clone, Debug)]
pub struct FoldStep<'a> {
    /// The previous fold (`None`: this is the archive's first).
    pub previous: Option<ObjectId>,
    /// The fold's parents, its carriers replaced by the tips they hold.
    pub parents: &'a [ObjectId],
    /// What is wrong with its carriers (empty: each holds 1 to 256 tips or carriers, nested
    /// at most 4 deep).
    pub carriers: Vec<String>,
    /// Every entry it adds or changes, in the order of their paths.
    pub recorded: &'a [Recorded<'a>],
    /// How many entries of the previous fold it drops.
    pub dropped: Vec<&'a str>,
    /// When it says it was folded.
    pub at: DateTime<Utc>,
}

/// How a fold is judged.
#[derive(Clone, Copy, Debug)]
pub enum Judge {
    /// As it arrives at a server: at the server's clock, each recorded tip where the issue's
    /// ref is now, the fold's own time no further than `max_skew` from `now`.
    Arrival {
        /// The server's clock.
        now: DateTime<Utc>,
        /// How far the fold's time may be from it.
        max_skew: Duration,
    },
    /// In the archive's history, by a reader: at the fold's own time (the refs it folded
    /// are gone, or moved on since).
    History,
}

/// Returns every rule `step` breaks (empty: a legitimate fold).
pub fn judge_fold(step: &FoldStep<'_>, judge: Judge) -> Vec<(Rule, String)> {
    let mut broken = Vec::new();
    let mut refuse = |detail: String| broken.push((Rule::Archive, detail));
    // What is wrong with a carrier first: it says more than the count of tips it hides.
    for wrong in &step.carriers {
        refuse(wrong.clone());
    }
    // The previous fold first, then the tips in any order, each once.
    let mut expected: Vec<ObjectId> = step.recorded.iter().map(|r| r.tip).collect();
    let (first, mut carried) = match step.previous {
        Some(_) => (
            step.parents.first().copied(),
            step.parents.get(1..).unwrap_or(&[]).to_vec(),
        ),
        None => (None, step.parents.to_vec()),
    };
    expected.sort_unstable();
    carried.sort_unstable();
    if first != step.previous || carried != expected {
        refuse(format!(
            "a fold's parents are the previous fold, then carriers of exactly the {} tips it \
             records, each once; this one's carry {} commits",
            step.recorded.len(),
            step.parents.len()
        ));
    }
    for issue in &step.dropped {
        refuse(format!(
            "the fold drops issue {issue}: an archived tip is never forgotten, or its token \
             count would be"
        ));
    }
    if step.recorded.is_empty() {
        refuse("a fold records at least one ledger".into());
    }
    let now = match judge {
        Judge::Arrival { now, max_skew } => {
            if (step.at - now).abs() > max_skew {
                refuse(format!(
                    "the fold is dated {}, more than {}s from the server's clock ({})",
                    crate::time::format_instant(step.at),
                    max_skew.num_seconds(),
                    crate::time::format_instant(now)
                ));
            }
            now
        }
        Judge::History => step.at,
    };
    for r in step.recorded {
        judge_recorded(r, judge, now, &mut refuse);
    }
    broken
}

/// Adds to `refuse` every rule the fold breaks in recording `r`, judged as `judge` says at
/// `now`: the tip of a free or expired ledger of its issue, at its ref (on arrival), going on
/// from the tip archived before.
fn judge_recorded(
    r: &Recorded<'_>,
    judge: Judge,
    now: DateTime<Utc>,
    refuse: &mut impl FnMut(String),
) {
    let issue = r.issue;
    let lease = match &r.state {
        Ok(lease) => *lease,
        Err(why) => {
            refuse(format!(
                "issue {issue}: the recorded tip {} is no ledger of it: {why}",
                r.tip
            ));
            return;
        }
    };
    if let Judge::Arrival { .. } = judge {
        if r.ref_tip != Some(r.tip) {
            refuse(format!(
                "issue {issue}: the fold records {}, but its ledger is at {}: a fold \
                 records a ledger's tip",
                r.tip,
                r.ref_tip
                    .map_or_else(|| "no ref".to_owned(), |t| t.to_string())
            ));
        }
    }
    if is_live(Current::recorded(lease), now) {
        refuse(format!(
            "issue {issue} is held by {} (token {}) until {}: only a free or expired lease \
             is folded",
            lease.holder.as_deref().unwrap_or("nobody"),
            lease.token,
            lease
                .expires_at
                .map_or_else(|| "released".to_owned(), crate::time::format_instant)
        ));
    }
    if let Some(before) = r.before {
        if !r.descends {
            refuse(format!(
                "issue {issue}: the fold records {}, which does not descend from {before}, \
                 the tip archived before: the ledger would go back",
                r.tip
            ));
        }
    }
}

/// Whether a lease ref at `old` may be deleted, when the archive records `archived` for its
/// issue: only once the archive records exactly that tip.
pub fn judge_deletion(old: ObjectId, archived: Option<ObjectId>) -> Result<(), String> {
    match archived {
        Some(tip) if tip == old => Ok(()),
        Some(tip) => Err(format!(
            "the archive records {tip}, not {old}: a lease ref is deleted only once the \
             archive records its tip (fold it first)"
        )),
        None => Err(
            "lease refs are deleted only once the archive records their tip: the token count \
             must survive (fold the ledger first: git lease archive)"
                .into(),
        ),
    }
}
