//! `install-hook`: the server's hooks in a served repository, the guard's in a working one,
//! written without following a link, as the repository's owner would have them.

use std::io::Write;
use std::path::Path;

use git_lease::hook::{self, Policy};
use git_lease::store::nofollow::{self, Dir, Placement};
use git_lease::Error;

use super::owner::{runnable_by, Owner};
use super::MARKER;
use crate::cli::{exit, Context, Failure};

/// The hooks of a served repository: pre-receive, and git's `reference-transaction` hook,
/// which checks fenced updates again as they land.
const SERVER_HOOKS: [HookSpec; 2] = [
    HookSpec {
        names: [
            "pre-receive",
            "pre-receive.before-git-lease",
            "pre-receive.git-lease-tmp",
        ],
        what: "Checks pushes to refs/leases/* and to fenced branches (lease.fence).",
        run: "hook pre-receive",
    },
    HookSpec {
        names: [
            "reference-transaction",
            "reference-transaction.before-git-lease",
            "reference-transaction.git-lease-tmp",
        ],
        what: "Checks fenced branches (lease.fence) again as a push's refs land.",
        run: "hook reference-transaction \"$1\"",
    },
];

/// Installs the pre-receive hook into a repository and enables push options, then checks
/// what it can of the setup and warns (stderr and output) about each trap: a binary the
/// repository's owner cannot run, files left owned by someone else, no identity configured,
/// a server that runs no hooks (Gerrit), push options still disabled.
///
/// It may run as root in a repository that someone else owns, who may have planted links in
/// it: every name is reached from the git dir's descriptor without following a link (a link
/// in the way is refused, exit 2, before anything is written), files are created exclusively,
/// and root gives the repository's owner only what it created, through their descriptors. A
/// `core.hooksPath` that leads outside the repository is refused unless `allow_hooks_path`.
pub(crate) fn install_hook(
    ctx: &Context,
    binary: Option<&Path>,
    allow_hooks_path: bool,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    use crate::cli::commands::install_hook as command;
    // `--repo` was opened as the context's repository.
    let store = ctx.ledger.store();
    let exe = hook_binary(binary)?;
    // A hook that would refuse every push is not installed: the configuration is fixed first.
    let policy = Policy::from_config(store)?;
    let git_dir = store.open_git_dir()?;
    let owned_by = git_dir.owner()?;
    let owner = Owner {
        uid: owned_by.uid,
        gid: owned_by.gid,
    };
    let me = nofollow::effective_uid();
    // Root installs for the repository's owner: what it creates there becomes the owner's.
    let give = (me == 0 && owner.uid != 0).then_some(owned_by);
    let mut warnings: Vec<String> = unrunnable(&exe, owner, git_dir.path())
        .into_iter()
        .collect();
    let hooks = Hooks::open(store, &git_dir, &SERVER_HOOKS, allow_hooks_path, give)?;
    let [pre_receive, transaction] = &SERVER_HOOKS;
    let Installed {
        hook: hook_path,
        chained,
    } = hooks.install(&exe, pre_receive)?;
    hooks.install(&exe, transaction)?;
    let inside = hooks.inside;
    let mut note = chained
        .as_ref()
        .map(|c| format!(" (the existing hook runs first, as {})", c.display()))
        .unwrap_or_default();
    store.set_repository_config(&git_dir, "receive", "advertisePushOptions", "true", give)?;
    if give.is_some() {
        note.push_str(&format!("; its files given to {}", owner.name()));
        if !inside {
            note.push_str(
                ", except the hook, outside the repository (--allow-hooks-path), which stays \
                 root's",
            );
        }
    } else if me != owner.uid && me != 0 {
        warnings.push(format!(
            "{} is owned by {}, not by you (uid {me}): {} and {} now belong to you; make sure \
             {} can still read them, or run install-hook as that user or as root",
            git_dir.path().display(),
            owner.name(),
            hook_path.display(),
            git_dir.path().join("config").display(),
            owner.name()
        ));
    }
    warnings.extend(command::policy_warnings(&policy));
    warnings.extend(hook::never_run_by(store));
    let advertised = command::push_options_advertised(git_dir.path());
    if !advertised {
        warnings.push(command::PUSH_OPTIONS_OFF.to_owned());
    }
    command::report(
        ctx.json,
        out,
        &command::ServerInstall {
            hook: &hook_path,
            chained: chained.as_deref(),
            note: &note,
            binary: &exe,
            owner: owner.name(),
            push_options: advertised,
            policy: &policy,
            warnings: &warnings,
        },
    )?;
    Ok(exit::OK)
}

