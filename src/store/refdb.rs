//! The ref backend of repositories whose refs gix cannot read or write: reftable
//! (`extensions.refStorage=reftable`, git 3.0's default), read in-process and written by git.
//!
//! [`crate::store::Store`] chooses its ref database once, from `extensions.refStorage`: the
//! files backend is read and written in-process (gix, and git's lock files), reftable here
//! (any other value is refused). Objects are read and written in-process either way.
//!
//! - A read of one ref, of several, or of every ref under a prefix is the reftable reader's
//!   ([`super::reftable`]): one snapshot of the stack a read, no git process; `HEAD` from the
//!   work tree's own stack (its git dir's, the shared one outside a linked work tree).
//! - A write is one `git update-ref -z --stdin` transaction (`start`, `update` with the old
//!   value or `create` for a ref that must not exist, `prepare`, `commit`): git writes the
//!   table, the reflogs, runs the `reference-transaction` hook and compacts the stack. No
//!   table is written, compacted or deleted here.
//! - A failure is read from git's diagnostics (in the C locale) and sorted into what the
//!   files backend reports: a lost race ([`Failure::Lost`], which the callers decide again
//!   on), a ref clash, a lock held past the lock timeout, or an error.
//! - Durability: when the store's choice (`lease.fsync`, `core.fsync`) covers references,
//!   git is told `core.fsync=reference` and the `reftable/` directory is fsynced after it
//!   answered (docs/DURABILITY.md).
//! - A write is preceded, once per process, by the check that git has reftable (2.45,
//!   [`crate::git::version`]), made before any object of it is written
//!   (`Store::ensure_writable`); an older git is refused as [`Error::GitTooOld`], as is one
//!   whose diagnostics say it does not know the `refstorage` extension.
//! - `GIT_NAMESPACE` is applied here, as gix applies it for the files backend: the tables and
//!   git's ref commands know nothing of it, so names are prefixed with
//!   `refs/namespaces/<ns>/` on the way in and stripped on the way out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use gix::ObjectId;

use super::reftable::Stack;
use crate::error::{Error, Result};
use crate::git::version::Need;

/// What a ref points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A direct ref.
    Object(ObjectId),
    /// A symbolic ref, to the named ref.
    Symbolic(String),
}

/// What a ref must be at for an update to go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// It must not exist.
    Absent,
    /// It must point at this commit.
    At(ObjectId),
    /// Anything (an unconditional update).
    Any,
}

impl From<Option<ObjectId>> for Expect {
    fn from(expected: Option<ObjectId>) -> Expect {
        expected.map_or(Expect::Absent, Expect::At)
    }
}

/// Why a transaction did not go through.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A ref was not at its expected value (or existed where it must not): someone moved it
    /// first. Nothing was written.
    Lost,
    /// The ref `name` cannot be created because `existing` is in the way (a file/directory
    /// clash of ref names, as git refuses it in every backend).
    Clash {
        /// The ref being created (full name, outside any namespace).
        name: String,
        /// The ref in its way.
        existing: String,
    },
    /// git's lock stayed held by another process past the lock timeout.
    Locked(PathBuf),
    /// Anything else, as git said it.
    Git(Error),
}

/// The ref database of one repository, through git's commands.
#[derive(Clone, Debug)]
pub(crate) struct GitRefs {
    git_dir: PathBuf,
    common_dir: PathBuf,
    /// `refs/namespaces/<ns>/` under `GIT_NAMESPACE`, as gix read it.
    namespace: Option<String>,
    lock_wait: Duration,
    /// The repository's object hash, which its tables' ids must be of.
    hash: gix::hash::Kind,
    /// The git these commands need: reftable's, unless the repository keeps its refs in files
    /// ([`GitRefs::for_files`]).
    needs: &'static [Need],
}

impl GitRefs {
    /// The refs of the repository at `git_dir` (whose common dir is `common_dir`), under
    /// `namespace` if one is set, waiting `lock_wait` for git's lock before giving up.
    pub(crate) fn new(
        git_dir: &Path,
        common_dir: &Path,
        namespace: Option<String>,
        lock_wait: Duration,
        hash: gix::hash::Kind,
    ) -> GitRefs {
        GitRefs {
            git_dir: git_dir.to_owned(),
            common_dir: common_dir.to_owned(),
            namespace,
            lock_wait,
            hash,
            needs: &[Need::Reftable],
        }
    }

    /// The same commands for a repository whose refs are files: [`GitRefs::update`] only (the
    /// archive's transactions, which delete lease refs), with no need of reftable's git.
    pub(crate) fn for_files(mut self) -> GitRefs {
        self.needs = &[];
        self
    }

