//! `git lease mcp`: serve the lease commands as Model Context Protocol tools over stdio.

use std::io::Write;

use crate::cli::{Context, Failure};

// The arguments of `mcp` (where the leases are: the global `--remote`, `--local` and
// `lease.remote`, as for every command).
#[derive(clap::Args, Debug)]
pub(crate) struct Args {}

/// Runs `git lease mcp` until the client closes the connection (or a signal ends it).
pub(crate) fn run(ctx: &Context, _args: Args, _out: &mut dyn Write) -> Result<u8, Failure> {
    crate::cli::mcp::serve(ctx)
}