/// The warning that `owner`, who runs the hooks of the repository at `git_dir`, cannot run
/// `exe`, if so.
fn unrunnable(exe: &Path, owner: Owner, git_dir: &Path) -> Option<String> {
    let why = runnable_by(exe, owner).err()?;
    Some(format!(
        "{} cannot be run by {}, who owns {} and runs its hooks: {why}; every push would \
         fail with \"the server's hook failed\"; install git-lease where that user can run \
         it (e.g. /usr/local/bin) and run install-hook again with --binary PATH",
        exe.display(),
        owner.name(),
        git_dir.display()
    ))
}

/// The binary a hook runs: `binary` (absolute), or this one.
fn hook_binary(binary: Option<&Path>) -> Result<std::path::PathBuf, Failure> {
    let io = |context: String| move |source| Error::Io { context, source };
    let exe = match binary {
        Some(path) if path.is_absolute() => path.to_owned(),
        Some(path) => {
            return Err(Error::InvalidInput(format!(
                "--binary {}: give an absolute path (the hook runs from the repository)",
                path.display()
            ))
            .into())
        }
        None => std::env::current_exe().map_err(io("cannot locate the git-lease binary".into()))?,
    };
    if exe.to_str().is_none() || exe.to_string_lossy().contains('\n') {
        return Err(Error::InvalidInput(format!(
            "the binary's path {} cannot be written into a hook script",
            exe.display()
        ))
        .into());
    }
    Ok(exe)
}

/// The guard's hooks in a working repository.
const CLIENT_HOOKS: [HookSpec; 2] = [
    HookSpec {
        names: [
            "pre-push",
            "pre-push.before-git-lease",
            "pre-push.git-lease-tmp",
        ],
        what: "Refuses a push to a fenced branch (lease.fence) unless this holder holds its live tenure.",
        run: "hook pre-push \"$@\"",
    },
    HookSpec {
        names: [
            "pre-commit",
            "pre-commit.before-git-lease",
            "pre-commit.git-lease-tmp",
        ],
        what: "Refuses a commit on a fenced branch whose lease this holder lost (--no-verify skips it).",
        run: "hook pre-commit",
    },
];

/// Installs the guard of a working repository: its pre-push and pre-commit hooks, each
/// chaining with a hook already there (which runs first).
pub(crate) fn install_client_hooks(
    ctx: &Context,
    binary: Option<&Path>,
    allow_hooks_path: bool,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let store = ctx.ledger.store();
    let exe = hook_binary(binary)?;
    let git_dir = store.open_git_dir()?;
    if let Some(setting) = store.config_string("core.hooksPath") {
        if !Path::new(&setting).is_absolute() && store.repo().workdir().is_some() {
            return Err(Error::Config {
                key: "core.hooksPath".into(),
                value: setting,
                expected: "an absolute path (a working repository runs its hooks from the \
                           working tree, which install-hook --client does not guess)",
            }
            .into());
        }
    }
    let fences = git_lease::guard::fences(store)?;
    let hooks = Hooks::open(store, &git_dir, &CLIENT_HOOKS, allow_hooks_path, None)?;
    let installed = CLIENT_HOOKS
        .iter()
        .map(|spec| hooks.install(&exe, spec))
        .collect::<Result<Vec<_>, _>>()?;
    if ctx.json {
        let hooks: Vec<_> = installed
            .iter()
            .map(|Installed { hook, chained }| {
                serde_json::json!({
                    "hook": hook.display().to_string(),
                    "chained": chained.as_ref().map(|c| c.display().to_string()),
                })
            })
            .collect();
        let value = serde_json::json!({
            "hooks": hooks,
            "binary": exe.display().to_string(),
            "fences": fences,
        });
        crate::cli::output::json::json_line(out, &value)?;
    } else {
        for Installed { hook, chained } in &installed {
            let note = chained
                .as_ref()
                .map(|c| format!(" (the existing hook runs first, as {})", c.display()))
                .unwrap_or_default();
            writeln!(out, "installed {}{note}", hook.display())?;
        }
        writeln!(
            out,
            "it runs {}; fenced branches: {} (a courtesy: only the server's hook is a fence)",
            exe.display(),
            fences.join(", ")
        )?;
    }
    Ok(exit::OK)
}

/// The hook script that runs `exe` with `run` (its arguments) after the hook it replaced, if
/// any (kept as `<name>.before-git-lease`), both given the same arguments and standard input.
fn hook_script(exe: &Path, what: &str, run: &str) -> String {
    let exe_quoted = exe.display().to_string().replace('\'', r"'\''");
    format!(
        "#!/bin/sh\n{MARKER}\n\
         # {what}\n\
         bin='{exe_quoted}'\n\
         if [ ! -x \"$bin\" ]; then\n\
         \techo \"git-lease hook: cannot run $bin as user $(id -un 2>/dev/null || id -u): \
         install git-lease where this user can run it (git lease install-hook --binary PATH)\" >&2\n\
         \texit 1\n\
         fi\n\
         input=$(cat)\n\
         if [ -x \"$0.before-git-lease\" ]; then\n\
         \tprintf '%s\\n' \"$input\" | \"$0.before-git-lease\" \"$@\" || exit $?\n\
         fi\n\
         printf '%s\\n' \"$input\" | exec \"$bin\" {run}\n"
    )
}

