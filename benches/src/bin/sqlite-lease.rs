//! `sqlite-lease`: the SQLite peer as a command line, one operation per process.
//!
//! ```text
//! sqlite-lease DB acquire ISSUE HOLDER [TTL_SECS]   (default TTL 3600; 0 = open-ended)
//! sqlite-lease DB release ISSUE HOLDER
//! sqlite-lease DB list                              (live leases, one per line)
//! sqlite-lease DB populate N LIVE_PERCENT           (also: sqlite-lease populate DB N LIVE_PERCENT)
//! sqlite-lease DB forget ISSUE                      (benchmark helper: delete the row)
//! ```
//!
//! The clock is `GIT_LEASE_NOW` (unix seconds) when set, else the system clock; `synchronous` is
//! `SQLITE_LEASE_SYNC` (`normal`, the default, or `full`). Exit codes as git-lease: 0 done,
//! 1 failure, 2 usage, 3 refused (held, not holder).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use git_lease_bench::populate::parse_population;
use git_lease_bench::sqlite_lease::{Outcome, Report, SqliteLedger, Sync};

const USAGE: &str = "usage: sqlite-lease DB (acquire ISSUE HOLDER [TTL_SECS] | release ISSUE HOLDER | list | populate N LIVE_PERCENT | forget ISSUE)";

fn now() -> Result<i64, String> {
    match std::env::var("GIT_LEASE_NOW") {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("GIT_LEASE_NOW must be unix seconds, not {s:?}")),
        Err(_) => Ok(chrono::Utc::now().timestamp()),
    }
}

fn sync() -> Result<Sync, String> {
    match std::env::var("SQLITE_LEASE_SYNC") {
        Ok(s) => Sync::parse(&s)
            .ok_or_else(|| format!("SQLITE_LEASE_SYNC must be normal or full, not {s:?}")),
        Err(_) => Ok(Sync::Normal),
    }
}

fn print_report(issue: &str, report: &Report) -> u8 {
    let token = report.row.as_ref().map_or(0, |r| r.token);
    let holder = report
        .row
        .as_ref()
        .and_then(|r| r.holder.clone())
        .unwrap_or_else(|| "-".into());
    println!(
        "{} {issue} holder {holder} token {token}",
        report.outcome.as_str()
    );
    match report.outcome {
        Outcome::Held | Outcome::NotHolder => 3,
        _ => 0,
    }
}

fn run(args: &[String]) -> Result<u8, String> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if args.first() == Some(&"populate") && args.len() >= 2 {
        args.swap(0, 1);
    }
    let [db, command, rest @ ..] = args.as_slice() else {
        return Err(USAGE.into());
    };
    let mut ledger = SqliteLedger::open(Path::new(db), sync()?).map_err(|e| e.to_string())?;
    let now = now()?;
    let db_err = |e: rusqlite::Error| e.to_string();
    match (*command, rest) {
        ("acquire", [issue, holder, ttl @ ..]) if ttl.len() <= 1 => {
            let ttl = match ttl.first() {
                None => Some(3600),
                Some(t) => match t.parse::<i64>() {
                    Ok(0) => None,
                    Ok(s) if s > 0 => Some(s),
                    _ => {
                        return Err(format!(
                            "TTL_SECS must be a whole number of seconds, not {t:?}"
                        ))
                    }
                },
            };
            let report = ledger.acquire(issue, holder, ttl, now).map_err(db_err)?;
            Ok(print_report(issue, &report))
        }
        ("release", [issue, holder]) => {
            let report = ledger.release(issue, holder, now).map_err(db_err)?;
            Ok(print_report(issue, &report))
        }
        ("list", []) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let mut failed = None;
            ledger
                .for_each_live(now, |r| {
                    if failed.is_none() {
                        if let Err(e) = writeln!(
                            out,
                            "{}\t{}\t{}\t{}\t{}",
                            r.issue,
                            r.holder.as_deref().unwrap_or("-"),
                            r.token,
                            r.acquired_at.unwrap_or(0),
                            r.expires_at
                                .map_or_else(|| "never".to_owned(), |e| e.to_string())
                        ) {
                            failed = Some(e);
                        }
                    }
                })
                .map_err(db_err)?;
            match failed {
                Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
                _ => {
                    let _ = out.flush();
                    Ok(0)
                }
            }
        }
        ("populate", [n, live]) => {
            let (n, live) = parse_population(n, live)?;
            ledger.populate("i", n, live, now).map_err(db_err)?;
            Ok(0)
        }
        ("forget", [issue]) => {
            ledger.forget(issue).map_err(db_err)?;
            Ok(0)
        }
        _ => Err(USAGE.into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) if e == USAGE => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("sqlite-lease: {e}");
            ExitCode::from(1)
        }
    }
}
