//! Moving refs, through the one seam ([`RefDb`]): the compare-and-swap of lease refs, alone or
//! in one transaction, and the bookkeeping refs beside them.

use std::path::PathBuf;

use gix::ObjectId;

use super::{Expect, Failure, RefDb, Store, Swap};
use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};

impl Store {
    /// Moves `refs/leases/<issue>` from `expected` (absent when `None`) to `new`, atomically.
    ///
    /// Returns [`Swap::Lost`] when the ref was not at `expected`. A lock held by another
    /// process is waited on for the lock timeout, then reported as [`Error::Locked`].
    pub(crate) fn swap(
        &self,
        issue: &IssueId,
        new: ObjectId,
        expected: Option<ObjectId>,
        log_message: &str,
    ) -> Result<Swap> {
        let edit = [(issue.clone(), new, expected)];
        if let RefDb::Git(git) = &self.refdb {
            let name = issue.ref_name();
            return match git.update(
                &[(&name, new, expected.into())],
                log_message,
                self.fsync.refs,
            ) {
                Ok(()) => {
                    self.after_swap(&edit)?;
                    Ok(Swap::Done)
                }
                // As with the files backend: a ref already at the new commit is a done swap.
                Err(Failure::Lost) if self.tip(issue)? == Some(new) => {
                    self.after_swap(&edit)?;
                    Ok(Swap::Done)
                }
                Err(failure) => self.failed_git_swap(failure, &name),
            };
        }
        self.files_swap(issue, new, expected, log_message)
    }

    /// Moves several lease refs in one transaction: all are locked and checked first, and
    /// either all move or none does.
    pub(crate) fn swap_many(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
        log_message: &str,
    ) -> Result<Swap> {
        if let RefDb::Git(git) = &self.refdb {
            let names: Vec<String> = edits.iter().map(|(i, _, _)| i.ref_name()).collect();
            let git_edits: Vec<(&str, ObjectId, Expect)> = names
                .iter()
                .zip(edits)
                .map(|(name, (_, new, expected))| (name.as_str(), *new, (*expected).into()))
                .collect();
            return match git.update(&git_edits, log_message, self.fsync.refs) {
                Ok(()) => {
                    self.after_swap(edits)?;
                    Ok(Swap::Done)
                }
                Err(failure) => self.failed_git_swap(failure, &names[0]),
            };
        }
        self.files_swap_many(edits, log_message)
    }

    /// What follows a successful swap: see [`Store::after_ref_update`].
    pub(super) fn after_swap(&self, edits: &[(IssueId, ObjectId, Option<ObjectId>)]) -> Result<()> {
        let names: Vec<String> = edits.iter().map(|(i, _, _)| i.ref_name()).collect();
        self.after_ref_update(names.iter().map(String::as_str))
    }

    /// What follows every ref update: the refs `names` made durable when configured, and the
    /// automatic packing check.
    ///
    /// With a ref database other than files, git made the refs durable itself (see
    /// [`refdb`]).
    pub(super) fn after_ref_update<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        if let RefDb::Files = self.refdb {
            let names: Vec<&str> = names.into_iter().collect();
            self.share_refs(&names)?;
            self.fsync.sync_refs(self.repo.common_dir(), names)?;
        }
        self.auto_gc
            .after_write(self.repo.git_dir(), self.repo.objects.store_ref().path());
        Ok(())
    }

    /// Turns the failure of a transaction through git into its answer, as
    /// [`Store::failed_swap`] does for the files backend: a lost race, a lock held too long, a
    /// ref clash (when creating a lease ref), or a git error.
    pub(super) fn failed_git_swap(&self, failure: Failure, first: &str) -> Result<Swap> {
        match failure {
            Failure::Lost => Ok(Swap::Lost),
            Failure::Clash { name, existing } => Err(Error::RefClash {
                issue: name.strip_prefix(REF_PREFIX).unwrap_or(&name).to_owned(),
                existing,
            }),
            Failure::Locked(path) => Err(Error::Locked {
                path,
                waited_ms: self.lock_wait.as_millis(),
            }),
            Failure::Git(Error::Git { context, message }) => Err(Error::Git {
                context: format!("cannot update {first} ({context})"),
                message,
            }),
            Failure::Git(other) => Err(other),
        }
    }

    /// Returns the path of the lock file git uses for `refs/leases/<issue>` (for reftable,
    /// the one lock of every ref update, `reftable/tables.list.lock`).
    pub fn lock_path(&self, issue: &IssueId) -> PathBuf {
        if let RefDb::Git(git) = &self.refdb {
            return git.lock_path();
        }
        self.repo
            .common_dir()
            .join(format!("{}.lock", issue.ref_name()))
    }

    /// Moves each bookkeeping ref of `moves` (`(name, new, expected)`, `None`: absent) to its
    /// new value if it is at the expected one, as compare-and-swaps: in one transaction, or
    /// one by one if that fails; for bookkeeping refs (remote-tracking refs, the refs `sync
    /// --adopt` keeps a replaced ledger under), never ledger refs.
    ///
    /// Returns the first error when a ref was elsewhere or its lock was held.
    pub(crate) fn move_refs(
        &self,
        moves: &[(String, ObjectId, Option<ObjectId>)],
        log_message: &str,
    ) -> Result<()> {
        if let RefDb::Git(git) = &self.refdb {
            let edits: Vec<(&str, ObjectId, Expect)> = moves
                .iter()
                .map(|(name, new, expected)| (name.as_str(), *new, (*expected).into()))
                .collect();
            let names = || moves.iter().map(|(name, _, _)| name.as_str());
            if moves.len() > 1 && git.update(&edits, log_message, self.fsync.refs).is_ok() {
                return self.after_ref_update(names());
            }
            let mut first_error = None;
            for edit in edits {
                if let Err(failure) = git.update(&[edit], log_message, self.fsync.refs) {
                    first_error.get_or_insert(self.bookkeeping_failure(failure, edit.0));
                }
            }
            self.after_ref_update(names())?;
            return first_error.map_or(Ok(()), Err);
        }
        self.files_move_refs(moves, log_message)
    }

    /// Sets a ref to `new` unconditionally, as a bookkeeping ref: the local copy of a lease
    /// ref a remote just accepted ([`crate::Remote`]), never a compare-and-swap of a ledger.
    pub(crate) fn set_ref(&self, name: &str, new: ObjectId, log_message: &str) -> Result<()> {
        if let RefDb::Git(git) = &self.refdb {
            git.update(&[(name, new, Expect::Any)], log_message, self.fsync.refs)
                .map_err(|failure| self.bookkeeping_failure(failure, name))?;
            return self.after_ref_update([name]);
        }
        self.files_set_ref(name, new, log_message)
    }

    /// Turns the failure of a bookkeeping update through git into an error, as
    /// [`Store::commit_bookkeeping`] reports them: a lock held too long, else a git error.
    pub(super) fn bookkeeping_failure(&self, failure: Failure, name: &str) -> Error {
        match failure {
            Failure::Locked(path) => Error::Locked {
                path,
                waited_ms: self.lock_wait.as_millis(),
            },
            Failure::Lost => Error::Git {
                context: format!("cannot update {name}"),
                message: "it was not at the expected value".into(),
            },
            Failure::Clash { existing, .. } => Error::Git {
                context: format!("cannot update {name}"),
                message: format!("the ref {existing} is in the way"),
            },
            Failure::Git(Error::Git { context, message }) => Error::Git {
                context: format!("cannot update {name} ({context})"),
                message,
            },
            Failure::Git(other) => other,
        }
    }
}
