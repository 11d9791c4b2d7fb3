//! `git lease wait`: block until an issue is not live, then acquire it if asked.

use std::time::{Duration, Instant};

use git_lease::rules::{self, Claim, Outcome};
use git_lease::{IssueId, Report};

use super::{after, RunningClock};
use crate::cli::output::json::{json_line, LeaseView};
use crate::cli::output::{self, emit_reports};
use crate::cli::{exit, Context, Failure};

/// Runs `git lease wait`: block until the issue is not live (then acquire it if asked).
pub(crate) fn wait(
    ctx: &Context,
    issue: &str,
    timeout: Option<Duration>,
    acquire: Option<Claim>,
    out: &mut dyn std::io::Write,
) -> Result<u8, Failure> {
    let clock = RunningClock::starting_at(ctx.now);
    let issue = IssueId::new(issue)?;
    let backend = ctx.backend()?;
    let deadline = timeout.map(after);
    let mut pause = Duration::from_millis(50);
    loop {
        let now = clock.now();
        ctx.ledger.set_reader_clock(now);
        let current = backend.current(&issue)?;
        let live = current
            .as_ref()
            .filter(|e| git_lease::is_live(e.current(), now));
        if live.is_none() {
            let Some(claim) = &acquire else {
                if ctx.json {
                    #[derive(serde::Serialize)]
                    struct Free {
                        outcome: &'static str,
                        #[serde(flatten)]
                        lease: LeaseView,
                    }
                    json_line(
                        out,
                        &Free {
                            outcome: "free",
                            lease: LeaseView::new(issue.as_str(), current.as_ref(), now),
                        },
                    )?;
                } else {
                    writeln!(
                        out,
                        "free: {} is not held",
                        output::printable(issue.as_str())
                    )?;
                }
                return Ok(exit::OK);
            };
            let report =
                backend.apply(&issue, &mut |cur| rules::acquire(&issue, cur, claim, now))?;
            if report.outcome == Outcome::Acquired {
                return emit_reports(ctx, &[report], false, None, out);
            }
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            let report = Report::unchanged(Outcome::Held, &issue, current);
            return emit_reports(ctx, &[report], false, None, out);
        }
        let nap = left.map_or(pause, |l| l.min(pause));
        std::thread::sleep(nap);
        pause = (pause * 3 / 2).min(Duration::from_secs(2));
    }
}
