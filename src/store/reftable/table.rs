//! One table of a reftable stack: its header and footer, read and checked, and its ref
//! blocks and ref index, read one block at a time with `pread` (see [`super`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::bytes::{corrupt, io_error, read_at, u24, varint};
use super::Record;
use crate::error::{Error, Result};
use crate::store::refdb::Target;

/// The bytes read for a block when the table gives no block size (an unaligned table).
const UNALIGNED_READ: usize = 4096;

const BLOCK_REF: u8 = b'r';
const BLOCK_INDEX: u8 = b'i';
const BLOCK_LOG: u8 = b'g';

/// One open table of the stack, its header and footer read and checked.
#[derive(Debug)]
pub(super) struct Table {
    path: PathBuf,
    file: File,
    /// The length of the file header (24 in version 1, 28 in version 2), where the first
    /// block's header begins.
    header_len: usize,
    /// The alignment of blocks, 0 for an unaligned table.
    block_size: u64,
    hash_len: usize,
    /// The root of the ref index, 0 when there is none.
    ref_index: u64,
    /// Where the ref blocks end: the next section, or the footer.
    ref_end: u64,
    /// Where the ref index ends: the next section, or the footer.
    index_end: u64,
    /// The update indices of the transactions the table holds, from the header.
    min_update: u64,
    pub(super) max_update: u64,
}

impl Table {
    pub(super) fn open(path: PathBuf, file: File, hash: gix::hash::Kind) -> Result<Table> {
        let size = file.metadata().map_err(|e| io_error(&path, e))?.len();
        // The file header, and the kind of the first block after it.
        let mut header = [0u8; 29];
        let got = read_at(&file, &path, &mut header, 0)?;
        if got < 24 || &header[..4] != b"REFT" {
            return Err(corrupt(&path, "is not a reftable (no REFT header)"));
        }
        let (header_len, footer_len) = lengths(&path, &header[..got], hash)?;
        let Some(footer_at) = size
            .checked_sub(footer_len as u64)
            .filter(|at| *at >= header_len as u64)
        else {
            return Err(corrupt(&path, "is too short for its header and footer"));
        };
        let footer = read_footer(&file, &path, footer_at, &header[..header_len], footer_len)?;
        let field = |i: usize| be_u64(&footer[header_len + 8 * i..]);
        let ref_index = field(0);
        let sections = [ref_index, field(1) >> 5, field(2), field(3), field(4)];
        let ref_end = sections
            .into_iter()
            .find(|at| *at != 0)
            .unwrap_or(footer_at);
        let index_end = sections[1..]
            .iter()
            .copied()
            .find(|at| *at != 0)
            .unwrap_or(footer_at);
        if ref_end > footer_at
            || index_end > footer_at
            || ref_index >= index_end.max(1) && ref_index != 0
        {
            return Err(corrupt(&path, "has a section past its footer"));
        }
        // A table of logs alone has them at its start, where its footer's offset (0) says
        // nothing.
        let first_kind = header.get(header_len).copied().filter(|_| got > header_len);
        let log_at = match field(3) {
            0 if first_kind == Some(BLOCK_LOG) => Some(0),
            0 => None,
            at => Some(at),
        };
        let log_end = match field(4) {
            0 => footer_at,
            at => at,
        };
        if log_at.is_some_and(|at| at > log_end) || log_end > footer_at {
            return Err(corrupt(&path, "has a log section past its footer"));
        }
        Ok(Table {
            min_update: be_u64(&header[8..]),
            max_update: be_u64(&header[16..]),
            block_size: u64::from(u24(&header[5..8])),
            path,
            file,
            header_len,
            hash_len: hash.len_in_bytes(),
            ref_index,
            ref_end: ref_end.max(header_len as u64),
            index_end,
        })
    }

