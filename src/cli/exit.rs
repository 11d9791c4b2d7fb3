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
