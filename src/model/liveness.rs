//! Local liveness: a lease whose holder process is gone from this machine is not live.
//!
//! Programs that hold leases crash and get restarted; waiting out a TTL after a crash wastes
//! the TTL. A lease may record the holding process: its pid, the machine's boot id, the PID
//! namespace the pid is numbered in, and the process's start time, so a recycled pid is not
//! mistaken for the holder. A reader in the same boot *and* the same PID namespace that can
//! establish that process's absence says so in its [`Observation`]
//! ([`crate::Ledger::observe`]), and [`crate::rules::is_live`], the one liveness rule, takes
//! that observation as an input and treats the lease as not live. The observation is never
//! stored: another reader, on another machine or a moment later, may see otherwise.
//!
//! Containers on one kernel share the boot id, and a `/proc` mounted with `hidepid` hides
//! other users' processes: in both cases a live holder would look gone. So a process is
//! [`ProcessState::Gone`] only when the reader can prove it ([`decide`]): anything it cannot
//! see (another boot, another or an unrecorded PID namespace, a hidden or unreadable `/proc`
//! entry) is [`ProcessState::Unknown`], and an unknown holder stays live until its expiry.

use serde::{Deserialize, Serialize};

use crate::lease::Lease;

/// The process that holds a lease, as recorded in `lease.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HolderProcess {
    /// The process id, as numbered in [`HolderProcess::pid_ns`].
    pub pid: u32,
    /// The machine's boot id (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// The PID namespace `pid` is numbered in: the inode of `/proc/self/ns/pid` of the process
    /// that recorded it. `None` in records written before it was recorded: their namespace is
    /// unknown, so no reader ever takes their process for gone. The kernel numbers live
    /// namespaces uniquely and may give a freed number to a new one; a record whose namespace
    /// has ended names a process that has ended with it, so that reuse never makes a live
    /// process look gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_ns: Option<u64>,
    /// The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
}

/// What one reader saw beside a lease record: an input to the liveness rule, never part of
/// the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// The holder process the record names ran in this reader's boot and PID namespace, and
    /// the reader established that it is gone ([`ProcessState::Gone`]).
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

/// What a reader's `/proc` says of one pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// A running (not zombie) process, started at these clock ticks since boot.
    Running(u64),
    /// A process that has ended and is not reaped yet (a zombie, or dead).
    Ended,
    /// No `/proc/<pid>` entry. `all_visible` says whether this `/proc` shows every process
    /// (no `hidepid` in force, and `/proc/1` readable): only then does a missing entry prove
    /// the process absent.
    Missing {
        /// This `/proc` hides no process from this reader.
        all_visible: bool,
    },
    /// An entry the reader cannot read or make sense of (`hidepid=1`, no permission, a
    /// process ending while it is read, a garbled line).
    Unreadable,
}

/// What a reader can tell of a recorded holder process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessState {
    /// It runs: the pid is there with the recorded start time.
    Alive,
    /// It is gone, and the reader can prove it: in its boot and PID namespace the pid is a
    /// zombie, another process, or absent from a `/proc` that hides nothing.
    Gone,
    /// The reader cannot tell: another boot, another (or an unrecorded) PID namespace, or an
    /// entry it cannot see. The holder then counts as live until its expiry.
    Unknown,
}

/// Decides what a reader in boot `boot_id` and PID namespace `pid_ns` can tell of `record`:
/// the one rule of local liveness. `probe` looks the recorded pid up in the reader's `/proc`;
/// it is asked only when the record is of the reader's own boot and namespace.
pub fn decide(
    record: &HolderProcess,
    boot_id: &str,
    pid_ns: u64,
    probe: impl FnOnce(u32) -> Probe,
) -> ProcessState {
    if record.boot_id != boot_id || record.pid_ns != Some(pid_ns) {
        return ProcessState::Unknown;
    }
    match probe(record.pid) {
        Probe::Running(ticks) if ticks == record.start_ticks => ProcessState::Alive,
        // The pid belongs to another process now, so the recorded one has ended.
        Probe::Running(_) | Probe::Ended => ProcessState::Gone,
        Probe::Missing { all_visible: true } => ProcessState::Gone,
        Probe::Missing { all_visible: false } | Probe::Unreadable => ProcessState::Unknown,
    }
}

