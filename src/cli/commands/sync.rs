//! `git lease sync`: replicate a remote's ledgers here, fast-forward only and verified.

use std::io::Write;

use git_lease::remote::Remote;
use git_lease::IssueId;

use crate::cli::output::json::json_line;
use crate::cli::{exit, output, progress, Context, Failure};

// The arguments of `sync`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The remote to copy from [default: --remote, lease.remote, then origin]
    pub(crate) remote_name: Option<String>,
    /// Replace these local ledgers, which diverged from the remote's (claims made here),
    /// by the remote's; each local one is kept as refs/lease-diverged/<issue>
    #[arg(long, value_name = "ISSUE", num_args = 1..)]
    pub(crate) adopt: Vec<String>,
    /// Also print a line per new or updated ledger (refusals are always printed)
    #[arg(short, long)]
    pub(crate) verbose: bool,
}

/// Runs `git lease sync`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        remote_name,
        adopt,
        verbose,
        ..
    } = args;
    sync(ctx, remote_name.as_deref(), &adopt, verbose, out)
}

fn sync(
    ctx: &Context,
    remote_name: Option<&str>,
    adopt: &[String],
    verbose: bool,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let name = remote_name
        .map(str::to_owned)
        .or_else(|| ctx.remote.clone())
        .unwrap_or_else(|| "origin".to_owned());
    for issue in adopt {
        IssueId::new(issue)?;
    }
    let remote = Remote::new(&ctx.ledger, &name)?;
    let bar = progress::Progress::new(0, "syncing");
    let report = git_lease::mirror::sync(&ctx.ledger, &remote, adopt, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    if ctx.json {
        json_line(out, &report)?;
    } else {
        write_report(&report, verbose, out)?;
    }
    Ok(if report.refused.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    })
}

/// Writes `report` as text: each ledger that moved (with `verbose`), was adopted, refused or
/// skipped, then the counts.
fn write_report(
    report: &git_lease::mirror::SyncReport,
    verbose: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if verbose {
        for m in &report.new {
            writeln!(
                out,
                "new      {} ({} commits verified)",
                output::printable(&m.issue),
                m.commits
            )?;
        }
        for m in &report.updated {
            writeln!(
                out,
                "updated  {} (+{} commits verified)",
                output::printable(&m.issue),
                m.commits
            )?;
        }
    }
    for a in &report.adopted {
        writeln!(
            out,
            "adopted  {}: the remote's ledger ({}) replaces this clone's, kept as {}",
            output::printable(&a.issue),
            a.to,
            output::printable(&a.kept)
        )?;
    }
    for r in &report.refused {
        writeln!(
            out,
            "refused  {}: {} (local {}, remote {})",
            output::printable(&r.issue),
            output::printable(&r.reason),
            r.local.as_deref().unwrap_or("none"),
            r.remote.as_deref().unwrap_or("none")
        )?;
    }
    for r in &report.skipped {
        writeln!(
            out,
            "skipped  {}: {} (remote {})",
            output::printable(&r.issue),
            output::printable(&r.reason),
            r.remote.as_deref().unwrap_or("none")
        )?;
    }
    let mut adopted = if report.adopted.is_empty() {
        String::new()
    } else {
        format!(", {} adopted", report.adopted.len())
    };
    if !report.skipped.is_empty() {
        adopted.push_str(&format!(", {} skipped", report.skipped.len()));
    }
    if !report.archived.is_empty() {
        adopted.push_str(&format!(", {} archived", report.archived.len()));
    }
    writeln!(
        out,
        "synced from {}: {} new, {} updated, {} unchanged, {} refused{adopted}",
        report.remote,
        report.new.len(),
        report.updated.len(),
        report.unchanged,
        report.refused.len()
    )?;
    Ok(())
}