    /// git, for this repository, in the C locale (its diagnostics are read), with no
    /// `GIT_DIR` or `GIT_NAMESPACE` of the caller's; objects come from wherever the
    /// environment says (a hook's quarantine included), each as it is (no replacements).
    /// A git older than reftable (2.45) is refused here, before it runs
    /// ([`crate::git::version::require`]).
    fn git(&self) -> Result<Command> {
        crate::git::version::require(self.needs)?;
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(&self.git_dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_NAMESPACE")
            .env("LC_ALL", "C")
            .env(crate::git::STARTED_BY, std::process::id().to_string())
            .stdin(Stdio::null());
        crate::git::no_replacements(&mut cmd);
        Ok(cmd)
    }

    /// Returns the full name of `name` in the repository (inside the namespace).
    fn full(&self, name: &str) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}{name}"),
            None => name.to_owned(),
        }
    }

    /// Returns `full` as the store names it (outside the namespace), or `None` for a ref
    /// outside the namespace.
    fn short<'a>(&self, full: &'a str) -> Option<&'a str> {
        match &self.namespace {
            Some(ns) => full.strip_prefix(ns.as_str()),
            None => Some(full),
        }
    }

    /// The lock git takes for every ref update of a reftable repository.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.common_dir.join("reftable").join("tables.list.lock")
    }

    /// The file every ref update renames into place: its stat tells whether any ref moved.
    pub(crate) fn tables_list_path(&self) -> PathBuf {
        self.common_dir.join("reftable").join("tables.list")
    }

    /// The stack of tables the shared refs are in (the lease refs among them), as it is now.
    fn shared(&self) -> Result<Stack> {
        Stack::open(&self.common_dir.join("reftable"), self.hash)
    }

    /// Returns every ref under `prefix` (which ends with `/`) as `(name, target)` sorted by
    /// name, read in-process ([`super::reftable`]).
    pub(crate) fn list(&self, prefix: &str) -> Result<Vec<(String, Target)>> {
        let mut refs = Vec::new();
        for (name, target) in self.shared()?.under(&self.full(prefix))? {
            let Some(name) = self.short(&name) else {
                continue;
            };
            let target = match target {
                Target::Symbolic(to) => Target::Symbolic(self.short(&to).unwrap_or(&to).to_owned()),
                object => object,
            };
            refs.push((name.to_owned(), target));
        }
        Ok(refs)
    }

    /// Returns, from one snapshot of the stack, what a later call is given as `seen` (its
    /// tables' names, oldest first, and its newest update index), and the direct refs under
    /// `prefix` (which ends with `/`; no ref namespace) that may have moved since a look that
    /// saw `seen`: `Ok` with each such ref and its tip, read from the tables listed after the
    /// longest run that both lists begin with (a table never changes once written, and a
    /// compaction, merged into a write or not, replaces a run of the newest tables, so only
    /// those can hold a newer record); `Err` with every ref under `prefix`, sorted by name,
    /// when no table is shared, when the stack went back to an older update index (a list
    /// restored over newer ones), or when one of the newer records deletes a ref or makes
    /// it symbolic (which a list of tips cannot say).
    #[allow(clippy::type_complexity)]
    pub(crate) fn moved_since(
        &self,
        seen: &(Vec<String>, u64),
        prefix: &str,
    ) -> Result<(
        (Vec<String>, u64),
        std::result::Result<Vec<(String, ObjectId)>, Vec<(String, ObjectId)>>,
    )> {
        let stack = self.shared()?;
        let now = (stack.names().to_vec(), stack.newest_update());
        let shared = now
            .0
            .iter()
            .zip(&seen.0)
            .take_while(|(a, b)| a == b)
            .count();
        if shared > 0 && now.1 >= seen.1 {
            let tips: Option<Vec<(String, ObjectId)>> = stack
                .records_under(shared, prefix)?
                .into_iter()
                .map(|(name, record)| match record {
                    Some(Target::Object(id)) => Some((name, id)),
                    Some(Target::Symbolic(_)) | None => None,
                })
                .collect();
            if let Some(moved) = tips {
                return Ok((now, Ok(moved)));
            }
        }
        let all = stack
            .under(prefix)?
            .into_iter()
            .filter_map(|(name, target)| match target {
                Target::Object(id) => Some((name, id)),
                Target::Symbolic(_) => None,
            })
            .collect();
        Ok((now, Err(all)))
    }

    /// Returns the names of the refs among `names` that exist, from one snapshot of the stack.
    pub(crate) fn existing(&self, names: &[String]) -> Result<Vec<String>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let stack = self.shared()?;
        let mut found = Vec::new();
        for name in names {
            if stack.get(&self.full(name))?.is_some() {
                found.push(name.clone());
            }
        }
        Ok(found)
    }

    /// Returns what the ref `name` points at, if it exists.
    pub(crate) fn read(&self, name: &str) -> Result<Option<Target>> {
        Ok(self
            .shared()?
            .get(&self.full(name))?
            .map(|target| match target {
                Target::Symbolic(to) => Target::Symbolic(self.short(&to).unwrap_or(&to).to_owned()),
                object => object,
            }))
    }

    /// Returns the ref `HEAD` names (`refs/heads/…`), or `None` when it is detached (or
    /// missing). `HEAD` is the work tree's own: in its git dir's stack, which in a linked
    /// work tree is not the shared one.
    pub(crate) fn head(&self) -> Result<Option<String>> {
        let stack = Stack::open(&self.git_dir.join("reftable"), self.hash)?;
        Ok(match stack.get("HEAD")? {
            Some(Target::Symbolic(to)) => Some(to),
            Some(Target::Object(_)) | None => None,
        })
    }

    /// Applies `edits` (`(name, new, expected)`) in one `git update-ref -z --stdin`
    /// transaction, all or none, logging `message` where git writes reflogs, as git-lease (the
    /// committer of every ledger commit). With `fsync_refs` git is told
    /// `core.fsync=reference` and the `reftable/` directory is fsynced after it answered;
    /// without, `core.fsync=none`.
    pub(crate) fn update(
        &self,
        edits: &[(&str, ObjectId, Expect)],
        message: &str,
        fsync_refs: bool,
    ) -> std::result::Result<(), Failure> {
        let mut input = b"start\0".to_vec();
        for (name, new, expect) in edits {
            let full = self.full(name);
            match expect {
                Expect::Absent => input.extend(format!("create {full}\0{new}\0").as_bytes()),
                Expect::At(old) if new.is_null() => {
                    input.extend(format!("delete {full}\0{old}\0").as_bytes())
                }
                Expect::At(old) => {
                    input.extend(format!("update {full}\0{new}\0{old}\0").as_bytes())
                }
                Expect::Any => input.extend(format!("update {full}\0{new}\0\0").as_bytes()),
            }
        }
        input.extend(b"prepare\0commit\0");
        let wait_ms = self.lock_wait.as_millis().to_string();
        let mut cmd = self.git().map_err(Failure::Git)?;
        cmd.arg("-c")
            .arg(format!("reftable.lockTimeout={wait_ms}"))
            .arg("-c")
            .arg(format!("core.filesRefLockTimeout={wait_ms}"))
            .arg("-c")
            .arg(if fsync_refs {
                "core.fsync=reference"
            } else {
                "core.fsync=none"
            })
            .args(["update-ref", "-z", "--stdin", "-m", message])
            .env("GIT_COMMITTER_NAME", "git-lease")
            .env("GIT_COMMITTER_EMAIL", "git-lease@localhost")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let shown = "git update-ref --stdin";
        let mut child = cmd
            .spawn()
            .map_err(|e| Failure::Git(spawn_error(shown, e)))?;
        let fed = child
            .stdin
            .take()
            .map(|mut pipe| pipe.write_all(&input))
            .unwrap_or(Ok(()));
        let out = child
            .wait_with_output()
            .map_err(|e| Failure::Git(spawn_error(shown, e)))?;
        if out.status.success() {
            if fsync_refs {
                self.sync_table_dir().map_err(Failure::Git)?;
            }
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if let Err(e) = fed {
            // git ended before it read everything: what it said is the reason, if anything.
            if stderr.trim().is_empty() {
                return Err(Failure::Git(spawn_error(shown, e)));
            }
        }
        Err(self.classify(&stderr))
    }

    /// Sorts git's diagnostics of a failed transaction into a [`Failure`].
    fn classify(&self, stderr: &str) -> Failure {
        let said = stderr.trim();
        // A ref elsewhere than expected, one that exists where it must not, or one gone that
        // was expected; and reftable's own word for a stack another writer changed meanwhile
        // (gits before 2.47 did not reload it under the lock).
        const LOST: [&str; 4] = [
            "but expected",
            "reference already exists",
            "unable to resolve reference",
            "data is outdated",
        ];
        if LOST.iter().any(|m| said.contains(m)) {
            return Failure::Lost;
        }
        // `'<existing>' exists; cannot create '<name>'`
        if let Some((existing, name)) =
            said.split_once("' exists; cannot create '")
                .and_then(|(before, after)| {
                    let existing = before.rsplit_once('\'')?.1;
                    let name = after.split_once('\'')?.0;
                    Some((existing, name))
                })
        {
            return Failure::Clash {
                name: self.short(name).unwrap_or(name).to_owned(),
                existing: self.short(existing).unwrap_or(existing).to_owned(),
            };
        }
        // `cannot process '<a>' and '<b>' at the same time`: two edits of one transaction.
        if let Some((a, b)) = said
            .split_once("cannot process '")
            .and_then(|(_, rest)| rest.split_once("' and '"))
            .and_then(|(a, rest)| Some((a, rest.split_once("' at the same time")?.0)))
        {
            return Failure::Clash {
                name: self.short(b).unwrap_or(b).to_owned(),
                existing: self.short(a).unwrap_or(a).to_owned(),
            };
        }
        if said.contains("cannot lock references") {
            return Failure::Locked(self.lock_path());
        }
        // The files backend's way of saying a lock is held (for a backend reached this way
        // that keeps lock files beside the refs).
        if said.contains("Unable to create '") && said.contains(".lock': File exists") {
            let lock = said
                .split_once("Unable to create '")
                .and_then(|(_, rest)| rest.split_once('\''))
                .map_or_else(|| self.lock_path(), |(path, _)| PathBuf::from(path));
            return Failure::Locked(lock);
        }
        Failure::Git(failed("git update-ref --stdin".into(), said))
    }

    /// Fsyncs the `reftable/` directory: git fsyncs the new table and `tables.list` before
    /// renaming them into place, but not the directory that records the renames.
    fn sync_table_dir(&self) -> Result<()> {
        let dir = self.common_dir.join("reftable");
        if !dir.is_dir() {
            return Ok(());
        }
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::Io {
                context: format!("cannot fsync the directory {}", dir.display()),
                source: e,
            })
    }
}

