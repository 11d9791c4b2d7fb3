//! Server-side enforcement: what a receiving repository accepts into `refs/leases/*` and into
//! fenced work branches.
//!
//! A check each client can skip is not a check, so the server that receives pushes runs this
//! from its `pre-receive` (or `update`) hook. Each new lease commit is judged by
//! [`crate::step::judge`] as an arrival: at the server's clock, with the authenticated pusher
//! as the only actor. Fenced branches (`lease.fence = refs/heads/issue/*`) accept pushes only
//! while the issue the glob's `*` matched (slashes included) is live, only from its holder
//! when the pusher is known (`lease.identity`), and, when the push carries
//! `-o lease-token=<N>` (or `lease.requireToken` asks for it), only with the live tenure's
//! token. Doctor's scratch refs (`refs/lease-probe/*`, [`crate::probe`]) pass, whatever a
//! fence glob says.

use chrono::{DateTime, Duration, Utc};
use gix::ObjectId;

use crate::issue::{IssueId, REF_PREFIX};
use crate::lease::Lease;
use crate::liveness::LocalHost;
use crate::probe::{ProbeReport, PROBE_PREFIX};
use crate::rules::is_live;
pub use crate::step::Pusher;
use crate::step::{Arrival, Judgement};
use crate::store::{Store, ARCHIVE_REF};
use crate::verify;

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

/// How the server learns who pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Not configured: lease pushes are checked by the rules alone.
    None,
    /// Signed pushes (`git push --signed`): `GIT_PUSH_CERT_SIGNER` with status `G`.
    PushCert,
    /// The named environment variable (`REMOTE_USER`, `GL_USER`, ...) set by the server.
    Env(String),
}

/// The hook's configuration, read from the receiving repository.
#[derive(Clone, Debug)]
pub struct Policy {
    /// How far a pushed event's `at` may be from the server's clock (`lease.maxClockSkew`, 5
    /// minutes by default).
    pub max_skew: Duration,
    /// Where the pusher's identity comes from (`lease.identity`, `lease.pusherEnv`).
    pub identity: Identity,
    /// Who may revoke (`lease.admins`, one whole identity per value).
    pub admins: Vec<String>,
    /// Globs of fenced refs (`lease.fence`).
    pub fences: Vec<String>,
    /// Refuse fenced pushes without `lease-token` (`lease.requireToken`).
    pub require_token: bool,
    /// With `lease.requireSignatures`: the allowed signers every pushed step must be signed by
    /// (the served repository's `lease.allowedSigners`, or its `HEAD`'s
    /// `.git-lease/allowed_signers`).
    pub signers: Option<crate::rules::signers::AllowedSigners>,
}

impl Policy {
    /// Reads the policy from the repository's configuration.
    pub fn from_config(store: &Store) -> Result<Policy, crate::Error> {
        let max_skew =
            crate::config::max_clock_skew(store.config_string("lease.maxClockSkew").as_deref())?;
        let pusher_env = store.config_string("lease.pusherEnv");
        let identity = match store.config_string("lease.identity").as_deref() {
            Some("push-cert") => Identity::PushCert,
            // Fails closed: a server told to read the pusher from the environment, but not from
            // which variable, knows nobody; the hook refuses every push until that is fixed.
            Some("env") => match pusher_env {
                Some(var) if !var.is_empty() => Identity::Env(var),
                _ => {
                    return Err(crate::Error::ConfigMissing {
                        key: "lease.pusherEnv".into(),
                        needed: "lease.identity=env needs it: the name of the variable the \
                                 server sets to the authenticated pusher (REMOTE_USER, GL_USER, \
                                 ...)",
                    })
                }
            },
            None => match pusher_env {
                Some(var) if var.is_empty() => {
                    return Err(crate::Error::Config {
                        key: "lease.pusherEnv".into(),
                        value: var,
                        expected: "the name of the variable the server sets to the \
                                   authenticated pusher (REMOTE_USER, GL_USER, ...)",
                    })
                }
                Some(var) => Identity::Env(var),
                None => Identity::None,
            },
            Some(other) => {
                return Err(crate::Error::Config {
                    key: "lease.identity".into(),
                    value: other.to_owned(),
                    expected: "push-cert or env",
                })
            }
        };
        // One identity per value, taken whole and exactly as written: "Ops Team" is one
        // identity, not two, and "ops " is not "ops". An empty value names nobody.
        let admins = store
            .config_strings("lease.admins")
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let require_token = crate::config::boolean(
            "lease.requireToken",
            store.config_flag("lease.requireToken").as_deref(),
        )?
        .unwrap_or(false);
        let fences = store.config_strings("lease.fence");
        if let Some(bad) = fences.iter().find(|g| g.matches('*').count() != 1) {
            return Err(crate::Error::Config {
                key: "lease.fence".into(),
                value: bad.clone(),
                expected: "a glob with exactly one `*`, which matches the issue id",
            });
        }
        let signers = crate::ledger::signers::required(store)?;
        Ok(Policy {
            max_skew,
            identity,
            admins,
            fences,
            require_token,
            signers,
        })
    }
}

