//! The version of the git that git-lease runs, and which version each of its uses of git
//! needs: the one table of git's minimum versions ([`Need`]).
//!
//! The version is read once per process, by the first command that is about to run git
//! ([`require`]): work done in-process (claims in a repository with the files backend) never
//! pays a spawn for it. A git older than a need is refused before it runs, as bad usage
//! ([`Error::GitTooOld`], exit 2), with the version needed and the one found; a version that
//! cannot be read is no reason to refuse (git then says for itself what it cannot do).

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// A git version: its first three numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
    /// The patch level (0 for a release candidate or a build between releases: `2.45.0.rc1`
    /// previews 2.45.0, and what a release has is in its candidates).
    pub patch: u32,
}

impl Version {
    /// The version `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Version {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// Reads what `git --version` prints: `git version 2.39.5`, `git version
    /// 2.47.3.windows.1`, `git version 2.45.0.rc1`, `git version 2.39.3 (Apple Git-146)`.
    /// Returns the version and the word it was read from (`2.39.5`), or `None` when no
    /// `major.minor` can be read.
    pub fn parse(text: &str) -> Option<(Version, &str)> {
        let line = text.lines().next()?.trim();
        let word = match line.strip_prefix("git version ") {
            Some(rest) => rest.split_whitespace().next()?,
            None => line
                .split_whitespace()
                .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?,
        };
        // Each dot-separated part counts up to its first non-digit (`0-rc1` is 0); the first
        // part that does not start with a digit ends the version (`rc1`, `windows`).
        let mut numbers = word
            .split('.')
            .map(|part| {
                let digits =
                    part.len() - part.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                part[..digits].parse::<u32>().ok()
            })
            .take_while(Option::is_some)
            .flatten();
        let major = numbers.next()?;
        let minor = numbers.next()?;
        let patch = numbers.next().unwrap_or(0);
        Some((Version::new(major, minor, patch), word))
    }
}

/// The version as a need names it: `2.29` (`2.29.0`), `2.39.5`.
impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if self.patch != 0 {
            write!(f, ".{}", self.patch)?;
        }
        Ok(())
    }
}

/// What git-lease needs of git, each with the oldest git that has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// A remote's ledgers, read and written (`--remote`, `lease.remote`, `sync`, `watch
    /// --remote`): every fetch passes `--no-write-fetch-head` and `--no-auto-maintenance`,
    /// which git has from 2.29 (an older git refuses every read with its usage text).
    Remote,
    /// A write to a reftable repository (`extensions.refStorage=reftable`), whose refs are
    /// moved through git's own commands (they are read in-process): git has reftable from 2.45
    /// (an older one stops at the unknown repository extension).
    Reftable,
}

impl Need {
    /// Every need, in the table's order.
    pub const ALL: [Need; 2] = [Need::Remote, Need::Reftable];

    /// The oldest git that has it.
    pub const fn minimum(self) -> Version {
        match self {
            Need::Remote => Version::new(2, 29, 0),
            Need::Reftable => Version::new(2, 45, 0),
        }
    }

    /// What needs it, as a message says it: `this needs git 2.29 or newer for <purpose>`.
    pub const fn purpose(self) -> &'static str {
        match self {
            Need::Remote => "--remote and sync",
            Need::Reftable => "a reftable repository",
        }
    }
}

/// Returns the need among `needs` that `found` falls short of, the one with the highest
/// minimum when several do (so the message names the version that would do for all).
pub fn unmet(found: Version, needs: &[Need]) -> Option<Need> {
    needs
        .iter()
        .copied()
        .filter(|need| found < need.minimum())
        .max_by_key(|need| need.minimum())
}

/// The git `PATH` finds, as `git --version` described it.
#[derive(Clone, Debug)]
struct Found {
    version: Version,
    /// The version as git printed it (`2.47.3.windows.1`).
    shown: String,
}

/// What `git --version` said, read once per process (`None`: it could not run, or said
/// nothing readable).
static FOUND: OnceLock<Option<Found>> = OnceLock::new();

fn found() -> Option<&'static Found> {
    FOUND
        .get_or_init(|| {
            let out = Command::new("git")
                .arg("--version")
                .env(super::STARTED_BY, std::process::id().to_string())
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|out| out.status.success())?;
            let text = String::from_utf8_lossy(&out.stdout);
            let (version, shown) = Version::parse(&text)?;
            Some(Found {
                version,
                shown: shown.to_owned(),
            })
        })
        .as_ref()
}

/// Checks that the git on `PATH` has every one of `needs`, reading its version the first time
/// in this process. Returns [`Error::GitTooOld`] for the highest need it falls short of; a
/// version that cannot be read passes.
pub fn require(needs: &[Need]) -> Result<()> {
    let Some(found) = found() else {
        return Ok(());
    };
    match unmet(found.version, needs) {
        Some(need) => Err(too_old(need, &found.shown)),
        None => Ok(()),
    }
}

