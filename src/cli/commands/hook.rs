//! `git lease hook`: the server-side check git runs (see `crate::cli::server`).

use std::io::Write;

use crate::cli::{Context, Failure, HookKind};

// The arguments of `hook`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) kind: HookKind,
}

/// Runs `git lease hook`.
pub(crate) fn run(ctx: &Context, args: Args, _out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { kind, .. } = args;
    crate::cli::server::hook(ctx, &kind)
}
