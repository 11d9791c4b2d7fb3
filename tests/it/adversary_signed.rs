//! The generated adversary of signed ledgers: random allowed signers lists (each user's key
//! listed or not, its namespaces, `valid-after` and `valid-before` windows, the
//! administrators), and random ledgers of honest attempts (any user, any step, the clock moving
//! on), each commit signed by the actor's key, another user's or none, its committer time the
//! event's own, within `lease.maxClockSkew` of it, or beyond. Each ledger is served by a
//! hookless `git daemon`, where anyone writes anything, and read by a fresh clone requiring
//! signatures.
//!
//! Unlike [`crate::adversary`], an oracle written from docs/FORMAT.md ("Signed events") says
//! which steps are signed as they must be; after every case these must hold:
//!
//! 1. the steps `verify --remote` refuses with the rule `signature` are exactly those the
//!    oracle refuses: a signer, listed, in the `git` namespace, valid at the event's `at`,
//!    whose committer time is within the skew of `at`, whose name is the principal the step
//!    needs (an administrator's for a revoke);
//! 2. `show --remote` takes the ledger (exit 0) exactly when `verify --remote` finds nothing
//!    wrong with it, and refuses it otherwise (exit 1);
//! 3. after the list is replaced by another generated one, both hold again in the same clone:
//!    what it verified under the first list is verified again under the second.
//!
//! The run is deterministic (`GIT_LEASE_ADVERSARY_SEED`, no persisted failures);
//! `GIT_LEASE_ADVERSARY_SIGNED_CASES` (default 32) sets the number of cases. The counts are
//! printed at the end (`--nocapture` shows them).

use std::cell::RefCell;
use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use serde_json::Value;

use crate::adversary::{action, env_number, honest, instant, time, ttl, Action, DEFAULT_SEED};
use crate::env::{rfc3339, t0, TestRepo};
use crate::forge;
use crate::server::{lease, Server};
use crate::signatures::{path, ssh_keygen};

/// The users; each has a key, which a list may leave out.
const USERS: [&str; 4] = ["alice", "bob", "carol", "ops"];
/// The default `lease.maxClockSkew`, in seconds.
const SKEW_S: i64 = 300;

/// The `namespaces=` option of a key's line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Namespaces {
    Absent,
    Git,
    /// `namespaces="file"`: the key signs no commit.
    Other,
}

/// One user's line of a list.
#[derive(Clone, Debug)]
struct Line {
    listed: bool,
    namespaces: Namespaces,
    /// Seconds after T0.
    valid_after: Option<i64>,
    valid_before: Option<i64>,
}

/// An allowed signers list: a line per user, and who is an administrator.
#[derive(Clone, Debug)]
struct List {
    lines: Vec<Line>,
    admins: Vec<bool>,
}

/// Whose key signs a step.
#[derive(Clone, Copy, Debug)]
enum Signer {
    /// The one acting.
    Actor,
    User(usize),
    Unsigned,
}

/// One generated step: the clock moves on by `gap` seconds, then `who` attempts `action`.
#[derive(Clone, Debug)]
struct Step {
    gap: i64,
    /// `None`: the holder (or the last one; alice first).
    who: Option<usize>,
    action: Action,
    ttl: Option<i64>,
    signer: Signer,
    /// The committer time minus the event's `at`, in seconds.
    committed: i64,
}

#[derive(Clone, Debug)]
struct Case {
    list: List,
    later: List,
    steps: Vec<Step>,
}

fn line() -> impl Strategy<Value = Line> {
    let namespaces = prop_oneof![
        3 => Just(Namespaces::Absent),
        6 => Just(Namespaces::Git),
        1 => Just(Namespaces::Other),
    ];
    (
        prop::bool::weighted(0.9),
        namespaces,
        prop::option::weighted(0.15, 0i64..1500),
        prop::option::weighted(0.2, 0i64..6000),
    )
        .prop_map(|(listed, namespaces, valid_after, valid_before)| Line {
            listed,
            namespaces,
            valid_after,
            valid_before,
        })
}

