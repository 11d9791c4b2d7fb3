//! The guard on the client: what a working repository's `pre-push` and `pre-commit` hooks
//! (`git lease install-hook --client`) refuse, decided from the lease as this repository
//! reads it (its configured `lease.remote`, or its own refs).
//!
//! A push to a fenced branch (`lease.fence`, as the server reads it) passes only when it
//! carries a token (`-o lease-token=N`, what `git lease push` passes) that is the issue's
//! live tenure, and that tenure is this holder's. A commit on a fenced branch passes only
//! while this holder holds the issue's lease live (and, under `git lease run`, while the
//! tenure it began is still the live one). It is a courtesy to an agent that would go on
//! working after its lease was lost: a hook the client runs is the client's to skip
//! (`--no-verify`), so only the server's hook is a fence.

use chrono::{DateTime, Utc};

use crate::hook::{fenced_issue, TOKEN_OPTION};
use crate::rules::is_live;
use crate::store::{Entry, Store};
use crate::{Holder, IssueId, Result};

/// The fence globs where `lease.fence` names none: the server hook's usual one.
pub const DEFAULT_FENCE: &str = "refs/heads/issue/*";

/// Returns this repository's copy of the fence globs (`lease.fence`), or the usual one.
pub fn fences(store: &Store) -> Vec<String> {
    match store.config_strings("lease.fence") {
        globs if globs.is_empty() => vec![DEFAULT_FENCE.to_owned()],
        globs => globs,
    }
}

/// One line of git's `pre-push` input: `<local ref> <local oid> <remote ref> <remote oid>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedRef {
    /// The ref on the remote that the push updates (or deletes).
    pub remote_ref: String,
}

/// Parses git's `pre-push` input, one ref a line; lines that are not four fields are left out.
pub fn parse_pre_push(input: &str) -> Vec<PushedRef> {
    input
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() == 4).then(|| PushedRef {
                remote_ref: fields[2].to_owned(),
            })
        })
        .collect()
}

/// Returns the lease token a push carries in `args` (the command line of `git push`):
/// the value of its last `-o lease-token=N` / `--push-option=lease-token=N`.
pub fn token_in_push_args<S: AsRef<str>>(args: &[S]) -> Option<u64> {
    let mut token = None;
    let mut iter = args.iter().map(AsRef::as_ref);
    while let Some(arg) = iter.next() {
        let option = match arg {
            "-o" | "--push-option" => iter.next(),
            _ => arg
                .strip_prefix("--push-option=")
                .or_else(|| arg.strip_prefix("-o")),
        };
        if let Some(value) = option.and_then(|o| o.strip_prefix(TOKEN_OPTION)) {
            token = value.parse().ok();
        }
    }
    token
}

/// What the guard said of one ref or commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The fenced ref (or the branch a commit was refused on).
    pub name: String,
    /// The issue it belongs to.
    pub issue: String,
    /// Why, and what to do.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "git-lease guard: refused {}: {}", self.name, self.reason)
    }
}

/// Why `holder`, giving `token` (if any), does not hold `current` live at `now`; `None` when
/// it does.
fn not_holding(
    current: Option<&Entry>,
    holder: &Holder,
    token: Option<u64>,
    now: DateTime<Utc>,
) -> Option<String> {
    let live = current.filter(|e| is_live(e.current(), now));
    let Some(entry) = live else {
        return Some(match current {
            Some(e) => format!(
                "its lease is not live (token {}, {}): your lease is lost",
                e.lease.token,
                e.lease.event.as_str()
            ),
            None => "it was never leased".to_owned(),
        });
    };
    let lease = &entry.lease;
    if lease.holder.as_deref() != Some(holder.as_str()) {
        return Some(format!(
            "its live lease (token {}) is held by {}, not by {holder}: your lease is lost",
            lease.token,
            crate::text::printable(lease.holder.as_deref().unwrap_or("?"))
        ));
    }
    match token {
        Some(t) if t != lease.token => Some(format!(
            "token {t} is stale: the live tenure is token {} (taken again since yours)",
            lease.token
        )),
        _ => None,
    }
}

/// Judges a push of `pushed` refs by `holder`, carrying `token`: each fenced one needs a
/// token, the live tenure's, and that tenure `holder`'s. `current` reads an issue's lease.
pub fn check_push(
    fences: &[String],
    pushed: &[PushedRef],
    holder: &Holder,
    token: Option<u64>,
    mut current: impl FnMut(&IssueId) -> Result<Option<Entry>>,
    now: DateTime<Utc>,
) -> Result<Vec<Refusal>> {
    let mut refusals = Vec::new();
    for update in pushed {
        let Some(issue) = fenced_issue(fences, &update.remote_ref) else {
            continue;
        };
        let refuse = |reason: String| Refusal {
            name: update.remote_ref.clone(),
            issue: issue.clone(),
            reason,
        };
        let Ok(id) = IssueId::new(&issue) else {
            refusals.push(refuse(format!("{issue:?} is not a valid issue id")));
            continue;
        };
        let branch = update
            .remote_ref
            .strip_prefix("refs/heads/")
            .unwrap_or(&update.remote_ref);
        if token.is_none() {
            refusals.push(refuse(format!(
                "a fenced branch of issue {id} takes a push with the live token: run `git lease \
                 push <remote> {branch}` (git push -o {TOKEN_OPTION}N)"
            )));
            continue;
        }
        if let Some(why) = not_holding(current(&id)?.as_ref(), holder, token, now) {
            refusals.push(refuse(format!(
                "issue {id}: {why}; stop work on it (git push --no-verify skips this check, \
                 not the server's)"
            )));
        }
    }
    Ok(refusals)
}

/// Judges a commit on `branch` (a full ref name, `refs/heads/...`) by `holder`: on a fenced
/// branch, `holder` must hold the issue's lease live, with `token` as its tenure when given
/// (`GIT_LEASE_TOKEN` under `git lease run`). `None` when the commit may go on.
pub fn check_commit(
    fences: &[String],
    branch: &str,
    holder: &Holder,
    token: Option<u64>,
    current: impl FnOnce(&IssueId) -> Result<Option<Entry>>,
    now: DateTime<Utc>,
) -> Result<Option<Refusal>> {
    let Some(issue) = fenced_issue(fences, branch) else {
        return Ok(None);
    };
    let Ok(id) = IssueId::new(&issue) else {
        return Ok(None);
    };
    Ok(
        not_holding(current(&id)?.as_ref(), holder, token, now).map(|why| Refusal {
            name: branch.to_owned(),
            issue: issue.clone(),
            reason: format!(
                "issue {id}: {why}; stop work on it, or commit anyway with git commit --no-verify"
            ),
        }),
    )
}
