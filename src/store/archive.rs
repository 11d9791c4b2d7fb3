//! The archive of quiet ledgers as objects and refs (docs/FORMAT.md, "The archive"): the ref
//! `refs/lease-archive`, whose commits (*folds*) record, for every archived issue, the tip its
//! ledger had when it was folded, as a gitlink in a tree fanned out by the SHA-256 of the id.
//!
//! This module reads those objects, and `writing` writes them and moves those refs; what a fold may record,
//! and when a folded ledger ref may go, is decided in [`crate::ledger::archive`].

mod writing;

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::Store;
use crate::error::{Error, Result};
use crate::issue::IssueId;

/// The one ref of the archive.
pub const ARCHIVE_REF: &str = "refs/lease-archive";

/// How many tips (or carriers) one carrier of a fold holds at most (docs/FORMAT.md, "The
/// archive").
pub const CARRIER_PARENTS: usize = 256;

/// How deep carriers nest at most: 256^4 tips under each of a fold's carriers.
pub const CARRIER_DEPTH: usize = 4;

/// The mode of an archive entry: a gitlink (a commit named in a tree).
const GITLINK: u16 = 0o160000;

/// The mode of a tree entry that is a tree.
const TREE: u16 = 0o040000;

/// How many levels of fan-out an entry's path has before the id itself.
const FAN_OUT: usize = 2;

/// An entry two folds disagree on: `(issue, tip before, tip after)`.
pub type Change = (String, Option<ObjectId>, Option<ObjectId>);

/// One fold, decoded: a commit of `refs/lease-archive`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fold {
    /// The commit.
    pub commit: ObjectId,
    /// Its tree: every archived issue's entry.
    pub tree: ObjectId,
    /// Its parents: the previous fold first (none for the first fold), then the tips this
    /// fold records.
    pub parents: Vec<ObjectId>,
    /// Its committer time: when it was folded.
    pub at: chrono::DateTime<chrono::Utc>,
}

/// What a repository that may lack trees of a fold can say of an issue's path in it
/// ([`Store::archive_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArchivePath {
    /// The path was read: the tip the fold records for the issue, if any.
    Read(Option<ObjectId>),
    /// The repository lacks this tree of the path.
    Lacks(ObjectId),
}

/// Returns the path of `issue`'s entry in an archive tree: the first two and next two hex
/// digits of the SHA-256 of the id's UTF-8 bytes, then the id itself (whose `/`s nest it
/// further): `9f/86/42` for issue `42`.
pub fn entry_path(issue: &str) -> Result<String> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha256);
    hasher.update(issue.as_bytes());
    let digest = hasher
        .try_finalize()
        .map_err(|e| Error::git("cannot hash an issue id for the archive", e))?
        .to_string();
    Ok(format!("{}/{}/{issue}", &digest[0..2], &digest[2..4]))
}

/// Returns the issue id an archive path names, if the path has the fan-out of `issue`'s own
/// entry ([`entry_path`]).
pub fn issue_of_path(path: &str) -> Option<&str> {
    let mut parts = path.splitn(FAN_OUT + 1, '/');
    let (a, b, issue) = (parts.next()?, parts.next()?, parts.next()?);
    let expected = entry_path(issue).ok()?;
    (expected.len() == path.len() && expected.starts_with(&format!("{a}/{b}/"))).then_some(issue)
}

impl Store {
    /// Returns the newest fold, where `refs/lease-archive` points, if there is an archive.
    pub fn archive_tip(&self) -> Result<Option<ObjectId>> {
        self.tip_of(ARCHIVE_REF)
    }

