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
//!
//! This module holds the remote's [`Backend`] implementation (the rules applied through it);
//! `fetch` what it holds, verified, `push` writing to it, and `refusal` what a server said of
//! a push it refused, in every server family's words.

mod archive;
mod candidates;
mod fetch;
mod index;
mod memory;
mod name;
mod push;
pub mod refusal;
mod shares;
mod start;
mod verdict;

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::backend::{Backend, Listing, Tips};
use crate::cas::{self, Attempt};
use crate::error::{Error, Result};
use crate::git::version::Need;
use crate::issue::IssueId;
use crate::ledger::{resolve_among, Ledger, Report};
use crate::liveness::Current;
use crate::one_of_many::{AnyReport, Order};
use crate::rules::{Claim, Transition};
use crate::store::Entry;
pub use archive::{ARCHIVE_INCOMING_PREFIX, ARCHIVE_TRACKING_PREFIX};
pub(crate) use candidates::Unseen;
pub use fetch::{Diverged, Divergence, Fetched};
pub use index::INDEX_DIR;
pub use memory::MEMORY_DIR;
use push::run;
pub(crate) use push::PushResult;
pub use push::{read_branch_push, redact_url, redact_urls, BranchPush};
pub use refusal::{hook_verdict, HookVerdict};
pub use verdict::{UNSAFE_CAS_KEY, VERDICT_DIR};

/// The namespace of remote-tracking lease refs: what each remote was seen to hold, verified.
pub const TRACKING_PREFIX: &str = "refs/lease-remotes/";

/// The namespace fetches land in before their new commits are verified.
pub const INCOMING_PREFIX: &str = "refs/lease-incoming/";

/// How many attempts a remote write makes by default (`lease.pushAttempts`), each one decision
/// and at most one push, before it gives up with [`Error::LostRace`].
pub const DEFAULT_ATTEMPTS: u32 = 12;

/// A remote that holds the authoritative lease refs.
pub struct Remote<'a> {
    ledger: &'a Ledger,
    remote: String,
    /// The remote as messages show it: a URL without its credentials.
    shown: String,
    /// The remote's name in the refs that track it (`<remote>` in
    /// `refs/lease-remotes/<remote>/`).
    slug: String,
    tracking: String,
    incoming: String,
    attempts: u32,
    /// How long one fetch or push may take before it is killed (`lease.networkTimeout`;
    /// `None`: unbounded, set as 0).
    pub(crate) network_timeout: Option<Duration>,
    /// Whether the remote's settings leave http's stall limit to us (unset by the user).
    http_low_speed_unset: bool,
    /// What was verified from this remote, kept where no fetch can delete it.
    memory: memory::Memory,
    /// With `lease.requireSignatures`: the tips verified whole under the list read now.
    vouched: Option<memory::Memory>,
    /// The issues whose seen tip was recalled from `memory` without its commit, so without a
    /// tracking ref to move from.
    recalled: std::cell::RefCell<std::collections::HashSet<String>>,
    /// The local ledger tips read just before a push, by issue, for [`Remote::record_accepted`].
    local_before_push: std::cell::RefCell<std::collections::HashMap<String, Option<gix::ObjectId>>>,
    /// The remote's archive as fetched and verified by the read under way (`None`: not
    /// fetched yet; see [`Remote::fetched_archive`]).
    archive: std::cell::RefCell<Option<Option<crate::store::Fold>>>,
    /// `lease.trustArchive` as set (`None`: unset, and the server's hook decides; see
    /// [`index`]).
    trust_archive: Option<bool>,
    /// Whether a claim is under way: only a claim probes the server for its hook's word on
    /// the archive ([`Remote::trusts_newest_fold_once_judged`]).
    claiming: std::cell::Cell<bool>,
    /// The remote's newest fold as fetched into its index by the read under way (`None`: not
    /// fetched yet; see [`Remote::newest_fold`]).
    indexed: std::cell::RefCell<Option<Option<std::rc::Rc<index::IndexedFold>>>>,
    /// What doctor found of the server's compare-and-swap.
    verdict: verdict::Verdict,
    /// Whether pushes go to a repository on this machine through git's own receive-pack,
    /// which honours expected old values: no probe is needed.
    local_push: bool,
    /// Whether this command's writes were found allowed by that verdict (read once).
    writes_allowed: std::cell::Cell<bool>,
}

/// The setting that lets claims read a remote's newest fold without judging the folds
/// before it, until a read verifies them ([`index`]).
pub const TRUST_ARCHIVE_KEY: &str = "lease.trustArchive";

/// How long one fetch or push of a remote may take by default (`lease.networkTimeout`).
pub const DEFAULT_NETWORK_TIMEOUT: Duration = Duration::from_secs(120);

