//! `git lease run` and `git lease wait`: leases for workers that run unattended.
//!
//! `run` holds a lease for exactly as long as a child command runs: it acquires with a session
//! and its own process id (so a crash frees the lease at once on this machine), renews in the
//! background well before expiry, and when the child ends completes or releases. A worker must
//! not go on acting after losing its lease, so a refused renewal stops the child.
//!
//! `run` follows its *tenure*, not its holder name: every renewal and the final release are
//! of the tenure it began ([`rules::Tenure`]: token, start, session), so a lease revoked and
//! taken again between two renewals, even under the same holder name, is lost (exit 6), and a
//! tenure that was lost by the time the child ended is reported so (exit 6) instead of
//! passing the child's code through. A lease that never expires is not renewed but read every
//! `--every` (10s by default) and, in a local ledger, whenever a ref moves ([`follow`]), and
//! lost the same way once it is no longer this tenure.
//!
//! The child never outlives `run`, nor does anything it started ([`tree`]): it runs in a
//! process group of its own, which receives every signal `run` forwards, and where one can be
//! made in a cgroup of its own; `run` is a child subreaper, so that descendants that leave the
//! group stay findable. Every stop, and `run`'s end, stops the whole tree before the lease is
//! ended. On Linux the child is also started with `PR_SET_PDEATHSIG` = SIGKILL, so the kernel
//! kills it if `run` dies without a chance to act (`kill -9`), and a guard process kills the
//! child's group and its cgroup then: the lease records `run`'s process id, so it is free on
//! this machine the moment `run` is gone, and its command must be gone by then too. (Without
//! a cgroup, a descendant that left the child's process group survives a `kill -9` of `run`;
//! see [`tree`].)
//!
//! Renewals that keep failing (an unreachable remote, an unreadable repository) must not let
//! the child work past the lease's expiry, when someone else may take the issue. So, as in
//! Kubernetes leader election (renew deadline shorter than the lease duration), `run` keeps a
//! *stop reserve* at the end of every lease it recorded: if no renewal has succeeded by the
//! time only the reserve is left, it stops the child (SIGTERM, then SIGKILL) and exits 6 as for
//! a lost lease. The reserve is a third of the lease's guaranteed life, which is the TTL less
//! the second that recording instants in whole seconds may cost: a lease of TTL `T` recorded
//! with expiry `E` is stopped from `E - (T - 1s) / 3` (the renew deadline, two thirds of that
//! life after the renewal), and SIGKILL follows after `--grace` but no later than
//! `E - (T - 1s) / 6`, halfway through the reserve, so the child is gone before `E`. `--every`
//! must be shorter than that renew deadline. [`StopWindow`](renewal::StopWindow) is the one
//! place this is computed.
//!
//! Here: the lease's side (acquire, renew, end) and the run itself; [`follow`] the renewals
//! and the wait on child and lease; [`child`] the child's process group and signals; [`tree`]
//! everything the child starts;
//! [`renewal`] the renew interval and the stop window; [`wait`](mod@wait) `git lease wait`.