    /// Reads the block at `off` (of the ref section, or of the ref index): `None` past the ref
    /// section's end.
    fn block(&self, off: u64, limit: u64) -> Result<Option<Block>> {
        let hdr = if off == 0 { self.header_len } else { 0 };
        if off.saturating_add(hdr as u64) >= limit {
            return Ok(None);
        }
        let want = if self.block_size > 0 {
            self.block_size as usize
        } else {
            UNALIGNED_READ
        };
        let want = want.min((limit - off) as usize).max(hdr + 4);
        let mut data = vec![0u8; want];
        let got = read_at(&self.file, &self.path, &mut data, off)?;
        data.truncate(got);
        if data.len() < hdr + 4 {
            return Err(self.bad(off, "is cut short"));
        }
        let kind = data[hdr];
        let len = u24(&data[hdr + 1..hdr + 4]) as usize;
        if kind != BLOCK_REF && kind != BLOCK_INDEX {
            // An obj or log block (or padding): the end of the refs.
            return Ok(Some(Block {
                kind,
                data: Vec::new(),
                records: 0,
                restarts: 0,
                count: 0,
                next: limit,
            }));
        }
        if off + len as u64 > limit {
            return Err(self.bad(off, "runs past its section"));
        }
        if len > data.len() {
            // An index block larger than the table's block size.
            data = vec![0u8; len];
            if read_at(&self.file, &self.path, &mut data, off)? != len {
                return Err(self.bad(off, "is cut short"));
            }
        }
        if len < hdr + 4 + 2 {
            return Err(self.bad(off, "is too short for its restart count"));
        }
        let count = u16::from_be_bytes([data[len - 2], data[len - 1]]) as usize;
        let restarts = len
            .checked_sub(2 + 3 * count)
            .filter(|at| *at >= hdr + 4 && count > 0)
            .ok_or_else(|| self.bad(off, "has a restart table that does not fit it"))?;
        let unpadded = self.block_size == 0
            || len as u64 >= self.block_size
            || data.get(len).is_some_and(|b| *b != 0);
        let next = if unpadded {
            off + len as u64
        } else {
            off + self.block_size
        };
        data.truncate(len);
        Ok(Some(Block {
            kind,
            data,
            records: hdr + 4,
            restarts,
            count,
            next,
        }))
    }

    /// Returns a cursor at the first ref whose name is `key` or after it, or `None` when
    /// every ref of the table sorts before it: through the ref index where there is one (one
    /// block a level), else from the first block on.
    pub(super) fn seek(&self, key: &[u8]) -> Result<Option<Refs<'_>>> {
        let mut off = self.ref_index;
        let mut levels = 0;
        loop {
            // Index blocks lie after the ref blocks.
            let index = levels == 0 && self.ref_index != 0 || levels > 0 && off >= self.ref_end;
            let limit = if index { self.index_end } else { self.ref_end };
            let Some(block) = self.block(off, limit)? else {
                return Ok(None);
            };
            match block.kind {
                BLOCK_INDEX => {
                    let mut cursor = block.seek(self, off, key)?;
                    match cursor.peeked.take() {
                        // The top level of the index may be several blocks (git writes up to
                        // three there): the key may be in the next.
                        None if levels == 0 => off = block.next,
                        None => return Ok(None),
                        Some(Value::Position(at)) if at < self.ref_end || at >= self.ref_index => {
                            levels += 1;
                            if levels > 64 {
                                return Err(self.bad(off, "is an index deeper than any table has"));
                            }
                            off = at
                        }
                        Some(Value::Position(_)) => {
                            return Err(self.bad(off, "points outside the ref blocks and index"))
                        }
                        Some(Value::Ref(_)) => {
                            return Err(self.bad(off, "is an index block with a ref record"))
                        }
                    }
                }
                BLOCK_REF => {
                    let cursor = block.seek(self, off, key)?;
                    if cursor.peeked.is_some() {
                        return Ok(Some(Refs {
                            table: self,
                            off,
                            next: block.next,
                            block,
                            cursor,
                        }));
                    }
                    if levels > 0 {
                        return Err(self.bad(off, "does not hold what the index says it does"));
                    }
                    // Every ref of this block sorts before the key: the next block's first.
                    off = block.next;
                }
                _ => return Ok(None),
            }
        }
    }

    fn bad(&self, off: u64, what: &str) -> Error {
        corrupt(&self.path, &format!("block at {off} {what}"))
    }
}

/// The lengths of the file header and footer a table of `header` (its first bytes read) has,
/// by its version; a version, or a hash, other than the repository's (`hash`) is refused.
fn lengths(path: &Path, header: &[u8], hash: gix::hash::Kind) -> Result<(usize, usize)> {
    let got = header.len();
    let (header_len, footer_len, hash_len) = match header[4] {
        1 => (24, 68, 20),
        2 if got >= 28 => {
            let hash_len = match &header[24..28] {
                b"sha1" => 20,
                b"s256" => 32,
                other => {
                    return Err(corrupt(
                        path,
                        &format!(
                            "has an unknown hash id {:?}",
                            String::from_utf8_lossy(other)
                        ),
                    ))
                }
            };
            (28, 72, hash_len)
        }
        v => {
            return Err(corrupt(path, &format!("has an unknown version {v}")));
        }
    };
    if hash_len != hash.len_in_bytes() {
        return Err(corrupt(
            path,
            &format!(
                "holds {}-byte object ids, the repository {}-byte ones",
                hash_len,
                hash.len_in_bytes()
            ),
        ));
    }
    Ok((header_len, footer_len))
}

