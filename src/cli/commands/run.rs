//! `git lease run`: hold a lease while a command runs.

use std::io::Write;

use git_lease::Error;

use crate::cli::{parse_duration, Context, Failure, HolderArg, TtlArg};

// The arguments of `run`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The exact issue id (with --any: the candidates; `-` reads more from stdin)
    #[arg(required = true, value_name = "ISSUE")]
    pub(crate) issues: Vec<String>,
    /// Claim exactly one free issue of the candidates, and run the command for it
    #[arg(long)]
    pub(crate) any: bool,
    /// With --any: the candidates are a priority order, most urgent first; take the first
    /// free one, and move up while one ahead of it is free, so that claimers starting
    /// together end on the first ones
    #[arg(long, requires = "any")]
    pub(crate) ordered: bool,
    #[command(flatten)]
    pub(crate) holder: HolderArg,
    #[command(flatten)]
    pub(crate) ttl: TtlArg,
    /// How often to renew; with --ttl never, how often to read the lease, to stop the command
    /// once it is revoked [default: a third of the TTL (less under 3s); 10s for --ttl never]
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub(crate) every: Option<String>,
    /// How long the child gets between SIGTERM and SIGKILL once the lease is lost (less when
    /// no renewal succeeded and the lease is about to expire)
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    pub(crate) grace: String,
    /// What to record when the command succeeds
    #[arg(long, value_enum, default_value = "complete")]
    pub(crate) on_success: crate::cli::run::EndAs,
    /// What to record when the command fails
    #[arg(long, value_enum, default_value = "release")]
    pub(crate) on_failure: crate::cli::run::EndAs,
    /// While the issue (or with --any, every candidate) is held by someone else, wait for
    /// it instead of exiting 3, as `flock -w` does (`--wait=TIMEOUT`: `--wait --timeout
    /// TIMEOUT`)
    #[arg(
        long,
        value_name = "TIMEOUT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub(crate) wait: Option<String>,
    /// With --wait, give up after this long (exit 3, nothing run), as `wait --timeout`
    #[arg(
        long,
        value_name = "DURATION",
        requires = "wait",
        allow_hyphen_values = true
    )]
    pub(crate) timeout: Option<String>,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// Runs `git lease run`.
pub(crate) fn run(ctx: &Context, args: Args, _out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        issues,
        any,
        ordered,
        holder,
        ttl,
        every,
        grace,
        on_success,
        on_failure,
        wait,
        timeout,
        command,
        ..
    } = args;
    if !any && issues.len() != 1 {
        // `--wait 20s` is `--wait` and a second issue, `20s`: say what was meant.
        let meant = match (&wait, &timeout, issues.as_slice()) {
            (Some(w), None, [_, second]) if w.is_empty() && parse_duration(second).is_ok() => {
                format!(": did you mean --wait --timeout {second} (or --wait={second})?")
            }
            _ => String::new(),
        };
        return Err(Error::InvalidInput(format!(
            "run takes one issue, or several candidates with --any{meant}"
        ))
        .into());
    }
    let wait = match (wait.as_deref(), timeout.as_deref()) {
        (None, _) => None,
        (Some(""), None) => Some(None),
        (Some(""), Some(timeout)) | (Some(timeout), None) => Some(Some(parse_duration(timeout)?)),
        (Some(_), Some(_)) => {
            return Err(Error::InvalidInput(
                "give the timeout once: --wait --timeout D (--wait=D says the same)".into(),
            )
            .into())
        }
    };
    let args = crate::cli::run::RunArgs {
        issues,
        any,
        order: crate::cli::one_of_many::order(ordered),
        wait,
        holder: ctx.holder(&holder.name)?,
        ttl: ctx.ttl(&ttl)?,
        every: every.as_deref().map(parse_duration).transpose()?,
        grace: parse_duration(&grace)?,
        on_success,
        on_failure,
        command,
    };
    crate::cli::run::run(ctx, args)
}
