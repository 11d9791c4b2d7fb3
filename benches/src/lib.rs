//! Benchmarks of git-lease and its peers.
//!
//! - [`sqlite_lease`]: the SQLite peer, the same lease rules on one SQLite table.
//! - [`populate`]: builds git repositories (and SQLite databases) holding N leases quickly.
//! - [`floor`]: the file-system floor of one acquire: the files git's format makes it create.
//! - [`stats`]: medians and paired, alternating measurements.

pub mod floor;
pub mod populate;
pub mod sqlite_lease;
pub mod stats;

use std::path::PathBuf;

/// The fixed clock of the benchmarks (unix seconds, 2027-01-15T08:00:00Z), so that which
/// populated leases are live is the same in every run and every process.
pub const NOW: i64 = 1_800_000_000;

/// The directory benchmark repositories are made in: `$GIT_LEASE_BENCH_TMP`, else `/var/tmp`
/// (on the same disk as the work tree here; `/tmp` may be a tmpfs, which would flatter every
/// write).
pub fn scratch_base() -> PathBuf {
    std::env::var_os("GIT_LEASE_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp"))
}

/// Returns the file-system type of `path` as `df --output=fstype` prints it, if it can tell.
pub fn fs_type(path: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new("df")
        .arg("--output=fstype")
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .map(|s| s.trim().to_owned())
}
