//! The forged-push suite: every kind of ledger step, pushed by every kind of pusher, with honest
//! and forged data, to one served repository whose hook must accept exactly the legitimate
//! pushes and refuse everything else.
//!
//! The server is `git http-backend` behind lighttpd (or, without it, the harness's own front,
//! [`crate::cgi`]) with basic auth for alice (the holder), bob (anyone else) and ops (an
//! administrator), so the hook reads the authenticated pusher from `REMOTE_USER`
//! (`lease.pusherEnv`); the same bare repository pushed through a `file://` URL, where nobody
//! set `REMOTE_USER`, is the anonymous pusher. The server's clock is fixed at T0 by
//! `lease.hookNow`; instants are seconds after T0 and the default `lease.maxClockSkew` is 5
//! minutes.
//!
//! Each case has its own issue. Its prior ledger is the administrator's setup: written into the
//! served repository with a plain fetch, which runs no hook. The case's single new commit,
//! forged with plain git plumbing, is then pushed as the role's user. The verdict the server
//! must give is computed by [`spec`], which is the specification in code:
//!
//! - who acted is the authenticated pusher alone, never a field of the pushed data; `by`, when
//!   present, must name the pusher;
//! - the holder's own steps (reacquire, renew, release, complete, abandon of a live lease):
//!   the holder only; renew and reacquire need the lease live by the server's clock;
//! - a new tenure (acquire) of a free or expired issue: the new holder only;
//! - freeing an expired lease: anyone, recording themselves as `by` (the previous holder may
//!   leave `by` out);
//! - revoke: an administrator only;
//! - a takeover the server cannot verify (`process_gone` of a process on another machine, in
//!   another PID namespace of the server's machine, or of a record without its namespace,
//!   while the TTL runs) is refused; one it can verify (this machine and PID namespace, the
//!   process gone) is not;
//! - liveness and takeovers are judged at the server's clock, never the pushed `at`, and an
//!   `at` further than `lease.maxClockSkew` from the server's clock is refused;
//! - without an authenticated pusher every lease push is refused.
//!
//! The matrix test prints a summary per event type and fails listing every case where the
//! server disagrees with [`spec`]. The other tests cover a pusher's `GIT_LEASE_NOW`, fences
//! whose `*` matches slashes, and `lease.admins` as whole identities.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use crate::env::{at, rfc3339, t0, Run, TestRepo};
use crate::forge::{self, acquired, freed, with};
use crate::server::Server;
use crate::session::{boot_id, pid_ns, start_ticks};

/// The holder of every prior lease.
const HOLDER: &str = "alice";
/// Anyone else.
const OTHER: &str = "bob";
/// The administrator (`lease.admins`).
const ADMIN: &str = "ops";
/// A name nobody pushes as: what a forged `by` names when the step's rightful actor is the
/// pusher itself.
const THIRD: &str = "carol";
/// The name an anonymous pusher records for itself.
const NOBODY: &str = "mallory";
/// The default `lease.maxClockSkew`, in seconds.
const SKEW_S: i64 = 300;
/// The TTL of every pushed tenure or renewal, in seconds.
const TTL_S: i64 = 600;

// ---------------------------------------------------------------------------------------------
// The specification
// ---------------------------------------------------------------------------------------------

/// What the specification needs to know of the server.
struct Facts {
    /// Its clock.
    now: DateTime<Utc>,
    /// `lease.maxClockSkew`, in seconds.
    max_skew_s: i64,
    /// `lease.admins`, whole identities.
    admins: Vec<String>,
    /// Its `/proc/sys/kernel/random/boot_id`.
    boot_id: Option<String>,
    /// Its PID namespace (the inode of `/proc/self/ns/pid`).
    pid_ns: Option<u64>,
}

impl Facts {
    /// Whether `lease` is live by the server's clock: held, not expired, and its recorded
    /// process not verifiably gone (it ran on the server's machine, in its PID namespace, and
    /// is no longer there).
    fn is_live(&self, lease: &Value) -> bool {
        lease["holder"].is_string()
            && lease["expires_at"]
                .as_str()
                .is_none_or(|e| self.now < instant(e))
            && !self.verifiably_gone(&lease["process"])
    }

    /// Whether the server can see that `process` (a `lease.json` `process` object) is gone:
    /// only in its own boot and PID namespace (a record without its namespace is unknown).
    fn verifiably_gone(&self, process: &Value) -> bool {
        let (Some(boot), Some(ns), Some(pid), Some(ticks)) = (
            process["boot_id"].as_str(),
            process["pid_ns"].as_u64(),
            process["pid"].as_u64(),
            process["start_ticks"].as_u64(),
        ) else {
            return false;
        };
        self.boot_id.as_deref() == Some(boot)
            && self.pid_ns == Some(ns)
            && start_ticks(pid as u32) != Some(ticks)
    }
}

