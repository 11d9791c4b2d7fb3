//! The batch API for servers: many operations decided at once, their objects written
//! together, and one ref transaction for all of them.
//!
//! # Why it exists
//!
//! A server that hands out leases to many workers sees many requests at a time. Applying them
//! one by one costs a ref transaction each (lock file, write, rename per ref) plus, with
//! fsync on, several fsyncs each. [`Ledger::apply_batch`] decides every operation with the
//! same rules as the single operations ([`crate::rules`]), writes all the new objects (loose,
//! through gix, packed later by `git gc --auto`), makes them durable before any ref moves (when
//! fsync is configured), and moves every ref in **one** transaction: gix (or git, for reftable) locks
//! and checks every ref before it changes any, so on a conflict (another writer
//! moved one of the refs since it was read) nothing moves; the whole batch then re-reads and
//! decides again, so a concurrent writer causes a retry, never a lost update.
//!
//! Operations are independent: one answering `held` does not stop the others (unlike
//! [`Ledger::acquire_all`], which is all or none). Several operations on the same issue apply
//! in order, each to the state the previous one left.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use gix::ObjectId;

use crate::cas::{self, Attempt};
use crate::error::{Error, Result};
use crate::holder::Holder;
use crate::issue::IssueId;
use crate::ledger::{Ledger, Report};
use crate::liveness::Current;
use crate::rules::{self, Claim, Credentials, Ending, Transition};
use crate::store::{Entry, Staged, Swap};
use crate::time::Ttl;

/// How many times a batch re-reads and decides again after losing its ref transaction before
/// it gives up with [`Error::LostRace`] (having changed nothing).
pub const BATCH_ATTEMPTS: u32 = 100;

/// One operation of a batch, decided by the rule of the same name in [`crate::rules`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// [`rules::acquire`]: claim the issue.
    Acquire(Claim),
    /// [`rules::renew`]: the live holder extends its lease by `ttl` from now.
    Renew {
        /// Who renews.
        holder: Holder,
        /// The session secret, when the tenure has a session.
        secret: Option<String>,
        /// How long from now.
        ttl: Ttl,
    },
    /// [`rules::release`]: free the lease, keeping its token.
    Release {
        /// Who releases.
        holder: Holder,
        /// The session secret, when the tenure has a session.
        secret: Option<String>,
        /// Release, complete or abandon.
        ending: Ending,
    },
}

impl Operation {
    fn decide(
        &self,
        issue: &IssueId,
        current: Option<Current<'_>>,
        now: DateTime<Utc>,
    ) -> Transition {
        match self {
            Operation::Acquire(claim) => rules::acquire(issue, current, claim, now),
            Operation::Renew {
                holder,
                secret,
                ttl,
            } => rules::renew(
                current,
                Credentials {
                    holder,
                    secret: secret.as_deref(),
                },
                *ttl,
                now,
            ),
            Operation::Release {
                holder,
                secret,
                ending,
            } => rules::release(
                issue,
                current,
                Credentials {
                    holder,
                    secret: secret.as_deref(),
                },
                *ending,
                now,
            ),
        }
    }
}

/// The state of one issue while a batch is decided.
struct Slot {
    /// The expected value of the ref edit, read at the start of the attempt (none for a ref
    /// that does not exist: a new ledger, or one the archive holds).
    read: Option<ObjectId>,
    /// The tip read at the start of the attempt (an archived ledger's too).
    tip: Option<ObjectId>,
    /// The state after the operations decided so far.
    state: Option<Entry>,
}

impl Ledger {
    /// Applies `ops` as `(issue, operation)` pairs, in order, in one ref transaction, and
    /// returns one report per operation, in the same order.
    ///
    /// A new issue whose ref would clash with an existing one (or another new one of the
    /// batch) is an error, and nothing is written (holders are [`Holder`]s, checked when they
    /// were made). Refusals (`held`, `not_holder`, ...) are outcomes of their operation only.
    ///
    /// ```no_run
    /// use git_lease::batch::Operation;
    /// use git_lease::{Claim, Ending, Holder, IssueId, Ledger, Outcome, Ttl};
    ///
    /// let ledger = Ledger::discover(".".as_ref())?;
    /// let now = chrono::Utc::now();
    /// let ttl = Ttl::parse("15m")?;
    /// let ops = vec![
    ///     (IssueId::new("41")?, Operation::Acquire(Claim::new("worker-1".parse()?, ttl))),
    ///     (IssueId::new("42")?, Operation::Acquire(Claim::new("worker-2".parse()?, ttl))),
    ///     (
    ///         IssueId::new("40")?,
    ///         Operation::Release {
    ///             holder: Holder::new("worker-3")?,
    ///             secret: None,
    ///             ending: Ending::Complete,
    ///         },
    ///     ),
    /// ];
    /// for report in ledger.apply_batch(&ops, now)? {
    ///     match (report.outcome, report.lease()) {
    ///         (Outcome::Acquired, Some(lease)) => println!("{}: token {}", report.issue, lease.token),
    ///         (outcome, _) => println!("{}: {}", report.issue, outcome.as_str()),
    ///     }
    /// }
    /// # Ok::<(), git_lease::Error>(())
    /// ```
    pub fn apply_batch(
        &self,
        ops: &[(IssueId, Operation)],
        now: DateTime<Utc>,
    ) -> Result<Vec<Report>> {
        self.apply_batch_with(ops, now, &mut |_| {})
    }

