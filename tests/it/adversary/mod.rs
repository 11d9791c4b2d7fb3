//! The generated adversary: random sequences of honest and forged ledger steps, each pushed
//! through the real hook of a real server, and after every push that the server accepted, the
//! properties that every rule exists to keep, checked without any expected verdict, so that a
//! rule added later is covered without a new hand-written case.
//!
//! Each proptest case serves its own bare repository on a free port of 127.0.0.1, as
//! [`crate::attack`] does: `git http-backend` behind lighttpd (or the harness's own front) with
//! basic auth for alice, bob, carol and ops (an administrator, `lease.admins`), the pusher read
//! from `REMOTE_USER` (`lease.pusherEnv`), and the server's clock fixed by `lease.hookNow`,
//! which the hook reads from the served repository's configuration at every push, so a step
//! moves it forward with `git config` and no restart. Instants are seconds after
//! [`crate::env::T0`]; the default `lease.maxClockSkew` (5 minutes) applies.
//!
//! A step picks one of three issues, advances the server's clock (not at all, by a random
//! amount, or to an issue's expiry give or take two seconds), and picks a pusher: the issue's
//! holder or any user, authenticated as themselves, an anonymous pusher (`file://`, no
//! `REMOTE_USER`) or a user with the wrong password. On an issue never leased the step is an
//! acquire. It then pushes either what the real `git lease` client writes, run as that user
//! with its `GIT_LEASE_NOW` at the server's clock plus a random offset, or a commit forged
//! with plain git: the step an honest client would record from the server's current ledger
//! (acquire, renew, release, complete, abandon or revoke, at the pusher's own clock), left as
//! it is or mutated: the holder, the token, `by`, `previous_holder`, the event or the takeover
//! changed; times moved by random amounts, into the previous tenure or beyond the skew, or
//! spelled in ways RFC 3339 allows but the format does not (fractional seconds, `+00:00`,
//! `z`, `t`, a space for `T`, another offset); a process object added (on another machine, or
//! on this one, alive or gone); a session, a version, a missing or an unknown field; the
//! wrong issue, the wrong ref, an extra parent, a second step in the same push; or pushed as a
//! replace ref of the tip (`refs/replace/<tip>`), a rewind or a deletion.
//!
//! After every push that changed any ref of the server, these must hold:
//!
//! 1. `git lease verify` in the served repository is clean (exit 0);
//! 2. a client that follows the server takes every ledger the hook took: `git lease sync` in
//!    a clone kept for the whole case exits 0, refuses nothing and ends with the server's
//!    tips; `list --remote` and `show --remote` exit 0 and show the server's tips; and at the
//!    end of each case a fresh clone syncs and verifies clean;
//! 3. no token is issued twice: along each ledger (read with plain git, replace refs ignored)
//!    the token grows by one per new tenure and stays otherwise, ledgers only move forward, and
//!    no (issue, token) is ever the token of two acquires;
//! 4. no two tenures are live at once: for each issue, a tenure's interval (its start to the
//!    earlier of its expiry and the event that freed it, by the server's clock when each commit
//!    arrived, and by the recorded times) ends before the next tenure's begins, unless its
//!    recorded process is verifiably gone from this machine;
//! 5. a lease live by the server's clock is freed only by a push of its holder, or by an
//!    administrator's revoke;
//! 6. only an authenticated pusher moves a ledger, and a new tenure is the pusher's own;
//! 7. every time an accepted record holds is written as the format says
//!    (`YYYY-MM-DDTHH:MM:SSZ`).
//!
//! The run is deterministic (a fixed seed, no persisted failures); these variables change it:
//!
//! | variable | default | what |
//! |---|---|---|
//! | `GIT_LEASE_ADVERSARY_CASES` | 10 | proptest cases (one server each) |
//! | `GIT_LEASE_ADVERSARY_STEPS` | 14 | the most steps of one case |
//! | `GIT_LEASE_ADVERSARY_SEED` | 20261130 | the seed |
//! | `GIT_LEASE_ADVERSARY_SHRINK_SECS` | 120 | how long a failure may shrink (0: not at all) |
//!
//! Three fixed sequences go through the same case and the same properties (inputs, not
//! verdicts), so that the attacks the generator found first are tried on every run: a replace
//! ref of a live tip, a takeover dated inside the tenure it took over, and every other
//! spelling of an instant.
//!
//! Signed ledgers have a generated adversary of their own, [`crate::adversary_signed`]: lists,
//! validity windows and committer times, judged by every reader requiring signatures.
//!
//! The counts (cases run, steps tried, accepted, refused, and the checks of each acceptance)
//! are printed at the end (`--nocapture` shows them); a failure names the seed, the run, the
//! step, what was pushed and what verify or the client said, and the minimal case proptest
//! found.

