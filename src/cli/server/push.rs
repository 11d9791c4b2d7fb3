//! `git lease push`: an issue branch pushed with the holder's fencing token, and the answer
//! read from git's as the server's lease rules, its hook or the transport gave it.

use std::io::Write;
use std::process::Stdio;

use git_lease::backend::Backend;
use git_lease::hook;
use git_lease::remote::{
    hook_verdict, read_branch_push, redact_url, redact_urls, BranchPush, HookVerdict, Remote,
};
use git_lease::{Error, IssueId};

use crate::cli::{exit, output, Context, Failure, HolderArg};

/// Pushes an issue branch with the holder's current token as `-o lease-token=<N>`.
pub(crate) fn push(
    ctx: &Context,
    remote_name: Option<&str>,
    branch: Option<&str>,
    holder: &HolderArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let holder = ctx.holder(&holder.name)?;
    let remote_name = remote_name
        .map(str::to_owned)
        .or_else(|| ctx.remote.clone())
        .unwrap_or_else(|| "origin".to_owned());
    let branch = branch_to_push(ctx, branch)?;
    let (full, issue) = fenced_issue(ctx, &branch)?;
    let remote = Remote::new(&ctx.ledger, &remote_name)?;
    let answer = Answer {
        json: ctx.json,
        remote: redact_url(&remote_name),
        branch: full.clone(),
        issue: issue.clone(),
    };
    let token = match held_token(ctx, &remote, &issue, holder.as_str())? {
        Ok(token) => token,
        Err(reason) => return answer.say(out, "refused", None, Some(reason), exit::REFUSED),
    };
    // git's stderr is read to tell a refusal by the lease rules (exit 3) from a failure of the
    // server, its hook or the transport (exit 1), the same way on every transport; it is shown
    // without any URL's credentials.
    let shown = format!(
        "git push -o {}{token} {} {branch}",
        hook::TOKEN_OPTION,
        redact_url(&remote_name)
    );
    // What is pushed, to settle an answer that gets lost.
    let pushing = ctx.ledger.store().tip_of(&full)?;
    let (pushed, stderr) = push_with_token(ctx, &remote_name, &branch, token, &shown)?;
    if pushed.status.success() {
        eprint!("{stderr}");
        return answer.say(out, "pushed", Some(token), None, exit::OK);
    }
    if let Some(line) = stderr
        .lines()
        .find(|l| l.starts_with("git-lease guard: refused"))
    {
        eprint!("{stderr}");
        let reason = format!("by this repository's guard: {line}");
        return answer.say(out, "refused", Some(token), Some(reason), exit::REFUSED);
    }
    if stderr.contains("hook declined") {
        return match hook_verdict(&stderr) {
            HookVerdict::Refused(message) => {
                eprint!("{stderr}");
                let reason = format!("by the server's lease rules: {message}");
                answer.say(out, "refused", Some(token), Some(reason), exit::REFUSED)
            }
            HookVerdict::Failed(message) => Err(Error::HookFailed {
                target: full,
                message,
            }
            .into()),
        };
    }
    let failed = FailedPush {
        pushing,
        status: pushed.status,
        stderr,
        shown,
        token,
    };
    failed.settle(&remote, &answer, out)
}

/// The branch `git lease push` pushes: `branch`, or the one `HEAD` names.
fn branch_to_push(ctx: &Context, branch: Option<&str>) -> Result<String, Failure> {
    if let Some(branch) = branch {
        return Ok(branch.to_owned());
    }
    match ctx.ledger.store().head_name()? {
        Some(name) => Ok(name.trim_start_matches("refs/heads/").to_owned()),
        None => Err(Error::InvalidInput("HEAD is detached: name the branch to push".into()).into()),
    }
}

/// The full name of `branch` and the issue it is fenced for, by the server's rule on this
/// repository's copy of the fence globs (or the usual one); a branch no fence covers is refused.
fn fenced_issue(ctx: &Context, branch: &str) -> Result<(String, IssueId), Failure> {
    let fences = git_lease::guard::fences(ctx.ledger.store())?;
    let full = format!("refs/heads/{}", branch.trim_start_matches("refs/heads/"));
    let issue_part = hook::fenced_issue(&fences, &full).ok_or_else(|| {
        Error::InvalidInput(format!(
            "{full} is not a fenced issue branch (lease.fence: {}); name the branch, or set lease.fence as the server does",
            fences.join(", ")
        ))
    })?;
    Ok((full, IssueId::new(&issue_part)?))
}

/// The token of `holder`'s live lease on `issue` at `remote`, or why there is none to push
/// with.
fn held_token(
    ctx: &Context,
    remote: &Remote,
    issue: &IssueId,
    holder: &str,
) -> Result<Result<u64, String>, Failure> {
    let current = remote.current(issue)?;
    let live = current
        .as_ref()
        .filter(|e| git_lease::is_live(e.current(), ctx.now));
    Ok(match live {
        Some(e) if e.lease.holder.as_deref() == Some(holder) => Ok(e.lease.token),
        Some(e) => Err(format!(
            "issue {issue} is held by {} (token {}), not by {holder}",
            output::printable(e.lease.holder.as_deref().unwrap_or("?")),
            e.lease.token
        )),
        None => Err(format!("you do not hold issue {issue}; acquire it first")),
    })
}

