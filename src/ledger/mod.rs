//! The local ledger: the rules of [`crate::rules`] applied to a repository's lease refs with
//! compare-and-swap.
//!
//! Every write reads the tip, decides with a pure rule, writes one commit on top of the tip
//! and moves the ref only if it still points at that tip. A lost swap re-reads and decides
//! again, so two racers never both win and a loser answers from the winner's state.

pub mod archive;
pub mod backend;
pub mod batch;
pub(crate) mod cas;
pub mod listing;
pub mod mirror;
pub mod one_of_many;
pub mod remote;
mod settle;
mod sharing;
pub mod signers;
pub mod verify;

use std::path::Path;

use crate::error::{Error, Result};
use crate::holder::Holder;
use crate::issue::IssueId;
use crate::lease::Lease;
use crate::liveness::{Current, LocalHost};
use crate::os::local_host;
use crate::rules::{self, Claim, Credentials, Ending, FenceFailure, Outcome, Transition};
use crate::store::{Entry, Staged, Store, Swap};
use crate::time::Ttl;
use cas::Attempt;
use chrono::{DateTime, Utc};

/// How many times a local write re-reads and decides again after a lost swap before it gives
/// up with [`Error::LostRace`]: local swaps take microseconds, so only under pathology.
const LOCAL_ATTEMPTS: u32 = 1000;

/// The answer to one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What the rules answered.
    pub outcome: Outcome,
    /// The issue operated on.
    pub issue: IssueId,
    /// The state after the operation: the new commit if one was written, otherwise the
    /// current one (`None` for an issue never leased).
    pub entry: Option<Entry>,
    /// Whether a commit was written.
    pub wrote: bool,
}

impl Report {
    /// Returns the report of an operation that wrote nothing: `entry` is the state it found.
    pub fn unchanged(outcome: Outcome, issue: &IssueId, entry: Option<Entry>) -> Report {
        Report {
            outcome,
            issue: issue.clone(),
            entry,
            wrote: false,
        }
    }

    /// Returns the report of an operation that recorded `lease` as `commit` on `parent`.
    pub fn written(
        outcome: Outcome,
        issue: &IssueId,
        commit: gix::ObjectId,
        parent: Option<gix::ObjectId>,
        lease: Lease,
    ) -> Report {
        Report {
            outcome,
            issue: issue.clone(),
            entry: Some(Entry::recorded(commit, parent, lease)),
            wrote: true,
        }
    }

    /// Returns the recorded state, if any.
    pub fn lease(&self) -> Option<&Lease> {
        self.entry.as_ref().map(|e| &e.lease)
    }
}

/// A ledger refused under `lease.requireSignatures`: its issue, its tip and why
/// ([`Ledger::verified_refs`]).
pub type Refused = (String, gix::ObjectId, Error);

/// A listing's entries, with the ledgers it set aside because their tip cannot be read.
pub type Listed = (crate::listing::Entries, Vec<crate::listing::Unreadable>);

/// A repository's tenure ledgers.
///
/// ```no_run
/// use git_lease::{Claim, Holder, Ledger, Outcome, Ttl};
/// use chrono::Utc;
///
/// let ledger = Ledger::discover(".".as_ref())?;
/// let issue = "42".parse()?;
/// let now = Utc::now();
/// let alice = Holder::new("alice@example.com")?;
/// let report = ledger.acquire(&issue, &Claim::new(alice, Ttl::parse("15m")?), now)?;
/// match report.outcome {
///     Outcome::Acquired => println!("token {}", report.lease().unwrap().token),
///     Outcome::Held => println!("held by {:?}", report.lease().unwrap().holder),
///     other => println!("refused: {}", other.as_str()), // wrong_secret, for a session lease
/// }
/// # Ok::<(), git_lease::Error>(())
/// ```
pub struct Ledger {
    store: Store,
    /// Local liveness ([`Ledger::with_local_liveness`]): `None` when off; when on, this
    /// reader's place, found the first time a record names a process or a reader's judgement
    /// is asked for ([`Ledger::reading`]: history from elsewhere, a listing). A claim or a
    /// `show` of a lease that names no process never reads `/proc`.
    host: Option<std::cell::OnceCell<Option<LocalHost>>>,
    /// The reader's clock and `lease.maxClockSkew`, when set ([`Ledger::with_reader_clock`]):
    /// history taken from elsewhere is then also judged against what this reader knows.
    clock: std::cell::Cell<Option<(DateTime<Utc>, chrono::Duration)>>,
    /// What the operations so far did beside their answer that a user must hear of (a local
    /// history kept aside); see [`Ledger::take_notices`].
    notices: std::cell::RefCell<Vec<String>>,
    /// Whether an operation moved a ledger ref here: see [`Ledger::wrote`].
    wrote: std::cell::Cell<bool>,
    /// With `lease.requireSignatures`, read with the reader's clock: the allowed signers every
    /// step taken from elsewhere, and every step a listing shows, must be signed by.
    signers: Option<crate::rules::signers::AllowedSigners>,
}

