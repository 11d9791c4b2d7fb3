//! What the library asks of the operating system beside git: the clock, random bytes, and
//! what this machine's `/proc` says of its boot, its PID namespace and its processes. The
//! model decides from what is read here, as values ([`crate::liveness::decide`],
//! [`crate::session::secret_from`]), and never reads the machine itself.

use std::os::unix::fs::MetadataExt;

use chrono::{DateTime, SubsecRound, Utc};

use crate::error::Error;
use crate::liveness::{HolderProcess, LocalHost, Probe};

/// Returns the current system time truncated to whole seconds.
pub fn system_now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

/// Returns a new session secret ([`crate::session::secret_from`]) made of 32 bytes from the
/// operating system's CSPRNG.
pub fn new_session_secret() -> Result<String, Error> {
    use std::io::Read;
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(|e| Error::Io {
            context: "cannot read random bytes from /dev/urandom".into(),
            source: e,
        })?;
    Ok(crate::session::secret_from(random))
}

/// Returns the user's folder of what git-lease learned of servers:
/// `$XDG_STATE_HOME/git-lease/servers`, else `$HOME/.local/state/git-lease/servers`; `None`
/// when neither variable holds an absolute path.
pub fn user_server_dir() -> Option<std::path::PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let state = absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local").join("state")))?;
    Some(state.join("git-lease").join("servers"))
}

/// Returns this reader's place, or `None` where it cannot be established: no `/proc` boot
/// id, or a `/proc` that is not of this process's PID namespace (its pids would be another
/// namespace's numbers), or no namespace to read there.
pub fn local_host() -> Option<LocalHost> {
    Some(LocalHost::new(boot_id()?, own_pid_ns()?, probe))
}

/// Describes process `pid` (numbered in this process's PID namespace) on this machine, if
/// it runs and this machine can place it ([`local_host`]).
pub fn holder_process(pid: u32) -> Option<HolderProcess> {
    let (boot_id, pid_ns) = (boot_id()?, own_pid_ns()?);
    let Probe::Running(start_ticks) = probe(pid) else {
        return None;
    };
    Some(HolderProcess {
        pid,
        boot_id,
        pid_ns: Some(pid_ns),
        start_ticks,
    })
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Returns the inode of this process's PID namespace, if `/proc` is of that namespace: the
/// `NSpid` line of `/proc/self/status` lists a process's pid in the namespace of the `/proc`
/// mount and in each one below it down to its own, so it is one number, this process's pid,
/// exactly when the two are the same.
fn own_pid_ns() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let pids: Vec<&str> = nspid.split_whitespace().collect();
    if pids != [std::process::id().to_string()] {
        return None;
    }
    Some(std::fs::metadata("/proc/self/ns/pid").ok()?.ino())
}

/// Looks `pid` up in `/proc/<pid>/stat`.
fn probe(pid: u32) -> Probe {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Probe::Missing {
            all_visible: proc_shows_every_process(),
        },
        Err(_) => Probe::Unreadable,
    }
}

/// Reads a `/proc/<pid>/stat` line: the state (field 3) and the start time (field 22).
fn parse_stat(stat: &str) -> Probe {
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return Probe::Unreadable;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    if matches!(fields.first(), Some(&"Z") | Some(&"X") | Some(&"x")) {
        return Probe::Ended;
    }
    match fields.get(22 - 3).and_then(|t| t.parse().ok()) {
        Some(ticks) => Probe::Running(ticks),
        None => Probe::Unreadable,
    }
}

/// Returns true if `/proc` hides no process from this reader: the topmost mount at `/proc` is
/// a proc file system without `hidepid`, and `/proc/1` (which every PID namespace has) can be
/// read.
fn proc_shows_every_process() -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // The last mount at `/proc` is the one on top, the one paths reach.
    mounts.lines().rev().find_map(proc_mount_options) == Some(false)
        && std::fs::read_to_string("/proc/1/stat").is_ok()
}