use std::path::PathBuf;
use std::process::{Command as Process, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git_lease::rules::{self, Claim, Credentials, Ending, Outcome, Tenure};
use git_lease::{Error, Holder, IssueId, Ledger, Report, Ttl};

mod child;
mod follow;
mod lost;
use lost::lost_reason;
mod renewal;
pub(crate) use follow::{keep, Kept};
pub(crate) use renewal::{renew_interval, StopWindow};
#[cfg(target_os = "linux")]
mod tree;
mod wait;

/// Where there is no `/proc`, subreaper or cgroup: the child's process group is its tree.
#[cfg(not(target_os = "linux"))]
mod tree {
    use super::child::signal_group;

    pub(super) struct Tree {
        group: Option<u32>,
    }

    impl Tree {
        pub(super) fn prepare() -> Tree {
            Tree { group: None }
        }

        pub(super) fn join_fd(&self) -> Option<std::os::fd::RawFd> {
            None
        }

        pub(super) fn started(&mut self, child: u32) {
            self.group = Some(child);
        }

        pub(super) fn signal(&mut self, sig: i32) {
            if let Some(group) = self.group {
                signal_group(group, sig);
            }
        }

        pub(super) fn kill(&mut self) {
            self.signal(libc::SIGKILL);
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            self.kill();
        }
    }
}

use super::output::said;
use super::{exit, output, Context, Failure};
use child::{catch_signals, child_code, forward_signals, stop_child, supervise};
use follow::{renew_in_background, wait_for_stop, Stop, Wake};
pub(crate) use wait::wait;

/// What a child's end turns into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EndAs {
    /// Record `complete`.
    Complete,
    /// Record `release`.
    Release,
    /// Record `abandon`.
    Abandon,
}

impl EndAs {
    fn ending(self) -> Ending {
        match self {
            EndAs::Complete => Ending::Complete,
            EndAs::Release => Ending::Release,
            EndAs::Abandon => Ending::Abandon,
        }
    }
}

/// The arguments of `run`.
pub(crate) struct RunArgs {
    /// The issue, or with `any` the candidates.
    pub issues: Vec<String>,
    /// Claim any one free issue of `issues`.
    pub any: bool,
    /// The order `any` tries the candidates in.
    pub order: git_lease::any::Order,
    /// Wait while the issue is held (`Some`), for at most this long (`Some(Some(_))`).
    pub wait: Option<Option<Duration>>,
    pub holder: Holder,
    pub ttl: Ttl,
    pub every: Option<Duration>,
    pub grace: Duration,
    pub on_success: EndAs,
    pub on_failure: EndAs,
    pub command: Vec<String>,
}

/// A clock that starts at the command's one reading of `now` and then runs with the machine's
/// monotonic clock, so a long-running `run` or `wait` honours `GIT_LEASE_NOW` too.
#[derive(Clone, Copy)]
pub(crate) struct RunningClock {
    start: DateTime<Utc>,
    started: Instant,
}

impl RunningClock {
    /// Starts at the command's one reading of `now`. When that reading is the system clock
    /// (truncated to whole seconds), starts at the system clock's precise time instead, so
    /// that the instants `run` acts at line up with the machine's clock, which others judge
    /// its leases by.
    pub(crate) fn starting_at(now: DateTime<Utc>) -> RunningClock {
        let start = if std::env::var_os("GIT_LEASE_NOW").is_none() {
            Utc::now().max(now)
        } else {
            now
        };
        RunningClock {
            start,
            started: Instant::now(),
        }
    }

    /// Returns the time now, to the nanosecond (never past the last recordable instant).
    fn precise_now(&self) -> DateTime<Utc> {
        let elapsed = chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default();
        self.start
            .checked_add_signed(elapsed)
            .map_or(git_lease::time::latest(), |t| {
                t.min(git_lease::time::latest())
            })
    }

    /// Returns the time now in whole seconds, as instants are recorded.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        use chrono::SubsecRound;
        self.precise_now().trunc_subsecs(0)
    }

    /// Returns how long until `at` (zero if it has passed).
    pub(crate) fn until(&self, at: DateTime<Utc>) -> Duration {
        (at - self.precise_now()).to_std().unwrap_or(Duration::ZERO)
    }
}

/// Reports on stderr (stdout is the child's alone) what became of the lease: a report line,
/// or with `--json` the operation's JSON object, with `exit_code` once the child has ended.
fn tell(ctx: &Context, report: &Report, now: DateTime<Utc>, exit_code: Option<u8>) {
    if ctx.json {
        #[derive(serde::Serialize)]
        struct Told {
            #[serde(flatten)]
            report: crate::cli::output::json::ReportView,
            #[serde(skip_serializing_if = "Option::is_none")]
            exit_code: Option<u8>,
        }
        let told = Told {
            report: crate::cli::output::json::ReportView::new(report, now),
            exit_code,
        };
        if let Ok(line) = super::output::json::json_text(&told) {
            eprintln!("{line}");
        }
    } else {
        eprintln!("git lease run: {}", output::report_line(report, now));
    }
}

