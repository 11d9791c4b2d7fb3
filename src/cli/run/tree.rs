//! The whole tree of `run`'s command: every process it starts, wherever it goes, is stopped
//! with it.
//!
//! The child leads a process group of its own, but what it starts may leave that group
//! (`setsid`, GNU `timeout`, a daemon). So `run` follows the tree, three ways:
//!
//! - `run` is a child subreaper (`PR_SET_CHILD_SUBREAPER`): a descendant whose parent ends is
//!   reparented to `run`, not to init, so that while `run` lives every descendant's parent
//!   chain leads to it. A stop reads `/proc` and signals every process whose chain leads to the
//!   child, or to `run` through a process `run` did not start itself: `run`'s own git
//!   commands carry [`git_lease::git::STARTED_BY`] with its process id, and so does what they
//!   leave behind (a detached `git gc --auto`), which is not the command's.
//! - Where a cgroup can be made (cgroup v2 mounted, and `run`'s own cgroup writable), the child
//!   joins a fresh one, `git-lease-run-<pid>` below `run`'s own, before it execs: everything it
//!   starts is in it, whatever it does with process groups and sessions, and a stop kills the
//!   cgroup (`cgroup.kill`, or each member where the kernel has no `cgroup.kill`).
//!   `GIT_LEASE_RUN_CGROUP=0` turns this off.
//! - A guard, a process forked before the child (it only makes system calls: no allocation,
//!   no exec), outlives a `run` killed by SIGKILL: it reads a pipe that only `run` holds
//!   open, and when that closes without `run` having said the tree is stopped, it kills the
//!   child's process group and the cgroup. It ignores the signals a terminal or a supervisor
//!   sends and leads a session of its own, so only a signal sent to it by its id ends it.
//!
//! What holds after `kill -9` of `run`, then: with the cgroup, no process of the command's
//! tree is left (the kernel kills the child at once, `PR_SET_PDEATHSIG`, and the guard the
//! cgroup); without it, the child and its process group are killed, and a descendant that
//! left the group (`setsid`) runs on, reparented to init, since only `run` could find it.
//! A process of the tree that moves itself out of the cgroup (which takes the write access to
//! `cgroup.procs` files that `run` has) is found by the walk while `run` lives, not by the
//! guard.
//!
//! A guard that is itself killed by its id (SIGKILL) acts no more, which leaves the case
//! without a cgroup.
//!
//! Processes are signalled by identity: a process descriptor (`pidfd_open`) is taken and the
//! start time checked, so a process id reused meanwhile is never signalled (before Linux 5.3,
//! without process descriptors, the start time is checked just before a plain kill). Without
//! a cgroup, a process reparented to `run` that carries `run`'s own [`git_lease::git::STARTED_BY`]
//! mark is taken for `run`'s; only a process that sets it deliberately does. Processes of the
//! tree that end on their own after they were reparented to `run` stay zombies until a stop,
//! or `run`'s end, reaps them (or until init does).

mod cgroup;
mod kill_guard;

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::child::signal_group;
use cgroup::Cgroup;
use kill_guard::Guard;

/// The environment variable that turns the cgroup off when it is `0`.
pub(super) const CGROUP_ENV: &str = "GIT_LEASE_RUN_CGROUP";

/// The byte `run` writes to the guard once it has stopped the tree itself.
const DISARM: u8 = b'd';

/// How many rounds a kill makes at most, each a read of `/proc` and a SIGKILL of what is left.
const KILL_ROUNDS: usize = 100;

/// How long a kill goes on at most: a process that cannot be signalled (another user's, or
/// one stuck in the kernel) must not hold up the release of the lease past its expiry.
const KILL_BOUND: Duration = Duration::from_secs(5);

/// A process as `/proc/<pid>/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Proc {
    pid: u32,
    ppid: u32,
    pgid: u32,
    /// The start time, in clock ticks since boot: with the id, the process's identity.
    start: u64,
    zombie: bool,
}

