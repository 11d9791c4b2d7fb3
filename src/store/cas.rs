//! The compare-and-swap of lease refs in a files repository: what a gix-ref transaction
//! leaves to its caller, and the one case where it does more than git.
//!
//! Several refs move in one gix-ref transaction ([`Store::files_swap_many`]): it locks each
//! ref, compares it with its expected value and renames the locks over them. Three checks
//! git's files backend makes under those locks are not in gix 0.90, so they are made here,
//! between `prepare` and `commit` ([`Store::check_under_locks`]):
//!
//! - gix reads `packed-refs` before it takes the refs' locks, and compares a ref that is not
//!   loose with that copy. `git pack-refs` may move a ref from its loose file into a new
//!   `packed-refs` in between, and a ref that must not exist would then be created over it.
//!   git reads `packed-refs` after the lock (`lock_raw_ref`); so does this, through
//!   [`Store::tip`], which reads the loose file and then `packed-refs` as it is on disk.
//! - A new lease ref must not clash with a packed one as file versus directory; gix only sees
//!   loose files in the way.
//! - The commit a ref will name must still be there, as `git update-ref` checks: a
//!   `git repack -a -d` after `git gc` drops a fresh commit that no ref reaches yet.
//!
//! One lease ref moves under its own lock alone ([`Store::swap_one`]), with the same checks,
//! as git's files backend moves it. A gix-ref transaction also takes `packed-refs.lock`
//! whenever that file exists, so while a packer holds it every claim queues behind it and
//! then holds it in turn: under claims, packing and folding together, that convoy kept
//! `packed-refs.lock` held for seconds and starved the fold
//! (`gc_race::packing_and_folding_under_claims_that_revive_never_issue_a_token_twice`).
//!
//! Upstream, gix-ref's `prepare` would read `packed-refs` once the loose locks are held, and
//! take `packed-refs.lock` only for edits that change `packed-refs`; [`Store::swap_one`] would
//! then be a transaction of one edit, and this module only what `git update-ref` adds.

use gix::ObjectId;

use super::{Store, Swap};
use crate::error::{Error, Result};
use crate::issue::IssueId;
use std::io::Write;

impl Store {
    /// Checks `edits` (issue, new commit, expected tip) while a prepared transaction holds
    /// their locks: `Some(Swap::Lost)` when a ref is not at its expected value or its new
    /// commit is gone (the caller drops the transaction and decides again), `None` to commit.
    ///
    /// Returns [`Error::RefClash`] when a ref to create clashes with a packed one.
    pub(super) fn check_under_locks(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
    ) -> Result<Option<Swap>> {
        for (issue, new, expected) in edits {
            if self.tip(issue)? != *expected {
                return Ok(Some(Swap::Lost));
            }
            if expected.is_none() {
                if let Some(existing) = self.clash(issue)? {
                    return Err(Error::RefClash {
                        issue: issue.to_string(),
                        existing,
                    });
                }
            }
            if !self.holds_object(*new) {
                return Ok(Some(Swap::Lost));
            }
        }
        Ok(None)
    }

    /// Moves `refs/leases/<issue>` from `expected` to `new` under the ref's own lock, as
    /// git's files backend does: lock, check ([`Store::check_under_locks`]), write the lock
    /// file, rename it over the ref. The outer error is the store's own; the inner one a
    /// failure to lock or rename, which [`Store::failed_swap`] turns into its answer.
    pub(super) fn swap_one(
        &self,
        issue: &IssueId,
        new: ObjectId,
        expected: Option<ObjectId>,
    ) -> Result<std::result::Result<Swap, gix::Error>> {
        let common = self.repo.common_dir();
        let path = common.join(issue.ref_name());
        let fail = gix::lock::acquire::Fail::AfterDurationWithBackoff(self.lock_wait);
        let boundary = Some(common.join("refs"));
        let shared = self.shared.value();
        let mut lock =
            match gix::lock::File::acquire_to_update_resource(&path, fail, boundary, shared) {
                Ok(lock) => lock,
                Err(err) => return Ok(Err(err)),
            };
        if let Some(answer) = self.check_under_locks(&[(issue.clone(), new, expected)])? {
            return Ok(Ok(answer));
        }
        if let Err(err) = lock.write_all(format!("{new}\n").as_bytes()) {
            return Ok(Err(gix::Error::from_error(err)));
        }
        Ok(match lock.commit() {
            Ok(_) => Ok(Swap::Done),
            // An empty directory where the ref goes (left by refs that were beneath it) is
            // cleared, as git does; a directory with refs in it is a clash.
            Err(err) if path.is_dir() => {
                match gix::lock::tempfile::remove_dir::empty_depth_first(path.clone()) {
                    Ok(()) => err
                        .instance
                        .commit()
                        .map(|_| Swap::Done)
                        .map_err(|e| gix::Error::from_error(e.error)),
                    Err(_) => Err(gix::Error::from_error(err.error)),
                }
            }
            Err(err) => Err(gix::Error::from_error(err.error)),
        })
    }
}