/// Reads the footer of `footer_len` bytes at `footer_at`, checked: it repeats the file
/// `header` and its CRC-32 matches.
fn read_footer(
    file: &File,
    path: &Path,
    footer_at: u64,
    header: &[u8],
    footer_len: usize,
) -> Result<Vec<u8>> {
    let mut footer = vec![0u8; footer_len];
    if read_at(file, path, &mut footer, footer_at)? != footer_len {
        return Err(corrupt(path, "is shorter than its size"));
    }
    if footer[..header.len()] != *header {
        return Err(corrupt(
            path,
            "has a footer that does not repeat its header",
        ));
    }
    let crc = u32::from_be_bytes([
        footer[footer_len - 4],
        footer[footer_len - 3],
        footer[footer_len - 2],
        footer[footer_len - 1],
    ]);
    if crc32fast::hash(&footer[..footer_len - 4]) != crc {
        return Err(corrupt(path, "has a footer whose CRC-32 does not match"));
    }
    Ok(footer)
}

/// The big-endian `u64` `bytes` start with.
fn be_u64(bytes: &[u8]) -> u64 {
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[..8]);
    u64::from_be_bytes(out)
}

/// A block of refs or of index records, read whole (without its padding).
#[derive(Debug)]
struct Block {
    kind: u8,
    data: Vec<u8>,
    /// Where the first record begins.
    records: usize,
    /// Where the restart table begins (the records end).
    restarts: usize,
    /// How many restart points there are.
    count: usize,
    /// Where the next block begins.
    next: u64,
}

/// A record's value, as its block's kind says.
enum Value {
    Ref(StoredRef),
    Position(u64),
}

/// A ref record as a table stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct StoredRef {
    /// The update index of the transaction that wrote it.
    update: u64,
    value: Stored,
}

/// The value of a ref record, by its value type (0 to 3).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stored {
    Deletion,
    Object(ObjectId),
    /// An object id and its peeled value (an annotated tag's).
    Peeled(ObjectId, ObjectId),
    Symbolic(Vec<u8>),
}

impl StoredRef {
    /// What the record says of its ref: `None` for a deletion.
    pub(super) fn record(&self) -> Record {
        match &self.value {
            Stored::Deletion => None,
            Stored::Object(id) | Stored::Peeled(id, _) => Some(Target::Object(*id)),
            Stored::Symbolic(to) => {
                Some(Target::Symbolic(String::from_utf8_lossy(to).into_owned()))
            }
        }
    }
}

impl Block {
    fn restart(&self, i: usize) -> usize {
        u24(&self.data[self.restarts + 3 * i..self.restarts + 3 * i + 3]) as usize
    }

