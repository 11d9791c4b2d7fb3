//! `git lease install-hook`: install the server hook into a repository.

use std::io::Write;

use std::path::PathBuf;

use crate::cli::{Context, Failure};

/// The arguments of `install-hook`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The repository [default: the current one]
    #[arg(long, value_name = "PATH")]
    pub(crate) repo: Option<PathBuf>,
    /// The git-lease binary the hook runs, as an absolute path that the repository's owner
    /// can execute [default: this binary]
    #[arg(long, value_name = "PATH")]
    pub(crate) binary: Option<PathBuf>,
}

/// Runs `git lease install-hook`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { binary, .. } = args;
    crate::cli::server::install_hook(ctx, binary.as_deref(), out)
}
