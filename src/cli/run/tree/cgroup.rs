//! The cgroup v2 a command's child joins where one can be made: everything it starts is in it,
//! and a stop kills it whole.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The child's cgroup.
pub(super) struct Cgroup {
    pub(super) dir: PathBuf,
    /// Its `cgroup.procs`, open for writing: the child writes `0` to it to join.
    pub(super) procs: File,
}

impl Cgroup {
    /// Makes `git-lease-run-<me>` under this process's own cgroup v2, if it can.
    pub(super) fn make(me: u32) -> Option<Cgroup> {
        let dir = own_cgroup()?.join(format!("git-lease-run-{me}"));
        // One of a run that had this id before and whose guard was killed too: removed if empty.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).ok()?;
        match OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(procs) => Some(Cgroup { dir, procs }),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Its members now.
    pub(super) fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Kills every member at once (Linux 5.14 on; before, the rounds of [`Tree::kill`] kill
    /// them one by one).
    pub(super) fn kill(&self) {
        if let Ok(mut f) = OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
        {
            let _ = f.write_all(b"1");
        }
    }

    /// Removes it once no process is left in it (waiting a second at most: the guard tries
    /// again when it ends).
    pub(super) fn remove(&self) {
        let events = File::open(self.dir.join("cgroup.events")).ok();
        let deadline = Instant::now() + Duration::from_secs(1);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            match &events {
                Some(events) => {
                    // cgroup.events signals a change (POLLPRI) when the cgroup empties.
                    let mut p = libc::pollfd {
                        fd: events.as_raw_fd(),
                        events: libc::POLLPRI,
                        revents: 0,
                    };
                    // SAFETY: poll(2) on one pollfd on this stack frame.
                    unsafe {
                        libc::poll(&mut p, 1, 50);
                    }
                }
                None => return,
            }
        }
    }
}

/// Returns the directory of this process's cgroup v2: its path in `/proc/self/cgroup` under
/// the cgroup2 mount of `/proc/self/mountinfo`.
fn own_cgroup() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        let (root, mount) = (fields.get(3)?, fields.get(4)?);
        // Escaped names (`\040` for a space) are not worth decoding here.
        if mount.contains('\\') {
            return None;
        }
        let below = own.strip_prefix(root.trim_end_matches('/'))?;
        Some(Path::new(mount).join(below.trim_start_matches('/')))
    })
}
