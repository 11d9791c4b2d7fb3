//! Histories under faults: real `git lease` clients claim, renew, release, check and push
//! fenced work through a real `git daemon` (even seeds) or `git http-backend` behind a web
//! server, the pusher its authenticated user (odd seeds), while a fault-injecting proxy
//! ([`crate::proxy`]) delays, cuts and drops the server's replies and has the server's
//! receive-pack killed (`kill -9`: before and while it reads the pack, with its ref locks taken,
//! before its report; the locks it leaves are removed between epochs, as an administrator
//! does), clients are killed (`kill -9`) and paused (`SIGSTOP` past their expiry, then
//! `SIGCONT`), and the hook's clock (`lease.hookNow`) moves; every operation is recorded and the history is checked for linearizability against
//! the lease rules ([`crate::linearizable`]), and directly for what fencing promises.
//!
//! **Time.** Time is a controlled variable: a history is a sequence of epochs, each with one
//! server clock `T` (`lease.hookNow`), and every client of an epoch runs with `GIT_LEASE_NOW`
//! at `T` (lease commands one second either side of it now and then, so that expiry instants
//! are crossed by disagreeing clocks). Between epochs the clock moves forward: a few seconds,
//! to around the TTL (its expiry instant give or take a second), or well past it. The model
//! judges each operation at the instant its command was given, as the rules do. A paused
//! client's operation spans epochs: its command's instant is an old `T`, while the server
//! judges its push at a later one.
//!
//! **What is recorded.** Each operation's invocation and completion instants are read from one
//! monotonic clock (the test process's, around the spawned process), with its arguments and
//! its outcome: the JSON answer for exit 0 and 3; *unknown* for exit 1 (a lost reply, a cut
//! connection: the push may or may not have landed) and for a killed client; left out, as
//! known not to have happened, for a refusal by the server's lease rules (`git-lease:
//! refused`) and a lost race (exit 5), which change nothing.
//!
//! **What is checked.** The history is linearizable (per issue); no token is granted twice per
//! issue, neither in the answers nor along the server's ledger; at no instant two tenures are
//! live (each new tenure starts over a free or expired record); a fenced push that landed was
//! pushed with a token live, by the server's ledger, at a server clock of its span; the served
//! repository verifies and passes `git fsck`, and a mirror synced afterwards verifies.
//!
//! The run is seeded and bounded (every fault counted, every wait bounded); these variables
//! change it, and a failure prints the seed of its history:
//!
//! | variable | default | what |
//! |---|---|---|
//! | `GIT_LEASE_FAULTS_SEED` | 20261202 | the seed of the first history (history `i` has seed + `i`) |
//! | `GIT_LEASE_FAULTS_HISTORIES` | 30 | how many histories |
//! | `GIT_LEASE_FAULTS_FIGURES` | unset | a file to append the run's figures to (one JSON line) |

mod client;
mod ledgers;

use client::*;
use ledgers::*;

use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::env::{rfc3339, t0, Run, TestRepo};
use crate::linearizable::{self, Input, Model, Op, Output};
use crate::proxy::{self, Fault, Phase, Proxy, Service, Way};
use crate::server::Server;

/// The TTL of every claim, in seconds.
const TTL: i64 = 30;

/// What one operation is.
#[derive(Clone, Debug)]
enum Kind {
    Acquire,
    Renew,
    Release,
    Check(u64),
    Push,
}

/// How an operation is disturbed besides its connections' faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disturb {
    None,
    Kill,
    Pause,
}

/// The figures of a run.
#[derive(Default, Debug, Clone)]
pub struct Figures {
    pub histories: usize,
    /// Of which over HTTP.
    pub http: usize,
    pub operations: usize,
    pub unknown: usize,
    pub left_out: usize,
    pub faults: BTreeMap<&'static str, usize>,
}

