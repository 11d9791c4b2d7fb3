//! `git lease watch`: a stream of lease events.

use std::io::Write;

use crate::cli::{watch, Context, Failure};

// The arguments of `watch`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// First replay the history since this instant (unix seconds, RFC 3339) or duration ago
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// How often to fetch with --remote [default: 3s]; locally, how often to read the refs
    /// when no file-system notification came [default: 2s]
    #[arg(long, value_name = "DURATION")]
    pub(crate) interval: Option<String>,
    /// Only the events that matter to this holder: its claims and their ends, its lease's
    /// expiry, a revoke or takeover of its lease
    #[arg(long, conflicts_with = "mine", value_name = "NAME")]
    pub(crate) holder: Option<String>,
    /// Only the events that matter to you (the holder of --holder's default: GIT_LEASE_HOLDER,
    /// then lease.holder, then user.email)
    #[arg(long)]
    pub(crate) mine: bool,
    /// Run this shell command (sh -c) for each event, one at a time, in order: the event's
    /// JSON on its stdin; LEASE_ISSUE, LEASE_EVENT, LEASE_HOLDER and LEASE_TOKEN in its
    /// environment. A failure is said on stderr and the watch goes on; a signal is passed on
    /// to the command, and the watch ends after it [config: lease.onEvent; '' runs none]
    #[arg(long, value_name = "CMD", conflicts_with = "no_exec")]
    pub(crate) exec: Option<String>,
    /// Run no command for the events, whatever lease.onEvent says
    #[arg(long)]
    pub(crate) no_exec: bool,
    /// Only issues starting with this prefix
    pub(crate) prefix: Option<String>,
}

/// Runs `git lease watch`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        since,
        interval,
        prefix,
        holder,
        mine,
        exec,
        no_exec,
    } = args;
    let holder = ctx.holder_filter(mine, holder)?;
    let configured = ctx.ledger.store().config_string(watch::exec::CONFIG_KEY);
    let on_event = watch::exec::chosen(exec, no_exec, configured);
    watch::watch_running(
        ctx,
        watch::WatchArgs {
            since,
            interval,
            prefix,
            holder,
        },
        on_event,
        out,
    )
}
