//! `git lease push`: push an issue branch with the live fencing token.

use std::io::Write;

use crate::cli::{Context, Failure, HolderArg};

// The arguments of `push`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The remote [default: --remote, lease.remote, then origin]
    pub(crate) remote_name: Option<String>,
    /// The branch to push [default: the current branch]; its issue is what the fence glob's
    /// `*` matches (lease.fence, else refs/heads/issue/*)
    pub(crate) branch: Option<String>,
    #[command(flatten)]
    pub(crate) holder: HolderArg,
}

/// Runs `git lease push`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        remote_name,
        branch,
        holder,
        ..
    } = args;
    crate::cli::server::push(ctx, remote_name.as_deref(), branch.as_deref(), &holder, out)
}
