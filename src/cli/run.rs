//! `git lease run` and `git lease wait`: leases for workers that run unattended.
//!
//! `run` holds a lease for exactly as long as a child command runs: it acquires with a session
//! and its own process id (so a crash frees the lease at once on this machine), renews in the
//! background well before expiry, and when the child ends completes or releases. A worker must
//! not go on acting after losing its lease, so a refused renewal stops the child.

use std::path::PathBuf;
use std::process::{Command as Process, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git_lease::remote::Remote;
use git_lease::rules::{self, Claim, Credentials, Ending, Outcome};
use git_lease::{Error, IssueId, Ledger, Report, Ttl};

use super::{exit, output, Context, Failure};

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
    pub holder: String,
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
    /// Starts counting from `start` now.
    pub(crate) fn starting_at(start: DateTime<Utc>) -> RunningClock {
        RunningClock {
            start,
            started: Instant::now(),
        }
    }

    /// Returns how long it is from now until `at` on this clock (zero once it has passed).
    pub(crate) fn until(&self, at: DateTime<Utc>) -> Duration {
        let elapsed = chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default();
        (at - (self.start + elapsed))
            .to_std()
            .unwrap_or(Duration::ZERO)
    }

    /// Returns the instant now, to the second.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        let elapsed = chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default();
        use chrono::SubsecRound;
        (self.start + elapsed).trunc_subsecs(0)
    }
}

/// Everything needed to act on the lease from any thread: each call opens the repository
/// afresh, since a gix repository handle stays on its thread.
#[derive(Clone)]
struct Handle {
    dir: PathBuf,
    remote: Option<String>,
    issue: IssueId,
    holder: String,
    secret: String,
}

impl Handle {
    fn with<T>(
        &self,
        f: impl FnOnce(&Ledger, Option<&Remote>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let ledger = Ledger::discover(&self.dir)?.with_local_liveness();
        match &self.remote {
            Some(name) => {
                let remote = Remote::new(&ledger, name)?;
                f(&ledger, Some(&remote))
            }
            None => f(&ledger, None),
        }
    }

    fn apply(
        &self,
        decide: impl FnMut(Option<&git_lease::Lease>) -> rules::Transition,
    ) -> Result<Report, Error> {
        self.with(|ledger, remote| match remote {
            Some(r) => r.apply(&self.issue, decide),
            None => ledger.apply(&self.issue, decide),
        })
    }

    fn credentials(&self) -> Credentials<'_> {
        Credentials {
            holder: &self.holder,
            secret: Some(&self.secret),
        }
    }
}

enum Event {
    ChildExited(std::io::Result<ExitStatus>),
    LeaseLost(String),
}

/// Runs `git lease run`.
pub(crate) fn run(ctx: &Context, args: RunArgs) -> Result<u8, Failure> {
    let clock = RunningClock::starting_at(ctx.now);
    let Some((program, program_args)) = args.command.split_first() else {
        return Err(Error::InvalidInput("give the command to run after --".into()).into());
    };
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
    let now = clock.now();
    let handle = |issue: &IssueId| Handle {
        dir: dir.clone(),
        remote: ctx.remote.clone(),
        issue: issue.clone(),
        holder: args.holder.clone(),
        secret: secret.clone(),
    };
    let (handle, report) = if args.any {
        let candidates = super::any::candidates(&args.issues)?;
        let got = super::any::claim(ctx, &candidates, &claim)?;
        super::report_diverged(ctx, &got.diverged, &mut std::io::stderr())?;
        let Some(report) = got.claimed else {
            eprintln!("git lease run: {}", super::any::none_free(&got));
            return Ok(exit::REFUSED);
        };
        (handle(&report.issue), report)
    } else {
        let issue = IssueId::new(args.issues.first().map_or("", String::as_str))?;
        let handle = handle(&issue);
        let report = handle.apply(|cur| rules::acquire(&issue, cur, &claim, now))?;
        (handle, report)
    };
    let issue = handle.issue.clone();
    let started_session = report.lease().is_some_and(|l| l.session == claim.session);
    if report.outcome != Outcome::Acquired || !started_session {
        eprintln!("git lease run: {}", output::report_line(&report, now));
        return Ok(exit::REFUSED);
    }
    let lease = report
        .lease()
        .cloned()
        .expect("an acquired report has a lease");
    eprintln!("git lease run: {}", output::report_line(&report, now));

    // Catch signals before the child exists, so none is lost between spawn and forwarding;
    // the child starts with default dispositions, as exec resets caught signals.
    let signals = catch_signals()?;
    let spawned = Process::new(program)
        .args(program_args)
        .env("GIT_LEASE_ISSUE", issue.as_str())
        .env("GIT_LEASE_TOKEN", lease.token.to_string())
        .env("GIT_LEASE_HOLDER", &args.holder)
        .env("GIT_LEASE_SECRET", &secret)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            // Nothing ran: give the lease back so nobody waits for it.
            let now = clock.now();
            let _ = handle.apply(|cur| {
                rules::release(&issue, cur, handle.credentials(), Ending::Abandon, now)
            });
            return Err(Error::Io {
                context: format!("cannot start {program}"),
                source: e,
            }
            .into());
        }
    };
    let child_pid = child.id();

    let (events, inbox) = mpsc::channel::<Event>();
    let (stop_renewing, renewer_stop) = mpsc::channel::<()>();
    forward_signals(signals, child_pid);
    {
        let events = events.clone();
        std::thread::spawn(move || {
            let _ = events.send(Event::ChildExited(child.wait()));
        });
    }
    let interval = args.every.or_else(|| match args.ttl {
        Ttl::Never => None,
        Ttl::For(d) => Some(
            d.to_std()
                .unwrap_or(Duration::from_secs(60))
                .checked_div(3)
                .unwrap_or(Duration::from_secs(1))
                .max(Duration::from_secs(1)),
        ),
    });
    if let Some(interval) = interval {
        let handle = handle.clone();
        let ttl = args.ttl;
        let mut expires_at = lease.expires_at;
        std::thread::spawn(move || loop {
            match renewer_stop.recv_timeout(interval) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let now = clock.now();
            match handle.apply(|cur| rules::renew(cur, handle.credentials(), ttl, now)) {
                Ok(report) if report.outcome == Outcome::Renewed => {
                    expires_at = report.lease().and_then(|l| l.expires_at);
                }
                Ok(report) => {
                    let _ = events.send(Event::LeaseLost(output::report_line(&report, now)));
                    return;
                }
                Err(e) => {
                    eprintln!("git lease run: renewing failed, will retry: {e}");
                    if expires_at.is_some_and(|t| clock.now() >= t) {
                        let _ = events.send(Event::LeaseLost(format!(
                            "the lease expired while renewing failed: {e}"
                        )));
                        return;
                    }
                }
            }
        });
    }

    match inbox.recv() {
        Ok(Event::ChildExited(status)) => {
            let _ = stop_renewing.send(());
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
            match handle.apply(|cur| {
                rules::release(&issue, cur, handle.credentials(), end_as.ending(), now)
            }) {
                Ok(report) => eprintln!("git lease run: {}", output::report_line(&report, now)),
                Err(e) => eprintln!("git lease run: could not end the lease: {e}"),
            }
            Ok(child_code(status))
        }
        Ok(Event::LeaseLost(why)) => {
            eprintln!("git lease run: lease lost, stopping {program}: {why}");
            stop_child(child_pid, args.grace, &inbox);
            Ok(exit::LEASE_LOST)
        }
        Err(_) => Err(Error::InvalidInput("lost track of the child".into()).into()),
    }
}

