//! The library's error type.
//!
//! Refusals that are part of the rules (held by someone else, not the holder, a wrong session
//! secret), and a release of nothing held, are *outcomes*, not errors. Errors are what stops
//! an operation from being decided at all; each variant carries what a message needs, and
//! [`Error::kind`] sorts them into the classes the command line turns into exit codes.

use std::path::PathBuf;

/// The class of an [`Error`], which decides the command line's exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// I/O, git, a corrupt ledger, a transport failure (exit 1).
    Failure,
    /// Bad usage or invalid input (exit 2).
    Usage,
    /// The operation was refused by a rule or a server (exit 3).
    Refused,
    /// No such lease, or an ambiguous prefix (exit 4).
    NotFound,
    /// The compare-and-swap was lost repeatedly; nothing changed and a retry is safe (exit 5).
    LostRace,
}

/// Everything that can stop a lease operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The issue id cannot be a ref name component.
    #[error("invalid issue id {id:?}: {rule}")]
    InvalidIssue {
        /// The id as given.
        id: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// The holder name cannot be stored.
    #[error("invalid holder {holder:?}: {rule}")]
    InvalidHolder {
        /// The holder as given.
        holder: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// A TTL that is not `90s`, `15m`, `2h`, `1d` or `never`.
    #[error("invalid TTL {input:?}: {reason} (use e.g. 90s, 15m, 2h, 1d or never)")]
    InvalidTtl {
        /// The TTL as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An instant that is neither unix seconds nor RFC 3339.
    #[error("invalid time {input:?}: expected unix seconds or RFC 3339 (2026-11-30T14:05:00Z)")]
    InvalidTime {
        /// The instant as given.
        input: String,
    },
    /// A malformed line of the allowed signers list (`lease.requireSignatures`).
    #[error("{file}:{line}: {reason} (an allowed signers line is: principals [options] key-type base64-key [comment])")]
    AllowedSigners {
        /// Where the list was read from.
        file: String,
        /// The line (1-based).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// `lease.requireSignatures` is true, but no allowed signers list is where it is read
    /// (docs/SECURITY.md, "Signed events").
    #[error("lease.requireSignatures is true, but {why}; or name the list's file in lease.allowedSigners")]
    NoAllowedSigners {
        /// Where the list was looked for, and what to do.
        why: String,
    },
    /// A configuration value that is set but cannot be read.
    #[error("bad config value {value:?} for {key}: expected {expected}")]
    Config {
        /// The key.
        key: String,
        /// The value as set.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The `-c` settings git passed down (`GIT_CONFIG_PARAMETERS`) cannot be read.
    #[error("unable to parse command-line config: {0}")]
    CommandLineConfig(String),
    /// A setting that another one needs is unset or empty.
    #[error("{key} is not set (or is empty), but {needed}")]
    ConfigMissing {
        /// The key that is missing.
        key: String,
        /// What needs it, and what it should hold.
        needed: &'static str,
    },
    /// Ledger commits are to be signed (`lease.sign`, `commit.gpgSign`) in a format other than
    /// git's SSH signatures, the one git-lease signs in.
    #[error("cannot sign ledger commits with gpg.format={format}: git-lease signs them in git's SSH format only; set gpg.format=ssh with an SSH key in user.signingKey, or lease.sign=false to write them unsigned; nothing was written")]
    SignFormat {
        /// The `gpg.format` asked for (`openpgp` when unset, as git's default).
        format: String,
    },
    /// The key `user.signingKey` names cannot sign ledger commits: a missing or unreadable
    /// file, a passphrase-protected key no ssh-agent holds, no agent, a key the agent lacks.
    #[error(
        "cannot sign ledger commits with user.signingKey {key:?}: {reason}; nothing was written"
    )]
    SigningKey {
        /// `user.signingKey` as configured.
        key: String,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// A path in a repository that is not used as it is: a symbolic link where a file or
    /// directory is read or written (none is followed there), something other than the file or
    /// directory expected, or a hooks directory outside the repository.
    #[error("{}: {reason}", path.display())]
    UnsafePath {
        /// The path.
        path: PathBuf,
        /// What is wrong with it, and what to do.
        reason: String,
    },
    /// A remark (a note, a task, a reason) longer than its field's bound
    /// ([`crate::remark::RemarkKind::max_bytes`]), so that its record would pass the size every
    /// reader accepts.
    #[error("the {field} is {bytes} bytes as lease.json stores it (JSON escaping included), more than the {max} allowed, so that every record stays within the 64 KiB every reader accepts (docs/FORMAT.md, \"lease.json\"); shorten it; nothing was written")]
    TooLong {
        /// The field (`note`, `task`, `reason`).
        field: &'static str,
        /// Its length as stored.
        bytes: usize,
        /// Its bound.
        max: usize,
    },
    /// Some other invalid input, described in full.
    #[error("{0}")]
    InvalidInput(String),
    /// No lease ref matches the id or prefix.
    #[error("no lease matches {0:?}")]
    NoSuchLease(String),
    /// A prefix matches several lease refs.
    #[error("{prefix:?} is ambiguous; it matches: {}", candidates.join(", "))]
    Ambiguous {
        /// The prefix as given.
        prefix: String,
        /// Every issue it matches.
        candidates: Vec<String>,
    },
    /// The new ref would clash with an existing one as file versus directory.
    #[error("refs/leases/{issue} clashes with the existing ref {existing}: a ref name cannot be both a lease and a directory of leases")]
    RefClash {
        /// The issue requested.
        issue: String,
        /// The existing ref in the way.
        existing: String,
    },
    /// A ledger commit that cannot be read as a lease.
    #[error("the ledger of {issue} is corrupt at commit {commit}: {reason}")]
    Corrupt {
        /// The issue whose ledger is broken.
        issue: String,
        /// The offending commit.
        commit: String,
        /// What is wrong with it.
        reason: String,
    },
    /// With `lease.requireSignatures`, a ledger whose step breaks a rule (an unsigned step,
    /// one signed by a key not allowed for the one it needs, or any transition rule): it is
    /// read as rewritten from that step on, and not used.
    #[error("the ledger of {issue} is refused at commit {commit} (lease.requireSignatures: every step is verified): {rule}: {detail}")]
    Unverified {
        /// The issue.
        issue: String,
        /// The first commit that breaks a rule.
        commit: String,
        /// The rule's name.
        rule: String,
        /// What exactly is wrong.
        detail: String,
    },
    /// The repository stores its refs in a format this build does not know (it knows `files`
    /// and `reftable`).
    #[error("{path}: this repository stores its refs as {format:?} (extensions.refStorage), which git-lease does not know; it supports files and reftable", path = path.display())]
    RefStorage {
        /// The repository's git dir.
        path: PathBuf,
        /// The value of `extensions.refStorage`.
        format: String,
    },
    /// The git on `PATH` is older than what the command needs (`crate::git::version`).
    #[error("this needs git {needed} or newer for {purpose} (found {found})")]
    GitTooOld {
        /// The oldest version that would do (`2.29`).
        needed: String,
        /// What needs it (`--remote and sync`, `a reftable repository`).
        purpose: &'static str,
        /// The version found, as git printed it.
        found: String,
    },
    /// A ref lock file stayed in place past the lock timeout.
    #[error("the lock file {path} has been held for more than {waited_ms} ms; if no git or git-lease process is running, a crashed process left it behind: remove it with `rm {path}` and retry", path = path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// How long we waited, in milliseconds.
        waited_ms: u128,
    },
    /// The compare-and-swap kept losing to other writers.
    #[error("lost the race for {issue} {attempts} times in a row; nothing was changed, it is safe to retry")]
    LostRace {
        /// The contended issue.
        issue: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// A push was refused, attempt after attempt, because a lock file on the server stood in
    /// the way of the ref's update: a concurrent writer holds one for a moment, so a lock
    /// still there after every attempt was most likely left behind by a git process that was
    /// killed or crashed mid-update. Nothing was changed; the ref stays wedged until the
    /// server's administrator removes the lock file.
    #[error("{remote} refused the update of {target}: a lock file on the server is in the way ({message}); nothing was changed. If no push is running there, a killed or crashed git process left it behind: the server's administrator removes it (docs/RELIABILITY.md, \"A lock left behind\"), then the same command works again")]
    RemoteLocked {
        /// The remote, as shown.
        remote: String,
        /// The refs that could not be updated.
        target: String,
        /// What the server said.
        message: String,
    },
    /// The server's git-lease hook refused the push by the lease rules (its `remote:` lines
    /// carry the `git-lease: refused` mark); a hook that failed, or another hook's refusal, is
    /// [`Error::HookFailed`].
    #[error("the remote refused the update of refs/leases/{issue}: {message}")]
    PushRefused {
        /// The issue pushed.
        issue: String,
        /// What the remote said.
        message: String,
    },
    /// The server's hook did not judge the push by the lease rules: it failed to start, it
    /// crashed, or another hook (or the server's own access rules) refused it. Its `remote:`
    /// lines carry no `git-lease: refused` mark, the mark of a refusal by the lease rules.
    #[error("the server's hook failed: {message}")]
    HookFailed {
        /// The issue or branch pushed.
        target: String,
        /// What the server said (its `remote:` lines), or git's own diagnostics.
        message: String,
    },
    /// A remote rewound or rewrote a ledger this clone verified before; nothing was decided on
    /// it.
    #[error("remote ledger {divergence}: refs/leases/{issue} on {remote}: {detail}; nothing was written (the last verified state is kept in the remote-tracking ref)")]
    RemoteDiverged {
        /// The remote.
        remote: String,
        /// The issue.
        issue: String,
        /// `rewound` or `rewritten`.
        divergence: &'static str,
        /// What exactly is wrong.
        detail: String,
    },
    /// A claim of several issues at once (all or none) on a server whose receive-pack lacks
    /// the `atomic` capability: git refused to send it, so nothing was pushed.
    #[error("{remote} does not support atomic pushes (its receive-pack lacks the `atomic` capability), so the all-or-none claim of {issues} cannot be made there; nothing was pushed. Claim one issue per command (`git lease acquire <issue> --remote ...`, or `acquire --any` for one of several), or serve the repository with a server that has it (git, JGit, dulwich 1.2 or newer)")]
    AtomicUnsupported {
        /// The remote, as messages show it.
        remote: String,
        /// The issues of the claim.
        issues: String,
    },
    /// Doctor's compare-and-swap probe (run by `git lease doctor`, or by the first write through
    /// the server) found that the remote does not honour a push's expected old value, so a
    /// write through it could win a race it lost; writes are refused until doctor finds
    /// otherwise, or the user accepts the danger (`remote.<name>.leaseUnsafeCas`).
    #[error("refusing to write through {remote}: doctor's probe found that it does not honour a push's expected old value ({detail}), so two claimers could both win; fix the server and run `git lease doctor --remote {remote}` again, or accept the danger with `git config {key} true`")]
    UnsafeRemote {
        /// The remote.
        remote: String,
        /// The setting that would let writes through anyway.
        key: String,
        /// What doctor recorded.
        detail: String,
    },
    /// A write in a repository that has remotes, where nothing says whether claims are shared
    /// with one (no `--remote`, `--local` or `lease.remote`) and none could be chosen: the
    /// claim would be seen here alone, so it is not made.
    #[error("not claiming in this repository alone: it has remotes ({remotes}) and nothing says whether claims are shared; {why}. Share claims with `git config lease.remote {suggested}`, or keep them in this repository with `git config lease.remote .` (or --local once)")]
    Unshared {
        /// The configured remotes, comma-separated.
        remotes: String,
        /// Why no remote was chosen.
        why: String,
        /// The remote the command suggests sharing with.
        suggested: String,
    },
    /// A git subprocess that talks to a remote (push, fetch; doctor's ls-remote) failed.
    #[error("{command} failed: {message}")]
    Transport {
        /// The command that failed, as a user could type it.
        command: String,
        /// Its diagnostics.
        message: String,
    },
    /// A push to a remote got no answer from the server: the connection broke, or timed out,
    /// after the push was sent and before the server reported on it. The server may have
    /// applied it or not; running the same command again converges (a holder's re-acquire
    /// of its live lease keeps the token, a release again finds nothing held).
    #[error("{command}: the outcome is unknown: the remote may or may not have taken the push, its answer was lost ({message}); run the same command again: it converges (a re-acquire by the holder keeps the token, a release again finds nothing held)")]
    OutcomeUnknown {
        /// The push, as a user could type it.
        command: String,
        /// git's diagnostics.
        message: String,
    },
    /// A signal (Ctrl-C) interrupted a write through a remote: its push may or may not have
    /// reached the server, as for [`Error::OutcomeUnknown`].
    #[error("interrupted by {signal} while writing through {remote}: the outcome is unknown: the remote may or may not have taken the push{cause}; run the same command again: it converges (a re-acquire by the holder keeps the token, a release again finds nothing held)")]
    Interrupted {
        /// The signal, as a user knows it.
        signal: String,
        /// The remote, as messages show it.
        remote: String,
        /// What the interrupted command failed with, as ` (…)`, or empty.
        cause: String,
    },
    /// No repository could be opened.
    #[error("{}", not_a_repository(path, message))]
    NotARepository {
        /// Where the search started.
        path: PathBuf,
        /// Why it cannot be opened; empty when none was found there or in any parent.
        message: String,
    },
    /// A git operation failed; its cause is the source.
    #[error("{context}")]
    GitOp {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A git operation failed, with what it said.
    #[error("{context}: {message}")]
    Git {
        /// What was being done.
        context: String,
        /// The error chain, as text.
        message: String,
    },
    /// An I/O error outside git.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

fn not_a_repository(path: &std::path::Path, message: &str) -> String {
    if message.is_empty() {
        format!(
            "not a git repository (or any of the parent directories): {}",
            path.display()
        )
    } else {
        format!("not a git repository: {}: {message}", path.display())
    }
}

impl Error {
    /// Returns the class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidIssue { .. }
            | Error::InvalidHolder { .. }
            | Error::InvalidTtl { .. }
            | Error::InvalidTime { .. }
            | Error::InvalidInput(_)
            | Error::TooLong { .. }
            | Error::Config { .. }
            | Error::AllowedSigners { .. }
            | Error::CommandLineConfig(_)
            | Error::ConfigMissing { .. }
            | Error::NoAllowedSigners { .. }
            | Error::SignFormat { .. }
            | Error::SigningKey { .. }
            | Error::UnsafePath { .. }
            | Error::RefClash { .. }
            | Error::RefStorage { .. }
            | Error::GitTooOld { .. }
            | Error::Unshared { .. }
            | Error::NotARepository { .. } => ErrorKind::Usage,
            Error::NoSuchLease(_) | Error::Ambiguous { .. } => ErrorKind::NotFound,
            Error::PushRefused { .. } => ErrorKind::Refused,
            Error::LostRace { .. } => ErrorKind::LostRace,
            Error::Corrupt { .. }
            | Error::Unverified { .. }
            | Error::Locked { .. }
            | Error::RemoteLocked { .. }
            | Error::Transport { .. }
            | Error::OutcomeUnknown { .. }
            | Error::Interrupted { .. }
            | Error::AtomicUnsupported { .. }
            | Error::HookFailed { .. }
            | Error::RemoteDiverged { .. }
            | Error::UnsafeRemote { .. }
            | Error::Git { .. }
            | Error::GitOp { .. }
            | Error::Io { .. } => ErrorKind::Failure,
        }
    }

    /// Wraps a gix error with what was being done, keeping it as the source, so that its whole
    /// chain of causes reaches the message ([`Error::chain`]).
    pub fn git(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::GitOp {
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// Returns the message of this error followed by each of its causes, `: `-separated, as
    /// a command line shows it.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            let line = c.to_string();
            if !text.ends_with(&line) {
                text.push_str(": ");
                text.push_str(&line);
            }
            cause = c.source();
        }
        text
    }
}

/// The result type of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