/// The error of a git that lacks `need`, as git itself showed it (its diagnostics name what
/// it does not know): the version found if it was read, else that it could not be.
pub fn lacking(need: Need) -> Error {
    let shown = found().map_or("a git whose version could not be read", |f| &f.shown);
    too_old(need, shown)
}

fn too_old(need: Need, found: &str) -> Error {
    Error::GitTooOld {
        needed: need.minimum().to_string(),
        purpose: need.purpose(),
        found: found.to_owned(),
    }
}

/// Returns true when git's diagnostics say it does not know reftable: the repository's
/// `extensions.refStorage` is an extension it has never heard of.
pub fn lacks_reftable(stderr: &str) -> bool {
    let said = stderr.to_ascii_lowercase();
    said.contains("unknown repository extension") && said.contains("refstorage")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Option<(Version, &str)> {
        Version::parse(text)
    }

    #[test]
    fn every_spelling_of_a_version_is_read() {
        for (text, want, word) in [
            ("git version 2.39.5\n", Version::new(2, 39, 5), "2.39.5"),
            ("git version 2.47.3", Version::new(2, 47, 3), "2.47.3"),
            (
                "git version 2.47.3.windows.1\n",
                Version::new(2, 47, 3),
                "2.47.3.windows.1",
            ),
            (
                "git version 2.45.0.rc1\n",
                Version::new(2, 45, 0),
                "2.45.0.rc1",
            ),
            (
                "git version 2.45.0-rc1",
                Version::new(2, 45, 0),
                "2.45.0-rc1",
            ),
            (
                "git version 2.39.3 (Apple Git-146)\n",
                Version::new(2, 39, 3),
                "2.39.3",
            ),
            (
                "git version 2.46.0.123.gabcdef0\n",
                Version::new(2, 46, 0),
                "2.46.0.123.gabcdef0",
            ),
            ("git version 2.29\n", Version::new(2, 29, 0), "2.29"),
            ("git version 3.0.0\n", Version::new(3, 0, 0), "3.0.0"),
            (
                "  git version 2.28.0  \nmore\n",
                Version::new(2, 28, 0),
                "2.28.0",
            ),
            ("2.30.1", Version::new(2, 30, 1), "2.30.1"),
        ] {
            assert_eq!(parsed(text), Some((want, word)), "{text:?}");
        }
    }

    #[test]
    fn what_cannot_be_read_is_no_version() {
        for text in [
            "",
            "\n",
            "git version",
            "git version unknown",
            "git version 2",
            "git version .5",
            "git version 99999999999.1",
            "hello",
        ] {
            assert_eq!(parsed(text), None, "{text:?}");
        }
    }

    #[test]
    fn versions_compare_by_number_not_by_text() {
        assert!(Version::new(2, 9, 0) < Version::new(2, 29, 0));
        assert!(Version::new(2, 28, 9) < Version::new(2, 29, 0));
        assert!(Version::new(2, 100, 0) > Version::new(2, 45, 0));
        assert!(Version::new(3, 0, 0) > Version::new(2, 99, 99));
    }

    #[test]
    fn a_need_is_met_from_its_minimum_on() {
        let all = Need::ALL;
        assert_eq!(
            unmet(Version::new(2, 28, 0), &[Need::Remote]),
            Some(Need::Remote)
        );
        assert_eq!(unmet(Version::new(2, 29, 0), &[Need::Remote]), None);
        assert_eq!(unmet(Version::new(2, 39, 5), &all), Some(Need::Reftable));
        assert_eq!(
            unmet(Version::new(2, 44, 9), &[Need::Reftable]),
            Some(Need::Reftable)
        );
        assert_eq!(unmet(Version::new(2, 45, 0), &all), None);
        // Short of both: the message names the version that does for both.
        assert_eq!(unmet(Version::new(2, 20, 0), &all), Some(Need::Reftable));
        assert_eq!(unmet(Version::new(1, 0, 0), &[]), None);
    }

    #[test]
    fn the_message_names_the_version_needed_and_the_one_found() {
        assert_eq!(
            too_old(Need::Remote, "2.28.0").to_string(),
            "this needs git 2.29 or newer for --remote and sync (found 2.28.0)"
        );
        assert_eq!(
            too_old(Need::Reftable, "2.39.5").to_string(),
            "this needs git 2.45 or newer for a reftable repository (found 2.39.5)"
        );
        assert_eq!(too_old(Need::Reftable, "x").kind(), crate::ErrorKind::Usage);
        assert_eq!(Version::new(2, 39, 5).to_string(), "2.39.5");
    }

    #[test]
    fn git_without_reftable_is_told_by_its_words() {
        assert!(lacks_reftable(
            "fatal: unknown repository extension found:\n\trefstorage\n"
        ));
        assert!(lacks_reftable(
            "fatal: unknown repository extensions found:\n\trefstorage\n"
        ));
        assert!(!lacks_reftable(
            "fatal: unknown repository extension found:\n\tfoo\n"
        ));
        assert!(!lacks_reftable("fatal: not a git repository"));
    }
}
