//! Writing to a remote: a push with an expected old value is the compare-and-swap; a hook's
//! refusal is told apart from a lost race ([`hook_verdict`]); what the remote accepted is
//! recorded in the tracking ref and the local ledger ref. Every message git prints passes
//! through [`redact_urls`] first, so no credential of a remote URL reaches a user.

use std::process::Command;

use gix::ObjectId;

use super::Remote;
use crate::cas;
use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::lease::Lease;

/// What the server's hooks said about a push they declined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookVerdict {
    /// The git-lease hook refused it by the lease rules: its lines, joined with `; `.
    Refused(String),
    /// No line carries the mark: the hook failed to start or crashed, or another hook (or the
    /// server's own access rules) declined the push. What the server said, joined with `; `.
    Failed(String),
}

impl HookVerdict {
    /// Returns the error of a push of `issues` that the server's hooks declined: a refusal by
    /// the lease rules ([`Error::PushRefused`], exit 3), or a failure of the server's hook
    /// ([`Error::HookFailed`], exit 1).
    pub(crate) fn into_error(self, issues: &[IssueId]) -> Error {
        match self {
            HookVerdict::Refused(message) => Error::PushRefused {
                issue: cas::names(issues),
                message,
            },
            HookVerdict::Failed(message) => Error::HookFailed {
                target: issues
                    .iter()
                    .map(IssueId::ref_name)
                    .collect::<Vec<_>>()
                    .join(" "),
                message,
            },
        }
    }
}

/// Sorts a declined push by the server's `remote:` lines in git's `stderr`: a refusal by the
/// lease rules carries [`crate::hook::REFUSAL_MARK`] at the start of a line; anything else is a
/// failure of the server's hook.
pub fn hook_verdict(stderr: &str) -> HookVerdict {
    let said: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if said
        .iter()
        .any(|l| l.starts_with(crate::hook::REFUSAL_MARK))
    {
        HookVerdict::Refused(said.join("; "))
    } else if said.is_empty() {
        HookVerdict::Failed("it declined the push without saying why".to_owned())
    } else {
        HookVerdict::Failed(said.join("; "))
    }
}

/// Runs a git command of a remote (a fetch or a push) for at most `limit` (`None`: as long as
/// it takes), through [`crate::git::output_within`], so that [`crate::git::stop_commands`]
/// can end it; its stderr is returned with every URL's credentials removed, since it ends up
/// in messages. A command still running at the limit is killed and reported as a transport
/// failure: a remote that accepts a connection and never answers must not hold a claim, or
/// the agent behind it, forever.
pub(super) fn run(
    mut cmd: Command,
    shown: &str,
    limit: Option<std::time::Duration>,
) -> Result<std::process::Output> {
    let transport = |message: String| Error::Transport {
        command: shown.to_owned(),
        message,
    };
    let (mut out, timed_out) = crate::git::output_within(&mut cmd, limit)
        .map_err(|e| transport(format!("cannot run git: {e}")))?;
    if timed_out {
        let limit = limit.map_or_else(String::new, |l| humantime::format_duration(l).to_string());
        return Err(transport(format!(
            "no answer within {limit} (lease.networkTimeout): the remote is unreachable or stalled"
        )));
    }
    out.stderr = redact_urls(&String::from_utf8_lossy(&out.stderr)).into_bytes();
    Ok(out)
}

