//! The README's code, run as written: its `sh` blocks are read from README.md (found by their
//! section and what they hold, never copied here), so a change to the README is a change to
//! what these tests run. The fleet recipe moved to docs/FLEET.md, whose blocks are read and run
//! the same way.
//!
//! A block of commands runs line by line in one shell, each line's output and exit code kept
//! apart, and each line's comment is held to what it says ([`check_step`]): a comment whose
//! first word is the first word of a line the command printed is that line (`...` or `…`
//! standing for anything, runs of white space compared as one), `(exit N)` is the exit code
//! (0 otherwise). The clock is pinned where the comments show times: `until 14:15 UTC, in 15m`
//! means a now of 14:00 UTC ([`pinned_now`]). The lines that cannot run here are named, with
//! why, in [`NOT_RUN`]; every `sh` block is run by a test or has all its lines there.
//!
//! [`fleet`] runs the fleet recipe: workers against a real server with the hook.

mod fleet;

use std::path::Path;

use chrono::{Duration, NaiveTime, TimeZone, Utc};

use crate::env::{self, path_with_binary, Run, TestRepo};
use crate::server::Server;

/// The repository path the README's server blocks name; the test's served repository stands
/// in for it.
pub const SERVER_PATH: &str = "/srv/git/project.git";

/// Where a line of a block does not run as written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NotRun {
    /// Never.
    Anywhere,
    /// Not against `git daemon`, which authenticates nobody.
    OnGitDaemon,
}

/// Every line of the README's `sh` blocks that the tests do not run as written, by how the
/// line begins, with where and why. This is the one list.
pub const NOT_RUN: &[(&str, NotRun, &str)] = &[
    (
        "cargo install",
        NotRun::Anywhere,
        "installs into ~/.cargo/bin: the tests put the binary cargo built on PATH instead, as \
         the install would",
    ),
    (
        "git lease watch",
        NotRun::Anywhere,
        "runs until a signal: fleet::watch::watch_* run watch and stop it",
    ),
    (
        "# ... work, commit ...",
        NotRun::Anywhere,
        "a placeholder: the fleet test puts its own work there (a commit, or a failure)",
    ),
    (
        "git -C /srv/git/project.git config lease.pusherEnv",
        NotRun::OnGitDaemon,
        "git daemon authenticates nobody, so with it every push would be refused; the run over \
         http keeps it",
    ),
];

/// Returns whether `line` (trimmed) is one of [`NOT_RUN`] where `daemon` says the block runs.
pub fn not_run(line: &str, daemon: bool) -> bool {
    let line = line.trim();
    NOT_RUN
        .iter()
        .any(|(prefix, when, _)| line.starts_with(prefix) && (*when == NotRun::Anywhere || daemon))
}

/// The text of `path`, relative to the top of the crate.
pub fn document(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path} is readable: {e}"))
}

/// The documents whose `sh` blocks are run as written: the README, and the fleet recipe.
pub const RUN_DOCUMENTS: [&str; 2] = ["README.md", "docs/FLEET.md"];

/// Every ```sh block of `text`, in order, with the `## ` section it is in.
fn all_sh_blocks_of(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut block: Option<String> = None;
    for line in text.lines() {
        match &mut block {
            Some(text) if line.starts_with("```") => {
                blocks.push((section.clone(), std::mem::take(text)));
                block = None;
            }
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None if line == "```sh" => block = Some(String::new()),
            None => {
                if let Some(title) = line.strip_prefix("## ") {
                    section = title.to_owned();
                }
            }
        }
    }
    blocks
}

/// The ```sh blocks of the section `## <section>` of the document `path`, in order.
pub fn sh_blocks_in(path: &str, section: &str) -> Vec<String> {
    let blocks: Vec<String> = all_sh_blocks_of(&document(path))
        .into_iter()
        .filter(|(s, _)| s == section)
        .map(|(_, b)| b)
        .collect();
    assert!(
        !blocks.is_empty(),
        "{path} has no sh block under ## {section}"
    );
    blocks
}

