//! Why a run's lease was lost, in its message: what ended the run's tenure (a revoke, by whom
//! and why; a takeover, by whom and on what ground; a release by someone else), then the lease
//! as it is now.

use chrono::{DateTime, Utc};
use git_lease::lease::{Event, Lease, Takeover};
use git_lease::rules::Tenure;
use git_lease::Report;

use super::Handle;
use crate::cli::output;

/// Returns why `tenure` is lost, from the report of a renewal or release that refused it.
pub(super) fn lost_reason(
    handle: &Handle,
    tenure: &Tenure,
    report: &Report,
    now: DateTime<Utc>,
) -> String {
    let line = output::report_line(report, now);
    match report.lease() {
        Some(l) if !tenure.is_recorded_in(l) => {
            let ended = ending(handle, tenure, now).map_or_else(
                || "was ended".to_owned(),
                |l| format!("was {}", what_ended(&l)),
            );
            format!(
                "its tenure (token {}, from {}) {ended}; now: {line}",
                tenure.token,
                git_lease::time::format_instant(tenure.acquired_at)
            )
        }
        _ => line,
    }
}

/// Returns the ledger step that ended `tenure`: the one after the last that records it.
/// `None` when the history cannot be read or no longer shows the tenure.
fn ending(handle: &Handle, tenure: &Tenure, now: DateTime<Utc>) -> Option<Lease> {
    let ledger = handle.ledger(now).ok()?;
    let backend = git_lease::backend::open(&ledger, &handle.target).ok()?;
    let newest_first = backend.log(&handle.issue).ok()?;
    let last_ours = newest_first
        .iter()
        .position(|e| tenure.is_recorded_in(&e.lease))?;
    let after = last_ours.checked_sub(1)?;
    newest_first.into_iter().nth(after).map(|e| e.lease)
}

/// Says what `step` did to the tenure before it, naming who acted and why.
fn what_ended(step: &Lease) -> String {
    let actor = step
        .by
        .as_deref()
        .or(step.holder.as_deref())
        .unwrap_or("someone");
    let token = step.token;
    match (step.event, step.takeover) {
        (Event::Revoke, _) => {
            let why = step.reason.as_deref().unwrap_or("no reason given");
            format!("revoked by {actor}: {why}")
        }
        (Event::Acquire | Event::Reacquire, Some(Takeover::Expired)) => {
            format!("taken over by {actor} (token {token}) once it had expired")
        }
        (Event::Acquire | Event::Reacquire, Some(Takeover::ProcessGone)) => {
            format!("taken over by {actor} (token {token}): its process was seen gone")
        }
        (Event::Acquire | Event::Reacquire, None) => format!("taken by {actor} (token {token})"),
        (Event::Release | Event::Complete | Event::Abandon, _) => {
            format!("ended by {actor} ({})", step.event.as_str())
        }
        (Event::Renew, _) => format!("renewed by {actor}"),
    }
}