/// Establishes the pusher from the hook's environment under `identity`.
///
/// The value is the identity exactly as the server set it, never trimmed or otherwise
/// normalised: `"ops "` is not the administrator `ops`, and `" alice"` is not `alice`. An empty
/// (or unset) value is no identity.
pub fn pusher_from_env(identity: &Identity) -> Pusher {
    match identity {
        Identity::None => Pusher::Unknown,
        Identity::PushCert => {
            let status = std::env::var("GIT_PUSH_CERT_STATUS").unwrap_or_default();
            if status != "G" {
                return Pusher::Unauthenticated(if status.is_empty() {
                    "the push is not signed (use git push --signed)".into()
                } else {
                    format!("the push certificate's status is {status}, not G (good)")
                });
            }
            match std::env::var("GIT_PUSH_CERT_SIGNER") {
                Ok(signer) if !signer.is_empty() => Pusher::Known(signer),
                Ok(_) | Err(std::env::VarError::NotPresent) => Pusher::Unauthenticated(
                    "the push certificate's key is not in the allowed signers".into(),
                ),
                Err(std::env::VarError::NotUnicode(_)) => Pusher::Unauthenticated(
                    "the push certificate's signer is not valid UTF-8".into(),
                ),
            }
        }
        Identity::Env(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Pusher::Known(v),
            Ok(_) | Err(std::env::VarError::NotPresent) => {
                Pusher::Unauthenticated(format!("the server did not set {var}"))
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                Pusher::Unauthenticated(format!("the server set {var} to text that is not UTF-8"))
            }
        },
    }
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
            // A doctor's scratch ref: no ledger, no work; whatever a fence glob says.
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
            let before = refusals.len();
            let token = check_fenced_update(
                store,
                policy,
                pusher,
                push_options,
                update,
                &issue,
                now,
                &mut refusals,
            );
            if let Some(token) = token.filter(|_| refusals.len() == before) {
                approvals.push(Approval {
                    update: update.clone(),
                    token,
                    pusher: match pusher {
                        Pusher::Known(who) => Some(who.clone()),
                        _ => None,
                    },
                });
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

/// Where, in the served repository's git dir, the push check leaves one file per fenced
/// update it approved, for the ref transaction that lands it ([`check_transaction`]).
pub const FENCE_APPROVALS_DIR: &str = "lease-fence-approvals";

/// How long an approval no transaction took stays (a push refused after the check, by
/// another hook or a lost connection, leaves its approvals behind).
const APPROVAL_LIFETIME: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A fenced update the push check accepted: in the tenure of `token`, by `pusher`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Approval {
    update: RefUpdate,
    token: u64,
    pusher: Option<String>,
}

/// The file of `update`'s approval: named by the SHA-256 of the update, so that no other
/// update can be made to share it (and overwrite or remove it).
fn approval_path(store: &Store, update: &RefUpdate) -> std::path::PathBuf {
    let key = format!("{} {} {}", update.name, update.old, update.new);
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha256);
    hasher.update(key.as_bytes());
    let name = hasher
        .try_finalize()
        .map(|id| id.to_string())
        .unwrap_or_else(|_| format!("{:016x}", crate::cache::fnv1a(key.as_bytes())));
    store.git_dir().join(FENCE_APPROVALS_DIR).join(name)
}

fn record_approvals(store: &Store, approvals: &[Approval]) -> std::io::Result<()> {
    if approvals.is_empty() {
        return Ok(());
    }
    let dir = store.git_dir().join(FENCE_APPROVALS_DIR);
    std::fs::create_dir_all(&dir)?;
    let shared = |path: &std::path::Path| {
        gix::fs::set_shared_repository_permissions(path, store.shared().value())
    };
    shared(&dir)?;
    // Forget approvals no transaction took.
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > APPROVAL_LIFETIME);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    for a in approvals {
        let text = format!(
            "{} {} {}\n{}\n{}\n",
            a.update.name,
            a.update.old,
            a.update.new,
            a.token,
            a.pusher.as_deref().unwrap_or("")
        );
        let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
        std::io::Write::write_all(&mut tmp, text.as_bytes())?;
        shared(tmp.path())?;
        tmp.persist(approval_path(store, &a.update))
            .map_err(|e| e.error)?;
    }
    Ok(())
}