/// The ```sh blocks of the README's section `## <section>`, in order.
pub fn sh_blocks(section: &str) -> Vec<String> {
    sh_blocks_in("README.md", section)
}

/// The ```sh block of `## <section>` of the document `path` that holds `marker`.
pub fn sh_block_in(path: &str, section: &str, marker: &str) -> String {
    sh_blocks_in(path, section)
        .into_iter()
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no sh block under ## {section} of {path} holds {marker:?}"))
}

/// The ```sh block of the README's `## <section>` that holds `marker`.
pub fn sh_block_with(section: &str, marker: &str) -> String {
    sh_block_in("README.md", section, marker)
}

/// The blocks the tests below run, by section and marker.
fn run_blocks() -> Vec<String> {
    vec![
        sh_blocks("Install").remove(0),
        tour(),
        team(),
        server_block(),
        agents(),
        fleet::worker_script(),
        fleet::work_script(),
        fleet::server_settings(),
    ]
}

/// The tour: the block of `## One machine`.
fn tour() -> String {
    sh_blocks("One machine").remove(0)
}

/// A team's clone: the block of `## A team through a server` that runs `doctor`.
fn team() -> String {
    sh_block_with("A team through a server", "git lease doctor")
}

/// The server: the block of `## A team through a server` that installs the hook.
fn server_block() -> String {
    sh_block_with("A team through a server", "install-hook")
}

/// Agents: the block of `## Agents` that runs `run` and `acquire --any`.
fn agents() -> String {
    sh_block_with("Agents", "git lease run")
}

/// One command line of a block: its code, and the comment that follows it.
#[derive(Clone, Debug)]
pub struct Step {
    /// The line's number in its block, from 1.
    pub line: usize,
    pub code: String,
    pub comment: String,
}

/// Splits `line` into its code and its comment: the first `#` outside quotes that begins a
/// word.
fn split_comment(line: &str) -> (String, String) {
    let (mut single, mut double, mut prev) = (false, false, ' ');
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => {
                return (
                    line[..i].trim_end().to_owned(),
                    line[i + 1..].trim().to_owned(),
                );
            }
            _ => {}
        }
        prev = c;
    }
    (line.trim_end().to_owned(), String::new())
}

/// The command lines of `block` (lines ending in `\` joined to the next), without comment-only
/// lines and without those [`not_run`] names.
pub fn steps(block: &str, daemon: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in block.lines().enumerate() {
        let (start, text) = match pending.take() {
            Some((start, text)) => (start, format!("{text}\n{raw}")),
            None => (i + 1, raw.to_owned()),
        };
        if text.ends_with('\\') {
            pending = Some((start, text));
            continue;
        }
        if text.trim().is_empty() || text.trim_start().starts_with('#') || not_run(&text, daemon) {
            continue;
        }
        let (code, comment) = split_comment(&text);
        steps.push(Step {
            line: start,
            code,
            comment,
        });
    }
    steps
}

/// What the README's comments show of the clock: the instant `until HH:MM UTC, in D` means
/// (HH:MM less D, on T0's day), else T0.
pub fn pinned_now(block: &str) -> String {
    let t0 = env::t0();
    for (_, comment) in block.lines().map(split_comment) {
        let Some((_, after)) = comment.split_once("until ") else {
            continue;
        };
        let Some((clock, rest)) = after.split_once(" UTC, in ") else {
            continue;
        };
        let span: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let (Ok(time), Some(span)) = (NaiveTime::parse_from_str(clock, "%H:%M"), span_of(&span))
        else {
            continue;
        };
        let until = Utc.from_utc_datetime(&t0.date_naive().and_time(time));
        return env::rfc3339(until - span);
    }
    env::T0.to_owned()
}

/// A span as the tool prints it: `15m`, `1h`, `90s`, `1h30m`, `2d`.
fn span_of(text: &str) -> Option<Duration> {
    let (mut total, mut number) = (Duration::zero(), String::new());
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: i64 = std::mem::take(&mut number).parse().ok()?;
        total += match c {
            's' => Duration::seconds(n),
            'm' => Duration::minutes(n),
            'h' => Duration::hours(n),
            'd' => Duration::days(n),
            _ => return None,
        };
    }
    (number.is_empty() && total > Duration::zero()).then_some(total)
}

