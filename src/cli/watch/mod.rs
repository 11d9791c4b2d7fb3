//! `git lease watch`: a stream of lease events for an orchestrator, one line each.
//!
//! Locally it learns of ref changes from the file system (inotify through `notify`, on the
//! refs directory, `packed-refs` and `reftable/`), with a bounded poll as a fallback, and each
//! wake reads only the refs that moved ([`git_lease::Store::scan`]); through a remote it
//! fetches every lease ref at an interval, backing off while that fails. Expiries are
//! computed on this command's clock: its one reading of now (`GIT_LEASE_NOW` allowed), then
//! the machine's monotonic clock. It never writes to a ledger (a remote's fetches only move
//! its verified tracking copies), and it ends with exit 0 on SIGINT, SIGTERM or SIGHUP and
//! as soon as its standard output is closed. A signal ends it at once even while a fetch
//! waits on a remote that never answers: that `git fetch` is ended (SIGTERM, SIGKILL a
//! second later) and waited for, so nothing of the watch is left behind. With `--exec` or
//! `lease.onEvent`, [`exec`] runs a command for each event reported; a signal during that
//! command is passed on to it, and the watch ends once it has.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git_lease::remote::Remote;
use git_lease::store::{Moved, RefScan};
use git_lease::watch::{Follower, Kind, WatchEvent, WatchView};
use git_lease::{Error, Ledger};
use gix::ObjectId;

use super::output;
use super::output::diagnostics;
use super::output::json::json_line;
use super::run::RunningClock;
use super::{exit, parse_duration, Context, Failure};
use exec::{OnEvent, Stopping};

pub(crate) mod exec;

/// How often the local refs are read again when no notification came (a file system that
/// does not deliver them, a missed event).
const LOCAL_FALLBACK: Duration = Duration::from_secs(2);
/// How long a fetch that a signal interrupts has between SIGTERM and SIGKILL.
const FETCH_GRACE: Duration = Duration::from_secs(1);
/// How often a remote is fetched by default.
const REMOTE_INTERVAL: Duration = Duration::from_secs(3);
/// The longest wait between two fetches while a remote keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What wakes the loop.
enum Wake {
    /// Something under the refs changed.
    Changed,
    /// A signal, or standard output was closed: end.
    Stop,
}

/// The arguments of `watch`.
pub(crate) struct WatchArgs {
    pub since: Option<String>,
    pub interval: Option<String>,
    pub prefix: Option<String>,
    /// Only the events that matter to this holder.
    pub holder: Option<String>,
}

/// Where the events go: stdout, one line each, and the command of `--exec`, if any.
struct Report {
    json: bool,
    /// Only the events that matter to this holder.
    holder: Option<String>,
    on_event: Option<OnEvent>,
    stopping: Arc<Stopping>,
}

/// Where the tips come from.
enum Source<'a> {
    /// The local lease refs, and what was last seen of them.
    Local(&'a Ledger, RefScan),
    Remote(Box<Remote<'a>>),
}

impl Source<'_> {
    /// The namespace of the refs the tips are read from.
    fn namespace(&self) -> &str {
        match self {
            Source::Local(..) => git_lease::issue::REF_PREFIX,
            Source::Remote(remote) => remote.tracking_prefix(),
        }
    }

    /// The archive of those refs: a ledger that appears may be revived from it.
    fn archive(&self) -> String {
        match self {
            Source::Local(..) => git_lease::store::ARCHIVE_REF.to_owned(),
            Source::Remote(remote) => remote.archive_tracking_ref(),
        }
    }
}

/// Runs `git lease watch`.
pub(crate) fn watch(ctx: &Context, args: WatchArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    watch_running(ctx, args, None, out)
}

