//! `git lease revoke`: an administrator frees a lease, by its exact id.

use std::io::Write;

use git_lease::{rules, IssueId, Remark, RemarkKind};

use crate::cli::output::emit_reports;
use crate::cli::{Context, Failure, HolderArg};

// The arguments of `revoke`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The exact issue id
    pub(crate) issue: String,
    /// Why the lease is revoked (recorded in the ledger)
    #[arg(long, required = true)]
    pub(crate) reason: String,
    /// Who revokes: `--holder` (recorded as the event's `by`); `--secret` is not needed
    #[command(flatten)]
    pub(crate) holder: HolderArg,
}

/// Runs `git lease revoke`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        issue,
        reason,
        holder,
    } = args;
    let now = ctx.now;
    let reason = Remark::new(RemarkKind::Reason, reason)?;
    let target = ctx.backend()?;
    let by = ctx.holder(&holder.name)?;
    // Exact ids only: freeing someone else's lease is never a guess.
    let issue = IssueId::new(&issue)?;
    let report = target.apply(&issue, &mut |cur| {
        rules::revoke(&issue, cur, &by, &reason, now)
    })?;
    emit_reports(ctx, &[report], false, None, out)
}
