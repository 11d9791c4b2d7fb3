//! The server side of the command line: `hook`, `install-hook`, and the client's `push` that
//! carries the fencing token to a fenced branch.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use git_lease::hook::{self, Policy, RefUpdate};
use git_lease::remote::{hook_verdict, redact_url, redact_urls, HookVerdict, Remote};
use git_lease::{Error, IssueId};

use super::{exit, output, Context, Failure, HolderArg, HookKind};

/// The fence glob `push` assumes when this repository sets no `lease.fence` of its own.
const DEFAULT_FENCE: &str = "refs/heads/issue/*";

/// The line that marks a hook script as ours, so a reinstall replaces it instead of chaining.
const MARKER: &str = "# installed by git lease install-hook";

/// The setting that fixes the hook's clock for tests: read from the served repository's own
/// configuration file only, so that no pusher can set it (`GIT_LEASE_NOW`, `git -c` and the
/// global configuration do not reach it).
pub(crate) const HOOK_CLOCK_KEY: &str = "lease.hookNow";

/// Returns the instant set by [`HOOK_CLOCK_KEY`], if any.
pub(crate) fn hook_clock(
    store: &git_lease::Store,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, Error> {
    store
        .repository_config_string(HOOK_CLOCK_KEY)
        .map(|text| {
            git_lease::time::parse_instant(&text)
                .map_err(|e| Error::InvalidInput(format!("config {HOOK_CLOCK_KEY}: {e}")))
        })
        .transpose()
}

/// Runs git's `update` or `pre-receive` hook protocol; refusals go to stderr, one line each,
/// which git relays to the pusher as `remote: …`.
pub(crate) fn hook(ctx: &Context, kind: &HookKind) -> Result<u8, Failure> {
    let store = ctx.ledger.store();
    let policy = Policy::from_config(store)?;
    let pusher = hook::pusher_from_env(&policy.identity);
    let parse = |name: &str, old: &str, new: &str| -> Result<RefUpdate, Error> {
        let id = |hex: &str| {
            gix::ObjectId::from_hex(hex.as_bytes())
                .map_err(|e| Error::InvalidInput(format!("bad object id {hex:?} for {name}: {e}")))
        };
        Ok(RefUpdate {
            name: name.to_owned(),
            old: id(old)?,
            new: id(new)?,
        })
    };
    let (updates, options) = match kind {
        HookKind::Update { refname, old, new } => (vec![parse(refname, old, new)?], None),
        HookKind::PreReceive => {
            let mut updates = Vec::new();
            for line in std::io::stdin().lock().lines() {
                let line = line.map_err(|e| Error::Io {
                    context: "cannot read the hook's input".into(),
                    source: e,
                })?;
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    [] => continue,
                    [old, new, name] => updates.push(parse(name, old, new)?),
                    _ => {
                        return Err(Error::InvalidInput(format!(
                            "pre-receive input line {line:?} is not `<old> <new> <ref>`"
                        ))
                        .into())
                    }
                }
            }
            (updates, Some(hook::push_options_from_env()))
        }
    };
    let refusals = hook::check_push(
        store,
        &policy,
        &pusher,
        options.as_deref(),
        &updates,
        ctx.now,
    );
    for r in &refusals {
        eprintln!("{r}");
    }
    Ok(if refusals.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    })
}

/// Installs the pre-receive hook into a repository and enables push options.
pub(crate) fn install_hook(ctx: &Context, out: &mut dyn Write) -> Result<u8, Failure> {
    // `--repo` was opened as the context's repository.
    let store = ctx.ledger.store();
    let git_dir = store.git_dir().to_owned();
    let hooks_dir = match store.config_string("core.hooksPath") {
        Some(p) if Path::new(&p).is_absolute() => p.into(),
        Some(p) => git_dir.join(p),
        None => git_dir.join("hooks"),
    };
    let io = |context: String| move |source| Error::Io { context, source };
    std::fs::create_dir_all(&hooks_dir)
        .map_err(io(format!("cannot create {}", hooks_dir.display())))?;
    let exe = std::env::current_exe().map_err(io("cannot locate the git-lease binary".into()))?;
    let hook_path = hooks_dir.join("pre-receive");
    let chained = hooks_dir.join("pre-receive.before-git-lease");
    let mut note = String::new();
    if let Ok(existing) = std::fs::read_to_string(&hook_path) {
        if !existing.contains(MARKER) {
            std::fs::rename(&hook_path, &chained).map_err(io(format!(
                "cannot move the existing hook {}",
                hook_path.display()
            )))?;
            note = format!(" (the existing hook runs first, as {})", chained.display());
        }
    } else if hook_path.exists() {
        std::fs::rename(&hook_path, &chained).map_err(io(format!(
            "cannot move the existing hook {}",
            hook_path.display()
        )))?;
        note = format!(" (the existing hook runs first, as {})", chained.display());
    }
    let exe_quoted = exe.display().to_string().replace('\'', r"'\''");
    let script = format!(
        "#!/bin/sh\n{MARKER}\n\
         # Checks pushes to refs/leases/* and to fenced branches (lease.fence).\n\
         input=$(cat)\n\
         if [ -x \"$0.before-git-lease\" ]; then\n\
         \tprintf '%s\\n' \"$input\" | \"$0.before-git-lease\" \"$@\" || exit $?\n\
         fi\n\
         printf '%s\\n' \"$input\" | exec '{exe_quoted}' hook pre-receive\n"
    );
    let tmp = hooks_dir.join("pre-receive.git-lease-tmp");
    std::fs::write(&tmp, script).map_err(io(format!("cannot write {}", tmp.display())))?;
    set_executable(&tmp)?;
    std::fs::rename(&tmp, &hook_path)
        .map_err(io(format!("cannot install {}", hook_path.display())))?;
    set_config(&git_dir, "receive", "advertisePushOptions", "true")?;
    writeln!(
        out,
        "installed {}{note}; receive.advertisePushOptions enabled",
        hook_path.display()
    )?;
    Ok(exit::OK)
}