impl Ledger {
    /// Opens the repository containing `dir`, as git finds it.
    pub fn discover(dir: &Path) -> Result<Ledger> {
        Ok(Ledger::from_store(Store::discover(dir)?))
    }

    /// Opens exactly the repository at `path`.
    pub fn open(path: &Path) -> Result<Ledger> {
        Ok(Ledger::from_store(Store::open(path)?))
    }

    /// Wraps a store.
    pub fn from_store(store: Store) -> Ledger {
        Ledger {
            store,
            host: None,
            clock: std::cell::Cell::new(None),
            notices: Default::default(),
            wrote: std::cell::Cell::new(false),
            signers: None,
        }
    }

    /// Records something an operation did beside its answer that its user must hear of.
    pub(crate) fn notice(&self, text: String) {
        self.notices.borrow_mut().push(text);
    }

    /// Returns (and forgets) what the operations so far did beside their answers that a user
    /// must hear of: a command line prints them as warnings.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.notices.borrow_mut())
    }

    /// Returns true once an operation of this ledger wrote a claim to its own refs (a
    /// compare-and-swap that landed): what a local claim's user may need to hear of, and only
    /// then. Claims through a remote are the remote's writes.
    pub fn wrote(&self) -> bool {
        self.wrote.get()
    }

    pub(crate) fn note_write(&self) {
        self.wrote.set(true);
    }

    /// Judges history taken from elsewhere (a remote's new commits, a mirror's, an audit) also
    /// by what this reader knows: a step dated more than twice `lease.maxClockSkew` ahead of
    /// `now` is refused, as is a takeover from a holder process this machine sees running (with
    /// local liveness on). Without it (the default for library users), the rules alone judge.
    ///
    /// With `lease.requireSignatures`, the allowed signers list is read here too
    /// ([`signers::required`]), and every step judged must be signed as
    /// [`crate::rules::signers`] says.
    pub fn with_reader_clock(mut self, now: DateTime<Utc>) -> Result<Ledger> {
        let skew = crate::config::max_clock_skew(
            self.store.config_string("lease.maxClockSkew").as_deref(),
        )?;
        self.signers = signers::required(&self.store)?;
        self.clock.set(Some((now, skew)));
        Ok(self)
    }

    /// Returns the allowed signers every step must be signed by, when signatures are
    /// required ([`Ledger::with_reader_clock`]).
    pub fn signers(&self) -> Option<&crate::rules::signers::AllowedSigners> {
        self.signers.as_ref()
    }

    /// Moves the reader's clock (see [`Ledger::with_reader_clock`]) to `now`: for a command
    /// that reads again as time passes (`watch`, `run`). Does nothing if none was set.
    pub fn set_reader_clock(&self, now: DateTime<Utc>) {
        if let Some((_, skew)) = self.clock.get() {
            self.clock.set(Some((now, skew)));
        }
    }

    /// Returns what this reader knows when it judges history from elsewhere (`None`: the
    /// rules alone judge).
    pub fn reading(&self) -> Option<crate::step::Reading<'_>> {
        self.clock
            .get()
            .map(|(now, max_skew)| crate::step::Reading {
                now,
                max_skew,
                host: self.local_host(),
                signers: self.signers.as_ref(),
            })
    }

    /// Applies local liveness ([`crate::liveness`]) to every state this ledger reads: a lease
    /// whose holder process this reader establishes is gone (same boot, same PID namespace,
    /// nothing hidden) is not live. Without it (the default
    /// for library users), only the TTL decides.
    pub fn with_local_liveness(mut self) -> Ledger {
        self.host = Some(std::cell::OnceCell::new());
        self
    }

    /// This reader's place when local liveness is on and it can be established.
    fn local_host(&self) -> Option<&LocalHost> {
        self.host.as_ref()?.get_or_init(local_host).as_ref()
    }

    /// Records beside `entry` what this reader sees of its holder process, when local
    /// liveness is on: the observation [`rules::is_live`] takes as an input.
    pub fn observe(&self, mut entry: Entry) -> Entry {
        self.observe_in_place(&mut entry);
        entry
    }

    fn observe_in_place(&self, entry: &mut Entry) {
        if entry.lease.process.is_none() {
            return;
        }
        if let Some(host) = self.local_host() {
            entry.seen = host.observe(&entry.lease);
        }
    }

    /// Returns the underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Claims `issue` for `claim.holder`.
    ///
    /// Returns [`Outcome::Acquired`] (new tenure, or idempotent re-acquire by the live holder),
    /// [`Outcome::Held`] with the current holder's state, or [`Outcome::WrongSecret`] (the
    /// live holder's session secret missing or wrong).
    pub fn acquire(&self, issue: &IssueId, claim: &Claim, now: DateTime<Utc>) -> Result<Report> {
        self.apply(issue, |current| rules::acquire(issue, current, claim, now))
    }

    /// Extends the live holder's lease by `ttl` from `now`.
    ///
    /// Returns [`Outcome::Renewed`], [`Outcome::NotHolder`] or [`Outcome::WrongSecret`].
    pub fn renew<'a>(
        &self,
        issue: &IssueId,
        who: impl Into<Credentials<'a>>,
        ttl: Ttl,
        now: DateTime<Utc>,
    ) -> Result<Report> {
        let who = who.into();
        self.apply(issue, |current| rules::renew(current, who, ttl, now))
    }

    /// Frees the lease (keeping its token).
    ///
    /// Returns [`Outcome::Released`], [`Outcome::NotHeld`] (nothing to release: a success),
    /// [`Outcome::NotHolder`] or [`Outcome::WrongSecret`].
    pub fn release<'a>(
        &self,
        issue: &IssueId,
        who: impl Into<Credentials<'a>>,
        ending: Ending,
        now: DateTime<Utc>,
    ) -> Result<Report> {
        let who = who.into();
        self.apply(issue, |current| {
            rules::release(issue, current, who, ending, now)
        })
    }

    /// Frees someone else's lease as an administrator, recording who and why.
    pub fn revoke(
        &self,
        issue: &IssueId,
        by: &Holder,
        reason: &crate::remark::Remark,
        now: DateTime<Utc>,
    ) -> Result<Report> {
        self.apply(issue, |current| {
            rules::revoke(issue, current, by, reason, now)
        })
    }

    /// Returns the newest ledger entry of `issue`, or `None` if it was never leased.
    ///
    /// With `lease.requireSignatures`, a ledger with a step that breaks a rule (unsigned, or
    /// signed by a key not allowed for the one it needs, among the others) is
    /// [`Error::Unverified`].
    pub fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        let entry = self.store.current(issue)?;
        if let Some(e) = &entry {
            self.require_signed(issue.as_str(), e.commit)?;
        }
        Ok(entry.map(|e| self.observe(e)))
    }

    /// With `lease.requireSignatures` ([`Ledger::with_reader_clock`]), splits `refs` (`(issue,
    /// tip)`) into the ledgers every step of which is legitimate and signed as needed, and
    /// those refused, each with its [`Error::Unverified`]; the tips in `known` were verified
    /// before and are kept unread, and every tip verified now is added to it. Without the
    /// setting every ref is kept.
    pub fn verified_refs(
        &self,
        refs: Vec<(String, gix::ObjectId)>,
        known: &mut std::collections::HashSet<(String, gix::ObjectId)>,
    ) -> (Vec<(String, gix::ObjectId)>, Vec<Refused>) {
        let mut kept = Vec::with_capacity(refs.len());
        let mut refused = Vec::new();
        for (issue, tip) in refs {
            if known.contains(&(issue.clone(), tip)) {
                kept.push((issue, tip));
                continue;
            }
            match self.require_signed(&issue, tip) {
                Ok(()) => {
                    if self.signers.is_some() {
                        known.insert((issue.clone(), tip));
                    }
                    kept.push((issue, tip));
                }
                Err(e) => refused.push((issue, tip, e)),
            }
        }
        (kept, refused)
    }

    /// With `lease.requireSignatures` ([`Ledger::with_reader_clock`]), refuses the ledger of
    /// `issue` at `tip` unless every step of it is legitimate and signed as needed.
    fn require_signed(&self, issue: &str, tip: gix::ObjectId) -> Result<()> {
        if self.signers.is_none() {
            return Ok(());
        }
        match self.reading() {
            Some(reading) => crate::verify::require_legitimate(
                &self.store,
                issue,
                tip,
                None,
                crate::step::Judgement::Reading(&reading),
            ),
            None => Ok(()),
        }
    }

    /// The fencing check: `Ok(Ok(entry))` if `token` is the live tenure's token (and `holder`
    /// its holder), `Ok(Err(why))` if not.
    pub fn check(
        &self,
        issue: &IssueId,
        token: u64,
        holder: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<std::result::Result<Entry, (FenceFailure, Option<Entry>)>> {
        let current = self.current(issue)?;
        Ok(
            match rules::check(current.as_ref().map(Entry::current), token, holder, now) {
                Ok(()) => Ok(current.expect("a passed check has a lease")),
                Err(why) => Err((why, current)),
            },
        )
    }

    /// Returns the newest entry of every ledger, sorted by issue. Filter with
    /// [`rules::is_live`] for the live ones.
    /// A ledger whose tip cannot be read as a lease is the error.
    pub fn list(&self) -> Result<Vec<Entry>> {
        let (entries, unreadable) = self.listed(None)?;
        if let Some(first) = unreadable.into_iter().next() {
            return Err(first.into_error());
        }
        let mut entries = entries.into_vec();
        entries.iter_mut().for_each(|e| self.observe_in_place(e));
        Ok(entries)
    }

    /// [`Ledger::list`], `show` given the entries while another thread rewrites the list cache
    /// (when this listing does); returns them, and the ledgers set aside as unreadable.
    pub fn list_then(&self, show: &mut dyn FnMut(&crate::listing::Entries)) -> Result<Listed> {
        self.listed(Some(crate::listing::ListingConsumer {
            prepare: &|e| self.observe_in_place(e),
            show,
        }))
    }

    /// The ledgers' newest entries as this ledger's reader judges them, `consumer` done to
    /// them beside the cache's rewrite ([`crate::listing::list_namespace`]).
    fn listed(&self, consumer: Option<crate::listing::ListingConsumer<'_>>) -> Result<Listed> {
        let reading = self.reading();
        let (entries, stats) = crate::listing::list_namespace(
            &self.store,
            crate::issue::REF_PREFIX,
            crate::step::Judgement::reader(reading.as_ref()),
            consumer,
        )?;
        Ok((entries, stats.unreadable))
    }

    /// Resolves an issue id or a unique prefix of one against the existing lease refs.
    ///
    /// An exact match wins; otherwise exactly one issue must start with `prefix`. Returns
    /// [`Error::Ambiguous`] listing the candidates, or [`Error::NoSuchLease`].
    pub fn resolve(&self, prefix: &str) -> Result<IssueId> {
        if let Ok(exact) = IssueId::new(prefix) {
            if self.store.locate(&exact)?.is_some() {
                return Ok(exact);
            }
        }
        let mut names = self.store.lease_refs()?;
        if let Some(tip) = self.store.archive_tip()? {
            names.extend(self.store.archive_entries(&self.store.fold(tip)?)?);
            names.sort();
            names.dedup_by(|a, b| a.0 == b.0);
        }
        resolve_among(prefix, names.iter().map(|(n, _)| n.as_str()))
    }

    /// Returns the ledger of `issue`, newest entry first: one entry per event.
    pub fn log(&self, issue: &IssueId) -> Result<Vec<Entry>> {
        let tip = self.store.locate(issue)?.map(|(tip, _)| tip);
        if let Some(tip) = tip {
            self.require_signed(issue.as_str(), tip)?;
        }
        self.store.history(issue.as_str(), tip)
    }

    /// Applies one rule under compare-and-swap: read the tip, decide, write, swap; on a lost
    /// swap, read and decide again.
    pub fn apply(
        &self,
        issue: &IssueId,
        mut decide: impl FnMut(Option<Current<'_>>) -> Transition,
    ) -> Result<Report> {
        cas::retry(
            LOCAL_ATTEMPTS,
            || issue.to_string(),
            |_| {
                let current = self.current(issue)?;
                let transition = decide(current.as_ref().map(Entry::current));
                let Some(next) = transition.next else {
                    return Ok(Attempt::Done(Report::unchanged(
                        transition.outcome,
                        issue,
                        current,
                    )));
                };
                let parent = current.as_ref().map(|e| e.commit);
                let expected = current.as_ref().and_then(Entry::expected);
                if expected.is_none() {
                    self.store.ensure_no_clash(issue)?;
                }
                let commit = self.store.write(&next, parent)?;
                let message = format!("git-lease: {}", next.event);
                Ok(match self.store.swap(issue, commit, expected, &message)? {
                    Swap::Done => {
                        self.note_write();
                        Attempt::Done(Report::written(
                            transition.outcome,
                            issue,
                            commit,
                            parent,
                            next,
                        ))
                    }
                    Swap::Lost => Attempt::Again,
                })
            },
        )
    }

    /// Claims every issue in `issues` for `claim.holder`, all or none, in one ref transaction.
    ///
    /// Returns one report per issue; if any issue is refused ([`Outcome::Held`] or
    /// [`Outcome::WrongSecret`]), nothing was written, the refused ones say what they found
    /// and the others are [`Outcome::Skipped`].
    pub fn acquire_all(
        &self,
        issues: &[IssueId],
        claim: &Claim,
        now: DateTime<Utc>,
    ) -> Result<Vec<Report>> {
        cas::retry(
            LOCAL_ATTEMPTS,
            || cas::names(issues),
            |_| {
                let currents = issues
                    .iter()
                    .map(|issue| self.current(issue))
                    .collect::<Result<Vec<_>>>()?;
                let (reports, edits) = self.write_planned(issues, currents, claim, now, true)?;
                if edits.is_empty() {
                    return Ok(Attempt::Done(reports));
                }
                Ok(match self.store.swap_many(&edits, "git-lease: acquire")? {
                    Swap::Done => {
                        self.note_write();
                        Attempt::Done(reports)
                    }
                    Swap::Lost => Attempt::Again,
                })
            },
        )
    }

    /// Decides an all-or-none claim on `currents` (one per issue) and writes the commits of
    /// the acquires, returning one report per issue and the ref edits still to be made, as
    /// `(issue, new, expected old)`. Nothing is written when the claim is refused.
    pub(crate) fn write_planned(
        &self,
        issues: &[IssueId],
        currents: Vec<Option<Entry>>,
        claim: &Claim,
        now: DateTime<Utc>,
        check_clashes: bool,
    ) -> Result<(Vec<Report>, Vec<SwapEdit>)> {
        let states: Vec<(&IssueId, Option<Current<'_>>)> = issues
            .iter()
            .zip(&currents)
            .map(|(issue, current)| (issue, current.as_ref().map(Entry::current)))
            .collect();
        let transitions = rules::acquire_all(&states, claim, now);
        let mut reports = Vec::with_capacity(issues.len());
        let mut edits = Vec::new();
        let mut staged = Staged::default();
        for ((issue, current), t) in issues.iter().zip(currents).zip(transitions) {
            let Some(next) = t.next else {
                reports.push(Report::unchanged(t.outcome, issue, current));
                continue;
            };
            let parent = current.as_ref().map(|e| e.commit);
            let expected = current.as_ref().and_then(Entry::expected);
            if expected.is_none() && check_clashes {
                self.store.ensure_no_clash(issue)?;
            }
            let commit = self.store.stage(&mut staged, &next, parent)?;
            edits.push((issue.clone(), commit, expected));
            reports.push(Report::written(t.outcome, issue, commit, parent, next));
        }
        self.store.write_staged(&staged)?;
        Ok((reports, edits))
    }
}

/// A ref edit of a transaction or push: `(issue, new tip, expected old tip)`.
pub(crate) type SwapEdit = (IssueId, gix::ObjectId, Option<gix::ObjectId>);

/// Resolves `prefix` among `names`: exact match first, then a unique prefix match.
pub fn resolve_among<'a>(prefix: &str, names: impl Iterator<Item = &'a str>) -> Result<IssueId> {
    // An empty prefix would match every lease: it is no id at all.
    if prefix.is_empty() {
        return IssueId::new(prefix);
    }
    let mut candidates = Vec::new();
    for name in names {
        if name == prefix {
            return IssueId::new(name);
        }
        if name.starts_with(prefix) {
            candidates.push(name.to_owned());
        }
    }
    match candidates.len() {
        // A prefix that matches nothing and cannot be an id is bad input, not a missing lease.
        0 if IssueId::new(prefix.trim_end_matches('/')).is_err() => {
            IssueId::new(prefix.trim_end_matches('/'))
        }
        0 => Err(Error::NoSuchLease(prefix.to_owned())),
        1 => IssueId::new(&candidates[0]),
        _ => {
            candidates.sort_by(|a, b| crate::issue::natural_cmp(a, b));
            Err(Error::Ambiguous {
                prefix: prefix.to_owned(),
                candidates,
            })
        }
    }
}
