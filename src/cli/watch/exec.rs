//! `watch --exec CMD` and `lease.onEvent`: a command run for each event the watch reports.
//!
//! The command runs through `sh -c`, as git runs its hooks and aliases, once per event, one
//! at a time and in the order of the events: the event's JSON object (the line `watch --json`
//! prints) on its standard input, and `LEASE_ISSUE`, `LEASE_EVENT`, `LEASE_HOLDER` and
//! `LEASE_TOKEN` in its environment (empty when absent). Its standard output goes to the
//! watch's standard error, as git does with a hook's, so that the watch's own output stays
//! its events. A command that fails (an exit code other than 0, a signal, or no start at
//! all) is said on stderr with the event and why; the watch goes on, its exit code unchanged.
//!
//! The command runs in a process group of its own. SIGINT (Ctrl-C), SIGTERM or SIGHUP while
//! it runs is passed on to that group; the watch waits for the command to end, runs no
//! command for any later event, and ends with exit 0. A second signal kills the group
//! (SIGKILL) at once.

use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use git_lease::watch::{WatchEvent, WatchView};

use crate::cli::output::diagnostics;
use crate::cli::output::json::json_text;

/// The configuration key read when `--exec` is not given.
pub(crate) const CONFIG_KEY: &str = "lease.onEvent";

/// What the signal thread and the command runner share.
#[derive(Default)]
pub(super) struct Stopping {
    /// A stop signal came: no later command starts.
    stopped: AtomicBool,
    /// The process group of the command running, if one is.
    running: Mutex<Option<i32>>,
}

impl Stopping {
    /// Records a stop signal `sig`, the `nth` one (0 for the first), and passes it on to the
    /// command running: the first as it is, any later one as SIGKILL.
    pub(super) fn signal(&self, sig: i32, nth: usize) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(group) = *self.running() {
            let sig = if nth == 0 { sig } else { libc::SIGKILL };
            // SAFETY: killpg(2) has no memory effects. The group cannot be gone and its id
            // reused meanwhile: its leader is reaped only after `running` is cleared.
            unsafe {
                libc::killpg(group, sig);
            }
        }
    }

    /// The process group of the command running, locked.
    fn running(&self) -> std::sync::MutexGuard<'_, Option<i32>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a stop signal came.
    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

/// Runs the command of `watch --exec` or `lease.onEvent` for each event.
pub(super) struct OnEvent {
    command: String,
    stopping: Arc<Stopping>,
}

impl OnEvent {
    /// The runner of `command` (never empty), stopped through `stopping`.
    pub(super) fn new(command: String, stopping: Arc<Stopping>) -> OnEvent {
        OnEvent { command, stopping }
    }

    /// Runs the command for `event` and waits for it; says on stderr why it failed, if it
    /// did. Runs nothing once a stop signal came.
    pub(super) fn run(&self, event: &WatchEvent) {
        let view = WatchView::from(event);
        let failure = match self.spawn_and_wait(&view) {
            Ok(None) => return,
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => describe(status),
            Err(e) => format!("could not start: {e}"),
        };
        diagnostics::line(
            "error",
            &format!(
                "the on-event command for the {} of {} (token {}) {failure}; the watch goes on",
                view.event, view.issue, view.token
            ),
        );
    }

    /// Starts `sh -c CMD` for `view`, writes the event to its standard input and waits for
    /// it to end. Starts nothing, and returns `None`, once a stop signal came.
    fn spawn_and_wait(&self, view: &WatchView) -> std::io::Result<Option<ExitStatus>> {
        let input = json_text(view).map_err(std::io::Error::other)? + "\n";
        let to_stderr = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned()?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .env("LEASE_ISSUE", &view.issue)
            .env("LEASE_EVENT", view.event)
            .env("LEASE_HOLDER", view.holder.as_deref().unwrap_or_default())
            .env("LEASE_TOKEN", view.token.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::from(to_stderr))
            .process_group(0);
        // Hold the lock over the start, so that a signal finds either no command or its
        // group; one that came before the lock was taken is seen here.
        let mut running = self.stopping.running();
        if self.stopping.stopped() {
            return Ok(None);
        }
        let mut child = command.spawn()?;
        *running = i32::try_from(child.id()).ok();
        drop(running);
        if let Some(mut stdin) = child.stdin.take() {
            // The event fits a pipe's buffer; a command that does not read it is no error.
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        wait_without_reaping(child.id());
        // Cleared before the leader is reaped: until then its group id cannot be reused.
        *self.stopping.running() = None;
        child.wait().map(Some)
    }
}

/// Waits until the process `pid` has ended, leaving it to be reaped.
fn wait_without_reaping(pid: u32) {
    loop {
        // SAFETY: `info` is a plain struct waitid(2) fills in; nothing else is touched.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let done =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if done == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Says how a command that did not succeed ended.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("failed with exit code {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => format!("failed ({status})"),
    }
}

/// The command to run for each event: `--exec`'s, else `lease.onEvent`'s; none when either
/// is empty or `--no-exec` is given.
pub(crate) fn chosen(
    exec: Option<String>,
    no_exec: bool,
    configured: Option<String>,
) -> Option<String> {
    if no_exec {
        return None;
    }
    exec.or(configured).filter(|c| !c.trim().is_empty())
}
