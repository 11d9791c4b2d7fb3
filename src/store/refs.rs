//! Reading refs, through the one seam ([`RefDb`]): a lease's tip, where a ledger ends, every
//! ref under a prefix, and what a new lease ref would clash with.

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::{refdb, Entry, Place, RefDb, Store};
use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};

impl Store {
    /// Returns the ref `HEAD` names (`refs/heads/…`), or `None` when it is detached.
    pub fn head_name(&self) -> Result<Option<String>> {
        match &self.refdb {
            RefDb::Files => Ok(self
                .repo
                .head_name()
                .map_err(|e| Error::git("cannot read HEAD", e))?
                .map(|name| name.as_bstr().to_str_lossy().into_owned())),
            RefDb::Git(git) => git.head(),
        }
    }

    /// Returns the ref the symbolic ref `name` names (`refs/remotes/origin/HEAD` names
    /// `refs/remotes/origin/main`): `None` when `name` does not exist or is not symbolic.
    pub fn symbolic_target(&self, name: &str) -> Result<Option<String>> {
        if let RefDb::Git(git) = &self.refdb {
            return Ok(match git.read(name)? {
                Some(refdb::Target::Symbolic(to)) => Some(to),
                _ => None,
            });
        }
        let found = self
            .repo
            .try_find_reference(name)
            .map_err(|e| Error::git(format!("cannot read {name}"), e))?;
        Ok(found.and_then(|r| match r.target() {
            gix::refs::TargetRef::Symbolic(to) => Some(to.as_bstr().to_str_lossy().into_owned()),
            gix::refs::TargetRef::Object(_) => None,
        }))
    }

    /// Returns the commit `refs/leases/<issue>` points at, if the ref exists.
    pub fn tip(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        self.tip_of(&issue.ref_name())
    }

    /// Returns the commit the ref `name` points at, if it exists.
    ///
    /// Read as `Store::read_refs` reads: a ref that `git pack-refs` moves meanwhile is found
    /// where it went.
    pub fn tip_of(&self, name: &str) -> Result<Option<ObjectId>> {
        if let RefDb::Git(git) = &self.refdb {
            return match git.read(name)? {
                None => Ok(None),
                Some(refdb::Target::Object(id)) => Ok(Some(id)),
                Some(refdb::Target::Symbolic(to)) => Err(symbolic(name, &to)),
            };
        }
        self.files_tip_of(name)
    }

    /// Returns the current entry of `issue`: its ref's tip, else the tip the archive records
    /// for it (docs/FORMAT.md, "The archive"), else `None` (never leased).
    pub fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        self.locate(issue)?
            .map(|(tip, place)| {
                let mut entry = self.entry(issue.as_str(), tip)?;
                entry.place = place;
                Ok(entry)
            })
            .transpose()
    }

    /// Returns where the ledger of `issue` ends: its ref's tip ([`Place::Ref`]), else the tip
    /// the archive records ([`Place::Archive`]: the ref does not exist, and a claim creates
    /// it on that tip), else `None`.
    pub fn locate(&self, issue: &IssueId) -> Result<Option<(ObjectId, Place)>> {
        if let Some(tip) = self.tip(issue)? {
            return Ok(Some((tip, Place::Ref)));
        }
        Ok(self.archived(issue)?.map(|tip| (tip, Place::Archive)))
    }

    /// Returns every lease ref as `(issue, tip)`, sorted by issue.
    pub fn lease_refs(&self) -> Result<Vec<(String, ObjectId)>> {
        self.refs_under(REF_PREFIX)
    }

    /// Returns every ref under `prefix` (which ends with `/`) as `(name without prefix, tip)`,
    /// read as `Store::read_refs` reads.
    pub fn refs_under(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>> {
        if let RefDb::Git(git) = &self.refdb {
            let mut out: Vec<(String, ObjectId)> = git
                .list(prefix)?
                .into_iter()
                .filter_map(|(name, target)| match target {
                    refdb::Target::Object(id) => Some((name.strip_prefix(prefix)?.to_owned(), id)),
                    refdb::Target::Symbolic(_) => None,
                })
                .collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            return Ok(out);
        }
        self.files_refs_under(prefix)
    }

    /// Returns every direct ref under `namespace` as `(name without it, target)`, sorted by
    /// name: the cheap way where it can (loose refs through gix, then `packed-refs` line by
    /// line, without gix's per-ref validation and conversions), else as
    /// [`Store::refs_under`] does (a ref namespace, a line that reader does not expect, or a
    /// ref storage other than files). Either is read as `Store::read_refs` reads, so that
    /// `git pack-refs` running meanwhile hides no ref.
    pub fn refs_listed(&self, namespace: &str) -> Result<Vec<(String, ObjectId)>> {
        match self.read_refs(|| self.refs_fast(namespace)) {
            Ok(Some(mut refs)) => {
                // Grown by doubling: at 100k refs, 2 MB a listing would hold for nothing.
                refs.shrink_to_fit();
                Ok(refs)
            }
            // Unusual, or failing each time: gix's reader decides, or says what is wrong.
            Ok(None) | Err(_) => self.refs_under(namespace),
        }
    }

    /// Returns the existing ref that `issue` would clash with as file versus directory.
    pub(crate) fn clash(&self, issue: &IssueId) -> Result<Option<String>> {
        if let RefDb::Git(git) = &self.refdb {
            // The ancestors alone (not their other leases, which may be many), then what is
            // below the issue: a listing each, the first only for an id with a `/`.
            let ancestors: Vec<String> = issue
                .ancestors()
                .map(|a| format!("{REF_PREFIX}{a}"))
                .collect();
            let found = git.existing(&ancestors)?;
            if let Some(hit) = ancestors.into_iter().find(|a| found.contains(a)) {
                return Ok(Some(hit));
            }
            let below = format!("{}/", issue.ref_name());
            return Ok(git.list(&below)?.into_iter().next().map(|(name, _)| name));
        }
        for ancestor in issue.ancestors() {
            let name = format!("{REF_PREFIX}{ancestor}");
            if self.tip_of(&name)?.is_some() {
                return Ok(Some(name));
            }
        }
        let below = format!("{}/", issue.ref_name());
        Ok(self
            .refs_under(&below)?
            .into_iter()
            .next()
            .map(|(rest, _)| format!("{below}{rest}")))
    }

    /// Returns [`Error::RefClash`] if a new ref for `issue` would clash with an existing one.
    pub(crate) fn ensure_no_clash(&self, issue: &IssueId) -> Result<()> {
        match self.clash(issue)? {
            Some(existing) => Err(Error::RefClash {
                issue: issue.to_string(),
                existing,
            }),
            None => Ok(()),
        }
    }
}

/// The error of a lease ref that is symbolic (to `to`), which no ledger can be.
pub(crate) fn symbolic(name: &str, to: &str) -> Error {
    Error::Corrupt {
        issue: name.trim_start_matches(REF_PREFIX).to_owned(),
        commit: format!("(symbolic ref to {to})"),
        reason: "a lease ref must point at a commit, not at another ref".into(),
    }
}
