//! Taking the lease `run` holds: the issue, or with `--any` one free candidate, again and
//! again with `--wait`; and only a tenure of this run's own session counts as taken.

use std::time::{Duration, Instant};

use git_lease::rules::{self, Claim, Outcome, Tenure};
use git_lease::{IssueId, Lease, Report};

use super::{after, Handle, RunArgs, RunningClock};
use crate::cli::output::{self, diagnostics};
use crate::cli::{Context, Failure};

/// The lease and tenure `report` took for this run's own session (`claim`'s), if it took one:
/// the same holder's live lease of another session is refused.
pub(super) fn own_tenure(report: &Report, claim: &Claim) -> Option<(Lease, Tenure)> {
    let lease = report.lease()?;
    if report.outcome != Outcome::Acquired || lease.session.as_deref() != claim.session.as_deref() {
        return None;
    }
    Some((lease.clone(), Tenure::of(lease)?))
}

/// What [`take_lease`] came to: the lease's handle, and the acquire's report at its instant
/// (an acquire that refused for another reason than a holder is reported by the caller).
pub(super) struct Claimed {
    pub(super) handle: Handle,
    pub(super) report: Report,
    pub(super) at: chrono::DateTime<chrono::Utc>,
}

/// Takes the lease `run` holds: the issue, or with `--any` one free candidate. With `--wait`,
/// a claim held by someone else is tried again, with backoff, until it is taken or the
/// timeout passes. Returns `None`, having said why, when it stayed held.
pub(super) fn take_lease(
    ctx: &Context,
    args: &RunArgs,
    claim: &Claim,
    clock: RunningClock,
    handle: impl Fn(&IssueId) -> Handle,
) -> Result<Option<Claimed>, Failure> {
    let deadline = args.wait.flatten().map(after);
    let mut pause = Duration::from_millis(50);
    // Read once: `-` takes candidates from stdin, which a second round would find empty.
    let candidates = match args.any {
        true => crate::cli::one_of_many::candidates(&args.issues)?,
        false => Vec::new(),
    };
    loop {
        let now = clock.now();
        let held_by_another = if args.any {
            let got = crate::cli::one_of_many::claim(ctx, &candidates, claim, now, args.order)?;
            output::report_diverged(ctx, &got.diverged, &mut std::io::stderr())?;
            match got.claimed {
                Some(report) => {
                    let handle = handle(&report.issue);
                    return Ok(Some(Claimed {
                        handle,
                        report,
                        at: now,
                    }));
                }
                None => crate::cli::one_of_many::none_free(&got),
            }
        } else {
            let issue = IssueId::new(args.issues.first().map_or("", String::as_str))?;
            let handle = handle(&issue);
            let report = handle.apply(now, |cur| rules::acquire(&issue, cur, claim, now))?;
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let give_up = args.wait.is_none() || left.is_some_and(|l| l.is_zero());
            // Any other answer, or the last one, is reported by the caller.
            if report.outcome != Outcome::Held || give_up {
                return Ok(Some(Claimed {
                    handle,
                    report,
                    at: now,
                }));
            }
            output::report_line(&report, now)
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if args.wait.is_none() || left.is_some_and(|l| l.is_zero()) {
            diagnostics::line("git lease run", &held_by_another);
            return Ok(None);
        }
        std::thread::sleep(left.map_or(pause, |l| l.min(pause)));
        pause = (pause * 3 / 2).min(Duration::from_secs(2));
    }
}