/// The verdict the server must give to `next` pushed on top of `prior` (`None`: a new ledger)
/// by `pusher` (`None`: nobody authenticated): `Ok`, or `Err` saying why it must be refused.
fn spec(
    server: &Facts,
    prior: Option<&Value>,
    next: &Value,
    pusher: Option<&str>,
) -> Result<(), String> {
    // Without an authenticated pusher every lease push is refused.
    let Some(pusher) = pusher else {
        return Err("nobody authenticated pushed it".into());
    };
    // The event's time is within the skew of the server's clock.
    let at = instant(next["at"].as_str().expect("at"));
    if (at - server.now).num_seconds().abs() > server.max_skew_s {
        return Err(format!(
            "its at {} is more than {}s from the server's clock",
            rfc3339(at),
            server.max_skew_s
        ));
    }
    // `by`, when present, is the pusher.
    let by = next["by"].as_str();
    if let Some(by) = by.filter(|b| *b != pusher) {
        return Err(format!("by names {by}, but {pusher} pushed it"));
    }
    let previous = prior.and_then(|p| p["holder"].as_str());
    // Judged at the server's clock, never the pushed `at`; a takeover the server cannot
    // verify leaves the lease live.
    let live = prior.is_some_and(|p| server.is_live(p));
    let event = next["event"].as_str().expect("event");
    match event {
        // A new tenure of a free or expired issue, by the new holder only.
        "acquire" => {
            let holder = next["holder"].as_str().unwrap_or("nobody");
            if holder != pusher {
                Err(format!("a new tenure for {holder}, pushed by {pusher}"))
            } else if live {
                Err(format!(
                    "{} holds it, live by the server's clock",
                    previous.unwrap_or("?")
                ))
            } else {
                Ok(())
            }
        }
        // The holder's own steps that need the lease live.
        "reacquire" | "renew" => {
            if previous != Some(pusher) {
                Err(format!(
                    "only the holder {} may {event}, not {pusher}",
                    previous.unwrap_or("nobody")
                ))
            } else if !live {
                Err(format!(
                    "a {event} needs the lease live by the server's clock"
                ))
            } else {
                Ok(())
            }
        }
        // An administrator only, recording who revoked.
        "revoke" => {
            if !server.admins.iter().any(|a| a == pusher) {
                Err(format!("{pusher} is not an administrator"))
            } else if by.is_none() {
                Err("a revoke records who revoked".into())
            } else {
                Ok(())
            }
        }
        // release, complete, abandon: the holder, or anyone once the lease is not live.
        _ => {
            let actor = by.or(previous);
            if live && previous != Some(pusher) {
                Err(format!(
                    "only the holder {} may {event} a live lease, not {pusher}",
                    previous.unwrap_or("nobody")
                ))
            } else if actor != Some(pusher) {
                Err(format!(
                    "the commit records {} as acting, but {pusher} pushed it",
                    actor.unwrap_or("nobody")
                ))
            } else {
                Ok(())
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The matrix: event types x pusher roles x data variants
// ---------------------------------------------------------------------------------------------

/// What the pushed commit does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A new tenure of an issue never leased.
    AcquireFree,
    /// A new tenure over alice's lease, expired a minute ago.
    AcquireExpired,
    /// A new tenure over alice's live lease, recorded as `takeover: expired`.
    AcquireLive,
    /// A new tenure over alice's live lease, recorded as `takeover: process_gone` of a process
    /// that ran on another machine (which the server cannot check).
    AcquireProcessGone,
    /// alice's live lease acquired again.
    Reacquire,
    /// alice's live lease renewed.
    Renew,
    /// alice's live lease released.
    Release,
    /// alice's live lease completed.
    Complete,
    /// alice's live lease abandoned.
    Abandon,
    /// alice's lease, expired a minute ago, released by whoever pushes (`by`).
    ReleaseExpired,
    /// alice's live lease revoked.
    Revoke,
}

impl Event {
    const ALL: [Event; 11] = [
        Event::AcquireFree,
        Event::AcquireExpired,
        Event::AcquireLive,
        Event::AcquireProcessGone,
        Event::Reacquire,
        Event::Renew,
        Event::Release,
        Event::Complete,
        Event::Abandon,
        Event::ReleaseExpired,
        Event::Revoke,
    ];

    fn name(self) -> &'static str {
        match self {
            Event::AcquireFree => "acquire-free",
            Event::AcquireExpired => "acquire-expired",
            Event::AcquireLive => "acquire-live",
            Event::AcquireProcessGone => "acquire-process-gone",
            Event::Reacquire => "reacquire",
            Event::Renew => "renew",
            Event::Release => "release",
            Event::Complete => "complete",
            Event::Abandon => "abandon",
            Event::ReleaseExpired => "release-expired",
            Event::Revoke => "revoke",
        }
    }

    /// The `event` recorded in `lease.json`.
    fn recorded(self) -> &'static str {
        match self {
            Event::AcquireFree
            | Event::AcquireExpired
            | Event::AcquireLive
            | Event::AcquireProcessGone => "acquire",
            Event::Reacquire => "reacquire",
            Event::Renew => "renew",
            Event::Release | Event::ReleaseExpired => "release",
            Event::Complete => "complete",
            Event::Abandon => "abandon",
            Event::Revoke => "revoke",
        }
    }

    fn is_acquire(self) -> bool {
        self.recorded() == "acquire"
    }

    /// Who would do this step in the ordinary course of things: what a forged `by` names.
    fn rightful(self) -> &'static str {
        match self {
            Event::AcquireFree
            | Event::Reacquire
            | Event::Renew
            | Event::Release
            | Event::Complete
            | Event::Abandon => HOLDER,
            Event::AcquireExpired
            | Event::AcquireLive
            | Event::AcquireProcessGone
            | Event::ReleaseExpired => OTHER,
            Event::Revoke => ADMIN,
        }
    }
}