/// Reports on stderr that the lease was lost and the child is being stopped: a line, or with
/// `--json` `{"issue", "outcome": "lease_lost", "reason", "exit_code": 6}`.
fn tell_lost(ctx: &Context, issue: &IssueId, reason: &str) {
    if ctx.json {
        let told = serde_json::json!({
            "issue": issue.as_str(),
            "outcome": "lease_lost",
            "reason": reason,
            "exit_code": exit::LEASE_LOST,
        });
        eprintln!(
            "{}",
            super::output::json::json_text(&told).unwrap_or_default()
        );
    } else {
        eprintln!("git lease run: {}", output::printable(reason));
    }
}

/// Returns the instant `d` from now, or a century from now for a longer `d`: a duration a user
/// typed never overflows the monotonic clock.
fn after(d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(d.min(CENTURY)).unwrap_or(now)
}

/// Everything needed to act on the lease from any thread: each call opens the repository
/// afresh, since a gix repository handle stays on its thread.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) dir: PathBuf,
    pub(crate) target: git_lease::backend::Target,
    pub(crate) issue: IssueId,
    pub(crate) holder: Holder,
    /// The session secret, if the tenure has one (every tenure of `run` has).
    pub(crate) secret: Option<String>,
}

impl Handle {
    /// Opens the ledger again for one step at `now`, which is also the reader's clock for
    /// what a remote's new commits may say.
    fn ledger(&self, now: DateTime<Utc>) -> Result<Ledger, Error> {
        Ledger::discover(&self.dir)?
            .with_local_liveness()
            .with_reader_clock(now)
    }

    pub(crate) fn apply(
        &self,
        now: DateTime<Utc>,
        mut decide: impl FnMut(Option<rules::Current<'_>>) -> rules::Transition,
    ) -> Result<Report, Error> {
        let ledger = self.ledger(now)?;
        let backend = git_lease::backend::open(&ledger, &self.target)?;
        backend.apply(&self.issue, &mut decide)
    }

    /// Returns the newest entry of the lease at `now` (a fetch, through a remote).
    fn current(&self, now: DateTime<Utc>) -> Result<Option<git_lease::Entry>, Error> {
        let ledger = self.ledger(now)?;
        let backend = git_lease::backend::open(&ledger, &self.target)?;
        backend.current(&self.issue)
    }

    pub(crate) fn credentials(&self) -> Credentials<'_> {
        Credentials {
            holder: &self.holder,
            secret: self.secret.as_deref(),
        }
    }
}

enum Event {
    ChildExited(std::io::Result<ExitStatus>),
    LeaseLost(String),
    /// A renewal succeeded: the lease now expires then.
    Renewed(Option<DateTime<Utc>>),
}

