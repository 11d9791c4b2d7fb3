//! The server side of the command line: `hook`, `install-hook`, and the client's `push` that
//! carries the fencing token to a fenced branch.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Stdio;

use git_lease::backend::Backend;
use git_lease::hook::{self, Policy, RefUpdate};
use git_lease::remote::{
    hook_verdict, read_branch_push, redact_url, redact_urls, BranchPush, HookVerdict, Remote,
};
use git_lease::store::nofollow::{self, Dir, Placement};
use git_lease::{Error, IssueId};

use super::{exit, output, Context, Failure, HolderArg, HookKind};

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

/// Parses one ref update of a hook's input.
fn ref_update(name: &str, old: &str, new: &str) -> Result<RefUpdate, Error> {
    let id = |hex: &str| {
        gix::ObjectId::from_hex(hex.as_bytes())
            .map_err(|e| Error::InvalidInput(format!("bad object id {hex:?} for {name}: {e}")))
    };
    Ok(RefUpdate {
        name: name.to_owned(),
        old: id(old)?,
        new: id(new)?,
    })
}

/// Reads a hook's `<old> <new> <ref>` lines from stdin.
fn stdin_updates() -> Result<Vec<RefUpdate>, Error> {
    stdin_updates_but(|_, _| false)
}

/// Reads a hook's `<old> <new> <ref>` lines from stdin, leaving out those `skip` names (by
/// their old and new values).
fn stdin_updates_but(skip: impl Fn(&str, &str) -> bool) -> Result<Vec<RefUpdate>, Error> {
    let mut updates = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| Error::Io {
            context: "cannot read the hook's input".into(),
            source: e,
        })?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [] => continue,
            [old, new, _] if skip(old, new) => continue,
            [old, new, name] => updates.push(ref_update(name, old, new)?),
            _ => {
                return Err(Error::InvalidInput(format!(
                    "hook input line {line:?} is not `<old> <new> <ref>`"
                )))
            }
        }
    }
    Ok(updates)
}

/// Runs git's `reference-transaction` hook protocol: at `prepared`, every lease ref created for
/// an archived issue must continue from its archived tip ([`hook::check_revivals`]), and the
/// fenced updates a push check approved are judged again ([`hook::check_transaction`]); at
/// `committed` or `aborted` their approvals are forgotten. It runs for every ref transaction
/// of the served repository, so it stays out of the way of all the others: other states, and
/// a policy it cannot read (which refuses every push at `pre-receive` already), let the
/// transaction through.
fn reference_transaction(ctx: &Context, state: &str) -> Result<u8, Failure> {
    if !matches!(state, "prepared" | "committed" | "aborted") {
        return Ok(exit::OK);
    }
    let store = ctx.ledger.store();
    let Ok(policy) = Policy::from_config(store) else {
        return Ok(exit::OK);
    };
    // A symbolic ref's update (`ref:<target>` for a value, as git 2.46 and newer pass it:
    // `git symbolic-ref HEAD refs/heads/main`) is never a push's, so never a fenced one.
    let updates = stdin_updates_but(|old, new| old.starts_with("ref:") || new.starts_with("ref:"))?;
    if state != "prepared" {
        if !policy.fences.is_empty() {
            hook::forget_approvals(store, &updates);
        }
        return Ok(exit::OK);
    }
    let mut refusals = hook::check_revivals(store, &updates);
    if !policy.fences.is_empty() {
        refusals.extend(hook::check_transaction(store, &policy, &updates, ctx.now));
    }
    Ok(exit::refused(&refusals))
}

/// Runs git's `update`, `pre-receive` or `reference-transaction` hook protocol; refusals go
/// to stderr, one line each, which git relays to the pusher as `remote: …` (all but the last).
pub(crate) fn hook(ctx: &Context, kind: &HookKind) -> Result<u8, Failure> {
    let (updates, options) = match kind {
        HookKind::Update { refname, old, new } => (vec![ref_update(refname, old, new)?], None),
        HookKind::PreReceive => (stdin_updates()?, Some(hook::push_options_from_env())),
        HookKind::ReferenceTransaction { state } => return reference_transaction(ctx, state),
        HookKind::PrePush { remote, url } => {
            return super::guard::pre_push(ctx, url.as_deref().unwrap_or(remote))
        }
        HookKind::PreCommit => return super::guard::pre_commit(ctx),
    };
    let store = ctx.ledger.store();
    let policy = Policy::from_config(store)?;
    let pusher = hook::pusher_from_env(&policy.identity);
    if let Some(report) = hook::probe_report(store, &policy, &pusher, &updates, ctx.now) {
        eprintln!("{}", report.line());
    }
    let refusals = hook::check_push(
        store,
        &policy,
        &pusher,
        options.as_deref(),
        &updates,
        ctx.now,
    );
    Ok(exit::refused(&refusals))
}

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
    use super::commands::install_hook as command;
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
    let mut warnings = Vec::new();
    if let Err(why) = runnable_by(&exe, owner) {
        warnings.push(format!(
            "{} cannot be run by {}, who owns {} and runs its hooks: {why}; every push would \
             fail with \"the server's hook failed\"; install git-lease where that user can run \
             it (e.g. /usr/local/bin) and run install-hook again with --binary PATH",
            exe.display(),
            owner.name(),
            git_dir.path().display()
        ));
    }
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
        super::output::json::json_line(out, &value)?;
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

