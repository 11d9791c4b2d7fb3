//! Running the git command line, for what gix cannot do here: push, fetch, pack and gc, and
//! reading settings as git reads them. Every such command is built by [`command`], so each
//! runs on the repository it is meant for whatever the caller's environment says; the one
//! exception, reftable's ref reads and writes, builds its own in `store::refdb` (which also
//! drops `GIT_NAMESPACE` and reads git in the C locale).
//!
//! The commands a remote runs (fetch, push) run through [`output_within`], with
//! `lease.networkTimeout` as their limit, so that a command that must end at once (`watch` on
//! SIGTERM, however long a silent remote keeps git waiting) can end them: [`stop_commands`].
//!
//! [`version`] holds what each use of git needs of its version, checked before the first
//! command of a process that needs it runs.

pub mod version;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::Error;

/// The variable in the environment of every git command git-lease starts: the id of the
/// git-lease process that started it. `run` tells its own commands, and what they leave
/// behind (a detached `git gc --auto`), from the processes of the command it runs.
pub const STARTED_BY: &str = "GIT_LEASE_STARTED_BY";

/// Returns `git --git-dir <git_dir>`, with `GIT_DIR` removed from its environment, [`STARTED_BY`]
/// set, no standard input, and objects seen as they are: replacement refs (`refs/replace/*`)
/// change nothing a ledger means ([`no_replacements`]).
pub fn command(git_dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(git_dir);
    cmd.env_remove("GIT_DIR")
        .env(STARTED_BY, std::process::id().to_string())
        .stdin(Stdio::null());
    no_replacements(&mut cmd);
    cmd
}

/// Makes `cmd`, a git command, see every object as it is: `GIT_NO_REPLACE_OBJECTS` turns
/// `refs/replace/*` off. Anyone who can push a ref could otherwise change what a ledger commit
/// says to every reader (docs/SECURITY.md).
pub fn no_replacements(cmd: &mut Command) {
    cmd.env("GIT_NO_REPLACE_OBJECTS", "1")
        .env_remove("GIT_REPLACE_REF_BASE");
}

/// Returns the error of a git command that could not be started (or waited for).
pub fn spawn_error(shown: &str, e: std::io::Error) -> Error {
    Error::Io {
        context: format!("cannot run {shown}"),
        source: e,
    }
}

/// The commands [`output`] runs now, and whether [`stop_commands`] was called.
struct Running {
    stopping: bool,
    pids: Vec<u32>,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    stopping: false,
    pids: Vec::new(),
});
/// Notified whenever a command leaves [`RUNNING`].
static ENDED: Condvar = Condvar::new();

fn running() -> MutexGuard<'static, Running> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `cmd` to its end with its standard output and error captured, as
/// [`Command::output`] does, unless [`stop_commands`] ends it first (its status then says
/// it was killed by a signal).
pub fn output(cmd: &mut Command) -> std::io::Result<Output> {
    output_within(cmd, None).map(|(out, _)| out)
}

/// How long a command stopped for its time limit has to end after SIGTERM, before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(1);

/// Runs `cmd` as [`output`] does, for at most `limit` (`None`: as long as it takes): a
/// command still running then is stopped with what it started (SIGTERM, then SIGKILL after a
/// second). Returns its output, and true if it was stopped for the limit.
pub fn output_within(
    cmd: &mut Command,
    limit: Option<Duration>,
) -> std::io::Result<(Output, bool)> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let pid = child.id();
    {
        let mut running = running();
        if running.stopping {
            signal_tree(pid, libc::SIGTERM);
        }
        running.pids.push(pid);
    }
    // Each pipe is read to its end on a thread of its own; both ends reached means the
    // command is done (or dying).
    let (closed, pipes_closed) = std::sync::mpsc::channel();
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        let closed = closed.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            let _ = closed.send(());
            buf
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    drop(closed);
    let timed_out = !pipes_close_within(&pipes_closed, pid, limit);
    // Its id leaves the list before it is reaped, so no signal ever reaches a process that
    // took the id over.
    wait_exited(pid);
    running().pids.retain(|p| *p != pid);
    ENDED.notify_all();
    let status = child.wait()?;
    // After a kill, a descendant may still hold a pipe open: what was read so far is enough.
    let take = |reader: std::thread::JoinHandle<Vec<u8>>| {
        if timed_out && !reader.is_finished() {
            Vec::new()
        } else {
            reader.join().unwrap_or_default()
        }
    };
    Ok((
        Output {
            status,
            stdout: take(stdout),
            stderr: take(stderr),
        },
        timed_out,
    ))
}

/// Waits until both pipes of the command `pid` are closed (each says so on `pipes_closed`),
/// for at most `limit` (`None`: as long as it takes). Returns false when the limit passed
/// first, having stopped the command with what it started.
fn pipes_close_within(
    pipes_closed: &std::sync::mpsc::Receiver<()>,
    pid: u32,
    limit: Option<Duration>,
) -> bool {
    let deadline = limit.map(|l| Instant::now() + l);
    for _ in 0..2 {
        let in_time = match deadline {
            None => pipes_closed.recv().is_ok(),
            Some(at) => pipes_closed
                .recv_timeout(at.saturating_duration_since(Instant::now()))
                .is_ok(),
        };
        if !in_time {
            // SIGTERM first: git removes its lock files on the way out; SIGKILL for what is
            // still there a moment later.
            signal_tree(pid, libc::SIGTERM);
            if pipes_closed.recv_timeout(KILL_GRACE).is_err() {
                signal_tree(pid, libc::SIGKILL);
            }
            return false;
        }
    }
    true
}

/// Waits until the child `pid` has exited, without reaping it.
fn wait_exited(pid: u32) {
    let id: libc::id_t = pid;
    loop {
        // SAFETY: waitid(2) writes only into `info`, which lives on this stack frame; with
        // WNOWAIT the child stays waitable for `Child::wait`.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Ends every command [`output`] runs, now and from now on, with what it started: SIGTERM
/// (git removes its lock files and exits), and SIGKILL for what is still there after
/// `grace`. Returns once they have all ended, or after the SIGKILL.
pub fn stop_commands(grace: Duration) {
    let mut running = running();
    running.stopping = true;
    for pid in &running.pids {
        signal_tree(*pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while !running.pids.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            for pid in &running.pids {
                signal_tree(*pid, libc::SIGKILL);
            }
            return;
        }
        running = ENDED
            .wait_timeout(running, left)
            .map_or_else(|e| e.into_inner().0, |(r, _)| r);
    }
}

/// Returns true once [`stop_commands`] was called: a command that failed then was stopped.
pub fn stopping() -> bool {
    running().stopping
}

/// Sends `sig` to the process `pid` (a child of this one, not reaped yet) and then to its
/// descendants (on Linux, where `/proc` names them; a transport helper git started, say).
fn signal_tree(pid: u32, sig: i32) {
    let Ok(id) = i32::try_from(pid) else {
        return;
    };
    // Read before the signal: once `pid` ends, its children belong to another parent.
    let descendants = children(pid);
    // SAFETY: kill(2) has no memory effects. `pid` is an unreaped child of this process, so
    // never another's id; a descendant read above may have ended since, a small race taken
    // only on the way out.
    unsafe {
        libc::kill(id, sig);
    }
    for child in descendants {
        signal_tree(child, sig);
    }
}

/// The children of `pid`, from `/proc/<pid>/task/*/children` (none where it cannot be read).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}
