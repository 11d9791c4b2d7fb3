//! The `git lease` command line: parses arguments, reads the clock once, calls the library,
//! and turns outcomes and errors into output and exit codes.

mod commands;
mod completion;
mod context;
mod exit;
mod gc;
mod guard;
mod interrupt;
mod manual;
mod mcp;
mod one_of_many;
mod output;
mod pages;
mod progress;
mod run;
mod server;
mod watch;

use std::io::Write;
use std::path::PathBuf;

use crate::cli::output::json::{error_text, json_text};
use crate::cli::output::{color, diagnostics};
use chrono::{DateTime, Utc};
use clap::{Args, CommandFactory, Parser, Subcommand};
use git_lease::{Ending, Error, Ledger};

pub(crate) use context::{resolve_for_write, Context};

/// The heading of the options every command takes, shown after a command's own.
const GLOBAL: &str = "Global options";

/// The TTL of a claim when neither `--ttl` nor `lease.ttl` says otherwise.
const DEFAULT_TTL: &str = "1h";

#[derive(Parser, Debug)]
#[command(
    name = "git-lease",
    bin_name = "git lease",
    version,
    about = "Claim issues with leases kept in git refs (refs/leases/<issue>)",
    long_about = "Claim issues with leases kept in git itself.\n\nEach issue's claims form a \
                  chain of commits under refs/leases/<issue>; each commit holds lease.json \
                  with the holder, the fencing token and the expiry.",
    after_help = "Exit codes: 0 done (including \"not held\"), 1 failure, 2 bad usage, \
                  3 refused, 4 no such lease or ambiguous prefix, 5 lost the race repeatedly, \
                  6 run: the lease was lost and the command stopped."
)]
struct Cli {
    /// Run as if started in <PATH> (may be repeated, as in git)
    #[arg(short = 'C', value_name = "PATH", global = true, help_heading = GLOBAL)]
    dirs: Vec<PathBuf>,

    /// Print JSON: one object on stdout (an array for list, log and a several-issue acquire;
    /// a line per event for watch; on stderr for run)
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,

    /// Operate on this remote (a name or URL) [config: lease.remote; default: the branch's
    /// upstream, else origin, when it holds lease refs]
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "NAME|URL", conflicts_with = "local")]
    remote: Option<String>,

    /// Operate on this repository's own lease refs, whatever lease.remote says [config:
    /// lease.remote .]
    #[arg(long, global = true, help_heading = GLOBAL)]
    local: bool,

    /// Colour the output: auto (on a terminal), always or never [config: color.ui; NO_COLOR]
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "WHEN", value_enum)]
    color: Option<color::ColorChoice>,

    #[command(subcommand)]
    command: Command,
}

// `--holder NAME`: who a command acts as. A command that takes no session secret flattens it
// alone (`doctor`); the others take it with the secret, as `HolderArg`.
#[derive(Args, Debug)]
pub(crate) struct HolderName {
    /// Who holds [default: config lease.holder, then user.email]
    #[arg(
        long,
        env = "GIT_LEASE_HOLDER",
        hide_env_values = true,
        value_name = "NAME"
    )]
    pub(crate) holder: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct HolderArg {
    #[command(flatten)]
    pub(crate) name: HolderName,
    /// The session secret printed by `acquire --session`: renew, release, complete, abandon
    /// and acquire again need it for such a lease
    #[arg(
        long,
        env = "GIT_LEASE_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub(crate) secret: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct TtlArg {
    /// How long the lease lasts: 90s, 15m, 2h, 1d or never [default: config lease.ttl, else 1h]
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    ttl: Option<String>,
}