    /// Reads and decodes the fold `commit`.
    ///
    /// Returns [`Error::Corrupt`] (for the archive ref) when it is not a commit.
    pub fn fold(&self, commit: ObjectId) -> Result<Fold> {
        let (kind, data) = self.find(commit).map_err(|e| corrupt(commit, e))?;
        if kind != gix::object::Kind::Commit {
            return Err(corrupt(
                commit,
                format!("a fold must be a commit, not a {kind}"),
            ));
        }
        let parsed = gix::objs::CommitRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| corrupt(commit, format!("cannot decode the fold: {e}")))?;
        let time = parsed
            .committer()
            .map_err(|e| corrupt(commit, format!("cannot decode the fold's committer: {e}")))?
            .seconds();
        let at = chrono::DateTime::from_timestamp(time, 0)
            .ok_or_else(|| corrupt(commit, format!("the fold's time {time} is out of range")))?;
        Ok(Fold {
            commit,
            tree: parsed.tree(),
            parents: parsed.parents().collect(),
            at,
        })
    }

    /// Copies the fold `commit` from `from` (a remote's archive index) into this repository
    /// unless it has it: the commit object alone, its tree and parents left behind, for a push
    /// guarded by the archive's value (git hands that object to `pack-objects`).
    pub fn copy_fold_commit(&self, from: &Store, commit: ObjectId) -> Result<()> {
        if self.repo.has_object(commit) {
            return Ok(());
        }
        let (kind, data) = from.find(commit).map_err(|e| corrupt(commit, e))?;
        if kind != gix::object::Kind::Commit {
            return Err(corrupt(
                commit,
                format!("a fold must be a commit, not a {kind}"),
            ));
        }
        let mut staged = super::Staged::default();
        let written = staged.add(self.repo.object_hash(), kind, data)?;
        if written != commit {
            return Err(corrupt(commit, format!("its bytes hash to {written}")));
        }
        self.write_staged(&staged)
    }

    /// Whether `commit` is a fold rather than a ledger commit (the first fold's first parent
    /// is a ledger tip, every later fold's the fold before): a ledger commit's tree holds
    /// `lease.json`, a fold's only its fan-out.
    pub fn is_fold(&self, commit: ObjectId) -> bool {
        self.fold(commit).is_ok_and(|fold| {
            fold.tree != self.empty_tree()
                && matches!(
                    self.tree_entry(commit, fold.tree, crate::lease::LEASE_FILE),
                    Ok(None)
                )
        })
    }

    /// The id of the empty tree, a carrier's tree.
    fn empty_tree(&self) -> ObjectId {
        ObjectId::empty_tree(self.repo.object_hash())
    }

    /// Returns the previous fold of `fold` (its first parent, if that is a fold) and the tips
    /// its carriers hold, in order; and what is wrong with a parent that is neither a fold
    /// first nor a carrier. A carrier is a commit of the empty tree with 1 to
    /// [`CARRIER_PARENTS`] parents: all tips, or (its first parent a carrier) all carriers,
    /// at most [`CARRIER_DEPTH`] carriers deep.
    pub fn fold_parents(&self, fold: &Fold) -> (Option<ObjectId>, Vec<ObjectId>, Vec<String>) {
        let mut parents = fold.parents.iter().copied().peekable();
        let previous = parents.next_if(|p| self.is_fold(*p));
        let mut tips = Vec::new();
        let mut wrong = Vec::new();
        // Depth first, in the parents' order, so the tips come out as they were written.
        let mut pending: Vec<(ObjectId, usize)> = parents.rev().map(|p| (p, 1)).collect();
        while let Some((carrier, depth)) = pending.pop() {
            let held = match self.fold(carrier) {
                Ok(c) if c.tree == self.empty_tree() => c.parents,
                _ => {
                    wrong.push(format!(
                        "the parent {carrier} is not a carrier (a commit of the empty tree \
                         whose parents are archived tips, or carriers of them)"
                    ));
                    continue;
                }
            };
            if held.is_empty() || held.len() > CARRIER_PARENTS {
                wrong.push(format!(
                    "the carrier {carrier} holds {} commits, not 1 to {CARRIER_PARENTS}",
                    held.len()
                ));
            }
            let nested = held
                .first()
                .is_some_and(|first| self.fold(*first).is_ok_and(|c| c.tree == self.empty_tree()));
            if !nested {
                tips.extend(held);
            } else if depth >= CARRIER_DEPTH {
                wrong.push(format!(
                    "the carrier {carrier} nests carriers deeper than {CARRIER_DEPTH}"
                ));
            } else {
                pending.extend(held.into_iter().rev().map(|c| (c, depth + 1)));
            }
        }
        (previous, tips, wrong)
    }

    /// Returns the tip the archive tree `tree` records for `issue`, if it records one.
    ///
    /// Returns [`Error::Corrupt`] for an entry that is not a gitlink, a path of the fan-out
    /// that is not a tree, or a tree of the path this repository lacks.
    pub fn archived_in(&self, fold: &Fold, issue: &str) -> Result<Option<ObjectId>> {
        match self.archive_path(fold, issue)? {
            ArchivePath::Read(tip) => Ok(tip),
            ArchivePath::Lacks(tree) => {
                Err(corrupt(fold.commit, format!("its tree {tree} is missing")))
            }
        }
    }

    /// Reads the path of `issue` in the fold's tree as [`Store::archived_in`] does, in a
    /// repository that may lack trees of it (a partial archive index): where it lacks one on
    /// the path, says which.
    pub(crate) fn archive_path(&self, fold: &Fold, issue: &str) -> Result<ArchivePath> {
        let path = entry_path(issue)?;
        let mut tree = fold.tree;
        let mut parts = path.split('/').peekable();
        while let Some(part) = parts.next() {
            let entry = match self.tree_entry(fold.commit, tree, part) {
                Ok(entry) => entry,
                Err(_) if !self.repo.has_object(tree) => return Ok(ArchivePath::Lacks(tree)),
                Err(e) => return Err(e),
            };
            let Some((mode, id)) = entry else {
                return Ok(ArchivePath::Read(None));
            };
            match (parts.peek().is_some(), mode) {
                (true, TREE) => tree = id,
                (false, GITLINK) => return Ok(ArchivePath::Read(Some(id))),
                // An id `a` archived while `a/b` is asked for, or the other way round: the
                // asked-for one is not archived.
                (true, GITLINK) | (false, TREE) => return Ok(ArchivePath::Read(None)),
                (_, other) => {
                    return Err(corrupt(
                        fold.commit,
                        format!("the entry {path:?} has mode {other:o}, not a gitlink"),
                    ))
                }
            }
        }
        Ok(ArchivePath::Read(None))
    }

    /// Returns the tip the newest fold records for `issue`, if the archive records one.
    pub fn archived(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        match self.archive_tip()? {
            Some(tip) => self.archived_in(&self.fold(tip)?, issue.as_str()),
            None => Ok(None),
        }
    }

    /// Returns every entry of the fold's tree as `(issue, tip)`, sorted by issue.
    ///
    /// Returns [`Error::Corrupt`] for an entry that is not where its id's fan-out puts it,
    /// not a gitlink, or not a valid issue id.
    pub fn archive_entries(&self, fold: &Fold) -> Result<Vec<(String, ObjectId)>> {
        let mut out = Vec::new();
        let mut pending = vec![(String::new(), fold.tree)];
        while let Some((prefix, tree)) = pending.pop() {
            for (name, mode, id) in self.tree_names(fold.commit, tree)? {
                let path = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                match mode {
                    TREE => pending.push((path, id)),
                    GITLINK => {
                        let issue = issue_of_path(&path).ok_or_else(|| {
                            corrupt(
                                fold.commit,
                                format!("the entry {path:?} is not where its id belongs"),
                            )
                        })?;
                        IssueId::new(issue).map_err(|e| {
                            corrupt(fold.commit, format!("the entry {path:?}: {e}"))
                        })?;
                        out.push((issue.to_owned(), id));
                    }
                    other => {
                        return Err(corrupt(
                            fold.commit,
                            format!("the entry {path:?} has mode {other:o}, not a gitlink"),
                        ))
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Returns every entry that differs between the trees of `before` (the empty archive for
    /// `None`) and `after`, as `(issue, tip before, tip after)`, sorted by path: subtrees
    /// both share are skipped unread, so a fold's changes cost what it changed.
    ///
    /// Returns [`Error::Corrupt`] (of `after`) for an entry that is not where its id belongs,
    /// or neither a tree nor a gitlink, a name a tree gives twice, or an empty tree.
    pub fn archive_diff(&self, before: Option<&Fold>, after: &Fold) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        let mut pending = vec![(String::new(), before.map(|f| f.tree), Some(after.tree))];
        while let Some((prefix, a, b)) = pending.pop() {
            let read = |tree: Option<ObjectId>| match tree {
                Some(tree) => self.tree_names(after.commit, tree),
                None => Ok(Vec::new()),
            };
            let mut sides: std::collections::BTreeMap<String, [Option<(u16, ObjectId)>; 2]> =
                Default::default();
            for (side, tree) in [a, b].into_iter().enumerate() {
                let names = read(tree)?;
                // A tree that leads to no entry is none of the fan-out, which is all there is.
                if side == 1 && tree.is_some() && names.is_empty() && !prefix.is_empty() {
                    return Err(corrupt(
                        after.commit,
                        format!("the tree {prefix:?} is empty: an archive holds entries only"),
                    ));
                }
                for (name, mode, id) in names {
                    sides.entry(name).or_default()[side] = Some((mode, id));
                }
            }
            for (name, [x, y]) in sides {
                if x == y {
                    continue;
                }
                let path = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                let of = |side: Option<(u16, ObjectId)>, mode| {
                    side.filter(|(m, _)| *m == mode).map(|(_, id)| id)
                };
                for (mode, _) in x.iter().chain(y.iter()) {
                    if *mode != TREE && *mode != GITLINK {
                        return Err(corrupt(
                            after.commit,
                            format!("the entry {path:?} has mode {mode:o}, not a gitlink"),
                        ));
                    }
                }
                let (trees, links) = ((of(x, TREE), of(y, TREE)), (of(x, GITLINK), of(y, GITLINK)));
                if trees.0.is_some() || trees.1.is_some() {
                    pending.push((path.clone(), trees.0, trees.1));
                }
                if links.0.is_some() || links.1.is_some() {
                    let issue = issue_of_path(&path).ok_or_else(|| {
                        corrupt(
                            after.commit,
                            format!("the entry {path:?} is not where its id belongs"),
                        )
                    })?;
                    IssueId::new(issue)
                        .map_err(|e| corrupt(after.commit, format!("the entry {path:?}: {e}")))?;
                    out.push((path.clone(), issue.to_owned(), links.0, links.1));
                }
            }
        }
        out.sort();
        Ok(out
            .into_iter()
            .map(|(_, issue, a, b)| (issue, a, b))
            .collect())
    }
}

impl Store {
    /// Returns the mode and id of the entry `name` of `tree` (of the fold `fold`), if any.
    fn tree_entry(
        &self,
        fold: ObjectId,
        tree: ObjectId,
        name: &str,
    ) -> Result<Option<(u16, ObjectId)>> {
        let data = self.tree_data(fold, tree)?;
        let parsed = gix::objs::TreeRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| corrupt(fold, format!("cannot decode tree {tree}: {e}")))?;
        Ok(parsed
            .entries
            .iter()
            .find(|e| e.filename == name.as_bytes())
            .map(|e| (e.mode.value(), e.oid.to_owned())))
    }

    /// Returns the bytes of `tree` (of the fold `fold`), which must be a tree.
    fn tree_data(&self, fold: ObjectId, tree: ObjectId) -> Result<Vec<u8>> {
        let (kind, data) = self.find(tree).map_err(|e| corrupt(fold, e))?;
        if kind != gix::object::Kind::Tree {
            return Err(corrupt(fold, format!("{tree} is a {kind}, not a tree")));
        }
        Ok(data)
    }

    /// Returns every entry of `tree` (of the fold `fold`) as `(name, mode, id)`; a name that
    /// is not UTF-8 is [`Error::Corrupt`], as no issue id has one, and so is a name given
    /// twice: one reader would take the first entry and another the last.
    fn tree_names(&self, fold: ObjectId, tree: ObjectId) -> Result<Vec<(String, u16, ObjectId)>> {
        let data = self.tree_data(fold, tree)?;
        let parsed = gix::objs::TreeRef::from_bytes(&data, self.repo.object_hash())
            .map_err(|e| corrupt(fold, format!("cannot decode tree {tree}: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        parsed
            .entries
            .iter()
            .map(|e| {
                let name = e
                    .filename
                    .to_str()
                    .map_err(|_| corrupt(fold, format!("an entry of tree {tree} is not UTF-8")))?;
                if !seen.insert(name) {
                    return Err(corrupt(
                        fold,
                        format!("tree {tree} holds two entries named {name:?}"),
                    ));
                }
                Ok((name.to_owned(), e.mode.value(), e.oid.to_owned()))
            })
            .collect()
    }
}

fn corrupt(commit: ObjectId, reason: String) -> Error {
    Error::Corrupt {
        issue: ARCHIVE_REF.to_owned(),
        commit: commit.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_fanned_out_by_the_sha256_of_its_id() {
        // printf 42 | sha256sum: 73475cb4...
        assert_eq!(entry_path("42").ok().as_deref(), Some("73/47/42"));
        let nested = entry_path("gh/123").unwrap_or_default();
        assert!(nested.ends_with("/gh/123"), "{nested}");
        assert_eq!(issue_of_path(&nested), Some("gh/123"));
        assert_eq!(issue_of_path("73/47/42"), Some("42"));
        assert_eq!(issue_of_path("00/00/42"), None);
        assert_eq!(issue_of_path("73/42"), None);
    }
}
