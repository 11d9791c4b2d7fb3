//! Where a command's claims go when the command line does not say: [`choose`].
//!
//! A claim made in a clone's own refs is seen by nobody else, so the same issue can be
//! claimed twice with the same token. A repository without remotes (agents in worktrees of
//! one machine) shares its refs with everyone who could claim: its own refs are the place.
//! A repository with remotes follows `lease.remote` when it is set (`.` for its own refs, as
//! `branch.<name>.remote` names the local repository); otherwise the remote the team uses
//! (the current branch's upstream, else `origin`, else the only remote) is the place when it
//! holds lease refs, as this clone remembers or one `git ls-remote` tells. When it holds none
//! (or cannot be asked), nothing tells whether claims are meant to be shared: reads answer
//! from the clone's own refs with a notice that says so, and writes are refused
//! ([`Error::Unshared`], exit 2) with the one setting that decides.

use std::cell::Cell;

use chrono::{DateTime, Utc};

use crate::backend::{Backend, Listing, Tips};
use crate::error::{Error, Result};
use crate::issue::IssueId;
use crate::ledger::{Ledger, Report};
use crate::liveness::Current;
use crate::one_of_many::{AnyReport, Order};
use crate::remote::Remote;
use crate::rules::{Claim, Transition};
use crate::store::Entry;

/// The value of `lease.remote` (or `--remote`) that keeps claims in the repository's own
/// refs, as `.` names the local repository in `branch.<name>.remote`.
pub const LOCAL_REMOTE: &str = ".";

/// Where a command's ledgers are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The repository's own refs: `--local`, `lease.remote = .`, or no remote at all.
    Local,
    /// A remote's (a configured remote's name, or a URL): `--remote`, `lease.remote`, or the
    /// remote the team uses, found holding lease refs.
    Remote(String),
    /// The repository's own refs, for reading only: it has remotes and nothing says whether
    /// claims are shared with one.
    Unshared(Unshared),
}

/// Why a repository with remotes has no place to claim in yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unshared {
    /// The configured remotes.
    pub remotes: Vec<String>,
    /// The remote to share with, as the deciding command names it.
    pub suggested: String,
    /// Why it was not chosen.
    pub why: String,
}

impl Unshared {
    /// The refusal of a write: [`Error::Unshared`].
    pub fn error(&self) -> Error {
        Error::Unshared {
            remotes: self.remotes.join(", "),
            why: self.why.clone(),
            suggested: self.suggested.clone(),
        }
    }

    /// What a read says beside its answer: that it comes from this repository's refs alone.
    pub fn note(&self) -> String {
        format!(
            "answered from this repository's own lease refs alone: it has remotes ({}) and \
             nothing says whether claims are shared ({}); share them with `git config \
             lease.remote {}`, or say they stay here with `git config lease.remote .`",
            self.remotes.join(", "),
            self.why,
            self.suggested
        )
    }
}

/// Returns where `ledger`'s command acts: `--local` (`local`), else `--remote` (`remote`),
/// else `lease.remote`, else what the repository's remotes show ([`found`]). Only the last
/// asks a remote anything, and only until this clone has verified lease refs of it.
pub fn choose(ledger: &Ledger, remote: Option<&str>, local: bool) -> Result<Target> {
    match stated(ledger, remote, local) {
        Some(target) => Ok(target),
        None => found(ledger),
    }
}

/// Returns where `ledger`'s command acts as the command line or `lease.remote` says: `--local`
/// (`local`), else `--remote` (`remote`), else `lease.remote` (`.`: the local refs); `None`
/// when nothing says.
pub fn stated(ledger: &Ledger, remote: Option<&str>, local: bool) -> Option<Target> {
    if local {
        return Some(Target::Local);
    }
    let name = remote
        .map(str::to_owned)
        .or_else(|| ledger.store().config_string("lease.remote"))?;
    Some(if name == LOCAL_REMOTE {
        Target::Local
    } else {
        Target::Remote(name)
    })
}

