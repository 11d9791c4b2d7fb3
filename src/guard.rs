//! The guard on the client: what a working repository's `pre-push` and `pre-commit` hooks
//! (`git lease install-hook --client`) refuse, decided from the lease as this repository
//! reads it (its configured `lease.remote`, or its own refs).
//!
//! A push to a fenced branch (`lease.fence`, as the server reads it) passes only when this
//! holder holds the issue's live tenure. Where the server takes push options, the push must
//! also carry that tenure's token (`-o lease-token=N`, what `git lease push` passes), so that
//! a server's hook can check it. Where it takes none (a plain bare repository, a host that
//! runs no hook: [`takes_push_options`]), the guard checks the holder, and a token the push
//! names, itself, and lets the push go without `-o`. A commit on a fenced branch passes only
//! while this holder holds the issue's lease live (and, under `git lease run`, while the
//! tenure it began is still the live one). It is a courtesy to an agent that would go on
//! working after its lease was lost: a hook the client runs is the client's to skip
//! (`--no-verify`), so only the server's hook is a fence.

use std::path::Path;

use chrono::{DateTime, Utc};

use crate::hook::{fence_globs, fenced_issue, TOKEN_OPTION};
use crate::rules::is_live;
use crate::store::{Entry, Store};
use crate::{Error, Holder, IssueId, Result};

/// The fence globs where `lease.fence` names none: the server hook's usual one.
pub use crate::hook::DEFAULT_FENCE;

/// Returns this repository's copy of the fence globs, read as the server reads them
/// (`lease.fence`, or the usual one; an empty value clears them).
pub fn fences(store: &Store) -> Result<Vec<String>> {
    Ok(fence_globs(store)?.0)
}

/// One line of git's `pre-push` input: `<local ref> <local oid> <remote ref> <remote oid>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedRef {
    /// What is pushed there: the local object id (all zeros for a deletion).
    pub local_oid: String,
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
                local_oid: fields[1].to_owned(),
                remote_ref: fields[2].to_owned(),
            })
        })
        .collect()
}

/// What git says of a push option the server does not take.
pub const NO_PUSH_OPTIONS: &str = "does not support push options";

/// Returns whether the server at `url` takes push options, asked the way a push asks it: a
/// dry run of `pushed` (nothing is sent) that carries one option, which git refuses before
/// anything else for a server that does not advertise them ([`NO_PUSH_OPTIONS`]). Any other
/// outcome counts as taking them: the push itself then meets what the dry run met.
pub fn takes_push_options(git_dir: &Path, url: &str, pushed: &PushedRef) -> Result<bool> {
    let source = if pushed.local_oid.bytes().all(|b| b == b'0') {
        String::new()
    } else {
        pushed.local_oid.clone()
    };
    let refspec = format!("{source}:{}", pushed.remote_ref);
    let mut cmd = crate::git::command(git_dir);
    cmd.env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(["push", "--dry-run", "--no-verify", "--porcelain"])
        .args(["-o", "lease-guard-probe", "--"])
        .arg(url)
        .arg(&refspec);
    let out = crate::git::output(&mut cmd).map_err(|e| Error::Io {
        context: "cannot run git push --dry-run to learn whether the server takes push options"
            .into(),
        source: e,
    })?;
    Ok(!String::from_utf8_lossy(&out.stderr).contains(NO_PUSH_OPTIONS))
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

/// How a push reaches the server's fence, as far as the guard can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carrier {
    /// The server takes push options: a fenced push carries its token there.
    PushOptions,
    /// The server takes none: the guard is the one to check the holder and the token.
    Guard,
}

/// Judges a push of `pushed` refs by `holder`, naming `token`: each fenced one needs the
/// issue's live tenure to be `holder`'s (and `token`'s, when given). Where `carrier` is
/// [`Carrier::PushOptions`] the push must carry the token too, for the server to check.
/// `current` reads an issue's lease.
pub fn check_push(
    fences: &[String],
    pushed: &[PushedRef],
    holder: &Holder,
    token: Option<u64>,
    carrier: Carrier,
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
        if token.is_none() && carrier == Carrier::PushOptions {
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
