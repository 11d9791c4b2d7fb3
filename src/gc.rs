//! Packing: `git lease gc`, and the automatic trigger in the write path.
//!
//! # Why it exists
//!
//! Every event writes three loose objects (blob, tree, commit) and a loose ref. Loose objects
//! make reading a ledger several times slower than packed ones and loose refs make listing
//! them slower; gix can neither repack nor (usefully) pack refs, so this module runs git for
//! that:
//!
//! - [`gc`] (`git lease gc`) packs refs (`git pack-refs --all --prune`) and loose objects
//!   (`git repack -d -q`: an incremental pack; never deletes anything that is not also in a
//!   pack), or with `full` runs `git gc --quiet` (which also consolidates packs and prunes
//!   unreachable objects past git's expiry). In a reftable repository `git pack-refs`
//!   compacts the tables into one; git 2.47 gives that up when another writer changed the
//!   tables meanwhile, so there a failed step is run again, up to
//!   `REFTABLE_PACK_ATTEMPTS` times. Either way it then removes the temporary files
//!   that killed writers left behind, once they are older than `gc.pruneExpire` (two weeks
//!   by default) and at least an hour old ([`remove_stale_temporaries`]).
//! - [`AutoGc`] is the write path's trigger, the way `git gc --auto` works after a commit: git
//!   estimates the loose objects as 256 × the files in `objects/17`, so that count can only
//!   cross the threshold when a write puts an object there. After a successful ref update that
//!   wrote into `objects/17`, the count is checked, and past the threshold
//!   `git -c gc.auto=<threshold> gc --auto --quiet` is started in the background (git's own
//!   `gc.pid` lock keeps concurrent ones out) and not waited for, so a claim is never blocked
//!   by packing. The threshold is `lease.gcAuto`, else git's `gc.auto`, else 6700; 0 disables
//!   it. Writes of several events at once (multi-issue claims, batches) add one pack each
//!   (`src/pack.rs`) instead; after those, the trigger counts the indexed packs without a
//!   `.keep` as `git gc --auto` does, and past `gc.autoPackLimit` (default 50) starts it the
//!   same way, to consolidate them. `GIT_LEASE_GC_SYNC=1` runs it in the foreground and waits
//!   (for tests and scripts).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gix::bstr::ByteSlice;
use gix::ObjectId;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::Store;

/// git's default `gc.auto`: the loose-object estimate past which `git gc --auto` packs.
pub const DEFAULT_GC_AUTO: u64 = 6700;

/// The environment variable that makes the automatic trigger wait for git (`1`).
pub const GC_SYNC_ENV: &str = "GIT_LEASE_GC_SYNC";

/// git's default `gc.autoPackLimit`: the number of packs past which `git gc --auto`
/// consolidates them.
pub const DEFAULT_AUTO_PACK_LIMIT: u64 = 50;

/// The write path's automatic packing trigger.
#[derive(Debug)]
pub struct AutoGc {
    threshold: u64,
    pack_limit: u64,
    foreground: bool,
    loose_pending: Cell<bool>,
    pack_pending: Cell<bool>,
}

