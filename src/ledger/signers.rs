//! Where a repository's allowed signers list comes from, when `lease.requireSignatures` asks
//! every reader (and the server hook) to check who signed each ledger step
//! ([`crate::rules::signers`]). Who may sign is decided by what the team controls, never by
//! what is checked out.
//!
//! `lease.allowedSigners`, a path (`~/` is the home directory; a relative path is relative to
//! the working tree's top, or the git directory of a bare repository), comes first. When it is
//! unset, a clone ([`required`]) reads the file `.git-lease/allowed_signers` of the remote's
//! default branch as last fetched: the commit of the ref `refs/remotes/<remote>/HEAD` names
//! (which `git clone` records, and `git remote set-head <remote> --auto` records again), for
//! the configured remote `lease.remote` names, else `origin`. A bare repository without that
//! ref has no checkout: its own `HEAD` is the default branch it serves or was cloned with. The
//! server hook ([`served`]) reads the served repository's `HEAD`. The list is read from the
//! object database, never from a working tree, so a branch checked out for review changes
//! nothing.
//!
//! The list's version is its blob id and the edition of the rules that judge signatures
//! ([`RULES_EDITION`]): what a clone verified under one version is verified again under
//! another ([`crate::ledger::remote`], the list cache).

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::rules::signers::{AllowedSigners, DEFAULT_PATH};
use crate::store::Store;

/// The key that turns signature checks on.
pub const REQUIRE_KEY: &str = "lease.requireSignatures";
/// The key that names the list's file.
pub const LIST_KEY: &str = "lease.allowedSigners";
/// The remote whose default branch holds the list when `lease.remote` is unset.
pub const DEFAULT_REMOTE: &str = "origin";
/// The edition of the signature rules, part of a list's version: records verified under an
/// earlier edition (validity judged at the committer's time) are verified again.
pub const RULES_EDITION: &str = "2";

/// Returns the allowed signers list a clone checks every step against, or `None` when
/// `lease.requireSignatures` is not true: `lease.allowedSigners`, else the list of the remote's
/// default branch as fetched (a bare repository without one: its `HEAD`'s). A list required
/// but absent, unreadable or malformed is an error naming the file (and line).
pub fn required(store: &Store) -> Result<Option<AllowedSigners>> {
    if !is_required(store)? {
        return Ok(None);
    }
    if let Some(list) = configured(store)? {
        return Ok(Some(list));
    }
    // A `lease.remote` given as a URL has no tracking refs: `origin`'s list then.
    let remote = store
        .config_string("lease.remote")
        .filter(|r| store.config_string(&format!("remote.{r}.url")).is_some())
        .unwrap_or_else(|| DEFAULT_REMOTE.to_owned());
    let head = format!("refs/remotes/{remote}/HEAD");
    if let Some(branch) = store.symbolic_target(&head)? {
        let Some(commit) = store.tip_of(&branch)? else {
            return Err(missing(&format!(
                "{head} names {branch}, which does not exist: fetch {remote}"
            )));
        };
        let shown = format!("{branch}:{DEFAULT_PATH}");
        return match store.file_at(commit, &branch, DEFAULT_PATH)? {
            Some((_, data)) => parse(store, shown, &data).map(Some),
            None => Err(missing(&format!(
                "{remote}'s default branch ({branch}) has no {DEFAULT_PATH}"
            ))),
        };
    }
    if store.repo().is_bare() {
        return head_list(store).map(Some);
    }
    Err(missing(&format!(
        "{head} is not recorded: run `git remote set-head {remote} --auto`"
    )))
}

/// Returns the allowed signers list the server hook checks every pushed step against, or
/// `None` when `lease.requireSignatures` is not true: `lease.allowedSigners`, else the served
/// repository's default branch, its `HEAD`.
pub fn served(store: &Store) -> Result<Option<AllowedSigners>> {
    if !is_required(store)? {
        return Ok(None);
    }
    match configured(store)? {
        Some(list) => Ok(Some(list)),
        None => head_list(store).map(Some),
    }
}

fn is_required(store: &Store) -> Result<bool> {
    Ok(
        crate::config::boolean(REQUIRE_KEY, store.config_flag(REQUIRE_KEY).as_deref())?
            .unwrap_or(false),
    )
}

/// The list `lease.allowedSigners` names, if it is set.
fn configured(store: &Store) -> Result<Option<AllowedSigners>> {
    let Some(path) = store.config_string(LIST_KEY).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let file = resolve(store, &path);
    let data = std::fs::read(&file).map_err(|e| Error::Io {
        context: format!("cannot read {LIST_KEY} {}", file.display()),
        source: e,
    })?;
    parse(store, file.display().to_string(), &data).map(Some)
}

/// The list of the commit `HEAD` names.
fn head_list(store: &Store) -> Result<AllowedSigners> {
    match store.head_file(DEFAULT_PATH)? {
        Some((_, data)) => parse(store, format!("HEAD:{DEFAULT_PATH}"), &data),
        None => Err(missing(&format!("HEAD's commit has no {DEFAULT_PATH}"))),
    }
}

fn missing(why: &str) -> Error {
    Error::NoAllowedSigners {
        why: why.to_owned(),
    }
}

fn parse(store: &Store, source: String, data: &[u8]) -> Result<AllowedSigners> {
    let version = format!("{}.{RULES_EDITION}", store.blob_id(data)?);
    AllowedSigners::parse(&source, &version, data).map_err(|e| Error::AllowedSigners {
        file: source,
        line: e.line,
        reason: e.reason,
    })
}

fn resolve(store: &Store, path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let path = PathBuf::from(path);
    if path.is_absolute() {
        return path;
    }
    let base = store
        .repo()
        .workdir()
        .map_or_else(|| store.git_dir().to_owned(), |w| w.to_owned());
    base.join(path)
}
