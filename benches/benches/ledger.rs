//! In-process benchmarks: git-lease's library against the SQLite peer and the file-system floor.
//!
//! `cargo bench --manifest-path benches/Cargo.toml` runs, on repositories made under
//! `$GIT_LEASE_BENCH_TMP` (default `/var/tmp`, the same disk as the work tree):
//!
//! 1. criterion groups, one benchmark after the other:
//!    - `acquire_distinct`: acquire of a new issue each iteration: git-lease, SQLite NORMAL,
//!      SQLite FULL, and the file-system floor (the files one acquire creates), also fsynced;
//!    - `acquire_release_one_issue`: one acquire + one release of the same issue;
//!    - `acquire_at_scale`: git-lease acquire of a new issue with 1k and with N existing leases
//!      (N = `$GIT_LEASE_BENCH_LARGE`, default 100000; packed by `git gc`);
//!    - `list`: the whole list (80% live) in-process, git-lease (with its list cache, and cold)
//!      against SQLite;
//!    - `batch`: 100 acquires of new issues: `Ledger::apply_batch` (one ref transaction)
//!      against SQLite's 100 acquires in one transaction;
//! 2. then the paired section (skip with `GIT_LEASE_BENCH_PAIRED=0`): every comparison again,
//!    its variants alternating round by round (A B C, B C A, ...), reported as medians and
//!    medians of same-round ratios; written to `$GIT_LEASE_BENCH_OUT/inprocess.md` (default
//!    `benches/target/bench-results/`). BENCHMARKS.md quotes its acquire against the floor.
//!
//! `GIT_LEASE_BENCH_LARGE` (default 100000), `GIT_LEASE_BENCH_ROUNDS` (15),
//! `GIT_LEASE_BENCH_CRITERION=0` (paired only), `GIT_LEASE_BENCH_PAIRED=0` (criterion only),
//! `GIT_LEASE_BENCH_KEEP=1` (keep the scratch directory), `GIT_LEASE_BENCH_TMP`, `..._OUT`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion};
use git_lease::batch::Operation;
use git_lease::durability::Fsync;
use git_lease::{Claim, Ending, Holder, IssueId, Ledger, Store, Ttl};
use git_lease_bench::floor::Floor;
use git_lease_bench::populate::{count_leases, populate_git, Packing};
use git_lease_bench::sqlite_lease::{SqliteLedger, Sync};
use git_lease_bench::stats::{fmt_duration, median, paired, quantile, Figure, Variant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Everything the benchmarks write to, made once.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    now: DateTime<Utc>,
    claim: Claim,
    large: u64,
}

impl Fixture {
    fn new() -> Fixture {
        let base = git_lease_bench::scratch_base();
        let dir = tempfile::Builder::new()
            .prefix("git-lease-bench.")
            .tempdir_in(&base)
            .expect("a scratch directory");
        let root = dir.path().to_owned();
        eprintln!(
            "scratch: {} ({})",
            root.display(),
            git_lease_bench::fs_type(&root).unwrap_or_else(|| "unknown fs".into())
        );
        Fixture {
            _dir: dir,
            root,
            now: DateTime::from_timestamp(git_lease_bench::NOW, 0).expect("valid"),
            claim: Claim::new(
                Holder::new("alice@example.com").expect("valid"),
                Ttl::parse("1h").expect("valid"),
            ),
            large: env_u64("GIT_LEASE_BENCH_LARGE", 100_000),
        }
    }

    fn repo(&self, name: &str) -> Ledger {
        let path = self.root.join(name);
        if !path.exists() {
            let ok = std::process::Command::new("git")
                .args(["init", "-q"])
                .arg(&path)
                .status()
                .expect("git")
                .success();
            assert!(ok, "git init {}", path.display());
        }
        Ledger::open(&path).expect("open the repository")
    }

    fn populated(&self, name: &str, n: u64) -> (PathBuf, Ledger) {
        let path = self.root.join(name);
        let start = std::time::Instant::now();
        populate_git(&path, "i", n, 80, git_lease_bench::NOW, Packing::Gc).expect("populate");
        let (all, live) = count_leases(&path, git_lease_bench::NOW).expect("count");
        assert_eq!(all as u64, n);
        eprintln!(
            "populated {} with {all} leases ({live} live) in {:.1?}",
            path.display(),
            start.elapsed()
        );
        let ledger = Ledger::open(&path).expect("open");
        (path, ledger)
    }

