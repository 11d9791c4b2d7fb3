//! The bytes of a table: git's integers as reftable stores them, reads at an offset, and the
//! errors of a table that cannot be read.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};

/// Reads git's variable-length integer at `pos` (the encoding of a pack's offset deltas:
/// seven bits a byte, most significant first, each continuation adding one), moving past it.
pub(super) fn varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut byte = *data.get(*pos)?;
    *pos += 1;
    let mut value = u64::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = *data.get(*pos)?;
        *pos += 1;
        value = value.checked_add(1)?.checked_mul(128)? | u64::from(byte & 0x7f);
    }
    Some(value)
}

pub(super) fn u24(bytes: &[u8]) -> u32 {
    u32::from(bytes[0]) << 16 | u32::from(bytes[1]) << 8 | u32::from(bytes[2])
}

/// Reads into `buf` at `off` until it is full or the file ends; returns how much was read.
pub(super) fn read_at(file: &File, path: &Path, buf: &mut [u8], off: u64) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(path, e)),
        }
    }
    Ok(done)
}

pub(super) fn io_error(path: &Path, e: io::Error) -> Error {
    Error::Io {
        context: format!("cannot read {}", path.display()),
        source: e,
    }
}

pub(super) fn corrupt(path: &Path, what: &str) -> Error {
    Error::Git {
        context: "cannot read references (reftable)".into(),
        message: format!("{} {what}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_read_as_git_writes_them() {
        for (bytes, want) in [
            (&[0x00][..], 0u64),
            (&[0x7f], 127),
            (&[0x80, 0x00], 128),
            (&[0x80, 0x7f], 255),
            (&[0x81, 0x00], 256),
            (&[0xff, 0x7f], 16511),
            (&[0x80, 0x80, 0x00], 16512),
        ] {
            let mut pos = 0;
            assert_eq!(varint(bytes, &mut pos), Some(want), "{bytes:?}");
            assert_eq!(pos, bytes.len());
        }
        let mut pos = 0;
        assert_eq!(varint(&[0x80], &mut pos), None, "cut short");
        let mut pos = 0;
        assert_eq!(varint(&[0xff; 12], &mut pos), None, "overflow");
    }
}
