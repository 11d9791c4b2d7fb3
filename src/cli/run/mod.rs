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
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git_lease::rules::{self, Claim, Credentials, Ending};
use git_lease::{Error, Holder, IssueId, Ledger, Report, Ttl};

mod child;
mod follow;
mod lost;
mod running;
use lost::lost_reason;
mod renewal;
pub(crate) use follow::{keep, RenewalFound};
pub(crate) use renewal::{renew_interval, StopWindow};
mod take;
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

use super::output::diagnostics;
use super::{exit, output, Context, Failure};
use running::Running;
use take::{own_tenure, take_lease, Claimed};
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
    pub order: git_lease::one_of_many::Order,
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
        struct RunReport {
            #[serde(flatten)]
            report: crate::cli::output::json::ReportView,
            #[serde(skip_serializing_if = "Option::is_none")]
            exit_code: Option<u8>,
        }
        let told = RunReport {
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
        eprintln!("error: {}", output::printable(reason));
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
    diagnostics::stream();
    let clock = RunningClock::starting_at(ctx.now);
    let Some((program, program_args)) = args.command.split_first() else {
        return Err(Error::InvalidInput("give the command to run after --".into()).into());
    };
    let interval = renew_interval(args.ttl, args.every)?;
    let secret = git_lease::os::new_session_secret()?;
    let dir = std::env::current_dir().map_err(|e| Error::Io {
        context: "cannot read the current directory".into(),
        source: e,
    })?;
    let claim = Claim {
        session: Some(git_lease::session::hash(&secret)),
        process: git_lease::os::holder_process(std::process::id()),
        ..Claim::new(args.holder.clone(), args.ttl)
    };
    let handle = |issue: &IssueId| Handle {
        dir: dir.clone(),
        target: ctx.target(),
        issue: issue.clone(),
        holder: args.holder.clone(),
        secret: Some(secret.clone()),
    };
    let Some(Claimed { handle, report, at }) = take_lease(ctx, &args, &claim, clock, handle)?
    else {
        return Ok(exit::REFUSED);
    };
    tell(ctx, &report, at, None);
    let Some((lease, tenure)) = own_tenure(&report, &claim) else {
        return Ok(exit::REFUSED);
    };
    let mut command = Process::new(program);
    command
        .args(program_args)
        .env_remove(git_lease::git::STARTED_BY)
        .env("GIT_LEASE_ISSUE", handle.issue.as_str())
        .env("GIT_LEASE_TOKEN", lease.token.to_string())
        .env("GIT_LEASE_HOLDER", args.holder.as_str())
        .env("GIT_LEASE_SECRET", &secret);
    let running = Running {
        ctx,
        args: &args,
        handle: &handle,
        tenure: &tenure,
        clock,
        program,
    };
    running.supervise(command, lease.expires_at, interval)
}
