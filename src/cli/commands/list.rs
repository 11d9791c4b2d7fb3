//! `git lease list`: the leases as they stand now, filtered and sorted.

use std::io::Write;

use crate::cli::{exit, list, report_diverged, Context, Failure, HolderArg};

/// The arguments of `list`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Also list free and expired leases with their last token
    #[arg(long)]
    pub(crate) all: bool,
    /// Only leases whose live (or, with --all, last) holder is this
    #[arg(long, conflicts_with = "mine")]
    pub(crate) holder: Option<String>,
    /// Only your own leases (the holder of --holder's default: lease.holder, then
    /// user.email, or GIT_LEASE_HOLDER)
    #[arg(long)]
    pub(crate) mine: bool,
    /// Only leases in this state (implies --all for expired and free)
    #[arg(long, value_parser = ["held", "expired", "free"])]
    pub(crate) state: Option<String>,
    /// Only issues starting with this prefix
    pub(crate) prefix: Option<String>,
}

/// Runs `git lease list`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        all,
        holder,
        mine,
        state,
        prefix,
    } = args;
    let target = ctx.backend()?;
    let holder = if mine {
        let me = HolderArg {
            holder: std::env::var("GIT_LEASE_HOLDER")
                .ok()
                .filter(|h| !h.is_empty()),
            secret: None,
        };
        Some(ctx.holder(&me)?.into())
    } else {
        holder
    };
    let listing = target.list()?;
    let (entries, diverged) = (listing.entries, listing.diverged);
    let code = list(ctx, entries, all, holder, state, prefix, out)?;
    report_diverged(ctx, &diverged, out)?;
    Ok(if diverged.is_empty() {
        code
    } else {
        exit::FAILURE
    })
}
