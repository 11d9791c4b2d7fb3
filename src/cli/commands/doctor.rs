//! `git lease doctor`: check a remote as the engine it will be, and this clone beside it.

use std::io::Write;

use git_lease::doctor::{self, Status};
use git_lease::remote::Remote;

use crate::cli::output::color::{paint, Tone};
use crate::cli::output::json::json_line;
use crate::cli::{exit, output, Context, Failure, HolderName};

// The arguments of `doctor`: `--holder` alone (it acts on no lease, so takes no secret),
// said as what it is compared with.
#[derive(clap::Args, Debug)]
#[command(mut_arg("holder", |arg| arg.help(
    "Your holder name, compared with who the server says you are [default: config \
     lease.holder, then user.email]"
)))]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) holder: HolderName,
}

/// Runs `git lease doctor`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { holder, .. } = args;
    // As `sync` and `push`: --remote, lease.remote, then origin (when there is one); --local
    // checks this clone alone.
    let name = ctx.remote.clone().or_else(|| {
        let origin = ctx
            .ledger
            .store()
            .remote_names()
            .iter()
            .any(|r| r == "origin");
        (origin && !ctx.local).then(|| "origin".to_owned())
    });
    let remote = name
        .as_deref()
        .map(|n| Remote::new(&ctx.ledger, n))
        .transpose()?;
    let holder = ctx.holder(&holder).ok();
    let report = doctor::examine(&ctx.ledger, remote.as_ref(), holder.as_ref(), ctx.now)?;
    if ctx.json {
        json_line(out, &report)?;
    } else {
        for check in &report.checks {
            let (word, tone) = match check.status {
                Status::Ok => ("ok  ", Tone::Good),
                Status::Warn => ("warn", Tone::Notice),
                Status::Fail => ("fail", Tone::Bad),
            };
            let fix = check
                .fix
                .as_deref()
                .map(|f| format!("; fix: {}", output::printable(f)))
                .unwrap_or_default();
            writeln!(
                out,
                "{} {}: {}{fix}",
                paint(word, tone),
                check.name,
                output::printable(&check.message)
            )?;
        }
    }
    Ok(if report.ok { exit::OK } else { exit::FAILURE })
}