/// Reads `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: split after it.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Proc {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        // Field 22; `fields` starts at field 3.
        start: fields.get(19)?.parse().ok()?,
        zombie: matches!(fields.first(), Some(&"Z" | &"X")),
    })
}

/// Every process of `/proc`.
fn scan() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// True if the process `pid` was started by git-lease's process `me` for itself (its
/// environment has [`git_lease::git::STARTED_BY`] = `me`). A process whose environment cannot
/// be read counts as the command's.
fn started_by(pid: u32, me: u32) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mark = format!("{}={me}", git_lease::git::STARTED_BY);
    env.split(|b| *b == 0).any(|v| v == mark.as_bytes())
}

/// Returns the last OS error number.
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Sends `sig` to `p` if it is still that process; returns its process descriptor, readable
/// once it has ended, where the kernel has them.
fn send(p: &Proc, sig: i32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(p.pid).ok()?;
    // SAFETY: pidfd_open(2) takes an id and flags, and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let same = || stat(p.pid).is_some_and(|now| now.start == p.start);
    if fd < 0 {
        // No process descriptors (Linux before 5.3): the start time is checked just before.
        if errno() == libc::ENOSYS && same() {
            // SAFETY: kill(2) has no memory effects.
            unsafe {
                libc::kill(pid, sig);
            }
        }
        return None;
    }
    // SAFETY: `fd` was just returned by pidfd_open and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(RawFd::try_from(fd).ok()?) };
    // The descriptor names one process: the one the id had when it was opened. If that one
    // has the start time seen, it is `p`.
    if !same() {
        return None;
    }
    // SAFETY: pidfd_send_signal(2) on a descriptor this function owns, with no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
    Some(fd)
}

/// Waits until every process of `fds` has ended, at most `bound`.
fn wait_ended(fds: &[OwnedFd], bound: Duration) {
    let deadline = Instant::now() + bound;
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while !polled.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        let Ok(n) = libc::nfds_t::try_from(polled.len()) else {
            return;
        };
        // SAFETY: poll(2) on `polled`, which it reads and writes within its length.
        let rc = unsafe { libc::poll(polled.as_mut_ptr(), n, ms) };
        if rc < 0 && errno() != libc::EINTR {
            return;
        }
        polled.retain(|p| p.revents == 0);
        for p in &mut polled {
            p.revents = 0;
        }
    }
}

/// The command's tree: its child, its cgroup, its guard.
pub(super) struct Tree {
    /// This process.
    me: u32,
    /// The child once started, with its start time.
    child: Option<(u32, u64)>,
    cgroup: Option<Cgroup>,
    guard: Option<Guard>,
    /// Every process of the tree a stop signalled, to reap those reparented to `run`.
    signalled: HashSet<(u32, u64)>,
}

impl Tree {
    /// Prepares `run` for its child: a subreaper, a cgroup where one can be made, and the
    /// guard. Call before the child starts, and before signals are caught (the guard starts
    /// with the dispositions `run` had).
    pub(super) fn prepare() -> Tree {
        // SAFETY: prctl(2) with an integer argument; it only sets this process's attribute.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        let me = std::process::id();
        let cgroup = match std::env::var_os(CGROUP_ENV) {
            Some(v) if v == "0" => None,
            _ => Cgroup::make(me),
        };
        let guard = Guard::start(cgroup.as_ref());
        Tree {
            me,
            child: None,
            cgroup,
            guard,
            signalled: HashSet::new(),
        }
    }

    /// The descriptor the child writes `0` to before it execs, to join the cgroup.
    pub(super) fn join_fd(&self) -> Option<RawFd> {
        self.cgroup.as_ref().map(|c| c.procs.as_raw_fd())
    }

    /// Records the child (the leader of its process group), and tells the guard.
    pub(super) fn started(&mut self, child: u32) {
        // Not reaped yet: nothing waits for it before this returns.
        self.child = stat(child).map(|p| (child, p.start));
        if let Some(guard) = &mut self.guard {
            guard.tell(&child.to_ne_bytes());
        }
    }