/// The owner of a repository: the user its hooks run as.
#[derive(Clone, Copy, Debug)]
struct Owner {
    uid: u32,
    gid: u32,
}

impl Owner {
    /// `name (uid N)`, or `uid N` when the user database does not name it.
    fn name(&self) -> String {
        match passwd_entry(|fields| fields.get(2) == Some(&self.uid.to_string().as_str())) {
            Some(fields) => format!("{} (uid {})", fields[0], self.uid),
            None => format!("uid {}", self.uid),
        }
    }

    /// Every group the owner is in: its own, and those `/etc/group` lists it in.
    fn groups(&self) -> Vec<u32> {
        let mut groups = vec![self.gid];
        let Some(user) = passwd_entry(|f| f.get(2) == Some(&self.uid.to_string().as_str()))
            .map(|f| f[0].clone())
        else {
            return groups;
        };
        if let Ok(text) = std::fs::read_to_string("/etc/group") {
            for line in text.lines() {
                let fields: Vec<&str> = line.split(':').collect();
                if let [_, _, gid, members] = fields.as_slice() {
                    if members.split(',').any(|m| m == user) {
                        if let Ok(gid) = gid.parse() {
                            groups.push(gid);
                        }
                    }
                }
            }
        }
        groups
    }
}

/// The first `/etc/passwd` entry whose fields satisfy `pick`.
fn passwd_entry(pick: impl Fn(&[&str]) -> bool) -> Option<Vec<String>> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines()
        .map(|l| l.split(':').collect::<Vec<&str>>())
        .find(|f| f.len() >= 3 && pick(f))
        .map(|f| f.into_iter().map(str::to_owned).collect())
}

/// Checks, from permission bits, that `owner` could execute `exe`: every directory on the
/// way searchable, the file itself executable (not whether a script is readable too). ACLs and
/// mount options are not seen; this catches the usual trap, a binary in a private home.
fn runnable_by(exe: &Path, owner: Owner) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", exe.display()));
    }
    let groups = owner.groups();
    // rwx bits that apply to the owner, as the kernel picks them (root: any x bit will do).
    let bits = |m: &std::fs::Metadata| -> u32 {
        let mode = m.mode();
        if owner.uid == 0 {
            7
        } else if m.uid() == owner.uid {
            (mode >> 6) & 7
        } else if groups.contains(&m.gid()) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    };
    if owner.uid == 0 {
        return if meta.mode() & 0o111 != 0 {
            Ok(())
        } else {
            Err(format!("{} is not executable", exe.display()))
        };
    }
    let mut paths = vec![exe.to_owned()];
    if let Ok(real) = std::fs::canonicalize(exe) {
        if real != exe {
            paths.push(real);
        }
    }
    for path in &paths {
        for dir in path.ancestors().skip(1) {
            let Ok(m) = std::fs::metadata(dir) else {
                continue;
            };
            if bits(&m) & 1 == 0 {
                return Err(format!(
                    "the directory {} is not searchable by that user",
                    dir.display()
                ));
            }
        }
    }
    let file_bits = bits(&meta);
    if file_bits & 1 == 0 {
        return Err(format!("{} is not executable by that user", exe.display()));
    }
    Ok(())
}