/// Runs `git lease watch`, and `on_event` (a shell command) for each event it reports.
pub(crate) fn watch_running(
    ctx: &Context,
    args: WatchArgs,
    on_event: Option<String>,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    // It runs until stopped: what it says beside its events is said at once.
    diagnostics::stream();
    let clock = RunningClock::starting_at(ctx.now);
    let prefix = args.prefix.unwrap_or_default();
    let since = args
        .since
        .as_deref()
        .map(|s| parse_since(s, ctx.now))
        .transpose()?;
    let (mut source, interval) = source_and_interval(ctx, args.interval.as_deref())?;
    let stopping = Arc::new(Stopping::default());
    let report = Report {
        json: ctx.json,
        holder: args.holder,
        on_event: on_event.map(|c| OnEvent::new(c, stopping.clone())),
        stopping: stopping.clone(),
    };
    let (wake, woken) = mpsc::channel::<Wake>();
    stop_on_signals(wake.clone(), stopping)?;
    stop_on_closed_stdout(wake.clone());
    // Kept alive for as long as the loop runs.
    let _watcher = match &source {
        Source::Local(ledger, _) => {
            watch_refs(ledger.store().repo().common_dir(), wake.clone(), interval)
        }
        Source::Remote(_) => None,
    };
    drop(wake);

    let store = ctx.ledger.store();
    let mut reported = Reported::default();
    let tips = match read_tips(&mut source, &mut reported) {
        // A signal ended the fetch: end, as for a signal at any other moment.
        Err(_) if git_lease::git::stopping() => return Ok(exit::OK),
        // The first read of the refs is every one of them.
        read => match read? {
            Moved::All(tips) | Moved::Some(tips) => tips,
        },
    };
    let now = clock.now();
    let namespace = source.namespace().to_owned();
    let follower = match since {
        Some(since) => {
            let (follower, events) =
                Follower::replay(store, &namespace, tips, &prefix, since, now)?;
            report.events(&events, out)?;
            follower
        }
        None => Follower::start(store, &namespace, tips, &prefix, now)?,
    };
    out.flush()?;
    let following = Following {
        ctx,
        follower: follower.with_archive(&source.archive()),
        source,
        reported,
        report,
        clock,
        interval,
        failures: 0,
        next_read: Instant::now() + interval,
    };
    following.run(&woken, out)
}

/// Where the tips come from (the remote given or chosen, else the local refs), and how often
/// they are read (`--interval`, else the source's default).
fn source_and_interval<'a>(
    ctx: &'a Context,
    interval: Option<&str>,
) -> Result<(Source<'a>, Duration), Failure> {
    let source = match &ctx.remote {
        Some(name) => Source::Remote(Box::new(Remote::new(&ctx.ledger, name)?)),
        None => Source::Local(&ctx.ledger, RefScan::new(git_lease::issue::REF_PREFIX)),
    };
    let interval = match (interval, &source) {
        (Some(text), _) => parse_duration(text)?,
        (None, Source::Local(..)) => LOCAL_FALLBACK,
        (None, Source::Remote(_)) => REMOTE_INTERVAL,
    };
    if interval.is_zero() {
        return Err(Error::InvalidInput("--interval must be more than zero".into()).into());
    }
    Ok((source, interval))
}

/// The watch once started: what it follows, where from, and when it reads next.
struct Following<'a> {
    ctx: &'a Context,
    source: Source<'a>,
    follower: Follower,
    reported: Reported,
    report: Report,
    clock: RunningClock,
    interval: Duration,
    /// Failed reads in a row.
    failures: u32,
    next_read: Instant,
}

impl Following<'_> {
    /// Reports the events as they come until a [`Wake::Stop`] or an error.
    fn run(mut self, woken: &mpsc::Receiver<Wake>, out: &mut dyn Write) -> Result<u8, Failure> {
        let store = self.ctx.ledger.store();
        loop {
            let mut wait = self.next_read.saturating_duration_since(Instant::now());
            if let Some(expiry) = self.follower.next_expiry() {
                // A whole-second instant: wake just after it, when the clock reads it.
                wait = wait.min(self.clock.until(expiry) + Duration::from_millis(5));
            }
            if stop_after_waiting(woken, wait) {
                return Ok(exit::OK);
            }
            // Read the tips before judging expiry, so that a renewal that landed in time is
            // seen before its lease would be reported expired.
            let remote_due = Instant::now() >= self.next_read
                || self
                    .follower
                    .next_expiry()
                    .is_some_and(|e| self.clock.until(e).is_zero());
            let read_now = matches!(self.source, Source::Local(..)) || remote_due;
            if read_now && self.read(out)? {
                return Ok(exit::OK);
            }
            let (events, errors) = self.follower.expire(store, self.clock.now());
            self.report.events(&events, out)?;
            for e in errors {
                diagnostics::line("error", &e.to_string());
            }
            out.flush()?;
        }
    }

    /// Reads the tips and reports what moved; returns true when a signal ended the read.
    fn read(&mut self, out: &mut dyn Write) -> Result<bool, Failure> {
        let store = self.ctx.ledger.store();
        // A remote's new commits are judged at the running clock, not the start's.
        self.ctx.ledger.set_reader_clock(self.clock.now());
        match read_tips(&mut self.source, &mut self.reported) {
            Ok(moved) => {
                self.failures = 0;
                let (events, errors) = match moved {
                    Moved::All(tips) => self.follower.update(store, &tips),
                    Moved::Some(moved) => self.follower.update_moved(store, &moved),
                };
                self.report.events(&events, out)?;
                for e in errors {
                    diagnostics::line("error", &e.to_string());
                }
            }
            Err(_) if git_lease::git::stopping() => return Ok(true),
            Err(e) => {
                self.failures = self.failures.saturating_add(1);
                diagnostics::line("error", &e.to_string());
            }
        }
        self.next_read = Instant::now() + backoff(self.interval, self.failures);
        Ok(false)
    }
}

