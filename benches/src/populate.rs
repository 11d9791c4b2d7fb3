//! Builds lease repositories and databases of a given size quickly.
//!
//! Writing 100,000 leases through the library costs ~0.3–2 ms each on this disk (minutes), so
//! the git repository is written with `git fast-import` instead: the `lease.json` bytes come
//! from the library itself ([`git_lease::rules::acquire`] then [`git_lease::Lease::to_json`]),
//! so every commit is exactly one git-lease would have written for an acquire, and the result
//! is checked by listing it through the library.
//!
//! The refs are written straight into `packed-refs` (sorted, as `git pack-refs --all` writes
//! it), never as 100,000 loose files. That matters on this machine: its ext4 has no journal, and
//! without one the kernel refuses to reuse an inode for 60–300 s after it was freed, scanning
//! past every recently freed inode on each file creation. Creating and then packing (deleting)
//! 100k loose refs made every later file creation in the repository 3–5x slower for minutes:
//! an artifact of the set-up, not a cost of having 100k leases.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use chrono::{DateTime, Duration, Utc};
use git_lease::{rules, Claim, Holder, IssueId, Ttl};

use crate::sqlite_lease::is_live_index;

/// How to pack a populated repository.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// fast-import's pack and the packed refs only.
    Refs,
    /// Then `git gc --quiet` (repacks the objects).
    Gc,
}

/// Parses the command-line counts of a population: `N` leases, `LIVE_PERCENT` of them live.
pub fn parse_population(n: &str, live: &str) -> Result<(u64, u64), String> {
    let n: u64 = n
        .parse()
        .map_err(|_| format!("N must be a count, not {n:?}"))?;
    let live: u64 = live
        .parse()
        .ok()
        .filter(|p| *p <= 100)
        .ok_or_else(|| format!("LIVE_PERCENT must be 0..=100, not {live:?}"))?;
    Ok((n, live))
}

fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo);
    cmd
}

fn check(cmd: &mut Command) -> std::io::Result<()> {
    let status = cmd.status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("{cmd:?} failed: {status}")))
    }
}

/// Creates a git repository at `repo` (if it is not one) and writes `n` leases named
/// `{prefix}{i}`, `live_percent` of every 100 live at `now` (acquired a minute before,
/// expiring a day after) and the rest expired 30 s before `now`; then packs it.
///
/// The repository must not have a `packed-refs` file yet (it is written here).
pub fn populate_git(
    repo: &Path,
    prefix: &str,
    n: u64,
    live_percent: u64,
    now: i64,
    packing: Packing,
) -> std::io::Result<()> {
    if !repo.join(".git").exists() {
        check(Command::new("git").args(["init", "-q"]).arg(repo))?;
    }
    let git_dir = repo.join(".git");
    if git_dir.join("packed-refs").exists() {
        return Err(std::io::Error::other(format!(
            "{} already has packed refs",
            repo.display()
        )));
    }
    let marks = std::path::absolute(git_dir.join("populate-marks"))?;
    let at = DateTime::<Utc>::from_timestamp(now - 60, 0).expect("a valid instant");
    let mut child = git(repo)
        .args(["fast-import", "--quiet", "--done"])
        .arg(format!("--export-marks={}", marks.display()))
        .stdin(Stdio::piped())
        .spawn()?;
    let mut names = Vec::with_capacity(n as usize);
    {
        let mut out = BufWriter::with_capacity(1 << 20, child.stdin.take().expect("piped"));
        for i in 0..n {
            let issue = IssueId::new(&format!("{prefix}{i}")).map_err(std::io::Error::other)?;
            let ttl = if is_live_index(i, live_percent) {
                Duration::seconds(86_400 + 60)
            } else {
                Duration::seconds(30)
            };
            let claim = Claim::new(
                Holder::new(format!("agent-{}", i % 97)).map_err(std::io::Error::other)?,
                Ttl::For(ttl),
            );
            let lease = rules::acquire(&issue, None, &claim, at)
                .next
                .expect("a first acquire writes");
            let json = lease.to_json();
            let holder = lease.holder.as_deref().unwrap_or("git-lease");
            let expires = lease
                .expires_at
                .map(git_lease::time::format_instant)
                .unwrap_or_default();
            let message = format!(
                "{} {}: {} token {} until {}\n",
                lease.event, lease.issue, holder, lease.token, expires
            );
            let ts = lease.at.timestamp();
            // One scratch branch, reset before each commit so that every commit is a root; the
            // lease refs themselves are written to packed-refs below.
            write!(
                out,
                "reset refs/populate\ncommit refs/populate\nmark :{}\n\
                 author {holder} <> {ts} +0000\n\
                 committer git-lease <git-lease@localhost> {ts} +0000\ndata {}\n{message}\
                 M 100644 inline lease.json\ndata {}\n",
                i + 1,
                message.len(),
                json.len()
            )?;
            out.write_all(&json)?;
            out.write_all(b"\n")?;
            names.push(issue.ref_name());
        }
        out.write_all(b"done\n")?;
        out.flush()?;
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "git fast-import failed: {status}"
        )));
    }
    let mut ids = vec![String::new(); n as usize];
    for line in std::fs::read_to_string(&marks)?.lines() {
        let (mark, id) = line
            .split_once(' ')
            .ok_or_else(|| std::io::Error::other(format!("bad marks line {line:?}")))?;
        let mark: usize = mark
            .trim_start_matches(':')
            .parse()
            .map_err(std::io::Error::other)?;
        ids[mark - 1] = id.to_owned();
    }
    std::fs::remove_file(&marks)?;
    let sorted: BTreeMap<&str, &str> = names
        .iter()
        .map(String::as_str)
        .zip(ids.iter().map(String::as_str))
        .collect();
    let mut packed = BufWriter::new(std::fs::File::create(git_dir.join("packed-refs"))?);
    packed.write_all(b"# pack-refs with: peeled fully-peeled sorted \n")?;
    for (name, id) in sorted {
        writeln!(packed, "{id} {name}")?;
    }
    packed.flush()?;
    drop(packed);
    check(git(repo).args(["update-ref", "-d", "refs/populate"]))?;
    if packing == Packing::Gc {
        check(git(repo).args(["gc", "--quiet"]))?;
    }
    Ok(())
}

/// Counts the leases of `repo` through the library: `(all, live at now)`.
pub fn count_leases(repo: &Path, now: i64) -> Result<(usize, usize), git_lease::Error> {
    let ledger = git_lease::Ledger::open(repo)?;
    let now = DateTime::<Utc>::from_timestamp(now, 0).expect("a valid instant");
    let all = ledger.list()?;
    let live = all
        .iter()
        .filter(|e| git_lease::is_live(e.current(), now))
        .count();
    Ok((all.len(), live))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_populated_repository_reads_back_through_the_library() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r");
        populate_git(&repo, "p", 300, 80, crate::NOW, Packing::Refs).unwrap();
        assert_eq!(count_leases(&repo, crate::NOW).unwrap(), (300, 240));
        // And the library can take the next tenure on top of a populated one.
        let ledger = git_lease::Ledger::open(&repo).unwrap();
        let now = DateTime::<Utc>::from_timestamp(crate::NOW, 0).unwrap();
        let issue = IssueId::new("p99").unwrap(); // expired (99 % 100 >= 80)
        let r = ledger
            .acquire(
                &issue,
                &Claim::new(Holder::new("bob").unwrap(), Ttl::parse("1h").unwrap()),
                now,
            )
            .unwrap();
        assert_eq!(r.lease().unwrap().token, 2);
    }
}