    /// Returns a cursor at the first record whose key is `key` or after it (at the end when
    /// there is none): the restart points are searched, then the records after the last one
    /// before `key`.
    fn seek(&self, table: &Table, off: u64, key: &[u8]) -> Result<Cursor> {
        let mut lo = 0;
        let mut hi = self.count;
        while lo < hi {
            let mid = (lo + hi) / 2;
            let at = self.restart(mid);
            if at < self.records || at >= self.restarts {
                return Err(table.bad(off, "has a restart point outside its records"));
            }
            let mut probe = Cursor {
                pos: at,
                key: Vec::new(),
                peeked: None,
            };
            probe.decode(self, table, off)?;
            if probe.key.as_slice() < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let start = if lo == 0 {
            self.records
        } else {
            self.restart(lo - 1)
        };
        let mut cursor = Cursor {
            pos: start,
            key: Vec::new(),
            peeked: None,
        };
        loop {
            if cursor.pos >= self.restarts {
                return Ok(cursor);
            }
            let value = cursor.decode(self, table, off)?;
            if cursor.key.as_slice() >= key {
                cursor.peeked = Some(value);
                return Ok(cursor);
            }
        }
    }
}

/// A position in a block: the key of the record last decoded, which the next one's prefix is
/// taken from, and that record itself when it has not been handed out yet.
struct Cursor {
    pos: usize,
    key: Vec<u8>,
    peeked: Option<Value>,
}

impl Cursor {
    /// Decodes the record at `pos` into `key` and returns its value, moving past it.
    fn decode(&mut self, block: &Block, table: &Table, off: u64) -> Result<Value> {
        let data = &block.data[..block.restarts];
        let bad = |what: &str| table.bad(off, &format!("has a record at {} that {what}", self.pos));
        let mut pos = self.pos;
        let prefix = varint(data, &mut pos).ok_or_else(|| bad("is cut short"))?;
        let packed = varint(data, &mut pos).ok_or_else(|| bad("is cut short"))?;
        let suffix = (packed >> 3) as usize;
        let kind = (packed & 7) as u8;
        if prefix as usize > self.key.len() {
            return Err(bad("shares more of the previous name than it has"));
        }
        let end = pos
            .checked_add(suffix)
            .filter(|end| *end <= data.len())
            .ok_or_else(|| bad("has a name past the block's end"))?;
        self.key.truncate(prefix as usize);
        self.key.extend_from_slice(&data[pos..end]);
        pos = end;
        let value = if block.kind == BLOCK_INDEX {
            if kind != 0 {
                return Err(bad("is an index record of another type"));
            }
            Value::Position(varint(data, &mut pos).ok_or_else(|| bad("is cut short"))?)
        } else {
            // The update index of the ref, relative to the table's least: newer tables shadow
            // older ones whatever it says; compaction carries it over.
            let delta = varint(data, &mut pos).ok_or_else(|| bad("is cut short"))?;
            let update = table.min_update.saturating_add(delta);
            let hash = table.hash_len;
            let id = |at: usize| {
                data.get(at..at + hash)
                    .and_then(|bytes| ObjectId::try_from(bytes).ok())
                    .ok_or_else(|| bad("has an object id past the block's end"))
            };
            let value = match kind {
                0 => Stored::Deletion,
                1 => {
                    let target = id(pos)?;
                    pos += hash;
                    Stored::Object(target)
                }
                2 => {
                    let target = id(pos)?;
                    let peeled =
                        id(pos + hash).map_err(|_| bad("has a peeled id past the block's end"))?;
                    pos += 2 * hash;
                    Stored::Peeled(target, peeled)
                }
                3 => {
                    let len = varint(data, &mut pos).ok_or_else(|| bad("is cut short"))? as usize;
                    let end = pos
                        .checked_add(len)
                        .filter(|end| *end <= data.len())
                        .ok_or_else(|| bad("has a symbolic target past the block's end"))?;
                    let to = data[pos..end].to_vec();
                    pos = end;
                    Stored::Symbolic(to)
                }
                other => return Err(bad(&format!("has the reserved value type {other}"))),
            };
            Value::Ref(StoredRef { update, value })
        };
        self.pos = pos;
        Ok(value)
    }
}

/// The refs of a table from a point on, in order, block after block.
pub(super) struct Refs<'t> {
    table: &'t Table,
    off: u64,
    next: u64,
    block: Block,
    cursor: Cursor,
}

impl Refs<'_> {
    /// Returns the next ref record, `(name, entry)`, or `None` at the end of the table.
    pub(super) fn next(&mut self) -> Result<Option<(&[u8], StoredRef)>> {
        loop {
            let value = match self.cursor.peeked.take() {
                Some(value) => Some(value),
                None if self.cursor.pos < self.block.restarts => {
                    Some(self.cursor.decode(&self.block, self.table, self.off)?)
                }
                None => None,
            };
            match value {
                Some(Value::Ref(entry)) => return Ok(Some((&self.cursor.key, entry))),
                Some(Value::Position(_)) => {
                    return Err(self
                        .table
                        .bad(self.off, "is a ref block with an index record"))
                }
                None => {
                    let at = self.next;
                    match self.table.block(at, self.table.ref_end)? {
                        Some(block) if block.kind == BLOCK_REF => {
                            self.off = at;
                            self.next = block.next;
                            self.cursor = Cursor {
                                pos: block.records,
                                key: Vec::new(),
                                peeked: None,
                            };
                            self.block = block;
                        }
                        _ => return Ok(None),
                    }
                }
            }
        }
    }
}