/// Where this reader stands, its boot and its PID namespace, and how it looks a pid up in its
/// `/proc`: read from the machine by [`crate::os::local_host`], given here as values.
#[derive(Clone, Debug)]
pub struct LocalHost {
    boot_id: String,
    pid_ns: u64,
    probe: fn(u32) -> Probe,
}

impl LocalHost {
    /// A reader in boot `boot_id` and PID namespace `pid_ns`, whose `/proc` says `probe` of a
    /// pid.
    pub fn new(boot_id: String, pid_ns: u64, probe: fn(u32) -> Probe) -> LocalHost {
        LocalHost {
            boot_id,
            pid_ns,
            probe,
        }
    }

    /// Returns what this reader can tell of `process` ([`decide`], on this reader's `/proc`).
    pub fn state(&self, process: &HolderProcess) -> ProcessState {
        decide(process, &self.boot_id, self.pid_ns, self.probe)
    }

    /// Returns what this reader sees beside `lease`: whether the process it records is gone.
    pub fn observe(&self, lease: &Lease) -> Observation {
        Observation {
            process_gone: lease
                .process
                .as_ref()
                .is_some_and(|p| self.state(p) == ProcessState::Gone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "0b7e7b4e-0000-4000-8000-000000000001";
    const NS: u64 = 4026531836;

    fn record(pid_ns: Option<u64>) -> HolderProcess {
        HolderProcess {
            pid: 42,
            boot_id: BOOT.into(),
            pid_ns,
            start_ticks: 1000,
        }
    }

    /// `decide` for `record` from a reader in `BOOT` and `NS` whose `/proc` says `seen`.
    fn seen_as(record: &HolderProcess, seen: Probe) -> ProcessState {
        decide(record, BOOT, NS, |pid| {
            assert_eq!(pid, 42, "the recorded pid is looked up");
            seen
        })
    }

    #[test]
    fn in_the_same_boot_and_namespace_only_what_is_proven_is_gone() {
        let r = record(Some(NS));
        assert_eq!(seen_as(&r, Probe::Running(1000)), ProcessState::Alive);
        assert_eq!(
            seen_as(&r, Probe::Running(1001)),
            ProcessState::Gone,
            "a recycled pid"
        );
        assert_eq!(seen_as(&r, Probe::Ended), ProcessState::Gone, "a zombie");
        assert_eq!(
            seen_as(&r, Probe::Missing { all_visible: true }),
            ProcessState::Gone
        );
        assert_eq!(
            seen_as(&r, Probe::Missing { all_visible: false }),
            ProcessState::Unknown,
            "hidepid may hide it"
        );
        assert_eq!(seen_as(&r, Probe::Unreadable), ProcessState::Unknown);
    }

    #[test]
    fn another_boot_another_namespace_or_none_recorded_is_unknown_without_looking() {
        let never =
            |_: u32| -> Probe { panic!("no lookup for a process this reader cannot place") };
        let elsewhere = HolderProcess {
            boot_id: "another-machine".into(),
            ..record(Some(NS))
        };
        assert_eq!(decide(&elsewhere, BOOT, NS, never), ProcessState::Unknown);
        let container = record(Some(NS + 1));
        assert_eq!(decide(&container, BOOT, NS, never), ProcessState::Unknown);
        let older = record(None);
        assert_eq!(decide(&older, BOOT, NS, never), ProcessState::Unknown);
    }

    #[test]
    fn an_unknown_process_is_never_observed_gone() {
        let never = |_: u32| -> Probe { panic!("no lookup for a process of another namespace") };
        let host = LocalHost::new(BOOT.into(), NS, never);
        let issue = crate::issue::IssueId::new("42").expect("an id");
        let alice = crate::holder::Holder::new("alice").expect("a holder");
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("an instant");
        let mut lease = Lease::tenure(&issue, &alice, 1, at, None);
        for process in [record(None), record(Some(NS + 1))] {
            lease.process = Some(Box::new(process));
            assert_eq!(host.observe(&lease), Observation::NONE);
        }
    }
}