/// The subcommands. Each one's arguments are built only when it is the one run, or when
/// help, the manual or the completions describe it (clap's deferred initialisation): a
/// command line then builds one subcommand's options, not all of them.
///
/// A command's about is its variant's doc comment here. The argument structs it flattens
/// carry none (`//` comments instead): built last, theirs would replace it.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
enum Command {
    /// Claim issues (all or none, or with --any exactly one); idempotent for the live holder
    Acquire(commands::acquire::Args),
    /// Extend your live lease from now by the TTL
    Renew(commands::renew::Args),
    /// Free your lease (or one no longer live), keeping its token
    Release(commands::end::Args),
    /// Free your lease and record that the work is done
    Complete(commands::end::Args),
    /// Free your lease and record that the work was given up
    Abandon(commands::end::Args),
    /// Show one lease (reads only)
    Show(commands::show::Args),
    /// List live leases, oldest tenure first (reads only)
    List(commands::list::Args),
    /// Show the tenure history of one issue, newest first (reads only)
    Log(commands::log::Args),
    /// Fencing check: succeed only if TOKEN is the live tenure's token
    Check(commands::check::Args),
    /// Replicate every refs/leases/* of a remote here, fast-forward only and verified
    Sync(commands::sync::Args),
    /// Audit ledgers from their roots: every step must follow the transition rules
    Verify(commands::verify::Args),
    /// Free someone else's lease as an administrator (token kept; who and why recorded)
    Revoke(commands::revoke::Args),
    /// Push the current issue branch with your fencing token as a push option
    Push(commands::push::Args),
    /// Hold a lease while a command runs: acquire, renew in the background, then complete or release
    Run(commands::run::Args),
    /// Block until an issue is free (then acquire it with --acquire)
    Wait(commands::wait::Args),
    /// Draw who held what, when: one self-contained HTML page (reads only)
    Timeline(commands::timeline::Args),
    /// Stream lease events, one line each, as they appear (reads only; ends on SIGINT, SIGTERM
    /// or SIGHUP)
    Watch(commands::watch::Args),
    /// Check a remote as the engine of claims (compare-and-swap, hook, identity, clock) and
    /// this clone's settings; exit 1 when a check fails
    ///
    /// One line per check: ok, warn or fail, what was found, and what to do. This clone: git,
    /// its ref storage, lease.remote, refspecs that move or prune the lease refs. The remote
    /// (--remote, lease.remote, else origin; none with --local): reached, its capabilities,
    /// whether it refuses a push whose expected old value is stale (probed with pushes to a
    /// scratch ref, refs/lease-probe/<random>, deleted after), its hook's version and policy
    /// as the hook reports them, who it says you are against your holder name, and its clock
    /// against yours. A remote found to ignore expected old values is remembered: writes
    /// through it are refused (exit 1) until doctor finds it fixed, or
    /// `git config remote.<name>.leaseUnsafeCas true` accepts the danger.
    Doctor(commands::doctor::Args),
    /// Run as a server hook (git runs this; see install-hook)
    Hook(commands::hook::Args),
    /// Install the server hook into a repository, chaining with an existing pre-receive hook
    InstallHook(commands::install_hook::Args),
    /// Fold free ledgers quiet for a while into refs/lease-archive, tokens kept, and remove
    /// their refs: claims and pushes then cost what the live leases cost
    Archive(commands::archive::Args),
    /// Pack the repository's loose objects and refs, and write its commit-graph (git pack-refs
    /// --all --prune, git pack-objects and git prune-packed, git commit-graph write --reachable)
    Gc(commands::gc::Args),
    /// Print the manual page (roff), or install every page where man finds it
    Man(commands::man::Args),
    /// Print a shell completion script, completing issue ids from the lease refs
    Completions(commands::completions::Args),
    /// Serve the lease commands as MCP tools over stdio, lease events as notifications
    Mcp(commands::mcp::Args),
}

#[derive(Subcommand, Debug)]
pub(crate) enum HookKind {
    /// git's update hook: check one ref update
    Update {
        /// The ref being updated
        refname: String,
        /// Its old value
        old: String,
        /// Its new value
        new: String,
    },
    /// git's pre-receive hook: check every `<old> <new> <ref>` line on stdin before any lands
    PreReceive,
    /// git's reference-transaction hook: check fenced updates again as they land
    ReferenceTransaction {
        /// The transaction's state: preparing, prepared, committed or aborted
        state: String,
    },
    /// git's pre-push hook in a working repository (install-hook --client): refuse a push to
    /// a fenced branch unless this holder holds its live tenure
    PrePush {
        /// The remote's name (or URL)
        remote: String,
        /// The remote's URL
        url: Option<String>,
    },
    /// git's pre-commit hook in a working repository (install-hook --client): refuse a commit
    /// on a fenced branch whose lease this holder lost
    PreCommit,
}

impl HookKind {
    /// Whether git runs this hook on a server (as opposed to a working repository's guard).
    pub(crate) fn server_side(&self) -> bool {
        !matches!(self, HookKind::PrePush { .. } | HookKind::PreCommit)
    }
}

/// The options that choose where leases are (`--remote`, `--local`), which mean nothing to the
/// commands that act on a repository itself.
const WHERE_OPTIONS: [&str; 2] = ["remote", "local"];

