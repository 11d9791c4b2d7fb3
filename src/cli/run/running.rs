//! A `run` whose lease is taken: its child started and supervised, then the end of it: the lease released as the child's exit says, or the child stopped when the
//! lease is lost or no renewal came in time; and a child that never started.

use std::process::Command as Process;
use std::sync::mpsc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use git_lease::rules::{self, Ending, Outcome, Tenure};
use git_lease::{Error, Ttl};

use super::child::{catch_signals, child_code, forward_signals, stop_child, supervise};
use super::follow::{on_ref_moves, renew_in_background, wait_for_stop, Stop, Wake};
use super::lost::lost_reason;
use super::{after, tell, tell_lost, tree, Event, Handle, RunArgs, RunningClock};
use crate::cli::output::{self, diagnostics};
use crate::cli::{exit, Context, Failure};

/// A `run` whose child started: what its end needs.
pub(super) struct Running<'a> {
    pub(super) ctx: &'a Context,
    pub(super) args: &'a RunArgs,
    pub(super) handle: &'a Handle,
    pub(super) tenure: &'a Tenure,
    pub(super) clock: RunningClock,
    /// The command run.
    pub(super) program: &'a str,
}

impl Running<'_> {
    /// Starts the child of `command` and supervises it: its tree, its signals, the renewals
    /// every `interval` of a lease that expires at `expires_at`, until the run ends ([`Running::end`]).
    pub(super) fn supervise(
        &self,
        mut command: Process,
        expires_at: Option<DateTime<Utc>>,
        interval: Option<Duration>,
    ) -> Result<u8, Failure> {
        // The tree is prepared before signals are caught, so that its guard starts with
        // `run`'s own dispositions.
        let mut tree = tree::Tree::prepare();
        // Catch signals before the child exists, so none is lost between spawn and forwarding;
        // the child starts with default dispositions, as exec resets caught signals.
        let signals = catch_signals()?;
        supervise(&mut command, tree.join_fd());
        let (stop_renewing, renewer_wake) = mpsc::channel::<Wake>();
        // A lease that never expires is read again whenever a ref of a local ledger moves, so a
        // revoke is found at once; watched from before the child starts, for as long as the run.
        let _moves = match (self.args.ttl, &self.handle.target) {
            (Ttl::Never, git_lease::backend::Target::Local) => {
                on_ref_moves(self.ctx, stop_renewing.clone())
            }
            _ => None,
        };
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return not_started(self.handle, self.tenure, self.clock, self.program, e),
        };
        // The child leads its own process group: its id is the group's.
        let group = child.id();
        tree.started(group);
        let (events, inbox) = mpsc::channel::<Event>();
        forward_signals(signals, group);
        {
            let events = events.clone();
            std::thread::spawn(move || {
                let _ = events.send(Event::ChildExited(child.wait()));
            });
        }
        if let Some(interval) = interval {
            let (handle, tenure) = (self.handle.clone(), self.tenure.clone());
            let (ttl, clock) = (self.args.ttl, self.clock);
            renew_in_background(handle, tenure, interval, ttl, clock, events, renewer_wake);
        }
        let ttl = match self.args.ttl {
            Ttl::For(ttl) if interval.is_some() => Some(ttl),
            _ => None,
        };
        let stop = wait_for_stop(&inbox, ttl, expires_at, self.clock)?;
        let _ = stop_renewing.send(Wake::Stop);
        self.end(stop, tree, &inbox)
    }

    /// Ends the run as `stop` says, and returns its exit code.
    pub(super) fn end(
        &self,
        stop: Stop,
        mut tree: tree::Tree,
        inbox: &mpsc::Receiver<Event>,
    ) -> Result<u8, Failure> {
        let (issue, program) = (&self.handle.issue, self.program);
        match stop {
            Stop::Exited(status) => {
                // Nothing the child left running may go on once the lease is ended: the tree
                // is killed, its cgroup removed, its guard told.
                drop(tree);
                let status = status.map_err(|e| Error::Io {
                    context: format!("cannot wait for {program}"),
                    source: e,
                })?;
                self.exited(status)
            }
            Stop::Lost(why) => {
                let reason = format!("lease lost, stopping {program}: {why}");
                tell_lost(self.ctx, issue, &reason);
                stop_child(&mut tree, after(self.args.grace), inbox);
                Ok(exit::LEASE_LOST)
            }
            Stop::Deadline(w) => {
                tell_lost(
                    self.ctx,
                    issue,
                    &format!(
                        "no renewal succeeded in time, stopping {program} before the lease expires at {}",
                        git_lease::time::format_instant(w.expires_at)
                    ),
                );
                // The grace period ends by the window's SIGKILL instant, sooner if need be.
                let kill_at = after(self.args.grace.min(self.clock.until(w.kill_by)));
                stop_child(&mut tree, kill_at, inbox);
                Ok(exit::LEASE_LOST)
            }
        }
    }

    /// Ends the lease as the child's exit `status` says (`--on-success`, `--on-failure`), and
    /// returns the child's exit code, or [`exit::LEASE_LOST`] when the lease was lost meanwhile.
    fn exited(&self, status: std::process::ExitStatus) -> Result<u8, Failure> {
        let (handle, issue) = (self.handle, &self.handle.issue);
        let end_as = if status.success() {
            self.args.on_success
        } else {
            self.args.on_failure
        };
        let now: DateTime<Utc> = self.clock.now();
        let code = child_code(status);
        match handle.apply(now, |cur| {
            rules::release_tenure(
                issue,
                cur,
                self.tenure,
                handle.credentials(),
                end_as.ending(),
                now,
            )
        }) {
            Ok(report) if report.outcome == Outcome::Released => {
                tell(self.ctx, &report, now, Some(code))
            }
            // Revoked (and perhaps taken again) since the last renewal: the child worked on
            // without the lease, and its end must not read as a success.
            Ok(report) => {
                let reason = format!(
                    "lease lost while {} ran (it exited with {code}): {}",
                    self.program,
                    lost_reason(handle, self.tenure, &report, now)
                );
                tell_lost(self.ctx, issue, &reason);
                return Ok(exit::LEASE_LOST);
            }
            Err(e) => diagnostics::line("error", &format!("run could not end the lease: {e}")),
        }
        Ok(code)
    }
}

/// Answers a child that could not be started: the lease is given back (nothing ran, so
/// nobody should wait for it), and the exit code is the shell's, 127 for a command that is
/// not there and 126 for one that cannot be run.
pub(super) fn not_started(
    handle: &Handle,
    tenure: &Tenure,
    clock: RunningClock,
    program: &str,
    e: std::io::Error,
) -> Result<u8, Failure> {
    let now = clock.now();
    let _ = handle.apply(now, |cur| {
        rules::release_tenure(
            &handle.issue,
            cur,
            tenure,
            handle.credentials(),
            Ending::Abandon,
            now,
        )
    });
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        std::io::ErrorKind::PermissionDenied => 126,
        _ => {
            return Err(Error::Io {
                context: format!("cannot start {program}"),
                source: e,
            }
            .into())
        }
    };
    diagnostics::line(
        "error",
        &format!("cannot start {}: {e}", output::printable(program)),
    );
    Ok(code)
}