/// Collapses every run of white space to one space, trimmed.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `line` is what `pattern` shows: the whole line, `...` or `…` standing for anything,
/// white space compared as one space.
pub fn shows(pattern: &str, line: &str) -> bool {
    let pattern = squeeze(&pattern.replace('…', "..."));
    let line = squeeze(line);
    let pieces: Vec<&str> = pattern.split("...").map(str::trim).collect();
    pieces_match(&pieces, &line)
}

/// Whether `text` is `pieces` in order with anything between them: it begins with the first,
/// ends with the last, and holds the others in between.
pub fn pieces_match(pieces: &[&str], text: &str) -> bool {
    let (first, rest) = pieces
        .split_first()
        .expect("split gives one piece at least");
    let Some(mut left) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for piece in middle {
        match left.find(piece) {
            Some(at) => left = &left[at + piece.len()..],
            None => return false,
        }
    }
    left.ends_with(last)
}

/// The comment of a step, taken apart: the output it shows (if any) and the exit code.
fn expected(comment: &str) -> (String, i32) {
    let trimmed = comment.trim();
    if let Some((text, code)) = trimmed
        .strip_suffix(')')
        .and_then(|t| t.rsplit_once("(exit "))
    {
        if let Ok(code) = code.parse() {
            return (text.trim().to_owned(), code);
        }
    }
    (trimmed.to_owned(), 0)
}

/// Holds `run` (the step's own output and exit code) to what its comment says; returns what
/// is wrong.
fn check_step(step: &Step, run: &Run) -> Option<String> {
    let (shown, code) = expected(&step.comment);
    if run.code != code {
        return Some(format!("exited {} where the README says {code}", run.code));
    }
    let printed: Vec<&str> = run.stdout.lines().chain(run.stderr.lines()).collect();
    let first = shown.split_whitespace().next()?;
    let claims_output = printed
        .iter()
        .any(|l| l.split_whitespace().next() == Some(first));
    (claims_output && !printed.iter().any(|l| shows(&shown, l)))
        .then(|| format!("printed no line the README shows: {shown:?}"))
}

/// Runs the steps of `block` in one `sh` in `dir` (HOME `home`, repository discovery stopping
/// at `ceiling`), with `GIT_LEASE_NOW=now`
/// when given and `SERVER_PATH` replaced by `server`, each step's output and exit code kept
/// apart; checks every step against its comment ([`check_step`]) and panics with the whole
/// transcript if one is wrong. Returns the steps with their runs.
fn run_block(
    block: &str,
    dir: &Path,
    home: &Path,
    ceiling: &Path,
    now: Option<&str>,
    server: Option<&Path>,
    daemon: bool,
) -> Vec<(Step, Run)> {
    let steps = steps(block, daemon);
    assert!(!steps.is_empty(), "nothing to run in:\n{block}");
    let out = home.join("readme-steps");
    std::fs::create_dir_all(&out).expect("create the steps' directory");
    let mut script = String::new();
    for (i, step) in steps.iter().enumerate() {
        let code = match server {
            Some(path) => step
                .code
                .replace(SERVER_PATH, path.to_str().expect("a UTF-8 path")),
            None => step.code.clone(),
        };
        script += &format!(
            "{{ {code}\n}} >\"$STEPS/{i}.out\" 2>\"$STEPS/{i}.err\" </dev/null\necho $? >\"$STEPS/{i}.rc\"\n"
        );
    }
    let mut cmd = std::process::Command::new("sh");
    env::hermetic(&mut cmd, home, ceiling);
    cmd.env("PATH", path_with_binary(&[]))
        .env("STEPS", &out)
        .env("GIT_TERMINAL_PROMPT", "0")
        .arg("-c")
        .arg(&script)
        .current_dir(dir);
    if let Some(now) = now {
        cmd.env("GIT_LEASE_NOW", now);
    }
    let shell = Run::capture(cmd, "sh -c <the block's steps>");
    assert_eq!(shell.code, 0, "the block's shell failed\n{shell}");
    let read = |name: String| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    let mut transcript = String::new();
    let mut wrong = 0;
    let mut runs = Vec::new();
    for (i, step) in steps.into_iter().enumerate() {
        let run = Run {
            command: step.code.clone(),
            code: read(format!("{i}.rc")).trim().parse().unwrap_or(-1),
            stdout: read(format!("{i}.out")),
            stderr: read(format!("{i}.err")),
        };
        let verdict = check_step(&step, &run);
        transcript += &format!(
            "line {}: {}   # {}\n{run}\n{}\n",
            step.line,
            step.code,
            step.comment,
            verdict
                .as_deref()
                .map_or("ok".to_owned(), |v| format!("WRONG: {v}"))
        );
        wrong += usize::from(verdict.is_some());
        runs.push((step, run));
    }
    assert_eq!(
        wrong, 0,
        "{wrong} line(s) do not do what the README says:\n{transcript}"
    );
    runs
}