/// A hook `install-hook` writes: its name in the hooks directory, the name an existing hook
/// that is not ours is kept under (it runs first), and the temporary file ours is written to;
/// what it checks, and the arguments it runs the binary with.
struct HookSpec {
    names: [&'static str; 3],
    what: &'static str,
    run: &'static str,
}

/// A hook installed, and where the hook it replaced was kept, if there was one.
struct Installed {
    hook: std::path::PathBuf,
    chained: Option<std::path::PathBuf>,
}

/// The hooks directory `install-hook` writes to, made ready by [`Hooks::open`].
struct Hooks {
    dir: Dir,
    /// Whether it is inside the repository.
    inside: bool,
    /// Who what it creates is given to (root installing for the repository's owner, inside
    /// the repository only).
    given: Option<nofollow::Owner>,
}

impl Hooks {
    /// Checks the repository's configuration file and opens its hooks directory
    /// ([`hooks_dir`]); every name of `table` is checked before anything is written (a hooks
    /// directory is created only where no name in it can be in the way), and the directories
    /// created are given to `give` where they are inside the repository.
    fn open(
        store: &git_lease::Store,
        git_dir: &Dir,
        table: &[HookSpec],
        allow_hooks_path: bool,
        give: Option<nofollow::Owner>,
    ) -> Result<Hooks, Failure> {
        store.check_repository_config(git_dir)?;
        let (dir, created, inside) = hooks_dir(store, git_dir, allow_hooks_path)?;
        for name in table.iter().flat_map(|spec| spec.names) {
            dir.expect_file_or_nothing(name)?;
        }
        let given = if inside { give } else { None };
        if let Some(to) = given {
            for created in &created {
                created.give(to)?;
            }
        }
        Ok(Hooks { dir, inside, given })
    }

    /// Installs `spec`'s script, running `exe`, as the hook `names[0]`, through the temporary
    /// file `names[2]`; a hook there that is not ours is kept as `names[1]`, which ours runs
    /// first.
    fn install(&self, exe: &Path, spec: &HookSpec) -> Result<Installed, Failure> {
        let [name, chained, tmp] = spec.names;
        let hooks = &self.dir;
        // A hook that is not ours (whether or not it reads as text) keeps running, first.
        let existing = hooks.read_linked(name)?;
        let ours = existing.as_ref().is_some_and(|hook| {
            hook.bytes
                .windows(MARKER.len())
                .any(|w| w == MARKER.as_bytes())
        });
        let moved = !ours && existing.is_some();
        if moved {
            hooks.rename(name, chained)?;
        }
        let script = hook_script(exe, spec.what, spec.run);
        hooks.create(tmp, script.as_bytes(), 0o755, self.given)?;
        hooks.rename(tmp, name)?;
        Ok(Installed {
            hook: hooks.path().join(name),
            chained: moved.then(|| hooks.path().join(chained)),
        })
    }
}

/// Opens the hooks directory for `install-hook`, creating what is missing of it: git's
/// `hooks` in the git dir, or `core.hooksPath` (absolute, or relative to the git dir, where a
/// bare repository runs its hooks), resolved; a path that leads outside the git dir is refused
/// unless `allow_outside`. Returns it, the directories created (outermost first), and whether it
/// is inside the repository.
fn hooks_dir(
    store: &git_lease::Store,
    git_dir: &Dir,
    allow_outside: bool,
) -> Result<(Dir, Vec<Dir>, bool), Error> {
    let Some(setting) = store.config_string("core.hooksPath") else {
        let (dir, created) = git_dir.descend(&["hooks".into()])?;
        return Ok((dir, created, true));
    };
    if setting.is_empty() || setting.starts_with('~') {
        return Err(Error::Config {
            key: "core.hooksPath".into(),
            value: setting,
            expected: "a directory, as an absolute path or one relative to the repository \
                       (install-hook does not expand ~)",
        });
    }
    match git_dir.place(Path::new(&setting))? {
        Placement::Inside(components) => {
            let (dir, created) = git_dir.descend(&components)?;
            Ok((dir, created, true))
        }
        Placement::Outside { base, rest } if allow_outside => {
            let (dir, created) = Dir::open(&base)?.descend(&rest)?;
            Ok((dir, created, false))
        }
        outside => Err(Error::UnsafePath {
            path: outside.path(git_dir),
            reason: format!(
                "core.hooksPath ({setting}) leads outside the repository {}: install-hook \
                 refuses to write an executable where the repository's configuration (which its \
                 owner may have written) points; remove the setting, or, if that directory is \
                 meant to hold this repository's hooks, run install-hook again with \
                 --allow-hooks-path",
                git_dir.path().display()
            ),
        }),
    }
}
