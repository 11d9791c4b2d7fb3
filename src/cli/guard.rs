//! The guard's hooks in a working repository (`git lease install-hook --client`): git's
//! `pre-push` and `pre-commit`, judged by [`git_lease::guard`].

use git_lease::guard::{Carrier, PushedRef};
use git_lease::hook;
use git_lease::Error;

use super::{exit, Context, Failure};

/// The holder the guard's hooks judge for: `GIT_LEASE_HOLDER` (set under `git lease run`),
/// else the configured one.
fn guard_holder(ctx: &Context) -> Result<git_lease::Holder, Error> {
    ctx.me()
}

/// The token a push carries, as the pre-push hook can learn it: `GIT_LEASE_PUSH_TOKEN` (set
/// by `git lease push`), else the `-o lease-token=N` of the `git push` that runs the hook
/// (read from its command line in `/proc`), else a `push.pushOption` of the configuration.
fn pushed_token(ctx: &Context) -> Option<u64> {
    if let Some(token) = std::env::var("GIT_LEASE_PUSH_TOKEN")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        return Some(token);
    }
    // The hook script runs this binary from a pipeline of its own: the `git push` is an
    // ancestor a few processes up.
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..4 {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            break;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "push") {
            if let Some(token) = git_lease::guard::token_in_push_args(&args) {
                return Some(token);
            }
            break;
        }
        match parent_of(pid) {
            Some(parent) if parent > 1 => pid = parent,
            _ => break,
        }
    }
    let options: Vec<String> = ctx
        .ledger
        .store()
        .config_strings("push.pushOption")
        .into_iter()
        .flat_map(|o| ["-o".to_owned(), o])
        .collect();
    git_lease::guard::token_in_push_args(&options)
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (the field after the command name,
/// which is in parentheses and may hold anything).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The token a push to `url` names, and who checks it. A push that carries one (`git lease
/// push`, `-o lease-token=N`) is checked with it, and so is every push under `git lease run`
/// (`GIT_LEASE_TOKEN`). A push that carries none asks the server whether it takes push options
/// (once, with the first fenced ref pushed): where it takes none the guard checks the holder
/// itself and lets the push go without `-o`.
fn token_and_carrier(
    ctx: &Context,
    url: &str,
    fenced: &PushedRef,
) -> Result<(Option<u64>, Carrier), Error> {
    let run_token = || {
        std::env::var("GIT_LEASE_TOKEN")
            .ok()
            .and_then(|t| t.parse().ok())
    };
    if let Some(token) = pushed_token(ctx) {
        return Ok((Some(token), Carrier::PushOptions));
    }
    let git_dir = ctx.ledger.store().git_dir();
    if !git_lease::guard::takes_push_options(git_dir, url, fenced)? {
        return Ok((run_token(), Carrier::Guard));
    }
    Ok((None, Carrier::PushOptions))
}

/// git's pre-push hook of the guard, for a push to `url`: each fenced ref of the push (stdin)
/// needs this holder's live tenure, and, where the server takes push options, its token;
/// refusals go to stderr, one line each, and fail the push (exit 1).
pub(crate) fn pre_push(ctx: &Context, url: &str) -> Result<u8, Failure> {
    let mut input = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut input).map_err(|e| {
        Error::Io {
            context: "cannot read the pushed refs from standard input".into(),
            source: e,
        }
    })?;
    let store = ctx.ledger.store();
    let fences = git_lease::guard::fences(store)?;
    let pushed = git_lease::guard::parse_pre_push(&input);
    let Some(fenced) = pushed
        .iter()
        .find(|p| hook::fenced_issue(&fences, &p.remote_ref).is_some())
    else {
        return Ok(exit::OK);
    };
    let holder = guard_holder(ctx)?;
    let (token, carrier) = token_and_carrier(ctx, url, fenced)?;
    let backend = ctx.backend()?;
    let refusals = git_lease::guard::check_push(
        &fences,
        &pushed,
        &holder,
        token,
        carrier,
        |issue| backend.current(issue),
        ctx.now,
    )?;
    Ok(exit::refused(&refusals))
}

/// git's pre-commit hook of the guard: a commit on a fenced branch needs this holder's live
/// lease (and under `git lease run`, its tenure, `GIT_LEASE_TOKEN`).
pub(crate) fn pre_commit(ctx: &Context) -> Result<u8, Failure> {
    let store = ctx.ledger.store();
    let Some(branch) = store.head_name()? else {
        return Ok(exit::OK);
    };
    let fences = git_lease::guard::fences(store)?;
    if hook::fenced_issue(&fences, &branch).is_none() {
        return Ok(exit::OK);
    }
    let holder = guard_holder(ctx)?;
    let token = std::env::var("GIT_LEASE_TOKEN")
        .ok()
        .and_then(|t| t.parse().ok());
    let backend = ctx.backend()?;
    let refusal = git_lease::guard::check_commit(
        &fences,
        &branch,
        &holder,
        token,
        |issue| backend.current(issue),
        ctx.now,
    )?;
    Ok(match refusal {
        Some(r) => {
            eprintln!("{r}");
            exit::FAILURE
        }
        None => exit::OK,
    })
}
