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

mod matrix;
mod rules;
mod spec;

use matrix::*;
use spec::*;

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