impl Figures {
    fn add(&mut self, other: &Figures) {
        self.histories += other.histories;
        self.http += other.http;
        self.operations += other.operations;
        self.unknown += other.unknown;
        self.left_out += other.left_out;
        for (k, v) in &other.faults {
            *self.faults.entry(k).or_default() += v;
        }
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A paused client's thread, and what tells it the server's clock (negative: wake up).
type Zombie = (
    std::thread::JoinHandle<(Client, Vec<Done>)>,
    mpsc::Sender<i64>,
);

/// What a history runs against.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Over HTTP (`git http-backend` behind a web server, the pusher its authenticated user),
    /// else `git daemon`.
    pub http: bool,
    /// Whether the server's receive-pack is killed at seeded points of pushes.
    pub kills: bool,
}

impl Options {
    /// The campaign's: odd seeds over HTTP, even ones through `git daemon`, receive-pack
    /// killed in both.
    pub fn of(seed: u64) -> Options {
        Options {
            http: seed % 2 == 1,
            kills: true,
        }
    }
}

/// How a history's clients reach its server.
struct Setup {
    upstream: u16,
    http: bool,
    kills: bool,
    /// Where the proxies tell the killer hook what to kill ([`proxy::killer_hook`]).
    kill_dir: PathBuf,
}

/// Runs the history of `seed` as the campaign does ([`Options::of`]).
pub fn history(seed: u64) -> Figures {
    history_with(seed, Options::of(seed))
}

/// As an administrator would: once no receive-pack works in the served repository `bare`
/// (waited for, bounded), removes the lock files a killed one left behind. Returns how many.
fn clear_leftover_locks(bare: &Path) -> usize {
    for _ in 0..2000 {
        if !proxy::receive_pack_running(bare) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut found = Vec::new();
    let mut dirs = vec![bare.join("refs"), bare.join("reftable")];
    for top in ["packed-refs.lock", "HEAD.lock"] {
        if bare.join(top).exists() {
            found.push(bare.join(top));
        }
    }
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "lock") {
                found.push(path);
            }
        }
    }
    for lock in &found {
        let _ = std::fs::remove_file(lock);
    }
    found.len()
}

