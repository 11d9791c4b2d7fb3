//! `git lease completions`: a shell completion script.

use std::io::Write;

use crate::cli::{Context, Failure};

// The arguments of `completions`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The shell
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// Runs `git lease completions`.
pub(crate) fn run(_ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { shell, .. } = args;
    crate::cli::completion::script(shell, out)
}
