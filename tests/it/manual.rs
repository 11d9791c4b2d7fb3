//! The manual teaches what is true: every example on its pages runs as written and ends with
//! the exit status it claims, README.md's exit codes are the opening words of its own, it names
//! every environment variable git-lease reads, and its synopsis names every value.
//!
//! The examples, exit statuses and variables are the very tables the pages are made from
//! (`src/cli/pages.rs`, read here with `include!`).

use std::path::Path;

use crate::env::{self, TestRepo, BIN};

#[allow(dead_code)]
mod pages {
    include!("../../src/cli/pages.rs");
}

/// Writes every page into a scratch directory of `repo` and returns `(page, text)`, the text
/// with roff's escapes undone (`\-`, `\(aq`, `\*(Aq`, `\\`) and its font changes dropped.
fn installed_pages(repo: &TestRepo) -> Vec<(String, String)> {
    let dir = repo.scratch("man");
    repo.lease()
        .args(["man", "--install", dir.to_str().expect("a UTF-8 path")])
        .run()
        .ok();
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir.join("man1")).expect("man1") {
        let path = entry.expect("an entry").path();
        let roff = std::fs::read_to_string(&path).expect("a page");
        let name = path
            .file_stem()
            .and_then(|n| n.to_str())
            .expect("a page name")
            .to_owned();
        out.push((name, plain(&roff)));
    }
    out
}

/// `roff` as the text a reader sees, near enough to find a sentence in it.
fn plain(roff: &str) -> String {
    roff.replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
        .replace("\\-", "-")
        .replace("\\(aq", "'")
        .replace("\\*(Aq", "'")
        .replace("\\&", "")
        .replace("\\\\", "\\")
}

/// The page of `key` (`""`: `git lease`'s, else the subcommand's).
fn page<'a>(pages: &'a [(String, String)], key: &str) -> &'a str {
    let name = match key {
        "" => "git-lease".to_owned(),
        sub => format!("git-lease-{}", sub.replace(' ', "-")),
    };
    pages
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| text.as_str())
        .unwrap_or_else(|| panic!("no page {name}"))
}

/// A fresh repository for one page's examples: user.email alice@example.com, a bare
/// `../origin.git` as its remote `origin`, and `lease.remote .`.
fn example_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.git(&["config", "user.email", "alice@example.com"]);
    repo.git(&["config", "user.name", "Alice"]);
    let origin = repo.root().join("origin.git");
    repo.git(&[
        "init",
        "-q",
        "--bare",
        origin.to_str().expect("a UTF-8 path"),
    ]);
    repo.git(&["remote", "add", "origin", "../origin.git"]);
    repo.git(&["config", "lease.remote", "."]);
    repo
}

