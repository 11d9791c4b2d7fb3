//! New ledger objects: an event's blob, tree and commit encoded, signed where configured, and
//! written as loose objects ([`super::loose`]); and the commits of doctor's probe.

use gix::ObjectId;

use super::{Staged, Store};
use crate::error::{Error, Result};
use crate::lease::{Lease, LEASE_FILE};

impl Store {
    /// Writes the blob, tree and commit recording `lease` on top of `parent`, as loose
    /// objects, made durable when the configuration asks for it.
    ///
    /// The commit is authored by the actor (the holder, or whoever acted) and committed by
    /// git-lease, both at the event's own time, so a ledger is reproducible from its inputs.
    pub(crate) fn write(&self, lease: &Lease, parent: Option<ObjectId>) -> Result<ObjectId> {
        let mut staged = Staged::default();
        let commit = self.stage(&mut staged, lease, parent)?;
        self.write_staged(&staged)?;
        Ok(commit)
    }

    /// Encodes and hashes the blob, tree and commit of an event into `staged`, without
    /// writing anything, and returns the commit id.
    pub(crate) fn stage(
        &self,
        staged: &mut Staged,
        lease: &Lease,
        parent: Option<ObjectId>,
    ) -> Result<ObjectId> {
        let blob = staged.add(self.object_hash(), gix::objs::Kind::Blob, lease.to_json())?;
        let tree = gix::objs::Tree {
            entries: vec![gix::objs::tree::Entry {
                mode: gix::objs::tree::EntryKind::Blob.into(),
                filename: LEASE_FILE.into(),
                oid: blob,
            }],
        };
        let tree = staged.add(self.object_hash(), gix::objs::Kind::Tree, encode(&tree)?)?;
        let time = gix::date::Time::new(lease.at.timestamp(), 0);
        let actor = lease.actor().unwrap_or("git-lease");
        let commit = gix::objs::Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: signature(actor, time),
            committer: gix::actor::Signature {
                name: "git-lease".into(),
                email: "git-lease@localhost".into(),
                time,
            },
            encoding: None,
            message: commit_message(lease).into(),
            extra_headers: Vec::new(),
        };
        let mut data = encode(&commit)?;
        if let Some(signer) = self.signer()? {
            data = signer.sign_commit(self.object_hash(), &data)?;
        }
        staged.add(self.object_hash(), gix::objs::Kind::Commit, data)
    }

    /// Returns how ledger commits are signed, `None` for unsigned ([`crate::sign`]): decided
    /// once per store, by the first commit it encodes (the key itself is loaded once per
    /// process), so that a command that writes nothing never needs the key, and one that fails
    /// to load it has written nothing.
    pub(super) fn signer(&self) -> Result<Option<&crate::sign::Signer>> {
        if let Some(signer) = self.signer.get() {
            return Ok(signer.as_deref());
        }
        let signer = crate::sign::Signer::from_config(
            |key| self.config_flag(key),
            |key| self.config_string(key),
        )?;
        Ok(self.signer.get_or_init(|| signer).as_deref())
    }

    /// Writes the commits of doctor's probe of a remote, as loose objects: a root commit of
    /// the empty tree and two children of it, each message naming `nonce`, dated `now`.
    /// Returns them as `[root, first child, second child]`. They belong to no ledger.
    pub(crate) fn write_probe(
        &self,
        nonce: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<[ObjectId; 3]> {
        let time = gix::date::Time::new(now.timestamp(), 0);
        let commit = |tree, parent: Option<ObjectId>, which: &str| gix::objs::Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: signature("git-lease", time),
            committer: signature("git-lease", time),
            encoding: None,
            message: format!("git-lease doctor: probe {nonce} ({which})\n").into(),
            extra_headers: Vec::new(),
        };
        let hash = self.object_hash();
        let mut staged = Staged::default();
        let empty = encode(&gix::objs::Tree::empty())?;
        let tree = staged.add(hash, gix::objs::Kind::Tree, empty)?;
        let root = encode(&commit(tree, None, "root"))?;
        let root = staged.add(hash, gix::objs::Kind::Commit, root)?;
        let moved = encode(&commit(tree, Some(root), "moved"))?;
        let moved = staged.add(hash, gix::objs::Kind::Commit, moved)?;
        let stale = encode(&commit(tree, Some(root), "stale"))?;
        let stale = staged.add(hash, gix::objs::Kind::Commit, stale)?;
        self.write_staged(&staged)?;
        Ok([root, moved, stale])
    }

    pub(super) fn object_hash(&self) -> gix::hash::Kind {
        self.repo.object_hash()
    }
}

pub(super) fn signature(actor: &str, time: gix::date::Time) -> gix::actor::Signature {
    // A holder is free text; keep the signature well-formed for every git reader.
    let clean: String = actor
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r' | '\0'))
        .collect();
    let email = if clean.contains('@') {
        clean.clone()
    } else {
        String::new()
    };
    gix::actor::Signature {
        name: clean.into(),
        email: email.into(),
        time,
    }
}

/// Returns the commit message of a ledger commit: one line that `git log --oneline` makes
/// readable. The state itself lives only in `lease.json`.
fn commit_message(lease: &Lease) -> String {
    let who = lease
        .holder
        .as_deref()
        .or(lease.previous_holder.as_deref())
        .unwrap_or("nobody");
    let until = match lease.expires_at {
        Some(t) if lease.holder.is_some() => format!(" until {}", crate::time::format_instant(t)),
        None if lease.holder.is_some() => " (open-ended)".into(),
        _ => String::new(),
    };
    format!(
        "{} {}: {} token {}{}\n",
        lease.event, lease.issue, who, lease.token, until
    )
}

/// Serialises a tree or commit the way git hashes it.
pub(super) fn encode(object: &dyn gix::objs::WriteTo) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    object
        .write_to(&mut out)
        .map_err(|e| Error::git("cannot encode a ledger object", e))?;
    Ok(out)
}
