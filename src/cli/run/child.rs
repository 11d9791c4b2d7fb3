//! The child of `git lease run`: a process group of its own (and, where one can be made, a
//! cgroup: see [`super::tree`]), every signal `run` catches forwarded to it, stopped with its
//! whole tree with SIGTERM, then SIGKILL; on Linux the kernel kills the child itself if `run`
//! dies.

use std::process::{Command as Process, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use git_lease::Error;

use super::tree::Tree;
use super::Event;

/// Makes the child a process group of its own and, on Linux, has the kernel kill it
/// (SIGKILL) if `run` dies first, and has it join its cgroup by writing `0` to the
/// `cgroup.procs` open at `join` before it execs (a join refused leaves it outside, where
/// the process group and the walk of [`super::tree`] still find its tree).
pub(super) fn supervise(command: &mut Process, join: Option<std::os::fd::RawFd>) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: between fork and exec the closure calls only prctl(2), write(2) and
        // getppid(2), which are async-signal-safe, and allocates nothing. The death signal is
        // tied to the thread that forks, which is `run`'s main thread: it lives as long as
        // `run` does. `join` stays open in `run` until the child has started.
        unsafe {
            command.pre_exec(move || {
                let sigkill = libc::SIGKILL as libc::c_ulong;
                if libc::prctl(libc::PR_SET_PDEATHSIG, sigkill, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = join {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                }
                // `run` died before the line above: no signal will come, so do not start.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = join;
}

/// Sends SIGTERM to the child's whole tree, waits until `kill_at` for the child to exit,
/// then SIGKILL; whatever is left of the tree is killed in any case.
pub(super) fn stop_child(tree: &mut Tree, kill_at: Instant, inbox: &mpsc::Receiver<Event>) {
    tree.signal(libc::SIGTERM);
    let exited = loop {
        let left = kill_at.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(left) {
            Ok(Event::ChildExited(_)) => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    tree.kill();
    if exited {
        return;
    }
    while let Ok(event) = inbox.recv_timeout(Duration::from_secs(5)) {
        if matches!(event, Event::ChildExited(_)) {
            return;
        }
    }
}

/// Sends `sig` to the process group `group`.
pub(super) fn signal_group(group: u32, sig: i32) {
    if let Ok(group) = i32::try_from(group) {
        // SAFETY: killpg(2) has no memory effects; a group that is gone at worst gets ESRCH.
        // The group's id cannot be reused while any process of the group is left.
        unsafe {
            libc::killpg(group, sig);
        }
    }
}

/// Starts catching the signals a supervisor sends to `git lease run`.
pub(super) fn catch_signals() -> Result<signal_hook::iterator::Signals, Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
    signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2])
        .map_err(|e| Error::Io {
            context: "cannot install signal handlers".into(),
            source: e,
        })
}

/// Forwards every caught signal (including those caught before the child started) to the
/// child's process group.
pub(super) fn forward_signals(mut signals: signal_hook::iterator::Signals, group: u32) {
    std::thread::spawn(move || {
        for sig in signals.forever() {
            signal_group(group, sig);
        }
    });
}

/// Returns the child's exit code to pass through: its code, or 128 + the signal that ended it.
pub(super) fn child_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
        _ => 1,
    }
}
