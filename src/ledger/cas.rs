//! The compare-and-swap retry loop, written once for these writers: a single claim and an
//! all-or-none claim, locally and through a remote, and a batch. (A remote claim of any one
//! issue, [`crate::Remote::acquire_any`], keeps a loop of its own: a lost push moves on to
//! another candidate rather than deciding the same issue again.)
//!
//! Each attempt reads, decides with the rules, writes the objects and swaps the ref (or
//! pushes with an expected old value); when the swap finds the ref moved, the attempt reports
//! [`Attempt::Again`] and the next one reads afresh. After the last attempt the answer is
//! [`Error::LostRace`]: nothing was changed, and a retry is safe.

use crate::error::{Error, Result};
use crate::issue::IssueId;

/// What one attempt came to.
pub(crate) enum Attempt<T> {
    /// Decided and written (or nothing to write): the answer.
    Done(T),
    /// The ref moved under the attempt (or what it read must be confirmed): read again.
    Again,
}

/// Runs `attempt` (with its 0-based number) until it is done, at most `attempts` times.
///
/// Returns its answer, or [`Error::LostRace`] naming `contended` after the last attempt.
pub(crate) fn retry<T>(
    attempts: u32,
    contended: impl FnOnce() -> String,
    mut attempt: impl FnMut(u32) -> Result<Attempt<T>>,
) -> Result<T> {
    for n in 0..attempts {
        if let Attempt::Done(answer) = attempt(n)? {
            return Ok(answer);
        }
    }
    Err(Error::LostRace {
        issue: contended(),
        attempts,
    })
}

/// Returns the issues of an all-or-none claim as a lost race names them.
pub(crate) fn names(issues: &[IssueId]) -> String {
    issues
        .iter()
        .map(IssueId::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lease refs of `issues` (`refs/leases/<id>`), space-separated, for a message.
pub(crate) fn ref_names(issues: &[IssueId]) -> String {
    issues
        .iter()
        .map(IssueId::ref_name)
        .collect::<Vec<_>>()
        .join(" ")
}
