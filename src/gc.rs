//! Packing: `git lease gc` (the automatic trigger in the write path is [`crate::autogc`]).
//!
//! # Why it exists
//!
//! Every event written on its own writes three loose objects (blob, tree, commit) and, with
//! the files backend, a loose ref. Loose objects make reading a ledger several times slower
//! than packed ones and loose refs make listing them slower; gix can neither repack nor
//! (usefully) pack refs, so this module runs git for that:
//!
//! - [`gc`] (`git lease gc`) packs refs (`git pack-refs --all --prune`) and loose objects
//!   (`git pack-objects` given their ids, then `git prune-packed`: an incremental pack, made
//!   without a walk over every ledger; nothing is deleted that is not also in a pack), then
//!   writes git's commit-graph (`git commit-graph write --reachable`, unless
//!   `core.commitGraph` or `gc.writeCommitGraph` is false), or with `full` runs
//!   `git gc --quiet` (which also consolidates packs, prunes unreachable objects past git's
//!   expiry, and writes the commit-graph). In a reftable repository `git pack-refs`
//!   compacts the tables into one: git alone writes, compacts and deletes tables. git 2.47
//!   gives that up when another writer changed the tables meanwhile, so there a failed step
//!   is run again for up to `REFTABLE_PACK_BUDGET`. In either format, a step that
//!   stopped on a ref a fold deleted under git's walk is run again too
//!   (`ref_moved_under_walk`). It then removes the temporary files that killed writers left
//!   behind, once they are older than `gc.pruneExpire` (two weeks by default) and at least
//!   an hour old ([`remove_stale_temporaries`]).
//! - The write path starts `git gc --auto` by itself past git's thresholds:
//!   [`crate::autogc`].

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::git::{command as git, spawn_error};
use crate::store::Store;

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

/// Whether git's own `git gc` would write a commit-graph here: unless `core.commitGraph` or
/// `gc.writeCommitGraph` is false.
fn writes_commit_graph(store: &Store) -> bool {
    let config = store.repo().config_snapshot();
    ["core.commitGraph", "gc.writeCommitGraph"]
        .iter()
        .all(|key| config.boolean(*key) != Some(false))
}

