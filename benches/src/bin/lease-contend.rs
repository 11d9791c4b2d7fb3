//! `lease-contend (git REPO | sqlite DB) ISSUE HOLDER OPS`: one contending worker.
//!
//! Loops OPS times: acquire ISSUE for HOLDER; if that started a tenure, release it. Prints one
//! line `token N` for each tenure won, then a summary line
//! `summary attempts=A won=W held=H errors=E transitions=T`. Several of these processes started
//! together on one issue measure transitions per second under contention; the printed tokens
//! (and, for git, the chain read back with `git log`) must never repeat.
//! The clock is the system clock; `SQLITE_LEASE_SYNC` picks NORMAL (default) or FULL.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use chrono::Utc;
use git_lease::{Claim, Ending, Holder, IssueId, Ledger, Outcome, Ttl};
use git_lease_bench::sqlite_lease::{self, SqliteLedger, Sync};

#[derive(Default)]
struct Tally {
    attempts: u64,
    won: u64,
    held: u64,
    errors: u64,
    transitions: u64,
    tokens: Vec<u64>,
}

/// Loops `ops` times over `ledger`: `acquire` (the token of a tenure it started, `None` if
/// it did not start one); after a won tenure, `release` (whether it wrote).
fn contend<L, E: std::fmt::Display>(
    ledger: &mut L,
    ops: u64,
    acquire: impl Fn(&mut L) -> Result<Option<u64>, E>,
    release: impl Fn(&mut L) -> Result<bool, E>,
) -> Tally {
    let mut t = Tally::default();
    for _ in 0..ops {
        t.attempts += 1;
        match acquire(ledger) {
            Ok(Some(token)) => {
                t.won += 1;
                t.transitions += 1;
                t.tokens.push(token);
                match release(ledger) {
                    Ok(true) => t.transitions += 1,
                    Ok(false) => {}
                    Err(e) => {
                        t.errors += 1;
                        eprintln!("release: {e}");
                    }
                }
            }
            Ok(None) => t.held += 1,
            Err(e) => {
                t.errors += 1;
                eprintln!("acquire: {e}");
            }
        }
    }
    t
}

fn git(repo: &str, issue: &str, holder: &str, ops: u64) -> Result<Tally, String> {
    let mut ledger = Ledger::open(Path::new(repo)).map_err(|e| e.to_string())?;
    let issue = IssueId::new(issue).map_err(|e| e.to_string())?;
    let holder = Holder::new(holder).map_err(|e| e.to_string())?;
    let claim = Claim::new(holder.clone(), Ttl::parse("1h").map_err(|e| e.to_string())?);
    Ok(contend(
        &mut ledger,
        ops,
        |ledger| {
            let r = ledger.acquire(&issue, &claim, Utc::now())?;
            Ok::<_, git_lease::Error>(
                (r.outcome == Outcome::Acquired && r.wrote)
                    .then(|| r.lease().map_or(0, |l| l.token)),
            )
        },
        |ledger| {
            Ok(ledger
                .release(&issue, &holder, Ending::Release, Utc::now())?
                .wrote)
        },
    ))
}

fn sqlite(db: &str, issue: &str, holder: &str, ops: u64) -> Result<Tally, String> {
    let sync = match std::env::var("SQLITE_LEASE_SYNC") {
        Ok(s) => Sync::parse(&s).ok_or("SQLITE_LEASE_SYNC must be normal or full")?,
        Err(_) => Sync::Normal,
    };
    let mut ledger = SqliteLedger::open(Path::new(db), sync).map_err(|e| e.to_string())?;
    Ok(contend(
        &mut ledger,
        ops,
        |ledger| {
            let r = ledger.acquire(issue, holder, Some(3600), Utc::now().timestamp())?;
            Ok::<_, sqlite_lease::Error>(
                (r.outcome == sqlite_lease::Outcome::Acquired && r.wrote)
                    .then(|| r.row.map_or(0, |r| r.token as u64)),
            )
        },
        |ledger| Ok(ledger.release(issue, holder, Utc::now().timestamp())?.wrote),
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [kind, path, issue, holder, ops] => match ops.parse::<u64>() {
            Ok(ops) => match kind.as_str() {
                "git" => git(path, issue, holder, ops),
                "sqlite" => sqlite(path, issue, holder, ops),
                _ => Err("the kind is git or sqlite".into()),
            },
            Err(_) => Err(format!("OPS must be a count, not {ops:?}")),
        },
        _ => Err("usage: lease-contend (git REPO | sqlite DB) ISSUE HOLDER OPS".into()),
    };
    match result {
        Ok(t) => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            for tok in &t.tokens {
                let _ = writeln!(out, "token {tok}");
            }
            let _ = writeln!(
                out,
                "summary attempts={} won={} held={} errors={} transitions={}",
                t.attempts, t.won, t.held, t.errors, t.transitions
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lease-contend: {e}");
            ExitCode::FAILURE
        }
    }
}
