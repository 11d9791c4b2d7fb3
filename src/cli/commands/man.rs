//! `git lease man`: the manual, printed or installed.

use std::io::Write;

use std::path::PathBuf;

use crate::cli::{Context, Failure};

// The arguments of `man`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Write git-lease.1 and a page per command into DIR/man1 [default: the binary's
    /// ../share/man, which man finds from PATH]
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub(crate) install: Option<Option<PathBuf>>,
}

/// Runs `git lease man`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { install, .. } = args;
    crate::cli::manual::man(install, ctx.json, out)
}