/// Returns the whole command-line interface: what parses the arguments, and what `--help`,
/// the manual and the completions describe.
pub(crate) fn command() -> clap::Command {
    // Each command's exit codes close its help.
    let mut command = Cli::command().mut_subcommands(|c| {
        let codes = exit::help::of(c.get_name());
        c.after_help(codes)
    });
    for name in ["gc", "install-hook"] {
        command = command.mut_subcommand(name, hide_where);
    }
    // `hook`'s own subcommands exist only once its deferred arguments are built, so its
    // deferred build is this one: the derived arguments, then the hidden ones beneath.
    command.mut_subcommand("hook", |hook| {
        hide_where(hook).defer(|hook| {
            <commands::hook::Args as Args>::augment_args(hook)
                .mut_subcommand("update", hide_where)
                .mut_subcommand("pre-receive", hide_where)
        })
    })
}

/// Adds to `command` hidden options named as [`WHERE_OPTIONS`]: a subcommand's own argument
/// of the same name shadows a global one, and hidden keeps it out of that subcommand's help.
/// Given before a command's own options (or to one that has none), they take no place in the
/// order help lists options in.
fn hide_where(mut command: clap::Command) -> clap::Command {
    command = command.next_display_order(None);
    for id in WHERE_OPTIONS {
        command = command.arg(clap::Arg::new(id).long(id).hide(true).action(match id {
            "local" => clap::ArgAction::SetTrue,
            _ => clap::ArgAction::Set,
        }));
    }
    command.next_display_order(0)
}

/// Parses `args` (the program's name first) with the whole interface, [`command`]: clap with
/// the global options (`-C`, `--json`, `--remote`, `--local`, `--color`) as clap globals.
fn parse(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    command()
        .try_get_matches_from(args)
        .and_then(|mut matches| {
            Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command()))
        })
}

/// Runs the command line `args` (the program name first) and returns the exit code.
pub fn main(args: Vec<std::ffi::OsString>) -> u8 {
    // A shell asking for completions (`COMPLETE=bash`): answered before anything else.
    if let Some(code) = completion::from_env(&args) {
        return code;
    }
    // Known before parsing, so that a usage error in JSON mode is JSON too.
    let json = args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json");
    diagnostics::set_json(json);
    let cli = match parse(&args) {
        Ok(cli) => cli,
        Err(e) => {
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) {
                let _ = e.print();
                return exit::OK;
            }
            if json {
                // clap's message up to its usage hint, without the `error: ` label.
                let rendered = e.render().to_string();
                let message = rendered
                    .split("\n\n")
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
                    .trim();
                return fail(true, "usage", message, exit::USAGE);
            }
            let _ = e.print();
            return exit::USAGE;
        }
    };
    match run(cli) {
        Ok(code) => {
            let hints = diagnostics::take();
            if json && !hints.is_empty() {
                let value = serde_json::json!({ "hints": hints });
                eprintln!("{}", json_text(&value).unwrap_or_default());
            }
            code
        }
        Err(Failure::Lib(e)) => {
            let code = exit::for_error(e.kind());
            fail(json, exit::kind_name(e.kind()), &e.chain(), code)
        }
        Err(Failure::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(Failure::Io(e)) => fail(
            json,
            "failure",
            &format!("cannot write output: {e}"),
            exit::FAILURE,
        ),
    }
}

/// Reports an error on stderr, as text or (with `--json`) as one JSON object
/// (`{"schema_version", "error": {"kind", "message", "exit_code"}, "hints"}`, docs/JSON.md,
/// with what the command said before it failed), and returns its exit code.
fn fail(json: bool, kind: &str, message: &str, code: u8) -> u8 {
    let message = &git_lease::redact::urls(message);
    if json {
        eprintln!("{}", error_text(kind, message, code, &diagnostics::take()));
    } else {
        eprintln!("error: {message}");
    }
    code
}

