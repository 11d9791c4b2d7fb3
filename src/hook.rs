//! Server-side enforcement: what a receiving repository accepts into `refs/leases/*` and into
//! fenced work branches.
//!
//! A check each client can skip is not a check, so the server that receives pushes runs this
//! from its `pre-receive` (or `update`) hook. Each new lease commit is judged by
//! [`crate::step::judge`] as an arrival: at the server's clock, with the authenticated pusher
//! as the only actor. Fenced branches (`lease.fence`, by default `refs/heads/issue/*`) accept
//! pushes only while the issue the glob's `*` matched (slashes included) is live, only from its
//! holder when the pusher is known (`lease.identity`), and, when the push carries
//! `-o lease-token=<N>` or the policy needs one (without identity, by default: [`policy`]),
//! only with the live tenure's token. Doctor's scratch refs (`refs/lease-probe/*`, [`crate::probe`]) pass, whatever a
//! fence glob says.

use chrono::{DateTime, Utc};
use gix::ObjectId;

use crate::issue::{IssueId, REF_PREFIX};
use crate::probe::{ProbeReport, PROBE_PREFIX, REPORT_ONLY_OPTION};
pub use crate::step::Pusher;
use crate::step::{Arrival, Judgement};
use crate::store::{Store, ARCHIVE_REF};
use crate::verify;

mod fence;
mod policy;
pub use fence::{check_transaction, fenced_issue, forget_approvals, FENCE_APPROVALS_DIR};
use fence::{record_approvals, Approval};
pub use policy::{fence_globs, pusher_from_env, Identity, Policy, Source, DEFAULT_FENCE};

/// How every refusal line of the hook begins ([`Refusal`]'s `Display`): the mark by which a
/// client tells a refusal by the lease rules from a hook that failed, or another hook's
/// refusal.
pub const REFUSAL_MARK: &str = "git-lease: refused";

/// Where git keeps replacement refs, which make readers that honour them see another object
/// in place of the one named: no push may create, move or delete one.
pub const REPLACE_PREFIX: &str = "refs/replace/";

/// The push option that carries the pusher's fencing token.
pub const TOKEN_OPTION: &str = "lease-token=";

/// Where Gerrit keeps a project's configuration. A repository that has it is served by Gerrit,
/// whose receive-pack (JGit's) runs none of the repository's hooks.
pub const GERRIT_CONFIG_REF: &str = "refs/meta/config";

/// Returns why the hook installed in `store`'s repository would never run, where the
/// repository shows it: Gerrit's project configuration ([`GERRIT_CONFIG_REF`]). JGit's daemon
/// runs no hooks either, but leaves no mark in the repositories it serves.
pub fn never_run_by(store: &Store) -> Option<String> {
    store.tip_of(GERRIT_CONFIG_REF).ok().flatten().map(|_| {
        format!(
            "this repository has {GERRIT_CONFIG_REF}, Gerrit's project configuration: Gerrit \
             (and any server on JGit's receive-pack, such as `jgit daemon`) runs none of a \
             repository's hooks, so this hook never judges a push there; the compare-and-swap \
             still holds, the lease rules are not enforced (see docs/SERVER.md, \
             \"Third-party servers\")"
        )
    })
}

/// One ref update of a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefUpdate {
    /// The full ref name.
    pub name: String,
    /// The old value (null id for a new ref).
    pub old: ObjectId,
    /// The new value (null id for a deletion).
    pub new: ObjectId,
}

/// A refused update: one line for the pusher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The ref.
    pub name: String,
    /// The offending commit (or the new value).
    pub commit: String,
    /// The rule's stable name.
    pub rule: String,
    /// What is wrong.
    pub detail: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = &self.commit[..self.commit.len().min(12)];
        // Shown to the pusher: the ref name and the detail may quote what the push says.
        let detail = crate::text::printable(&self.detail);
        match self.name.strip_prefix(REF_PREFIX) {
            Some(issue) => write!(
                f,
                "{REFUSAL_MARK} issue {} at {short}: {}: {detail}",
                crate::text::printable(issue),
                self.rule
            ),
            None => write!(
                f,
                "{REFUSAL_MARK} {} at {short}: {}: {detail}",
                crate::text::printable(&self.name),
                self.rule
            ),
        }
    }
}