/// Who pushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// alice, the holder of every prior lease, authenticated.
    Holder,
    /// bob, authenticated.
    Other,
    /// ops, authenticated and in `lease.admins`.
    Admin,
    /// Nobody authenticated: a `file://` push without `REMOTE_USER`.
    Anonymous,
}

impl Role {
    const ALL: [Role; 4] = [Role::Holder, Role::Other, Role::Admin, Role::Anonymous];

    /// The authenticated identity, if any.
    fn user(self) -> Option<&'static str> {
        match self {
            Role::Holder => Some(HOLDER),
            Role::Other => Some(OTHER),
            Role::Admin => Some(ADMIN),
            Role::Anonymous => None,
        }
    }

    /// The name the pusher records for itself.
    fn name(self) -> &'static str {
        self.user().unwrap_or(NOBODY)
    }

    fn label(self) -> &'static str {
        match self {
            Role::Anonymous => "anonymous",
            _ => self.name(),
        }
    }
}

/// What the pushed data says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// The pusher's own step, acting as itself: its own name as a new tenure's holder, and as
    /// `by` wherever it acts on alice's lease (the holder's own steps name nobody else).
    Honest,
    /// The step as alice would record it, whoever pushes: alice as a new tenure's holder, no
    /// `by`.
    Impersonating,
    /// The honest step with `by` naming someone other than the pusher (the step's rightful
    /// actor, or a third name if that is the pusher).
    ForgedBy,
    /// The honest step, dated (within the skew) when it would be legitimate though it is not
    /// at the server's clock: a renew or reacquire backdated to a minute before the expiry,
    /// a takeover or release of someone else's lease dated a minute after it.
    Misdated,
    /// The honest step dated 6 minutes ahead of the server's clock, beyond the skew.
    BeyondSkew,
    /// A release of alice's live lease recorded as `takeover: process_gone` of her process
    /// on another machine.
    Unverifiable,
    /// The `process_gone` takeover or release of alice's lease whose process ran on the
    /// server's own machine and PID namespace and is gone: something the server can verify.
    VerifiedGone,
    /// The same takeover or release, of a process recorded on the server's machine (its boot
    /// id) but in another PID namespace (another container's): its pid says nothing here.
    OtherNamespace,
    /// The same, of a process recorded on the server's machine without its PID namespace (a
    /// record from before it was recorded): unknown, never gone.
    NoNamespace,
}

impl Variant {
    const ALL: [Variant; 9] = [
        Variant::Honest,
        Variant::Impersonating,
        Variant::ForgedBy,
        Variant::Misdated,
        Variant::BeyondSkew,
        Variant::Unverifiable,
        Variant::VerifiedGone,
        Variant::OtherNamespace,
        Variant::NoNamespace,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Honest => "honest",
            Variant::Impersonating => "impersonating",
            Variant::ForgedBy => "forged-by",
            Variant::Misdated => "misdated",
            Variant::BeyondSkew => "beyond-skew",
            Variant::Unverifiable => "unverifiable",
            Variant::VerifiedGone => "verified-gone",
            Variant::OtherNamespace => "other-pid-namespace",
            Variant::NoNamespace => "no-pid-namespace",
        }
    }

    fn applies(self, event: Event, role: Role) -> bool {
        match self {
            Variant::Honest | Variant::ForgedBy | Variant::BeyondSkew => true,
            // alice impersonating herself is her honest step; a revoke names its actor in `by`.
            Variant::Impersonating => role != Role::Holder && event != Event::Revoke,
            Variant::Misdated => matches!(
                event,
                Event::AcquireExpired | Event::ReleaseExpired | Event::Reacquire | Event::Renew
            ),
            Variant::Unverifiable => event == Event::ReleaseExpired,
            Variant::VerifiedGone | Variant::OtherNamespace | Variant::NoNamespace => {
                matches!(event, Event::AcquireProcessGone | Event::ReleaseExpired)
            }
        }
    }
}

/// One push of the matrix.
struct Case {
    event: Event,
    role: Role,
    variant: Variant,
    issue: String,
    /// The ledger the server has before the push (the administrator's setup), oldest first.
    prior: Vec<Value>,
    /// The `lease.json` of the one pushed commit.
    next: Value,
}

impl Case {
    fn describe(&self) -> String {
        format!(
            "{} pushes {} ({})",
            self.role.label(),
            self.event.name(),
            self.variant.name()
        )
    }
}

/// A `process` object of `lease.json` (without `pid_ns` where `pid_ns` is `None`).
fn process(boot_id: &str, pid_ns: Option<u64>, pid: u32, start_ticks: u64) -> Value {
    let mut p = json!({ "pid": pid, "boot_id": boot_id, "start_ticks": start_ticks });
    if let Some(ns) = pid_ns {
        p["pid_ns"] = json!(ns);
    }
    p
}

