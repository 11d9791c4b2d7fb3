//! Claims through a remote: the remote is the authority, `git push` with an expected old value
//! is the compare-and-swap.
//!
//! gix cannot push, so pushes and fetches run the git CLI, which brings every transport and
//! the credentials git has configured. What the remote was last seen to hold, *and verified*,
//! is kept in remote-tracking lease refs, `refs/lease-remotes/<remote>/<issue>`, the way
//! `refs/remotes/<remote>/*` tracks branches. A fetch lands in a staging namespace,
//! `refs/lease-incoming/<remote>/<issue>`; a tracking ref moves to the fetched tip only if that
//! tip descends from it and every new commit passes [`crate::step::judge`]. A remote that
//! rewound or rewrote a ledger (a hookless host anyone can force-push to) is refused with
//! [`Error::RemoteDiverged`] before anything is decided on it, so a client never issues a
//! token again that it has seen issued.
//!
//! A write decides optimistically from the tracking copy and pushes against it, so an
//! uncontended claim is one round trip; when the push finds the remote moved, or the copy says
//! someone else holds the lease, it fetches and decides again with the same rules. After a
//! push lands, the tracking ref and the local `refs/leases/<issue>` are set to exactly what the
//! remote accepted. Tracking refs are a cache of verified state: failing to update one (a
//! lock held by a concurrent command in the same clone) never fails a claim.

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gix::ObjectId;

use crate::any::AnyReport;
use crate::backend::{Backend, Listing, Tips};
use crate::cas::{self, Attempt};
use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};
use crate::lease::Lease;
use crate::ledger::{resolve_among, Ledger, Report};
use crate::liveness::Current;
use crate::rules::{Claim, Transition};
use crate::step::{Judgement, Rule};
use crate::store::Entry;
use crate::verify;

/// The namespace of remote-tracking lease refs: what each remote was seen to hold, verified.
pub const TRACKING_PREFIX: &str = "refs/lease-remotes/";

/// The namespace fetches land in before their new commits are verified.
pub const INCOMING_PREFIX: &str = "refs/lease-incoming/";

/// How many times a fetch is retried when a concurrent command in the same clone holds the
/// lock of a ref it updates.
const FETCH_LOCK_ATTEMPTS: u32 = 12;

/// How a remote's ledger departs from what this clone verified before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Divergence {
    /// The remote's ledger is behind what was seen, or gone: history was cut back.
    Rewound,
    /// The remote's ledger left the seen history, or its new commits break a rule.
    Rewritten,
}

impl Divergence {
    /// Returns `rewound` or `rewritten`.
    pub fn as_str(self) -> &'static str {
        match self {
            Divergence::Rewound => "rewound",
            Divergence::Rewritten => "rewritten",
        }
    }
}

/// One remote ledger that was refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diverged {
    /// The issue.
    pub issue: String,
    /// How it diverged.
    pub divergence: Divergence,
    /// The tip this clone verified before (kept in the tracking ref).
    pub seen: Option<String>,
    /// The remote's tip now (`None`: the remote no longer has the ledger).
    pub remote: Option<String>,
    /// What exactly is wrong, in one line.
    pub detail: String,
    /// The rules the remote's new commits break, when that is why.
    pub findings: Vec<verify::Finding>,
}

impl Diverged {
    /// Returns the error a command that needs this ledger fails with.
    pub fn into_error(self, remote: &str) -> Error {
        Error::RemoteDiverged {
            remote: remote.to_owned(),
            issue: self.issue,
            divergence: self.divergence.as_str(),
            detail: self.detail,
        }
    }
}

/// What one fetch of every lease ref found.
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    /// The remote's lease refs as fetched, `(issue, tip)`, sorted by issue.
    pub remote: Vec<(String, ObjectId)>,
    /// The verified tracking refs afterwards, `(issue, tip)`, sorted by issue, without the
    /// diverged ledgers.
    pub verified: Vec<(String, ObjectId)>,
    /// The ledgers the remote rewound or rewrote; their tracking refs keep what was verified.
    pub diverged: Vec<Diverged>,
}