    /// A copy of a populated repository, so that the list benchmarks read exactly N leases
    /// while the acquire benchmarks add to the original.
    fn copy(&self, from: &Path, name: &str) -> Ledger {
        let to = self.root.join(name);
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(&to)
            .status()
            .expect("cp")
            .success();
        assert!(ok, "cp -a {} {}", from.display(), to.display());
        Ledger::open(&to).expect("open the copy")
    }

    fn sqlite(&self, name: &str, sync: Sync) -> SqliteLedger {
        SqliteLedger::open(&self.root.join(name), sync).expect("open the database")
    }
}

/// Makes a fresh issue id per call: `{prefix}{n}`.
struct Fresh {
    prefix: &'static str,
    n: u64,
}

impl Fresh {
    fn new(prefix: &'static str) -> Fresh {
        Fresh { prefix, n: 0 }
    }
    fn next(&mut self) -> String {
        self.n += 1;
        format!("{}{}", self.prefix, self.n)
    }
    fn next_id(&mut self) -> IssueId {
        IssueId::new(&self.next()).expect("a valid id")
    }
}

fn git_acquire(ledger: &Ledger, issue: &IssueId, fx: &Fixture) {
    let r = ledger.acquire(issue, &fx.claim, fx.now).expect("acquire");
    assert!(r.wrote);
    black_box(r);
}

fn git_cycle(ledger: &Ledger, issue: &IssueId, fx: &Fixture) {
    let a = ledger.acquire(issue, &fx.claim, fx.now).expect("acquire");
    let r = ledger
        .release(issue, &fx.claim.holder, Ending::Release, fx.now)
        .expect("release");
    assert!(a.wrote && r.wrote);
}

fn sql_acquire(db: &mut SqliteLedger, issue: &str, now: i64) {
    let r = db
        .acquire(issue, "alice@example.com", Some(3600), now)
        .expect("acquire");
    assert!(r.wrote);
}

fn sql_cycle(db: &mut SqliteLedger, issue: &str, now: i64) {
    let a = db
        .acquire(issue, "alice@example.com", Some(3600), now)
        .expect("acquire");
    let r = db
        .release(issue, "alice@example.com", now)
        .expect("release");
    assert!(a.wrote && r.wrote);
}

/// Lists with the list cache removed first, so every lease is decoded from its objects (and
/// the cache is written again, as the first listing after many changes would).
fn cold_list(ledger: &Ledger) -> usize {
    let cache = git_lease::cache::ListCache::for_leases(ledger.store());
    match std::fs::remove_file(cache.path()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("cannot remove {}: {e}", cache.path().display()),
    }
    ledger.list().expect("list").len()
}

struct Subjects {
    git: Ledger,
    /// The same repository as `git`, fsyncing objects and refs (`lease.fsync=true`).
    git_fsync: Ledger,
    git_cycle: Ledger,
    normal: SqliteLedger,
    full: SqliteLedger,
    floor: Floor,
    small: Ledger,
    large: Ledger,
    small_b: Ledger,
    large_b: Ledger,
    small_list: Ledger,
    large_list: Ledger,
    small_db: SqliteLedger,
    large_db: SqliteLedger,
}

impl Subjects {
    fn new(fx: &Fixture) -> Subjects {
        // The floor creates its files in the acquire repository's own directories.
        let git_dir = fx.root.join("acquire").join(".git");
        let mut small_db = fx.sqlite("list-1k.db", Sync::Normal);
        small_db
            .populate("i", 1000, 80, git_lease_bench::NOW)
            .expect("populate");
        let mut large_db = fx.sqlite("list-large.db", Sync::Normal);
        large_db
            .populate("i", fx.large, 80, git_lease_bench::NOW)
            .expect("populate");
        let git = fx.repo("acquire");
        let (small_path, small) = fx.populated("leases-1k", 1000);
        let (large_path, large) = fx.populated("leases-large", fx.large);
        let small_b = fx.populated("leases-1k-b", 1000).1;
        let large_b = fx.populated("leases-large-b", fx.large).1;
        let git_fsync = Ledger::from_store(
            Store::open(&fx.root.join("acquire"))
                .expect("open")
                .with_fsync(Fsync::ALL),
        );
        Subjects {
            git,
            git_fsync,
            git_cycle: fx.repo("cycle"),
            normal: fx.sqlite("normal.db", Sync::Normal),
            full: fx.sqlite("full.db", Sync::Full),
            floor: Floor::new(
                &git_dir.join("objects"),
                &git_dir.join("refs").join("floor"),
            )
            .expect("floor"),
            small,
            large,
            small_b,
            large_b,
            small_list: fx.copy(&small_path, "list-1k"),
            large_list: fx.copy(&large_path, "list-large"),
            small_db,
            large_db,
        }
    }
}

