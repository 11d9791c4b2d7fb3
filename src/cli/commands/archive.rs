//! `git lease archive`: fold free, quiet ledgers into the archive (docs/FORMAT.md, "The
//! archive"), so that the refs a claim touches and a server advertises follow the live
//! leases, not the history.

use std::io::Write;

use git_lease::archive::DEFAULT_QUIET;
use git_lease::{Error, Ttl};

use crate::cli::output::json::json_line;
use crate::cli::{exit, Context, Failure};

// The arguments of `archive`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Fold only ledgers whose last event is at least this old: 90s, 12h, 30d
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_QUIET)]
    pub(crate) quiet_for: String,
    /// Say what would be folded; write nothing
    #[arg(long, short = 'n')]
    pub(crate) dry_run: bool,
    /// Name every ledger folded, with its token (by default only how many)
    #[arg(long, short = 'v')]
    pub(crate) verbose: bool,
}

/// Runs `git lease archive`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        quiet_for,
        dry_run,
        verbose,
    } = args;
    let quiet = match Ttl::parse(&quiet_for)? {
        Ttl::For(d) => d,
        Ttl::Never => {
            return Err(Error::InvalidTtl {
                input: quiet_for,
                reason: "a ledger is folded after a while; `never` folds nothing".into(),
            }
            .into())
        }
    };
    let report = ctx.ledger.fold(quiet, ctx.now, dry_run)?;
    if ctx.json {
        json_line(out, &report)?;
        return Ok(exit::OK);
    }
    let verb = if dry_run { "would fold" } else { "folded" };
    // A first fold of a long history names tens of thousands: only when asked.
    for f in report.folded.iter().filter(|_| verbose) {
        writeln!(out, "{verb} {} (token {})", f.issue, f.token)?;
    }
    for issue in &report.moved_meanwhile {
        writeln!(out, "kept {issue}: claimed while it was being folded")?;
    }
    writeln!(
        out,
        "{verb} {} ledger(s) into refs/lease-archive, {} lease ref(s) {}, {} kept (live or not quiet for {quiet_for})",
        report.folded.len(),
        report.removed,
        if dry_run { "to remove" } else { "removed" },
        report.kept
    )?;
    Ok(exit::OK)
}