/// Pushes an issue branch with the holder's current token as `-o lease-token=<N>`.
pub(crate) fn push(
    ctx: &Context,
    remote_name: Option<&str>,
    branch: Option<&str>,
    holder: &HolderArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let holder = ctx.holder(&holder.name)?;
    let remote_name = remote_name
        .map(str::to_owned)
        .or_else(|| ctx.remote.clone())
        .unwrap_or_else(|| "origin".to_owned());
    let branch = match branch {
        Some(b) => b.to_owned(),
        None => {
            let head = ctx.ledger.store().head_name()?;
            match head {
                Some(name) => name.trim_start_matches("refs/heads/").to_owned(),
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
    let fences = git_lease::guard::fences(ctx.ledger.store())?;
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
        .filter(|e| git_lease::is_live(e.current(), ctx.now));
    // The answer: a line on stderr (git's own output is there too), or one JSON object.
    let mut answer = |outcome: &str, token: Option<u64>, reason: Option<String>, code: u8| {
        if ctx.json {
            let value = serde_json::json!({
                "outcome": outcome,
                "remote": redact_url(&remote_name),
                "branch": full,
                "issue": issue.as_str(),
                "token": token,
                "reason": reason,
            });
            super::output::json::json_line(out, &value)?;
        } else if let Some(reason) = reason {
            eprintln!("error: push refused: {reason}");
        }
        Ok::<u8, Failure>(code)
    };
    let token = match live {
        Some(e) if e.lease.holder.as_deref() == Some(holder.as_str()) => e.lease.token,
        Some(e) => {
            let reason = format!(
                "issue {issue} is held by {} (token {}), not by {holder}",
                output::printable(e.lease.holder.as_deref().unwrap_or("?")),
                e.lease.token
            );
            return answer("refused", None, Some(reason), exit::REFUSED);
        }
        None => {
            let reason = format!("you do not hold issue {issue}; acquire it first");
            return answer("refused", None, Some(reason), exit::REFUSED);
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
    // What is pushed, to settle an answer that gets lost.
    let pushing = ctx.ledger.store().tip_of(&full)?;
    let (pushed, stderr) = push_with_token(ctx, &remote_name, &branch, token, &shown)?;
    if pushed.status.success() {
        eprint!("{stderr}");
        return answer("pushed", Some(token), None, exit::OK);
    }
    if let Some(line) = stderr
        .lines()
        .find(|l| l.starts_with("git-lease guard: refused"))
    {
        eprint!("{stderr}");
        let reason = format!("by this repository's guard: {line}");
        return answer("refused", Some(token), Some(reason), exit::REFUSED);
    }
    if stderr.contains("hook declined") {
        return match hook_verdict(&stderr) {
            HookVerdict::Refused(message) => {
                eprint!("{stderr}");
                answer(
                    "refused",
                    Some(token),
                    Some(format!("by the server's lease rules: {message}")),
                    exit::REFUSED,
                )
            }
            HookVerdict::Failed(message) => Err(Error::HookFailed {
                target: full,
                message,
            }
            .into()),
        };
    }
    let mut message = stderr.trim().to_owned();
    if message.is_empty() {
        message = format!("git exited with {}", pushed.status);
    }
    // A push that broke off before the server's report may have landed. The server is asked
    // where the branch is now: at the commit pushed, the work is there and the outcome known.
    // Otherwise it is unknown, and pushing the same branch again converges (git finds it up
    // to date).
    Err(match read_branch_push(&stderr) {
        BranchPush::Unknown => {
            let there = pushing.and_then(|commit| {
                (remote.branch(&full).ok().flatten() == Some(commit)).then_some(commit)
            });
            if let Some(commit) = there {
                eprint!("{stderr}");
                eprintln!(
                    "warning: the server's answer was lost, but its {full} is at {commit}: \
                     the branch is there"
                );
                return answer("pushed", Some(token), None, exit::OK);
            }
            Error::OutcomeUnknown {
                command: shown,
                message,
            }
        }
        BranchPush::Locked(lock) => Error::RemoteLocked {
            remote: redact_url(&remote_name),
            target: full,
            message: lock,
        },
        BranchPush::Failed => Error::Transport {
            command: shown,
            message,
        },
    }
    .into())
}

/// Pushes `branch` to `remote` with the holder's `token` as a push option; a server that takes
/// no push options runs no hook that could read it, so the branch goes there again without it
/// (this repository's guard checks the token itself), which is said on stderr. Returns git's
/// answer and its stderr, without any URL's credentials.
fn push_with_token(
    ctx: &Context,
    remote: &str,
    branch: &str,
    token: u64,
    shown: &str,
) -> Result<(std::process::Output, String), Error> {
    let pushed = push_branch(ctx, remote, branch, token, true, shown)?;
    let stderr = redact_urls(&String::from_utf8_lossy(&pushed.stderr));
    if pushed.status.success() || !stderr.contains(git_lease::guard::NO_PUSH_OPTIONS) {
        return Ok((pushed, stderr));
    }
    eprintln!(
        "git lease: {} takes no push options: pushing {branch} without -o {}{token}",
        redact_url(remote),
        hook::TOKEN_OPTION
    );
    let pushed = push_branch(ctx, remote, branch, token, false, shown)?;
    let stderr = redact_urls(&String::from_utf8_lossy(&pushed.stderr));
    Ok((pushed, stderr))
}

/// Runs `git push` of `branch` to `remote` for `git lease push`, with the holder's `token` as
/// a push option when `with_option`, and always in `GIT_LEASE_PUSH_TOKEN` for this
/// repository's guard; git's stderr is captured.
fn push_branch(
    ctx: &Context,
    remote: &str,
    branch: &str,
    token: u64,
    with_option: bool,
    shown: &str,
) -> Result<std::process::Output, Error> {
    let mut cmd = git_lease::git::command(ctx.ledger.store().git_dir());
    cmd.arg("push");
    if with_option {
        cmd.arg("-o").arg(format!("{}{token}", hook::TOKEN_OPTION));
    }
    let child = cmd
        .arg("--")
        .arg(remote)
        .arg(branch)
        .env("LC_ALL", "C")
        .env("GIT_LEASE_PUSH_TOKEN", token.to_string())
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Transport {
            command: shown.to_owned(),
            message: format!("cannot run git: {e}"),
        })?;
    child.wait_with_output().map_err(|e| Error::Transport {
        command: shown.to_owned(),
        message: format!("cannot wait for git: {e}"),
    })
}
