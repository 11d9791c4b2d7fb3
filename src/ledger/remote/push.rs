//! Writing to a remote: a push with an expected old value is the compare-and-swap (atomic when
//! several refs move); what the server said of a push it refused is read by
//! [`super::refusal`] (a lost race, a hook's refusal, a failure); what the remote accepted is
//! recorded in the tracking ref and the local ledger ref. Every message git prints passes
//! through [`redact_urls`] first, so no credential of a remote URL reaches a user.

use std::process::Command;

use gix::ObjectId;

use super::refusal::{self, HookVerdict, Reading};
use super::Remote;
use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::lease::Lease;
use crate::store::ARCHIVE_REF;

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

/// Returns `url` without credentials ([`crate::redact::url`]).
pub fn redact_url(url: &str) -> String {
    crate::redact::url(url)
}

/// Removes the credentials of every URL in `text` ([`crate::redact::urls`]).
pub fn redact_urls(text: &str) -> String {
    crate::redact::urls(text)
}

/// What one push told us.
pub(crate) enum PushResult {
    /// The remote took it.
    Done,
    /// The remote's ref was not at the expected value: the race was lost.
    Lost,
    /// A lock file on the server stood in the way of the update (what the server said): a
    /// concurrent writer's, for a moment, or one a killed git process left behind. Read again
    /// and decide again, as after a lost race; a lock still there after every attempt is
    /// [`Error::RemoteLocked`].
    Locked(String),
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
        // A ledger revived from the archive may never have been tracked here.
        let tracked = store.tip_of(&self.tracking_ref(issue)).ok().flatten();
        let from = tracked.and(parent);
        if store
            .move_refs(&[(self.tracking_ref(issue), commit, from)], &message)
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

    /// Pushes `edits` as `(issue, new, expected old)` with a lease on each old value: in one
    /// atomic push when several refs move (all or none), as a plain push when one does (it is
    /// the same compare-and-swap, and a server without the `atomic` capability takes it).
    ///
    /// Returns [`Error::AtomicUnsupported`] when several refs move and the server cannot take
    /// them all or none: git refuses before it sends anything, so nothing was pushed.
    pub(crate) fn push(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
    ) -> Result<PushResult> {
        self.push_guarded(edits, None)
    }

