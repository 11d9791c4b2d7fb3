//! Local liveness: a lease whose holder process is gone from this machine is not live.
//!
//! Programs that hold leases crash and get restarted; waiting out a TTL after a crash wastes
//! the TTL. A lease may record the holding process (pid, the machine's boot id, and the
//! process's start time, so a recycled pid is not mistaken for the holder). On the same
//! machine (same boot id), a reader that finds that process gone says so in its
//! [`Observation`] ([`crate::Ledger::observe`]), and [`crate::rules::is_live`], the one
//! liveness rule, takes that observation as an input and treats the lease as not live. The
//! observation is never stored: another reader, on another machine or a moment later, may see
//! otherwise. On other machines only the TTL applies.

use serde::{Deserialize, Serialize};

use crate::lease::Lease;

/// The process that holds a lease, as recorded in `lease.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HolderProcess {
    /// The process id.
    pub pid: u32,
    /// The machine's boot id (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
}

impl HolderProcess {
    /// Describes process `pid` on this machine, if it exists and the machine has a boot id.
    pub fn of(pid: u32) -> Option<HolderProcess> {
        Some(HolderProcess {
            pid,
            boot_id: boot_id()?,
            start_ticks: start_ticks(pid)?,
        })
    }
}

/// What one reader saw beside a lease record: an input to the liveness rule, never part of
/// the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// The holder process the record names ran on this reader's machine and is gone.
    pub process_gone: bool,
}

impl Observation {
    /// Nothing observed beside the record: only the record (and its TTL) decides.
    pub const NONE: Observation = Observation {
        process_gone: false,
    };
}

/// What a decision starts from: the ledger's last record and what its reader observed.
#[derive(Clone, Copy, Debug)]
pub struct Current<'a> {
    /// The last record of the ledger.
    pub lease: &'a Lease,
    /// What the reader saw beside it.
    pub seen: Observation,
}

impl<'a> Current<'a> {
    /// The record alone, with nothing observed beside it (an audit, a server judging a push,
    /// a reader without local liveness).
    pub fn recorded(lease: &'a Lease) -> Current<'a> {
        Current {
            lease,
            seen: Observation::NONE,
        }
    }
}

/// What this machine can see of holder processes.
#[derive(Clone, Debug)]
pub struct LocalHost {
    boot_id: String,
}

impl LocalHost {
    /// Returns this machine's view, or `None` where there is no `/proc` boot id.
    pub fn detect() -> Option<LocalHost> {
        Some(LocalHost {
            boot_id: boot_id()?,
        })
    }

    /// Returns true if `process` ran on this machine since its last boot and is gone now
    /// (no such pid, a zombie, or a different process under a recycled pid).
    pub fn is_gone(&self, process: &HolderProcess) -> bool {
        process.boot_id == self.boot_id && start_ticks(process.pid) != Some(process.start_ticks)
    }

    /// Returns true if `process` is running on this machine now: this boot, and the same
    /// process under its pid (its start time matches).
    pub fn sees_running(&self, process: &HolderProcess) -> bool {
        process.boot_id == self.boot_id && start_ticks(process.pid) == Some(process.start_ticks)
    }

    /// Returns what this machine sees beside `lease`: whether the process it records is gone.
    pub fn observe(&self, lease: &Lease) -> Observation {
        Observation {
            process_gone: lease.process.as_ref().is_some_and(|p| self.is_gone(p)),
        }
    }
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Returns the start time of a running (not zombie) process, from `/proc/<pid>/stat`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); the start time is field 22.
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_recycled_pid_is_not_the_holder() {
        let Some(host) = LocalHost::detect() else {
            return; // no /proc: nothing to observe
        };
        let me = HolderProcess::of(std::process::id()).expect("this process exists");
        assert!(!host.is_gone(&me));
        let recycled = HolderProcess {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert!(host.is_gone(&recycled));
        let elsewhere = HolderProcess {
            boot_id: "another-machine".into(),
            start_ticks: 0,
            ..me
        };
        assert!(!host.is_gone(&elsewhere), "other machines: TTL only");
    }
}
