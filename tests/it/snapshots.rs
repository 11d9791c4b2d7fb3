//! What users read, held as reviewed snapshots (`tests/it/snapshots/*.snap`): every command's
//! `--help`, and the human output of one fixed story at fixed instants. A change to any of
//! it fails here until the new text is reviewed and accepted (`cargo insta review`, or
//! `INSTA_UPDATE=always cargo test` and a look at the diff).

use crate::env::{at_min, TestRepo};

/// The subcommands whose `--help` is held (every visible one).
const COMMANDS: &[&str] = &[
    "acquire",
    "renew",
    "release",
    "complete",
    "abandon",
    "show",
    "list",
    "log",
    "check",
    "sync",
    "verify",
    "revoke",
    "push",
    "doctor",
    "run",
    "wait",
    "watch",
    "timeline",
    "hook",
    "install-hook",
    "gc",
    "man",
    "completions",
    "mcp",
];

#[test]
fn every_help_is_the_reviewed_one() {
    let repo = TestRepo::new();
    let help = |args: &[&str]| {
        let run = repo.lease().env("COLUMNS", "100").args(args).run();
        run.ok();
        run.stdout
    };
    insta::assert_snapshot!("help", help(&["--help"]));
    for command in COMMANDS {
        insta::assert_snapshot!(format!("help-{command}"), help(&[command, "--help"]));
    }
}

#[test]
fn the_human_output_of_a_story_is_the_reviewed_one() {
    let repo = TestRepo::new();
    let mut transcript = String::new();
    let mut step = |min: i64, args: &[&str]| {
        let run = repo.lease().now(&at_min(min)).args(args).run();
        // Commit ids are shown as <commit>: the text is what a user reads, not a hash test.
        let mut text = format!(
            "$ git lease {}   # at +{min}m\n{}",
            args.join(" "),
            run.stdout
        );
        if !run.stderr.is_empty() {
            text += &format!("[stderr] {}", run.stderr);
        }
        text += &format!("[exit {}]\n\n", run.code);
        transcript += &text;
    };
    step(
        0,
        &[
            "acquire", "42", "--holder", "alice", "--ttl", "15m", "--note", "refactor",
        ],
    );
    step(1, &["acquire", "42", "--holder", "bob"]);
    step(2, &["show", "42"]);
    step(3, &["check", "42", "--token", "1"]);
    step(4, &["renew", "42", "--holder", "alice"]);
    step(
        5,
        &["acquire", "7", "gh/9", "--holder", "carol", "--ttl", "1h"],
    );
    step(6, &["list"]);
    step(7, &["release", "42", "--holder", "alice"]);
    step(8, &["release", "42", "--holder", "alice"]);
    step(30, &["acquire", "42", "--holder", "bob", "--ttl", "never"]);
    step(31, &["revoke", "7", "--reason", "stuck", "--holder", "ops"]);
    step(90, &["list", "--all"]);
    step(91, &["check", "42", "--token", "1"]);
    step(92, &["verify"]);
    let commits = regex_free_commits(&transcript);
    insta::assert_snapshot!("story", commits);
}

/// Replaces every 40- or 10-hex-digit commit id in `text` by `<commit>`.
fn regex_free_commits(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex = word.chars().all(|c| c.is_ascii_hexdigit());
        if hex && (word.len() == 40 || word.len() == 10) && word.chars().any(|c| c.is_ascii_digit())
        {
            out.push_str("<commit>");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}