/// Checks every update of one push; returns every refusal (empty: accept).
///
/// A fenced update it accepts is also recorded as approved ([`FENCE_APPROVALS_DIR`]): with
/// which tenure's token and for which pusher, so that the ref transaction that lands the push,
/// seconds later perhaps, checks the fence again ([`check_transaction`]).
pub fn check_push(
    store: &Store,
    policy: &Policy,
    pusher: &Pusher,
    push_options: Option<&[String]>,
    updates: &[RefUpdate],
    now: DateTime<Utc>,
) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    let mut approvals = Vec::new();
    for update in updates {
        if update.name.starts_with(PROBE_PREFIX) {
            // A doctor's scratch ref: no ledger, no work; whatever a fence glob says. Asked
            // for the report alone, the hook refuses it, so that nothing is written.
            if push_options.is_some_and(|o| o.iter().any(|o| o == REPORT_ONLY_OPTION)) {
                refusals.push(Refusal {
                    name: update.name.clone(),
                    commit: update.new.to_string(),
                    rule: "probe".into(),
                    detail: "the report alone was asked for: nothing is written".into(),
                });
            }
            continue;
        } else if update.name.starts_with(REPLACE_PREFIX) {
            refusals.push(Refusal {
                name: update.name.clone(),
                commit: update.new.to_string(),
                rule: "replace".into(),
                detail: "replacement refs change what objects say to whoever honours them; this \
                         repository keeps lease ledgers, whose commits must mean what they are"
                    .into(),
            });
        } else if update.name == ARCHIVE_REF {
            check_fold(store, policy, update, now, &mut refusals);
        } else if update.name.starts_with(REF_PREFIX) {
            check_lease_update(store, policy, pusher, update, now, &mut refusals);
        } else if let Some(issue) = fenced_issue(&policy.fences, &update.name) {
            match fence::check_fenced_update(
                store,
                policy,
                pusher,
                push_options,
                update,
                &issue,
                now,
            ) {
                Ok(token) => approvals.push(Approval {
                    update: update.clone(),
                    token,
                    pusher: match pusher {
                        Pusher::Known(who) => Some(who.clone()),
                        _ => None,
                    },
                }),
                Err(refusal) => refusals.push(refusal),
            }
        }
    }
    if refusals.is_empty() {
        if let Err(e) = record_approvals(store, &approvals) {
            // Without its record, the transaction could not check the fence again: refuse.
            for a in &approvals {
                refusals.push(Refusal {
                    name: a.update.name.clone(),
                    commit: a.update.new.to_string(),
                    rule: "fence".into(),
                    detail: format!(
                        "cannot record the fence's approval for the ref transaction: {e}"
                    ),
                });
            }
        }
    }
    refusals
}

/// Returns the hook's report of itself ([`ProbeReport`]) when the push touches doctor's scratch
/// namespace (`refs/lease-probe/*`): its version, clock and policy, and who it takes `pusher`
/// to be. Nothing else is said to other pushes.
pub fn probe_report(
    store: &Store,
    policy: &Policy,
    pusher: &Pusher,
    updates: &[RefUpdate],
    now: DateTime<Utc>,
) -> Option<ProbeReport> {
    updates
        .iter()
        .any(|u| u.name.starts_with(PROBE_PREFIX))
        .then(|| ProbeReport::of(policy, pusher, store.ref_format(), now))
}

