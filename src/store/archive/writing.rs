//! Writing the archive: a fold's tree and the carriers of its tips staged as objects, and the
//! archive ref moved with the folded ledger refs in one transaction.

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::{corrupt, entry_path, Fold, ARCHIVE_REF, CARRIER_PARENTS};
use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::store::encode::encode;
use crate::store::refdb::{Expect, Failure, GitRefs};
use crate::store::{RefDb, Staged, Store};

impl Store {
    /// Encodes and hashes into `staged` the fold that records `record` (`(issue, tip)`) over
    /// `base` (the newest fold, `None` for the first), dated `now`, and returns its commit id.
    pub(crate) fn stage_fold(
        &self,
        staged: &mut Staged,
        base: Option<&Fold>,
        record: &[(IssueId, ObjectId)],
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<ObjectId> {
        let hash = self.repo.object_hash();
        let mut paths = Vec::with_capacity(record.len());
        for (issue, tip) in record {
            paths.push((entry_path(issue.as_str())?, *tip));
        }
        paths.sort();
        let tree = self.stage_fold_tree(staged, base, &paths)?;
        let who = gix::actor::Signature {
            name: "git-lease".into(),
            email: "git-lease@localhost".into(),
            time: gix::date::Time::new(now.timestamp(), 0),
        };
        let carriers = self.stage_carriers(staged, &paths, &who)?;
        let commit = gix::objs::Commit {
            tree,
            parents: base.map(|f| f.commit).into_iter().chain(carriers).collect(),
            author: who.clone(),
            committer: who,
            encoding: None,
            message: format!("git-lease: fold {} ledgers\n", paths.len()).into(),
            extra_headers: Vec::new(),
        };
        let mut data = encode(&commit)?;
        if let Some(signer) = self.signer()? {
            data = signer.sign_commit(hash, &data)?;
        }
        staged.add(hash, gix::objs::Kind::Commit, data)
    }

    /// Stages the tree of a fold: `base`'s tree (empty without one) with a gitlink to each tip
    /// of `paths` (`(entry path, tip)`) at its path. Returns the tree's id.
    fn stage_fold_tree(
        &self,
        staged: &mut Staged,
        base: Option<&Fold>,
        paths: &[(String, ObjectId)],
    ) -> Result<ObjectId> {
        let hash = self.repo.object_hash();
        let root = match base {
            Some(fold) => {
                let data = self.tree_data(fold.commit, fold.tree)?;
                gix::objs::TreeRef::from_bytes(&data, hash)
                    .map_err(|e| corrupt(fold.commit, format!("cannot decode its tree: {e}")))?
                    .into()
            }
            None => gix::objs::Tree::empty(),
        };
        let mut editor = gix::objs::tree::Editor::new(root, &self.repo.objects, hash);
        for (path, tip) in paths {
            editor
                .upsert(path.split('/'), gix::objs::tree::EntryKind::Commit, *tip)
                .map_err(|e| Error::git("cannot add an entry to the archive", e))?;
        }
        editor
            .write(|tree| {
                let data = encode(tree)?;
                staged.add(hash, gix::objs::Kind::Tree, data)
            })
            .map_err(|e: Error| e)
    }

    /// Stages the carriers of the tips of `paths` (`(entry path, tip)`), and returns the one
    /// that holds them all (none without tips).
    ///
    /// The tips ride on carriers, at most CARRIER_PARENTS each: git walks a commit's parents
    /// in time proportional to their number squared, so one fold of 100,000 parents would take
    /// minutes in every fetch, push and gc that reaches it.
    fn stage_carriers(
        &self,
        staged: &mut Staged,
        paths: &[(String, ObjectId)],
        who: &gix::actor::Signature,
    ) -> Result<Vec<ObjectId>> {
        let hash = self.repo.object_hash();
        let empty = staged.add(
            hash,
            gix::objs::Kind::Tree,
            encode(&gix::objs::Tree::empty())?,
        )?;
        // Oldest tip first: git walks a commit's parents into a list ordered by time, and
        // each tip newer than those before it goes in at the list's head, not after them all.
        let mut carried = Vec::with_capacity(paths.len());
        for (path, tip) in paths {
            carried.push((self.fold(*tip)?.at, path.as_str(), *tip));
        }
        carried.sort();
        // The carriers nest, 256 to a carrier, until one holds them all: a walk that reaches
        // the fold opens its parents, so a fold of 387 carriers side by side had every walk
        // that touched it read all 99,000 tips' ids (20 ms of every fetch and push at 100k).
        //
        // Every carrier is dated at the epoch. git walks back from what a push or a fetch
        // brings until every commit left is older than the oldest commit it brought, and
        // marks what the refs reach on the way. A claim that revives a ledger brings a
        // commit on an archived tip, so carriers dated anywhere after that ledger's root
        // were each opened, with every tip they hold and all their history: 0.66 s of each
        // revival at 100,000 archived ledgers, 22 s at 1,000,000. Dated at the epoch they
        // are older than anything a push brings; the walk ends before it reaches them.
        let epoch = gix::actor::Signature {
            time: gix::date::Time::new(0, 0),
            ..who.clone()
        };
        let mut level: Vec<ObjectId> = carried.iter().map(|(_, _, tip)| *tip).collect();
        let mut what = "archived tips";
        loop {
            let mut next = Vec::with_capacity(level.len().div_ceil(CARRIER_PARENTS));
            for chunk in level.chunks(CARRIER_PARENTS) {
                let carrier = gix::objs::Commit {
                    tree: empty,
                    parents: chunk.to_vec().into(),
                    author: epoch.clone(),
                    committer: epoch.clone(),
                    encoding: None,
                    message: format!("git-lease: carry {} {what}\n", chunk.len()).into(),
                    extra_headers: Vec::new(),
                };
                next.push(staged.add(hash, gix::objs::Kind::Commit, encode(&carrier)?)?);
            }
            level = next;
            what = "carriers";
            if level.len() <= 1 {
                return Ok(level);
            }
        }
    }

    /// Applies `edits` (`(ref, new, expected)`: `new` `None` deletes, `expected` `None` must
    /// not exist) to the archive ref and lease refs in one transaction through git, all or
    /// none: the moves of an archive (a fold, the folded refs' removal), which are rare,
    /// never on a claim's path, and the only deletions of lease refs there are.
    ///
    /// Returns `false` when a ref was not at its expected value (nothing changed).
    pub(crate) fn archive_transaction(
        &self,
        edits: &[(String, Option<ObjectId>, Option<ObjectId>)],
        message: &str,
    ) -> Result<bool> {
        let fresh;
        let git = match &self.refdb {
            RefDb::Git(git) => git,
            RefDb::Files => {
                fresh = GitRefs::new(
                    self.repo.git_dir(),
                    self.repo.common_dir(),
                    self.repo
                        .refs
                        .namespace
                        .as_ref()
                        .map(|ns| ns.as_bstr().to_str_lossy().into_owned()),
                    self.lock_wait,
                    self.repo.object_hash(),
                )
                .for_files();
                &fresh
            }
        };
        let null = ObjectId::null(self.repo.object_hash());
        let git_edits: Vec<(&str, ObjectId, Expect)> = edits
            .iter()
            .map(|(name, new, expected)| (name.as_str(), new.unwrap_or(null), (*expected).into()))
            .collect();
        match git.update(&git_edits, message, self.fsync.refs) {
            Ok(()) => {
                self.after_ref_update(edits.iter().map(|(name, _, _)| name.as_str()))?;
                Ok(true)
            }
            Err(Failure::Lost) => Ok(false),
            Err(failure) => {
                let first = edits.first().map_or(ARCHIVE_REF, |(n, _, _)| n.as_str());
                self.failed_git_swap(failure, first).map(|_| false)
            }
        }
    }
}