mod records;
mod strategies;
mod world;

pub(crate) use records::*;
pub(crate) use strategies::*;
use world::*;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use serde_json::{json, Value};

use crate::env::{at, rfc3339, t0, Run, TestRepo};
use crate::forge;
use crate::server::Server;
use crate::session::{boot_id, start_ticks};

/// Who may push over http; the last one is the administrator.
const USERS: [&str; 4] = ["alice", "bob", "carol", "ops"];
/// `lease.admins`.
const ADMIN: &str = "ops";
/// The issues a case plays with.
const ISSUES: [&str; 3] = ["7", "gh/8", "x.9"];
/// The default `lease.maxClockSkew`, in seconds.
const SKEW_S: i64 = 300;
/// Every recorded event.
const EVENTS: [&str; 7] = [
    "acquire",
    "reacquire",
    "renew",
    "release",
    "complete",
    "abandon",
    "revoke",
];
/// Fields a forged record may lack.
const DROPPABLE: [&str; 8] = [
    "version",
    "issue",
    "event",
    "holder",
    "token",
    "at",
    "acquired_at",
    "expires_at",
];
pub(crate) use crate::env::{env_number, DEFAULT_SEED};

// ---------------------------------------------------------------------------------------------
// What a step is
// ---------------------------------------------------------------------------------------------

/// Who pushes.
#[derive(Clone, Copy, Debug)]
enum Who {
    /// The issue's holder (or its last one; alice if it never had one), authenticated: the
    /// pusher whose honest steps move a ledger along.
    Holder,
    /// A user, authenticated as themselves.
    User(usize),
    /// Nobody authenticated (`file://`), acting as this user's name.
    Anonymous(usize),
    /// This user with the wrong password.
    WrongPassword(usize),
}

impl Who {
    /// The name the step's data gives its actor.
    fn name(self) -> &'static str {
        match self {
            Who::Holder => USERS[0],
            Who::User(i) | Who::Anonymous(i) | Who::WrongPassword(i) => USERS[i],
        }
    }

    /// The identity the server establishes, if any.
    fn pusher(self) -> Option<&'static str> {
        match self {
            Who::Holder => Some(USERS[0]),
            Who::User(i) => Some(USERS[i]),
            _ => None,
        }
    }

    fn label(self) -> String {
        match self {
            Who::Holder | Who::User(_) => self.name().to_owned(),
            Who::Anonymous(i) => format!("anonymous-as-{}", USERS[i]),
            Who::WrongPassword(i) => format!("{}-wrong-password", USERS[i]),
        }
    }
}

/// What an honest client means to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Acquire,
    Renew,
    Release,
    Complete,
    Abandon,
    Revoke,
}

impl Action {
    fn command(self) -> &'static str {
        match self {
            Action::Acquire => "acquire",
            Action::Renew => "renew",
            Action::Release => "release",
            Action::Complete => "complete",
            Action::Abandon => "abandon",
            Action::Revoke => "revoke",
        }
    }
}

/// How the server's clock moves before the step.
#[derive(Clone, Copy, Debug)]
enum Clock {
    Stay,
    Forward(i64),
    /// To the expiry of this issue's tip, plus `delta` seconds (never backwards).
    ToExpiry {
        issue: usize,
        delta: i64,
    },
}

/// Which times of a record a mutation touches.
#[derive(Clone, Copy, Debug)]
enum Field {
    At,
    AcquiredAt,
    ExpiresAt,
    All,
}

impl Field {
    fn names(self) -> &'static [&'static str] {
        match self {
            Field::At => &["at"],
            Field::AcquiredAt => &["acquired_at"],
            Field::ExpiresAt => &["expires_at"],
            Field::All => &["at", "acquired_at", "expires_at"],
        }
    }
}

/// A spelling of an instant that RFC 3339 allows and the format does not.
#[derive(Clone, Copy, Debug)]
enum Spelling {
    /// Half a second later: `…:00.5Z`.
    HalfSecond,
    /// `…:00.000Z`.
    ZeroFraction,
    /// `…:00+00:00`.
    PlusZero,
    /// `…:00z`.
    LowerZ,
    /// `…t12:…`.
    LowerT,
    /// `2026-11-30 12:…`.
    Space,
    /// The same instant at `+01:00`.
    Offset,
}

