//! What a server said of a push it did not take, read in the words of every server family:
//! git's own receive-pack (and git's client, which refuses a stale lease before it sends
//! anything), JGit's (Gerrit's engine), dulwich's, and servers built on libgit2. A push is
//! [`Reading::Lost`] (a ref was not at the expected old value, or its lock was held by a
//! concurrent writer: read again and decide again), [`Reading::Declined`] by the server's
//! hooks (the git-lease hook's refusal by the lease rules is told from any other by
//! [`hook_verdict`]), [`Reading::NoAtomic`] (git refused to send an all-or-none push to a
//! server without the `atomic` capability), or [`Reading::Failed`]: anything else, a transport
//! failure.
//!
//! Every wording lives in [`FAMILIES`], one entry per family; a push is lost only if *every*
//! ref it was refused for says a lost race, so that the other refs of an atomic push (which
//! each family reports as a failure of the whole: "atomic push failure", "transaction
//! aborted") never hide a refusal of another kind.

use crate::cas;
use crate::error::Error;
use crate::issue::IssueId;

/// One server family's wordings of a refused ref update, as git shows them in the reason of a
/// porcelain `!` line (and, for hooks, in its stderr).
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// Which server says it.
    pub server: &'static str,
    /// The reasons that mean the compare-and-swap was lost: the ref was elsewhere than
    /// expected, or locked by a concurrent update (or, in an atomic push, another ref was).
    pub lost: &'static [&'static str],
    /// The reasons that mean a hook declined the update.
    pub declined: &'static [&'static str],
}

/// Every family's wordings. A reason matches a wording it contains (the reasons carry ref
/// names and values around the wording).
pub const FAMILIES: [Family; 5] = [
    Family {
        server: "git (the pushing client, before it sends anything)",
        lost: &[
            "stale info",
            "fetch first",
            "non-fast-forward",
            "atomic push failed",
        ],
        declined: &[],
    },
    Family {
        server: "git receive-pack (git daemon, http-backend, ssh, gitolite, Gitea, GitLab)",
        lost: &[
            "cannot lock ref",
            "failed to update ref",
            "incorrect old value",
            "reference already exists",
            "atomic push failure",
            "atomic transaction failed",
        ],
        declined: &["hook declined"],
    },
    Family {
        server: "JGit (jgit daemon, Gerrit)",
        lost: &[
            "failed to lock",
            // A ref's lock file it could not make while a racer made or removed its directory.
            "lock error",
            "invalid old id sent",
            "already exists",
            "no such ref",
            "non-fast forward",
            "transaction aborted",
        ],
        declined: &[],
    },
    Family {
        server: "dulwich",
        lost: &["atomic push failed"],
        declined: &["pre-receive hook declined", "hook exited with status"],
    },
    Family {
        server: "libgit2",
        lost: &[
            "old reference value does not match",
            "failed to lock file",
            "a reference with that name already exists",
        ],
        declined: &[],
    },
];

/// What git said when it would not send an all-or-none push: the server lacks `atomic`.
const NO_ATOMIC: &str = "does not support --atomic push";

/// dulwich reports a declining pre-receive hook as a fatal message of its own, before any
/// ref status: `remote: pre-receive hook exited with status 1: <the hook's stderr>`.
const DULWICH_PRE_RECEIVE: &str = "pre-receive hook exited with status ";

/// What a push came to, read from git's porcelain output and its stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The server took every ref.
    Done,
    /// The compare-and-swap was lost: a ref had moved (or was being moved).
    Lost,
    /// A hook declined it.
    Declined(HookVerdict),
    /// git would not send an atomic push: the server lacks the `atomic` capability. Nothing
    /// was pushed.
    NoAtomic,
    /// Anything else (a transport failure, a refusal by the server's own rules): what git
    /// said, the refused refs' lines first.
    Failed(String),
}

/// Reads a push: `success` is git's exit status, `stdout` its `--porcelain` output and
/// `stderr` its diagnostics (the server's `remote:` lines among them).
pub fn read(success: bool, stdout: &str, stderr: &str) -> Reading {
    if success {
        return Reading::Done;
    }
    if stderr.contains(NO_ATOMIC) {
        return Reading::NoAtomic;
    }
    let rejections: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
    // The reason is the last tab-separated field: `[remote rejected] (failed to lock)`.
    let reasons: Vec<&str> = rejections
        .iter()
        .map(|l| l.rsplit('\t').next().unwrap_or(l))
        .collect();
    let said = |wordings: fn(&Family) -> &'static [&'static str], reason: &str| {
        FAMILIES
            .iter()
            .flat_map(wordings)
            .any(|wording| reason.contains(wording))
    };
    let dulwich_hook =
        rejections.is_empty() && remote_lines(stderr).any(|l| l.starts_with(DULWICH_PRE_RECEIVE));
    if dulwich_hook || reasons.iter().any(|r| said(|f| f.declined, r)) {
        return Reading::Declined(hook_verdict(stderr));
    }
    if !reasons.is_empty() && reasons.iter().all(|r| said(|f| f.lost, r)) {
        return Reading::Lost;
    }
    Reading::Failed(if rejections.is_empty() {
        stderr.trim().to_owned()
    } else {
        format!("{}\n{}", rejections.join("\n"), stderr.trim())
    })
}

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
                target: cas::ref_names(issues),
                message,
            },
        }
    }
}

