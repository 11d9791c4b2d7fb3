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
/// The seed of the default run.
pub(crate) const DEFAULT_SEED: u64 = 20261130;

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
// Strategies
// ---------------------------------------------------------------------------------------------

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![
        4 => Just(Who::Holder),
        6 => (0..USERS.len()).prop_map(Who::User),
        1 => (0..USERS.len()).prop_map(Who::Anonymous),
        1 => (0..USERS.len()).prop_map(Who::WrongPassword),
    ]
}

pub(crate) fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => Just(Action::Acquire),
        2 => Just(Action::Renew),
        2 => Just(Action::Release),
        1 => Just(Action::Complete),
        1 => Just(Action::Abandon),
        1 => Just(Action::Revoke),
    ]
}

fn clock() -> impl Strategy<Value = Clock> {
    prop_oneof![
        3 => Just(Clock::Stay),
        3 => (1i64..=120).prop_map(Clock::Forward),
        2 => (121i64..=900).prop_map(Clock::Forward),
        2 => (0..ISSUES.len(), -2i64..=2).prop_map(|(issue, delta)| Clock::ToExpiry { issue, delta }),
    ]
}

pub(crate) fn ttl() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        6 => prop::sample::select(vec![60i64, 300, 600]).prop_map(Some),
        1 => Just(None),
    ]
}

fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![4 => Just(0i64), 2 => -60i64..=60, 1 => -420i64..=420]
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        Just(Field::At),
        Just(Field::AcquiredAt),
        Just(Field::ExpiresAt),
        Just(Field::All),
    ]
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        Just(Spelling::HalfSecond),
        Just(Spelling::ZeroFraction),
        Just(Spelling::PlusZero),
        Just(Spelling::LowerZ),
        Just(Spelling::LowerT),
        Just(Spelling::Space),
        Just(Spelling::Offset),
    ]
}

fn process() -> impl Strategy<Value = Proc> {
    prop_oneof![
        Just(Proc::Elsewhere),
        Just(Proc::GoneHere),
        Just(Proc::LiveHere),
    ]
}

fn mutation() -> BoxedStrategy<Mutation> {
    let user = || prop::option::of(0..USERS.len());
    prop_oneof![
        1 => user().prop_map(Mutation::Holder),
        1 => prop::sample::select(vec![-1i64, 1, 2]).prop_map(Mutation::Token),
        1 => user().prop_map(Mutation::By),
        1 => user().prop_map(Mutation::PreviousHolder),
        1 => (0..EVENTS.len()).prop_map(Mutation::Event),
        1 => prop::option::of(any::<bool>()).prop_map(Mutation::Takeover),
        2 => (field(), -1500i64..=1500).prop_map(|(field, secs)| Mutation::Shift { field, secs }),
        2 => (0u16..1000).prop_map(|permille| Mutation::IntoPreviousTenure { permille }),
        1 => (any::<bool>(), 1i64..=600)
            .prop_map(|(ahead, extra)| Mutation::BeyondSkew { ahead, extra }),
        2 => (field(), spelling()).prop_map(|(field, spelling)| Mutation::Spell { field, spelling }),
        2 => (process(), any::<bool>())
            .prop_map(|(process, claim_gone)| Mutation::Process { process, claim_gone }),
        1 => Just(Mutation::Session),
        1 => (0u64..=3).prop_map(Mutation::Version),
        1 => (0..DROPPABLE.len()).prop_map(Mutation::Drop),
        1 => Just(Mutation::Unknown),
        1 => (0..ISSUES.len()).prop_map(Mutation::IssueField),
        1 => (0..ISSUES.len()).prop_map(Mutation::WrongRef),
        1 => (0..ISSUES.len()).prop_map(Mutation::ExtraParent),
        2 => Just(Mutation::ReplaceRef),
        1 => Just(Mutation::Rewind),
        1 => Just(Mutation::Delete),
        1 => action().prop_map(Mutation::Chain),
    ]
    .boxed()
}

fn via() -> impl Strategy<Value = Via> {
    prop_oneof![
        3 => Just(Via::Forge(Vec::new())),
        5 => prop::collection::vec(mutation(), 1..=2).prop_map(Via::Forge),
        2 => Just(Via::Client),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        clock(),
        0..ISSUES.len(),
        who(),
        action(),
        ttl(),
        offset(),
        via(),
    )
        .prop_map(|(clock, issue, who, action, ttl, offset, via)| Step {
            clock,
            issue,
            who,
            action,
            ttl,
            offset,
            via,
        })
}

