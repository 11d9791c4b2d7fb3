//! The tenure followed while the child runs: renewals (for a lease that never expires,
//! readings) on a thread of their own, and the wait for what ends the run. A lease that never
//! expires is read every `--every` and, in a local ledger, whenever a ref moves, so a revoke
//! stops the child as soon as it is written.

use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git_lease::rules::{self, Outcome, Tenure};
use git_lease::{Error, Report, Ttl};

use super::renewal::StopWindow;
use super::{after, diagnostics, Context, Event, Failure, Handle, RunningClock};

/// What wakes the thread that renews (or reads) the lease before its interval is up.
pub(super) enum Wake {
    /// The run is over: stop.
    Stop,
    /// A ref of the repository moved: read a lease that never expires now.
    Moved,
}

/// Sends [`Wake::Moved`] to `wake` for every change to a ref of this repository, for as long
/// as the returned watcher lives; `None` where notifications are unavailable (the lease is
/// then read every `--every` only).
pub(super) fn on_ref_moves(
    ctx: &Context,
    wake: mpsc::Sender<Wake>,
) -> Option<notify::RecommendedWatcher> {
    let common_dir = ctx.ledger.store().repo().common_dir();
    let first = wake.clone();
    let watcher = crate::cli::watch::notify_ref_changes(common_dir, move || {
        let _ = wake.send(Wake::Moved);
    });
    match watcher {
        Ok(w) => {
            // A move before the watch began is read at once too.
            let _ = first.send(Wake::Moved);
            Some(w)
        }
        Err(e) => {
            diagnostics::line(
                "git lease run",
                &format!("no file-system notifications ({e}); reading the lease every --every"),
            );
            None
        }
    }
}

/// What one renewal (or, for a lease that never expires, one reading) found.
pub(crate) enum RenewalFound {
    /// Still this run's tenure; it now expires then.
    StillHeld(Option<DateTime<Utc>>),
    /// Lost, and why.
    Lost(String),
}

/// Renews `tenure` at `now`, or for a lease that never expires reads it: still this tenure
/// and live, or lost.
pub(crate) fn keep(
    handle: &Handle,
    tenure: &Tenure,
    ttl: Ttl,
    now: DateTime<Utc>,
) -> Result<RenewalFound, Error> {
    let report = match ttl {
        // Nothing to extend: a renewal would only write the same state again.
        Ttl::Never => {
            let entry = handle.current(now)?;
            let ours = entry.as_ref().is_some_and(|e| {
                tenure.is_recorded_in(&e.lease) && git_lease::is_live(e.current(), now)
            });
            if ours {
                return Ok(RenewalFound::StillHeld(None));
            }
            Report::unchanged(Outcome::NotHolder, &handle.issue, entry)
        }
        Ttl::For(_) => handle.apply(now, |cur| {
            rules::renew_tenure(cur, tenure, handle.credentials(), ttl, now)
        })?,
    };
    Ok(match report.outcome {
        Outcome::Renewed => RenewalFound::StillHeld(report.lease().and_then(|l| l.expires_at)),
        _ => RenewalFound::Lost(super::lost_reason(handle, tenure, &report, now)),
    })
}

/// Renews the lease every `interval` on a thread of its own (reads it, for a lease that never
/// expires), until told to stop or the lease is lost; each renewal (or the loss) is sent as an
/// [`Event`]. Attempts start `interval` apart, however long each takes; a failed one is said
/// on stderr and tried again.
pub(super) fn renew_in_background(
    handle: Handle,
    tenure: Tenure,
    interval: Duration,
    ttl: Ttl,
    clock: RunningClock,
    events: mpsc::Sender<Event>,
    wake: mpsc::Receiver<Wake>,
) {
    std::thread::spawn(move || {
        let mut next = after(interval);
        loop {
            match wake.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    next = next.checked_add(interval).unwrap_or(next);
                }
                // Only a lease that never expires is read on a move: nothing is written.
                Ok(Wake::Moved) if ttl == Ttl::Never => {}
                Ok(Wake::Moved) => continue,
                Ok(Wake::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            match keep(&handle, &tenure, ttl, clock.now()) {
                Ok(RenewalFound::StillHeld(expires_at)) => {
                    let _ = events.send(Event::Renewed(expires_at));
                }
                Ok(RenewalFound::Lost(why)) => {
                    let _ = events.send(Event::LeaseLost(why));
                    return;
                }
                Err(e) => diagnostics::line(
                    "git lease run",
                    &format!("renewing failed, will retry: {e}"),
                ),
            }
        }
    });
}

/// Waits for what ends the run: the child's exit, the lease lost, or, for a lease of `ttl`
/// that is renewed, the renew deadline of its latest expiry passing with no renewal.
pub(super) fn wait_for_stop(
    inbox: &mpsc::Receiver<Event>,
    ttl: Option<chrono::Duration>,
    expires_at: Option<DateTime<Utc>>,
    clock: RunningClock,
) -> Result<Stop, Failure> {
    let mut window = ttl.zip(expires_at).map(|(t, e)| StopWindow::before(e, t));
    loop {
        let event = match window {
            None => inbox.recv().ok(),
            Some(w) => match inbox.recv_timeout(clock.until(w.term_at)) {
                Ok(event) => Some(event),
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(Stop::Deadline(w)),
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        match event {
            Some(Event::Renewed(expires_at)) => {
                window = ttl.zip(expires_at).map(|(t, e)| StopWindow::before(e, t));
            }
            Some(Event::ChildExited(status)) => return Ok(Stop::Exited(status)),
            Some(Event::LeaseLost(why)) => return Ok(Stop::Lost(why)),
            None => {
                return Err(Error::Io {
                    context: "cannot wait for the command".into(),
                    source: std::io::Error::other("the thread waiting for it ended"),
                }
                .into())
            }
        }
    }
}

/// Why `run` stops waiting.
pub(super) enum Stop {
    Exited(std::io::Result<ExitStatus>),
    Lost(String),
    Deadline(StopWindow),
}