/// Returns the server's words when a refused push found a lock file in its way (git's
/// receive-pack: `cannot lock ref '…': Unable to create '….lock': File exists.` with the files
/// backend, `cannot lock references` with reftable). A concurrent writer holds such a lock for
/// a moment; one that a killed or crashed git process left behind stays until it is removed,
/// and refuses every update of the ref (with reftable, of every ref) until then.
pub fn lock_in_the_way(stderr: &str) -> Option<String> {
    remote_lines(stderr)
        .find(|l| {
            (l.contains("Unable to create") && l.contains(".lock") && l.contains("File exists"))
                || l.contains("cannot lock references")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l).to_owned())
}

/// The server's `remote:` lines in git's `stderr`, trimmed, without empty ones; dulwich's
/// prefix of a declining pre-receive hook's first line is taken off, so that the hook's own
/// words start the line as they do through git.
fn remote_lines(stderr: &str) -> impl Iterator<Item = &str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
}

/// Sorts a declined push by the server's `remote:` lines in git's `stderr`: a refusal by the
/// lease rules carries [`crate::hook::REFUSAL_MARK`] at the start of a line; anything else is a
/// failure of the server's hook.
pub fn hook_verdict(stderr: &str) -> HookVerdict {
    let said: Vec<&str> = remote_lines(stderr)
        .map(|l| match l.strip_prefix(DULWICH_PRE_RECEIVE) {
            // `1: git-lease: refused …` → `git-lease: refused …`
            Some(rest) => rest.split_once(": ").map_or(l, |(_, words)| words),
            None => l,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A porcelain line of git's for a refused `refs/leases/7` with `reason`.
    fn refused(reason: &str) -> String {
        format!("To git://h/r\n!\t0123456789abcdef:refs/leases/7\t{reason}\nDone\n")
    }

    const FAILED: &str = "error: failed to push some refs to 'git://h/r'\n";

    #[test]
    fn a_lock_file_in_the_way_is_told_from_a_moved_ref() {
        let files = "remote: error: cannot lock ref 'refs/leases/1': Unable to create '/s.git/./refs/leases/1.lock': File exists.        \nremote: \nremote: Another git process seems to be running in this repository, e.g.\n";
        assert_eq!(
            lock_in_the_way(files).as_deref(),
            Some("cannot lock ref 'refs/leases/1': Unable to create '/s.git/./refs/leases/1.lock': File exists.")
        );
        assert_eq!(
            lock_in_the_way("remote: error: cannot lock references        \n").as_deref(),
            Some("cannot lock references")
        );
        assert_eq!(
            lock_in_the_way(
                "remote: error: cannot lock ref 'refs/leases/1': is at 1111 but expected 2222\n"
            ),
            None
        );
        assert_eq!(
            lock_in_the_way("error: Unable to create 'x.lock': File exists.\n"),
            None
        );
    }

    #[test]
    fn every_family_s_lost_race_is_a_lost_race() {
        // What each server says of a lost compare-and-swap, as git shows it.
        let lost = [
            // git's client: the ref moved since the lease's value was read.
            "[rejected] (stale info)",
            "[rejected] (fetch first)",
            "[rejected] (non-fast-forward)",
            // git receive-pack, files and reftable backends.
            "[remote rejected] (cannot lock ref 'refs/leases/7': is at 1111 but expected 2222)",
            "[remote rejected] (cannot lock ref 'refs/leases/7': reference already exists)",
            "[remote rejected] (failed to update ref)",
            "[remote rejected] (incorrect old value provided)",
            // JGit (its daemon, Gerrit): LOCK_FAILURE, a stale old id, a create that exists.
            "[remote rejected] (failed to lock)",
            "[remote rejected] (lock error: /srv/leases.git/refs/leases/c4 (No such file or directory))",
            "[remote rejected] (invalid old id sent)",
            "[remote rejected] (already exists)",
            "[remote rejected] (no such ref)",
            "[remote rejected] (non-fast forward)",
            // libgit2.
            "[remote rejected] (old reference value does not match)",
            "[remote rejected] (failed to lock file 'refs/leases/7.lock' for writing)",
            "[remote rejected] (failed to write reference 'refs/leases/7': a reference with that name already exists)",
        ];
        for reason in lost {
            assert_eq!(
                read(false, &refused(reason), FAILED),
                Reading::Lost,
                "{reason}"
            );
        }
        // The other refs of an atomic push that lost one.
        for (first, others) in [
            ("[rejected] (stale info)", "[rejected] (atomic push failed)"),
            (
                "[remote rejected] (cannot lock ref 'refs/leases/7': is at 1 but expected 2)",
                "[remote rejected] (atomic push failure)",
            ),
            (
                "[remote rejected] (cannot lock ref 'refs/leases/7': x)",
                "[remote rejected] (atomic transaction failed)",
            ),
            (
                "[remote rejected] (failed to lock)",
                "[remote rejected] (transaction aborted)",
            ),
        ] {
            let stdout =
                format!("!\ta:refs/leases/7\t{first}\n!\tb:refs/leases/8\t{others}\nDone\n");
            assert_eq!(read(false, &stdout, FAILED), Reading::Lost, "{stdout}");
        }
    }

    #[test]
    fn a_hook_s_refusal_is_declined_in_every_family_s_words() {
        let mark =
            "remote: git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice\n";
        // git receive-pack: pre-receive and update hooks.
        for reason in [
            "[remote rejected] (pre-receive hook declined)",
            "[remote rejected] (hook declined)",
        ] {
            let reading = read(false, &refused(reason), &format!("{mark}{FAILED}"));
            assert!(
                matches!(reading, Reading::Declined(HookVerdict::Refused(_))),
                "{reason}"
            );
        }
        // dulwich: a declining pre-receive hook is a fatal message before any ref status.
        let dulwich = "remote: pre-receive hook exited with status 1: git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice\n\
                       remote: \nfatal: the remote end hung up unexpectedly\n";
        assert_eq!(
            read(false, "", dulwich),
            Reading::Declined(HookVerdict::Refused(
                "git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice".into()
            ))
        );
        let other = "remote: pre-receive hook exited with status 1: policy says no\n";
        assert_eq!(
            read(false, "", other),
            Reading::Declined(HookVerdict::Failed("policy says no".into()))
        );
        // dulwich's update hook: its words are in the ref's status.
        let update = refused("[remote rejected] (update hook exited with status 1: no)");
        assert!(matches!(
            read(false, &update, FAILED),
            Reading::Declined(HookVerdict::Failed(_))
        ));
        // A hook's refusal among lost races is still a refusal.
        let mixed = "!\ta:refs/leases/7\t[remote rejected] (pre-receive hook declined)\n\
                     !\tb:refs/leases/8\t[remote rejected] (atomic push failure)\n";
        assert!(matches!(
            read(false, mixed, mark),
            Reading::Declined(HookVerdict::Refused(_))
        ));
    }

    #[test]
    fn anything_else_is_a_failure_never_a_lost_race() {
        for (stdout, stderr) in [
            // No ref status at all: the server is unreachable, or hung up.
            (
                "",
                "fatal: unable to connect to h:\nh[0: 127.0.0.1]: errno=Connection refused\n",
            ),
            ("", "fatal: the remote end hung up unexpectedly\n"),
            // The server's own rules (Gerrit's access control, a protected ref).
            (
                &refused("[remote rejected] (prohibited by Gerrit: not permitted: update)"),
                FAILED,
            ),
            (
                &refused("[remote rejected] (deny updating a hidden ref)"),
                FAILED,
            ),
            (
                &refused("[remote rejected] (missing necessary objects)"),
                FAILED,
            ),
            // dulwich: an I/O error writing the ref.
            (&refused("[remote rejected] (failed to write)"), FAILED),
            (
                &refused("[remote failure] (remote failed to report status)"),
                FAILED,
            ),
        ] {
            assert!(
                matches!(read(false, stdout, stderr), Reading::Failed(_)),
                "{stdout}{stderr}"
            );
        }
        // One ref lost, another refused by the server's rules: not a lost race.
        let mixed = "!\ta:refs/leases/7\t[remote rejected] (failed to lock)\n\
                     !\tb:refs/leases/8\t[remote rejected] (prohibited by Gerrit: x)\n";
        assert!(matches!(read(false, mixed, FAILED), Reading::Failed(_)));
        // The issue's name never decides it: only the reason does.
        let named =
            "!\t0123:refs/leases/stale-info\t[remote rejected] (deny updating a hidden ref)\n";
        assert!(matches!(read(false, named, FAILED), Reading::Failed(_)));
    }

    #[test]
    fn a_server_without_atomic_is_told_apart() {
        let stderr = "fatal: the receiving end does not support --atomic push\n\
                      fatal: the remote end hung up unexpectedly\n";
        assert_eq!(read(false, "", stderr), Reading::NoAtomic);
        assert_eq!(read(true, "", ""), Reading::Done);
    }

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
}
