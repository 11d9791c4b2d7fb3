//! `git lease release`, `complete` and `abandon`: the holder (or anyone, once the lease is no
//! longer live: expired, or its holder process gone) frees a lease, keeping its token, and
//! records how the work ended.

use std::io::Write;

use git_lease::{rules, Credentials, Ending, Outcome};

use crate::cli::output::{diagnostics, emit_reports, printable};
use crate::cli::{resolve_for_write, Context, Failure, HolderArg};

// The arguments of `release`, `complete` and `abandon`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The issue id or a unique prefix
    pub(crate) issue: String,
    #[command(flatten)]
    pub(crate) holder: HolderArg,
}

/// Runs `git lease release`, `complete` or `abandon`, as `ending` says.
pub(crate) fn run(
    ctx: &Context,
    args: Args,
    ending: Ending,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let target = ctx.backend()?;
    let name = ctx.holder(&args.holder.name)?;
    let who = Credentials {
        holder: &name,
        secret: args.holder.secret.as_deref(),
    };
    let issue = resolve_for_write(target.as_ref(), &args.issue)?;
    let report = target.apply(&issue, &mut |cur| {
        rules::release(&issue, cur, who, ending, ctx.now)
    })?;
    let code = emit_reports(ctx, std::slice::from_ref(&report), false, None, out)?;
    let live = |e: &git_lease::Entry| git_lease::is_live(e.current(), ctx.now);
    if report.outcome == Outcome::NotHolder && report.entry.as_ref().is_some_and(live) {
        out.flush()?;
        let issue = printable(issue.as_str());
        diagnostics::hint(&format!(
            "{issue} is someone else's until it expires or they free it. Wait for it with\n\
             `git lease wait {issue}` (`--acquire` to take it then), or have an administrator\n\
             free it with `git lease revoke {issue} --reason <why>`."
        ));
    }
    Ok(code)
}
