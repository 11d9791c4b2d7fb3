//! `git lease renew`: the live holder extends its lease from now.

use std::io::Write;

use git_lease::{rules, Credentials};

use crate::cli::output::emit_reports;
use crate::cli::{resolve_for_write, Context, Failure, HolderArg, TtlArg};

// The arguments of `renew`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The issue id or a unique prefix
    pub(crate) issue: String,
    #[command(flatten)]
    pub(crate) holder: HolderArg,
    #[command(flatten)]
    pub(crate) ttl: TtlArg,
}

/// Runs `git lease renew`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { issue, holder, ttl } = args;
    let now = ctx.now;
    let target = ctx.backend()?;
    let name = ctx.holder(&holder.name)?;
    let who = Credentials {
        holder: &name,
        secret: holder.secret.as_deref(),
    };
    let ttl = ctx.ttl(&ttl)?;
    let issue = resolve_for_write(target.as_ref(), &issue)?;
    let report = target.apply(&issue, &mut |cur| rules::renew(cur, who, ttl, now))?;
    emit_reports(ctx, &[report], false, None, out)
}