/// A holder process on another machine: the server cannot tell whether it is gone.
fn process_elsewhere() -> Value {
    process("another-machine", Some(1), 4242, 1)
}

/// A holder process on the server's machine, in the PID namespace `pid_ns`, that looks gone
/// by this namespace's pids: this test's own pid with another start time (a recycled pid).
/// Verifiably gone in the server's own namespace only.
fn process_gone_here(boot_id: &str, pid_ns: Option<u64>) -> Value {
    process(boot_id, pid_ns, std::process::id(), 1)
}

/// The ledger the server has before the case's push.
fn prior_ledger(issue: &str, event: Event, variant: Variant, facts: &Facts) -> Vec<Value> {
    // alice's lease acquired 2 minutes ago, live for 10 more minutes.
    let live = || acquired(issue, HOLDER, 1, -120, Some(720));
    let live_with = |p: Value| vec![with(live(), "process", p)];
    match (event, variant) {
        (Event::AcquireFree, _) => Vec::new(),
        // Live for one more minute by the server's clock.
        (Event::AcquireExpired | Event::ReleaseExpired, Variant::Misdated) => {
            vec![acquired(issue, HOLDER, 1, -500, Some(560))]
        }
        // Expired a minute ago by the server's clock.
        (Event::Reacquire | Event::Renew, Variant::Misdated) => {
            vec![acquired(issue, HOLDER, 1, -400, Some(340))]
        }
        (_, Variant::VerifiedGone | Variant::OtherNamespace | Variant::NoNamespace) => {
            let boot = facts.boot_id.as_deref().unwrap_or("?");
            let ns = match variant {
                Variant::VerifiedGone => facts.pid_ns,
                Variant::OtherNamespace => facts.pid_ns.map(|ns| ns + 1),
                _ => None,
            };
            live_with(process_gone_here(boot, ns))
        }
        (Event::AcquireProcessGone, _) | (_, Variant::Unverifiable) => {
            live_with(process_elsewhere())
        }
        // Expired a minute ago by the server's clock.
        (Event::AcquireExpired | Event::ReleaseExpired, _) => {
            vec![acquired(issue, HOLDER, 1, -700, Some(640))]
        }
        _ => vec![live()],
    }
}

/// The `lease.json` of the case's pushed commit.
fn pushed_step(
    issue: &str,
    event: Event,
    role: Role,
    variant: Variant,
    prior: Option<&Value>,
) -> Value {
    let at_s = match (variant, event) {
        (Variant::Misdated, Event::Reacquire | Event::Renew) => -120,
        (Variant::Misdated, _) => 120,
        (Variant::BeyondSkew, _) => SKEW_S + 60,
        _ => 0,
    };
    let me = role.name();
    // Who the data names as acting.
    let named = if variant == Variant::Impersonating {
        HOLDER
    } else {
        me
    };
    let by: Option<&str> = if variant == Variant::ForgedBy {
        Some(if event.rightful() != me {
            event.rightful()
        } else {
            THIRD
        })
    } else if event == Event::Revoke {
        Some(named)
    } else if event.is_acquire() {
        None
    } else {
        // The holder's own steps and the release of her expired lease: alice is the previous
        // holder of every one; anyone else records itself.
        (named != HOLDER).then_some(named)
    };
    let previous = prior.and_then(|p| p["holder"].as_str());
    let token = prior.map_or(0, |p| p["token"].as_u64().expect("token"));
    let takeover_kind = if matches!(
        variant,
        Variant::Unverifiable
            | Variant::VerifiedGone
            | Variant::OtherNamespace
            | Variant::NoNamespace
    ) || event == Event::AcquireProcessGone
    {
        "process_gone"
    } else {
        "expired"
    };
    let mut v = match event.recorded() {
        "acquire" => {
            let mut v = acquired(issue, named, token + 1, at_s, Some(TTL_S));
            if let Some(h) = previous {
                v["previous_holder"] = json!(h);
                v["takeover"] = json!(takeover_kind);
            }
            v
        }
        recorded @ ("reacquire" | "renew") => {
            let mut v = prior.expect("a live lease").clone();
            v["event"] = json!(recorded);
            v["at"] = json!(at(at_s));
            v["expires_at"] = json!(at(at_s + TTL_S));
            v
        }
        recorded => {
            let previous = previous.expect("a held lease");
            let mut v = freed(issue, recorded, previous, token, at_s);
            if event == Event::Revoke {
                v["reason"] = json!("stuck");
            } else if by.is_some_and(|b| b != previous) {
                v["takeover"] = json!(takeover_kind);
            }
            v
        }
    };
    if let Some(by) = by {
        v["by"] = json!(by);
    }
    v
}