// ---------------------------------------------------------------------------------------------
// Times and records
// ---------------------------------------------------------------------------------------------

/// The instant a record's time field holds, read as leniently as RFC 3339 allows.
pub(crate) fn time(v: &Value) -> Option<DateTime<Utc>> {
    let text = v.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_rfc3339(&text.to_uppercase().replacen(' ', "T", 1)))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `secs` seconds after T0.
pub(crate) fn instant(secs: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(secs)
}

/// `text` (a canonical instant) spelled as `spelling` says.
fn spell(t: DateTime<Utc>, spelling: Spelling) -> String {
    let canonical = rfc3339(t);
    let body = canonical.trim_end_matches('Z');
    match spelling {
        Spelling::HalfSecond => format!("{body}.5Z"),
        Spelling::ZeroFraction => format!("{body}.000Z"),
        Spelling::PlusZero => format!("{body}+00:00"),
        Spelling::LowerZ => format!("{body}z"),
        Spelling::LowerT => canonical.replacen('T', "t", 1),
        Spelling::Space => canonical.replacen('T', " ", 1),
        Spelling::Offset => {
            (t + Duration::hours(1))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                .trim_end_matches('Z')
                .to_owned()
                + "+01:00"
        }
    }
}

/// Whether `process` (a `lease.json` `process` object) ran on this machine and is gone.
fn gone_here(process: &Value, boot: &str) -> bool {
    let (Some(b), Some(pid), Some(ticks)) = (
        process["boot_id"].as_str(),
        process["pid"].as_u64(),
        process["start_ticks"].as_u64(),
    ) else {
        return false;
    };
    b == boot && u32::try_from(pid).map_or(true, |pid| start_ticks(pid) != Some(ticks))
}

fn process_object(process: Proc, boot: &str) -> Value {
    let me = std::process::id();
    let ticks = start_ticks(me).unwrap_or(1);
    match process {
        Proc::Elsewhere => json!({ "pid": 4242, "boot_id": "another-machine", "start_ticks": 1 }),
        Proc::GoneHere => json!({ "pid": me, "boot_id": boot, "start_ticks": ticks + 1 }),
        Proc::LiveHere => json!({ "pid": me, "boot_id": boot, "start_ticks": ticks }),
    }
}

fn remove(v: &mut Value, field: &str) {
    if let Some(map) = v.as_object_mut() {
        map.remove(field);
    }
}

/// The step an honest client of `me`, whose clock reads `now`, records for `action` on top of
/// `prev`. Where no honest client would write anything (a renew of someone else's lease, an
/// acquire of a live lease), the record it would write if it believed it could: an attempt.
pub(crate) fn honest(
    issue: &str,
    prev: Option<&Value>,
    me: &str,
    action: Action,
    ttl: Option<i64>,
    now: DateTime<Utc>,
    boot: &str,
) -> Value {
    let at = prev
        .and_then(|p| time(&p["at"]))
        .map_or(now, |a| a.max(now));
    let expiry = ttl.map(|s| rfc3339(at + Duration::seconds(s)));
    let holder = prev.and_then(|p| p["holder"].as_str());
    let token = prev.and_then(|p| p["token"].as_u64()).unwrap_or(0);
    let gone = prev.is_some_and(|p| gone_here(&p["process"], boot));
    let expired = prev.is_some_and(|p| time(&p["expires_at"]).is_some_and(|e| at >= e));
    let live = holder.is_some() && !expired && !gone;
    let why = if gone && !expired {
        "process_gone"
    } else {
        "expired"
    };
    let tenure = |event: &str, token: u64| {
        let mut v = json!({
            "version": 1,
            "issue": issue,
            "event": event,
            "holder": me,
            "token": token,
            "acquired_at": rfc3339(at),
            "expires_at": expiry,
            "at": rfc3339(at),
        });
        if let Some(h) = holder {
            v["previous_holder"] = json!(h);
            v["takeover"] = json!(why);
        }
        v
    };
    let extend = |event: &str| {
        let mut v = prev.cloned().unwrap_or(Value::Null);
        v["event"] = json!(event);
        v["holder"] = json!(me);
        v["at"] = json!(rfc3339(at));
        v["expires_at"] = json!(expiry);
        for field in ["takeover", "previous_holder", "by", "reason"] {
            remove(&mut v, field);
        }
        v
    };
    let free = |event: &str, previous: &str| {
        let mut v = forge::freed(issue, event, previous, token, (at - t0()).num_seconds());
        if event == "revoke" {
            v["by"] = json!(me);
            v["reason"] = json!("stuck");
        } else if previous != me {
            v["by"] = json!(me);
            v["takeover"] = json!(why);
        }
        v
    };
    let nobody = prev
        .and_then(|p| p["previous_holder"].as_str())
        .unwrap_or(me);
    match action {
        Action::Acquire if live && holder == Some(me) => extend("reacquire"),
        Action::Acquire => tenure("acquire", token + 1),
        Action::Renew if holder.is_some() => extend("renew"),
        Action::Renew => tenure("renew", token.max(1)),
        Action::Revoke => free("revoke", holder.unwrap_or(nobody)),
        ending => free(ending.command(), holder.unwrap_or(nobody)),
    }
}