fn check_lease_update(
    store: &Store,
    policy: &Policy,
    pusher: &Pusher,
    update: &RefUpdate,
    now: DateTime<Utc>,
    refusals: &mut Vec<Refusal>,
) {
    let issue = &update.name[REF_PREFIX.len()..];
    let mut refuse = |commit: ObjectId, rule: &str, detail: String| {
        refusals.push(Refusal {
            name: update.name.clone(),
            commit: commit.to_string(),
            rule: rule.to_owned(),
            detail,
        })
    };
    // The tip the archive records for the issue: a deletion needs it to be the ref's, a
    // creation continues from it.
    // An id no ledger may have is refused below by its own rule, and never archived.
    let archived = match IssueId::new(issue).map_or(Ok(None), |id| store.archived(&id)) {
        Ok(archived) => archived,
        Err(e) => {
            refuse(
                update.new,
                "archive",
                format!("cannot read the archive: {e}"),
            );
            return;
        }
    };
    if update.new.is_null() {
        if let Err(detail) = crate::rules::archive::judge_deletion(update.old, archived) {
            refuse(update.old, "deletion", detail);
        }
        return;
    }
    let base = match (update.old.is_null(), archived) {
        (false, _) => Some(update.old),
        // A revival: the ledger goes on from the tip the archive keeps.
        (true, archived) => archived,
    };
    let host = crate::os::local_host();
    let arrival = Arrival {
        now,
        max_skew: policy.max_skew,
        pusher,
        admins: &policy.admins,
        host: host.as_ref(),
        signers: policy.signers.as_ref(),
    };
    let check =
        verify::verify_segment(store, issue, update.new, base, Judgement::Arrival(&arrival));
    if let Some(first) = check.findings.first() {
        let commit = ObjectId::from_hex(first.commit.as_bytes()).unwrap_or(update.new);
        refuse(commit, first.rule.as_str(), first.detail.clone());
    }
}

/// Judges a push to the archive ref: a fold over the archive's current one, at the server's
/// clock, each recorded tip where its ledger's ref is now ([`crate::archive::judge_fold`]).
fn check_fold(
    store: &Store,
    policy: &Policy,
    update: &RefUpdate,
    now: DateTime<Utc>,
    refusals: &mut Vec<Refusal>,
) {
    let mut refuse = |commit: ObjectId, detail: String| {
        refusals.push(Refusal {
            name: update.name.clone(),
            commit: commit.to_string(),
            rule: "archive".into(),
            detail,
        })
    };
    if update.new.is_null() {
        refuse(
            update.old,
            "the archive is never deleted: it keeps the token count of every ledger folded".into(),
        );
        return;
    }
    let previous = (!update.old.is_null()).then_some(update.old);
    let judge = crate::rules::archive::Judge::Arrival {
        now,
        max_skew: policy.max_skew,
    };
    let findings =
        crate::archive::judge_fold(store, previous, update.new, judge, &|id| store.tip(id));
    if let Some(first) = findings.into_iter().next() {
        refuse(update.new, first.detail);
    }
}

/// Checks, as a ref transaction is prepared (every ref it moves locked), that each lease ref
/// it creates for an archived issue continues from the archived tip: the push check judged
/// that against the archive it read, and a fold may have landed since.
pub fn check_revivals(store: &Store, updates: &[RefUpdate]) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    for update in updates {
        let Some(issue) = update.name.strip_prefix(REF_PREFIX) else {
            continue;
        };
        if !update.old.is_null() || update.new.is_null() {
            continue;
        }
        let problem = match IssueId::new(issue).map_or(Ok(None), |id| store.archived(&id)) {
            Err(e) => Some(format!("cannot read the archive: {e}")),
            Ok(Some(tip)) if !verify::descends_from(store, update.new, tip) => Some(format!(
                "issue {issue} is archived at {tip}, and this ledger does not continue from it: \
                 it would start its tokens over"
            )),
            Ok(_) => None,
        };
        if let Some(detail) = problem {
            refusals.push(Refusal {
                name: update.name.clone(),
                commit: update.new.to_string(),
                rule: "archive".into(),
                detail,
            });
        }
    }
    refusals
}

/// Reads the push options git gives a pre-receive hook (`GIT_PUSH_OPTION_COUNT`,
/// `GIT_PUSH_OPTION_<i>`); empty when the client sent none.
pub fn push_options_from_env() -> Vec<String> {
    let count: usize = std::env::var("GIT_PUSH_OPTION_COUNT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (0..count)
        .filter_map(|i| std::env::var(format!("GIT_PUSH_OPTION_{i}")).ok())
        .collect()
}