/// How many attempts a remote write makes by default (`lease.pushAttempts`), each one decision
/// and at most one push, before it gives up with [`Error::LostRace`].
pub const DEFAULT_ATTEMPTS: u32 = 12;

/// A remote that holds the authoritative lease refs.
pub struct Remote<'a> {
    ledger: &'a Ledger,
    remote: String,
    /// The remote as messages show it: a URL without its credentials.
    shown: String,
    tracking: String,
    incoming: String,
    attempts: u32,
}

/// What one push told us.
pub(crate) enum PushResult {
    /// The remote took it.
    Done,
    /// The remote's ref was not at the expected value: the race was lost.
    Lost,
    /// A hook declined it.
    Declined(HookVerdict),
}

/// What the server's hooks said about a push they declined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookVerdict {
    /// The git-lease hook refused it by the lease rules: its lines, joined with `; `.
    Refused(String),
    /// No line carries the mark: the hook failed to start or crashed, or another hook (or the
    /// server's own access rules) declined the push. What the server said, joined with `; `.
    Failed(String),
}

impl HookVerdict {
    /// Returns the error of a push of `issues` that the server's hooks declined: a refusal by
    /// the lease rules ([`Error::PushRefused`], exit 3), or a failure of the server's hook
    /// ([`Error::HookFailed`], exit 1).
    pub(crate) fn into_error(self, issues: &[IssueId]) -> Error {
        match self {
            HookVerdict::Refused(message) => Error::PushRefused {
                issue: cas::names(issues),
                message,
            },
            HookVerdict::Failed(message) => Error::HookFailed {
                target: issues
                    .iter()
                    .map(IssueId::ref_name)
                    .collect::<Vec<_>>()
                    .join(" "),
                message,
            },
        }
    }
}

/// Sorts a declined push by the server's `remote:` lines in git's `stderr`: a refusal by the
/// lease rules carries [`crate::hook::REFUSAL_MARK`] at the start of a line; anything else is a
/// failure of the server's hook.
pub fn hook_verdict(stderr: &str) -> HookVerdict {
    let said: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if said
        .iter()
        .any(|l| l.starts_with(crate::hook::REFUSAL_MARK))
    {
        HookVerdict::Refused(said.join("; "))
    } else if said.is_empty() {
        HookVerdict::Failed("it declined the push without saying why".to_owned())
    } else {
        HookVerdict::Failed(said.join("; "))
    }
}

impl<'a> Remote<'a> {
    /// Returns the remote `remote` (a configured remote's name, or a URL) of `ledger`'s
    /// repository.
    pub fn new(ledger: &'a Ledger, remote: &str) -> Result<Remote<'a>> {
        if remote.is_empty() || remote.starts_with('-') {
            return Err(Error::InvalidInput(format!(
                "invalid remote {remote:?}: give a remote name or a URL"
            )));
        }
        let store = ledger.store();
        let configured = store
            .config_string(&format!("remote.{remote}.url"))
            .is_some();
        let slug = if configured && IssueId::new(remote).is_ok() && !remote.contains('/') {
            remote.to_owned()
        } else {
            format!("url-{:016x}", crate::cache::fnv1a(remote.as_bytes()))
        };
        let attempts = crate::config::positive(
            "lease.pushAttempts",
            store.config_string("lease.pushAttempts").as_deref(),
        )?
        .unwrap_or(DEFAULT_ATTEMPTS);
        Ok(Remote {
            ledger,
            remote: remote.to_owned(),
            shown: redact_url(remote),
            tracking: format!("{TRACKING_PREFIX}{slug}/"),
            incoming: format!("{INCOMING_PREFIX}{slug}/"),
            attempts,
        })
    }

    /// Returns the remote as messages show it: its name, or its URL without credentials.
    pub fn name(&self) -> &str {
        &self.shown
    }

    /// Returns the ref prefix under which this remote's lease refs are tracked locally.
    pub fn tracking_prefix(&self) -> &str {
        &self.tracking
    }

    /// Returns the staging namespace fetches of this remote land in.
    pub(crate) fn incoming_prefix(&self) -> &str {
        &self.incoming
    }

    /// Returns the ledger this remote's copies are kept in.
    pub(crate) fn ledger(&self) -> &Ledger {
        self.ledger
    }

    /// Returns how many attempts (each at most one push) a write may make before it gives up
    /// with a lost race.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    pub(crate) fn tracking_ref(&self, issue: &IssueId) -> String {
        format!("{}{}", self.tracking, issue)
    }