/// The error of a git command that failed, saying `stderr`: [`Error::GitTooOld`] when git
/// does not know reftable (a version that could not be read let it run), else what it said.
fn failed(context: String, stderr: &str) -> Error {
    if crate::git::version::lacks_reftable(stderr) {
        return crate::git::version::lacking(Need::Reftable);
    }
    Error::Git {
        context,
        message: stderr.trim().to_owned(),
    }
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

    fn refs(namespace: Option<&str>) -> GitRefs {
        GitRefs::new(
            Path::new("/r/.git"),
            Path::new("/r/.git"),
            namespace.map(str::to_owned),
            Duration::from_secs(3),
            gix::hash::Kind::Sha1,
        )
    }

    fn kind(f: &Failure) -> String {
        match f {
            Failure::Lost => "lost".into(),
            Failure::Clash { name, existing } => format!("clash {name} {existing}"),
            Failure::Locked(p) => format!("locked {}", p.display()),
            Failure::Git(e) => format!("git {e}"),
        }
    }

    /// git 2.47's words, as `update-ref --stdin` prints them in the C locale.
    #[test]
    fn git_diagnostics_are_sorted() {
        let r = refs(None);
        let x = "1234567890123456789012345678901234567890";
        for (said, want) in [
            (
                "fatal: prepare: cannot lock ref 'refs/leases/x': reference already exists",
                "lost".to_owned(),
            ),
            (
                &format!("fatal: prepare: cannot lock ref 'refs/leases/x': is at {x} but expected {x}"),
                "lost".into(),
            ),
            (
                "fatal: prepare: cannot lock ref 'refs/leases/y': unable to resolve reference 'refs/leases/y'",
                "lost".into(),
            ),
            (
                "fatal: prepare: 'refs/leases/x' exists; cannot create 'refs/leases/x/c'",
                "clash refs/leases/x/c refs/leases/x".into(),
            ),
            (
                "fatal: prepare: cannot process 'refs/leases/m' and 'refs/leases/m/x' at the same time",
                "clash refs/leases/m/x refs/leases/m".into(),
            ),
            (
                "fatal: prepare: cannot lock references",
                "locked /r/.git/reftable/tables.list.lock".into(),
            ),
            (
                "fatal: prepare: trying to write ref 'refs/leases/n' with nonexistent object 12",
                "git git update-ref --stdin: fatal: prepare: trying to write ref 'refs/leases/n' with nonexistent object 12".into(),
            ),
        ] {
            assert_eq!(kind(&r.classify(said)), want, "{said}");
        }
    }

    #[test]
    fn a_namespace_is_applied_and_stripped() {
        let r = refs(Some("refs/namespaces/team/"));
        assert_eq!(
            r.full("refs/leases/x"),
            "refs/namespaces/team/refs/leases/x"
        );
        assert_eq!(
            r.short("refs/namespaces/team/refs/leases/x"),
            Some("refs/leases/x")
        );
        assert_eq!(r.short("refs/leases/x"), None);
        assert_eq!(
            kind(&r.classify(
                "fatal: prepare: 'refs/namespaces/team/refs/leases/a' exists; cannot create 'refs/namespaces/team/refs/leases/a/b'"
            )),
            "clash refs/leases/a/b refs/leases/a"
        );
    }
}