/// Runs the history of `seed` against `options`; panics, naming the seed, on any violation.
pub fn history_with(seed: u64, options: Options) -> Figures {
    let mut rng = fastrand::Rng::with_seed(seed);
    let clients = rng.usize(4..=16);
    let issues: Vec<String> = (1..=rng.usize(2..=3)).map(|i| i.to_string()).collect();
    let epochs = rng.usize(3..=5);
    let fences: Vec<String> = (0..clients).map(|k| format!("refs/heads/c{k}/*")).collect();
    let mut server = if options.http {
        let users: Vec<String> = (0..clients).map(holder).collect();
        let users: Vec<&str> = users.iter().map(String::as_str).collect();
        let server = Server::http(&users);
        server.config("lease.pusherEnv", "REMOTE_USER");
        server
    } else {
        Server::with_hook()
    };
    for glob in &fences {
        server.git(&["config", "--add", "lease.fence", glob]);
    }
    let kill_dir = if options.kills {
        proxy::install_killer(&server)
    } else {
        server.root().join("kills")
    };
    server.start_at(&now_at(0));
    let counts = FaultCounts::new(clients, if options.kills { 1 + clients / 4 } else { 0 });
    let setup = Setup {
        upstream: server.port(),
        http: options.http,
        kills: options.kills,
        kill_dir,
    };
    let mut pool: Vec<Client> = (0..clients)
        .map(|k| Client::new(k, seed, &setup, &fences, &counts))
        .collect();
    let start = Instant::now();
    let mut ops: Vec<Op> = Vec::new();
    let mut pushes: Vec<PushRecord> = Vec::new();
    let mut granted: HashMap<(String, u64), String> = HashMap::new();
    let mut figures = Figures {
        histories: 1,
        http: usize::from(options.http),
        ..Figures::default()
    };
    let mut known_tokens: HashMap<(usize, String), u64> = HashMap::new();
    let mut clock = 0i64;
    let mut kills = rng.usize(0..=2);
    // One pause per history, in an epoch that has later ones.
    let pause_epoch = rng.usize(0..epochs - 1);
    let mut zombie: Option<Zombie> = None;
    let mut wake_after = 0usize;
    let fail = |why: String| -> ! {
        panic!("history of seed {seed} (GIT_LEASE_FAULTS_SEED={seed} GIT_LEASE_FAULTS_HISTORIES=1): {why}")
    };
    let mut record = |done: Vec<Done>,
                      figures: &mut Figures,
                      ops: &mut Vec<Op>,
                      pushes: &mut Vec<PushRecord>| {
        for d in done {
            figures.operations += 1;
            figures.unknown += usize::from(d.unknown);
            figures.left_out += usize::from(d.left_out);
            if let Some((issue, token, who)) = d.acquired {
                if let Some(other) = granted.insert((issue.clone(), token), who.clone()) {
                    if other != who {
                        fail(format!(
                            "token {token} of issue {issue} was granted to {other} and to {who}"
                        ));
                    }
                }
            }
            ops.extend(d.op);
            pushes.extend(d.push);
        }
    };
    for epoch in 0..epochs {
        if epoch > 0 {
            clock += match rng.u8(..3) {
                0 => rng.i64(1..=10),
                1 => TTL + rng.i64(-1..=1),
                _ => 2 * TTL + rng.i64(0..=10),
            };
            server.config("lease.hookNow", &now_at(clock));
        }
        if let Some((_, wake)) = &zombie {
            let _ = wake.send(clock);
            if epoch == wake_after {
                let _ = wake.send(-1);
            }
        }
        let mut threads = Vec::new();
        let mut taken: Vec<Client> = Vec::new();
        for client in pool.drain(..) {
            taken.push(client);
        }
        let mut paused_rx = None;
        let pauser = (epoch == pause_epoch && zombie.is_none()).then(|| rng.usize(0..taken.len()));
        for (slot, mut client) in taken.into_iter().enumerate() {
            let n = rng.usize(1..=2);
            // At most one paused operation: a client paused twice would wait for a wake-up
            // the epochs no longer send.
            let mut pause_left = pauser == Some(slot);
            let plan: Vec<(Kind, String, i64, Disturb)> = (0..n)
                .map(|_| {
                    let issue = issues[rng.usize(..issues.len())].clone();
                    let kind = match rng.u8(..100) {
                        0..=34 => Kind::Acquire,
                        35..=49 => Kind::Renew,
                        50..=62 => Kind::Release,
                        63..=77 => Kind::Check(
                            known_tokens
                                .get(&(client.k, issue.clone()))
                                .copied()
                                .unwrap_or_else(|| rng.u64(1..=3)),
                        ),
                        _ => Kind::Push,
                    };
                    let offset = match (&kind, rng.u8(..6)) {
                        (Kind::Push, _) => 0,
                        (_, 0) => -1,
                        (_, 1) => 1,
                        _ => 0,
                    };
                    let disturb =
                        if pause_left && matches!(kind, Kind::Push | Kind::Renew | Kind::Acquire) {
                            pause_left = false;
                            Disturb::Pause
                        } else if kills > 0 && rng.u8(..20) == 0 {
                            kills -= 1;
                            Disturb::Kill
                        } else {
                            Disturb::None
                        };
                    (kind, issue, offset, disturb)
                })
                .collect();
            let pausing = plan.iter().any(|p| p.3 == Disturb::Pause);
            let (wake_tx, wake_rx) = mpsc::channel();
            let (paused_tx, prx) = mpsc::channel();
            if pausing {
                paused_rx = Some(prx);
            }
            let counts = counts.clone();
            let handle = std::thread::spawn(move || {
                let mut done = Vec::new();
                for (kind, issue, offset, disturb) in plan {
                    done.push(operate(
                        &mut client,
                        &kind,
                        &issue,
                        clock,
                        offset,
                        disturb,
                        start,
                        &wake_rx,
                        Some(&paused_tx),
                        &counts,
                    ));
                }
                (client, done)
            });
            threads.push((handle, pausing, wake_tx));
        }
        // A paused client leaves the epoch once it is stopped (or its command pushed nothing).
        for (handle, pausing, wake_tx) in threads {
            if pausing {
                let stopped = paused_rx
                    .as_ref()
                    .is_some_and(|rx| rx.recv_timeout(proxy::IO_TIMEOUT).is_ok());
                if stopped && !handle.is_finished() {
                    wake_after = epoch + rng.usize(1..=epochs - epoch - 1).max(1);
                    zombie = Some((handle, wake_tx));
                    continue;
                }
            }
            // Whatever happens, a client joined is never left waiting for a wake-up.
            drop(wake_tx);
            let (client, done) = handle.join().expect("a client thread");
            record(done, &mut figures, &mut ops, &mut pushes);
            pool.push(client);
        }
        if let Some((handle, wake)) = zombie.take_if(|_| epoch >= wake_after) {
            drop(wake);
            let (client, done) = handle.join().expect("the paused client");
            record(done, &mut figures, &mut ops, &mut pushes);
            pool.push(client);
        }
        pool.sort_by_key(|c| c.k);
        // A lock a killed receive-pack left behind wedges its ref: the administrator clears
        // it between epochs, and the next epoch's operations work again.
        for _ in 0..clear_leftover_locks(server.bare()) {
            counts.count("leftover lock removed");
        }
        // What each client knows of its tokens, for its checks.
        for o in &ops {
            if let Some(Output::Acquired { token }) = o.output {
                known_tokens.insert((o.client, o.issue.clone()), token);
            }
        }
    }
    if let Some((handle, wake)) = zombie.take() {
        drop(wake);
        let (client, done) = handle.join().expect("the paused client");
        record(done, &mut figures, &mut ops, &mut pushes);
        pool.push(client);
    }
    for _ in 0..clear_leftover_locks(server.bare()) {
        counts.count("leftover lock removed");
    }
    for kill in proxy::kills_done(&setup.kill_dir) {
        counts.count(match (kill.as_str(), options.http) {
            ("before-pack", false) => "receive-pack killed before the pack (daemon)",
            ("reading", false) => "receive-pack killed reading the pack (daemon)",
            ("prepared", false) => "receive-pack killed with its ref locks taken (daemon)",
            (_, false) => "receive-pack killed before its report (daemon)",
            ("before-pack", true) => "receive-pack killed before the pack (http)",
            ("reading", true) => "receive-pack killed reading the pack (http)",
            ("prepared", true) => "receive-pack killed with its ref locks taken (http)",
            (_, true) => "receive-pack killed before its report (http)",
        });
    }
    figures.faults = counts.counted();
    // The checks.
    if let Err(violation) = linearizable::check(Model::default(), &ops) {
        fail(violation.to_string());
    }
    for issue in &issues {
        check_ledger(&server, issue).unwrap_or_else(|why| fail(why));
    }
    for push in &pushes {
        let chain = server.leases(&push.issue);
        let live = push.clocks.iter().any(|&c| {
            tenure_live_at(
                &chain,
                push.token,
                &holder(push.client),
                t0() + Duration::seconds(c),
            )
        });
        if !live {
            fail(format!(
                "a fenced push of c{} to issue {} with token {} landed, but no server clock of its span {:?} had that tenure live; the server's ledger:\n{}",
                push.client, push.issue, push.token, push.clocks, summary(&chain)
            ));
        }
    }
    let verify = server.lease(&["verify"]);
    if verify.code != 0 {
        fail(format!("the served repository does not verify: {verify}"));
    }
    let fsck = server.git_run(&["fsck", "--no-progress", "--no-dangling"]);
    let complaints = fsck
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("notice:"))
        .count();
    if fsck.code != 0 || complaints > 0 {
        fail(format!("git fsck of the served repository: {fsck}"));
    }
    let mirror = server.mirror();
    let sync = mirror
        .lease()
        .now(&now_at(clock))
        .args(["sync", "origin"])
        .run();
    let verified = mirror.lease().now(&now_at(clock)).args(["verify"]).run();
    if sync.code != 0 || verified.code != 0 {
        fail(format!(
            "a mirror synced afterwards does not verify: {sync}\n{verified}"
        ));
    }
    drop(pool);
    figures
}