/// Runs `line` in bash in `repo`, with this build's `git-lease` first on `PATH` (so that
/// `git lease` runs it too); returns its exit status and what it printed.
fn shell(repo: &TestRepo, line: &str) -> (Option<i32>, String) {
    let bin_dir = Path::new(BIN).parent().expect("the binary has a directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = std::process::Command::new("bash");
    env::hermetic(&mut cmd, repo.home(), repo.root());
    let out = cmd
        .env("PATH", path)
        .args(["--norc", "--noprofile", "-c", line])
        .current_dir(repo.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run bash");
    let text = format!(
        "--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn every_example_of_the_manual_runs_as_written_and_is_on_its_page() {
    let pages = installed_pages(&TestRepo::new());
    for (key, examples) in pages::EXAMPLES {
        let text = page(&pages, key);
        assert!(
            text.contains(".SH EXAMPLES"),
            "no EXAMPLES on {key:?}'s page"
        );
        let repo = example_repo();
        for example in *examples {
            assert!(
                text.contains(example.line),
                "{key:?}'s page lacks {:?}",
                example.line
            );
            let (code, out) = shell(&repo, example.line);
            assert_eq!(
                code,
                Some(i32::from(example.exit)),
                "on {key:?}'s page: {}\n{out}",
                example.line
            );
        }
    }
    // Every visible subcommand's page has examples, but the hook's, which git runs.
    for (name, _) in &pages {
        let Some(sub) = name.strip_prefix("git-lease-") else {
            continue;
        };
        if sub.starts_with("hook") {
            continue;
        }
        assert!(
            pages::EXAMPLES.iter().any(|(key, _)| *key == sub),
            "no examples for {sub}"
        );
    }
}

/// The rows of README.md's "Exit codes" table, `(code, meaning)`, and the paragraph below
/// it, its lines joined.
fn readme_exit_codes() -> (Vec<(u8, String)>, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let section = readme
        .split("\n## Exit codes\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has an Exit codes section");
    let mut rows = Vec::new();
    let mut after = Vec::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        match cells.as_slice() {
            ["", code, meaning, ""] if code.parse::<u8>().is_ok() => {
                rows.push((code.parse().expect("a code"), (*meaning).to_owned()))
            }
            _ if line.starts_with('|') => {}
            _ => after.push(line.trim()),
        }
    }
    (rows, after.join(" ").trim().to_owned())
}

/// README.md gives every exit status of the manual, each meaning as the manual's own opening
/// words (the manual lists every case), and the manual's notes below the table.
#[test]
fn the_readmes_exit_codes_are_the_manuals_in_its_own_opening_words() {
    let (rows, after) = readme_exit_codes();
    let codes: Vec<u8> = rows.iter().map(|(code, _)| *code).collect();
    let manual: Vec<u8> = pages::EXIT_STATUS.iter().map(|(code, _)| *code).collect();
    assert_eq!(codes, manual);
    for ((code, short), (_, meaning)) in rows.iter().zip(pages::EXIT_STATUS) {
        assert!(
            meaning.starts_with(short.as_str()) && !short.is_empty(),
            "README.md's exit code {code} says {short:?}, which does not open the manual's {meaning:?}"
        );
        let words = short.split_whitespace().count();
        assert!(words <= 60, "README.md's exit code {code} is {words} words");
    }
    for note in pages::EXIT_STATUS_NOTES {
        assert!(after.contains(note), "README.md lacks {note:?} in\n{after}");
    }
    // On every page.
    let pages = installed_pages(&TestRepo::new());
    for (name, text) in &pages {
        let status = text
            .split(".SH \"EXIT STATUS\"")
            .nth(1)
            .unwrap_or_else(|| panic!("no EXIT STATUS on {name}"));
        for (code, meaning) in pages::EXIT_STATUS {
            let shown = meaning.replace('`', "");
            assert!(
                status.contains(&format!(".TP\n{code}\n{shown}")),
                "{name}: no {code} {shown:?}"
            );
        }
    }
}

#[test]
fn the_manual_names_every_environment_variable_git_lease_reads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut read = std::collections::BTreeSet::new();
    let mut todo = vec![root.join("src")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            for (at, _) in text.match_indices("\"GIT_LEASE_") {
                let name: String = text[at + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                read.insert(name);
            }
        }
    }
    // Set on the git commands git-lease starts, for itself: nothing a user sets.
    read.remove("GIT_LEASE_STARTED_BY");
    // Set by doctor for its probe's own pre-push hook, and read there alone.
    read.retain(|name| !name.starts_with("GIT_LEASE_DOCTOR_"));
    assert!(read.len() >= 6, "{read:?}");
    let named: Vec<&str> = pages::ENVIRONMENT.iter().map(|v| v.name).collect();
    let pages = installed_pages(&TestRepo::new());
    let top = page(&pages, "");
    let environment = top
        .split(".SH ENVIRONMENT")
        .nth(1)
        .expect("an ENVIRONMENT section");
    for name in &read {
        assert!(
            named.contains(&name.as_str()),
            "{name} is not in ENVIRONMENT"
        );
        assert!(
            environment.contains(name.as_str()),
            "{name} not on the page"
        );
    }
    // What a run's command sees, on run's page, with the status of a lost lease.
    let run = page(&pages, "run");
    for name in [
        "GIT_LEASE_ISSUE",
        "GIT_LEASE_TOKEN",
        "GIT_LEASE_HOLDER",
        "GIT_LEASE_SECRET",
    ] {
        assert!(
            run.contains(&format!(".TP\n{name}\n")),
            "{name} not on run's page"
        );
    }
    assert!(run.contains(".TP\n6\nrun: the lease was lost"), "{run}");
}

#[test]
fn the_synopsis_names_the_value_of_every_option() {
    let repo = TestRepo::new();
    let top = plain(&repo.lease().args(["man"]).run().ok().stdout);
    let synopsis = top
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|s| s.split(".SH").next())
        .expect("a SYNOPSIS");
    for want in [
        "git lease [-C <path>]",
        "[--remote <name|url>]",
        "[--color <auto|always|never>]",
        "<command> [<args>]",
    ] {
        assert!(synopsis.contains(want), "no {want:?} in {synopsis:?}");
    }
    let pages = installed_pages(&repo);
    let run = page(&pages, "run");
    for want in [
        "git lease run [--any]",
        "[--ttl <duration>]",
        "[--wait [<timeout>]]",
        "<issue>... -- <command>...",
    ] {
        assert!(run.contains(want), "no {want:?} on run's page");
    }
}
