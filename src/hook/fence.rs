//! Fenced work branches: the issue a fenced ref belongs to, the check of a push's update of
//! one, and the approval it leaves for the ref transaction that lands it, which is judged
//! again there ([`check_transaction`]).

use chrono::{DateTime, Utc};

use super::{Policy, Pusher, RefUpdate, Refusal, TOKEN_OPTION};
use crate::issue::IssueId;
use crate::lease::Lease;
use crate::probe::PROBE_PREFIX;
use crate::rules::is_live;
use crate::store::Store;

/// Where, in the served repository's git dir, the push check leaves one file per fenced
/// update it approved, for the ref transaction that lands it ([`check_transaction`]).
pub const FENCE_APPROVALS_DIR: &str = "lease-fence-approvals";

/// How long an approval no transaction took stays (a push refused after the check, by
/// another hook or a lost connection, leaves its approvals behind).
const APPROVAL_LIFETIME: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A fenced update the push check accepted: in the tenure of `token`, by `pusher`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Approval {
    pub(super) update: RefUpdate,
    pub(super) token: u64,
    pub(super) pusher: Option<String>,
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

pub(super) fn record_approvals(store: &Store, approvals: &[Approval]) -> std::io::Result<()> {
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

/// Judges a push's update of a fenced ref of `issue` at `now`: the issue must be live, held
/// by the pusher where the pusher is known, and in the tenure of the token the push carries
/// (or must carry, [`Policy::require_token`]). Returns the live tenure's token when the update
/// may go on; adds a refusal otherwise.
pub(super) fn check_fenced_update(
    store: &Store,
    policy: &Policy,
    pusher: &Pusher,
    push_options: Option<&[String]>,
    update: &RefUpdate,
    issue: &str,
    now: DateTime<Utc>,
) -> Result<u64, Refusal> {
    let commit = if update.new.is_null() {
        update.old
    } else {
        update.new
    };
    let refuse = |rule: &str, detail: String| Refusal {
        name: update.name.clone(),
        commit: commit.to_string(),
        rule: rule.to_owned(),
        detail,
    };
    let current = fenced_entry(store, issue);
    let Some(lease) = live_lease(current.as_ref(), now) else {
        return Err(refuse(
            "fence",
            format!(
                "nobody holds issue {issue} (last token {}); acquire it before pushing {}",
                current
                    .as_ref()
                    .map(|e| e.lease.token.to_string())
                    .unwrap_or_else(|| "none".into()),
                update.name
            ),
        ));
    };
    let holder = lease.holder.as_deref().unwrap_or_default();
    match pusher {
        Pusher::Unauthenticated(why) => return Err(refuse("identity", why.clone())),
        Pusher::Known(who) if who != holder => {
            return Err(refuse(
                "fence",
                format!(
                    "issue {issue} is held by {holder} (token {}), not by {who}",
                    lease.token
                ),
            ))
        }
        _ => {}
    }
    match token_problem(policy, push_options, &update.name, issue, lease) {
        Some(detail) => Err(refuse("fence", detail)),
        None => Ok(lease.token),
    }
}

/// What is wrong with the token a fenced push carries in `push_options` (`None` when the hook
/// got none: the update hook), for the live `lease` of `issue`; `None` when nothing is.
fn token_problem(
    policy: &Policy,
    push_options: Option<&[String]>,
    name: &str,
    issue: &str,
    lease: &Lease,
) -> Option<String> {
    let holder = lease.holder.as_deref().unwrap_or_default();
    let token =
        push_options.and_then(|opts| opts.iter().rev().find_map(|o| o.strip_prefix(TOKEN_OPTION)));
    match token {
        Some(text) => match text.parse::<u64>() {
            Ok(n) if n == lease.token => None,
            Ok(n) => Some(format!(
                "token {n} is stale: issue {issue} is in tenure {} held by {holder}",
                lease.token
            )),
            Err(_) => Some(format!("push option lease-token={text} is not a number")),
        },
        None if policy.require_token && push_options.is_none() => Some(
            "a fenced push needs its token (lease.requireToken), which git never gives the \
             update hook: run git lease install-hook (pre-receive)"
                .into(),
        ),
        None if policy.require_token => Some(format!(
            "a push to {name} must carry the live token, -o lease-token=<N> \
             (lease.requireToken); use git lease push, to a server that takes push options"
        )),
        None => None,
    }
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