impl AutoGc {
    /// Reads `lease.gcAuto` (else `gc.auto`, else [`DEFAULT_GC_AUTO`]) and
    /// [`GC_SYNC_ENV`].
    pub fn from_repo(repo: &gix::Repository) -> AutoGc {
        let config = repo.config_snapshot();
        let threshold = config
            .integer("lease.gcAuto")
            .or_else(|| config.integer("gc.auto"))
            .map_or(DEFAULT_GC_AUTO, |n| u64::try_from(n).unwrap_or(0));
        let pack_limit = config
            .integer("gc.autoPackLimit")
            .map_or(DEFAULT_AUTO_PACK_LIMIT, |n| u64::try_from(n).unwrap_or(0));
        AutoGc {
            threshold,
            pack_limit,
            foreground: std::env::var_os(GC_SYNC_ENV).is_some_and(|v| v == "1"),
            loose_pending: Cell::new(false),
            pack_pending: Cell::new(false),
        }
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

    /// Notes a pack just written: it may have made too many packs.
    pub(crate) fn note_pack_written(&self) {
        self.pack_pending.set(true);
    }

    /// Called after a ref update landed: when a write went into `objects/17` since the last
    /// check and the estimate is past the threshold, starts git's packing. Never fails the
    /// write: a trigger that cannot run is skipped, and the next one tries again.
    pub(crate) fn after_write(&self, store: &Store) {
        let loose = self.loose_pending.replace(false);
        let packs = self.pack_pending.replace(false);
        if self.threshold == 0 || !(loose || packs) {
            return;
        }
        let objects = store.repo().objects.store_ref().path().to_owned();
        let due = (loose && too_many_loose_objects(&objects, self.threshold))
            || (packs && too_many_packs(&objects, self.pack_limit));
        if !due {
            return;
        }
        let _ = spawn_auto_gc(store.git_dir(), self.threshold, self.foreground);
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

/// Returns true if `objects_dir/pack` holds more than `limit` indexed packs that have no
/// `.keep` file, as `git gc --auto` counts them (a `limit` of 0: never).
pub fn too_many_packs(objects_dir: &Path, limit: u64) -> bool {
    if limit == 0 {
        return false;
    }
    let pack_dir = objects_dir.join("pack");
    let Ok(dir) = std::fs::read_dir(&pack_dir) else {
        return false;
    };
    let mut found = 0u64;
    for entry in dir.flatten() {
        let path = pack_dir.join(entry.file_name());
        // A pack counts once its index is there (a `.pack` without one is still being
        // written) and while no `.keep` holds it.
        if path.extension().is_some_and(|e| e == "pack")
            && path.with_extension("idx").exists()
            && !path.with_extension("keep").exists()
        {
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

/// What `git lease gc` did.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct GcReport {
    /// Loose objects before (`git count-objects`).
    pub loose_objects_before: u64,
    /// Loose objects after.
    pub loose_objects_after: u64,
    /// Packs after.
    pub packs_after: u64,
    /// Loose lease ref files before (0 in a reftable repository, which has none).
    pub loose_lease_refs_before: u64,
    /// Loose lease ref files after (0 in a reftable repository).
    pub loose_lease_refs_after: u64,
    /// The git commands run, in order.
    pub commands: Vec<String>,
    /// Stale temporary files removed ([`remove_stale_temporaries`]).
    pub temporary_files_removed: u64,
}

/// Packs refs and objects of `store`'s repository with git (see the module documentation).
pub fn gc(store: &Store, full: bool) -> Result<GcReport> {
    let git_dir = store.git_dir().to_owned();
    let leases = store.repo().common_dir().join("refs").join("leases");
    let before = count_objects(&git_dir)?;
    let refs_before = count_files(&leases);
    let steps: Vec<Vec<&str>> = if full {
        vec![vec!["gc", "--quiet"]]
    } else {
        vec![
            vec!["pack-refs", "--all", "--prune"],
            vec!["repack", "-d", "-q"],
        ]
    };
    // git 2.47 gives up compacting a reftable stack that another writer changed or locked
    // meanwhile (`git pack-refs` exits 244, an outdated stack, or says "data is locked"; `git
    // gc` then fails to run pack-refs): nothing is lost, and it is tried again.
    let attempts = if store.ref_format() == "files" {
        1
    } else {
        REFTABLE_PACK_ATTEMPTS
    };
    let mut commands = Vec::new();
    for args in steps {
        let shown = format!("git {}", args.join(" "));
        let mut attempt = 1;
        loop {
            let out = git(&git_dir)
                .args(&args)
                .output()
                .map_err(|e| spawn_error(&shown, e))?;
            if out.status.success() {
                break;
            }
            if attempt >= attempts {
                let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
                return Err(Error::Git {
                    context: shown,
                    message: if said.is_empty() {
                        format!("exited with {}", out.status)
                    } else {
                        said
                    },
                });
            }
            // A moment that doubles from 1 ms: concurrent writers commit in milliseconds.
            std::thread::sleep(Duration::from_millis(1 << (attempt - 1).min(7)));
            attempt += 1;
        }
        commands.push(shown);
    }
    let temporary_files_removed = match temporaries_cutoff(&git_dir)? {
        Some(cutoff) => remove_stale_temporaries(
            store.repo().objects.store_ref().path(),
            &store.repo().common_dir().join("git-lease"),
            cutoff,
        ),
        None => 0,
    };
    let after = count_objects(&git_dir)?;
    Ok(GcReport {
        loose_objects_before: before.loose,
        loose_objects_after: after.loose,
        packs_after: after.packs,
        loose_lease_refs_before: refs_before,
        loose_lease_refs_after: count_files(&leases),
        commands,
        temporary_files_removed,
    })
}

/// How many times `git lease gc` runs a step that failed in a reftable repository, where
/// git 2.47 gives up compacting the tables when another writer changed them meanwhile.
const REFTABLE_PACK_ATTEMPTS: u32 = 10;

/// git's default `gc.pruneExpire`: two weeks.
const DEFAULT_PRUNE_EXPIRE: Duration = Duration::from_secs(14 * 24 * 3600);

/// The youngest a temporary file can be and still be removed, whatever `gc.pruneExpire` says
/// (`now` included): a write in progress has a temporary file seconds old, never an hour.
pub const MIN_TEMPORARY_AGE: Duration = Duration::from_secs(3600);

/// Returns the instant before which a temporary file is stale: `gc.pruneExpire` as git reads
/// it (default two weeks ago), but at least [`MIN_TEMPORARY_AGE`] ago; `None` when it is
/// `never`, or when git does not accept its value (then `git gc` would not run either).
fn temporaries_cutoff(git_dir: &Path) -> Result<Option<SystemTime>> {
    let shown = "git config --type=expiry-date gc.pruneExpire";
    let out = git(git_dir)
        .args(["config", "--type=expiry-date", "--get", "gc.pruneExpire"])
        .output()
        .map_err(|e| spawn_error(shown, e))?;
    let now = SystemTime::now();
    let latest = now.checked_sub(MIN_TEMPORARY_AGE).unwrap_or(UNIX_EPOCH);
    let configured = match out.status.code() {
        Some(0) => {
            let Some(secs) = out
                .stdout
                .to_str()
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            else {
                return Ok(None);
            };
            if secs == 0 {
                return Ok(None); // never
            }
            UNIX_EPOCH
                .checked_add(Duration::from_secs(secs))
                .unwrap_or(now)
        }
        // Not set.
        Some(1) => now.checked_sub(DEFAULT_PRUNE_EXPIRE).unwrap_or(UNIX_EPOCH),
        _ => return Ok(None),
    };
    Ok(Some(configured.min(latest)))
}

/// Removes the temporary files that a killed writer left behind and that were last modified
/// before `cutoff`, as `git prune` does for its own, and returns how many it removed:
///
/// - in `objects_dir` and its fan-out directories, `tmp_*` (a loose object being written by
///   this crate, `tmp_obj_*`, or by git);
/// - in `objects_dir/pack`, `tmp_*` (git's packs and indexes being written) and `.tmp`
///   followed by six letters or digits (a pack or index of a multi-issue write);
/// - in `cache_dir` (`<common dir>/git-lease`), `.list-cache*.tmp-*` (a list cache being
///   written, [`crate::cache`]).
///
/// Only regular files are removed, never a directory, a link or anything else; a file that
/// cannot be examined or removed is left alone.
pub fn remove_stale_temporaries(objects_dir: &Path, cache_dir: &Path, cutoff: SystemTime) -> u64 {
    let git_tmp = |name: &str| name.starts_with("tmp_");
    let pack_tmp = |name: &str| {
        git_tmp(name)
            || name.strip_prefix(".tmp").is_some_and(|rest| {
                rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            })
    };
    let cache_tmp = |name: &str| name.starts_with(".list-cache") && name.contains(".tmp-");
    let mut removed = remove_old_files(objects_dir, cutoff, &git_tmp);
    removed += remove_old_files(&objects_dir.join("pack"), cutoff, &pack_tmp);
    for fan_out in 0..=255u8 {
        removed += remove_old_files(
            &objects_dir.join(format!("{fan_out:02x}")),
            cutoff,
            &git_tmp,
        );
    }
    removed + remove_old_files(cache_dir, cutoff, &cache_tmp)
}

/// Removes the regular files directly in `dir` whose names `matches` accepts and that were
/// last modified before `cutoff`; returns how many.
fn remove_old_files(dir: &Path, cutoff: SystemTime, matches: &dyn Fn(&str) -> bool) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(matches) {
            continue;
        }
        let path = entry.path();
        // Not followed: a link is left alone, and so is anything but a regular file.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_file() || !meta.modified().is_ok_and(|m| m < cutoff) {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

struct Counts {
    loose: u64,
    packs: u64,
}

fn count_objects(git_dir: &Path) -> Result<Counts> {
    let shown = "git count-objects -v";
    let out = git(git_dir)
        .args(["count-objects", "-v"])
        .output()
        .map_err(|e| spawn_error(shown, e))?;
    if !out.status.success() {
        return Err(Error::Git {
            context: shown.into(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let field = |name: &str| -> u64 {
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(format!("{name}: ").as_bytes()))
            .and_then(|v| v.to_str().ok()?.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(Counts {
        loose: field("count"),
        packs: field("packs"),
    })
}

/// Counts the files below `dir`, recursively (0 if it does not exist).
fn count_files(dir: &Path) -> u64 {
    let mut n = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(_) => n += 1,
                Err(_) => {}
            }
        }
    }
    n
}

fn git(git_dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(git_dir);
    cmd.env_remove("GIT_DIR").stdin(Stdio::null());
    cmd
}

fn spawn_error(command: &str, e: std::io::Error) -> Error {
    Error::Io {
        context: format!("cannot run {command}"),
        source: e,
    }
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