/// Runs `git lease run`: take the lease, start the child, renew while it runs, and end the
/// lease (or stop the child) by what happens first.
pub(crate) fn run(ctx: &Context, args: RunArgs) -> Result<u8, Failure> {
    // Its reports are a stream of JSON lines on stderr: what it says beside them joins it.
    said::stream();
    let clock = RunningClock::starting_at(ctx.now);
    let Some((program, program_args)) = args.command.split_first() else {
        return Err(Error::InvalidInput("give the command to run after --".into()).into());
    };
    let interval = renew_interval(args.ttl, args.every)?;
    let secret = git_lease::session::new_secret()?;
    let dir = std::env::current_dir().map_err(|e| Error::Io {
        context: "cannot read the current directory".into(),
        source: e,
    })?;
    let claim = Claim {
        session: Some(git_lease::session::hash(&secret)),
        process: git_lease::liveness::HolderProcess::of(std::process::id()),
        ..Claim::new(args.holder.clone(), args.ttl)
    };
    let handle = |issue: &IssueId| Handle {
        dir: dir.clone(),
        target: ctx.target(),
        issue: issue.clone(),
        holder: args.holder.clone(),
        secret: Some(secret.clone()),
    };
    let Some(Taken {
        handle,
        report,
        at: now,
    }) = take_lease(ctx, &args, &claim, clock, handle)?
    else {
        return Ok(exit::REFUSED);
    };
    let issue = handle.issue.clone();
    // Only a tenure of this run's own session is held by it (the same holder's live lease
    // of another session is refused).
    let (lease, tenure) = match report.lease() {
        Some(l)
            if report.outcome == Outcome::Acquired
                && l.session.as_deref() == claim.session.as_deref() =>
        {
            match Tenure::of(l) {
                Some(tenure) => (l.clone(), tenure),
                None => {
                    tell(ctx, &report, now, None);
                    return Ok(exit::REFUSED);
                }
            }
        }
        _ => {
            tell(ctx, &report, now, None);
            return Ok(exit::REFUSED);
        }
    };
    tell(ctx, &report, now, None);

    // The tree is prepared before signals are caught, so that its guard starts with
    // `run`'s own dispositions.
    let mut tree = tree::Tree::prepare();
    // Catch signals before the child exists, so none is lost between spawn and forwarding;
    // the child starts with default dispositions, as exec resets caught signals.
    let signals = catch_signals()?;
    let mut command = Process::new(program);
    command
        .args(program_args)
        .env_remove(git_lease::git::STARTED_BY)
        .env("GIT_LEASE_ISSUE", issue.as_str())
        .env("GIT_LEASE_TOKEN", lease.token.to_string())
        .env("GIT_LEASE_HOLDER", args.holder.as_str())
        .env("GIT_LEASE_SECRET", &secret);
    supervise(&mut command, tree.join_fd());
    let (stop_renewing, renewer_wake) = mpsc::channel::<Wake>();
    // A lease that never expires is read again whenever a ref of a local ledger moves, so a
    // revoke is found at once; watched from before the child starts, for as long as the run.
    let _moves = match (args.ttl, &handle.target) {
        (Ttl::Never, git_lease::backend::Target::Local) => {
            follow::on_ref_moves(ctx, stop_renewing.clone())
        }
        _ => None,
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return not_started(&handle, &tenure, clock, program, e),
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
        renew_in_background(
            handle.clone(),
            tenure.clone(),
            interval,
            args.ttl,
            clock,
            events,
            renewer_wake,
        );
    }
    let ttl = match args.ttl {
        Ttl::For(ttl) if interval.is_some() => Some(ttl),
        _ => None,
    };
    let stop = wait_for_stop(&inbox, ttl, lease.expires_at, clock)?;
    let _ = stop_renewing.send(Wake::Stop);
    match stop {
        Stop::Exited(status) => {
            // Nothing the child left running may go on once the lease is ended: the tree is
            // killed, its cgroup removed, its guard told.
            drop(tree);
            let status = status.map_err(|e| Error::Io {
                context: format!("cannot wait for {program}"),
                source: e,
            })?;
            let end_as = if status.success() {
                args.on_success
            } else {
                args.on_failure
            };
            let now = clock.now();
            let code = child_code(status);
            match handle.apply(now, |cur| {
                rules::release_tenure(
                    &issue,
                    cur,
                    &tenure,
                    handle.credentials(),
                    end_as.ending(),
                    now,
                )
            }) {
                Ok(report) if report.outcome == Outcome::Released => {
                    tell(ctx, &report, now, Some(code))
                }
                // Revoked (and perhaps taken again) since the last renewal: the child worked
                // on without the lease, and its end must not read as a success.
                Ok(report) => {
                    tell_lost(
                        ctx,
                        &issue,
                        &format!(
                            "lease lost while {program} ran (it exited with {code}): {}",
                            lost_reason(&handle, &tenure, &report, now)
                        ),
                    );
                    return Ok(exit::LEASE_LOST);
                }
                Err(e) => said::line("error", &format!("run could not end the lease: {e}")),
            }
            Ok(code)
        }
        Stop::Lost(why) => {
            tell_lost(
                ctx,
                &issue,
                &format!("lease lost, stopping {program}: {why}"),
            );
            stop_child(&mut tree, after(args.grace), &inbox);
            Ok(exit::LEASE_LOST)
        }
        Stop::Deadline(w) => {
            tell_lost(
                ctx,
                &issue,
                &format!(
                    "no renewal succeeded in time, stopping {program} before the lease expires at {}",
                    git_lease::time::format_instant(w.expires_at)
                ),
            );
            // The grace period ends by the window's SIGKILL instant, sooner if need be.
            let kill_at = after(args.grace.min(clock.until(w.kill_by)));
            stop_child(&mut tree, kill_at, &inbox);
            Ok(exit::LEASE_LOST)
        }
    }
}

