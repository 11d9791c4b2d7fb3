//! Server-side enforcement: what a receiving repository accepts into `refs/leases/*` and into
//! fenced work branches.
//!
//! A check each client can skip is not a check, so the server that receives pushes runs this
//! from its `pre-receive` (or `update`) hook. Lease refs get the same transition rules as
//! `verify` and `sync` ([`crate::verify::check_step`]), plus what only a server can judge: its
//! own clock, the authenticated pusher, who may revoke. Fenced branches
//! (`lease.fence = refs/heads/issue/*`) accept pushes only from the live holder of the issue
//! named by the branch's last path component, and, when the push carries
//! `-o lease-token=<N>`, only with the live tenure's token.

use chrono::{DateTime, Duration, Utc};
use gix::ObjectId;

use crate::issue::{IssueId, REF_PREFIX};
use crate::lease::{Event, Lease};
use crate::rules::{is_live, live_holder};
use crate::store::Store;
use crate::verify;

/// The push option that carries the pusher's fencing token.
pub const TOKEN_OPTION: &str = "lease-token=";

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
    /// How far `at`/`acquired_at` may be from the server's clock (`lease.maxClockSkew`).
    pub max_skew: Duration,
    /// Where the pusher's identity comes from (`lease.identity`, `lease.pusherEnv`).
    pub identity: Identity,
    /// Who may revoke someone else's live lease (`lease.admins`).
    pub admins: Vec<String>,
    /// Globs of fenced refs (`lease.fence`).
    pub fences: Vec<String>,
    /// Refuse fenced pushes without `lease-token` (`lease.requireToken`).
    pub require_token: bool,
}

impl Policy {
    /// Reads the policy from the repository's configuration.
    pub fn from_config(store: &Store) -> Result<Policy, crate::Error> {
        let max_skew = match store.config_string("lease.maxClockSkew") {
            None => Duration::minutes(5),
            Some(text) => {
                let std = humantime::parse_duration(&text).map_err(|e| {
                    crate::Error::InvalidInput(format!("lease.maxClockSkew {text:?}: {e}"))
                })?;
                Duration::from_std(std).map_err(|e| {
                    crate::Error::InvalidInput(format!("lease.maxClockSkew {text:?}: {e}"))
                })?
            }
        };
        let identity = match store.config_string("lease.identity").as_deref() {
            Some("push-cert") => Identity::PushCert,
            Some("env") | None => match store.config_string("lease.pusherEnv") {
                Some(var) if !var.is_empty() => Identity::Env(var),
                _ => Identity::None,
            },
            Some(other) => {
                return Err(crate::Error::InvalidInput(format!(
                    "lease.identity {other:?}: expected push-cert or env"
                )))
            }
        };
        let admins = store
            .config_strings("lease.admins")
            .iter()
            .flat_map(|v| v.split([',', ' ']))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let require_token = store.config_string("lease.requireToken").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "1")
        });
        Ok(Policy {
            max_skew,
            identity,
            admins,
            fences: store.config_strings("lease.fence"),
            require_token,
        })
    }
}

/// Who pushed, as the server established it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pusher {
    /// No identity is configured.
    Unknown,
    /// Identity is configured but the push did not establish one (unsigned, bad signature,
    /// variable unset).
    Unauthenticated(String),
    /// The authenticated pusher.
    Known(String),
}

impl Pusher {
    /// Establishes the pusher from the hook's environment under `identity`.
    pub fn from_env(identity: &Identity) -> Pusher {
        match identity {
            Identity::None => Pusher::Unknown,
            Identity::PushCert => {
                let status = std::env::var("GIT_PUSH_CERT_STATUS").unwrap_or_default();
                let signer = std::env::var("GIT_PUSH_CERT_SIGNER").unwrap_or_default();
                if status != "G" {
                    Pusher::Unauthenticated(if status.is_empty() {
                        "the push is not signed (use git push --signed)".into()
                    } else {
                        format!("the push certificate's status is {status}, not G (good)")
                    })
                } else if signer.trim().is_empty() {
                    Pusher::Unauthenticated(
                        "the push certificate's key is not in the allowed signers".into(),
                    )
                } else {
                    Pusher::Known(signer.trim().to_owned())
                }
            }
            Identity::Env(var) => match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => Pusher::Known(v.trim().to_owned()),
                _ => Pusher::Unauthenticated(format!("the server did not set {var}")),
            },
        }
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
                "git-lease: refused issue {} at {short}: {}: {detail}",
                crate::text::printable(issue),
                self.rule
            ),
            None => write!(
                f,
                "git-lease: refused {} at {short}: {}: {detail}",
                crate::text::printable(&self.name),
                self.rule
            ),
        }
    }
}

/// Checks every update of one push; returns every refusal (empty: accept).
pub fn check_push(
    store: &Store,
    policy: &Policy,
    pusher: &Pusher,
    push_options: Option<&[String]>,
    updates: &[RefUpdate],
    now: DateTime<Utc>,
) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    for update in updates {
        if update.name.starts_with(REF_PREFIX) {
            check_lease_update(store, policy, pusher, update, now, &mut refusals);
        } else if let Some(issue) = fenced_issue(&policy.fences, &update.name) {
            check_fenced_update(
                store,
                policy,
                pusher,
                push_options,
                update,
                &issue,
                now,
                &mut refusals,
            );
        }
    }
    refusals
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
    if update.new.is_null() {
        refuse(
            update.old,
            "deletion",
            "lease refs are never deleted: the token count must survive".into(),
        );
        return;
    }
    if let Pusher::Unauthenticated(why) = pusher {
        refuse(update.new, "identity", why.clone());
        return;
    }
    let base = (!update.old.is_null()).then_some(update.old);
    let check = verify::verify_segment(store, issue, update.new, base);
    if let Some(first) = check.findings.first() {
        let commit = ObjectId::from_hex(first.commit.as_bytes()).unwrap_or(update.new);
        refuse(commit, first.rule.as_str(), first.detail.clone());
        return;
    }
    // The chain is legitimate by the recorded times; now judge the new commits by the
    // server's clock and the pusher's identity, oldest first.
    let mut prev = check.base.as_ref();
    for (commit, lease) in &check.steps {
        if let Some((rule, detail)) = server_rules(policy, pusher, prev, lease, now) {
            refuse(*commit, rule, detail);
            return;
        }
        prev = Some(lease);
    }
}

