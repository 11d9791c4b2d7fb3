//! The in-process reftable reader (`src/store/reftable.rs`) on corrupted and hostile input: every
//! read of a damaged stack ends in an error or in a read, never in a panic, a hang or an
//! allocation the file does not justify.
//!
//! - Tables git wrote (a big one of small blocks behind a ref index of several levels, with log
//!   and object sections; small ones on top; a symbolic ref, a deletion, an annotated tag), each
//!   with bytes flipped or cut short anywhere: the header and footer are checked (a flip there,
//!   or a cut, is always an error); a flip in a block may read as other refs, since git's
//!   blocks carry no checksum, but never as a panic.
//! - A hostile `tables.list`: names with `/`, `..`, hidden names, absolute paths, NUL bytes,
//!   names of missing files, of a directory, of a FIFO, the same table listed many thousands of
//!   times; a `tables.list` that is a FIFO, a directory, or far larger than any stack.
//! - Tables forged from nothing, with a footer whose CRC-32 is right so that the reader gets to
//!   their blocks: block lengths past the file or shorter than their own header, restart
//!   tables that do not fit, restart offsets out of range, names sharing more of the previous
//!   name than it has, value types git reserves, index records pointing at themselves, at
//!   each other, and past the file.

use std::path::{Path, PathBuf};
use std::process::Command;

use git_lease::{Error, Store};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::env::TestRepo;

/// The names each read looks up alone, beside the listing of `refs/`.
const PROBES: [&str; 6] = [
    "refs/leases/x0000",
    "refs/leases/x0150",
    "refs/leases/x0299",
    "refs/leases/sym",
    "refs/tags/v1",
    "refs/heads/main",
];

/// What a reader made of a stack: every ref under `refs/`, each probe, and `HEAD`.
#[derive(Debug, PartialEq, Eq)]
struct View {
    listed: Vec<(String, String)>,
    probes: Vec<Option<String>>,
    head: Option<String>,
}

/// Reads the repository at `path` as git-lease does, stopping at the first error.
fn read(path: &Path) -> Result<View, Error> {
    let store = Store::open(path)?;
    let listed = store
        .refs_under("refs/")?
        .into_iter()
        .map(|(name, id)| (name, id.to_string()))
        .collect();
    let mut probes = Vec::new();
    for name in PROBES {
        probes.push(match store.tip_of(name) {
            Ok(id) => id.map(|id| id.to_string()),
            // A symbolic ref, refused as a lease ref: what the reader decoded is its target.
            Err(Error::Corrupt { commit, .. }) => Some(commit),
            Err(e) => return Err(e),
        });
    }
    Ok(View {
        listed,
        probes,
        head: store.head_name()?,
    })
}

/// A reftable repository as git writes it: 300 lease refs in one table of 256-byte blocks
/// (restart points every 4 records, a ref index of several levels), with reflogs of them all
/// and an object index; then small tables on top, uncompacted.
fn fixture() -> TestRepo {
    let repo = TestRepo::init(&["--ref-format=reftable", "--initial-branch=main"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "one"]);
    let one = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "two"]);
    let two = repo.git(&["rev-parse", "HEAD"]);
    let mut create = String::new();
    for i in 0..300 {
        let id = if i % 2 == 0 { &one } else { &two };
        create.push_str(&format!("create refs/leases/x{i:04} {id}\n"));
    }
    let run = repo
        .git_cmd()
        .args([
            "-c",
            "reftable.blockSize=256",
            "-c",
            "reftable.restartInterval=4",
            "-c",
            "core.logAllRefUpdates=always",
            "update-ref",
            "--stdin",
        ])
        .stdin(create)
        .run();
    assert_eq!(run.code, 0, "{run}");
    let small = |args: &[&str]| {
        let run = repo
            .git_cmd()
            .env("GIT_TEST_REFTABLE_AUTOCOMPACTION", "false")
            .args(args)
            .run();
        assert_eq!(run.code, 0, "{run}");
    };
    small(&["update-ref", "refs/leases/x0150", &one]);
    small(&["update-ref", "-d", "refs/leases/x0151"]);
    small(&["symbolic-ref", "refs/leases/sym", "refs/heads/main"]);
    small(&["tag", "-a", "-m", "annotated", "v1", &one]);
    repo
}

