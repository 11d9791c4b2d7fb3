//! `git lease show`: one lease as it stands now.

use std::io::Write;

use crate::cli::output::json::LeaseView;
use git_lease::Error;

use crate::cli::output::json::json_line;
use crate::cli::{exit, output, Context, Failure};

// The arguments of `show`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The issue id or a unique prefix
    pub(crate) issue: String,
}

/// Runs `git lease show`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { issue } = args;
    let now = ctx.now;
    let target = ctx.backend()?;
    let issue = target.resolve(&issue)?;
    let entry = target.current(&issue)?;
    let Some(entry) = entry else {
        return Err(Error::NoSuchLease(issue.to_string()).into());
    };
    let view = LeaseView::new(issue.as_str(), Some(&entry), now);
    if ctx.json {
        json_line(out, &view)?;
    } else {
        write!(out, "{}", output::show(&view, Some(&entry), now))?;
    }
    Ok(exit::OK)
}