/// Returns the place the repository's remotes show, when nothing says where claims go: its
/// own refs without remotes; the remote the team uses when it holds lease refs; else
/// [`Target::Unshared`].
pub fn found(ledger: &Ledger) -> Result<Target> {
    let remotes = ledger.store().remote_names();
    if remotes.is_empty() {
        return Ok(Target::Local);
    }
    let unshared = |suggested: &str, why: String| {
        Target::Unshared(Unshared {
            remotes: remotes.clone(),
            suggested: suggested.to_owned(),
            why,
        })
    };
    let Some(team) = team_remote(ledger, &remotes) else {
        return Ok(unshared(
            &remotes[0],
            "none is the current branch's upstream or named origin".into(),
        ));
    };
    let remote = match Remote::new(ledger, &team) {
        Ok(remote) => remote,
        Err(e) => return Ok(unshared(&team, e.to_string())),
    };
    if remote.seen_sharing()? {
        return Ok(Target::Remote(team));
    }
    Ok(match remote.holds_leases() {
        Ok(true) => Target::Remote(team),
        Ok(false) => unshared(&team, format!("{team} holds no lease refs yet")),
        Err(e) => unshared(
            &team,
            format!("{team} could not be asked whether it holds lease refs: {e}"),
        ),
    })
}

/// Returns the remote the team uses, among `remotes`: the current branch's upstream, else
/// `origin`, else the only one.
fn team_remote(ledger: &Ledger, remotes: &[String]) -> Option<String> {
    let store = ledger.store();
    let upstream = store
        .head_name()
        .ok()
        .flatten()
        .and_then(|head| {
            let branch = head.strip_prefix("refs/heads/")?.to_owned();
            store.config_string(&format!("branch.{branch}.remote"))
        })
        .filter(|name| remotes.contains(name));
    upstream
        .or_else(|| remotes.iter().find(|r| *r == "origin").cloned())
        .or_else(|| (remotes.len() == 1).then(|| remotes[0].clone()))
}

/// The repository's own refs for reading, at [`Target::Unshared`]: every read answers with a
/// notice ([`Unshared::note`], once), every write is refused.
pub(crate) struct ReadOnly<'a> {
    pub(crate) ledger: &'a Ledger,
    pub(crate) unshared: Unshared,
    pub(crate) noted: Cell<bool>,
}

impl<'a> ReadOnly<'a> {
    /// The local ledger, for a read, said once.
    fn read(&self) -> &&'a Ledger {
        if !self.noted.replace(true) {
            self.ledger.notice(self.unshared.note());
        }
        &self.ledger
    }
}

impl Backend for ReadOnly<'_> {
    fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        Backend::current(self.read(), issue)
    }
    fn list(&self) -> Result<Listing> {
        Backend::list(self.read())
    }
    fn list_then(
        &self,
        show: &mut dyn FnMut(&crate::listing::Entries, &[crate::remote::Diverged]),
    ) -> Result<crate::ledger::Listed> {
        Backend::list_then(self.read(), show)
    }
    fn archived(&self) -> Result<Vec<Entry>> {
        Backend::archived(self.read())
    }
    fn log(&self, issue: &IssueId) -> Result<Vec<Entry>> {
        Backend::log(self.read(), issue)
    }
    fn resolve(&self, prefix: &str) -> Result<IssueId> {
        Backend::resolve(self.read(), prefix)
    }
    fn tips(&self) -> Result<Tips> {
        Backend::tips(self.read())
    }
    fn apply(
        &self,
        _issue: &IssueId,
        _decide: &mut dyn FnMut(Option<Current<'_>>) -> Transition,
    ) -> Result<Report> {
        Err(self.unshared.error())
    }
    fn acquire_all(&self, _: &[IssueId], _: &Claim, _: DateTime<Utc>) -> Result<Vec<Report>> {
        Err(self.unshared.error())
    }
    fn acquire_any(
        &self,
        _: &[IssueId],
        _: &Claim,
        _: DateTime<Utc>,
        _: Order,
        _: &mut fastrand::Rng,
    ) -> Result<AnyReport> {
        Err(self.unshared.error())
    }
}