pub(crate) enum Failure {
    Lib(Error),
    Io(std::io::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Lib(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

/// Reads the one clock of this command: `GIT_LEASE_NOW`, or the system clock.
fn now() -> Result<DateTime<Utc>, Error> {
    match std::env::var("GIT_LEASE_NOW") {
        Ok(text) => git_lease::time::parse_instant(&text)
            .map_err(|e| Error::InvalidInput(format!("GIT_LEASE_NOW: {e}"))),
        Err(std::env::VarError::NotPresent) => Ok(git_lease::os::system_now()),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::InvalidInput(
            "GIT_LEASE_NOW is not valid UTF-8".into(),
        )),
    }
}

fn run(cli: Cli) -> Result<u8, Failure> {
    // The server's hook judges at the server's clock: never at one the pusher's environment
    // names. The client's (pre-push, pre-commit) read the clock as every client command does.
    let is_hook = matches!(&cli.command, Command::Hook(h) if h.kind.server_side());
    let now = if is_hook {
        git_lease::os::system_now()
    } else {
        now()?
    };
    for dir in &cli.dirs {
        // As in git, a -C that leads nowhere is bad usage, like any other missing repository.
        std::env::set_current_dir(dir).map_err(|e| Error::NotARepository {
            path: dir.clone(),
            message: format!("cannot change to it: {e}"),
        })?;
    }
    // The manual and completions describe the tool, not a repository: no repository needed.
    if let Some(done) = without_repository(&cli) {
        return done;
    }
    let ledger = open_ledger(&cli.command)?;
    let now = if is_hook {
        server::hook_clock(ledger.store())?.unwrap_or(now)
    } else {
        now
    };
    // History from elsewhere is judged by what this reader knows too: its clock among it.
    let ledger = ledger.with_reader_clock(now)?;
    let color_ui = git_lease::config::color(
        "color.ui",
        ledger.store().config_flag("color.ui").as_deref(),
    )?;
    color::decide(cli.color, color_ui, cli.json);
    let ctx = Context::at(ledger, now, &cli)?;
    // The MCP server writes to stdout from its own threads: never locked here.
    if let Command::Mcp(args) = cli.command {
        return commands::mcp::run(&ctx, args, &mut std::io::sink());
    }
    let stdout = std::io::stdout();
    // Buffered: `list` prints tens of thousands of lines.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    // `run` and `wait` handle their signals themselves.
    let writes =
        cli.command.writes_leases() && !matches!(cli.command, Command::Run(_) | Command::Wait(_));
    let result = interrupt::guarded(&ctx, writes, || dispatch(&ctx, cli.command, &mut out));
    let _ = out.flush();
    // What an operation did beside its answer (a local history kept aside) is said even when
    // the command then failed.
    for notice in ctx.ledger.take_notices() {
        diagnostics::warning(&git_lease::text::printable(&notice));
    }
    let code = result?;
    out.flush()?;
    Ok(code)
}

/// Runs the commands that need no repository (the manual, the completions), and refuses
/// `--json` where a command's output has no JSON form; `None` for every other command.
fn without_repository(cli: &Cli) -> Option<Result<u8, Failure>> {
    match &cli.command {
        Command::Man(args) if cli.json && args.install.is_none() => Some(Err(Error::InvalidInput(
            "man prints the manual page (roff), which has no JSON form: --json goes with \
                 man --install, which reports the pages it wrote"
                .into(),
        )
        .into())),
        Command::Completions(_) if cli.json => Some(Err(Error::InvalidInput(
            "completions prints a shell script, which has no JSON form: leave out --json".into(),
        )
        .into())),
        Command::Hook(_) if cli.json => Some(Err(Error::InvalidInput(
            "hook speaks git's hook protocol (refusals are lines git relays to the \
                 pusher), which has no JSON form: leave out --json"
                .into(),
        )
        .into())),
        Command::Archive(_) | Command::Gc(_) | Command::InstallHook(_) if cli.remote.is_some() => {
            Some(Err(commands::remote_refused(&cli.command)))
        }
        Command::Man(args) => {
            let mut out = std::io::stdout().lock();
            Some(manual::man(args.install.clone(), cli.json, &mut out))
        }
        Command::Completions(args) => Some(completion::script(
            args.shell,
            &mut std::io::stdout().lock(),
        )),
        _ => None,
    }
}

/// Opens the ledger of `command` in the repository of the current directory, with local
/// liveness.
fn open_ledger(command: &Command) -> Result<Ledger, Error> {
    let cwd = std::env::current_dir().map_err(|e| Error::Io {
        context: "cannot read the current directory".into(),
        source: e,
    })?;
    Ok(match command {
        // It may run as root in a repository someone else owns: no configuration file is read
        // through a link.
        Command::InstallHook(commands::install_hook::Args { repo, .. }) => Ledger::from_store(
            git_lease::Store::open_unfollowed(repo.as_deref().unwrap_or(&cwd), repo.is_some())?,
        ),
        // A hook reads the pushed objects from git's quarantine as well.
        Command::Hook(_) => {
            Ledger::from_store(git_lease::Store::discover(&cwd)?.with_push_quarantine()?)
        }
        _ => Ledger::discover(&cwd)?,
    }
    .with_local_liveness())
}

/// Routes a parsed command to its body.
fn dispatch(ctx: &Context, command: Command, out: &mut dyn Write) -> Result<u8, Failure> {
    match command {
        Command::Acquire(args) => commands::acquire::run(ctx, args, out),
        Command::Renew(args) => commands::renew::run(ctx, args, out),
        Command::Release(args) => commands::end::run(ctx, args, Ending::Release, out),
        Command::Complete(args) => commands::end::run(ctx, args, Ending::Complete, out),
        Command::Abandon(args) => commands::end::run(ctx, args, Ending::Abandon, out),
        Command::Show(args) => commands::show::run(ctx, args, out),
        Command::List(args) => commands::list::run(ctx, args, out),
        Command::Log(args) => commands::log::run(ctx, args, out),
        Command::Check(args) => commands::check::run(ctx, args, out),
        Command::Verify(args) => commands::verify::run(ctx, args, out),
        Command::Revoke(args) => commands::revoke::run(ctx, args, out),
        Command::Sync(args) => commands::sync::run(ctx, args, out),
        Command::Hook(args) => commands::hook::run(ctx, args, out),
        Command::InstallHook(args) => commands::install_hook::run(ctx, args, out),
        Command::Archive(args) => commands::archive::run(ctx, args, out),
        Command::Gc(args) => commands::gc::run(ctx, args, out),
        Command::Watch(args) => commands::watch::run(ctx, args, out),
        Command::Timeline(args) => commands::timeline::run(ctx, args, out),
        Command::Push(args) => commands::push::run(ctx, args, out),
        Command::Doctor(args) => commands::doctor::run(ctx, args, out),
        Command::Man(args) => commands::man::run(ctx, args, out),
        Command::Completions(args) => commands::completions::run(ctx, args, out),
        Command::Run(args) => commands::run::run(ctx, args, out),
        Command::Wait(args) => commands::wait::run(ctx, args, out),
        // Served before stdout is locked (`run`); here it would write beside the lock.
        Command::Mcp(_) => Ok(exit::OK),
    }
}

/// Parses a duration option (`500ms`, `10s`, `2m`).
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, Error> {
    if text.trim_start().starts_with('-') {
        return Err(Error::InvalidInput(format!(
            "invalid duration {text:?}: a duration cannot be negative"
        )));
    }
    humantime::parse_duration(text)
        .map_err(|e| Error::InvalidInput(format!("invalid duration {text:?}: {e}")))
}

impl Command {
    /// Returns true for the commands that claim or say who holds what, whose ledgers are found
    /// on the remote the team uses when nothing says where they are
    /// ([`git_lease::backend::choose`]). The others act on this repository, or on the remote
    /// given or configured.
    fn finds_its_remote(&self) -> bool {
        self.writes_leases()
            || matches!(
                self,
                Command::Show(_)
                    | Command::List(_)
                    | Command::Log(_)
                    | Command::Check(_)
                    | Command::Wait(_)
                    | Command::Watch(_)
                    | Command::Mcp(_)
            )
    }

    /// Returns true for the commands that write a claim to a ledger: those refused where
    /// nothing says whether claims are shared (`sync` copies ledgers and claims nothing).
    fn writes_leases(&self) -> bool {
        match self {
            Command::Acquire(_)
            | Command::Renew(_)
            | Command::Release(_)
            | Command::Complete(_)
            | Command::Abandon(_)
            | Command::Revoke(_)
            | Command::Run(_) => true,
            Command::Wait(args) => args.acquire,
            _ => false,
        }
    }
}

/// `GIT_LEASE_HOLDER`, when it names someone.
pub(crate) fn env_holder() -> Option<String> {
    std::env::var("GIT_LEASE_HOLDER")
        .ok()
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_lease::Outcome;

    #[test]
    fn the_command_line_is_well_formed() {
        command().debug_assert();
    }

    #[test]
    fn outcome_exit_codes() {
        assert_eq!(exit::for_outcome(Outcome::NotHeld), exit::OK);
        assert_eq!(exit::for_outcome(Outcome::Held), exit::REFUSED);
        assert_eq!(exit::for_outcome(Outcome::NotHolder), exit::REFUSED);
    }
}