#[test]
fn the_readme_tour_works_as_written() {
    let scratch = TestRepo::new();
    let dir = scratch.scratch("tour");
    let block = tour();
    let now = pinned_now(&block);
    assert_ne!(now, env::T0, "the tour shows the time of its first claim");
    run_block(&block, &dir, &dir, &dir, Some(&now), None, false);
    // `git log --oneline refs/leases/42`: one commit per event, as plain git sees them.
    let repo = dir.join("demo");
    let count = scratch.git_in(&repo, &["rev-list", "--count", "refs/leases/42"]);
    assert_eq!(count, "3", "acquire, release, acquire");
}

#[test]
fn a_team_through_a_server_works_as_the_readme_says() {
    let block = team();
    let now = pinned_now(&block);
    assert_ne!(now, env::T0, "the block shows the time of its first claim");
    let mut server = Server::with_hook();
    server.start_at(&now);
    let client = server.client("alice@example.com");
    client.git(&["config", "user.email", "alice@example.com"]);
    client.git(&["config", "--unset", "lease.holder"]);
    run_block(
        &block,
        client.path(),
        client.home(),
        client.root(),
        Some(&now),
        None,
        true,
    );
    // The claims are the server's, as plain git there sees them: alice's tenure, then bob's.
    let leases = server.leases("7");
    let last = leases.last().expect("a ledger of 7 on the server");
    assert_eq!(last["holder"], "bob@example.com", "{leases:?}");
    assert_eq!(last["token"], 2, "{leases:?}");
    assert_eq!(client.tip("7"), server.tip("7"));
    assert_eq!(client.git(&["config", "lease.remote"]), "origin");
    // The fenced branch holds alice's work under token 1, not the stale commit after it.
    assert_eq!(
        server.rev("refs/heads/issue/7"),
        Some(client.git(&["rev-parse", "issue/7~1"]))
    );
}

#[test]
fn the_readme_agents_block_runs_and_claims_one_of_the_queue() {
    let scratch = TestRepo::new();
    let dir = scratch.scratch("agents");
    let block = agents();
    let runs = run_block(&block, &dir, &dir, &dir, None, None, false);
    let repo = dir.join("agents");
    // 42's tenure was completed by run; agent-2 and agent-3 hold one queued issue each.
    let log = scratch.git_in(&repo, &["log", "-1", "--format=%B", "refs/leases/42"]);
    assert!(log.contains("complete"), "{log}");
    let held: Vec<String> = ["7", "8", "9"]
        .iter()
        .filter(|issue| {
            let refname = format!("refs/leases/{issue}");
            scratch
                .git_in(&repo, &["for-each-ref", &refname])
                .contains(&refname)
        })
        .map(|issue| issue.to_string())
        .collect();
    assert_eq!(
        held.len(),
        2,
        "one issue each for agent-2 and agent-3: {held:?}"
    );
    assert!(runs
        .iter()
        .any(|(_, run)| run.stdout.contains("agent-3 took")));
}