fn list() -> impl Strategy<Value = List> {
    (
        prop::collection::vec(line(), USERS.len()),
        prop::collection::vec(prop::bool::weighted(0.5), USERS.len()),
    )
        .prop_map(|(lines, admins)| List { lines, admins })
}

fn step() -> impl Strategy<Value = Step> {
    let signer = prop_oneof![
        12 => Just(Signer::Actor),
        2 => (0..USERS.len()).prop_map(Signer::User),
        1 => Just(Signer::Unsigned),
    ];
    let committed = prop_oneof![
        12 => Just(0i64),
        2 => -SKEW_S..=SKEW_S,
        1 => (SKEW_S + 1..=3000, any::<bool>()).prop_map(|(s, ahead)| if ahead { s } else { -s }),
    ];
    let gap = prop_oneof![2 => Just(0i64), 3 => 1i64..=120, 2 => 121i64..=900];
    // Mostly the holder acts (`None`), as in a team's ledger; anyone else at times.
    let who = prop::option::weighted(0.4, 0..USERS.len());
    (gap, who, action(), ttl(), signer, committed).prop_map(
        |(gap, who, action, ttl, signer, committed)| Step {
            gap,
            who,
            action,
            ttl,
            signer,
            committed,
        },
    )
}

fn case() -> impl Strategy<Value = Case> {
    (list(), list(), prop::collection::vec(step(), 1..=8)).prop_map(|(list, later, steps)| Case {
        list,
        later,
        steps,
    })
}

/// `secs` after T0 as a list's time (`YYYYMMDDHHMMSSZ`).
fn list_time(secs: i64) -> String {
    instant(secs).format("%Y%m%d%H%M%SZ").to_string()
}

/// The text of `list`, the keys in `keys`.
fn list_text(list: &List, keys: &std::path::Path) -> String {
    let admins: Vec<&str> = (0..USERS.len())
        .filter(|i| list.admins[*i])
        .map(|i| USERS[i])
        .collect();
    let mut text = format!("# lease-admins: {}\n", admins.join(", "));
    for (i, line) in list.lines.iter().enumerate().filter(|(_, l)| l.listed) {
        let mut options = Vec::new();
        match line.namespaces {
            Namespaces::Absent => {}
            Namespaces::Git => options.push("namespaces=\"git\"".to_owned()),
            Namespaces::Other => options.push("namespaces=\"file\"".to_owned()),
        }
        if let Some(t) = line.valid_after {
            options.push(format!("valid-after=\"{}\"", list_time(t)));
        }
        if let Some(t) = line.valid_before {
            options.push(format!("valid-before=\"{}\"", list_time(t)));
        }
        let public =
            std::fs::read_to_string(keys.join(format!("{}.pub", USERS[i]))).expect("a public key");
        text += &format!("{} {} {public}", USERS[i], options.join(","));
    }
    text
}

/// The principal `next` (on top of `prev`) needs, and whether it must be an administrator,
/// as docs/FORMAT.md's table says.
fn needed(prev: Option<&Value>, next: &Value) -> (Option<String>, bool) {
    let text = |v: &Value, f: &str| v[f].as_str().map(str::to_owned);
    let prev_holder = prev.and_then(|p| text(p, "holder"));
    match next["event"].as_str().unwrap_or("?") {
        "acquire" => (text(next, "holder"), false),
        "reacquire" | "renew" => (prev_holder.or(text(next, "holder")), false),
        "revoke" => (text(next, "by"), true),
        _ => {
            let at = time(&next["at"]);
            let live = prev.is_some_and(|p| {
                p["holder"].is_string()
                    && time(&p["expires_at"]).is_none_or(|e| at.is_some_and(|a| a < e))
            });
            if live {
                (prev_holder, false)
            } else {
                let actor = text(next, "by")
                    .or(text(next, "holder"))
                    .or(text(next, "previous_holder"));
                (actor, false)
            }
        }
    }
}

