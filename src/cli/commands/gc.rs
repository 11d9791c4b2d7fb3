//! `git lease gc`: pack the repository's loose objects and refs.

use std::io::Write;

use crate::cli::{Context, Failure};

// The arguments of `gc`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Run `git gc --quiet` instead: also consolidate packs and prune old unreachable objects
    #[arg(long)]
    pub(crate) full: bool,
}

/// Runs `git lease gc`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { full, .. } = args;
    crate::cli::gc::gc(ctx, full, out)
}