/// Every case of the matrix, each with its own issue.
fn cases(facts: &Facts) -> Vec<Case> {
    let mut cases = Vec::new();
    for event in Event::ALL {
        for role in Role::ALL {
            for variant in Variant::ALL {
                if !variant.applies(event, role)
                    || (matches!(variant, Variant::VerifiedGone | Variant::OtherNamespace)
                        && (facts.boot_id.is_none() || facts.pid_ns.is_none()))
                {
                    continue;
                }
                let issue = format!("{}.{}.{}", event.name(), role.label(), variant.name());
                let prior = prior_ledger(&issue, event, variant, facts);
                let next = pushed_step(&issue, event, role, variant, prior.last());
                cases.push(Case {
                    event,
                    role,
                    variant,
                    issue,
                    prior,
                    next,
                });
            }
        }
    }
    cases
}

// ---------------------------------------------------------------------------------------------
// Pushing and judging
// ---------------------------------------------------------------------------------------------

/// What the server did with one push.
#[derive(Debug)]
pub(crate) enum Got {
    /// Exit 0 and the ref moved to the pushed commit (and `verify` of it is clean).
    Accepted,
    /// Refused by the hook (its line, without the prefix), the ref unchanged.
    Refused(String),
    /// Anything else: a harness problem or a broken invariant.
    Broken(String),
}

/// The administrator's setup: builds each `(issue, ledger)` in `client` and writes them all
/// into the served repository with one plain fetch (which runs no hook); returns each issue's
/// tip.
pub(crate) fn seed<'a>(
    server: &Server,
    client: &TestRepo,
    ledgers: impl IntoIterator<Item = (&'a str, &'a [Value])>,
) -> BTreeMap<String, String> {
    let mut tips = BTreeMap::new();
    let mut updates = String::new();
    let mut refspecs = Vec::new();
    for (issue, values) in ledgers {
        if values.is_empty() {
            continue;
        }
        let commits = forge::build_chain(client, values);
        let tip = commits.last().expect("a commit").clone();
        updates += &format!("update refs/setup/{issue} {tip}\n");
        refspecs.push(format!("refs/setup/{issue}:refs/leases/{issue}"));
        tips.insert(issue.to_owned(), tip);
    }
    if tips.is_empty() {
        return tips;
    }
    client.git_stdin(&["update-ref", "--stdin"], updates.as_bytes());
    let source = client.git_dir();
    let mut fetch = vec!["fetch", "-q", source.to_str().expect("a UTF-8 path")];
    fetch.extend(refspecs.iter().map(String::as_str));
    server.git(&fetch);
    for (issue, tip) in &tips {
        assert_eq!(
            server.tip(issue).as_ref(),
            Some(tip),
            "the setup of {issue} did not land"
        );
    }
    tips
}

/// The URL `role` pushes to: http as its user, or `file://` for nobody.
fn url_for(server: &Server, role: Role) -> String {
    match role.user() {
        Some(user) => server.url_as(user),
        None => file_url(server),
    }
}

/// The served repository as a `file://` URL (pushed without any `REMOTE_USER`).
fn file_url(server: &Server) -> String {
    format!("file://{}", server.bare().display())
}

/// Plain `git push <url> <refspec>` from `client`, never prompting, without `REMOTE_USER`.
pub(crate) fn push_to(client: &TestRepo, url: &str, refspec: &str) -> Run {
    client
        .git_cmd()
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("REMOTE_USER")
        .args(["push", url, refspec])
        .run()
}

/// Judges what the server did with a push of `commit` to `refname` (`refs/leases/<issue>` or
/// a branch), which was at `before`.
pub(crate) fn judge(
    server: &Server,
    run: &Run,
    refname: &str,
    commit: &str,
    before: Option<&str>,
) -> Got {
    let after = server.rev(refname);
    let shown = refname.strip_prefix("refs/leases/").map_or_else(
        || format!("git-lease: refused {refname} at "),
        |issue| format!("git-lease: refused issue {issue} at "),
    );
    let line = run
        .stderr
        .lines()
        .find_map(|l| l.find(&shown).map(|i| &l[i + shown.len()..]))
        .map(|rest| {
            rest.split_once(": ")
                .map_or(rest, |(_, r)| r)
                .trim_end()
                .to_owned()
        });
    match (run.code, line) {
        (0, _) if after.as_deref() == Some(commit) => Got::Accepted,
        (0, _) => Got::Broken(format!(
            "exit 0, but {refname} is at {after:?}, not {commit}\n{run}"
        )),
        (_, Some(line)) if after.as_deref() == before => Got::Refused(line),
        (_, Some(_)) => Got::Broken(format!(
            "refused, yet {refname} moved from {before:?} to {after:?}\n{run}"
        )),
        (_, None) => Got::Broken(format!("refused, but not by the hook\n{run}")),
    }
}

/// Counts of one event type (or all) in the summary.
#[derive(Default)]
struct Tally {
    tried: usize,
    accepted: usize,
    accepted_legit: usize,
    refused_legit: usize,
    mismatches: usize,
}

impl Tally {
    fn add(&mut self, legit: bool, accepted: bool, mismatch: bool) {
        self.tried += 1;
        self.accepted += usize::from(accepted);
        self.accepted_legit += usize::from(accepted && legit);
        self.refused_legit += usize::from(!accepted && legit);
        self.mismatches += usize::from(mismatch);
    }