/// A fresh copy of `fixture`'s repository, in its own directory under `dir`.
fn copy_of(fixture: &TestRepo, dir: &Path) -> PathBuf {
    let to = dir.join("repo");
    let out = Command::new("cp")
        .arg("-a")
        .arg(fixture.path())
        .arg(&to)
        .output()
        .expect("run cp");
    assert!(out.status.success(), "cp: {out:?}");
    to
}

fn reftable_dir(repo: &Path) -> PathBuf {
    repo.join(".git").join("reftable")
}

/// The tables of the repository at `repo`, oldest first.
fn tables(repo: &Path) -> Vec<PathBuf> {
    let dir = reftable_dir(repo);
    std::fs::read_to_string(dir.join("tables.list"))
        .expect("tables.list")
        .lines()
        .map(|name| dir.join(name))
        .collect()
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn the_fixture_reads_as_git_wrote_it() {
    let repo = fixture();
    let view = read(repo.path()).expect("the fixture reads");
    // 299 leases (one deleted), main and v1; the symbolic ref is no lease tip.
    assert_eq!(view.listed.len(), 299 + 1 + 1, "the listing of refs/");
    assert_eq!(
        view.probes[3].as_deref(),
        Some("(symbolic ref to refs/heads/main)")
    );
    assert_eq!(view.head.as_deref(), Some("refs/heads/main"));
    assert!(tables(repo.path()).len() >= 4, "a stack of several tables");
}

/// A damage done to one table that git wrote.
#[derive(Clone, Debug)]
enum Damage {
    /// XOR each `(position, mask)` into the table, positions taken modulo its length.
    Flip(Vec<(usize, u8)>),
    /// Cut the table to this fraction of its length (in thousandths; never the whole).
    Truncate(u16),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => prop::collection::vec((any::<usize>(), 1..=255u8), 1..4).prop_map(Damage::Flip),
        1 => (0..1000u16).prop_map(Damage::Truncate),
    ]
}

