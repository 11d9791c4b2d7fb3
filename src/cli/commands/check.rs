//! `git lease check`: the fencing check of one exact issue and token.

use std::io::Write;

use crate::cli::output::json::LeaseView;
use git_lease::{rules, IssueId};

use crate::cli::output::color;
use crate::cli::output::json::json_line;
use crate::cli::{exit, output, Context, Failure};

// The arguments of `check`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The exact issue id
    pub(crate) issue: String,
    /// The fencing token to check
    #[arg(long)]
    pub(crate) token: u64,
    /// Also require this holder
    #[arg(long)]
    pub(crate) holder: Option<String>,
}

/// Runs `git lease check`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        issue,
        token,
        holder,
    } = args;
    let now = ctx.now;
    let target = ctx.backend()?;
    // Exact ids only: a prefix is never a fencing answer.
    let issue = IssueId::new(&issue)?;
    let entry = target.current(&issue)?;
    let verdict = rules::check(
        entry.as_ref().map(git_lease::Entry::current),
        token,
        holder.as_deref(),
        now,
    );
    if ctx.json {
        #[derive(serde::Serialize)]
        struct CheckView {
            ok: bool,
            checked_token: u64,
            reason: Option<String>,
            #[serde(flatten)]
            lease: LeaseView,
        }
        json_line(
            out,
            &CheckView {
                ok: verdict.is_ok(),
                checked_token: token,
                reason: verdict.as_ref().err().map(|w| w.to_string()),
                lease: LeaseView::new(issue.as_str(), entry.as_ref(), now),
            },
        )?;
    } else {
        let (line, tone) = match &verdict {
            Ok(()) => (
                format!(
                    "ok: token {token} is the live tenure of {issue} (held by {})",
                    output::printable(
                        entry
                            .as_ref()
                            .and_then(|e| e.lease.holder.as_deref())
                            .unwrap_or("?")
                    )
                ),
                color::Tone::Good,
            ),
            Err(why) => (
                format!("refused: token {token} for {issue}: {why}"),
                color::Tone::Bad,
            ),
        };
        writeln!(out, "{}", color::paint_head(&line, tone))?;
    }
    Ok(if verdict.is_ok() {
        exit::OK
    } else {
        exit::REFUSED
    })
}
