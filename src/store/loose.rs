//! Ledger objects written as loose objects, through gix's object writer.
//!
//! Every event's blob, tree and commit is written as git writes a loose object: a temporary
//! file in `objects/`, renamed into its fan-out directory. A batch writes its objects the same
//! way, and `git gc --auto` packs them later ([`crate::autogc`]). What gix leaves out is added
//! here, as git does it: an object already on disk is freshened (its modification time set to
//! now) instead of written again, so that a `git gc` running meanwhile does not prune it before
//! a ref reaches it; a fan-out directory that `git prune` removed between its creation and the
//! rename is made again; the file and its fan-out directory get the modes
//! `core.sharedRepository` asks for ([`super::shared`]); and the files are made durable as
//! git's settings say ([`crate::durability`]), since gix never fsyncs.

use std::path::{Path, PathBuf};

use gix::objs::Write as _;
use gix::ObjectId;

use super::Store;
use crate::error::{Error, Result};

/// How many times an object is written again when its fan-out directory vanished before the
/// rename: `git prune` and `git prune-packed` remove empty fan-out directories, again and
/// again while git packs in a loop.
const FAN_OUT_ATTEMPTS: u32 = 64;

/// Ledger objects encoded and hashed but not yet written: [`Store::stage`] adds an event's,
/// [`Store::write_staged`] writes them all at once.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    objects: Vec<(gix::objs::Kind, Vec<u8>)>,
    ids: Vec<ObjectId>,
    seen: std::collections::HashSet<ObjectId>,
}

impl Staged {
    /// Adds an object unless it is already staged, and returns its id.
    pub(super) fn add(
        &mut self,
        hash: gix::hash::Kind,
        kind: gix::objs::Kind,
        data: Vec<u8>,
    ) -> Result<ObjectId> {
        let id = gix::objs::compute_hash(hash, kind, &data).map_err(|e| Error::Git {
            context: format!("cannot hash a ledger {kind}"),
            message: e.to_string(),
        })?;
        if self.seen.insert(id) {
            self.objects.push((kind, data));
            self.ids.push(id);
        }
        Ok(id)
    }
}

impl Store {
    /// Writes `staged` as loose objects through gix and makes them durable when the
    /// configuration asks for it, before any ref names them.
    pub(crate) fn write_staged(&self, staged: &Staged) -> Result<()> {
        self.ensure_writable()?;
        let objects_dir = self.repo.objects.store_ref().path();
        for ((kind, data), id) in staged.objects.iter().zip(&staged.ids) {
            self.write_loose(objects_dir, *kind, data, *id)?;
        }
        self.auto_gc.note_written(&staged.ids);
        self.fsync.sync_objects(objects_dir, &staged.ids)
    }

    /// Writes one object of `kind` with `data`, whose id is `id`, unless its loose file is
    /// there already, in which case it is freshened.
    fn write_loose(
        &self,
        objects_dir: &Path,
        kind: gix::objs::Kind,
        data: &[u8],
        id: ObjectId,
    ) -> Result<()> {
        let path = path(objects_dir, id);
        if freshen(&path) {
            return Ok(());
        }
        let mut attempt = 1;
        loop {
            match self.repo.objects.write_buf_with_known_id(kind, data, id) {
                Ok(_) => return self.shared.adjust_up_to(&path, objects_dir),
                Err(e)
                    if attempt < FAN_OUT_ATTEMPTS && (fan_out_vanished(&path) || not_found(&e)) =>
                {
                    attempt += 1
                }
                Err(e) => return Err(Error::git(format!("cannot write object {id}"), e)),
            }
        }
    }

    /// Whether the object database holds `id`: its loose file, looked up by name first (what
    /// a ledger write has just made), else anything gix finds (packs, alternates). Looking in
    /// the packs first would load their indexes, a listing of `objects/pack` and every index
    /// file's header, for an object that is almost always loose.
    pub(crate) fn holds_object(&self, id: ObjectId) -> bool {
        path(self.repo.objects.store_ref().path(), id).is_file() || self.repo.has_object(id)
    }
}

/// The path of object `id` as a loose object under `objects_dir`: `xx/` and the rest of its
/// hexadecimal name.
pub(crate) fn path(objects_dir: &Path, id: ObjectId) -> PathBuf {
    let hex = id.to_hex().to_string();
    objects_dir.join(&hex[..2]).join(&hex[2..])
}

/// Sets the modification time of an existing object file to now; false if there is none or
/// it cannot be done.
fn freshen(path: &Path) -> bool {
    std::fs::File::open(path)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()))
        .is_ok()
}

/// Whether the fan-out directory of the object file `path` is missing: removed by git after
/// gix made it and before the object's rename.
fn fan_out_vanished(path: &Path) -> bool {
    path.parent().is_some_and(|dir| !dir.is_dir())
}

/// Whether a write failed because a file or directory it needed was not there: a fan-out
/// directory removed between gix's making of it and the rename, and made again since by
/// another writer, so that it is there when looked at.
fn not_found(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
        {
            return true;
        }
        cause = e.source();
    }
    error.to_string().contains("No such file or directory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::objs::Kind;

    #[test]
    fn written_objects_read_back_and_an_existing_one_is_freshened() {
        let dir = tempfile::tempdir().expect("temp dir");
        gix::init_bare(dir.path()).expect("init");
        let store = Store::open(dir.path()).expect("open");
        let hash = store.repo.object_hash();
        let data = b"{\"version\": 1}\n".repeat(5000);
        let mut staged = Staged::default();
        let id = staged.add(hash, Kind::Blob, data.clone()).expect("stage");
        store.write_staged(&staged).expect("write");
        let path = path(store.repo.objects.store_ref().path(), id);
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::open(&path)
            .expect("open")
            .set_modified(old)
            .expect("age it");
        store
            .write_staged(&staged)
            .expect("an existing object is freshened");
        let modified = std::fs::metadata(&path)
            .expect("stat")
            .modified()
            .expect("mtime");
        assert!(modified > old, "freshened like git does");
        let repo = gix::open(dir.path()).expect("reopen");
        let object = repo.find_object(id).expect("find");
        assert_eq!(object.kind, Kind::Blob);
        assert_eq!(object.data, data);
    }
}
