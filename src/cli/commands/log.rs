//! `git lease log`: one ledger, newest event first.

use std::io::Write;

use crate::cli::output::json::LogView;
use git_lease::Error;

use crate::cli::output::json::json_line;
use crate::cli::output::log_line;
use crate::cli::{exit, Context, Failure};

// The arguments of `log`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The issue id or a unique prefix
    pub(crate) issue: String,
}

/// Runs `git lease log`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { issue } = args;
    let target = ctx.backend()?;
    let issue = target.resolve(&issue)?;
    let entries = target.log(&issue)?;
    if entries.is_empty() {
        return Err(Error::NoSuchLease(issue.to_string()).into());
    }
    if ctx.json {
        let views: Vec<LogView> = entries.iter().map(LogView::from).collect();
        json_line(out, &views)?;
    } else {
        for e in &entries {
            writeln!(out, "{}", log_line(e))?;
        }
    }
    Ok(exit::OK)
}