    pub(crate) fn git(&self) -> Command {
        crate::git::command(self.ledger.store().git_dir())
    }

    pub(crate) fn incoming_ref(&self, issue: &IssueId) -> String {
        format!("{}{}", self.incoming, issue)
    }

    /// Runs `git fetch` with `args`, retrying while a concurrent command in this clone holds
    /// the lock of a ref it would update. Returns git's output of the last attempt.
    pub(crate) fn fetch(&self, args: &[&str], shown: &str) -> Result<std::process::Output> {
        self.fetch_configured(&[], args, shown)
    }

    /// Runs `git -c <config>… fetch <args>` as [`Remote::fetch`] does.
    pub(crate) fn fetch_configured(
        &self,
        config: &[&str],
        args: &[&str],
        shown: &str,
    ) -> Result<std::process::Output> {
        let mut attempt = 0;
        loop {
            let mut cmd = self.git();
            for c in config {
                cmd.arg("-c").arg(c);
            }
            cmd.env("LC_ALL", "C").arg("fetch").args(args);
            let out = run(cmd, shown)?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let locked = stderr.contains("cannot lock ref") || stderr.contains(".lock");
            if out.status.success() || !locked || attempt + 1 >= FETCH_LOCK_ATTEMPTS {
                return Ok(out);
            }
            backoff(attempt);
            attempt += 1;
        }
    }

    /// Fetches the remote's `refs/leases/<issue>` and verifies what is new.
    ///
    /// Returns the remote's tip, now also the tracking ref's, or `None` if the remote has no
    /// such lease and never had one here; [`Error::RemoteDiverged`] if it rewound or rewrote
    /// the ledger this clone verified before.
    pub fn fetch_one(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        let answer = self.settled(
            || {
                // What was verified is read before the fetch: a command of this clone may
                // verify newer history meanwhile, which this fetch would not be behind.
                let seen = self.ledger.store().tip_of(&self.tracking_ref(issue))?;
                let fetched = self.fetch_tip(issue)?;
                let verdict = self.judge_fetched(issue.as_str(), seen, fetched)?;
                if let Ok(Some(tip)) = verdict {
                    if Some(tip) != seen {
                        self.track(&[(issue.as_str(), tip, seen)]);
                    }
                }
                Ok(verdict)
            },
            |verdict| verdict.is_err(),
        )?;
        answer.map_err(|diverged| diverged.into_error(&self.shown))
    }

    /// Runs `read` (a fetch and its verdict) again while `diverged` says it found a
    /// divergence, twice at most: concurrent fetches of one clone share the staging refs, so
    /// one may briefly find another's older snapshot there. A real rewind is found every time.
    pub(crate) fn settled<T>(
        &self,
        mut read: impl FnMut() -> Result<T>,
        diverged: impl Fn(&T) -> bool,
    ) -> Result<T> {
        let mut answer = read()?;
        for _ in 0..2 {
            if !diverged(&answer) {
                break;
            }
            answer = read()?;
        }
        Ok(answer)
    }