/// Sends SIGTERM, waits up to `grace` for the child to exit, then SIGKILL.
fn stop_child(pid: u32, grace: Duration, inbox: &mpsc::Receiver<Event>) {
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(left) {
            Ok(Event::ChildExited(_)) => return,
            Ok(Event::LeaseLost(_)) => continue,
            Err(_) => break,
        }
    }
    signal(pid, libc::SIGKILL);
    while let Ok(event) = inbox.recv_timeout(Duration::from_secs(5)) {
        if matches!(event, Event::ChildExited(_)) {
            return;
        }
    }
}

fn signal(pid: u32, sig: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) has no memory effects; a stale pid at worst gets ESRCH.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Starts catching the signals a supervisor sends to `git lease run`.
fn catch_signals() -> Result<signal_hook::iterator::Signals, Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
    signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2])
        .map_err(|e| Error::Io {
            context: "cannot install signal handlers".into(),
            source: e,
        })
}

/// Forwards every caught signal (including those caught before the child started) to it.
fn forward_signals(mut signals: signal_hook::iterator::Signals, child: u32) {
    std::thread::spawn(move || {
        for sig in signals.forever() {
            signal(child, sig);
        }
    });
}

/// Returns the child's exit code to pass through: its code, or 128 + the signal that ended it.
fn child_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
        _ => 1,
    }
}

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
    let remote = match &ctx.remote {
        Some(name) => Some(Remote::new(&ctx.ledger, name)?),
        None => None,
    };
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut pause = Duration::from_millis(50);
    loop {
        let now = clock.now();
        let current = match &remote {
            Some(r) => r.current(&issue)?,
            None => ctx.ledger.current(&issue)?,
        };
        let live = current
            .as_ref()
            .filter(|e| git_lease::is_live(&e.lease, now));
        if live.is_none() {
            let Some(claim) = &acquire else {
                writeln!(out, "free: {issue} is not held")?;
                return Ok(exit::OK);
            };
            let report = match &remote {
                Some(r) => r.apply(&issue, |cur| rules::acquire(&issue, cur, claim, now))?,
                None => ctx
                    .ledger
                    .apply(&issue, |cur| rules::acquire(&issue, cur, claim, now))?,
            };
            if report.outcome == Outcome::Acquired {
                writeln!(out, "{}", output::report_line(&report, now))?;
                return Ok(exit::OK);
            }
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            let report = Report::unchanged(Outcome::Held, &issue, current);
            writeln!(out, "{}", output::report_line(&report, now))?;
            return Ok(exit::REFUSED);
        }
        let nap = left.map_or(pause, |l| l.min(pause));
        std::thread::sleep(nap);
        pause = (pause * 3 / 2).min(Duration::from_secs(2));
    }
}
