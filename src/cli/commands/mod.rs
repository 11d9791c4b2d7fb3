//! One module per command (release, complete and abandon share `end`, whose `run` also takes
//! the [`Ending`](git_lease::Ending)), each with its arguments (`Args`) and its
//! `run(ctx, args, out)`; `cli::dispatch` only routes to them.

pub(crate) mod acquire;
pub(crate) mod archive;
pub(crate) mod check;
pub(crate) mod completions;
pub(crate) mod doctor;
pub(crate) mod end;
pub(crate) mod gc;
pub(crate) mod hook;
pub(crate) mod install_hook;
pub(crate) mod list;
pub(crate) mod log;
pub(crate) mod man;
pub(crate) mod mcp;
pub(crate) mod push;
pub(crate) mod renew;
pub(crate) mod revoke;
pub(crate) mod run;
pub(crate) mod show;
pub(crate) mod sync;
pub(crate) mod timeline;
pub(crate) mod verify;
pub(crate) mod wait;
pub(crate) mod watch;

/// Why `--remote` is refused by `command`, which acts on one repository's own refs only.
pub(crate) fn remote_refused(command: &super::Command) -> super::Failure {
    let name = match command {
        super::Command::Archive(_) => "archive",
        super::Command::Gc(_) => "gc",
        _ => "install-hook",
    };
    git_lease::Error::InvalidInput(format!(
        "{name} acts on this repository's own refs only, never through a remote: leave out \
         --remote, and run it in the server's repository (-C) to act on the server's"
    ))
    .into()
}