/// Runs `count` histories from `seed`, adding up their figures.
pub fn campaign(seed: u64, count: u64) -> Figures {
    let mut figures = Figures::default();
    for i in 0..count {
        figures.add(&history(seed + i));
    }
    figures
}

#[test]
fn seeded_histories_under_faults_are_linearizable_and_keep_fencing() {
    let seed = env_num("GIT_LEASE_FAULTS_SEED", 20261202);
    let count = env_num("GIT_LEASE_FAULTS_HISTORIES", 30);
    let figures = campaign(seed, count);
    let line = format!(
        "{{\"seed\": {seed}, \"histories\": {}, \"http\": {}, \"operations\": {}, \"unknown\": {}, \"left_out\": {}, \"faults\": {:?}, \"violations\": 0}}",
        figures.histories, figures.http, figures.operations, figures.unknown, figures.left_out, figures.faults
    );
    println!("{line}");
    if let Ok(path) = std::env::var("GIT_LEASE_FAULTS_FIGURES") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the figures file");
        writeln!(file, "{line}").expect("write the figures");
    }
    assert_eq!(figures.histories as u64, count);
}

/// The histories as they were drawn before HTTP and kills of receive-pack: `git daemon`
/// only, for the seeds kept as tests of what they found.
const DAEMON_ONLY: Options = Options {
    http: false,
    kills: false,
};

#[test]
fn a_history_whose_client_is_paused_twice_over_still_ends() {
    // Seed 41 once drew a client paused in two operations of one epoch; the second pause
    // waited for a wake-up the epochs no longer sent.
    history_with(41, DAEMON_ONLY);
}

#[test]
fn a_fenced_push_in_the_second_its_holder_releases_by_a_clock_behind_lands_under_that_tenure() {
    // Seed 224: c13 pushed fenced work at server clock 9, then released with its clock at 8;
    // the push came first, and the check once counted the tenure ended before it.
    history_with(224, DAEMON_ONLY);
}
