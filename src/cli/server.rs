//! The server side of the command line: `hook`, `install-hook`, and the client's `push` that
//! carries the fencing token to a fenced branch.

mod install;
mod owner;
mod push;

use std::io::BufRead;

use git_lease::hook::{self, Policy, RefUpdate};
use git_lease::Error;

pub(crate) use install::{install_client_hooks, install_hook};
pub(crate) use push::push;

use super::{exit, Context, Failure, HookKind};

/// The line that marks a hook script as ours, so a reinstall replaces it instead of chaining.
const MARKER: &str = "# installed by git lease install-hook";

/// The setting that fixes the hook's clock for tests: read from the served repository's own
/// configuration file only, so that no pusher can set it (`GIT_LEASE_NOW`, `git -c` and the
/// global configuration do not reach it).
pub(crate) const HOOK_CLOCK_KEY: &str = "lease.hookNow";

/// Returns the instant set by [`HOOK_CLOCK_KEY`], if any.
pub(crate) fn hook_clock(
    store: &git_lease::Store,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, Error> {
    store
        .repository_config_string(HOOK_CLOCK_KEY)
        .map(|text| {
            git_lease::time::parse_instant(&text)
                .map_err(|e| Error::InvalidInput(format!("config {HOOK_CLOCK_KEY}: {e}")))
        })
        .transpose()
}

/// Parses one ref update of a hook's input.
fn ref_update(name: &str, old: &str, new: &str) -> Result<RefUpdate, Error> {
    let id = |hex: &str| {
        gix::ObjectId::from_hex(hex.as_bytes())
            .map_err(|e| Error::InvalidInput(format!("bad object id {hex:?} for {name}: {e}")))
    };
    Ok(RefUpdate {
        name: name.to_owned(),
        old: id(old)?,
        new: id(new)?,
    })
}

/// Reads a hook's `<old> <new> <ref>` lines from stdin.
fn stdin_updates() -> Result<Vec<RefUpdate>, Error> {
    stdin_updates_but(|_, _| false)
}

/// Reads a hook's `<old> <new> <ref>` lines from stdin, leaving out those `skip` names (by
/// their old and new values).
fn stdin_updates_but(skip: impl Fn(&str, &str) -> bool) -> Result<Vec<RefUpdate>, Error> {
    let mut updates = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| Error::Io {
            context: "cannot read the hook's input".into(),
            source: e,
        })?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [] => continue,
            [old, new, _] if skip(old, new) => continue,
            [old, new, name] => updates.push(ref_update(name, old, new)?),
            _ => {
                return Err(Error::InvalidInput(format!(
                    "hook input line {line:?} is not `<old> <new> <ref>`"
                )))
            }
        }
    }
    Ok(updates)
}

/// Runs git's `reference-transaction` hook protocol: at `prepared`, every lease ref created for
/// an archived issue must continue from its archived tip ([`hook::check_revivals`]), and the
/// fenced updates a push check approved are judged again ([`hook::check_transaction`]); at
/// `committed` or `aborted` their approvals are forgotten. It runs for every ref transaction
/// of the served repository, so it stays out of the way of all the others: other states, and
/// a policy it cannot read (which refuses every push at `pre-receive` already), let the
/// transaction through.
fn reference_transaction(ctx: &Context, state: &str) -> Result<u8, Failure> {
    if !matches!(state, "prepared" | "committed" | "aborted") {
        return Ok(exit::OK);
    }
    let store = ctx.ledger.store();
    let Ok(policy) = Policy::from_config(store) else {
        return Ok(exit::OK);
    };
    // A symbolic ref's update (`ref:<target>` for a value, as git 2.46 and newer pass it:
    // `git symbolic-ref HEAD refs/heads/main`) is never a push's, so never a fenced one.
    let updates = stdin_updates_but(|old, new| old.starts_with("ref:") || new.starts_with("ref:"))?;
    if state != "prepared" {
        if !policy.fences.is_empty() {
            hook::forget_approvals(store, &updates);
        }
        return Ok(exit::OK);
    }
    let mut refusals = hook::check_revivals(store, &updates);
    if !policy.fences.is_empty() {
        refusals.extend(hook::check_transaction(store, &policy, &updates, ctx.now));
    }
    Ok(exit::refused(&refusals))
}

/// Runs git's `update`, `pre-receive` or `reference-transaction` hook protocol; refusals go
/// to stderr, one line each, which git relays to the pusher as `remote: …` (all but the last).
pub(crate) fn hook(ctx: &Context, kind: &HookKind) -> Result<u8, Failure> {
    let (updates, options) = match kind {
        HookKind::Update { refname, old, new } => (vec![ref_update(refname, old, new)?], None),
        HookKind::PreReceive => (stdin_updates()?, Some(hook::push_options_from_env())),
        HookKind::ReferenceTransaction { state } => return reference_transaction(ctx, state),
        HookKind::PrePush { remote, url } => {
            return super::guard::pre_push(ctx, url.as_deref().unwrap_or(remote))
        }
        HookKind::PreCommit => return super::guard::pre_commit(ctx),
    };
    let store = ctx.ledger.store();
    let policy = Policy::from_config(store)?;
    let pusher = hook::pusher_from_env(&policy.identity);
    if let Some(report) = hook::probe_report(store, &policy, &pusher, &updates, ctx.now) {
        eprintln!("{}", report.line());
    }
    let refusals = hook::check_push(
        store,
        &policy,
        &pusher,
        options.as_deref(),
        &updates,
        ctx.now,
    );
    Ok(exit::refused(&refusals))
}
