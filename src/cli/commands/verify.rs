//! `git lease verify`: audit ledgers from their roots.

use std::io::Write;

use crate::cli::output::json::json_line;
use crate::cli::{exit, progress, Context, Failure};

// The arguments of `verify`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Issue ids or unique prefixes [default: every ledger]
    pub(crate) issues: Vec<String>,
}

/// Runs `git lease verify`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args { issues } = args;
    let target = ctx.backend()?;
    let (refs, diverged) = target.tips()?;
    let refs = if issues.is_empty() {
        refs
    } else {
        let mut chosen = Vec::new();
        for prefix in &issues {
            let id =
                git_lease::ledger::resolve_among(prefix, refs.iter().map(|(n, _)| n.as_str()))?;
            if let Some(r) = refs.iter().find(|(n, _)| n == id.as_str()) {
                chosen.push(r.clone());
            }
        }
        chosen
    };
    // Locally, the archive too: its folds judged, the ledgers only it holds audited like any,
    // and every ledger it also records continuing from its archived tip.
    let (refs, archive_findings) = if ctx.remote.is_none() && issues.is_empty() {
        let (only_archived, findings) = git_lease::archive::audit(ctx.ledger.store(), &refs)?;
        let mut all = refs;
        all.extend(only_archived);
        (all, findings)
    } else {
        (refs, Vec::new())
    };
    let bar = progress::Progress::new(refs.len() as u64, "verifying");
    let reading = ctx.ledger.reading();
    let judgement = git_lease::step::Judgement::reader(reading.as_ref());
    let mut audit =
        git_lease::verify::audit(ctx.ledger.store(), &refs, judgement, &mut |done, _| {
            bar.set_position(done as u64)
        });
    if !archive_findings.is_empty() {
        audit.findings.extend(archive_findings);
        audit.clean = false;
    }
    // A remote ledger that went back on what this clone verified is a finding too,
    // though its own chain may be clean.
    for d in diverged {
        audit.findings.push(git_lease::verify::Finding {
            issue: d.issue,
            commit: d.remote.unwrap_or_else(|| "(deleted)".into()),
            rule: git_lease::verify::Rule::FastForward,
            detail: format!("remote ledger {}: {}", d.divergence.as_str(), d.detail),
        });
        audit.clean = false;
    }
    audit.sort();
    bar.finish_and_clear();
    if ctx.json {
        json_line(out, &audit)?;
    } else {
        for f in &audit.findings {
            writeln!(out, "{f}")?;
        }
        if audit.clean {
            writeln!(
                out,
                "ok: {} ledgers, {} commits, every step follows the rules",
                audit.ledgers, audit.commits
            )?;
        } else {
            writeln!(
                out,
                "{} finding(s) in {} ledgers ({} commits checked)",
                audit.findings.len(),
                audit.ledgers,
                audit.commits
            )?;
        }
    }
    Ok(if audit.clean { exit::OK } else { exit::FAILURE })
}