fn read_approval(store: &Store, update: &RefUpdate) -> Option<Approval> {
    let text = std::fs::read_to_string(approval_path(store, update)).ok()?;
    let mut lines = text.lines();
    let head = lines.next()?;
    if head != format!("{} {} {}", update.name, update.old, update.new) {
        return None;
    }
    let token = lines.next()?.parse().ok()?;
    let pusher = lines.next().filter(|p| !p.is_empty()).map(str::to_owned);
    Some(Approval {
        update: update.clone(),
        token,
        pusher,
    })
}

/// Checks, as the ref transaction that lands a push is prepared (git's
/// `reference-transaction` hook, state `prepared`: every ref locked, nothing written yet),
/// every fenced update the push check approved, again, at `now`: the issue must still be in
/// the very tenure approved (its token), held by the same pusher, and live. A takeover or a
/// revoke that landed while the rest of the push was being checked refuses the stale work.
/// Updates without an approval (a transaction of the server's own, not a push) pass.
pub fn check_transaction(
    store: &Store,
    policy: &Policy,
    updates: &[RefUpdate],
    now: DateTime<Utc>,
) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    for update in updates {
        if update.name.starts_with(PROBE_PREFIX) {
            continue;
        }
        let Some(issue) = fenced_issue(&policy.fences, &update.name) else {
            continue;
        };
        let Some(approval) = read_approval(store, update) else {
            continue;
        };
        let current = fenced_entry(store, &issue);
        let problem = match live_lease(current.as_ref(), now) {
            None => Some(format!(
                "issue {issue} is no longer held (it was in tenure {} when this push was checked); the work was not landed",
                approval.token
            )),
            Some(lease) if lease.token != approval.token => Some(format!(
                "issue {issue} moved to tenure {} held by {} while this push was checked (in tenure {}); the work was not landed",
                lease.token,
                lease.holder.as_deref().unwrap_or("nobody"),
                approval.token
            )),
            Some(lease) => match &approval.pusher {
                Some(who) if lease.holder.as_deref() != Some(who.as_str()) => Some(format!(
                    "issue {issue} is held by {} now, not by {who}",
                    lease.holder.as_deref().unwrap_or("nobody")
                )),
                _ => None,
            },
        };
        if let Some(detail) = problem {
            refusals.push(Refusal {
                name: update.name.clone(),
                commit: update.new.to_string(),
                rule: "fence".into(),
                detail,
            });
        }
    }
    refusals
}