/// Waits at most `wait` for a wake; returns true for [`Wake::Stop`].
fn stop_after_waiting(woken: &mpsc::Receiver<Wake>, wait: Duration) -> bool {
    match woken.recv_timeout(wait) {
        Ok(Wake::Stop) => true,
        // One read answers every notification queued so far.
        Ok(Wake::Changed) => woken.try_iter().any(|w| matches!(w, Wake::Stop)),
        Err(mpsc::RecvTimeoutError::Timeout) => false,
        // Nothing can wake it any more (no watcher, no signal thread): poll.
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::thread::sleep(wait);
            false
        }
    }
}

/// Returns `interval`, doubled for each failure in a row, at most [`MAX_BACKOFF`] (or
/// `interval` if that is longer).
fn backoff(interval: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.min(6);
    interval
        .saturating_mul(factor)
        .min(MAX_BACKOFF.max(interval))
}

/// Parses `--since`: an instant (unix seconds or RFC 3339), or a duration before now
/// (`10m`, `2h`).
fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
    if let Ok(at) = git_lease::time::parse_instant(text) {
        return Ok(at);
    }
    let ago = humantime::parse_duration(text.trim()).map_err(|_| {
        Error::InvalidInput(format!(
            "invalid --since {text:?}: give an instant (unix seconds or RFC 3339) or a duration before now (10m, 2h)"
        ))
    })?;
    chrono::Duration::from_std(ago)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .ok_or_else(|| Error::InvalidInput(format!("invalid --since {text:?}: too long ago")))
}

/// What was already said on stderr about remote ledgers refused as diverged, or local ones
/// refused under `lease.requireSignatures`; and the local tips verified so far.
#[derive(Default)]
struct Reported {
    diverged: HashSet<(String, Option<String>)>,
    verified: HashSet<(String, ObjectId)>,
}

/// Reads the ledger tips: the local lease refs that moved since the last read (every one the
/// first time, or when the scan cannot tell), or the remote's after one fetch (every verified
/// one; a refused ledger is said once on stderr).
fn read_tips(source: &mut Source<'_>, reported: &mut Reported) -> Result<Moved, Error> {
    match source {
        Source::Local(ledger, scan) => {
            // Only the verified tips are followed (all of them without
            // lease.requireSignatures); a refused one is said once.
            let mut keep = |refs: Vec<(String, ObjectId)>| {
                let (kept, refused) = ledger.verified_refs(refs, &mut reported.verified);
                for (issue, tip, e) in refused {
                    if reported.diverged.insert((issue, Some(tip.to_string()))) {
                        diagnostics::line("error", &e.to_string());
                    }
                }
                kept
            };
            Ok(match ledger.store().scan(scan)? {
                Moved::All(refs) => Moved::All(keep(refs)),
                Moved::Some(refs) => Moved::Some(keep(refs)),
            })
        }
        Source::Remote(remote) => {
            let fetched = remote.fetch_all()?;
            for d in fetched.diverged {
                if reported
                    .diverged
                    .insert((d.issue.clone(), d.remote.clone()))
                {
                    diagnostics::line("error", &d.into_error(remote.name()).to_string());
                }
            }
            Ok(Moved::All(fetched.verified))
        }
    }
}

impl Report {
    /// Prints `events` (those that matter to the holder followed), running the command of
    /// `--exec` after each line; nothing more once a stop signal came.
    fn events(&self, events: &[WatchEvent], out: &mut dyn Write) -> Result<(), Failure> {
        for e in events
            .iter()
            .filter(|e| self.holder.as_deref().is_none_or(|h| e.concerns(h)))
        {
            if self.stopping.stopped() {
                return Ok(());
            }
            if self.json {
                json_line(out, &WatchView::from(e))?;
            } else {
                writeln!(out, "{}", line(e))?;
            }
            if let Some(on_event) = &self.on_event {
                out.flush()?;
                on_event.run(e);
            }
        }
        Ok(())
    }
}

