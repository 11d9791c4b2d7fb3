//! Loose objects written without setting up a compressor.
//!
//! A ledger event is three objects of a few hundred bytes each. gix's loose writer builds a
//! fresh zlib deflate state for every object, and zeroing those buffers was half of the page
//! faults of a whole `git lease acquire` process (BENCHMARKS.md). Deflate's *stored* blocks
//! need no state: the object is framed as a valid zlib stream, exactly what git writes with
//! `core.looseCompression=0`, and every git and gix reads it. Nothing is lost on disk either:
//! a file this small fills one block whether compressed or not, and `git gc` compresses the
//! objects when it packs them.
//!
//! The file handling is git's, but for one place: the object goes to a temporary file (mode
//! 0444) in `objects/`, where git writes its own in the fan-out directory (on ext4 that put a
//! claim's inodes in many block groups and measured slower, BENCHMARKS.md); the file is
//! renamed into place, and the fan-out directory made only when the rename finds it missing.
//! An object that already exists is freshened (its modification time set to now) instead.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gix::objs::Kind;
use gix::ObjectId;

use crate::error::Error;

/// How many times a fan-out directory is made again when it vanished before the rename.
const FAN_OUT_ATTEMPTS: u32 = 64;

/// The most a stored deflate block can hold.
const STORED_BLOCK_MAX: usize = 0xffff;

/// Writes the object `id` of `kind` with `data` under `objects_dir`, fsyncing the file before
/// it takes its name when `sync` is set. An object already there is only freshened (its
/// modification time set to now, as git does, so that a `git gc` running meanwhile does not
/// prune it as old and unreachable before a ref reaches it); one that cannot be freshened is
/// written again.
pub(crate) fn write(
    objects_dir: &Path,
    id: ObjectId,
    kind: Kind,
    data: &[u8],
    sync: bool,
) -> Result<(), Error> {
    let io = |context: String| move |source| Error::Io { context, source };
    let path = path(objects_dir, id);
    let dir = path.parent().unwrap_or(objects_dir).to_owned();
    if freshen(&path) {
        return Ok(());
    }
    let mut raw = gix::objs::encode::loose_header(kind, data.len() as u64).to_vec();
    raw.extend_from_slice(data);
    let framed = zlib_stored(&raw);

    let mut file = tempfile::Builder::new()
        .prefix("tmp_obj_")
        .permissions(std::fs::Permissions::from_mode(0o444))
        .tempfile_in(objects_dir)
        .map_err(io(format!(
            "cannot create a temporary object in {}",
            objects_dir.display()
        )))?;
    file.write_all(&framed)
        .map_err(io(format!("cannot write {}", file.path().display())))?;
    if sync {
        file.as_file()
            .sync_all()
            .map_err(io(format!("cannot fsync {}", file.path().display())))?;
    }
    // The rename is tried first, as git does: the fan-out directory almost always exists, and
    // is made only when the rename finds it missing. `git prune` and `git prune-packed` remove
    // empty fan-out directories, so one may vanish again between its creation and the rename,
    // again and again while git packs in a loop: the pair is tried until the rename lands (the
    // temporary file, in `objects/` itself, stays).
    let mut attempt = 0;
    loop {
        attempt += 1;
        match file.persist(&path) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.error.kind() == std::io::ErrorKind::NotFound && attempt < FAN_OUT_ATTEMPTS =>
            {
                file = e.file;
            }
            Err(e) => {
                return Err(io(format!("cannot move an object into {}", path.display()))(e.error))
            }
        }
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(format!("cannot create {}", dir.display()))(e)),
        }
    }
}

/// The path of object `id` as a loose object under `objects_dir`: `xx/` and the rest of its
/// hexadecimal name.
pub(crate) fn path(objects_dir: &Path, id: ObjectId) -> std::path::PathBuf {
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

/// Frames `raw` as a zlib stream of stored (uncompressed) deflate blocks (RFC 1950/1951).
pub(crate) fn zlib_stored(raw: &[u8]) -> Vec<u8> {
    let blocks = raw.len().div_ceil(STORED_BLOCK_MAX).max(1);
    let mut out = Vec::with_capacity(2 + blocks * 5 + raw.len() + 4);
    // CMF: deflate with a 32 KiB window; FLG: no dictionary, "fastest" level, and a check
    // value that makes CMF*256+FLG a multiple of 31 (0x7801 = 30721 = 31 * 991).
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = raw.chunks(STORED_BLOCK_MAX).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let len = chunk.len() as u16;
        out.push(u8::from(last));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&adler32(raw).to_be_bytes());
    out
}

/// The Adler-32 checksum that ends a zlib stream.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // 5552 is the most bytes that can be summed before `b` could overflow a u32.
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_matches_known_values() {
        assert_eq!(adler32(b""), 1);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        let long = vec![0xffu8; 200_000];
        // Computed byte by byte with the definition, without the deferred modulo.
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &long {
            a = (a + u64::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(u64::from(adler32(&long)), (b << 16) | a);
    }

    #[test]
    fn stored_frames_split_at_the_block_limit() {
        for len in [
            0usize,
            1,
            300,
            STORED_BLOCK_MAX,
            STORED_BLOCK_MAX + 1,
            3 * STORED_BLOCK_MAX + 7,
        ] {
            let raw: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let framed = zlib_stored(&raw);
            let blocks = len.div_ceil(STORED_BLOCK_MAX).max(1);
            assert_eq!(framed.len(), 2 + 5 * blocks + len + 4, "length {len}");
            assert_eq!((u32::from(framed[0]) * 256 + u32::from(framed[1])) % 31, 0);
        }
    }

    #[test]
    fn written_objects_read_back_through_gix() {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = gix::init_bare(dir.path()).expect("init");
        let objects = repo.objects.store_ref().path().to_owned();
        let data = b"{\"version\": 1}\n".repeat(5000);
        let id = gix::objs::compute_hash(repo.object_hash(), Kind::Blob, &data).expect("hash");
        write(&objects, id, Kind::Blob, &data, false).expect("write");
        let path = objects
            .join(&id.to_hex().to_string()[..2])
            .join(&id.to_hex().to_string()[2..]);
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::open(&path)
            .expect("open")
            .set_modified(old)
            .expect("age it");
        write(&objects, id, Kind::Blob, &data, true).expect("an existing object is freshened");
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