#[test]
fn the_readme_server_block_installs_a_hook_that_judges_the_authenticated_pusher() {
    let mut server = Server::http_unhooked(&["alice", "bob"]);
    let home = server.root().join("home");
    run_block(
        &server_block(),
        server.root(),
        &home,
        server.root(),
        None,
        Some(server.bare()),
        false,
    );
    server.start_at(env::T0);
    let alice = server.client("alice");
    crate::server::lease(&alice, 0, &["acquire", "42", "--remote", "origin"]).ok();
    // bob, authenticated as bob, claims in alice's name, and pushes to her fenced branch.
    let bob = server.client("bob");
    bob.git(&["config", "lease.holder", "alice"]);
    crate::server::lease(&bob, 60, &["release", "42", "--remote", "origin"])
        .code(3)
        .stderr_has("git-lease: refused");
    bob.git(&["commit", "-q", "--allow-empty", "-m", "bob's work"]);
    crate::server::git(&bob, &["push", "origin", "HEAD:refs/heads/issue/42"])
        .code(1)
        .stderr_has("git-lease: refused");
    // alice's own work lands on her branch.
    alice.git(&["commit", "-q", "--allow-empty", "-m", "alice's work"]);
    alice.git(&["switch", "-q", "-c", "issue/42"]);
    crate::server::lease(&alice, 120, &["push", "origin"]).ok();
    assert_eq!(
        server.rev("refs/heads/issue/42"),
        Some(alice.git(&["rev-parse", "HEAD"]))
    );
}

/// Every ```sh block of the README and docs/FLEET.md is run by a test here, or each of its
/// lines is named in [`NOT_RUN`]: no block goes unrun unsaid.
#[test]
fn every_sh_block_of_the_readme_is_run_or_says_why_not() {
    let run = run_blocks();
    for path in RUN_DOCUMENTS {
        for (section, block) in all_sh_blocks_of(&document(path)) {
            if run.contains(&block) {
                continue;
            }
            let unrun: Vec<&str> = block
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .filter(|l| !not_run(l, false))
                .collect();
            assert!(
                unrun.is_empty(),
                "a block of ## {section} of {path} is run by no test, and NOT_RUN does not name {unrun:?}:\n{block}"
            );
        }
    }
}

/// Returns the lines of the ```sh block of `## Install`.
fn install_lines() -> Vec<String> {
    sh_blocks("Install")[0].lines().map(str::to_owned).collect()
}

#[test]
fn after_install_the_manual_and_completions_work_as_the_readme_says() {
    let scratch = TestRepo::new();
    // What `cargo install` leaves: the binary in <prefix>/bin, on PATH.
    let prefix = scratch.scratch("prefix");
    let sh = crate::env::installed_shell(&prefix, &scratch.scratch("home"));
    let lines = install_lines();
    assert!(
        lines[0].starts_with("cargo install --locked --path .") && not_run(&lines[0], false),
        "{lines:?}"
    );
    // The README's follow-up line, as written.
    let (ok, out) = sh(&lines[1]);
    assert!(ok, "{}: {out}", lines[1]);
    assert!(prefix.join("share/man/man1/git-lease.1").exists(), "{out}");
    assert!(prefix.join("share/man/man1/git-lease-acquire.1").exists());
    // `git help lease` through man is `git_help` in the `zoo` test binary.
    // A new shell completes `git lease` and `git-lease`.
    let (ok, out) = sh(
        "source ~/.bashrc; COMP_WORDS=(git lease ac); COMP_CWORD=2; _git_lease; \
         echo \"[${COMPREPLY[*]}]\"; COMP_WORDS=(git-lease list --al); COMP_CWORD=2; \
         _clap_complete_git_lease git-lease --al list; echo \"[${COMPREPLY[*]}]\"",
    );
    assert!(
        ok && out.contains("[acquire]") && out.contains("[--all]"),
        "{out}"
    );
    // The other shells' scripts, and the page itself.
    for shell in ["zsh", "fish"] {
        let (ok, out) = sh(&format!("git lease completions {shell}"));
        assert!(ok && out.contains("git-lease"), "{shell}: {out}");
    }
    let (ok, out) = sh("git lease man");
    assert!(ok && out.contains(".TH"), "{out}");
}