/// Whether the oracle takes `next`'s signature by `signer`, its event at `at` and its commit
/// at `committed` (seconds after T0).
fn signed_as_needed(
    list: &List,
    prev: Option<&Value>,
    next: &Value,
    signer: Option<usize>,
    at: i64,
    committed: i64,
) -> bool {
    let Some(k) = signer else { return false };
    let line = &list.lines[k];
    let valid =
        line.valid_after.is_none_or(|t| at >= t) && line.valid_before.is_none_or(|t| at <= t);
    let (principal, admin) = needed(prev, next);
    (committed - at).abs() <= SKEW_S
        && line.listed
        && line.namespaces != Namespaces::Other
        && valid
        && principal.as_deref() == Some(USERS[k])
        && (!admin || list.admins[k])
}

/// The counts printed at the end.
#[derive(Default, Debug)]
struct Tally {
    runs: usize,
    steps: usize,
    /// Steps the oracle refuses, under the first list and under the second.
    refused_steps: usize,
    /// Ledgers taken by `show --remote`, under either list.
    taken: usize,
    refused: usize,
    /// Ledgers whose verdict the change of list turned either way.
    turned: usize,
}

/// What one case's world keeps across cases: the server and the keys.
struct World {
    server: Server,
    keys: std::path::PathBuf,
}

impl World {
    fn new() -> World {
        let server = Server::daemon();
        let keys = server.repo().scratch("keys");
        for who in USERS {
            let key = keys.join(who);
            ssh_keygen(&["-q", "-t", "ed25519", "-N", "", "-C", who, "-f", path(&key)]);
        }
        World { server, keys }
    }
}

/// The ledger of `issue`: each step's record, commit, signer and times, written in the server.
struct Written {
    /// `(commit, record, signer, at, committed)`, oldest first.
    steps: Vec<(String, Value, Option<usize>, i64, i64)>,
    /// The clock after the last step, seconds after T0.
    end: i64,
}

fn write(world: &World, issue: &str, steps: &[Step]) -> Written {
    let repo = world.server.repo();
    let mut written = Written {
        steps: Vec::new(),
        end: 0,
    };
    for (k, s) in steps.iter().enumerate() {
        written.end += s.gap;
        let prev = written.steps.last().map(|(_, r, ..)| r);
        let action = if k == 0 { Action::Acquire } else { s.action };
        let last = prev.and_then(|p| p["holder"].as_str().or(p["previous_holder"].as_str()));
        let who = s
            .who
            .or_else(|| USERS.iter().position(|u| Some(*u) == last))
            .unwrap_or(0);
        let record = honest(
            issue,
            prev,
            USERS[who],
            action,
            s.ttl,
            instant(written.end),
            "-",
        );
        let at = (time(&record["at"]).expect("an honest time") - t0()).num_seconds();
        let signer = match s.signer {
            Signer::Actor => Some(who),
            Signer::User(i) => Some(i),
            Signer::Unsigned => None,
        };
        let blob = forge::blob(repo, &forge::lease_bytes(&record));
        let tree = forge::tree(repo, &[("100644", "lease.json", &blob)]);
        let parents: Vec<&str> = written
            .steps
            .last()
            .map(|(c, ..)| c.as_str())
            .into_iter()
            .collect();
        let key = signer.map(|i| world.keys.join(USERS[i]));
        let committed = at + s.committed;
        let commit = forge::commit_signed(
            repo,
            &tree,
            &parents,
            &rfc3339(instant(committed)),
            &format!("{} {issue}", record["event"]),
            key.as_deref(),
        );
        written.steps.push((commit, record, signer, at, committed));
    }
    let tip = &written.steps.last().expect("a step").0;
    forge::set_ledger(repo, issue, tip);
    written
}

