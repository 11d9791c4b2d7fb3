//! `git lease install-hook`: install the server hook into a repository, or with `--client`
//! the guard of a working repository.

use std::io::Write;

use std::path::{Path, PathBuf};

use git_lease::hook::{Identity, Policy, Source};

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
    /// push to a fenced branch unless this holder holds its live tenure, and a pre-commit hook
    /// that refuses a commit on one whose lease is lost (a courtesy: --no-verify skips both)
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

/// What `install-hook` warns of a policy: no identity, a fence left open
/// ([`Policy::open_fences`]).
pub(crate) fn policy_warnings(policy: &Policy) -> Vec<String> {
    let mut warnings = Vec::new();
    if policy.identity == Identity::None {
        warnings.push(
            "no identity is configured (lease.pusherEnv, or lease.identity=push-cert): the hook \
             cannot tell who pushed, so anyone can act as anyone (renew, release or revoke in \
             another's name; a fenced branch holds by the token alone); see docs/SERVER.md"
                .to_owned(),
        );
    }
    warnings.extend(policy.open_fences());
    warnings
}

/// The warning when git still does not see push options enabled after `install-hook` set them.
pub(crate) const PUSH_OPTIONS_OFF: &str = "receive.advertisePushOptions is still not true for \
     this repository (a setting elsewhere overrides it?): pushes with -o lease-token=N will fail";

/// Whether git sees `receive.advertisePushOptions` as true in the repository at `git_dir`.
pub(crate) fn push_options_advertised(git_dir: &Path) -> bool {
    git_lease::git::command(git_dir)
        .args(["config", "--bool", "--get", "receive.advertisePushOptions"])
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "true")
        .unwrap_or(false)
}

/// What `install-hook` did in a served repository, as it reports it.
pub(crate) struct ServerInstall<'a> {
    pub(crate) hook: &'a Path,
    pub(crate) chained: Option<&'a Path>,
    /// What the line that names the hook adds (the hook it chains, who its files were given to).
    pub(crate) note: &'a str,
    pub(crate) binary: &'a Path,
    pub(crate) owner: String,
    pub(crate) push_options: bool,
    pub(crate) policy: &'a Policy,
    pub(crate) warnings: &'a [String],
}

/// Reports `install`: one JSON object (docs/JSON.md), or the line that names the hook, the
/// policy's lines ([`Policy::summary`]) and each warning on stderr. Each is said once.
pub(crate) fn report(
    json: bool,
    out: &mut dyn Write,
    install: &ServerInstall,
) -> Result<(), Failure> {
    if json {
        let value = serde_json::json!({
            "hook": install.hook.display().to_string(),
            "chained": install.chained.map(|c| c.display().to_string()),
            "binary": install.binary.display().to_string(),
            "owner": install.owner,
            "push_options": install.push_options,
            "policy": policy_json(install.policy),
            "warnings": install.warnings,
        });
        crate::cli::output::json::json_line(out, &value)?;
        return Ok(());
    }
    writeln!(
        out,
        "installed {}{}; receive.advertisePushOptions enabled; it runs {}",
        install.hook.display(),
        install.note,
        install.binary.display()
    )?;
    for line in install.policy.summary() {
        writeln!(out, "  {line}")?;
    }
    out.flush()?;
    for w in install.warnings {
        crate::cli::output::diagnostics::warning(w);
    }
    Ok(())
}

/// The policy the server hook was installed with, for `install-hook --json` (docs/JSON.md).
fn policy_json(policy: &Policy) -> serde_json::Value {
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