    /// Pushes `edits` as [`Remote::push`] does; with `archive`, only while the remote's
    /// archive is still that fold: the push then also offers `refs/lease-archive` at that very
    /// value, with a lease on it, all or none. git sends nothing for a ref already at the
    /// value pushed, and refuses the whole push, before it sends anything, when the remote's
    /// archive moved (`stale info`): a lost race, read again. So a claim of an issue this
    /// clone never saw needs no fetch to know that no fold it has not verified records it.
    pub(crate) fn push_guarded(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
        archive: Option<ObjectId>,
    ) -> Result<PushResult> {
        self.check_writes_allowed()?;
        {
            let store = self.ledger.store();
            let mut before = self.local_before_push.borrow_mut();
            for (issue, _, _) in edits {
                before.insert(issue.as_str().to_owned(), store.tip_of(&issue.ref_name())?);
            }
        }
        let atomic = edits.len() > 1 || archive.is_some();
        let mut cmd = self.git()?;
        // git's own words are read (refusal::read): they must be its untranslated ones.
        cmd.env("LC_ALL", "C")
            .args(["push", "--porcelain", "--no-verify"]);
        if atomic {
            cmd.arg("--atomic");
        }
        for (issue, _, old) in edits {
            cmd.arg(format!(
                "--force-with-lease={}:{}",
                issue.ref_name(),
                old.map(|o| o.to_string()).unwrap_or_default()
            ));
        }
        if let Some(fold) = archive {
            cmd.arg(format!("--force-with-lease={ARCHIVE_REF}:{fold}"));
        }
        cmd.arg("--").arg(&self.remote);
        for (issue, new, _) in edits {
            cmd.arg(format!("{new}:{}", issue.ref_name()));
        }
        if let Some(fold) = archive {
            cmd.arg(format!("{fold}:{ARCHIVE_REF}"));
        }
        let shown = format!(
            "git push{} {} refs/leases/…",
            if atomic { " --atomic" } else { "" },
            self.shown
        );
        // Once git runs, the push may reach the server: a failure without the server's report
        // on the refs leaves its outcome unknown.
        let out = match run(cmd, &shown, self.network_timeout) {
            Err(Error::Transport { command, message }) if !message.starts_with("cannot run") => {
                return Err(Error::OutcomeUnknown { command, message })
            }
            out => out?,
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match refusal::read(out.status.success(), &stdout, &stderr) {
            Reading::Done => Ok(PushResult::Done),
            Reading::Lost => Ok(match refusal::lock_in_the_way(&stderr) {
                Some(lock) => PushResult::Locked(lock),
                None => PushResult::Lost,
            }),
            Reading::Declined(verdict) => Ok(PushResult::Declined(verdict)),
            Reading::NoAtomic => Err(Error::AtomicUnsupported {
                remote: self.shown.clone(),
                issues: crate::cas::names(
                    &edits.iter().map(|(i, _, _)| i.clone()).collect::<Vec<_>>(),
                ),
            }),
            Reading::Failed(message) if !reported(&stdout) && !unsent(&message) => {
                Err(Error::OutcomeUnknown {
                    command: shown,
                    message,
                })
            }
            Reading::Failed(message) => Err(Error::Transport {
                command: shown,
                message,
            }),
        }
    }

    /// The commit the remote's branch `full` (`refs/heads/…`) is at, as it answers now
    /// (`git ls-remote`, which lists only that name); `None` when it has no such branch.
    ///
    /// This is how a branch push whose answer was lost is settled: a branch at the very
    /// commit pushed holds that work, whichever connection put it there. Such a loss is not
    /// rare: a push with push options and nothing to update sends its options though the
    /// server reads no further, and a server that closes with them unread resets the
    /// connection under the push's last write.
    pub fn branch(&self, full: &str) -> Result<Option<ObjectId>> {
        let listed = self.ls_remote(&[full])?;
        Ok(listed.lines().find_map(|line| {
            let (id, name) = line.split_once('\t')?;
            (name == full).then(|| ObjectId::from_hex(id.as_bytes()).ok())?
        }))
    }

    /// Returns what `git ls-remote` lists of `patterns` on this remote, now (within
    /// `lease.networkTimeout`); a failure is a transport error naming the command.
    pub(super) fn ls_remote(&self, patterns: &[&str]) -> Result<String> {
        let mut cmd = self.git()?;
        cmd.env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null())
            .args(["ls-remote", "--", &self.remote])
            .args(patterns);
        let shown = format!("git ls-remote {} {}", self.shown, patterns.join(" "));
        let out = run(cmd, &shown, self.network_timeout)?;
        if !out.status.success() {
            return Err(Error::Transport {
                command: shown,
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// What a plain `git push` of one branch (no `--porcelain`: its report is on stderr) that
/// failed without a refusal by a hook came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BranchPush {
    /// The server's answer never arrived (no line of git's report on any ref, and the push was
    /// not refused before it was sent): it may or may not have taken the branch.
    Unknown,
    /// A lock file on the server stood in the way of the branch's update: what it said.
    Locked(String),
    /// Any other failure, whose outcome is known: nothing was taken.
    Failed,
}

/// Reads the `stderr` of a plain `git push` of one branch that failed and that no hook
/// declined. git prints a line per ref once the server reported on it (`  ! [remote rejected]
/// x -> x (reason)`, ` * [new branch]  x -> x`, `   1a2b..3c4d  x -> x`); a push that broke off
/// before that report leaves its outcome unknown, unless git never got to send it
/// ([`unsent`]).
pub fn read_branch_push(stderr: &str) -> BranchPush {
    if let Some(lock) = refusal::lock_in_the_way(stderr) {
        return BranchPush::Locked(lock);
    }
    let reported = stderr.lines().any(|line| {
        let mut chars = line.chars();
        chars.next() == Some(' ')
            && chars.next().is_some_and(|flag| " +-*=!".contains(flag))
            && chars.next() == Some(' ')
            && line.contains(" -> ")
    });
    if reported || unsent(stderr) {
        BranchPush::Failed
    } else {
        BranchPush::Unknown
    }
}

/// Returns true if `git push --porcelain` printed the server's report on a lease ref (a line
/// `<flag>\t<from>:<to>\t<summary>`): without one, the server's answer never arrived.
fn reported(stdout: &str) -> bool {
    stdout.lines().any(|line| {
        line.split('\t')
            .nth(1)
            .is_some_and(|r| r.contains(":refs/leases/"))
    })
}

/// Returns true if git's `message` says the push never reached a server: it could not connect
/// or was not let in, so nothing was sent and the outcome is known.
fn unsent(message: &str) -> bool {
    const WORDS: [&str; 7] = [
        "unable to connect",
        "Connection refused",
        "Could not resolve host",
        "Authentication failed",
        "Permission denied",
        // git's own refusals before it sends anything: no such branch here, no push options
        // there.
        "does not match any",
        "does not support push options",
    ];
    WORDS.iter().any(|w| message.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_without_the_servers_report_on_its_refs_is_unreported() {
        assert!(!reported(""));
        assert!(!reported("To git://127.0.0.1:9/r.git\n"));
        assert!(reported(
            "To git://h/r\n!\tabc:refs/leases/7\t[remote rejected] (hook declined)\nDone\n"
        ));
        assert!(reported(
            "To git://h/r\n*\tabc:refs/leases/7\t[new reference]\nDone\n"
        ));
    }

    #[test]
    fn a_branch_push_without_the_servers_report_has_an_unknown_outcome() {
        let lost = "fatal: the remote end hung up unexpectedly\nerror: failed to push some refs to 'git://h/r'\n";
        assert_eq!(read_branch_push(lost), BranchPush::Unknown);
        let refused = "To git://h/r\n ! [remote rejected] c1/1 -> c1/1 (pre-receive hook declined)\nerror: failed to push some refs to 'git://h/r'\n";
        assert_eq!(read_branch_push(refused), BranchPush::Failed);
        let behind = "To git://h/r\n ! [rejected]        c1/1 -> c1/1 (fetch first)\n";
        assert_eq!(read_branch_push(behind), BranchPush::Failed);
        let unreachable = "fatal: unable to connect to 127.0.0.1:\n127.0.0.1[0: 127.0.0.1]: errno=Connection refused\n";
        assert_eq!(read_branch_push(unreachable), BranchPush::Failed);
        let locked = "remote: error: cannot lock ref 'refs/heads/c1/1': Unable to create '/s/refs/heads/c1/1.lock': File exists.\nTo git://h/r\n ! [remote rejected] c1/1 -> c1/1 (failed to update ref)\n";
        assert!(matches!(read_branch_push(locked), BranchPush::Locked(_)));
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
