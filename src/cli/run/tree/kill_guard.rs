//! The guard: a process forked before the child, which outlives a `run` killed by SIGKILL and
//! kills the child's process group and its cgroup.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use super::cgroup::Cgroup;
use super::DISARM;

/// The guard: a process that outlives a `run` killed without warning and kills its tree.
pub(super) struct Guard {
    pub(super) pid: libc::pid_t,
    /// The pipe's writing end: the guard acts when it closes.
    pipe: File,
}

impl Guard {
    /// Forks the guard of a child (to be started) and `cgroup`. Everything it needs is made
    /// before the fork; after it, the guard only makes system calls.
    pub(super) fn start(cgroup: Option<&Cgroup>) -> Option<Guard> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2(2) writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: both were just returned by pipe2 and are owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let open = |name: &str, write: bool| {
            let c = cgroup?;
            OpenOptions::new()
                .read(!write)
                .write(write)
                .open(c.dir.join(name))
                .ok()
        };
        let kill = open("cgroup.kill", true);
        let procs = open("cgroup.procs", false);
        let dir = cgroup.and_then(|c| CString::new(c.dir.as_os_str().as_bytes()).ok());
        let raw = |f: &Option<File>| f.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let ends = GuardEnds {
            read: read.as_raw_fd(),
            write: write.as_raw_fd(),
            kill: raw(&kill),
            procs: raw(&procs),
            dir: dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()),
        };
        // SAFETY: fork(2). The child runs `guard`, which makes only async-signal-safe system
        // calls on what was made above, and never returns.
        match unsafe { libc::fork() } {
            -1 => None,
            0 => unsafe { guard(&ends) },
            pid => Some(Guard {
                pid,
                pipe: File::from(write),
            }),
        }
    }

    /// Writes `bytes` to the guard (a guard that is gone is no one to tell).
    pub(super) fn tell(&mut self, bytes: &[u8]) {
        let _ = self.pipe.write_all(bytes);
    }

    /// Tells the guard the tree is stopped, and reaps it.
    pub(super) fn disarm(mut self) {
        self.tell(&[DISARM]);
        drop(self.pipe);
        // SAFETY: waitpid(2) of this process's own child; the status is not kept. The guard
        // ends at once: it removes an empty cgroup, for a second at most.
        unsafe {
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// What the guard holds, as raw descriptors (`-1`: none) and a path (null: none).
struct GuardEnds {
    read: RawFd,
    write: RawFd,
    kill: RawFd,
    procs: RawFd,
    dir: *const libc::c_char,
}

/// The guard's whole life, in the child of a fork: only system calls, no allocation.
///
/// # Safety
///
/// Call only in the child of `fork`, with descriptors and a path that were valid in the
/// parent when it forked.
unsafe fn guard(ends: &GuardEnds) -> ! {
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGPIPE,
    ] {
        libc::signal(sig, libc::SIG_IGN);
    }
    libc::setsid();
    // Only `run` holds the pipe's writing end; the guard holds none of `run`'s output.
    libc::close(ends.write);
    for fd in 0..3 {
        libc::close(fd);
    }
    let mut child = [0u8; 4];
    let mut got = 0usize;
    let mut disarmed = false;
    loop {
        let mut buf = [0u8; 16];
        let n = libc::read(ends.read, buf.as_mut_ptr().cast(), buf.len());
        if n == 0 {
            break;
        }
        if n < 0 {
            if *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break;
        }
        for &b in buf.iter().take(n.unsigned_abs()) {
            if got < child.len() {
                child[got] = b;
                got += 1;
            } else if b == DISARM {
                disarmed = true;
            }
        }
    }
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    if !disarmed {
        let group = u32::from_ne_bytes(child);
        if got == child.len() && group > 1 {
            if let Ok(group) = libc::pid_t::try_from(group) {
                libc::killpg(group, libc::SIGKILL);
            }
        }
        if ends.kill >= 0 {
            libc::write(ends.kill, b"1".as_ptr().cast(), 1);
        } else if ends.procs >= 0 {
            // No cgroup.kill: kill each member, again until none is listed (a second at most).
            for _ in 0..100 {
                if kill_listed(ends.procs) == 0 {
                    break;
                }
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
    if !ends.dir.is_null() {
        // An empty cgroup (zombies do not count) can be removed; its members die at once.
        for _ in 0..100 {
            if libc::rmdir(ends.dir) == 0 || *libc::__errno_location() != libc::EBUSY {
                break;
            }
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
    libc::_exit(0)
}

/// Sends SIGKILL to every process listed in the `cgroup.procs` open at `procs`; returns how
/// many were listed. Only system calls, no allocation (the guard's).
///
/// # Safety
///
/// `procs` must be an open descriptor.
unsafe fn kill_listed(procs: RawFd) -> usize {
    let mut buf = [0u8; 4096];
    let n = libc::pread(procs, buf.as_mut_ptr().cast(), buf.len(), 0);
    if n <= 0 {
        return 0;
    }
    let mut listed = 0;
    let mut pid: libc::pid_t = 0;
    for &b in buf.iter().take(n.unsigned_abs()) {
        if b.is_ascii_digit() {
            pid = pid
                .saturating_mul(10)
                .saturating_add(libc::pid_t::from(b - b'0'));
        } else {
            if pid > 1 {
                libc::kill(pid, libc::SIGKILL);
                listed += 1;
            }
            pid = 0;
        }
    }
    listed
}