fn set_executable(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(|e| Error::Io {
        context: format!("cannot make {} executable", path.display()),
        source: e,
    })
}

/// Sets one key in the repository's own config file, in-process.
fn set_config(git_dir: &Path, section: &str, key: &str, value: &str) -> Result<(), Error> {
    let path = git_dir.join("config");
    let mut file =
        gix::config::File::from_path_no_includes(path.clone(), gix::config::Source::Local)
            .map_err(|e| Error::git(format!("cannot read {}", path.display()), e))?;
    file.set_raw_value_by(section, None, key, value)
        .map_err(|e| Error::git(format!("cannot set {section}.{key}"), e))?;
    let tmp = git_dir.join("config.git-lease-tmp");
    std::fs::write(&tmp, file.to_bstring()).map_err(|e| Error::Io {
        context: format!("cannot write {}", tmp.display()),
        source: e,
    })?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::Io {
        context: format!("cannot replace {}", path.display()),
        source: e,
    })
}

/// Pushes an issue branch with the holder's current token as `-o lease-token=<N>`.
pub(crate) fn push(
    ctx: &Context,
    remote_name: Option<&str>,
    branch: Option<&str>,
    holder: &HolderArg,
) -> Result<u8, Failure> {
    let holder = ctx.holder(holder)?;
    let remote_name = remote_name
        .map(str::to_owned)
        .or_else(|| ctx.remote.clone())
        .unwrap_or_else(|| "origin".to_owned());
    let branch = match branch {
        Some(b) => b.to_owned(),
        None => {
            let head = ctx
                .ledger
                .store()
                .repo()
                .head_name()
                .map_err(|e| Error::git("cannot read HEAD", e))?;
            match head {
                Some(name) => name.shorten().to_string(),
                None => {
                    return Err(Error::InvalidInput(
                        "HEAD is detached: name the branch to push".into(),
                    )
                    .into())
                }
            }
        }
    };
    // The server's rule, on this repository's copy of the fence globs (or the usual one).
    let fences = match ctx.ledger.store().config_strings("lease.fence") {
        globs if globs.is_empty() => vec![DEFAULT_FENCE.to_owned()],
        globs => globs,
    };
    let full = format!("refs/heads/{}", branch.trim_start_matches("refs/heads/"));
    let issue_part = hook::fenced_issue(&fences, &full).ok_or_else(|| {
        Error::InvalidInput(format!(
            "{full} is not a fenced issue branch (lease.fence: {}); name the branch, or set lease.fence as the server does",
            fences.join(", ")
        ))
    })?;
    let issue = IssueId::new(&issue_part)?;
    let remote = Remote::new(&ctx.ledger, &remote_name)?;
    let current = remote.current(&issue)?;
    let live = current
        .as_ref()
        .filter(|e| git_lease::is_live(&e.lease, ctx.now));
    let token = match live {
        Some(e) if e.lease.holder.as_deref() == Some(holder.as_str()) => e.lease.token,
        Some(e) => {
            eprintln!(
                "git lease: refused: issue {issue} is held by {} (token {}), not by {holder}",
                output::printable(e.lease.holder.as_deref().unwrap_or("?")),
                e.lease.token
            );
            return Ok(exit::REFUSED);
        }
        None => {
            eprintln!("git lease: refused: you do not hold issue {issue}; acquire it first");
            return Ok(exit::REFUSED);
        }
    };
    // git's stderr is read to tell a refusal by the lease rules (exit 3) from a failure of the
    // server, its hook or the transport (exit 1), the same way on every transport; it is shown
    // without any URL's credentials.
    let shown = format!(
        "git push -o {}{token} {} {branch}",
        hook::TOKEN_OPTION,
        redact_url(&remote_name)
    );
    let child = Command::new("git")
        .arg("--git-dir")
        .arg(ctx.ledger.store().git_dir())
        .args(["push", "-o"])
        .arg(format!("{}{token}", hook::TOKEN_OPTION))
        .arg("--")
        .arg(&remote_name)
        .arg(&branch)
        .env_remove("GIT_DIR")
        .env("LC_ALL", "C")
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Transport {
            command: shown.clone(),
            message: format!("cannot run git: {e}"),
        })?;
    let out = child.wait_with_output().map_err(|e| Error::Transport {
        command: shown.clone(),
        message: format!("cannot wait for git: {e}"),
    })?;
    let stderr = redact_urls(&String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        eprint!("{stderr}");
        return Ok(exit::OK);
    }
    if stderr.contains("hook declined") {
        return match hook_verdict(&stderr) {
            HookVerdict::Refused(_) => {
                eprint!("{stderr}");
                eprintln!("git lease: refused by the server's lease rules");
                Ok(exit::REFUSED)
            }
            HookVerdict::Failed(message) => Err(Error::HookFailed {
                target: full,
                message,
            }
            .into()),
        };
    }
    let mut message = stderr.trim().to_owned();
    if stderr.contains("does not support push options") {
        message.push_str(
            "\n(the server does not accept push options: run git lease install-hook there, \
             which sets receive.advertisePushOptions=true)",
        );
    }
    if message.is_empty() {
        message = format!("git exited with {}", out.status);
    }
    Err(Error::Transport {
        command: shown,
        message,
    }
    .into())
}
