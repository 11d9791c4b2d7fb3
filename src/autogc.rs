//! The write path's automatic packing trigger, the way `git gc --auto` works after a commit.
//!
//! git estimates the loose objects as 256 × the files in `objects/17`, so that count can only
//! cross the threshold when a write puts an object there. After a successful ref update that
//! wrote into `objects/17`, the count is checked, and past the threshold
//! `git -c gc.auto=<threshold> gc --auto --quiet` is started in the background (git's own
//! `gc.pid` lock keeps concurrent ones out) and not waited for, so a claim is never blocked by
//! packing. The threshold is `lease.gcAuto`, else git's `gc.auto`, else 6700; 0 disables it.
//! Writes of several events at once (multi-issue claims, batches) write loose objects too.
//! `GIT_LEASE_GC_SYNC=1` runs it in the foreground and waits (for tests and scripts). It knows paths, not the store, so the store can own it.

use std::cell::Cell;
use std::path::Path;
use std::process::Stdio;

use gix::ObjectId;

use crate::error::{Error, Result};
use crate::git::{command as git, spawn_error};

/// git's default `gc.auto`: the loose-object estimate past which `git gc --auto` packs.
pub const DEFAULT_GC_AUTO: u64 = 6700;

/// The environment variable that makes the automatic trigger wait for git (`1`).
pub const GC_SYNC_ENV: &str = "GIT_LEASE_GC_SYNC";

/// The write path's automatic packing trigger.
#[derive(Debug)]
pub struct AutoGc {
    threshold: u64,
    foreground: bool,
    loose_pending: Cell<bool>,
}

impl AutoGc {
    /// Reads `lease.gcAuto` (else `gc.auto`, else [`DEFAULT_GC_AUTO`]) and [`GC_SYNC_ENV`].
    /// `setting` gives a configuration value by key (the store reads the repository's).
    pub fn from_settings(setting: impl Fn(&str) -> Option<String>) -> crate::Result<AutoGc> {
        let count = |key: &str| crate::config::count(key, setting(key).as_deref());
        let threshold = match count("lease.gcAuto")? {
            Some(n) => n,
            None => count("gc.auto")?.unwrap_or(DEFAULT_GC_AUTO),
        };
        Ok(AutoGc {
            threshold,
            foreground: std::env::var_os(GC_SYNC_ENV).is_some_and(|v| v == "1"),
            loose_pending: Cell::new(false),
        })
    }

    /// Returns the loose-object threshold (0: never).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// Notes objects just written: one in `objects/17` may have crossed the threshold.
    pub(crate) fn note_written(&self, ids: &[ObjectId]) {
        if ids.iter().any(|id| id.as_slice().first() == Some(&0x17)) {
            self.loose_pending.set(true);
        }
    }

    /// Called after a ref update landed: when a write went into `objects/17` since the last
    /// check and the estimate is past the threshold, starts git's packing (never with a
    /// threshold of 0). Never
    /// fails the write: a trigger that cannot run is skipped, and the next one tries again.
    pub(crate) fn after_write(&self, git_dir: &Path, objects_dir: &Path) {
        let loose = self.loose_pending.replace(false);
        if !loose || !too_many_loose_objects(objects_dir, self.threshold) {
            return;
        }
        let _ = spawn_auto_gc(git_dir, self.threshold, self.foreground);
    }
}

/// Returns true if git's estimate of the loose objects (256 × the object files in
/// `objects/17`) is past `threshold`, exactly as `git gc --auto` decides.
pub fn too_many_loose_objects(objects_dir: &Path, threshold: u64) -> bool {
    if threshold == 0 {
        return false;
    }
    let limit = threshold.div_ceil(256);
    let Ok(dir) = std::fs::read_dir(objects_dir.join("17")) else {
        return false;
    };
    let mut found = 0u64;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.as_encoded_bytes();
        if name.len() >= 38 && name.iter().all(u8::is_ascii_hexdigit) {
            found += 1;
            if found > limit {
                return true;
            }
        }
    }
    false
}

/// Starts `git gc --auto` with `threshold` as `gc.auto`: in the background, not waited for
/// (its output discarded, in its own process group), or with `foreground` in the foreground
/// (`gc.autoDetach=false`) and waited for.
pub fn spawn_auto_gc(git_dir: &Path, threshold: u64, foreground: bool) -> Result<()> {
    let mut cmd = git(git_dir);
    cmd.arg("-c").arg(format!("gc.auto={threshold}"));
    if foreground {
        cmd.args(["-c", "gc.autoDetach=false"]);
    }
    cmd.args(["gc", "--auto", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let shown = "git gc --auto";
    if foreground {
        let status = cmd.status().map_err(|e| spawn_error(shown, e))?;
        return if status.success() {
            Ok(())
        } else {
            Err(Error::Git {
                context: shown.into(),
                message: format!("exited with {status}"),
            })
        };
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|e| spawn_error(shown, e))?;
    // Reap it when it ends, so that a long-running embedder collects no zombies; a command
    // line process simply exits and leaves it to finish on its own.
    std::thread::Builder::new()
        .name("git-lease-gc".into())
        .spawn(move || child.wait())
        .map(|_| ())
        .map_err(|e| spawn_error(shown, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_gits() {
        let dir = tempfile::tempdir().unwrap();
        let seventeen = dir.path().join("17");
        assert!(!too_many_loose_objects(dir.path(), 5), "no objects/17 yet");
        std::fs::create_dir_all(&seventeen).unwrap();
        let name = |i: u32| format!("{i:038x}");
        std::fs::write(seventeen.join(name(1)), b"").unwrap();
        assert!(
            !too_many_loose_objects(dir.path(), 5),
            "1 is not > ceil(5/256)"
        );
        std::fs::write(seventeen.join(name(2)), b"").unwrap();
        std::fs::write(seventeen.join("tmp_obj_x"), b"").unwrap();
        assert!(too_many_loose_objects(dir.path(), 5));
        assert!(!too_many_loose_objects(dir.path(), 0), "0 disables");
        assert!(!too_many_loose_objects(dir.path(), 6700));
    }
}