    /// Fetches `issue`'s ledger into the staging ref and returns its tip there (`None`: the
    /// remote has no such ledger).
    fn fetch_tip(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        let refspec = format!("+{}:{}", issue.ref_name(), self.incoming_ref(issue));
        let shown = format!("git fetch {} {refspec}", self.shown);
        let out = self.fetch(
            &[
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--",
                &self.remote,
                &refspec,
            ],
            &shown,
        )?;
        if out.status.success() {
            return self.ledger.store().tip_of(&self.incoming_ref(issue));
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("couldn't find remote ref") {
            return Ok(None);
        }
        Err(Error::Transport {
            command: shown,
            message: stderr.trim().to_owned(),
        })
    }

    /// Fetches every `refs/leases/*` of the remote in one fetch and verifies what is new in
    /// each ledger.
    pub fn fetch_all(&self) -> Result<Fetched> {
        self.settled(|| self.fetch_all_once(), |f| !f.diverged.is_empty())
    }

    pub(crate) fn fetch_all_once(&self) -> Result<Fetched> {
        let store = self.ledger.store();
        // What was verified is read before the fetch (see `fetch_one`).
        let seen = self.tracked()?;
        let refspec = format!("+{REF_PREFIX}*:{}*", self.incoming);
        let shown = format!("git fetch --prune {} {refspec}", self.shown);
        let out = self.fetch(
            &[
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--prune",
                "--",
                &self.remote,
                &refspec,
            ],
            &shown,
        )?;
        if !out.status.success() {
            return Err(Error::Transport {
                command: shown,
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        let remote = store.refs_under(&self.incoming)?;
        let mut fetched = Fetched {
            remote: Vec::with_capacity(remote.len()),
            ..Fetched::default()
        };
        // Every issue either side has: (the remote's tip, the tip verified before).
        let mut sides: std::collections::BTreeMap<String, (Option<ObjectId>, Option<ObjectId>)> =
            std::collections::BTreeMap::new();
        for (issue, tip) in remote {
            sides.entry(issue).or_default().0 = Some(tip);
        }
        for (issue, tip) in seen {
            sides.entry(issue).or_default().1 = Some(tip);
        }
        let mut moves = Vec::new();
        for (issue, (remote_tip, seen_tip)) in &sides {
            if let Some(tip) = remote_tip {
                fetched.remote.push((issue.clone(), *tip));
            }
            match self.judge_fetched(issue, *seen_tip, *remote_tip)? {
                Ok(Some(tip)) => {
                    if Some(tip) != *seen_tip {
                        moves.push((issue.as_str(), tip, *seen_tip));
                    }
                    fetched.verified.push((issue.clone(), tip));
                }
                Ok(None) => {}
                Err(diverged) => fetched.diverged.push(diverged),
            }
        }
        self.track(&moves);
        Ok(fetched)
    }

    /// Decides whether the remote's `fetched` tip of `issue` may replace the `seen` one: it
    /// must descend from it, and its new commits must pass the transition rules. Returns the
    /// tip to track (the caller moves the tracking ref) or why it was refused.
    pub(crate) fn judge_fetched(
        &self,
        issue: &str,
        seen: Option<ObjectId>,
        fetched: Option<ObjectId>,
    ) -> Result<std::result::Result<Option<ObjectId>, Diverged>> {
        let store = self.ledger.store();
        let diverged = |divergence, detail: String| Diverged {
            issue: issue.to_owned(),
            divergence,
            seen: seen.map(|s| s.to_string()),
            remote: fetched.map(|f| f.to_string()),
            detail,
            findings: Vec::new(),
        };
        let Some(tip) = fetched else {
            return Ok(match seen {
                None => Ok(None),
                Some(seen) => Err(diverged(
                    Divergence::Rewound,
                    format!(
                        "the remote no longer has this ledger, which was at {seen} here; lease refs are never deleted"
                    ),
                )),
            });
        };
        if seen == Some(tip) {
            return Ok(Ok(Some(tip)));
        }
        let check = verify::verify_segment(store, issue, tip, seen, Judgement::Recorded);
        if let Some(first) = check.findings.first() {
            let seen_text = seen.map_or_else(|| "none".to_owned(), |s| s.to_string());
            return Ok(Err(if first.rule == Rule::FastForward {
                match seen {
                    Some(seen) if verify::descends_from(store, seen, tip) => diverged(
                        Divergence::Rewound,
                        format!("the remote is at {tip}, behind {seen_text} seen here before"),
                    ),
                    _ => diverged(
                        Divergence::Rewritten,
                        format!(
                            "the remote is at {tip}, which does not descend from {seen_text} seen here before"
                        ),
                    ),
                }
            } else {
                Diverged {
                    findings: check.findings.clone(),
                    ..diverged(
                        Divergence::Rewritten,
                        format!("the remote's new commits break a rule: {first}"),
                    )
                }
            }));
        }
        Ok(Ok(Some(tip)))
    }

    /// Moves the tracking refs of `moves` (`(issue, new, seen)`) to what was verified. Best
    /// effort: a concurrent command in this clone may have moved one on, or hold its lock; the
    /// next read verifies again from what is there.
    pub(crate) fn track(&self, moves: &[(&str, ObjectId, Option<ObjectId>)]) {
        if moves.is_empty() {
            return;
        }
        let edits: Vec<(String, ObjectId, Option<ObjectId>)> = moves
            .iter()
            .map(|(issue, new, seen)| (format!("{}{issue}", self.tracking), *new, *seen))
            .collect();
        let _ = self
            .ledger
            .store()
            .move_refs(&edits, &format!("git-lease: verified from {}", self.shown));
    }

    /// Returns the tracking refs, as last verified, as `(issue, tip)`.
    pub fn tracked(&self) -> Result<Vec<(String, ObjectId)>> {
        self.ledger.store().refs_under(&self.tracking)
    }

    /// Returns the newest entry of `issue` as last verified.
    pub fn tracked_entry(&self, issue: &IssueId) -> Result<Option<Entry>> {
        let store = self.ledger.store();
        store
            .tip_of(&self.tracking_ref(issue))?
            .map(|tip| {
                store
                    .entry(issue.as_str(), tip)
                    .map(|e| self.ledger.observe(e))
            })
            .transpose()
    }

    /// Sets the tracking ref and the local lease ref to what the remote accepted, on top of
    /// `parent`. Both are copies: the remote has the write, so a lock another command in this
    /// clone holds (or any other failure here) must not fail it; the next read catches up.
    pub(crate) fn record_accepted(
        &self,
        issue: &IssueId,
        commit: ObjectId,
        parent: Option<ObjectId>,
        lease: &Lease,
    ) {
        let store = self.ledger.store();
        let message = format!("git-lease: {} via {}", lease.event, self.shown);
        let _ = store.move_refs(&[(self.tracking_ref(issue), commit, parent)], &message);
        let _ = store.set_ref(&issue.ref_name(), commit, &message);
    }

    /// Pushes `edits` as `(issue, new, expected old)` in one atomic push with a lease on each
    /// old value.
    pub(crate) fn push(
        &self,
        edits: &[(IssueId, ObjectId, Option<ObjectId>)],
    ) -> Result<PushResult> {
        let mut cmd = self.git();
        cmd.args(["push", "--porcelain", "--atomic", "--no-verify"]);
        for (issue, _, old) in edits {
            cmd.arg(format!(
                "--force-with-lease={}:{}",
                issue.ref_name(),
                old.map(|o| o.to_string()).unwrap_or_default()
            ));
        }
        cmd.arg("--").arg(&self.remote);
        for (issue, new, _) in edits {
            cmd.arg(format!("{new}:{}", issue.ref_name()));
        }
        let shown = format!("git push --atomic {} refs/leases/…", self.shown);
        let out = run(cmd, &shown)?;
        if out.status.success() {
            return Ok(PushResult::Done);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let rejections: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
        if rejections.iter().any(|l| l.contains("hook declined")) {
            return Ok(PushResult::Declined(hook_verdict(&stderr)));
        }
        const LOST: [&str; 8] = [
            "stale info",
            "atomic push failed",
            "atomic transaction failed",
            "failed to update ref",
            "cannot lock ref",
            "incorrect old value",
            "fetch first",
            "non-fast-forward",
        ];
        if !rejections.is_empty()
            && rejections
                .iter()
                .all(|l| LOST.iter().any(|reason| l.contains(reason)))
        {
            return Ok(PushResult::Lost);
        }
        let detail = if rejections.is_empty() {
            stderr.trim().to_owned()
        } else {
            format!("{}\n{}", rejections.join("\n"), stderr.trim())
        };
        Err(Error::Transport {
            command: shown,
            message: detail,
        })
    }
}

/// A remote's ledgers: every read fetches and verifies ([`Remote::fetch_one`],
/// [`Remote::fetch_all`]) before it answers (resolving an id tries the copy last verified
/// first); every write is a push with an expected old value.
impl Backend for Remote<'_> {
    /// Fetches `issue` and returns its newest entry on the remote.
    fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        match self.fetch_one(issue)? {
            None => Ok(None),
            Some(tip) => Ok(Some(
                self.ledger
                    .observe(self.ledger.store().entry(issue.as_str(), tip)?),
            )),
        }
    }

    /// Fetches all leases and returns the newest entry of each verified ledger, sorted by
    /// issue, with the ledgers the remote rewound or rewrote (left out of the entries).
    fn list(&self) -> Result<Listing> {
        let fetched = self.fetch_all()?;
        let (entries, _) =
            crate::listing::list(self.ledger.store(), &self.tracking, fetched.verified)?;
        let entries = entries
            .into_iter()
            .map(|e| self.ledger.observe(e))
            .collect();
        Ok(Listing {
            entries,
            diverged: fetched.diverged,
        })
    }

    /// Fetches `issue` and returns its ledger on the remote, newest first.
    fn log(&self, issue: &IssueId) -> Result<Vec<Entry>> {
        let tip = self.fetch_one(issue)?;
        self.ledger.store().history(issue.as_str(), tip)
    }

    /// Resolves an id or unique prefix against the remote's leases: first against the copy
    /// last verified, then, if nothing matches there, after fetching them all.
    fn resolve(&self, prefix: &str) -> Result<IssueId> {
        let local = self.tracked()?;
        match resolve_among(prefix, local.iter().map(|(n, _)| n.as_str())) {
            Err(Error::NoSuchLease(_)) => {
                let all = self.fetch_all()?;
                resolve_among(prefix, all.verified.iter().map(|(n, _)| n.as_str()))
            }
            other => other,
        }
    }

    fn tips(&self) -> Result<Tips> {
        let fetched = self.fetch_all()?;
        Ok((fetched.remote, fetched.diverged))
    }

    /// Applies one rule to the remote's ledger of `issue` under compare-and-swap by push.
    ///
    /// The first decision is made from the tracking copy; any answer that writes nothing is
    /// confirmed against a fresh fetch, so a refusal always reflects the remote. A lost push
    /// fetches and decides again, with jittered backoff, up to the attempt limit; then it
    /// fails with [`Error::LostRace`] having changed nothing.
    fn apply(
        &self,
        issue: &IssueId,
        decide: &mut dyn FnMut(Option<Current<'_>>) -> Transition,
    ) -> Result<Report> {
        let store = self.ledger.store();
        let mut fresh = false;
        let mut current = self.tracked_entry(issue)?;
        cas::retry(
            self.attempts,
            || issue.to_string(),
            |attempt| {
                let transition = decide(current.as_ref().map(Entry::current));
                let Some(next) = transition.next else {
                    if !fresh {
                        current = self.current(issue)?;
                        fresh = true;
                        return Ok(Attempt::Again);
                    }
                    return Ok(Attempt::Done(Report::unchanged(
                        transition.outcome,
                        issue,
                        current.take(),
                    )));
                };
                let parent = current.as_ref().map(|e| e.commit);
                let commit = store.write(&next, parent)?;
                match self.push(&[(issue.clone(), commit, parent)])? {
                    PushResult::Done => {
                        self.record_accepted(issue, commit, parent, &next);
                        Ok(Attempt::Done(Report::written(
                            transition.outcome,
                            issue,
                            commit,
                            parent,
                            next,
                        )))
                    }
                    PushResult::Lost => {
                        if fresh {
                            backoff(attempt);
                        }
                        current = self.current(issue)?;
                        fresh = true;
                        Ok(Attempt::Again)
                    }
                    PushResult::Declined(verdict) => {
                        Err(verdict.into_error(std::slice::from_ref(issue)))
                    }
                }
            },
        )
    }

    /// Claims all of `issues` on the remote in one atomic push, or none of them.
    fn acquire_all(
        &self,
        issues: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
    ) -> Result<Vec<Report>> {
        cas::retry(
            self.attempts,
            || cas::names(issues),
            |attempt| {
                // One fetch learns every issue's state (500 issues were 500 fetches).
                let (mut states, diverged) = self.fetch_some(issues)?;
                if let Some(d) = diverged.into_iter().next() {
                    return Err(d.into_error(self.name()));
                }
                let currents: Vec<Option<Entry>> = issues
                    .iter()
                    .map(|issue| states.remove(issue).flatten())
                    .collect();
                // The remote's own refs decide clashes: its push refuses them.
                let (reports, edits) = self
                    .ledger
                    .write_planned(issues, currents, claim, now, false)?;
                if edits.is_empty() {
                    return Ok(Attempt::Done(reports));
                }
                match self.push(&edits)? {
                    PushResult::Done => {
                        for r in &reports {
                            if let (true, Some(e)) = (r.wrote, &r.entry) {
                                self.record_accepted(&r.issue, e.commit, e.parent, &e.lease);
                            }
                        }
                        Ok(Attempt::Done(reports))
                    }
                    PushResult::Lost => {
                        backoff(attempt);
                        Ok(Attempt::Again)
                    }
                    PushResult::Declined(verdict) => Err(verdict.into_error(issues)),
                }
            },
        )
    }

    fn acquire_any(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        rng: &mut fastrand::Rng,
    ) -> Result<AnyReport> {
        Remote::acquire_any(self, candidates, claim, now, rng)
    }
}

/// Runs a git command; its stderr is returned with every URL's credentials removed, since it
/// ends up in messages.
fn run(mut cmd: Command, shown: &str) -> Result<std::process::Output> {
    let mut out = cmd.output().map_err(|e| Error::Transport {
        command: shown.to_owned(),
        message: format!("cannot run git: {e}"),
    })?;
    out.stderr = redact_urls(&String::from_utf8_lossy(&out.stderr)).into_bytes();
    Ok(out)
}

/// Returns `url` without credentials, as git shows remotes: `https://alice:secret@host/r`
/// becomes `https://host/r`. Anything that is not a URL with credentials is returned as is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Removes the credentials of every URL in `text` ([`redact_url`] applied word by word).
pub fn redact_urls(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(&redact_url(word));
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() || matches!(c, '\'' | '"' | '<' | '>') {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Sleeps before retry `attempt` (0-based): a ceiling exponential from 10 ms, capped at 640 ms,
/// and a random time between half of it and all of it, so that racers spread out instead of
/// colliding again in step.
fn backoff(attempt: u32) {
    let ceiling_ms = 10u64 << attempt.min(6);
    let ms = fastrand::u64(ceiling_ms / 2..=ceiling_ms);
    std::thread::sleep(Duration::from_millis(ms));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declined_push_is_a_refusal_only_when_a_line_carries_the_mark() {
        let refused = "To git://h/r\n! [remote rejected] x -> refs/leases/7 (pre-receive hook declined)\n\
                       remote: git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice\n";
        assert_eq!(
            hook_verdict(refused),
            HookVerdict::Refused(
                "git-lease: refused issue 7 at 0123456789ab: holder-change: held by alice".into()
            )
        );
        // gitolite's VREF: its own line follows ours.
        let vref = "remote: git-lease: refused issue 7 at 0123456789ab: identity: x\n\
                    remote: FATAL: VREF/LEASE: helper program exit status 256\n";
        assert!(matches!(hook_verdict(vref), HookVerdict::Refused(_)));
        for failed in [
            "remote: hooks/pre-receive: 3: exec: /root/bin/git-lease: Permission denied\n",
            "remote: policy says no (git-lease: refused is quoted, not the mark)\n",
            "remote: FATAL: + refs/leases/7 leases bob DENIED by fallthru\n",
        ] {
            assert!(
                matches!(hook_verdict(failed), HookVerdict::Failed(_)),
                "{failed}"
            );
        }
        assert_eq!(
            hook_verdict("error: failed to push some refs\n"),
            HookVerdict::Failed("it declined the push without saying why".into())
        );
    }

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(
            redact_url("http://alice:secret@127.0.0.1:8080/r.git"),
            "http://127.0.0.1:8080/r.git"
        );
        assert_eq!(redact_url("https://token@host/r"), "https://host/r");
        assert_eq!(redact_url("origin"), "origin");
        assert_eq!(redact_url("git@host:r.git"), "git@host:r.git");
        assert_eq!(redact_url("ssh://git@host/r@x"), "ssh://host/r@x");
        assert_eq!(
            redact_urls("fatal: unable to access 'http://a:pw@h/r/': refused"),
            "fatal: unable to access 'http://h/r/': refused"
        );
    }
}
