//! `git lease timeline`: who held what, when, as one self-contained HTML page (or, with
//! `--json`, its data as one JSON document).

use std::io::Write;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use git_lease::timeline::{self, html, Filter, Order};
use git_lease::Error;

use crate::cli::output::{self, report_diverged};
use crate::cli::{exit, Context, Failure};

// The arguments of `timeline`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Only issues starting with this prefix
    pub(crate) prefix: Option<String>,
    /// Only tenures held at or after this instant (unix seconds, RFC 3339) or duration ago
    /// [default: the first tenure's start]
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only tenures begun by this instant or duration ago [default: now]
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Only this holder's tenures
    #[arg(long, conflicts_with = "mine")]
    pub(crate) holder: Option<String>,
    /// Only your own tenures (GIT_LEASE_HOLDER, then lease.holder, then user.email)
    #[arg(long)]
    pub(crate) mine: bool,
    /// Row order: issue (natural: 2 before 10) or recent (most recent activity first)
    #[arg(long, value_name = "ORDER", default_value = "issue", value_parser = ["issue", "recent"])]
    pub(crate) order: String,
    /// The most rows the page draws, the others counted in its summary and named in a note
    /// (0: all)
    #[arg(long, value_name = "N", default_value_t = html::DEFAULT_LIMIT)]
    pub(crate) limit: usize,
    /// Where to write: a file, or - for stdout [default: lease-timeline.html; with --json,
    /// stdout]
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

/// Runs `git lease timeline`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let holder = ctx.holder_filter(args.mine, args.holder)?;
    let filter = Filter {
        prefix: args.prefix,
        since: args
            .since
            .map(|s| instant("--since", &s, ctx.now))
            .transpose()?,
        until: args
            .until
            .map(|s| instant("--until", &s, ctx.now))
            .transpose()?,
        holder,
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if until < since {
            return Err(Error::InvalidInput("--until is before --since".into()).into());
        }
    }
    let order = match args.order.as_str() {
        "recent" => Order::Recent,
        _ => Order::Issue,
    };
    let target = ctx.backend()?;
    let (refs, diverged) = target.tips()?;
    let observe = |e| ctx.ledger.observe(e);
    let timeline = timeline::build(ctx.ledger.store(), &refs, &filter, order, ctx.now, &observe)?;
    let output = args
        .output
        .unwrap_or_else(|| PathBuf::from(if ctx.json { "-" } else { "lease-timeline.html" }));
    let to_stdout = output.as_os_str() == "-";
    let write = |sink: &mut dyn Write| -> std::io::Result<()> {
        if ctx.json {
            serde_json::to_writer(&mut *sink, &timeline)?;
            sink.write_all(b"\n")
        } else {
            let options = html::Options {
                limit: args.limit,
                source: ctx.remote.as_deref().map(git_lease::redact::url),
            };
            html::render(&timeline, &options, sink)
        }
    };
    if to_stdout {
        write(out)?;
    } else {
        let failed = |e: std::io::Error| Error::Io {
            context: format!("cannot write {}", output.display()),
            source: e,
        };
        let file = std::fs::File::create(&output).map_err(failed)?;
        let mut file = std::io::BufWriter::with_capacity(256 * 1024, file);
        write(&mut file)
            .and_then(|()| file.flush())
            .map_err(failed)?;
        if !ctx.json {
            writeln!(out, "{}", wrote(&output, &timeline.summary, args.limit))?;
        }
    }
    report_diverged(ctx, &diverged, out)?;
    output::report_unreadable(&timeline.unreadable, out)?;
    Ok(if diverged.is_empty() && timeline.unreadable.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    })
}

/// What the page written to `output` shows of `summary`, with at most `limit` issues drawn
/// (0: all).
fn wrote(output: &std::path::Path, summary: &timeline::Summary, limit: usize) -> String {
    let drawn = if limit == 0 {
        summary.issues
    } else {
        summary.issues.min(limit)
    };
    let count = |n: usize, what: &str| match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    format!(
        "wrote {}: {} ({drawn} drawn), {}, {} live",
        output.display(),
        count(summary.issues, "issue"),
        count(summary.tenures, "tenure"),
        summary.live
    )
}

/// Parses `--since` or `--until`: an instant (unix seconds or RFC 3339), or a duration before
/// `now`.
fn instant(option: &str, text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
    if let Ok(at) = git_lease::time::parse_instant(text) {
        return Ok(at);
    }
    let ago = humantime::parse_duration(text.trim()).map_err(|_| {
        Error::InvalidInput(format!(
            "invalid {option} {text:?}: give an instant (unix seconds or RFC 3339) or a duration before now (10m, 2h)"
        ))
    })?;
    chrono::Duration::from_std(ago)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .ok_or_else(|| Error::InvalidInput(format!("invalid {option} {text:?}: too long ago")))
}