/// Over http, a transfer slower than one byte a second for this long is given up (git's
/// `http.lowSpeedLimit` and `http.lowSpeedTime`, unless configured).
const HTTP_LOW_SPEED_TIME: &str = "30";

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
        name::check_exists(store, remote, configured)?;
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
        let network_timeout = crate::config::duration(
            "lease.networkTimeout",
            store.config_string("lease.networkTimeout").as_deref(),
        )?
        .unwrap_or(DEFAULT_NETWORK_TIMEOUT);
        let trust_archive = crate::config::boolean(
            TRUST_ARCHIVE_KEY,
            store.config_flag(TRUST_ARCHIVE_KEY).as_deref(),
        )?;
        let http_low_speed_unset = store.config_string("http.lowSpeedLimit").is_none()
            && store.config_string("http.lowSpeedTime").is_none();
        // Pushes go to the push URL: that server's compare-and-swap is what a write relies on.
        let push_url = if configured {
            store
                .config_string(&format!("remote.{remote}.pushurl"))
                .or_else(|| store.config_string(&format!("remote.{remote}.url")))
                .unwrap_or_else(|| remote.to_owned())
        } else {
            remote.to_owned()
        };
        let local_push = verdict::is_local(&push_url)
            && !(configured
                && store
                    .config_string(&format!("remote.{remote}.receivepack"))
                    .is_some());
        Ok(Remote {
            verdict: verdict::Verdict::of(store, &push_url),
            local_push,
            writes_allowed: Default::default(),
            memory: memory::Memory::of(store, &slug),
            vouched: (ledger.signers())
                .map(|list| memory::Memory::verified_under(store, &slug, list.version())),
            recalled: Default::default(),
            local_before_push: Default::default(),
            network_timeout: (!network_timeout.is_zero()).then_some(network_timeout),
            http_low_speed_unset,
            ledger,
            remote: remote.to_owned(),
            shown: redact_url(remote),
            tracking: format!("{TRACKING_PREFIX}{slug}/"),
            incoming: format!("{INCOMING_PREFIX}{slug}/"),
            slug,
            archive: Default::default(),
            trust_archive,
            claiming: Default::default(),
            indexed: Default::default(),
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

    /// Returns git for a fetch or push of this remote: over http, a stalled transfer is given
    /// up after [`HTTP_LOW_SPEED_TIME`] seconds unless the user set git's own limits. A git
    /// too old for a remote's commands (or for this repository's reftable refs) is refused
    /// first, with [`Error::GitTooOld`] ([`crate::git::version`]).
    pub(crate) fn git(&self) -> Result<Command> {
        self.git_in(self.ledger.store().git_dir())
    }

    /// Returns git as [`Remote::git`] does, for the repository at `git_dir` (this clone's,
    /// or its archive index of the remote).
    pub(crate) fn git_in(&self, git_dir: &std::path::Path) -> Result<Command> {
        let store = self.ledger.store();
        let mut needs = vec![Need::Remote];
        needs.extend_from_slice(store.git_needs());
        crate::git::version::require(&needs)?;
        let mut cmd = crate::git::command(git_dir);
        if self.http_low_speed_unset {
            cmd.args(["-c", "http.lowSpeedLimit=1", "-c"])
                .arg(format!("http.lowSpeedTime={HTTP_LOW_SPEED_TIME}"));
        }
        Ok(cmd)
    }

    /// Runs `cmd`, a git command talking to this remote, within `lease.networkTimeout`.
    pub(crate) fn run_git(&self, cmd: Command, shown: &str) -> Result<std::process::Output> {
        run(cmd, shown, self.network_timeout)
    }

    /// Runs `cmd` as [`Remote::run_git`] does, for at most `limit` (or `lease.networkTimeout`
    /// when that is shorter).
    pub(crate) fn run_git_within(
        &self,
        cmd: Command,
        shown: &str,
        limit: Duration,
    ) -> Result<std::process::Output> {
        let limit = self.network_timeout.map_or(limit, |l| l.min(limit));
        run(cmd, shown, Some(limit))
    }

    pub(crate) fn incoming_ref(&self, issue: &IssueId) -> String {
        format!("{}{}", self.incoming, issue)
    }

    /// Returns the remote as git is given it: a configured remote's name, or a URL (with its
    /// credentials: never for messages).
    pub(crate) fn target(&self) -> &str {
        &self.remote
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
            Some((tip, place)) => {
                let mut entry = self.ledger.store().entry(issue.as_str(), tip)?;
                entry.place = place;
                Ok(Some(self.ledger.observe(entry)))
            }
        }
    }

    /// Fetches all leases and returns the newest entry of each verified ledger, sorted by
    /// issue, with the ledgers the remote rewound or rewrote (left out of the entries).
    fn list(&self) -> Result<Listing> {
        let fetched = self.fetch_all()?;
        let (entries, stats) = crate::listing::list(
            self.ledger.store(),
            &self.tracking,
            fetched.verified,
            // Every tip was verified as it was fetched.
            crate::step::Judgement::Recorded,
        )?;
        let entries = entries
            .into_iter()
            .map(|e| self.ledger.observe(e))
            .collect();
        Ok(Listing {
            entries,
            diverged: fetched.diverged,
            unreadable: stats.unreadable,
        })
    }

    /// Fetches the remote's archive and returns the newest entry of each ledger it records
    /// whose ref the remote no longer has.
    fn archived(&self) -> Result<Vec<Entry>> {
        self.forget_archive();
        let Some(fold) = self.fetched_archive()? else {
            return Ok(Vec::new());
        };
        let on_remote = self.ledger.store().refs_under(&self.incoming)?;
        crate::backend::only_archived(self.ledger, &fold, &on_remote)
    }

    /// Fetches `issue` and returns its ledger on the remote, newest first.
    fn log(&self, issue: &IssueId) -> Result<Vec<Entry>> {
        let tip = self.fetch_one(issue)?.map(|(tip, _)| tip);
        self.ledger.store().history(issue.as_str(), tip)
    }

    /// Resolves an id or unique prefix against the remote's leases: first against the copy
    /// last verified, then, if nothing matches there, after fetching them all.
    fn resolve(&self, prefix: &str) -> Result<IssueId> {
        let local = self.tracked()?;
        match resolve_among(prefix, local.iter().map(|(n, _)| n.as_str())) {
            Err(Error::NoSuchLease(_)) => {
                let all = self.fetch_all()?;
                let found = resolve_among(prefix, all.verified.iter().map(|(n, _)| n.as_str()));
                // A ledger the remote has but this clone refused is no unknown issue.
                match (found, all.diverged.into_iter().find(|d| d.issue == prefix)) {
                    (Err(Error::NoSuchLease(_)), Some(refused)) => {
                        Err(refused.into_error(&self.shown))
                    }
                    (found, _) => found,
                }
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
        self.begin_claim();
        let store = self.ledger.store();
        let start::Start {
            mut current,
            mut guard,
            mut fresh,
            mut blind,
        } = self.start(issue)?;
        // The lock in the way of the last attempt's push, if one was.
        let mut locked: Option<String> = None;
        let answer = cas::retry(
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
                let expected = current.as_ref().and_then(Entry::expected);
                let commit = store.write(&next, parent)?;
                let pushed = match self.push_guarded(&[(issue.clone(), commit, expected)], guard) {
                    // A server that takes no all-or-none push: read the archive instead.
                    Err(Error::AtomicUnsupported { .. }) if guard.is_some() => {
                        guard = None;
                        current = self.current(issue)?;
                        fresh = true;
                        return Ok(Attempt::Again);
                    }
                    pushed => pushed?,
                };
                // Only the first, optimistic push needs the guard: later ones decide on a
                // fetch that read the archive too.
                guard = None;
                match pushed {
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
                    lost @ (PushResult::Lost | PushResult::Locked(_)) => {
                        locked = match lost {
                            PushResult::Locked(lock) => Some(lock),
                            _ => None,
                        };
                        if fresh {
                            backoff(attempt);
                        }
                        current = self.current(issue)?;
                        fresh = true;
                        Ok(Attempt::Again)
                    }
                    // A blind claim the hook refused (the archive records the issue, most
                    // likely): decide again from what the remote and its archive hold.
                    PushResult::Declined(_) if blind => {
                        blind = false;
                        current = self.current(issue)?;
                        fresh = true;
                        Ok(Attempt::Again)
                    }
                    PushResult::Declined(verdict) => {
                        Err(verdict.into_error(std::slice::from_ref(issue)))
                    }
                }
            },
        );
        still_locked(&self.shown, answer, locked, std::slice::from_ref(issue))
    }

    /// Claims all of `issues` on the remote in one atomic push, or none of them.
    fn acquire_all(
        &self,
        issues: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
    ) -> Result<Vec<Report>> {
        let mut locked: Option<String> = None;
        let answer = cas::retry(
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
                    lost @ (PushResult::Lost | PushResult::Locked(_)) => {
                        locked = match lost {
                            PushResult::Locked(lock) => Some(lock),
                            _ => None,
                        };
                        backoff(attempt);
                        Ok(Attempt::Again)
                    }
                    PushResult::Declined(verdict) => Err(verdict.into_error(issues)),
                }
            },
        );
        still_locked(&self.shown, answer, locked, issues)
    }

    fn acquire_any(
        &self,
        candidates: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
        order: Order,
        rng: &mut fastrand::Rng,
    ) -> Result<AnyReport> {
        Remote::acquire_any(self, candidates, claim, now, order, rng)
    }
}

/// Turns a write's lost race into [`Error::RemoteLocked`] when its last push was refused
/// for a lock file in the way: no other writer moved the ref, the lock stayed.
fn still_locked<T>(
    shown: &str,
    answer: Result<T>,
    locked: Option<String>,
    issues: &[IssueId],
) -> Result<T> {
    match (answer, locked) {
        (Err(Error::LostRace { .. }), Some(message)) => Err(Error::RemoteLocked {
            remote: shown.to_owned(),
            target: cas::ref_names(issues),
            message,
        }),
        (answer, _) => answer,
    }
}

/// Sleeps before retry `attempt` (0-based): a ceiling exponential from 10 ms, capped at 640 ms,
/// and a random time between half of it and all of it, so that racers spread out instead of
/// colliding again in step.
pub(crate) fn backoff(attempt: u32) {
    let ceiling_ms = 10u64 << attempt.min(6);
    let ms = fastrand::u64(ceiling_ms / 2..=ceiling_ms);
    std::thread::sleep(Duration::from_millis(ms));
}