    fn row(&self, name: &str) -> String {
        format!(
            "{name:<22} {:>5} {:>8} {:>14} {:>16} {:>17} {:>10}",
            self.tried,
            self.accepted,
            self.accepted_legit,
            self.accepted - self.accepted_legit,
            self.refused_legit,
            self.mismatches
        )
    }
}

#[test]
fn forged_pushes_get_exactly_the_verdicts_of_the_spec() {
    let mut server = Server::http(&[HOLDER, OTHER, ADMIN]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    // lease.admins is multi-valued.
    for admin in [ADMIN, "root"] {
        server.git(&["config", "--add", "lease.admins", admin]);
    }
    server.start_at(&at(0));
    let facts = Facts {
        now: t0(),
        max_skew_s: SKEW_S,
        admins: vec![ADMIN.into(), "root".into()],
        boot_id: Some(boot_id()),
        pid_ns: Some(pid_ns()),
    };
    let cases = cases(&facts);
    let client = TestRepo::new();
    let tips = seed(
        &server,
        &client,
        cases.iter().map(|c| (c.issue.as_str(), c.prior.as_slice())),
    );

    let mut per_event: BTreeMap<Event, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    let mut mismatches = Vec::new();
    for case in &cases {
        let before = tips.get(&case.issue).map(String::as_str);
        let parents: Vec<&str> = before.into_iter().collect();
        let commit = forge::lease_commit(&client, &case.next, &parents);
        let expected = spec(&facts, case.prior.last(), &case.next, case.role.user());
        let refname = format!("refs/leases/{}", case.issue);
        let run = push_to(
            &client,
            &url_for(&server, case.role),
            &format!("{commit}:{refname}"),
        );
        let mut got = judge(&server, &run, &refname, &commit, before);
        if matches!(got, Got::Accepted) {
            // What the server accepted is a ledger that verifies clean.
            let verify = server.lease(&["verify", &case.issue]);
            if verify.code != 0 {
                got = Got::Broken(format!("accepted, but verify is not clean\n{verify}"));
            }
        }
        let accepted = matches!(got, Got::Accepted);
        let mismatch = matches!(got, Got::Broken(_)) || accepted != expected.is_ok();
        per_event
            .entry(case.event)
            .or_default()
            .add(expected.is_ok(), accepted, mismatch);
        total.add(expected.is_ok(), accepted, mismatch);
        if mismatch {
            let want = match &expected {
                Ok(()) => "accept".to_owned(),
                Err(why) => format!("refuse ({why})"),
            };
            let got = match &got {
                Got::Accepted => "accepted".to_owned(),
                Got::Refused(line) => format!("refused ({line})"),
                Got::Broken(what) => format!("BROKEN: {what}"),
            };
            mismatches.push(format!(
                "{}: {}: spec: {want}; server: {got}",
                case.issue,
                case.describe()
            ));
        }
    }

    let mut summary = vec![format!(
        "{:<22} {:>5} {:>8} {:>14} {:>16} {:>17} {:>10}",
        "event",
        "tried",
        "accepted",
        "accepted-legit",
        "accepted-illegit",
        "refused-but-legit",
        "mismatches"
    )];
    for (event, tally) in &per_event {
        summary.push(tally.row(event.name()));
    }
    summary.push(total.row("total"));
    eprintln!(
        "forged-push matrix against the server's hook:\n{}",
        summary.join("\n")
    );
    // The whole repository still verifies clean.
    let verify = server.lease(&["verify"]);
    assert!(
        mismatches.is_empty() && verify.code == 0,
        "{} of {} pushes got another verdict than the spec:\n\n{}\n\n{}\n\nverify of the whole server:\n{verify}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n"),
        summary.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Individual rules
// ---------------------------------------------------------------------------------------------

/// Adds a line to `failures` unless `got` is an acceptance (`want_accepted`) or a refusal.
fn expect(failures: &mut Vec<String>, what: &str, want_accepted: bool, got: Got) {
    let ok = matches!(
        (&got, want_accepted),
        (Got::Accepted, true) | (Got::Refused(_), false)
    );
    if !ok {
        failures.push(format!(
            "{what}: expected {}, got {got:?}",
            if want_accepted { "accepted" } else { "refused" }
        ));
    }
}

#[test]
fn git_lease_now_in_the_pushers_environment_is_ignored() {
    // Pushes over a local path and a file:// URL run the hook with the pusher's environment:
    // GIT_LEASE_NOW there must not move the server's clock, whether that is lease.hookNow or
    // the real clock. No identity is configured: only the clock is judged.
    let server = Server::with_hook();
    let client = TestRepo::new();
    let path = server.bare().to_str().expect("a UTF-8 path").to_owned();
    let mut failures = Vec::new();
    let real_now = Utc::now();
    let real_now = real_now - Duration::nanoseconds(real_now.timestamp_subsec_nanos().into());
    for (clock, now) in [("hook-now", t0()), ("real-clock", real_now)] {
        match clock {
            "hook-now" => server.config("lease.hookNow", &rfc3339(now)),
            _ => {
                let _ = server.git_run(&["config", "--unset", "lease.hookNow"]);
            }
        }
        let s = |secs: i64| (now - t0()).num_seconds() + secs;
        for (route, url) in [("path", path.clone()), ("file-url", file_url(&server))] {
            let issue = |name: &str| format!("{clock}.{route}.{name}");
            let (takeover, ahead, renew) = (issue("takeover"), issue("ahead"), issue("renew"));
            let tips = seed(
                &server,
                &client,
                [
                    // alice's lease, live for one more minute by the server's clock.
                    (
                        takeover.as_str(),
                        &[acquired(&takeover, HOLDER, 1, s(-500), Some(560))][..],
                    ),
                    // alice's lease, live for 9 more minutes.
                    (
                        renew.as_str(),
                        &[acquired(&renew, HOLDER, 1, s(-60), Some(600))][..],
                    ),
                ],
            );
            let mut attempt = |issue: &str, next: Value, fake_now: i64, want: bool, what: &str| {
                let before = tips.get(issue).map(String::as_str);
                let parents: Vec<&str> = before.into_iter().collect();
                let commit = forge::lease_commit(&client, &next, &parents);
                let refname = format!("refs/leases/{issue}");
                let run = client
                    .git_cmd()
                    .now(&at(s(fake_now)))
                    .args(["push", &url, &format!("{commit}:{refname}")])
                    .run();
                let got = judge(&server, &run, &refname, &commit, before);
                expect(
                    &mut failures,
                    &format!("{issue} ({what}, GIT_LEASE_NOW = server + {fake_now}s)"),
                    want,
                    got,
                );
            };
            // bob takes over 2 minutes ahead, when alice's lease would have expired.
            let bob = with(
                with(
                    acquired(&takeover, OTHER, 2, s(120), Some(TTL_S)),
                    "previous_holder",
                    json!(HOLDER),
                ),
                "takeover",
                json!("expired"),
            );
            attempt(&takeover, bob, 120, false, "a takeover of a live lease");
            // A new ledger an hour ahead.
            let late = acquired(&ahead, HOLDER, 1, s(3600), Some(TTL_S));
            attempt(&ahead, late, 3600, false, "an event an hour ahead");
            // alice's honest renew now, with her environment's clock an hour ahead (where
            // her lease has expired and her `at` is beyond the skew): accepted.
            let mut renewal = acquired(&renew, HOLDER, 1, s(-60), Some(600));
            renewal["event"] = json!("renew");
            renewal["at"] = json!(at(s(0)));
            renewal["expires_at"] = json!(at(s(TTL_S)));
            attempt(
                &renew,
                renewal,
                3600,
                true,
                "the holder's renew at the server's clock",
            );
        }
    }
    assert!(
        failures.is_empty(),
        "the hook took the pusher's GIT_LEASE_NOW into account:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_fenced_branch_belongs_to_the_whole_issue_its_star_matched() {
    // lease.fence = refs/heads/issue/*: refs/heads/issue/gh/123 is issue gh/123, not 123.
    let mut server = Server::http(&[HOLDER, OTHER]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.fence", "refs/heads/issue/*");
    server.start_at(&at(0));
    let client = TestRepo::new();
    seed(
        &server,
        &client,
        [
            ("123", &[acquired("123", HOLDER, 1, -60, Some(600))][..]),
            (
                "gh/123",
                &[acquired("gh/123", OTHER, 1, -60, Some(600))][..],
            ),
        ],
    );
    let mut failures = Vec::new();
    // Each branch: the pusher who must be refused first, then the holder; each pushes work
    // of its own (a new commit on one line of history, so every push is a fast-forward).
    for (branch, intruder, holder) in [
        ("refs/heads/issue/gh/123", HOLDER, OTHER),
        ("refs/heads/issue/123", OTHER, HOLDER),
    ] {
        for (who, want) in [(intruder, false), (holder, true)] {
            client.git(&[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("{who}: work"),
            ]);
            let work = client.git(&["rev-parse", "HEAD"]);
            let before = server.rev(branch);
            let run = push_to(&client, &server.url_as(who), &format!("{work}:{branch}"));
            let got = judge(&server, &run, branch, &work, before.as_deref());
            if let Got::Refused(line) = &got {
                if !line.starts_with("fence: ") && !line.starts_with("identity: ") {
                    failures.push(format!(
                        "{who} to {branch}: refused, but not by the fence: {line}"
                    ));
                }
            }
            expect(
                &mut failures,
                &format!("{who} pushes to {branch}"),
                want,
                got,
            );
        }
    }
    assert!(
        failures.is_empty(),
        "fences must take the issue as everything the glob's * matched:\n{}",
        failures.join("\n")
    );
}

#[test]
fn lease_admins_names_whole_identities() {
    // lease.admins = "Ops Team" (one value with a space) makes `Ops Team` an administrator,
    // and neither `Ops` nor `Team`.
    let team = "Ops Team";
    let mut server = Server::http(&[HOLDER, "Ops", "Team", team]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.admins", team);
    server.start_at(&at(0));
    let client = TestRepo::new();
    let pushers = [("Ops", false), ("Team", false), (team, true)];
    let issues: Vec<String> = pushers
        .iter()
        .map(|(who, _)| format!("admins.{}", who.replace(' ', "-")))
        .collect();
    let ledgers: Vec<Vec<Value>> = issues
        .iter()
        .map(|issue| vec![acquired(issue, HOLDER, 1, -60, Some(600))])
        .collect();
    let tips = seed(
        &server,
        &client,
        issues
            .iter()
            .zip(&ledgers)
            .map(|(i, l)| (i.as_str(), l.as_slice())),
    );
    let mut failures = Vec::new();
    for ((who, want), issue) in pushers.iter().zip(&issues) {
        let mut revoke = freed(issue, "revoke", HOLDER, 1, 0);
        revoke["by"] = json!(who);
        revoke["reason"] = json!("stuck");
        let before = tips.get(issue).map(String::as_str);
        let commit = forge::lease_commit(&client, &revoke, &[before.expect("a tip")]);
        let refname = format!("refs/leases/{issue}");
        let enc = |s: &str| s.replace(' ', "%20");
        let url = format!(
            "http://{}:{}@127.0.0.1:{}/leases.git",
            enc(who),
            enc(&format!("{who}pw")),
            server.port()
        );
        let run = push_to(&client, &url, &format!("{commit}:{refname}"));
        let got = judge(&server, &run, &refname, &commit, before);
        expect(
            &mut failures,
            &format!("{who} revokes alice's live lease"),
            *want,
            got,
        );
    }
    assert!(
        failures.is_empty(),
        "lease.admins must hold whole identities:\n{}\n\nserver log:\n{}",
        failures.join("\n"),
        server.log()
    );
}

#[test]
fn identities_are_compared_exactly_never_trimmed() {
    // The server authenticates accounts whose names differ from others' only by white space:
    // "ops " is not the administrator ops, " alice" is not alice, and the administrator value
    // "admin " names the account "admin ", not "admin".
    let users = [HOLDER, " alice", ADMIN, "ops ", "admin", "admin "];
    let mut server = Server::http_builtin(&users);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.admins", ADMIN);
    server.git(&["config", "--add", "lease.admins", "admin "]);
    server.start_at(&at(0));
    let client = TestRepo::new();
    let revoke = |issue: &str, by: &str| {
        let mut value = freed(issue, "revoke", HOLDER, 1, 0);
        value["by"] = json!(by);
        value["reason"] = json!("stuck");
        value
    };
    let renew = |issue: &str| crate::forge::renewed(issue, HOLDER, 1, -60, 0, TTL_S);
    let release = |issue: &str| freed(issue, "release", HOLDER, 1, 0);
    // (pusher, issue, the step, accepted?, the rule a refusal must be by)
    let cases = [
        // Recording the administrator it would pass for if trimmed.
        (
            "ops ",
            "exact.ops-space",
            revoke("exact.ops-space", ADMIN),
            false,
            "admin",
        ),
        (
            "admin",
            "exact.admin",
            revoke("exact.admin", "admin"),
            false,
            "admin",
        ),
        (
            "admin ",
            "exact.admin-space",
            revoke("exact.admin-space", "admin "),
            true,
            "",
        ),
        (ADMIN, "exact.ops", revoke("exact.ops", ADMIN), true, ""),
        (
            " alice",
            "exact.renew-space",
            renew("exact.renew-space"),
            false,
            "identity",
        ),
        (
            " alice",
            "exact.release-space",
            release("exact.release-space"),
            false,
            "identity",
        ),
        (HOLDER, "exact.renew", renew("exact.renew"), true, ""),
    ];
    let ledgers: Vec<Vec<Value>> = cases
        .iter()
        .map(|(_, issue, ..)| vec![acquired(issue, HOLDER, 1, -60, Some(TTL_S))])
        .collect();
    let tips = seed(
        &server,
        &client,
        cases
            .iter()
            .zip(&ledgers)
            .map(|((_, issue, ..), l)| (*issue, l.as_slice())),
    );
    let mut failures = Vec::new();
    for (who, issue, value, want, rule) in &cases {
        let before = tips.get(*issue).map(String::as_str);
        let commit = forge::lease_commit(&client, value, &[before.expect("a tip")]);
        let refname = format!("refs/leases/{issue}");
        let enc = |s: &str| s.replace(' ', "%20");
        let url = format!(
            "http://{}:{}@127.0.0.1:{}/leases.git",
            enc(who),
            enc(&format!("{who}pw")),
            server.port()
        );
        let run = push_to(&client, &url, &format!("{commit}:{refname}"));
        let got = judge(&server, &run, &refname, &commit, before);
        if let Got::Refused(line) = &got {
            if !line.starts_with(&format!("{rule}: ")) {
                failures.push(format!(
                    "{who:?} on {issue}: refused, but not by {rule}: {line}"
                ));
            }
        }
        let event = value["event"].as_str().unwrap_or_default();
        expect(
            &mut failures,
            &format!("{who:?} pushes a {event} of {issue}"),
            *want,
            got,
        );
    }
    assert!(
        failures.is_empty(),
        "identities must be compared exactly:\n{}\n\nserver log:\n{}",
        failures.join("\n"),
        server.log()
    );
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Parses an RFC 3339 instant of `lease.json`.
fn instant(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text:?} is not RFC 3339: {e}"))
        .with_timezone(&Utc)
}
