//! `acquire --any` and `run --any`: claim exactly one free issue of several candidates.

use std::io::{BufRead, Write};

use crate::cli::output::json::ReportView;
use git_lease::one_of_many::{fresh_rng, AnyReport, Order};
use git_lease::{Claim, Error, IssueId, Outcome};

use super::output::json::json_line;
use super::output::report_diverged;
use super::{exit, output, Context, Failure};

/// Returns the candidates named by `args`, in order: each argument is an exact issue id, and
/// `-` stands for the lines of standard input (one id a line; blank lines are skipped).
pub(crate) fn candidates(args: &[String]) -> Result<Vec<IssueId>, Error> {
    let mut out = Vec::with_capacity(args.len());
    let mut read_stdin = false;
    for arg in args {
        if arg != "-" {
            out.push(IssueId::new(arg)?);
            continue;
        }
        if read_stdin {
            continue;
        }
        read_stdin = true;
        for line in std::io::stdin().lock().lines() {
            let line = line.map_err(|e| Error::Io {
                context: "cannot read candidates from standard input".into(),
                source: e,
            })?;
            let id = line.trim();
            if !id.is_empty() {
                out.push(IssueId::new(id)?);
            }
        }
    }
    Ok(out)
}

/// The order `--ordered` asks for.
pub(crate) fn order(ordered: bool) -> Order {
    if ordered {
        Order::Priority
    } else {
        Order::Random
    }
}

/// Claims one of `candidates` for `claim` at `now`, tried in `order`, where this command
/// operates: the local refs, or the remote.
pub(crate) fn claim(
    ctx: &Context,
    candidates: &[IssueId],
    claim: &Claim,
    now: chrono::DateTime<chrono::Utc>,
    order: Order,
) -> Result<AnyReport, Error> {
    // A round of `run --any --wait` judges a remote's new commits at its own instant.
    ctx.ledger.set_reader_clock(now);
    ctx.backend()?
        .acquire_any(candidates, claim, now, order, &mut fresh_rng())
}

/// Says that no candidate was free, in one line.
pub(crate) fn none_free(report: &AnyReport) -> String {
    let n = report.candidates;
    let what = if n == 1 { "candidate" } else { "candidates" };
    let none = if n == 1 { "the one" } else { "none of" };
    if n == 1 {
        format!("held: {none} {what} is not free")
    } else {
        format!("held: {none} {n} {what} is free")
    }
}

/// Prints the answer of `acquire --any`: the claimed issue as `acquire` prints it (with
/// `candidates` and `attempts` added in JSON), or that none was free (exit 3).
pub(crate) fn emit(
    ctx: &Context,
    report: &AnyReport,
    secret: Option<&str>,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let code = match &report.claimed {
        Some(claimed) => {
            if ctx.json {
                #[derive(serde::Serialize)]
                struct Claimed<'a> {
                    #[serde(flatten)]
                    report: ReportView,
                    candidates: usize,
                    attempts: u32,
                    lost: u32,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    passed_over: Option<Vec<&'a str>>,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    moved_from: Option<Vec<&'a str>>,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    secret: Option<&'a str>,
                }
                json_line(
                    out,
                    &Claimed {
                        report: ReportView::new(claimed, ctx.now),
                        candidates: report.candidates,
                        attempts: report.attempts,
                        lost: report.lost,
                        passed_over: (report.order == Order::Priority)
                            .then(|| report.passed_over.iter().map(IssueId::as_str).collect()),
                        moved_from: (report.order == Order::Priority)
                            .then(|| report.moved_from.iter().map(IssueId::as_str).collect()),
                        secret,
                    },
                )?;
            } else {
                writeln!(out, "{}", output::report_line(claimed, ctx.now))?;
                if let Some(secret) = secret {
                    writeln!(out, "{}", output::session_secret(secret))?;
                }
            }
            exit::for_outcome(claimed.outcome)
        }
        None => {
            if ctx.json {
                #[derive(serde::Serialize)]
                struct NoneFree {
                    outcome: Outcome,
                    wrote: bool,
                    issue: Option<String>,
                    candidates: usize,
                    attempts: u32,
                }
                json_line(
                    out,
                    &NoneFree {
                        outcome: Outcome::Held,
                        wrote: false,
                        issue: None,
                        candidates: report.candidates,
                        attempts: report.attempts,
                    },
                )?;
            } else {
                writeln!(out, "{}", none_free(report))?;
            }
            exit::REFUSED
        }
    };
    report_diverged(ctx, &report.diverged, out)?;
    Ok(code)
}