/// What [`take_lease`] came to: the lease's handle, and the acquire's report at its instant
/// (an acquire that refused for another reason than a holder is reported by the caller).
struct Taken {
    handle: Handle,
    report: Report,
    at: DateTime<Utc>,
}

/// Takes the lease `run` holds: the issue, or with `--any` one free candidate. With `--wait`,
/// a claim held by someone else is tried again, with backoff, until it is taken or the
/// timeout passes. Returns `None`, having said why, when it stayed held.
fn take_lease(
    ctx: &Context,
    args: &RunArgs,
    claim: &Claim,
    clock: RunningClock,
    handle: impl Fn(&IssueId) -> Handle,
) -> Result<Option<Taken>, Failure> {
    let deadline = args.wait.flatten().map(after);
    let mut pause = Duration::from_millis(50);
    // Read once: `-` takes candidates from stdin, which a second round would find empty.
    let candidates = match args.any {
        true => super::any::candidates(&args.issues)?,
        false => Vec::new(),
    };
    loop {
        let now = clock.now();
        let held_by_another = if args.any {
            let got = super::any::claim(ctx, &candidates, claim, now, args.order)?;
            super::output::report_diverged(ctx, &got.diverged, &mut std::io::stderr())?;
            match got.claimed {
                Some(report) => {
                    let handle = handle(&report.issue);
                    return Ok(Some(Taken {
                        handle,
                        report,
                        at: now,
                    }));
                }
                None => super::any::none_free(&got),
            }
        } else {
            let issue = IssueId::new(args.issues.first().map_or("", String::as_str))?;
            let handle = handle(&issue);
            let report = handle.apply(now, |cur| rules::acquire(&issue, cur, claim, now))?;
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let give_up = args.wait.is_none() || left.is_some_and(|l| l.is_zero());
            // Any other answer, or the last one, is reported by the caller.
            if report.outcome != Outcome::Held || give_up {
                return Ok(Some(Taken {
                    handle,
                    report,
                    at: now,
                }));
            }
            output::report_line(&report, now)
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if args.wait.is_none() || left.is_some_and(|l| l.is_zero()) {
            said::line("git lease run", &held_by_another);
            return Ok(None);
        }
        std::thread::sleep(left.map_or(pause, |l| l.min(pause)));
        pause = (pause * 3 / 2).min(Duration::from_secs(2));
    }
}

/// Answers a child that could not be started: the lease is given back (nothing ran, so
/// nobody should wait for it), and the exit code is the shell's, 127 for a command that is
/// not there and 126 for one that cannot be run.
fn not_started(
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
    said::line(
        "error",
        &format!("cannot start {}: {e}", output::printable(program)),
    );
    Ok(code)
}