/// For a line of `/proc/self/mountinfo` that mounts something at `/proc`: `Some(true)` if it
/// may hide processes (`hidepid` in force, not a whole proc file system), `Some(false)` if not.
fn proc_mount_options(line: &str) -> Option<bool> {
    // `id parent dev root mountpoint options [optional fields...] - fstype source superoptions`
    let (mount, fs) = line.split_once(" - ")?;
    let mut mount = mount.split(' ').skip(3);
    let (root, point) = (mount.next()?, mount.next()?);
    if point != "/proc" {
        return None;
    }
    let mut fs = fs.split(' ');
    let (fstype, super_options) = (fs.next()?, fs.nth(1).unwrap_or(""));
    let hides = super_options.split(',').any(|o| {
        o.strip_prefix("hidepid=")
            .is_some_and(|v| v != "0" && v != "off")
    });
    Some(fstype != "proc" || root != "/" || hides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::ProcessState;

    #[test]
    fn session_secrets_are_fresh() {
        let (a, b) = (new_session_secret(), new_session_secret());
        let (a, b) = (a.expect("random bytes"), b.expect("random bytes"));
        assert_ne!(a, b);
        assert!(a.starts_with(crate::session::SECRET_PREFIX) && a.len() == 68);
    }

    #[test]
    fn stat_lines_are_read_after_the_last_parenthesis() {
        let line = |state: &str| {
            format!("7 (a) b) c) {state} 1 7 7 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 1234 5 6\n")
        };
        assert_eq!(parse_stat(&line("S")), Probe::Running(1234));
        assert_eq!(parse_stat(&line("Z")), Probe::Ended);
        assert_eq!(parse_stat(&line("X")), Probe::Ended);
        assert_eq!(parse_stat("7 (short) S 1 2\n"), Probe::Unreadable);
        assert_eq!(parse_stat("garbage"), Probe::Unreadable);
        assert_eq!(parse_stat(")"), Probe::Unreadable);
    }

    #[test]
    fn a_proc_mount_with_hidepid_may_hide_processes() {
        let at_proc = |fs: &str| format!("66 48 0:40 / /proc rw,relatime - {fs}");
        assert_eq!(proc_mount_options(&at_proc("proc proc rw")), Some(false));
        assert_eq!(
            proc_mount_options(&at_proc("proc proc rw,hidepid=off")),
            Some(false)
        );
        assert_eq!(
            proc_mount_options(&at_proc("proc proc rw,hidepid=0")),
            Some(false)
        );
        for hidden in ["invisible", "noaccess", "ptraceable", "1", "2"] {
            let line = at_proc(&format!("proc proc rw,hidepid={hidden},gid=4"));
            assert_eq!(proc_mount_options(&line), Some(true), "{line}");
        }
        assert_eq!(
            proc_mount_options(&at_proc("tmpfs none rw")),
            Some(true),
            "not a proc file system"
        );
        assert_eq!(
            proc_mount_options("66 48 0:21 /sys /proc rw - proc proc rw"),
            Some(true),
            "a part of a proc file system bound at /proc"
        );
        assert_eq!(
            proc_mount_options("36 35 98:0 / /proc/sys/fs/binfmt_misc rw - binfmt_misc x rw"),
            None
        );
        assert_eq!(
            proc_mount_options("22 1 0:21 / /proc rw shared:12 - proc proc rw"),
            Some(false),
            "optional fields before the separator"
        );
    }

    #[test]
    fn this_process_is_alive_and_a_recycled_pid_is_not_the_holder() {
        let Some(host) = local_host() else {
            return; // no /proc of this namespace: nothing to observe
        };
        let me = holder_process(std::process::id()).expect("this process exists");
        assert_eq!(me.pid_ns, own_pid_ns());
        assert_eq!(host.state(&me), ProcessState::Alive);
        let recycled = HolderProcess {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert_eq!(host.state(&recycled), ProcessState::Gone);
        let elsewhere = HolderProcess {
            boot_id: "another-machine".into(),
            start_ticks: 0,
            ..me
        };
        assert_eq!(
            host.state(&elsewhere),
            ProcessState::Unknown,
            "other machines: TTL only"
        );
    }
}