/// One event in one line: when, the issue, what, the token, who. What the ledger's writers
/// chose (the issue, and the [`output::Parties`]) is shown escaped.
fn line(e: &WatchEvent) -> String {
    let l = &e.entry.lease;
    let parties = output::Parties::of(l);
    let mut text = format!(
        "{}  {}  {:<9}  token {}",
        git_lease::time::format_instant(e.at),
        output::printable(&l.issue),
        e.kind.as_str(),
        l.token
    );
    match (e.kind, parties.holder, parties.previous) {
        (Kind::Expired, Some(h), _) => text += &format!("  {h}"),
        (_, Some(h), Some(p)) => text += &format!("  {h} (took over from {p})"),
        (_, Some(h), None) => text += &format!("  {h}"),
        (_, None, Some(p)) => text += &format!("  was {p}"),
        (_, None, None) => {}
    }
    if let Some(by) = parties.by {
        text += &format!(" by {by}");
    }
    if e.kind != Kind::Expired && l.holder.is_some() {
        match l.expires_at {
            Some(t) => text += &format!("  until {}", git_lease::time::format_instant(t)),
            None => text += "  no expiry",
        }
    }
    if let Some(r) = parties.reason {
        text += &format!("  reason: {r}");
    }
    text
}

/// Sends [`Wake::Stop`] on SIGINT, SIGTERM or SIGHUP, and ends the git command a remote's
/// fetch may be waiting on (the loop then finds it failed, and ends). Each signal is passed
/// on to the command of `--exec` running, if one is ([`Stopping::signal`]).
fn stop_on_signals(wake: mpsc::Sender<Wake>, stopping: Arc<Stopping>) -> Result<(), Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM]).map_err(|e| Error::Io {
            context: "cannot install signal handlers".into(),
            source: e,
        })?;
    std::thread::spawn(move || {
        for (nth, sig) in signals.forever().enumerate() {
            stopping.signal(sig, nth);
            if nth == 0 {
                let _ = wake.send(Wake::Stop);
                git_lease::git::stop_commands(FETCH_GRACE);
            }
        }
    });
    Ok(())
}

/// Calls `stop` on a thread of its own at the first SIGINT, SIGTERM or SIGHUP: the end of a
/// command that runs until it is told to stop (`watch`, `mcp`).
pub(super) fn on_stop_signal(stop: impl FnOnce() + Send + 'static) -> Result<(), Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM]).map_err(|e| Error::Io {
            context: "cannot install signal handlers".into(),
            source: e,
        })?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop();
        }
    });
    Ok(())
}

/// Sends [`Wake::Stop`] once standard output is closed: a pipe whose reader is gone reports
/// an error to poll(2), a terminal a hang-up. Files and `/dev/null` never do.
fn stop_on_closed_stdout(wake: mpsc::Sender<Wake>) {
    use rustix::event::{poll, PollFd, PollFlags};
    std::thread::spawn(move || {
        let stdout = std::io::stdout();
        loop {
            let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
            match poll(&mut fds, None) {
                Ok(_) => {
                    let got = fds[0].revents();
                    if got.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
                        let _ = wake.send(Wake::Stop);
                        return;
                    }
                    // Nothing to wait for on this kind of output; never spin.
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
    });
}

/// Watches the refs directory (recursively), the git directory itself (for `packed-refs`)
/// and, in a reftable repository, `reftable/`, sending [`Wake::Changed`] for every change to
/// a ref. Returns `None`, after saying so, if notifications are unavailable: the loop then
/// polls.
fn watch_refs(
    common_dir: &Path,
    wake: mpsc::Sender<Wake>,
    interval: Duration,
) -> Option<notify::RecommendedWatcher> {
    let started = notify_ref_changes(common_dir, move || {
        let _ = wake.send(Wake::Changed);
    });
    match started {
        Ok(w) => Some(w),
        Err(e) => {
            diagnostics::line(
                "warning",
                &format!(
                    "no file-system notifications ({e}); reading the refs every {}",
                    humantime::format_duration(interval)
                ),
            );
            None
        }
    }
}

/// Calls `on_change` for every change to a ref of the repository whose common directory is
/// `common_dir` (or a notification error): the refs directory (recursively), the directory
/// itself (for `packed-refs`) and, in a reftable repository, `reftable/`, watched for as long
/// as the returned watcher lives.
pub(super) fn notify_ref_changes(
    common_dir: &Path,
    on_change: impl Fn() + Send + 'static,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher};
    let refs = common_dir.join("refs");
    let refs_for_filter = refs.clone();
    // A reftable repository keeps its refs in `reftable/` (tables.list renamed into place).
    let tables = common_dir.join("reftable");
    let tables_for_filter = tables.clone();
    let handler = move |event: notify::Result<notify::Event>| {
        let relevant = match &event {
            Ok(e) => e.paths.iter().any(|p| {
                p.starts_with(&refs_for_filter)
                    || p.starts_with(&tables_for_filter)
                    || p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("packed-refs"))
            }),
            Err(_) => true,
        };
        if relevant {
            on_change();
        }
    };
    let mut watcher = notify::recommended_watcher(handler)?;
    watcher.watch(&refs, RecursiveMode::Recursive)?;
    watcher.watch(common_dir, RecursiveMode::NonRecursive)?;
    if tables.is_dir() {
        watcher.watch(&tables, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}