/// The rules only a server can apply to one new step: its clock, the pusher, admins.
fn server_rules(
    policy: &Policy,
    pusher: &Pusher,
    prev: Option<&Lease>,
    next: &Lease,
    now: DateTime<Utc>,
) -> Option<(&'static str, String)> {
    let skew = policy.max_skew;
    let off = |t: DateTime<Utc>| (t - now).abs() > skew;
    if off(next.at) {
        return Some((
            "clock-skew",
            format!(
                "the event time {} is more than {} from the server's clock {}",
                crate::time::format_instant(next.at),
                crate::time::short_duration(skew),
                crate::time::format_instant(now)
            ),
        ));
    }
    // acquired_at and expires_at need no check of their own: verify requires a new
    // tenure's acquired_at to be its `at`, and expires_at to be after `at`.
    // Takeover only after expiry or release, by the server's clock.
    if let Some(prev) = prev {
        if next.event == Event::Acquire && !process_gone_takeover(prev, next) {
            if let Some(live) = live_holder(prev, now) {
                if Some(live) != next.holder.as_deref() {
                    return Some((
                        "holder-change",
                        format!(
                            "{live} holds the lease (token {}) until {} by the server's clock",
                            prev.token,
                            prev.expires_at
                                .map(crate::time::format_instant)
                                .unwrap_or_else(|| "released".into())
                        ),
                    ));
                }
            }
        }
        if next.event.frees()
            && next.event != Event::Revoke
            && is_live(prev, now)
            && !process_gone_takeover(prev, next)
        {
            let holder = prev.holder.as_deref().unwrap_or_default();
            if next.actor() != Some(holder) {
                return Some((
                    "not-holder",
                    format!("only the holder {holder} may {} a live lease", next.event),
                ));
            }
        }
    }
    let Pusher::Known(who) = pusher else {
        return None;
    };
    if next.event == Event::Revoke {
        let freed_someone_else = prev
            .and_then(|p| live_holder(p, now))
            .is_some_and(|h| h != who);
        if freed_someone_else && !policy.admins.iter().any(|a| a == who) {
            return Some((
                "admin",
                format!(
                    "{who} is not in lease.admins and may not revoke another holder's live lease"
                ),
            ));
        }
    }
    if next.actor() != Some(who.as_str()) {
        return Some((
            "identity",
            format!(
                "the commit records {} as acting, but {who} pushed it",
                next.actor().unwrap_or("nobody")
            ),
        ));
    }
    None
}

/// Returns true for an acquire that records taking over from a holder process that is gone,
/// when that is plausible: the previous tenure recorded its process and, if it ran on this
/// very machine, the process is indeed gone.
fn process_gone_takeover(prev: &Lease, next: &Lease) -> bool {
    let Some(process) = &prev.process else {
        return false;
    };
    if next.takeover != Some(crate::lease::Takeover::ProcessGone) {
        return false;
    }
    match crate::liveness::LocalHost::detect() {
        Some(host) if host.is_same_machine(process) => host.is_gone(process),
        _ => true,
    }
}

/// Returns the issue a fenced ref belongs to: its last path component, when `name` matches
/// one of `fences`.
pub fn fenced_issue(fences: &[String], name: &str) -> Option<String> {
    if !fences.iter().any(|glob| glob_match(glob, name)) {
        return None;
    }
    name.rsplit('/').next().map(str::to_owned)
}

/// Matches `*` against any run of characters (including `/`), everything else literally.
fn glob_match(glob: &str, text: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    if parts.len() == 1 {
        return glob == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
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
) {
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
    let current = IssueId::new(issue)
        .ok()
        .and_then(|id| store.current(&id).ok().flatten());
    let live = current
        .as_ref()
        .filter(|e| is_live(&e.lease, now))
        .map(|e| &e.lease);
    let Some(lease) = live else {
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
        return;
    };
    let holder = lease.holder.as_deref().unwrap_or_default();
    match pusher {
        Pusher::Unauthenticated(why) => {
            refuse("identity", why.clone());
            return;
        }
        Pusher::Known(who) if who != holder => {
            refuse(
                "fence",
                format!(
                    "issue {issue} is held by {holder} (token {}), not by {who}",
                    lease.token
                ),
            );
            return;
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
    fn fence_globs() {
        let fences = vec!["refs/heads/issue/*".to_owned()];
        assert_eq!(
            fenced_issue(&fences, "refs/heads/issue/7").as_deref(),
            Some("7")
        );
        assert_eq!(fenced_issue(&fences, "refs/heads/main"), None);
        assert!(glob_match("refs/*/issue-*", "refs/heads/issue-9"));
        assert!(!glob_match("refs/heads/issue/*", "refs/heads/issue"));
    }
}
