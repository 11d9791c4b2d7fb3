//! `git lease wait`: block until an issue is free.

use std::io::Write;

use git_lease::Claim;

use crate::cli::{parse_duration, Context, Failure, HolderArg, TtlArg};

// The arguments of `wait`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The exact issue id
    pub(crate) issue: String,
    /// Give up after this long (exit 3)
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub(crate) timeout: Option<String>,
    /// Acquire the issue as soon as it is free
    #[arg(long)]
    pub(crate) acquire: bool,
    #[command(flatten)]
    pub(crate) holder: HolderArg,
    #[command(flatten)]
    pub(crate) ttl: TtlArg,
}

/// Runs `git lease wait`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        issue,
        timeout,
        acquire,
        holder,
        ttl,
        ..
    } = args;
    let timeout = timeout.as_deref().map(parse_duration).transpose()?;
    let claim = if acquire {
        Some(Claim::new(ctx.holder(&holder.name)?, ctx.ttl(&ttl)?))
    } else {
        None
    };
    crate::cli::run::wait(ctx, &issue, timeout, claim, out)
}
