//! Running the git command line, for what gix cannot do here: push, fetch, pack and gc, and
//! reading settings as git reads them. Every such command is built by [`command`], so each
//! runs on the repository it is meant for whatever the caller's environment says; the one
//! exception, reftable's ref reads and writes, builds its own in `store::refdb` (which also
//! drops `GIT_NAMESPACE` and reads git in the C locale).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::error::Error;

/// Returns `git --git-dir <git_dir>`, with `GIT_DIR` removed from its environment, no
/// standard input, and objects seen as they are: replacement refs (`refs/replace/*`) change
/// nothing a ledger means ([`no_replacements`]).
pub fn command(git_dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(git_dir);
    cmd.env_remove("GIT_DIR").stdin(Stdio::null());
    no_replacements(&mut cmd);
    cmd
}

/// Makes `cmd`, a git command, see every object as it is: `GIT_NO_REPLACE_OBJECTS` turns
/// `refs/replace/*` off. Anyone who can push a ref could otherwise change what a ledger commit
/// says to every reader (docs/SECURITY.md).
pub fn no_replacements(cmd: &mut Command) {
    cmd.env("GIT_NO_REPLACE_OBJECTS", "1")
        .env_remove("GIT_REPLACE_REF_BASE");
}

/// Returns the error of a git command that could not be started (or waited for).
pub fn spawn_error(shown: &str, e: std::io::Error) -> Error {
    Error::Io {
        context: format!("cannot run {shown}"),
        source: e,
    }
}
