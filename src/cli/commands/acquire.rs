//! `git lease acquire`: claim issues, all or none, or with `--any` exactly one of them.

use std::io::Write;

use git_lease::{rules, Claim, Error, IssueId, Remark, RemarkKind};

use crate::cli::output::emit_reports;
use crate::cli::{one_of_many, Context, Failure, HolderArg, TtlArg};

// The arguments of `acquire`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The exact issue ids (with --any, `-` reads more from stdin, one a line)
    #[arg(required = true, value_name = "ISSUE")]
    pub(crate) issues: Vec<String>,
    /// Claim exactly one free issue of these candidates, trying them in a random order
    #[arg(long)]
    pub(crate) any: bool,
    /// With --any: the candidates are a priority order, most urgent first; take the first
    /// free one, and move up while one ahead of it is free, so that claimers starting
    /// together end on the first ones
    #[arg(long, requires = "any")]
    pub(crate) ordered: bool,
    #[command(flatten)]
    pub(crate) holder: HolderArg,
    #[command(flatten)]
    pub(crate) ttl: TtlArg,
    /// Free text stored with the claim
    #[arg(long)]
    pub(crate) note: Option<String>,
    /// An external task or job id stored with the claim
    #[arg(long)]
    pub(crate) task: Option<String>,
    /// Start a session: print a secret once (store only its hash) that every renew and
    /// release of this tenure must give
    #[arg(long)]
    pub(crate) session: bool,
    /// Record this process as the holder: once it is gone from this machine, the lease is
    /// no longer live
    #[arg(long, value_name = "PID")]
    pub(crate) pid: Option<u32>,
}

/// Runs `git lease acquire`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        issues,
        holder,
        ttl,
        note,
        task,
        session,
        pid,
        any,
        ordered,
    } = args;
    let now = ctx.now;
    // Each remark within its bound before anything is read or written.
    let note = Remark::optional(RemarkKind::Note, note)?;
    let task = Remark::optional(RemarkKind::Task, task)?;
    let target = ctx.backend()?;
    let issues = if any {
        one_of_many::candidates(&issues)?
    } else {
        distinct_issues(&issues)?
    };
    let new_secret = if session {
        Some(git_lease::os::new_session_secret()?)
    } else {
        None
    };
    let process = match pid {
        None => None,
        Some(pid) => Some(git_lease::os::holder_process(pid).ok_or_else(|| {
            Error::InvalidInput(format!(
                "--pid {pid}: no such process on this machine (or no /proc of this PID namespace to record it)"
            ))
        })?),
    };
    let claim = Claim {
        holder: ctx.holder(&holder.name)?,
        ttl: ctx.ttl(&ttl)?,
        note,
        task,
        session: new_secret.as_deref().map(git_lease::session::hash),
        secret: holder.secret.clone(),
        process,
    };
    if any {
        let report = one_of_many::claim(ctx, &issues, &claim, now, one_of_many::order(ordered))?;
        let started = report.claimed.as_ref().is_some_and(|r| {
            r.wrote
                && claim.session.is_some()
                && r.lease().and_then(|l| l.session.as_deref()) == claim.session.as_deref()
        });
        let secret = new_secret.filter(|_| started);
        return one_of_many::emit(ctx, &report, secret.as_deref(), out);
    }
    let reports = if issues.len() == 1 {
        vec![target.apply(&issues[0], &mut |cur| {
            rules::acquire(&issues[0], cur, &claim, now)
        })?]
    } else {
        target.acquire_all(&issues, &claim, now)?
    };
    // The secret is shown only if this call started the session it belongs to.
    let started = reports.iter().any(|r| {
        r.wrote
            && r.lease().and_then(|l| l.session.as_deref()) == claim.session.as_deref()
            && claim.session.is_some()
    });
    let secret = new_secret.filter(|_| started);
    emit_reports(ctx, &reports, issues.len() > 1, secret.as_deref(), out)
}

/// Validates the ids of one claim, taking each once, and refuses ids that would clash with
/// each other as file versus directory (`x` and `x/y`).
fn distinct_issues(ids: &[String]) -> Result<Vec<IssueId>, Error> {
    let mut out: Vec<IssueId> = Vec::with_capacity(ids.len());
    for id in ids {
        let issue = IssueId::new(id)?;
        if out.contains(&issue) {
            continue;
        }
        let clash = out.iter().find(|other| {
            let (a, b) = (other.as_str(), issue.as_str());
            a.strip_prefix(b).is_some_and(|r| r.starts_with('/'))
                || b.strip_prefix(a).is_some_and(|r| r.starts_with('/'))
        });
        if let Some(other) = clash {
            return Err(Error::RefClash {
                issue: issue.to_string(),
                existing: other.ref_name(),
            });
        }
        out.push(issue);
    }
    Ok(out)
}