/// One step of [`gc`]: a git command, or the loose objects packed without a walk.
enum Step {
    Git(Vec<&'static str>),
    LooseObjects,
}

/// Packs refs and objects of `store`'s repository with git (see the module documentation).
pub fn gc(store: &Store, full: bool) -> Result<GcReport> {
    crate::git::version::require(store.git_needs())?;
    let git_dir = store.git_dir().to_owned();
    let objects_dir = store.repo().objects.store_ref().path().to_owned();
    let leases = store.repo().common_dir().join("refs").join("leases");
    let before = count_objects(&git_dir)?;
    let refs_before = count_files(&leases);
    let mut steps = if full {
        vec![Step::Git(vec!["gc", "--quiet"])]
    } else {
        vec![
            Step::Git(vec!["pack-refs", "--all", "--prune"]),
            Step::LooseObjects,
        ]
    };
    // The commit-graph, as `git gc` writes it: a listing without its cache reads each tip's
    // tree from it instead of inflating the commit ([`Store::entries`]).
    if !full && writes_commit_graph(store) {
        steps.push(Step::Git(vec![
            "commit-graph",
            "write",
            "--reachable",
            "--no-progress",
        ]));
    }
    // git 2.47 gives up compacting a reftable stack that another writer changed or locked
    // meanwhile (`git pack-refs` exits 244, an outdated stack, or says "data is locked"; `git
    // gc` then fails to run pack-refs): nothing is lost, and it is tried again.
    let budget = if store.ref_format() == "files" {
        Duration::ZERO
    } else {
        REFTABLE_PACK_BUDGET
    };
    let cutoff = temporaries_cutoff(&git_dir)?;
    let mut commands = Vec::new();
    for step in steps {
        match step {
            Step::Git(args) => commands.push(run_step(&git_dir, &args, budget)?),
            Step::LooseObjects => commands.extend(pack_loose_objects(&git_dir, &objects_dir)?),
        }
    }
    let temporary_files_removed = cutoff.map_or(0, |cutoff| {
        remove_stale_temporaries(
            &objects_dir,
            &store.repo().common_dir().join("git-lease"),
            cutoff,
        )
    });
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

/// Runs `git <args>` in `git_dir`, again while it fails and `budget` has not run out since
/// the first run (at least [`REF_MOVED_BUDGET`] when a ref moved under its walk:
/// [`ref_moved_under_walk`]); returns the command as shown.
fn run_step(git_dir: &Path, args: &[&str], budget: Duration) -> Result<String> {
    let shown = format!("git {}", args.join(" "));
    let started = std::time::Instant::now();
    let mut attempt: u32 = 0;
    loop {
        let out = git(git_dir)
            .args(args)
            .output()
            .map_err(|e| spawn_error(&shown, e))?;
        if out.status.success() {
            return Ok(shown);
        }
        let said = String::from_utf8_lossy(&out.stderr);
        let limit = if ref_moved_under_walk(&said) {
            budget.max(REF_MOVED_BUDGET)
        } else {
            budget
        };
        if started.elapsed() >= limit {
            return Err(failed(shown, &out));
        }
        // A moment that doubles from 1 ms to 32 ms: concurrent writers commit in milliseconds,
        // and a compaction needs only the moment between two of them.
        std::thread::sleep(Duration::from_millis(1 << attempt.min(5)));
        attempt += 1;
    }
}

/// The error of a git command that ended with `out`: what it said, else its exit status.
fn failed(shown: String, out: &std::process::Output) -> Error {
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.trim();
    Error::Git {
        context: shown,
        message: if said.is_empty() {
            format!("exited with {}", out.status)
        } else {
            said.to_owned()
        },
    }
}

/// Packs every loose object of `objects_dir` into one new pack (`git pack-objects`, given
/// their ids, deltas found among them), then removes the loose copies now packed (`git
/// prune-packed`); returns the commands run, none when nothing is loose.
///
/// Unlike `git repack -d`, it walks no history: git's walk from every ref grows badly with
/// many unrelated tips whose times are unordered, as ledgers' are (docs/FORMAT.md). An
/// unreachable loose object is packed too, as `git gc --auto` would; `git gc` prunes it.
fn pack_loose_objects(git_dir: &Path, objects_dir: &Path) -> Result<Vec<String>> {
    let ids = loose_object_ids(objects_dir);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let base = objects_dir.join("pack").join("pack");
    let shown = format!("git pack-objects -q --delta-base-offset {}", base.display());
    let mut child = git(git_dir)
        .args(["pack-objects", "-q", "--delta-base-offset"])
        .arg(&base)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(&shown, e))?;
    let fed = child.stdin.take().map_or(Ok(()), |mut stdin| {
        std::io::Write::write_all(&mut stdin, ids.join("\n").as_bytes())
            .and_then(|()| std::io::Write::write_all(&mut stdin, b"\n"))
    });
    let out = child
        .wait_with_output()
        .map_err(|e| spawn_error(&shown, e))?;
    if !out.status.success() {
        return Err(failed(shown, &out));
    }
    fed.map_err(|e| spawn_error(&shown, e))?;
    Ok(vec![
        shown,
        run_step(git_dir, &["prune-packed", "-q"], Duration::ZERO)?,
    ])
}

/// Returns the ids of the loose objects in `objects_dir`, from the names of its fan-out
/// directories and their files (`xx/` and the rest of the id in hexadecimal), unread.
fn loose_object_ids(objects_dir: &Path) -> Vec<String> {
    let is_hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    let mut ids = Vec::new();
    for fan_out in 0..=255u8 {
        let prefix = format!("{fan_out:02x}");
        let Ok(entries) = std::fs::read_dir(objects_dir.join(&prefix)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str() else {
                continue;
            };
            if matches!(rest.len(), 38 | 62) && is_hex(rest) {
                ids.push(format!("{prefix}{rest}"));
            }
        }
    }
    ids
}

/// How long `git lease gc` runs again a step that failed in a reftable repository, where git
/// 2.47 gives up compacting the tables whenever another writer added one between its reading
/// of the stack and its lock: under writers that never pause, most attempts fail, and a
/// count of attempts ran out (ten did, on a loaded machine, in CI).
const REFTABLE_PACK_BUDGET: Duration = Duration::from_secs(30);

/// How long `git lease gc` runs again a step that stopped on a ref moved under its walk
/// ([`ref_moved_under_walk`]), in either ref format.
const REF_MOVED_BUDGET: Duration = Duration::from_secs(5);

/// Whether git stopped because a ref it had listed was gone, or elsewhere, when it came to
/// read it: `git repack` walks from every ref, and a fold (`git lease archive`) that deletes
/// the refs of the ledgers it archived meanwhile makes it die with `fatal: bad object
/// refs/leases/…`. Nothing was changed (a failed repack leaves no pack), and the next walk
/// lists the refs as they are.
fn ref_moved_under_walk(stderr: &str) -> bool {
    stderr.contains("fatal: bad object refs/")
        || stderr.contains("fatal: unable to parse object: refs/")
}

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
            let Some(secs) = std::str::from_utf8(&out.stdout)
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
/// - in `objects_dir`, `tmp_*` (a loose object being written by git) and `.tmp` followed by
///   six letters or digits (one being written by gix, as this crate writes them), and `tmp_*`
///   in its fan-out directories;
/// - in `objects_dir/pack`, `tmp_*` (git's packs and indexes being written) and `.tmp`
///   followed by six letters or digits (a pack or index written by an older git-lease);
/// - in `cache_dir` (`<common dir>/git-lease`), `.list-cache*.tmp-*` (a list cache being
///   written, [`crate::cache`]).
///
/// Only regular files are removed, never a directory, a link or anything else; a file that
/// cannot be examined or removed is left alone.
pub fn remove_stale_temporaries(objects_dir: &Path, cache_dir: &Path, cutoff: SystemTime) -> u64 {
    let git_tmp = |name: &str| name.starts_with("tmp_");
    let gix_tmp = |name: &str| {
        git_tmp(name)
            || name.strip_prefix(".tmp").is_some_and(|rest| {
                rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            })
    };
    let cache_tmp = |name: &str| name.starts_with(".list-cache") && name.contains(".tmp-");
    let mut removed = remove_old_files(objects_dir, cutoff, &gix_tmp);
    removed += remove_old_files(&objects_dir.join("pack"), cutoff, &gix_tmp);
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
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: "))?.trim().parse().ok())
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