/// Checks properties 1 and 2 for `reader` under `list`; returns whether the ledger was taken.
fn judged(
    reader: &TestRepo,
    issue: &str,
    list: &List,
    written: &Written,
    tally: &mut Tally,
) -> Result<bool, String> {
    let mut expected = BTreeSet::new();
    let mut prev: Option<&Value> = None;
    for (commit, record, signer, at, committed) in &written.steps {
        if !signed_as_needed(list, prev, record, *signer, *at, *committed) {
            expected.insert(commit.clone());
        }
        prev = Some(record);
    }
    tally.refused_steps += expected.len();
    let now = written.end + 10;
    let verify = lease(
        reader,
        now,
        &["--json", "verify", "--remote", "origin", issue],
    );
    if ![0, 1].contains(&verify.code) {
        return Err(format!("(1) verify --remote failed:\n{verify}"));
    }
    // The server holds the ledgers of the cases before: only this one's findings count.
    let findings: Vec<Value> = verify.json()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["issue"] == issue)
        .cloned()
        .collect();
    let refused: BTreeSet<String> = findings
        .iter()
        .filter(|f| f["rule"] == "signature")
        .filter_map(|f| f["commit"].as_str().map(str::to_owned))
        .collect();
    if refused != expected {
        return Err(format!(
            "(1) verify refuses the signatures of {refused:?}, the oracle those of {expected:?}:\n{verify}"
        ));
    }
    let show = lease(reader, now, &["show", "--remote", "origin", issue]);
    let taken = findings.is_empty();
    if show.code != if taken { 0 } else { 1 } {
        return Err(format!(
            "(2) show --remote after verify found {} findings:\n{show}\n{verify}",
            findings.len()
        ));
    }
    if taken {
        tally.taken += 1;
    } else {
        tally.refused += 1;
    }
    Ok(taken)
}

fn run_case(world: &World, case: &Case, tally: &mut Tally) -> Result<(), String> {
    tally.runs += 1;
    tally.steps += case.steps.len();
    let issue = format!("s{}", tally.runs);
    let written = write(world, &issue, &case.steps);
    let reader = world.server.client("reader");
    let file = reader.scratch("list").join("allowed_signers");
    reader.git(&["config", "lease.requireSignatures", "true"]);
    reader.git(&["config", "lease.allowedSigners", path(&file)]);
    let shown = |list: &List| list_text(list, &world.keys);
    std::fs::write(&file, shown(&case.list)).expect("write the list");
    let first = judged(&reader, &issue, &case.list, &written, tally)
        .map_err(|e| format!("{e}\nthe list:\n{}", shown(&case.list)))?;
    std::fs::write(&file, shown(&case.later)).expect("write the list");
    let second = judged(&reader, &issue, &case.later, &written, tally).map_err(|e| {
        format!(
            "(3) after the list changed: {e}\nthe list:\n{}",
            shown(&case.later)
        )
    })?;
    if first != second {
        tally.turned += 1;
    }
    Ok(())
}

#[test]
fn generated_signed_ledgers_are_judged_as_the_oracle_judges_them() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let cases: u32 = env_number("GIT_LEASE_ADVERSARY_SIGNED_CASES", 32);
    let seed: u64 = env_number("GIT_LEASE_ADVERSARY_SEED", DEFAULT_SEED);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        max_shrink_iters: 200,
        max_shrink_time: 60_000,
        ..Config::default()
    });
    let world = World::new();
    let tally = RefCell::new(Tally::default());
    let result = runner.run(&case(), |case| {
        run_case(&world, &case, &mut tally.borrow_mut()).map_err(TestCaseError::fail)
    });
    let t = tally.into_inner();
    eprintln!(
        "generated signed ledgers (seed {seed}, {cases} cases): {} runs (shrinking included), {} steps, \
         {} step verdicts refused by the oracle, {} ledgers taken and {} refused, {} turned by the change of list",
        t.runs, t.steps, t.refused_steps, t.taken, t.refused, t.turned
    );
    match result {
        Ok(()) => assert!(t.taken > 0 && t.refused > 0, "both verdicts met: {t:?}"),
        Err(TestError::Fail(reason, minimal)) => panic!(
            "a generated signed ledger was judged otherwise than the oracle judges it.\n\n{reason}\n\nThe minimal case (rerun with GIT_LEASE_ADVERSARY_SEED={seed}):\n{minimal:#?}"
        ),
        Err(TestError::Abort(why)) => panic!("the generated adversary aborted: {why}"),
    }
}