/// A `process` object of `lease.json`.
#[derive(Clone, Copy, Debug)]
enum Proc {
    /// On another machine: nobody here can tell.
    Elsewhere,
    /// This test's own pid with another start time: verifiably gone.
    GoneHere,
    /// This test's own process: alive.
    LiveHere,
}

/// A forgery applied to the honest step.
#[derive(Clone, Debug)]
enum Mutation {
    Holder(Option<usize>),
    Token(i64),
    By(Option<usize>),
    PreviousHolder(Option<usize>),
    Event(usize),
    /// `Some(true)`: `process_gone`; `Some(false)`: `expired`; `None`: removed.
    Takeover(Option<bool>),
    Shift {
        field: Field,
        secs: i64,
    },
    /// The record moved to an instant inside the last tenure of the ledger.
    IntoPreviousTenure {
        permille: u16,
    },
    /// The record moved beyond the skew, ahead or behind the server's clock.
    BeyondSkew {
        ahead: bool,
        extra: i64,
    },
    Spell {
        field: Field,
        spelling: Spelling,
    },
    /// A process object; `claim_gone` also records the takeover as `process_gone`.
    Process {
        process: Proc,
        claim_gone: bool,
    },
    Session,
    Version(u64),
    Drop(usize),
    /// An unknown optional field, which readers ignore.
    Unknown,
    IssueField(usize),
    /// Pushed to this issue's ref.
    WrongRef(usize),
    /// A second parent: this issue's tip, or the ledger's own older commit.
    ExtraParent(usize),
    /// Pushed as `refs/replace/<tip>`, its parent the tip's parent.
    ReplaceRef,
    /// The tip's parent pushed with force.
    Rewind,
    /// The ledger deleted.
    Delete,
    /// A second honest step on top, in the same push.
    Chain(Action),
}

/// How the step reaches the server.
#[derive(Clone, Debug)]
enum Via {
    /// Forged with plain git and pushed with `git push`: the honest step, then each mutation.
    Forge(Vec<Mutation>),
    /// The real client, `git lease --remote origin <action>`, as the pusher.
    Client,
}

/// One generated step.
#[derive(Clone, Debug)]
struct Step {
    clock: Clock,
    issue: usize,
    who: Who,
    action: Action,
    /// The TTL in seconds (`None`: never).
    ttl: Option<i64>,
    /// The pusher's clock minus the server's, in seconds.
    offset: i64,
    via: Via,
}

// ---------------------------------------------------------------------------------------------
// One case: a server, its clients, and the checks
// ---------------------------------------------------------------------------------------------