    /// [`Ledger::apply_batch`], calling `before_commit(attempt)` (0 first) after the objects
    /// of an attempt are written and just before its ref transaction: for instrumentation,
    /// and for tests that need a concurrent writer at exactly that point.
    pub fn apply_batch_with(
        &self,
        ops: &[(IssueId, Operation)],
        now: DateTime<Utc>,
        before_commit: &mut dyn FnMut(u32),
    ) -> Result<Vec<Report>> {
        let store = self.store();
        let contended = || format!("a batch of {} operations", ops.len());
        cas::retry(BATCH_ATTEMPTS, contended, |attempt| {
            let mut slots: HashMap<&IssueId, Slot> = HashMap::with_capacity(ops.len());
            for (issue, _) in ops {
                if !slots.contains_key(issue) {
                    let state = self.current(issue)?;
                    let read = state.as_ref().and_then(Entry::expected);
                    let tip = state.as_ref().map(|e| e.commit);
                    slots.insert(issue, Slot { read, tip, state });
                }
            }
            let mut reports = Vec::with_capacity(ops.len());
            let mut staged = Staged::default();
            for (issue, op) in ops {
                let slot = slots.get_mut(issue).expect("every issue has a slot");
                let transition = op.decide(issue, slot.state.as_ref().map(Entry::current), now);
                let Some(next) = transition.next else {
                    reports.push(Report {
                        outcome: transition.outcome,
                        issue: issue.clone(),
                        entry: slot.state.clone(),
                        wrote: false,
                    });
                    continue;
                };
                let parent = slot.state.as_ref().map(|e| e.commit);
                // The first write of a ref this batch creates (a new ledger, or one revived from
                // the archive).
                if slot.read.is_none() && parent == slot.tip {
                    check_clash(self, issue, ops)?;
                }
                let commit = store.stage(&mut staged, &next, parent)?;
                let entry = Entry::recorded(commit, parent, next);
                slot.state = Some(entry.clone());
                reports.push(Report {
                    outcome: transition.outcome,
                    issue: issue.clone(),
                    entry: Some(entry),
                    wrote: true,
                });
            }
            let mut edits: Vec<(IssueId, ObjectId, Option<ObjectId>)> = slots
                .iter()
                .filter_map(|(issue, slot)| {
                    let tip = slot.state.as_ref().map(|e| e.commit);
                    // A ref only moves forward: a state that changed has a new commit.
                    let tip = tip.filter(|t| Some(*t) != slot.tip)?;
                    Some(((*issue).clone(), tip, slot.read))
                })
                .collect();
            if edits.is_empty() {
                return Ok(Attempt::Done(reports));
            }
            // Lock in a stable order, as git does, so two batches never wait on each other
            // in opposite orders.
            edits.sort_by(|a, b| a.0.cmp(&b.0));
            store.write_staged(&staged)?;
            before_commit(attempt);
            Ok(match store.swap_many(&edits, "git-lease: batch")? {
                Swap::Done => {
                    self.note_write();
                    Attempt::Done(reports)
                }
                Swap::Lost => Attempt::Again,
            })
        })
    }
}

/// Refuses a new issue whose ref would clash, as file versus directory, with an existing
/// ref or with another issue of the batch.
fn check_clash(ledger: &Ledger, issue: &IssueId, ops: &[(IssueId, Operation)]) -> Result<()> {
    ledger.store().ensure_no_clash(issue)?;
    let below = format!("{issue}/");
    for (other, _) in ops {
        if other.as_str().starts_with(&below) || issue.ancestors().any(|a| a == other.as_str()) {
            return Err(Error::RefClash {
                issue: issue.to_string(),
                existing: other.ref_name(),
            });
        }
    }
    Ok(())
}
