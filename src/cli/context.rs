//! What every command runs with: its ledger, the one clock reading, where its ledgers are, and
//! who it acts as.

use chrono::{DateTime, Utc};
use git_lease::backend::{Backend, Target, Unshared};
use git_lease::{Error, Holder, IssueId, Ledger, Ttl};

use super::{env_holder, Cli, HolderName, TtlArg, DEFAULT_TTL};

/// Resolves for a write: an id that matches no lease is taken as an exact, never-leased id.
pub(crate) fn resolve_for_write(backend: &dyn Backend, prefix: &str) -> Result<IssueId, Error> {
    match backend.resolve(prefix) {
        Err(Error::NoSuchLease(_)) => IssueId::new(prefix),
        other => other,
    }
}

pub(crate) struct Context {
    pub(crate) ledger: Ledger,
    pub(crate) now: DateTime<Utc>,
    pub(crate) json: bool,
    /// The remote this command's ledgers are on, if they are on one.
    pub(crate) remote: Option<String>,
    /// `--local`: the local refs, whatever `lease.remote` says.
    pub(crate) local: bool,
    /// Without a remote: why the local refs are for reading only, when they are.
    pub(crate) unshared: Option<Unshared>,
}

impl Context {
    /// Returns the context of `cli`'s command on `ledger` at `now`, its ledgers where the
    /// command line, `lease.remote` or the repository's remotes say
    /// ([`git_lease::backend::choose`]). A claim nobody else would see is refused here, before
    /// anything is written.
    pub(super) fn at(ledger: Ledger, now: DateTime<Utc>, cli: &Cli) -> Result<Context, Error> {
        let stated = git_lease::backend::stated(&ledger, cli.remote.as_deref(), cli.local);
        let local = stated == Some(Target::Local);
        let target = match stated {
            Some(target) => target,
            None if cli.command.finds_its_remote() => git_lease::backend::found(&ledger)?,
            None => Target::Local,
        };
        let (remote, unshared) = match target {
            Target::Remote(name) => (Some(name), None),
            Target::Unshared(unshared) if cli.command.writes_leases() => {
                return Err(unshared.error())
            }
            Target::Unshared(unshared) => (None, Some(unshared)),
            Target::Local => (None, None),
        };
        Ok(Context {
            ledger,
            now,
            json: cli.json,
            remote,
            local,
            unshared,
        })
    }

    /// Returns where this command's ledgers are ([`Target`]).
    pub(crate) fn target(&self) -> Target {
        match (&self.remote, &self.unshared) {
            (Some(name), _) => Target::Remote(name.clone()),
            (None, Some(unshared)) => Target::Unshared(unshared.clone()),
            (None, None) => Target::Local,
        }
    }

    /// Returns the backend of this command's ledgers ([`Context::target`]).
    pub(crate) fn backend(&self) -> Result<Box<dyn Backend + '_>, Error> {
        git_lease::backend::open(&self.ledger, &self.target())
    }

    /// Who this command acts as where no `--holder` is given: `GIT_LEASE_HOLDER` (set under
    /// `git lease run`), else `lease.holder`, else `user.email`.
    pub(crate) fn me(&self) -> Result<Holder, Error> {
        self.holder(&HolderName {
            holder: env_holder(),
        })
    }

    /// The holder a listing keeps, from `--mine` ([`Context::me`]) or `--holder H`.
    pub(crate) fn holder_filter(
        &self,
        mine: bool,
        holder: Option<String>,
    ) -> Result<Option<String>, Error> {
        Ok(if mine {
            Some(self.me()?.to_string())
        } else {
            holder
        })
    }

    pub(crate) fn holder(&self, arg: &HolderName) -> Result<Holder, Error> {
        let name = arg
            .holder
            .clone()
            .or_else(|| self.ledger.store().config_string("lease.holder"))
            .or_else(|| self.ledger.store().config_string("user.email"))
            .ok_or_else(|| {
                Error::InvalidInput(
                    "no holder: pass --holder, or set `git config lease.holder` or user.email"
                        .into(),
                )
            })?;
        Holder::new(name)
    }

    /// Returns the TTL of a claim made now, refusing one whose expiry the ledger could not
    /// record.
    pub(super) fn ttl(&self, arg: &TtlArg) -> Result<Ttl, Error> {
        let ttl = match &arg.ttl {
            Some(t) => Ttl::parse(t)?,
            None => {
                let set = self.ledger.store().config_string("lease.ttl");
                match git_lease::config::ttl("lease.ttl", set.as_deref())? {
                    Some(t) => t,
                    None => Ttl::parse(DEFAULT_TTL)?,
                }
            }
        };
        ttl.check_from(self.now)?;
        Ok(ttl)
    }
}