fn criterion_groups(c: &mut Criterion, fx: &Fixture, s: &mut Subjects) {
    let now = git_lease_bench::NOW;
    {
        let mut g = c.benchmark_group("acquire_distinct");
        let mut fresh = Fresh::new("c");
        g.bench_function("git_lease", |b| {
            b.iter_batched(
                || fresh.next_id(),
                |issue| git_acquire(&s.git, &issue, fx),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("sqlite_normal", |b| {
            b.iter_batched(
                || fresh.next(),
                |issue| sql_acquire(&mut s.normal, &issue, now),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("sqlite_full", |b| {
            b.iter_batched(
                || fresh.next(),
                |issue| sql_acquire(&mut s.full, &issue, now),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("fs_floor", |b| {
            b.iter_batched(
                || fresh.next(),
                |issue| s.floor.acquire(&issue).expect("floor"),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("fs_floor_fsync", |b| {
            b.iter_batched(
                || fresh.next(),
                |issue| s.floor.acquire_durable(&issue).expect("floor"),
                BatchSize::SmallInput,
            )
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("acquire_release_one_issue");
        let issue = IssueId::new("cycle-c").expect("valid");
        g.bench_function("git_lease", |b| {
            b.iter(|| git_cycle(&s.git_cycle, &issue, fx))
        });
        g.bench_function("sqlite_normal", |b| {
            b.iter(|| sql_cycle(&mut s.normal, "cycle-c", now))
        });
        g.bench_function("sqlite_full", |b| {
            b.iter(|| sql_cycle(&mut s.full, "cycle-c", now))
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("acquire_at_scale");
        let mut fresh = Fresh::new("c");
        g.bench_function("git_lease_1k", |b| {
            b.iter_batched(
                || fresh.next_id(),
                |issue| git_acquire(&s.small, &issue, fx),
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("git_lease_{}", fx.large), |b| {
            b.iter_batched(
                || fresh.next_id(),
                |issue| git_acquire(&s.large, &issue, fx),
                BatchSize::SmallInput,
            )
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("list");
        g.sample_size(10);
        g.warm_up_time(Duration::from_millis(500));
        g.bench_function("git_lease_1k", |b| {
            b.iter(|| black_box(s.small_list.list().expect("list").len()))
        });
        g.bench_function("sqlite_1k", |b| {
            b.iter(|| black_box(s.small_db.list_live(now).expect("list").len()))
        });
        g.bench_function(format!("git_lease_{}", fx.large), |b| {
            b.iter(|| black_box(s.large_list.list().expect("list").len()))
        });
        g.bench_function(format!("git_lease_cold_{}", fx.large), |b| {
            b.iter(|| black_box(cold_list(&s.large_list)))
        });
        g.bench_function(format!("sqlite_{}", fx.large), |b| {
            b.iter(|| black_box(s.large_db.list_live(now).expect("list").len()))
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("batch");
        g.sample_size(10);
        let mut n = 0u64;
        g.bench_function("git_lease_apply_batch_100", |b| {
            b.iter_batched(
                || {
                    n += 1;
                    (0..100)
                        .map(|i| {
                            let id = IssueId::new(&format!("cb{n}-{i}")).expect("a valid id");
                            (id, Operation::Acquire(fx.claim.clone()))
                        })
                        .collect::<Vec<_>>()
                },
                |ops| black_box(s.git.apply_batch(&ops, fx.now).expect("batch")),
                BatchSize::SmallInput,
            )
        });
        let mut m = 0u64;
        g.bench_function("sqlite_normal_100_in_one_transaction", |b| {
            b.iter_batched(
                || {
                    m += 1;
                    (0..100).map(|i| format!("cs{m}-{i}")).collect::<Vec<_>>()
                },
                |issues| {
                    black_box(
                        s.normal
                            .acquire_many(&issues, "alice@example.com", Some(3600), now)
                            .expect("batch"),
                    )
                },
                BatchSize::SmallInput,
            )
        });
        g.finish();
    }
}

/// One table of the paired section.
struct Table {
    title: String,
    unit: &'static str,
    figures: Vec<Figure>,
    /// (a, b): report a ÷ b, the median of same-round ratios.
    ratios: Vec<(usize, usize)>,
    /// (label, as, bs): report (sum of as) ÷ (sum of bs), the median of same-round ratios.
    pooled: Vec<(String, Vec<usize>, Vec<usize>)>,
}

fn ratio(figs: &[Figure], a: usize, b: usize) -> (f64, f64, f64) {
    let r: Vec<f64> = figs[a]
        .rounds
        .iter()
        .zip(&figs[b].rounds)
        .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
        .collect();
    (median(&r), quantile(&r, 0.25), quantile(&r, 0.75))
}

impl Table {
    fn markdown(&self) -> String {
        let mut out = format!(
            "### {}\n\n| variant | median per {} | {}s per second |\n|---|---:|---:|\n",
            self.title, self.unit, self.unit
        );
        for f in &self.figures {
            out += &format!(
                "| {} | {} | {:.0} |\n",
                f.name,
                fmt_duration(f.median),
                1.0 / f.median.as_secs_f64()
            );
        }
        out += "\n| ratio | median of same-round ratios | IQR |\n|---|---:|---|\n";
        for &(a, b) in &self.ratios {
            let (m, lo, hi) = ratio(&self.figures, a, b);
            out += &format!(
                "| {} ÷ {} | {m:.2}x | {lo:.2}–{hi:.2} |\n",
                self.figures[a].name, self.figures[b].name
            );
        }
        for (label, a, b) in &self.pooled {
            let sum = |ix: &[usize], r: usize| -> f64 {
                ix.iter()
                    .map(|&i| self.figures[i].rounds[r].as_secs_f64())
                    .sum()
            };
            let r: Vec<f64> = (0..self.figures[0].rounds.len())
                .map(|r| sum(a, r) / sum(b, r))
                .collect();
            out += &format!(
                "| {label} | {:.2}x | {:.2}–{:.2} |\n",
                median(&r),
                quantile(&r, 0.25),
                quantile(&r, 0.75)
            );
        }
        out.push('\n');
        out
    }
}

fn paired_section(fx: &Fixture, s: &mut Subjects) -> Vec<Table> {
    let now = git_lease_bench::NOW;
    let rounds = env_u64("GIT_LEASE_BENCH_ROUNDS", 15) as usize;
    let mut tables = Vec::new();
    {
        let mut f1 = Fresh::new("p");
        let mut f2 = Fresh::new("p");
        let mut f3 = Fresh::new("p");
        let mut f4 = Fresh::new("p");
        let mut f5 = Fresh::new("q");
        let mut f6 = Fresh::new("f");
        let (git, normal, full, floor) = (&s.git, &mut s.normal, &mut s.full, &mut s.floor);
        let git_fsync = &s.git_fsync;
        let floor = std::cell::RefCell::new(floor);
        let mut vs = [
            Variant::new("git-lease acquire", || git_acquire(git, &f1.next_id(), fx)),
            Variant::new("sqlite NORMAL acquire", || {
                sql_acquire(normal, &f2.next(), now)
            }),
            Variant::new("sqlite FULL acquire", || sql_acquire(full, &f3.next(), now)),
            Variant::new("fs floor (3 objects + ref lock)", || {
                floor.borrow_mut().acquire(&f4.next()).expect("floor")
            }),
            Variant::new("fs floor, fsynced", || {
                floor
                    .borrow_mut()
                    .acquire_durable(&f5.next())
                    .expect("floor")
            }),
            Variant::new("git-lease acquire, fsynced (lease.fsync=true)", || {
                git_acquire(git_fsync, &f6.next_id(), fx)
            }),
        ];
        tables.push(Table {
            title: "In-process acquire of a new issue".into(),
            unit: "op",
            figures: paired(&mut vs, rounds, 40),
            ratios: vec![(0, 1), (0, 2), (0, 3), (0, 4), (5, 4), (5, 2), (5, 0)],
            pooled: Vec::new(),
        });
    }
    {
        let issue = IssueId::new("cycle-p").expect("valid");
        let (git, normal, full) = (&s.git_cycle, &mut s.normal, &mut s.full);
        let mut vs = [
            Variant::new("git-lease acquire+release", || git_cycle(git, &issue, fx)),
            Variant::new("sqlite NORMAL acquire+release", || {
                sql_cycle(normal, "cycle-p", now)
            }),
            Variant::new("sqlite FULL acquire+release", || {
                sql_cycle(full, "cycle-p", now)
            }),
        ];
        tables.push(Table {
            title: "In-process acquire+release cycles on one issue (2 transitions per cycle)"
                .into(),
            unit: "cycle",
            figures: paired(&mut vs, rounds, 20),
            ratios: vec![(0, 1), (0, 2)],
            pooled: Vec::new(),
        });
    }
    {
        // Two repositories of each size: where a repository's directories land on the disk
        // (which ext4 block group, and how many inodes were freed there in the last minutes)
        // moves its file creation cost by several times on this journal-less ext4; the a/b
        // pairs show that spread next to the effect of size.
        let mut f = [
            Fresh::new("p"),
            Fresh::new("p"),
            Fresh::new("p"),
            Fresh::new("p"),
        ];
        let [f1, f2, f3, f4] = &mut f;
        let (small, large, small_b, large_b) = (&s.small, &s.large, &s.small_b, &s.large_b);
        let mut vs = [
            Variant::new("git-lease acquire, 1k existing (a)", || {
                git_acquire(small, &f1.next_id(), fx)
            }),
            Variant::new(
                format!("git-lease acquire, {} existing (a)", fx.large),
                || git_acquire(large, &f2.next_id(), fx),
            ),
            Variant::new("git-lease acquire, 1k existing (b)", || {
                git_acquire(small_b, &f3.next_id(), fx)
            }),
            Variant::new(
                format!("git-lease acquire, {} existing (b)", fx.large),
                || git_acquire(large_b, &f4.next_id(), fx),
            ),
        ];
        tables.push(Table {
            title: format!(
                "In-process acquire with 1k vs {} existing leases (packed, after git gc; two repositories of each size)",
                fx.large
            ),
            unit: "op",
            figures: paired(&mut vs, rounds, 40),
            ratios: vec![(1, 0), (3, 2), (3, 0), (1, 2), (2, 0)],
            pooled: vec![(
                format!("both {} ÷ both 1k", fx.large),
                vec![1, 3],
                vec![0, 2],
            )],
        });
    }
    {
        // 100 acquires of new issues per operation, git-lease batched (one ref transaction),
        // git-lease one by one, SQLite in one transaction.
        const N: usize = 100;
        let (git, git_fsync, normal, full) = (&s.git, &s.git_fsync, &mut s.normal, &mut s.full);
        let claim = &fx.claim;
        let batch_of = |prefix: &str, n: &mut u64| -> Vec<(IssueId, Operation)> {
            *n += 1;
            (0..N)
                .map(|i| {
                    let id = IssueId::new(&format!("{prefix}{n}-{i}")).expect("a valid id");
                    (id, Operation::Acquire(claim.clone()))
                })
                .collect()
        };
        let (mut n1, mut n2, mut n3, mut n4, mut n5) = (0, 0, 0, 0, 0);
        let mut vs = [
            Variant::new(format!("git-lease apply_batch, {N} acquires"), || {
                let ops = batch_of("ba", &mut n1);
                let r = git.apply_batch(&ops, fx.now).expect("batch");
                assert!(r.iter().all(|r| r.wrote));
            }),
            Variant::new(format!("git-lease {N} x acquire"), || {
                for (issue, _) in batch_of("bs", &mut n2) {
                    git_acquire(git, &issue, fx);
                }
            }),
            Variant::new(
                format!("sqlite NORMAL, {N} acquires in one transaction"),
                || {
                    n3 += 1;
                    let issues: Vec<String> = (0..N).map(|i| format!("bn{n3}-{i}")).collect();
                    let r = normal
                        .acquire_many(&issues, "alice@example.com", Some(3600), now)
                        .expect("batch");
                    assert!(r.iter().all(|r| r.wrote));
                },
            ),
            Variant::new(
                format!("sqlite FULL, {N} acquires in one transaction"),
                || {
                    n4 += 1;
                    let issues: Vec<String> = (0..N).map(|i| format!("bf{n4}-{i}")).collect();
                    let r = full
                        .acquire_many(&issues, "alice@example.com", Some(3600), now)
                        .expect("batch");
                    assert!(r.iter().all(|r| r.wrote));
                },
            ),
            Variant::new(
                format!("git-lease apply_batch, {N} acquires, fsynced"),
                || {
                    let ops = batch_of("bd", &mut n5);
                    let r = git_fsync.apply_batch(&ops, fx.now).expect("batch");
                    assert!(r.iter().all(|r| r.wrote));
                },
            ),
        ];
        tables.push(Table {
            title: format!(
                "In-process batch of {N} acquires of new issues (per batch; per acquire = ÷ {N})"
            ),
            unit: "batch",
            figures: paired(&mut vs, rounds, 2),
            ratios: vec![(0, 1), (0, 2), (0, 3), (4, 3), (4, 0)],
            pooled: Vec::new(),
        });
    }
    {
        let (large, db) = (&s.large_list, &s.large_db);
        let mut vs = [
            Variant::new(format!("git-lease list, {}, warm", fx.large), || {
                black_box(large.list().expect("list").len());
            }),
            Variant::new(format!("sqlite list live, {}", fx.large), || {
                black_box(db.list_live(now).expect("list").len());
            }),
            Variant::new(
                format!("git-lease list, {}, cold (list cache removed)", fx.large),
                || {
                    black_box(cold_list(large));
                },
            ),
        ];
        tables.push(Table {
            title: format!(
                "In-process list of {} leases (80% live; after git gc; warm = list cache present)",
                fx.large
            ),
            unit: "list",
            figures: paired(&mut vs, rounds.min(7), 1),
            ratios: vec![(0, 1), (2, 1), (2, 0)],
            pooled: Vec::new(),
        });
    }
    tables
}

fn out_dir() -> PathBuf {
    std::env::var_os("GIT_LEASE_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target")
                .join("bench-results")
        })
}

fn main() {
    let fx = Fixture::new();
    let mut s = Subjects::new(&fx);
    // Let the setup's writes (the populated repositories and their copies, ~100 MB at 100k)
    // reach the disk before timing anything, or the first benchmarks time the writeback.
    let _ = std::process::Command::new("sync").status();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    if std::env::var("GIT_LEASE_BENCH_CRITERION").as_deref() != Ok("0") {
        criterion_groups(&mut c, &fx, &mut s);
        c.final_summary();
    }
    if std::env::var("GIT_LEASE_BENCH_PAIRED").as_deref() == Ok("0") {
        return;
    }
    let tables = paired_section(&fx, &mut s);
    let mut text = format!(
        "## In-process, paired (rounds alternate the variants; {} rounds)\n\nscratch: {} ({})\n\n",
        env_u64("GIT_LEASE_BENCH_ROUNDS", 15),
        fx.root.display(),
        git_lease_bench::fs_type(&fx.root).unwrap_or_default()
    );
    for t in &tables {
        text += &t.markdown();
    }
    println!("{text}");
    let dir = out_dir();
    std::fs::create_dir_all(&dir).expect("results directory");
    let path = dir.join("inprocess.md");
    std::fs::write(&path, &text).expect("write results");
    eprintln!("wrote {}", path.display());
    if std::env::var("GIT_LEASE_BENCH_KEEP").as_deref() == Ok("1") {
        // Deleting ~100k files frees inodes that make file creation nearby slow for minutes
        // on a journal-less ext4; keep them when another benchmark runs right after.
        let kept = fx._dir.keep();
        eprintln!("kept {}", kept.display());
    }
}