    /// The processes of the tree among `procs`, the child's group included: the descendants
    /// of the child, of what was reparented to `run` from the tree, and the cgroup's members.
    fn members(&self, procs: &[Proc]) -> Vec<Proc> {
        let by_pid: HashMap<u32, &Proc> = procs.iter().map(|p| (p.pid, p)).collect();
        let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
        for p in procs {
            children.entry(p.ppid).or_default().push(p);
        }
        let guard = self.guard.as_ref().and_then(|g| u32::try_from(g.pid).ok());
        let child = self.child.map(|(pid, _)| pid);
        let mut roots: Vec<&Proc> = Vec::new();
        if let Some((pid, start)) = self.child {
            roots.extend(by_pid.get(&pid).filter(|p| p.start == start));
        }
        for p in children.get(&self.me).into_iter().flatten() {
            let own = Some(p.pid) == child || Some(p.pid) == guard;
            if !own && !p.zombie && !started_by(p.pid, self.me) {
                roots.push(p);
            }
        }
        if let Some(cgroup) = &self.cgroup {
            roots.extend(cgroup.pids().iter().filter_map(|pid| by_pid.get(pid)));
        }
        let mut found: Vec<Proc> = Vec::new();
        let mut seen: HashSet<u32> = HashSet::new();
        while let Some(p) = roots.pop() {
            if p.pid == self.me || !seen.insert(p.pid) {
                continue;
            }
            found.push(*p);
            roots.extend(children.get(&p.pid).into_iter().flatten());
        }
        found
    }

    /// Sends `sig` to the child's process group and to every other live process of the tree.
    pub(super) fn signal(&mut self, sig: i32) {
        let group = self.child.map(|(pid, _)| pid);
        if let Some(group) = group {
            signal_group(group, sig);
        }
        for p in self.members(&scan()) {
            self.signalled.insert((p.pid, p.start));
            if !p.zombie && Some(p.pgid) != group {
                send(&p, sig);
            }
        }
    }

    /// Kills (SIGKILL) the whole tree: the cgroup, the child's group and every process found,
    /// again until none is left; then reaps what was reparented to `run` (the child itself is
    /// its waiter's to reap).
    pub(super) fn kill(&mut self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
        if let Some((group, _)) = self.child {
            signal_group(group, libc::SIGKILL);
        }
        let deadline = std::time::Instant::now() + KILL_BOUND;
        for _ in 0..KILL_ROUNDS {
            if std::time::Instant::now() >= deadline {
                break;
            }
            let live: Vec<Proc> = self
                .members(&scan())
                .into_iter()
                .filter(|p| !p.zombie)
                .collect();
            if live.is_empty() {
                break;
            }
            let ending: Vec<OwnedFd> = live
                .iter()
                .filter_map(|p| {
                    self.signalled.insert((p.pid, p.start));
                    send(p, libc::SIGKILL)
                })
                .collect();
            wait_ended(&ending, Duration::from_millis(500));
        }
        self.reap();
    }

    /// Reaps the zombies reparented to `run` from the tree: those a stop found, and those of
    /// the child's process group (never one of `run`'s own commands, which their callers
    /// reap, nor the child, its waiter's).
    fn reap(&mut self) {
        let child = self.child.map(|(pid, _)| pid);
        for p in scan() {
            let of_tree = self.signalled.contains(&(p.pid, p.start)) || Some(p.pgid) == child;
            if p.ppid == self.me && p.zombie && Some(p.pid) != child && of_tree {
                if let Ok(pid) = libc::pid_t::try_from(p.pid) {
                    // SAFETY: waitpid(2) of this process's own child; the status is not kept.
                    unsafe {
                        libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
                    }
                }
            }
        }
    }
}

impl Drop for Tree {
    /// Whatever ends `run`, nothing of the tree is left: it is killed (again), the cgroup
    /// removed, and the guard told and reaped.
    fn drop(&mut self) {
        self.kill();
        if let Some(cgroup) = &self.cgroup {
            cgroup.remove();
        }
        if let Some(guard) = self.guard.take() {
            guard.disarm();
        }
    }
}