/// Returns `url` without credentials, as git shows remotes: `https://alice:secret@host/r`
/// becomes `https://host/r`. Anything that is not a URL with credentials is returned as is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Removes the credentials of every URL in `text` ([`redact_url`] applied word by word).
pub fn redact_urls(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(&redact_url(word));
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() || matches!(c, '\'' | '"' | '<' | '>') {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// What one push told us.
pub(crate) enum PushResult {
    /// The remote took it.
    Done,
    /// The remote's ref was not at the expected value: the race was lost.
    Lost,
    /// A hook declined it.
    Declined(HookVerdict),
}

impl Remote<'_> {
    /// Sets the tracking ref and the local lease ref to what the remote accepted, on top of
    /// `parent`. Both are copies: the remote has the write, so a lock another command in this
    /// clone holds (or any other failure here) must not fail it; the next read catches up.
    pub(crate) fn record_accepted(
        &self,
        issue: &IssueId,
        commit: ObjectId,
        parent: Option<ObjectId>,
        lease: &Lease,
    ) {
        let store = self.ledger.store();
        let message = format!("git-lease: {} via {}", lease.event, self.shown);
        if store
            .move_refs(&[(self.tracking_ref(issue), commit, parent)], &message)
            .is_ok()
        {
            self.memory.remember([(issue.as_str(), commit)]);
        }
        // The local ledger follows the remote, but no history of its own is lost: one the
        // new tip does not descend from (claims made here) is kept aside first, and said so.
        // The tip is the one read before the push: a fetch refspec the user configured for
        // the remote makes git's push move the local ref itself.
        let before = self.local_before_push.borrow_mut().remove(issue.as_str());
        let local = match before {
            Some(local) => local,
            None => store.tip_of(&issue.ref_name()).ok().flatten(),
        };
        if let Some(local) = local.filter(|l| !crate::verify::descends_from(store, commit, *l)) {
            let why = format!("git-lease: kept before {} via {}", lease.event, self.shown);
            match crate::mirror::keep_diverged(store, issue, local, &why) {
                Ok(kept) => self.ledger.notice(format!(
                    "the local ledger of {issue} had history {} lacks; it is kept as {kept}, and refs/leases/{issue} now follows {}",
                    self.shown, self.shown
                )),
                Err(e) => {
                    self.ledger.notice(format!(
                        "the local ledger of {issue} had history {} lacks and could not be kept aside ({e}); it was left as it is",
                        self.shown
                    ));
                    return;
                }
            }
        }
        let _ = store.set_ref(&issue.ref_name(), commit, &message);
    }

    /// Pushes `edits` as `(issue, new, expected old)` in one atomic push with a lease on each
    /// old value.
    pub(crate) fn push(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
    ) -> Result<PushResult> {
        self.check_writes_allowed()?;
        {
            let store = self.ledger.store();
            let mut before = self.local_before_push.borrow_mut();
            for (issue, _, _) in edits {
                before.insert(issue.as_str().to_owned(), store.tip_of(&issue.ref_name())?);
            }
        }
        let mut cmd = self.git();
        cmd.args(["push", "--porcelain", "--atomic", "--no-verify"]);
        for (issue, _, old) in edits {
            cmd.arg(format!(
                "--force-with-lease={}:{}",
                issue.ref_name(),
                old.map(|o| o.to_string()).unwrap_or_default()
            ));
        }
        cmd.arg("--").arg(&self.remote);
        for (issue, new, _) in edits {
            cmd.arg(format!("{new}:{}", issue.ref_name()));
        }
        let shown = format!("git push --atomic {} refs/leases/…", self.shown);
        let out = run(cmd, &shown, self.network_timeout)?;
        if out.status.success() {
            return Ok(PushResult::Done);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let rejections: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
        if rejections.iter().any(|l| l.contains("hook declined")) {
            return Ok(PushResult::Declined(hook_verdict(&stderr)));
        }
        const LOST: [&str; 8] = [
            "stale info",
            "atomic push failed",
            "atomic transaction failed",
            "failed to update ref",
            "cannot lock ref",
            "incorrect old value",
            "fetch first",
            "non-fast-forward",
        ];
        if !rejections.is_empty()
            && rejections
                .iter()
                .all(|l| LOST.iter().any(|reason| l.contains(reason)))
        {
            return Ok(PushResult::Lost);
        }
        let detail = if rejections.is_empty() {
            stderr.trim().to_owned()
        } else {
            format!("{}\n{}", rejections.join("\n"), stderr.trim())
        };
        Err(Error::Transport {
            command: shown,
            message: detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declined_push_is_a_refusal_only_when_a_line_carries_the_mark() {
        let refused = "To git://h/r\n! [remote rejected] x -> refs/leases/7 (pre-receive hook declined)\n\
                       remote: git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice\n";
        assert_eq!(
            hook_verdict(refused),
            HookVerdict::Refused(
                "git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice".into()
            )
        );
        // gitolite's VREF: its own line follows ours.
        let vref = "remote: git-lease: refused issue 7 at 0123456789ab: identity: x\n\
                    remote: FATAL: VREF/LEASE: helper program exit status 256\n";
        assert!(matches!(hook_verdict(vref), HookVerdict::Refused(_)));
        for failed in [
            "remote: hooks/pre-receive: 3: exec: /root/bin/git-lease: Permission denied\n",
            "remote: policy says no (git-lease: refused is quoted, not the mark)\n",
            "remote: FATAL: + refs/leases/7 leases bob DENIED by fallthru\n",
        ] {
            assert!(
                matches!(hook_verdict(failed), HookVerdict::Failed(_)),
                "{failed}"
            );
        }
        assert_eq!(
            hook_verdict("error: failed to push some refs\n"),
            HookVerdict::Failed("it declined the push without saying why".into())
        );
    }

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(
            redact_url("http://alice:secret@127.0.0.1:8080/r.git"),
            "http://127.0.0.1:8080/r.git"
        );
        assert_eq!(redact_url("https://token@host/r"), "https://host/r");
        assert_eq!(redact_url("origin"), "origin");
        assert_eq!(redact_url("git@host:r.git"), "git@host:r.git");
        assert_eq!(redact_url("ssh://git@host/r@x"), "ssh://host/r@x");
        assert_eq!(
            redact_urls("fatal: unable to access 'http://a:pw@h/r/': refused"),
            "fatal: unable to access 'http://h/r/': refused"
        );
    }
}
