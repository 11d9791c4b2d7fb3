//! `git lease install-hook`: install the server hook into a repository, or with `--client`
//! the guard of a working repository.

use std::io::Write;

use std::path::PathBuf;

use crate::cli::{Context, Failure};

// The arguments of `install-hook`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The repository [default: the current one]
    #[arg(long, value_name = "PATH")]
    pub(crate) repo: Option<PathBuf>,
    /// The git-lease binary the hook runs, as an absolute path that the repository's owner
    /// can execute [default: this binary]
    #[arg(long, value_name = "PATH")]
    pub(crate) binary: Option<PathBuf>,
    /// Install into core.hooksPath even where it leads outside the repository (by default
    /// refused: the repository's configuration may have been written by someone else)
    #[arg(long)]
    pub(crate) allow_hooks_path: bool,
    /// Install the guard of a working repository instead: a pre-push hook that refuses a
    /// push to a fenced branch without this holder's live token, and a pre-commit hook that
    /// refuses a commit on one whose lease is lost (a courtesy: --no-verify skips both)
    #[arg(long)]
    pub(crate) client: bool,
}

/// Runs `git lease install-hook`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        binary,
        allow_hooks_path,
        client,
        ..
    } = args;
    if client {
        return crate::cli::server::install_client_hooks(
            ctx,
            binary.as_deref(),
            allow_hooks_path,
            out,
        );
    }
    crate::cli::server::install_hook(ctx, binary.as_deref(), allow_hooks_path, out)
}

/// The policy the server hook was installed with, for `install-hook --json` (docs/JSON.md).
pub(crate) fn policy_json(policy: &git_lease::hook::Policy) -> serde_json::Value {
    use git_lease::hook::{Identity, Source};
    let (identity, pusher_env) = match &policy.identity {
        Identity::None => ("none", None),
        Identity::PushCert => ("push-cert", None),
        Identity::Env(var) => ("env", Some(var.as_str())),
    };
    serde_json::json!({
        "identity": identity,
        "pusher_env": pusher_env,
        "fences": policy.fences,
        "fences_default": policy.fences_from == Source::Default,
        "require_token": policy.require_token,
        "require_token_default": policy.token_from == Source::Default,
        "admins": policy.admins,
    })
}
