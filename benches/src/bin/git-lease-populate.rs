//! `git-lease-populate REPO N LIVE_PERCENT [refs|gc]`: writes N leases (`i0`..) into the
//! git repository REPO (created if needed) with `git fast-import`, from `lease.json` bytes made
//! by the library, `LIVE_PERCENT` of them live at `GIT_LEASE_NOW` (default: the benchmarks'
//! fixed clock). The refs go straight into packed-refs; then `git gc` runs unless `refs` is
//! given, and the counts are checked by listing through the library.

use std::path::Path;
use std::process::ExitCode;

use git_lease_bench::populate::{count_leases, parse_population, populate_git, Packing};

fn run(args: &[String]) -> Result<(), String> {
    let (repo, n, live, packing) = match args {
        [repo, n, live, rest @ ..] if rest.len() <= 1 => {
            let packing = match rest.first().map(String::as_str) {
                None | Some("gc") => Packing::Gc,
                Some("refs") => Packing::Refs,
                Some(other) => return Err(format!("packing must be refs or gc, not {other:?}")),
            };
            (repo, n, live, packing)
        }
        _ => return Err("usage: git-lease-populate REPO N LIVE_PERCENT [refs|gc]".into()),
    };
    let (n, live) = parse_population(n, live)?;
    let now = match std::env::var("GIT_LEASE_NOW") {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| "GIT_LEASE_NOW must be unix seconds".to_owned())?,
        Err(_) => git_lease_bench::NOW,
    };
    let repo = Path::new(repo);
    populate_git(repo, "i", n, live, now, packing).map_err(|e| e.to_string())?;
    let (all, live_now) = count_leases(repo, now).map_err(|e| e.to_string())?;
    if all as u64 != n {
        return Err(format!("expected {n} leases, the library lists {all}"));
    }
    println!("{}: {all} leases, {live_now} live", repo.display());
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("git-lease-populate: {e}");
            ExitCode::FAILURE
        }
    }
}