/// The answer of `git lease push`: a line on stderr (git's own output is there too), or one
/// JSON object.
struct Answer {
    json: bool,
    /// The remote, without credentials.
    remote: String,
    branch: String,
    issue: IssueId,
}

impl Answer {
    /// Says the outcome and returns `code`.
    fn say(
        &self,
        out: &mut dyn Write,
        outcome: &str,
        token: Option<u64>,
        reason: Option<String>,
        code: u8,
    ) -> Result<u8, Failure> {
        if self.json {
            let value = serde_json::json!({
                "outcome": outcome,
                "remote": self.remote,
                "branch": self.branch,
                "issue": self.issue.as_str(),
                "token": token,
                "reason": reason,
            });
            crate::cli::output::json::json_line(out, &value)?;
        } else if let Some(reason) = reason {
            eprintln!("error: push refused: {reason}");
        }
        Ok(code)
    }
}

/// A push that git did not report as done, nor refused by a hook or the guard.
struct FailedPush {
    /// The commit pushed, if the branch exists here.
    pushing: Option<gix::ObjectId>,
    status: std::process::ExitStatus,
    stderr: String,
    /// The command as shown, without credentials.
    shown: String,
    token: u64,
}

impl FailedPush {
    /// Its outcome. A push that broke off before the server's report may have landed. The server
    /// is asked where the branch is now: at the commit pushed, the work is there and the outcome
    /// known. Otherwise it is unknown, and pushing the same branch again converges (git finds it
    /// up to date).
    fn settle(self, remote: &Remote, answer: &Answer, out: &mut dyn Write) -> Result<u8, Failure> {
        let full = &answer.branch;
        let mut message = self.stderr.trim().to_owned();
        if message.is_empty() {
            message = format!("git exited with {}", self.status);
        }
        Err(match read_branch_push(&self.stderr) {
            BranchPush::Unknown => {
                let there = self.pushing.and_then(|commit| {
                    (remote.branch(full).ok().flatten() == Some(commit)).then_some(commit)
                });
                if let Some(commit) = there {
                    eprint!("{}", self.stderr);
                    eprintln!(
                        "warning: the server's answer was lost, but its {full} is at {commit}: \
                         the branch is there"
                    );
                    return answer.say(out, "pushed", Some(self.token), None, exit::OK);
                }
                Error::OutcomeUnknown {
                    command: self.shown,
                    message,
                }
            }
            BranchPush::Locked(lock) => Error::RemoteLocked {
                remote: answer.remote.clone(),
                target: full.clone(),
                message: lock,
            },
            BranchPush::Failed => Error::Transport {
                command: self.shown,
                message,
            },
        }
        .into())
    }
}

/// Pushes `branch` to `remote` with the holder's `token` as a push option; a server that takes
/// no push options runs no hook that could read it, so the branch goes there again without it
/// (this repository's guard checks the token itself), which is said on stderr. Returns git's
/// answer and its stderr, without any URL's credentials.
fn push_with_token(
    ctx: &Context,
    remote: &str,
    branch: &str,
    token: u64,
    shown: &str,
) -> Result<(std::process::Output, String), Error> {
    let pushed = push_branch(ctx, remote, branch, token, true, shown)?;
    let stderr = redact_urls(&String::from_utf8_lossy(&pushed.stderr));
    if pushed.status.success() || !stderr.contains(git_lease::guard::NO_PUSH_OPTIONS) {
        return Ok((pushed, stderr));
    }
    eprintln!(
        "git lease: {} takes no push options: pushing {branch} without -o {}{token}",
        redact_url(remote),
        hook::TOKEN_OPTION
    );
    let pushed = push_branch(ctx, remote, branch, token, false, shown)?;
    let stderr = redact_urls(&String::from_utf8_lossy(&pushed.stderr));
    Ok((pushed, stderr))
}

/// Runs `git push` of `branch` to `remote` for `git lease push`, with the holder's `token` as
/// a push option when `with_option`, and always in `GIT_LEASE_PUSH_TOKEN` for this
/// repository's guard; git's stderr is captured.
fn push_branch(
    ctx: &Context,
    remote: &str,
    branch: &str,
    token: u64,
    with_option: bool,
    shown: &str,
) -> Result<std::process::Output, Error> {
    let mut cmd = git_lease::git::command(ctx.ledger.store().git_dir());
    cmd.arg("push");
    if with_option {
        cmd.arg("-o").arg(format!("{}{token}", hook::TOKEN_OPTION));
    }
    let child = cmd
        .arg("--")
        .arg(remote)
        .arg(branch)
        .env("LC_ALL", "C")
        .env("GIT_LEASE_PUSH_TOKEN", token.to_string())
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Transport {
            command: shown.to_owned(),
            message: format!("cannot run git: {e}"),
        })?;
    child.wait_with_output().map_err(|e| Error::Transport {
        command: shown.to_owned(),
        message: format!("cannot wait for git: {e}"),
    })
}
