//! Many new objects written as one pack.
//!
//! A batch of events ([`crate::batch`], all-or-none claims) writes three objects per event.
//! As loose objects that is three files each, and on a disk where creating a file is the
//! expensive part, a batch of a hundred events spent nearly all its time creating three
//! hundred files. Written together they are one pack and its index, as `git fetch` and
//! `git receive-pack` store what they receive.
//!
//! The pack is a plain version 2 pack of whole objects (no deltas), each framed as stored
//! deflate blocks like [`crate::loose`] does; gix's bundle writer verifies it and builds its
//! index. Like git's `index-pack --keep`, the pack is protected by a `.keep` file from the
//! moment it appears until the refs that reach its objects have moved, so no concurrent
//! `git repack -a -d` can drop it in between: the store holds the [`WrittenPack`] until its
//! next ref update, and dropping it removes the `.keep`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::objs::Kind;

use crate::error::Error;

/// A pack just written, and its `.keep` file until this is dropped.
#[derive(Debug)]
pub(crate) struct WrittenPack {
    /// The `.pack` file.
    pub pack: PathBuf,
    /// Its `.idx` file.
    pub index: PathBuf,
    keep: Option<PathBuf>,
}

impl Drop for WrittenPack {
    fn drop(&mut self) {
        if let Some(keep) = self.keep.take() {
            // A leftover .keep only stops git from repacking this pack; nothing is lost.
            let _ = std::fs::remove_file(keep);
        }
    }
}

/// Writes `objects` (kind and data; each object once) into one pack under
/// `objects_dir/pack`, and returns it.
pub(crate) fn write<D: AsRef<[u8]>>(
    objects_dir: &Path,
    hash: gix::hash::Kind,
    objects: &[(Kind, D)],
) -> Result<WrittenPack, Error> {
    let stream = pack_stream(hash, objects)?;
    let pack_dir = objects_dir.join("pack");
    let options = gix_pack::bundle::write::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let outcome = gix_pack::Bundle::write_to_directory(
        &mut stream.as_slice(),
        Some(&pack_dir),
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
        None::<gix::objs::find::Never>,
        hash,
        options,
    )
    .map_err(|e| Error::git(format!("cannot write a pack in {}", pack_dir.display()), e))?;
    match (outcome.data_path, outcome.index_path) {
        (Some(pack), Some(index)) => {
            // gix writes no `.keep` for a pack that was already there (the same objects
            // written before); keep it all the same, unless someone else already does.
            let keep = outcome.keep_path.or_else(|| {
                let keep = pack.with_extension("keep");
                std::fs::File::create_new(&keep).ok().map(|_| keep)
            });
            Ok(WrittenPack { pack, index, keep })
        }
        _ => Err(Error::Git {
            context: format!("cannot write a pack in {}", pack_dir.display()),
            message: format!("writing {} objects produced no pack", objects.len()),
        }),
    }
}

/// Returns the bytes of a version 2 pack holding `objects` as whole (undeltified) entries.
fn pack_stream<D: AsRef<[u8]>>(
    hash: gix::hash::Kind,
    objects: &[(Kind, D)],
) -> Result<Vec<u8>, Error> {
    let count = u32::try_from(objects.len())
        .map_err(|_| Error::InvalidInput("too many objects for one pack".into()))?;
    let size: usize = objects
        .iter()
        .map(|(_, data)| data.as_ref().len() + 32)
        .sum();
    let mut out = Vec::with_capacity(12 + size + hash.len_in_bytes());
    out.extend_from_slice(b"PACK");
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    for (kind, data) in objects {
        let data = data.as_ref();
        entry_header(&mut out, type_number(*kind), data.len());
        out.extend_from_slice(&crate::loose::zlib_stored(data));
    }
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(&out);
    let trailer = hasher
        .try_finalize()
        .map_err(|e| Error::git("cannot hash a pack", e))?;
    out.extend_from_slice(trailer.as_slice());
    Ok(out)
}

/// The type numbers of a pack entry header (gitformat-pack(5)).
fn type_number(kind: Kind) -> u8 {
    match kind {
        Kind::Commit => 1,
        Kind::Tree => 2,
        Kind::Blob => 3,
        Kind::Tag => 4,
    }
}

/// Appends an entry header: the type in bits 4-6 of the first byte, the size in its low
/// four bits and then seven bits per byte, each byte but the last with its high bit set.
fn entry_header(out: &mut Vec<u8>, type_number: u8, size: usize) {
    let mut byte = (type_number << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_headers_follow_the_pack_format() {
        let header = |t, size| {
            let mut out = Vec::new();
            entry_header(&mut out, t, size);
            out
        };
        assert_eq!(header(3, 0), [0x30]);
        assert_eq!(header(3, 15), [0x3f]);
        assert_eq!(header(1, 16), [0x90, 0x01]);
        // 300 = 0b1_0010_1100: low nibble 0xc, then 0b1_0010 = 18.
        assert_eq!(header(2, 300), [0xac, 0x12]);
        // 2048 = 0x800: low nibble 0, then 128 = 0 with a continuation, then 1.
        assert_eq!(header(3, 2048), [0xb0, 0x80, 0x01]);
    }

    #[test]
    fn a_written_pack_reads_back_and_loses_its_keep_when_dropped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = gix::init_bare(dir.path()).expect("init");
        let objects_dir = repo.objects.store_ref().path().to_owned();
        let hash = repo.object_hash();
        let big = b"0123456789abcdef".repeat(5000);
        let objects: Vec<(Kind, &[u8])> =
            vec![(Kind::Blob, b"{}\n"), (Kind::Blob, &big), (Kind::Blob, b"")];
        let pack = write(&objects_dir, hash, &objects).expect("write");
        assert!(pack.pack.is_file() && pack.index.is_file());
        let keep = pack.pack.with_extension("keep");
        assert!(keep.is_file(), "kept until the refs move");
        let repo = gix::open(dir.path()).expect("reopen");
        for (kind, data) in &objects {
            let id = gix::objs::compute_hash(hash, *kind, data).expect("hash");
            let object = repo.find_object(id).expect("in the pack");
            assert_eq!(object.kind, *kind);
            assert_eq!(object.data.as_slice(), *data);
        }
        drop(pack);
        assert!(!keep.exists());
    }
}