#[test]
fn flipped_bytes_and_truncations_of_git_tables_are_errors_or_reads_never_panics() {
    let fixture = fixture();
    let count = tables(fixture.path()).len();
    let mut runner = runner(256);
    runner
        .run(&(0..count, damage()), |(which, damage)| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let repo = copy_of(&fixture, dir.path());
            let table = &tables(&repo)[which];
            let mut bytes = std::fs::read(table).expect("read the table");
            let len = bytes.len();
            // The footer (and the header it repeats) are checked, CRC-32 included.
            let footer = len - 68;
            let must_fail = match &damage {
                Damage::Flip(flips) => {
                    let mut checked = false;
                    for (at, mask) in flips {
                        let at = at % len;
                        bytes[at] ^= mask;
                        checked |= at < 24 || at >= footer;
                    }
                    // Two flips of one byte can cancel out.
                    checked && bytes != std::fs::read(table).expect("read the table")
                }
                Damage::Truncate(per_mille) => {
                    bytes.truncate(len * usize::from(*per_mille) / 1000);
                    true
                }
            };
            std::fs::write(table, &bytes).expect("write the table");
            let got = read(&repo);
            if must_fail {
                prop_assert!(got.is_err(), "{damage:?} of table {which}: read as {got:?}");
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A hostile line of `tables.list`, or a hostile `tables.list` itself.
#[derive(Clone, Debug)]
enum List {
    /// This name in the list, before the real tables.
    Name(Vec<u8>),
    /// The first table named this many times.
    Repeated(usize),
    /// A list of this many bytes of names of missing tables.
    Huge(usize),
    /// The list is a FIFO no one writes to.
    Fifo,
    /// The list is a directory.
    Directory,
    /// A FIFO, named in the list.
    FifoTable,
    /// A directory, named in the list.
    DirectoryTable,
}

fn hostile_list() -> impl Strategy<Value = List> {
    let names = prop_oneof![
        Just(b"../config".to_vec()),
        Just(b"..".to_vec()),
        Just(b".".to_vec()),
        Just(b"/etc/passwd".to_vec()),
        Just(b"sub/0x1-0x1-0.ref".to_vec()),
        Just(b".hidden.ref".to_vec()),
        Just(b"nul\0name.ref".to_vec()),
        Just(b"0x000000000009-0x000000000009-deadbeef.ref".to_vec()),
        Just(vec![0xff, 0xfe, b'.', b'r']),
        Just(vec![b'a'; 5000]),
        prop::collection::vec(any::<u8>(), 1..40).prop_filter("one line", |n| !n.contains(&b'\n')),
    ];
    prop_oneof![
        6 => names.prop_map(List::Name),
        1 => prop_oneof![Just(2usize), Just(1000), Just(50_000)].prop_map(List::Repeated),
        1 => prop_oneof![Just(1usize << 20), Just(64 << 20)].prop_map(List::Huge),
        1 => Just(List::Fifo),
        1 => Just(List::Directory),
        1 => Just(List::FifoTable),
        1 => Just(List::DirectoryTable),
    ]
}

#[test]
fn a_hostile_tables_list_is_an_error_never_a_panic_a_hang_or_a_table_outside() {
    let fixture = fixture();
    let honest = read(fixture.path()).expect("the fixture reads");
    let mut runner = runner(48);
    runner
        .run(&hostile_list(), |hostile| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let repo = copy_of(&fixture, dir.path());
            let reftable = reftable_dir(&repo);
            let list = reftable.join("tables.list");
            let real = std::fs::read(&list).expect("tables.list");
            let first = real
                .split(|b| *b == b'\n')
                .next()
                .unwrap_or_default()
                .to_vec();
            let with_first = |name: &[u8]| {
                let mut bytes = name.to_vec();
                bytes.push(b'\n');
                bytes.extend_from_slice(&real);
                bytes
            };
            match &hostile {
                List::Name(name) => std::fs::write(&list, with_first(name)),
                List::Repeated(n) => {
                    let mut bytes = Vec::new();
                    for _ in 1..*n {
                        bytes.extend_from_slice(&first);
                        bytes.push(b'\n');
                    }
                    bytes.extend_from_slice(&real);
                    std::fs::write(&list, bytes)
                }
                List::Huge(n) => {
                    let line = b"0x000000000001-0x000000000001-00000000.ref\n";
                    std::fs::write(&list, line.repeat(n / line.len() + 1))
                }
                List::Fifo => {
                    std::fs::remove_file(&list).expect("remove tables.list");
                    mkfifo(&list);
                    Ok(())
                }
                List::Directory => {
                    std::fs::remove_file(&list).expect("remove tables.list");
                    std::fs::create_dir(&list)
                }
                List::FifoTable => {
                    mkfifo(&reftable.join("fifo.ref"));
                    std::fs::write(&list, with_first(b"fifo.ref"))
                }
                List::DirectoryTable => {
                    std::fs::create_dir(reftable.join("dir.ref")).expect("mkdir");
                    std::fs::write(&list, with_first(b"dir.ref"))
                }
            }
            .expect("write tables.list");
            let got = read(&repo);
            match &hostile {
                // The oldest table listed again under itself changes nothing: a good read,
                // up to the most tables a stack may have.
                List::Repeated(n) if *n <= 10_000 => {
                    prop_assert_eq!(got.as_ref().ok(), Some(&honest))
                }
                _ => prop_assert!(got.is_err(), "{hostile:?}: read as {got:?}"),
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

fn mkfifo(path: &Path) {
    let out = Command::new("mkfifo")
        .arg(path)
        .output()
        .expect("run mkfifo");
    assert!(out.status.success(), "mkfifo: {out:?}");
}

/// git's variable-length integer, as the reader reads it.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    let mut bytes = vec![(value & 0x7f) as u8];
    while value >= 0x80 {
        value = (value >> 7) - 1;
        bytes.push(0x80 | (value & 0x7f) as u8);
    }
    bytes.reverse();
    out.extend(bytes);
}

/// Where a forged field points: nowhere, at one of the forged blocks, or anywhere.
#[derive(Clone, Debug)]
enum At {
    Zero,
    Block(usize),
    Raw(u64),
}

fn at() -> impl Strategy<Value = At> {
    prop_oneof![
        Just(At::Zero),
        (0..4usize).prop_map(At::Block),
        prop_oneof![0..4096u64, any::<u64>()].prop_map(At::Raw),
    ]
}

/// One forged record: its shared prefix, its name suffix, its value type, and what follows.
#[derive(Clone, Debug)]
struct Forged {
    prefix: u64,
    suffix: Vec<u8>,
    kind: u8,
    value: ForgedValue,
}

#[derive(Clone, Debug)]
enum ForgedValue {
    /// A varint pointing somewhere (an index record's block position).
    Points(At),
    /// An update index and then these bytes (an object id, a peeled pair, a symref target).
    Bytes(u64, Vec<u8>),
}

fn forged_record() -> impl Strategy<Value = Forged> {
    (
        prop_oneof![3 => 0..3u64, 1 => any::<u64>()],
        prop::collection::vec(
            prop_oneof![Just(b'a'), Just(b'b'), Just(b'/'), any::<u8>()],
            0..10,
        ),
        0..8u8,
        prop_oneof![
            at().prop_map(ForgedValue::Points),
            (0..4u64, prop::collection::vec(any::<u8>(), 0..48))
                .prop_map(|(u, b)| ForgedValue::Bytes(u, b)),
        ],
    )
        .prop_map(|(prefix, suffix, kind, value)| Forged {
            prefix,
            suffix,
            kind,
            value,
        })
}

/// One forged block.
#[derive(Clone, Debug)]
struct ForgedBlock {
    kind: u8,
    records: Vec<Forged>,
    /// Restart offsets as written, or `None` for one at every record's real offset.
    restarts: Option<Vec<u32>>,
    /// The restart count as written, or `None` for the real one.
    count: Option<u16>,
    /// The block length as written, or `None` for the real one.
    len: Option<u32>,
}

fn forged_block() -> impl Strategy<Value = ForgedBlock> {
    (
        prop_oneof![4 => Just(b'r'), 2 => Just(b'i'), 1 => Just(b'g'), 1 => Just(b'o'), 1 => any::<u8>()],
        prop::collection::vec(forged_record(), 0..8),
        prop::option::weighted(0.3, prop::collection::vec(0..300u32, 0..6)),
        prop::option::weighted(0.2, any::<u16>()),
        prop::option::weighted(0.2, prop_oneof![0..64u32, 0..0xff_ffffu32]),
    )
        .prop_map(|(kind, records, restarts, count, len)| ForgedBlock {
            kind,
            records,
            restarts,
            count,
            len,
        })
}

/// A whole forged table: its block size, its blocks, its footer's section offsets.
#[derive(Clone, Debug)]
struct ForgedTable {
    block_size: u32,
    blocks: Vec<ForgedBlock>,
    sections: [At; 5],
}

fn forged_table() -> impl Strategy<Value = ForgedTable> {
    (
        prop_oneof![Just(0u32), Just(256), Just(4096), 0..0xff_ffffu32],
        prop::collection::vec(forged_block(), 1..4),
        [at(), at(), at(), at(), at()],
    )
        .prop_map(|(block_size, blocks, sections)| ForgedTable {
            block_size,
            blocks,
            sections,
        })
}

/// The bytes of `table`: a version 1 (SHA-1) table whose footer repeats its header and carries
/// the right CRC-32, whatever lies between them.
fn forge(table: &ForgedTable) -> Vec<u8> {
    let mut header = b"REFT\x01".to_vec();
    header.extend_from_slice(&table.block_size.to_be_bytes()[1..]);
    header.extend_from_slice(&1u64.to_be_bytes());
    header.extend_from_slice(&1u64.to_be_bytes());
    // The blocks' offsets are known only once each is laid out; pointers to them are written
    // as they will be when every block is as long as its records make it.
    let mut offsets = Vec::new();
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut at = header.len() as u64;
    for (i, block) in table.blocks.iter().enumerate() {
        offsets.push(if i == 0 { 0 } else { at });
        let body = block_bytes(block, &[], if i == 0 { header.len() } else { 0 });
        at += body.len() as u64;
        bodies.push(body);
    }
    let point = |a: &At| match a {
        At::Zero => 0,
        At::Block(i) => offsets.get(*i).copied().unwrap_or(at),
        At::Raw(v) => *v,
    };
    let mut bytes = header.clone();
    for (i, block) in table.blocks.iter().enumerate() {
        let mut body = block_bytes(block, &offsets, if i == 0 { header.len() } else { 0 });
        // Keep the layout the pointers were computed for.
        body.resize(bodies[i].len(), 0);
        bytes.extend(body);
    }
    let mut footer = header;
    for (i, section) in table.sections.iter().enumerate() {
        let value = point(section);
        footer.extend_from_slice(&(if i == 1 { value << 5 } else { value }).to_be_bytes());
    }
    let crc = crc32fast::hash(&footer);
    footer.extend_from_slice(&crc.to_be_bytes());
    bytes.extend(footer);
    bytes
}

/// The bytes of one block (after the file header, for the first): its type, its length, its
/// records, its restart table and count, each as forged.
fn block_bytes(block: &ForgedBlock, offsets: &[u64], header_len: usize) -> Vec<u8> {
    let mut records = Vec::new();
    let mut starts = Vec::new();
    for record in &block.records {
        starts.push((header_len + 4 + records.len()) as u32);
        varint(record.prefix, &mut records);
        varint(
            ((record.suffix.len() as u64) << 3) | u64::from(record.kind),
            &mut records,
        );
        records.extend_from_slice(&record.suffix);
        match &record.value {
            ForgedValue::Points(a) => varint(
                match a {
                    At::Zero => 0,
                    At::Block(i) => offsets.get(*i).copied().unwrap_or(0),
                    At::Raw(v) => *v,
                },
                &mut records,
            ),
            ForgedValue::Bytes(update, bytes) => {
                varint(*update, &mut records);
                records.extend_from_slice(bytes);
            }
        }
    }
    let restarts = block.restarts.clone().unwrap_or(starts);
    let mut tail = Vec::new();
    for r in &restarts {
        tail.extend_from_slice(&r.to_be_bytes()[1..]);
    }
    let count = block.count.unwrap_or(restarts.len() as u16);
    tail.extend_from_slice(&count.to_be_bytes());
    let real = (header_len + 4 + records.len() + tail.len()) as u32;
    let len = block.len.unwrap_or(real);
    let mut out = vec![block.kind];
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend(records);
    out.extend(tail);
    out
}

#[test]
fn forged_tables_with_hostile_blocks_are_errors_or_reads_never_panics_or_hangs() {
    let fixture = fixture();
    let mut runner = runner(512);
    runner
        .run(&forged_table(), |table| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let repo = copy_of(&fixture, dir.path());
            let reftable = reftable_dir(&repo);
            let name = "0x000000000001-0x000000000001-0badf00d.ref";
            std::fs::write(reftable.join(name), forge(&table)).expect("write the table");
            let list = reftable.join("tables.list");
            let real = std::fs::read_to_string(&list).expect("tables.list");
            // Alone, then on top of git's own tables: no panic either way (a forged table
            // may well be a good one).
            std::fs::write(&list, format!("{name}\n")).expect("write tables.list");
            let _ = read(&repo);
            std::fs::write(&list, format!("{real}{name}\n")).expect("write tables.list");
            let _ = read(&repo);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