/// Moves the record to `t`: its `at`, a new tenure's `acquired_at`, and its expiry with the
/// same TTL.
fn retime(v: &mut Value, t: DateTime<Utc>) {
    let old = time(&v["at"]);
    if let (Some(old), Some(exp)) = (old, time(&v["expires_at"])) {
        v["expires_at"] = json!(rfc3339(t + (exp - old)));
    }
    if v["event"] == "acquire" && v["acquired_at"].is_string() {
        v["acquired_at"] = json!(rfc3339(t));
    }
    v["at"] = json!(rfc3339(t));
}

/// What a mutation needs to know besides the record.
struct Context<'a> {
    /// The server's clock.
    now: DateTime<Utc>,
    /// The ledger's records, oldest first.
    ledger: &'a [Value],
    boot: &'a str,
}

/// Applies a mutation of the record itself (the others shape the push; see
/// [`World::forge_push`]).
fn mutate(m: &Mutation, v: &mut Value, cx: &Context<'_>) {
    let name = |i: &Option<usize>| i.map_or(Value::Null, |i| json!(USERS[i]));
    match m {
        Mutation::Holder(i) => v["holder"] = name(i),
        Mutation::Token(d) => v["token"] = json!(v["token"].as_i64().unwrap_or(0) + d),
        Mutation::By(None) => remove(v, "by"),
        Mutation::By(i) => v["by"] = name(i),
        Mutation::PreviousHolder(None) => remove(v, "previous_holder"),
        Mutation::PreviousHolder(i) => v["previous_holder"] = name(i),
        Mutation::Event(i) => v["event"] = json!(EVENTS[*i]),
        Mutation::Takeover(None) => remove(v, "takeover"),
        Mutation::Takeover(Some(gone)) => {
            v["takeover"] = json!(if *gone { "process_gone" } else { "expired" })
        }
        Mutation::Shift { field, secs } => {
            for f in field.names() {
                if let Some(t) = time(&v[*f]) {
                    v[*f] = json!(rfc3339(t + Duration::seconds(*secs)));
                }
            }
        }
        Mutation::IntoPreviousTenure { permille } => {
            // The last tenure the ledger recorded: its start and recorded end.
            let last = cx.ledger.iter().rev().find(|r| r["holder"].is_string());
            if let Some(start) = last.and_then(|r| time(&r["acquired_at"])) {
                let end = last
                    .and_then(|r| time(&r["expires_at"]))
                    .unwrap_or(start + Duration::seconds(600));
                let t = start + (end - start) * i32::from(*permille) / 1000;
                retime(v, t);
            }
        }
        Mutation::BeyondSkew { ahead, extra } => {
            let by = Duration::seconds(SKEW_S + extra);
            retime(v, if *ahead { cx.now + by } else { cx.now - by });
        }
        Mutation::Spell { field, spelling } => {
            for f in field.names() {
                if let Some(t) = time(&v[*f]) {
                    v[*f] = json!(spell(t, *spelling));
                }
            }
        }
        Mutation::Process {
            process,
            claim_gone,
        } => {
            v["process"] = process_object(*process, cx.boot);
            if *claim_gone {
                v["takeover"] = json!("process_gone");
            }
        }
        Mutation::Session => v["session"] = json!(format!("sha256:{}", "ab".repeat(32))),
        Mutation::Version(n) => v["version"] = json!(n),
        Mutation::Drop(i) => remove(v, DROPPABLE[*i]),
        Mutation::Unknown => v["comment"] = json!("an optional field no reader knows"),
        Mutation::IssueField(i) => v["issue"] = json!(ISSUES[*i]),
        Mutation::WrongRef(_)
        | Mutation::ExtraParent(_)
        | Mutation::ReplaceRef
        | Mutation::Rewind
        | Mutation::Delete
        | Mutation::Chain(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// One case: a server, its clients, and the checks
// ---------------------------------------------------------------------------------------------

/// The counts printed at the end.
#[derive(Default, Debug)]
struct Tally {
    /// Cases run (shrinking included).
    runs: usize,
    steps: usize,
    /// Steps pushed as forged with plain git, unmutated and mutated.
    forged_honest: usize,
    forged_mutated: usize,
    /// Steps run by the real client.
    by_client: usize,
    /// Pushes after which some ref of the server had moved.
    accepted: usize,
    /// Pushes the hook refused.
    refused_by_hook: usize,
    /// Steps that changed nothing without the hook refusing: the web server's refusal of a
    /// wrong password, git's own refusal, or a client that wrote nothing.
    refused_otherwise: usize,
    /// Acceptances checked by `verify` in the served repository.
    verified: usize,
    /// Acceptances checked by the following client (`sync`, `list --remote`, `show --remote`).
    followed: usize,
    /// Fresh clones that synced and verified at the end of a case.
    fresh_clones: usize,
}

/// A case's server, clients and what it has seen.
struct World {
    server: Server,
    /// The server's clock, seconds after T0.
    now: i64,
    /// Where forged commits are written; it borrows the server's objects (alternates).
    forger: TestRepo,
    /// The clone that follows the server through the whole case.
    follower: TestRepo,
    /// The real client of each pusher, made when first needed.
    clients: HashMap<String, TestRepo>,
    boot: String,
    /// Every ref of the server, as of the last step.
    refs: String,
    /// The server's ledgers (first parents, oldest first, replace refs ignored).
    chains: BTreeMap<String, Vec<String>>,
    /// `lease.json` of each commit seen.
    records: HashMap<String, Value>,
    /// The server's clock when each commit arrived.
    arrived: HashMap<String, i64>,
    /// Who pushed each commit.
    pushed_by: HashMap<String, Option<String>>,
    /// (issue, token) of every acquire seen, with its commit.
    issued: HashMap<(String, u64), String>,
    /// One line per step so far.
    log: Vec<String>,
}

impl World {
    fn new() -> World {
        let mut server = Server::http(&USERS);
        server.config("lease.pusherEnv", "REMOTE_USER");
        server.config("lease.admins", ADMIN);
        server.start_at(&at(0));
        let forger = TestRepo::new();
        let alternates = forger.git_dir().join("objects/info/alternates");
        std::fs::write(
            &alternates,
            format!("{}\n", server.bare().join("objects").display()),
        )
        .expect("write the forger's alternates");
        let follower = server.mirror();
        let refs = server.refs();
        World {
            server,
            now: 0,
            forger,
            follower,
            clients: HashMap::new(),
            boot: boot_id(),
            refs,
            chains: BTreeMap::new(),
            records: HashMap::new(),
            arrived: HashMap::new(),
            pushed_by: HashMap::new(),
            issued: HashMap::new(),
            log: Vec::new(),
        }
    }

    /// The server's ledger of `issue`: its records, oldest first.
    fn ledger(&self, issue: &str) -> Vec<Value> {
        self.chains
            .get(issue)
            .map(|c| c.iter().map(|id| self.records[id].clone()).collect())
            .unwrap_or_default()
    }

    fn tip(&self, issue: &str) -> Option<String> {
        self.chains.get(issue).and_then(|c| c.last().cloned())
    }

    /// The URL `who` pushes to.
    fn url(&self, who: Who) -> String {
        match who {
            Who::Holder | Who::User(_) => self.server.url_as(who.name()),
            Who::Anonymous(_) => format!("file://{}", self.server.bare().display()),
            Who::WrongPassword(i) => self
                .server
                .url_as(USERS[i])
                .replace(&format!("{}pw@", USERS[i]), "wrong@"),
        }
    }

    /// The real client of `who`: `lease.holder` its name, `origin` its URL.
    fn client(&mut self, who: Who) -> &TestRepo {
        let url = self.url(who);
        self.clients
            .entry(who.label())
            .or_insert_with(|| TestRepo::client_of(&url, who.name()))
    }

    /// `who` with [`Who::Holder`] made the user it stands for on `issue`.
    fn resolve(&self, who: Who, issue: &str) -> Who {
        let Who::Holder = who else { return who };
        let last = self.ledger(issue).last().and_then(|r| {
            r["holder"]
                .as_str()
                .or(r["previous_holder"].as_str())
                .map(str::to_owned)
        });
        Who::User(
            last.and_then(|h| USERS.iter().position(|u| *u == h))
                .unwrap_or(0),
        )
    }

    fn set_clock(&mut self, clock: Clock) {
        let to = match clock {
            Clock::Stay => self.now,
            Clock::Forward(s) => self.now + s,
            Clock::ToExpiry { issue, delta } => self
                .ledger(ISSUES[issue])
                .last()
                .and_then(|r| time(&r["expires_at"]))
                .map_or(self.now, |e| (e - t0()).num_seconds() + delta),
        };
        if to > self.now {
            self.now = to;
            self.server.config("lease.hookNow", &at(self.now));
        }
    }

    /// Runs one step; returns what was pushed and the push (or client) run.
    fn push(&mut self, step: &Step, tally: &mut Tally) -> (String, Run) {
        let issue = ISSUES[step.issue];
        let client_now = instant(self.now + step.offset);
        match &step.via {
            Via::Client => {
                tally.by_client += 1;
                let mut args = vec!["--json", "--remote", "origin", step.action.command(), issue];
                let ttl = step.ttl.map_or("never".to_owned(), |s| format!("{s}s"));
                match step.action {
                    Action::Acquire | Action::Renew => args.extend(["--ttl", ttl.as_str()]),
                    Action::Revoke => args.extend(["--reason", "stuck"]),
                    _ => {}
                }
                let what = format!(
                    "git lease {} (GIT_LEASE_NOW {})",
                    args.join(" "),
                    rfc3339(client_now)
                );
                let run = self
                    .client(step.who)
                    .lease()
                    .now(&rfc3339(client_now))
                    .env("GIT_TERMINAL_PROMPT", "0")
                    .args(&args)
                    .run();
                (what, run)
            }
            Via::Forge(mutations) => {
                if mutations.is_empty() {
                    tally.forged_honest += 1;
                } else {
                    tally.forged_mutated += 1;
                }
                self.forge_push(step, mutations, client_now)
            }
        }
    }

    /// Forges the step with plain git and pushes it as its pusher.
    fn forge_push(
        &self,
        step: &Step,
        mutations: &[Mutation],
        client_now: DateTime<Utc>,
    ) -> (String, Run) {
        let issue = ISSUES[step.issue];
        let ledger = self.ledger(issue);
        let tip = self.tip(issue);
        let below_tip = self
            .chains
            .get(issue)
            .and_then(|c| c.len().checked_sub(2).map(|i| c[i].clone()));
        let cx = Context {
            now: instant(self.now),
            ledger: &ledger,
            boot: &self.boot,
        };
        let me = step.who.name();
        let mut records = vec![honest(
            issue,
            ledger.last(),
            me,
            step.action,
            step.ttl,
            client_now,
            &self.boot,
        )];
        let mut target = format!("refs/leases/{issue}");
        let mut parents: Vec<String> = tip.iter().cloned().collect();
        #[derive(PartialEq)]
        enum Shape {
            Normal,
            Replace,
            Rewind,
            Delete,
        }
        let mut shape = Shape::Normal;
        for m in mutations {
            match m {
                Mutation::WrongRef(i) => target = format!("refs/leases/{}", ISSUES[*i]),
                Mutation::ExtraParent(i) => {
                    let other = self
                        .tip(ISSUES[*i])
                        .filter(|t| Some(t) != tip.as_ref())
                        .or_else(|| below_tip.clone());
                    parents.extend(other);
                }
                Mutation::ReplaceRef => shape = Shape::Replace,
                Mutation::Rewind => shape = Shape::Rewind,
                Mutation::Delete => shape = Shape::Delete,
                Mutation::Chain(action) => {
                    let next = honest(
                        issue,
                        records.last(),
                        me,
                        *action,
                        step.ttl,
                        client_now,
                        &self.boot,
                    );
                    records.push(next);
                }
                m => mutate(m, records.last_mut().expect("a record"), &cx),
            }
        }
        let commit_all = |base: Vec<String>| {
            let mut parents = base;
            let mut last = None;
            for record in &records {
                let p: Vec<&str> = parents.iter().map(String::as_str).collect();
                let c = forge::lease_commit(&self.forger, record, &p);
                parents = vec![c.clone()];
                last = Some(c);
            }
            last.expect("a record")
        };
        let shown = records
            .iter()
            .map(|r| serde_json::to_string(r).expect("JSON"))
            .collect::<Vec<_>>()
            .join(" then ");
        let (refspec, what) = match (&shape, &tip) {
            (Shape::Replace, Some(tip)) => {
                let commit = commit_all(below_tip.iter().cloned().collect());
                (
                    format!("{commit}:refs/replace/{tip}"),
                    format!("replace {tip} of {issue} by {shown}"),
                )
            }
            (Shape::Rewind, Some(_)) if below_tip.is_some() => {
                let to = below_tip.clone().expect("checked");
                (
                    format!("+{to}:{target}"),
                    format!("rewind {target} to {to}"),
                )
            }
            (Shape::Rewind | Shape::Delete, _) => {
                (format!(":{target}"), format!("delete {target}"))
            }
            _ => {
                let commit = commit_all(parents.clone());
                (
                    format!("{commit}:{target}"),
                    format!("{shown} (parents {parents:?}) to {target}"),
                )
            }
        };
        let run = self
            .forger
            .git_cmd()
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("REMOTE_USER")
            .args(["push", &self.url(step.who), &refspec])
            .run();
        (format!("git push {refspec}: {what}"), run)
    }

    /// Reads the server's ledgers with plain git, replace refs ignored; records the new
    /// commits as arrived now from `pusher`.
    fn read_ledgers(&mut self, pusher: Option<&str>) -> Result<Vec<String>, String> {
        let plain = |args: &[&str]| {
            let mut all = vec!["--no-replace-objects"];
            all.extend_from_slice(args);
            self.server.git(&all)
        };
        let refs = plain(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/leases/",
        ]);
        let mut chains = BTreeMap::new();
        let mut failures = Vec::new();
        for line in refs.lines() {
            let (name, tip) = line.split_once(' ').expect("ref and object");
            let issue = name.trim_start_matches("refs/leases/").to_owned();
            let list = plain(&["rev-list", "--first-parent", "--reverse", tip]);
            let commits: Vec<String> = list.lines().map(str::to_owned).collect();
            for c in &commits {
                if self.records.contains_key(c) {
                    continue;
                }
                let text = plain(&["cat-file", "-p", &format!("{c}:lease.json")]);
                let record = serde_json::from_str(&text).unwrap_or_else(|e| {
                    failures.push(format!(
                        "(3) {issue}: lease.json of {c} does not read back ({e}):\n{text}"
                    ));
                    Value::Null
                });
                self.records.insert(c.clone(), record);
                self.arrived.insert(c.clone(), self.now);
                self.pushed_by.insert(c.clone(), pusher.map(str::to_owned));
            }
            chains.insert(issue, commits);
        }
        // Ledgers only move forward, and none disappears.
        for (issue, old) in &self.chains {
            match chains.get(issue) {
                None => failures.push(format!("(3) the ledger of {issue} disappeared")),
                Some(new) if !new.starts_with(old) => failures.push(format!(
                    "(3) the ledger of {issue} went back or was rewritten: it was {old:?}, it is {new:?}"
                )),
                _ => {}
            }
        }
        let changed = chains
            .iter()
            .filter(|(i, c)| self.chains.get(*i) != Some(*c))
            .map(|(i, _)| i.clone())
            .collect();
        self.chains = chains;
        if failures.is_empty() {
            Ok(changed)
        } else {
            Err(failures.join("\n"))
        }
    }

    /// Properties 3 to 7 on the ledgers as read.
    fn ledger_properties(&mut self) -> Vec<String> {
        let mut failures = Vec::new();
        for (issue, commits) in &self.chains {
            let mut token = 0u64;
            let mut prev: Option<(&String, &Value)> = None;
            for c in commits {
                let r = &self.records[c];
                let event = r["event"].as_str().unwrap_or("?");
                let t = r["token"].as_u64();
                let pusher = self.pushed_by[c].as_deref();
                // (3) tokens: one more per tenure, kept otherwise; never issued twice.
                if event == "acquire" {
                    if t != Some(token + 1) {
                        failures.push(format!(
                            "(3) {issue}: the acquire {c} takes token {} after token {token}",
                            r["token"]
                        ));
                    }
                    if let Some(t) = t {
                        let first = self
                            .issued
                            .entry((issue.clone(), t))
                            .or_insert_with(|| c.clone());
                        if first != c {
                            failures.push(format!(
                                "(3) {issue}: token {t} issued twice, by {first} and {c}"
                            ));
                        }
                    }
                } else if t != Some(token) {
                    failures.push(format!(
                        "(3) {issue}: the {event} {c} records token {} in tenure {token}",
                        r["token"]
                    ));
                }
                token = t.unwrap_or(token);
                // (6) only an authenticated pusher, and a new tenure is its own.
                if pusher.is_none() {
                    failures.push(format!(
                        "(6) {issue}: {c} arrived from nobody authenticated"
                    ));
                }
                if event == "acquire" && r["holder"].as_str() != pusher {
                    failures.push(format!(
                        "(6) {issue}: {c} gives a tenure to {}, but {} pushed it",
                        r["holder"],
                        pusher.unwrap_or("nobody")
                    ));
                }
                // (7) times as the format writes them.
                for f in ["at", "acquired_at", "expires_at"] {
                    if let Some(text) = r[f].as_str() {
                        if time(&r[f]).map(rfc3339).as_deref() != Some(text) {
                            failures.push(format!(
                                "(7) {issue}: {c} records {f} {text:?}, not YYYY-MM-DDTHH:MM:SSZ"
                            ));
                        }
                    }
                }
                // (4) and (5): what ended the previous state, by the server's clock and as
                // recorded.
                if let Some((pc, p)) = prev {
                    let arrived = instant(self.arrived[c]);
                    let held = p["holder"].is_string();
                    let gone = gone_here(&p["process"], &self.boot);
                    let expiry = time(&p["expires_at"]);
                    let live_on_arrival = held && !gone && expiry.is_none_or(|e| arrived < e);
                    let until = expiry.map_or("no expiry".to_owned(), rfc3339);
                    if event == "acquire" && live_on_arrival {
                        failures.push(format!(
                            "(4) {issue}: token {} ({}, until {until}) was still live when {c} (token {}) arrived at {}",
                            p["token"], p["holder"], r["token"], rfc3339(arrived)
                        ));
                    }
                    if event == "acquire" && held && !gone {
                        let begins = time(&r["acquired_at"]);
                        if expiry.is_none() || begins.zip(expiry).is_some_and(|(b, e)| b < e) {
                            failures.push(format!(
                                "(4) {issue}: as recorded, token {} ({}, until {until}) overlaps token {} from {} ({c} on {pc})",
                                p["token"], p["holder"], r["token"], r["acquired_at"]
                            ));
                        }
                    }
                    let frees = matches!(event, "release" | "complete" | "abandon" | "revoke");
                    let by_right = pusher.is_some() && pusher == p["holder"].as_str()
                        || event == "revoke" && pusher == Some(ADMIN);
                    if frees && live_on_arrival && !by_right {
                        failures.push(format!(
                            "(5) {issue}: {}'s lease, live until {until}, was freed by {c} ({event}) pushed by {} at {}",
                            p["holder"], pusher.unwrap_or("nobody"), rfc3339(arrived)
                        ));
                    }
                }
                prev = Some((c, r));
            }
        }
        failures
    }

    /// Property 2: the following clone takes and shows what the server holds.
    fn follow(&self, changed: &[String]) -> Vec<String> {
        let mut failures = Vec::new();
        let run = self.follower.run(&["--json", "sync"]);
        let refused = if run.code == 0 {
            run.json()["refused"].clone()
        } else {
            Value::Null
        };
        if run.code != 0 || refused != json!([]) {
            failures.push(format!("(2) the following clone's sync:\n{run}"));
        }
        let (mine, theirs) = (self.follower.lease_refs(), self.server.lease_refs());
        if mine != theirs {
            failures.push(format!(
                "(2) after sync the following clone has\n{mine}\nbut the server has\n{theirs}"
            ));
        }
        let run = self
            .follower
            .run(&["--json", "list", "--remote", "origin", "--all"]);
        if run.code != 0 {
            failures.push(format!("(2) list --remote:\n{run}"));
        } else {
            let listed = run.json();
            for (issue, commits) in &self.chains {
                let entry = listed
                    .as_array()
                    .and_then(|a| a.iter().find(|e| e["issue"] == json!(issue)));
                let shown = entry.map(|e| e["commit"].clone());
                if shown != Some(json!(commits.last())) {
                    failures.push(format!(
                        "(2) list --remote shows {issue} at {shown:?}, the server has {:?}\n{run}",
                        commits.last()
                    ));
                }
            }
        }
        for issue in changed {
            let run = self
                .follower
                .run(&["--json", "show", "--remote", "origin", issue]);
            let tip = self.chains[issue].last();
            if run.code != 0 || run.json()["commit"] != json!(tip) {
                failures.push(format!(
                    "(2) show --remote {issue} should show {tip:?}:\n{run}"
                ));
            }
        }
        failures
    }

    /// Every check of an acceptance; `Err` lists what failed.
    fn check(&mut self, pusher: Option<&str>, tally: &mut Tally) -> Result<(), String> {
        let mut failures = Vec::new();
        let verify = self.server.lease(&["--json", "verify"]);
        tally.verified += 1;
        if verify.code != 0 {
            failures.push(format!("(1) verify in the served repository:\n{verify}"));
        }
        let changed = match self.read_ledgers(pusher) {
            Ok(changed) => changed,
            Err(e) => {
                failures.push(e);
                Vec::new()
            }
        };
        failures.extend(self.ledger_properties());
        failures.extend(self.follow(&changed));
        tally.followed += 1;
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n\n"))
        }
    }

    /// Property 2 for a clone made now: it syncs everything and verifies clean.
    fn fresh_clone(&self) -> Result<(), String> {
        let fresh = self.server.mirror();
        let sync = fresh.run(&["--json", "sync"]);
        let verify = fresh.run(&["verify"]);
        let (mine, theirs) = (fresh.lease_refs(), self.server.lease_refs());
        if sync.code == 0
            && sync.json()["refused"] == json!([])
            && verify.code == 0
            && mine == theirs
        {
            Ok(())
        } else {
            Err(format!(
                "(2) a fresh clone at the end of the case:\n{sync}\n{verify}\nit has\n{mine}\nthe server has\n{theirs}"
            ))
        }
    }
}

/// The hook's refusal line in a push's (or client's) output, if any.
fn refusal(run: &Run) -> Option<String> {
    run.stderr.lines().find_map(|l| {
        l.find("git-lease: refused")
            .map(|i| l[i..].trim().to_owned())
    })
}

/// Runs one case; `Err` says what failed, where and why.
fn run_case(label: &str, steps: &[Step], tally: &mut Tally) -> Result<(), String> {
    tally.runs += 1;
    let mut world = World::new();
    for (k, step) in steps.iter().enumerate() {
        tally.steps += 1;
        world.set_clock(step.clock);
        // Nothing but an acquire begins a ledger honestly: on an issue never leased, every
        // step is one (forgeries of it still try the rest).
        let never_leased = world.tip(ISSUES[step.issue]).is_none();
        let step = &Step {
            who: world.resolve(step.who, ISSUES[step.issue]),
            action: if never_leased {
                Action::Acquire
            } else {
                step.action
            },
            ..step.clone()
        };
        let (what, run) = world.push(step, tally);
        let refs = world.server.refs();
        let head = format!(
            "{label}, step {} of {}: {step:?}\nserver clock {}\npushed: {what}",
            k + 1,
            steps.len(),
            at(world.now)
        );
        let context = |world: &World| {
            format!(
                "the case so far:\n{}\nthe push:\n{run}",
                world.log.join("\n")
            )
        };
        if refs == world.refs {
            let why = refusal(&run);
            match &why {
                Some(_) => tally.refused_by_hook += 1,
                None => tally.refused_otherwise += 1,
            }
            // The real client refuses (3) or writes nothing (0); anything else is a client
            // at odds with its server, except for a wrong password.
            if matches!(step.via, Via::Client)
                && !matches!(step.who, Who::WrongPassword(_))
                && ![0, 3].contains(&run.code)
            {
                return Err(format!(
                    "{head}\n(2) the real client failed against the server (exit {})\n{}",
                    run.code,
                    context(&world)
                ));
            }
            world.log.push(format!(
                "{}. {} {:?} {} at {}: refused ({})",
                k + 1,
                step.who.label(),
                step.action,
                ISSUES[step.issue],
                at(world.now),
                why.unwrap_or_else(|| format!("exit {}, nothing changed", run.code))
            ));
            continue;
        }
        tally.accepted += 1;
        world.refs = refs;
        world.log.push(format!(
            "{}. {} {:?} {} at {}: ACCEPTED: {what}",
            k + 1,
            step.who.label(),
            step.action,
            ISSUES[step.issue],
            at(world.now)
        ));
        if let Err(failed) = world.check(step.who.pusher(), tally) {
            return Err(format!("{head}\n\n{failed}\n\n{}", context(&world)));
        }
    }
    tally.fresh_clones += 1;
    world.fresh_clone().map_err(|failed| {
        format!(
            "{label}, after its last step:\n{failed}\n\nthe case:\n{}",
            world.log.join("\n")
        )
    })
}

/// The number the environment variable `name` holds, or `default` when it is unset.
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
        Err(_) => default,
    }
}

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
