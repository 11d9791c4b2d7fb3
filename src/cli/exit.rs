//! Exit codes: a documented, stable API (see README.md). Errors are decided by their class
//! ([`for_error`]), outcomes by whether they refuse ([`for_outcome`]).

use git_lease::{ErrorKind, Outcome};

/// Done, including "not held" (release of nothing).
pub const OK: u8 = 0;
/// Failure: I/O, git, a corrupt ledger, a transport error, a refused mirror ledger.
pub const FAILURE: u8 = 1;
/// Bad usage or invalid input.
pub const USAGE: u8 = 2;
/// Refused: held by someone else, not the holder, a wrong session secret, the fencing check
/// failed, a hook refused, an issue skipped by a refused all-or-none claim, `acquire --any`
/// with none free, a `wait` (or `run --wait`) that timed out.
pub const REFUSED: u8 = 3;
/// No such lease (show, log, verify) or an ambiguous prefix.
pub const NOT_FOUND: u8 = 4;
/// Lost the compare-and-swap race repeatedly; nothing changed and it is safe to retry.
pub const LOST_RACE: u8 = 5;
/// `run`: the lease was lost while the child ran (renewal refused, revoked, revoked and taken
/// again, expired); the child was stopped, or had already ended.
pub const LEASE_LOST: u8 = 6;

/// Returns the exit code of an error.
pub fn for_error(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Failure => FAILURE,
        ErrorKind::Usage => USAGE,
        ErrorKind::Refused => REFUSED,
        ErrorKind::NotFound => NOT_FOUND,
        ErrorKind::LostRace => LOST_RACE,
    }
}

/// Returns the name of an error class in `--json` errors.
pub fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Failure => "failure",
        ErrorKind::Usage => "usage",
        ErrorKind::Refused => "refused",
        ErrorKind::NotFound => "not_found",
        ErrorKind::LostRace => "lost_race",
    }
}

/// Returns the exit code of an outcome.
pub fn for_outcome(outcome: Outcome) -> u8 {
    if outcome.is_refusal() {
        REFUSED
    } else {
        OK
    }
}

/// The exit codes each subcommand's help lists after its options (README.md, "Exit codes",
/// has them all).
pub mod help {
    pub const ACQUIRE: &str = "Exit codes: 0 acquired, or already yours (expiry refreshed); \
        3 held by someone else (with --any: none free) or a wrong session secret, nothing \
        written; 2 bad usage (issue id, TTL); 5 lost the race repeatedly, nothing changed; \
        1 failure.";
    pub const RENEW: &str = "Exit codes: 0 renewed; 3 not the live holder, or a wrong session \
        secret; 4 no such lease, or an ambiguous prefix; 2 bad usage; 5 lost the race \
        repeatedly; 1 failure.";
    pub const END: &str = "Exit codes: 0 freed, or nothing was held; 3 held by someone else, \
        or a wrong session secret; 4 an ambiguous prefix; 2 bad usage; 5 lost the race \
        repeatedly; 1 failure.";
    pub const SHOW: &str = "Exit codes: 0 shown; 4 no such lease, or an ambiguous prefix; \
        2 bad usage; 1 failure.";
    pub const LIST: &str = "Exit codes: 0 listed (none is not an error); 2 bad usage; 1 failure.";
    pub const LOG: &str = "Exit codes: 0 shown; 4 no such lease, or an ambiguous prefix; \
        2 bad usage; 1 failure.";
    pub const CHECK: &str = "Exit codes: 0 TOKEN is the live tenure's (and --holder its \
        holder); 3 it is not; 2 bad usage; 1 failure.";
    pub const REVOKE: &str = "Exit codes: 0 revoked, or nothing was held; 3 refused (by the \
        remote's hook: not an administrator); 2 bad usage; 5 lost the race repeatedly; \
        1 failure.";
    pub const PUSH: &str = "Exit codes: 0 pushed; 3 refused: this holder has no live lease \
        of the branch's issue; 2 bad usage; 1 failure.";
    pub const RUN: &str = "Exit codes: the command's own (128 + the signal that ended it); \
        3 held by someone else (with --wait: still held at --timeout), nothing run; 6 the \
        lease was lost while the command ran, and the command stopped; 2 bad usage; 1 failure.";
    pub const WAIT: &str = "Exit codes: 0 free (with --acquire: acquired); 3 still held at \
        --timeout; 2 bad usage; 1 failure.";
    pub const AUDIT: &str = "Exit codes: 0 every step kept the rules; 1 a step broke one, or \
        a failure; 4 no such lease; 2 bad usage.";
    pub const SYNC: &str = "Exit codes: 0 in step with the remote; 1 a ledger was refused, or \
        a failure; 2 bad usage.";
    pub const DOCTOR: &str = "Exit codes: 0 no check failed (warnings allowed); 1 a check \
        failed; 2 bad usage.";
    pub const OTHER: &str = "Exit codes: 0 done; 1 failure; 2 bad usage.";

    /// Returns the exit codes of the subcommand `name`.
    pub fn of(name: &str) -> &'static str {
        match name {
            "acquire" => ACQUIRE,
            "renew" => RENEW,
            "release" | "complete" | "abandon" => END,
            "show" => SHOW,
            "list" => LIST,
            "log" => LOG,
            "check" => CHECK,
            "revoke" => REVOKE,
            "push" => PUSH,
            "run" => RUN,
            "wait" => WAIT,
            "verify" => AUDIT,
            "sync" => SYNC,
            "doctor" => DOCTOR,
            _ => OTHER,
        }
    }
}

/// Says each refusal of a hook on its own line on stderr, as git shows a hook's output, and
/// returns the hook's exit code: [`OK`] when there is none, else [`FAILURE`].
pub(crate) fn refused(refusals: &[impl std::fmt::Display]) -> u8 {
    for r in refusals {
        eprintln!("{r}");
    }
    if refusals.is_empty() {
        OK
    } else {
        FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manuals_exit_statuses_are_these_codes() {
        let codes: Vec<u8> = crate::cli::pages::EXIT_STATUS
            .iter()
            .map(|(code, _)| *code)
            .collect();
        assert_eq!(
            codes,
            [OK, FAILURE, USAGE, REFUSED, NOT_FOUND, LOST_RACE, LEASE_LOST]
        );
    }
}