#[test]
fn generated_pushes_keep_every_property() {
    let cases: u32 = env_number("GIT_LEASE_ADVERSARY_CASES", 10);
    let max_steps: usize = env_number("GIT_LEASE_ADVERSARY_STEPS", 14);
    let seed: u64 = env_number("GIT_LEASE_ADVERSARY_SEED", DEFAULT_SEED);
    let shrink_secs: u32 = env_number("GIT_LEASE_ADVERSARY_SHRINK_SECS", 120);
    let config = Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        // proptest reads a time limit of 0 as none: 0 here means no shrinking at all.
        max_shrink_time: shrink_secs.saturating_mul(1000),
        max_shrink_iters: if shrink_secs == 0 { 0 } else { 100_000 },
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let tally = RefCell::new(Tally::default());
    let started = std::time::Instant::now();
    let result = runner.run(
        &prop::collection::vec(step(), 1..=max_steps.max(1)),
        |steps| {
            let mut tally = tally.borrow_mut();
            let label = format!("seed {seed}, run {}", tally.runs + 1);
            run_case(&label, &steps, &mut tally).map_err(TestCaseError::fail)
        },
    );
    let t = tally.into_inner();
    eprintln!(
        "generated adversary (seed {seed}, {cases} cases of up to {max_steps} steps, {:.0?}): \
         {} runs (shrinking included), {} steps tried ({} forged honest, {} forged mutated, {} by the real client): \
         {} accepted, {} refused by the hook, {} refused otherwise (wrong password, git, or the client wrote nothing); \
         of the accepted, {} checked by verify and {} by a following client; {} fresh clones synced and verified",
        started.elapsed(),
        t.runs,
        t.steps,
        t.forged_honest,
        t.forged_mutated,
        t.by_client,
        t.accepted,
        t.refused_by_hook,
        t.refused_otherwise,
        t.verified,
        t.followed,
        t.fresh_clones
    );
    match result {
        Ok(()) => {
            assert_eq!(t.verified, t.accepted, "every acceptance is verified");
            assert_eq!(t.followed, t.accepted, "every acceptance is followed");
        }
        Err(TestError::Fail(reason, minimal)) => panic!(
            "a generated push broke a property.\n\n{reason}\n\nThe minimal case ({} steps; rerun with GIT_LEASE_ADVERSARY_SEED={seed}):\n{minimal:#?}",
            minimal.len()
        ),
        Err(TestError::Abort(why)) => panic!("the generated adversary aborted: {why}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Fixed sequences
// ---------------------------------------------------------------------------------------------
//
// Inputs, not verdicts: each sequence goes through the same case and the same properties as
// the generated ones, so that the attacks the generator found are tried on every run whatever
// proptest draws.

/// A step of `who` on issue 7 after the clock moves by `clock`.
fn fixed(clock: Clock, who: Who, action: Action, ttl: i64, mutations: Vec<Mutation>) -> Step {
    Step {
        clock,
        issue: 0,
        who,
        action,
        ttl: Some(ttl),
        offset: 0,
        via: Via::Forge(mutations),
    }
}

/// Runs `steps` as one case; fails with what broke.
fn run_fixed(name: &str, steps: &[Step]) {
    let mut tally = Tally::default();
    let result = run_case(name, steps, &mut tally);
    eprintln!(
        "{name}: {} steps, {} accepted, {} refused by the hook, {} refused otherwise",
        tally.steps, tally.accepted, tally.refused_by_hook, tally.refused_otherwise
    );
    if let Err(failed) = result {
        panic!("{failed}");
    }
}

#[test]
fn a_replace_ref_of_a_live_tip_keeps_every_property() {
    // alice holds 7 and renews; then a push of refs/replace/<tip> (a commit saying she
    // released it) and bob's takeover on top of the real tip, as if it were free.
    let (alice, bob) = (Who::User(0), Who::User(1));
    let step = Clock::Forward(10);
    run_fixed(
        "a replace ref of the tip",
        &[
            fixed(step, alice, Action::Acquire, 600, vec![]),
            fixed(step, alice, Action::Renew, 600, vec![]),
            fixed(
                step,
                alice,
                Action::Release,
                600,
                vec![Mutation::ReplaceRef],
            ),
            fixed(step, bob, Action::Acquire, 600, vec![]),
        ],
    );
}

#[test]
fn a_takeover_dated_inside_the_expired_tenure_keeps_every_property() {
    // alice's minute has passed by the server's clock (30 s ago) when bob takes 7 over,
    // dated half-way through her tenure: within the skew, before her expiry.
    run_fixed(
        "a takeover dated inside the expired tenure",
        &[
            fixed(Clock::Stay, Who::User(0), Action::Acquire, 60, vec![]),
            fixed(
                Clock::ToExpiry {
                    issue: 0,
                    delta: 30,
                },
                Who::User(1),
                Action::Acquire,
                600,
                vec![Mutation::IntoPreviousTenure { permille: 500 }],
            ),
        ],
    );
}

#[test]
fn times_spelled_otherwise_than_the_format_keep_every_property() {
    // Each of RFC 3339's other spellings of an instant, one new tenure each.
    let spellings = [
        Spelling::HalfSecond,
        Spelling::ZeroFraction,
        Spelling::PlusZero,
        Spelling::LowerZ,
        Spelling::LowerT,
        Spelling::Space,
        Spelling::Offset,
    ];
    let steps: Vec<Step> = spellings
        .iter()
        .enumerate()
        .flat_map(|(i, spelling)| {
            let alice = Who::User(0);
            let at = Clock::Forward(if i == 0 { 0 } else { 120 });
            [
                fixed(
                    at,
                    alice,
                    Action::Acquire,
                    60,
                    vec![Mutation::Spell {
                        field: Field::All,
                        spelling: *spelling,
                    }],
                ),
                fixed(Clock::Stay, alice, Action::Release, 60, vec![]),
            ]
        })
        .collect();
    run_fixed("times spelled otherwise than the format", &steps);
}