/// Forgets the approvals of `updates` once their transaction is over (committed or aborted).
pub fn forget_approvals(store: &Store, updates: &[RefUpdate]) {
    for update in updates {
        let _ = std::fs::remove_file(approval_path(store, update));
    }
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
    let host = LocalHost::detect();
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

/// Returns the newest entry of the issue a fenced ref belongs to (`None`: never leased, or
/// not a valid id).
fn fenced_entry(store: &Store, issue: &str) -> Option<crate::store::Entry> {
    IssueId::new(issue)
        .ok()
        .and_then(|id| store.current(&id).ok().flatten())
}

/// Returns the lease of `current` if it is live at `now`.
fn live_lease(current: Option<&crate::store::Entry>, now: DateTime<Utc>) -> Option<&Lease> {
    current
        .filter(|e| is_live(e.current(), now))
        .map(|e| &e.lease)
}

/// Returns the issue a fenced ref belongs to: what the `*` of the first matching glob of
/// `fences` matched, slashes included (`refs/heads/issue/*` makes `refs/heads/issue/gh/123`
/// a branch of issue `gh/123`).
pub fn fenced_issue(fences: &[String], name: &str) -> Option<String> {
    fences.iter().find_map(|glob| star_match(glob, name))
}

/// Returns what the one `*` of `glob` matches in `text`, if `text` matches `glob`.
fn star_match(glob: &str, text: &str) -> Option<String> {
    let (head, tail) = glob.split_once('*')?;
    let rest = text.strip_prefix(head)?.strip_suffix(tail)?;
    (!rest.is_empty()).then(|| rest.to_owned())
}

#[allow(clippy::too_many_arguments)]
fn check_fenced_update(
    store: &Store,
    policy: &Policy,
    pusher: &Pusher,
    push_options: Option<&[String]>,
    update: &RefUpdate,
    issue: &str,
    now: DateTime<Utc>,
    refusals: &mut Vec<Refusal>,
) -> Option<u64> {
    let commit = if update.new.is_null() {
        update.old
    } else {
        update.new
    };
    let mut refuse = |rule: &str, detail: String| {
        refusals.push(Refusal {
            name: update.name.clone(),
            commit: commit.to_string(),
            rule: rule.to_owned(),
            detail,
        })
    };
    let current = fenced_entry(store, issue);
    let Some(lease) = live_lease(current.as_ref(), now) else {
        refuse(
            "fence",
            format!(
                "nobody holds issue {issue} (last token {}); acquire it before pushing {}",
                current
                    .as_ref()
                    .map(|e| e.lease.token.to_string())
                    .unwrap_or_else(|| "none".into()),
                update.name
            ),
        );
        return None;
    };
    let holder = lease.holder.as_deref().unwrap_or_default();
    match pusher {
        Pusher::Unauthenticated(why) => {
            refuse("identity", why.clone());
            return None;
        }
        Pusher::Known(who) if who != holder => {
            refuse(
                "fence",
                format!(
                    "issue {issue} is held by {holder} (token {}), not by {who}",
                    lease.token
                ),
            );
            return None;
        }
        _ => {}
    }
    let token = push_options.and_then(|opts| {
        opts.iter()
            .rev()
            .find_map(|o| o.strip_prefix(TOKEN_OPTION))
            .map(str::to_owned)
    });
    match token {
        Some(text) => match text.parse::<u64>() {
            Ok(n) if n == lease.token => {}
            Ok(n) => refuse(
                "fence",
                format!(
                    "token {n} is stale: issue {issue} is in tenure {} held by {holder}",
                    lease.token
                ),
            ),
            Err(_) => refuse("fence", format!("push option lease-token={text} is not a number")),
        },
        None if policy.require_token && push_options.is_none() => refuse(
            "fence",
            "lease.requireToken needs the pre-receive hook: git never gives push options to the update hook (run git lease install-hook)".into(),
        ),
        None if policy.require_token => refuse(
            "fence",
            format!(
                "a push to {} must carry -o lease-token=<N> (lease.requireToken); use git lease push",
                update.name
            ),
        ),
        None => {}
    }
    Some(lease.token)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_glob_names_the_issue_its_star_matched() {
        let fences = vec![
            "refs/heads/issue/*".to_owned(),
            "refs/heads/*-wip".to_owned(),
        ];
        let issue = |name| fenced_issue(&fences, name);
        assert_eq!(issue("refs/heads/issue/7").as_deref(), Some("7"));
        assert_eq!(issue("refs/heads/issue/gh/123").as_deref(), Some("gh/123"));
        assert_eq!(issue("refs/heads/x/9-wip").as_deref(), Some("x/9"));
        assert_eq!(issue("refs/heads/main"), None);
        assert_eq!(issue("refs/heads/issue/"), None);
        assert_eq!(issue("refs/heads/issue"), None);
    }
}
