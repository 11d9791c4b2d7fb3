//! What a person reads: `show`'s aligned labels and a holder whose process is gone, times
//! relative to the given clock, and colour by git's convention.

use crate::env::{at, TestRepo, T0};

#[test]
fn show_aligns_its_labels_and_names_a_holder_whose_process_is_gone() {
    let repo = TestRepo::new();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("start sleep");
    let pid = sleeper.id().to_string();
    repo.run_at(
        T0,
        &[
            "acquire", "7", "--holder", "a", "--pid", &pid, "--note", "n",
        ],
    )
    .ok();
    let show = repo.run_at(T0, &["show", "7"]);
    show.ok().stdout_has(&format!("pid {pid}"));
    // Every value starts in the same column.
    let starts: std::collections::BTreeSet<usize> = show
        .stdout
        .lines()
        .map(|l| {
            let colon = l.find(':').expect("a label");
            colon + 1 + l[colon + 1..].len() - l[colon + 1..].trim_start().len()
        })
        .collect();
    assert_eq!(starts.len(), 1, "{show}");
    sleeper.kill().expect("kill sleep");
    sleeper.wait().expect("reap sleep");
    repo.run_at(T0, &["show", "7"])
        .ok()
        .stdout_has("free (holder's process gone)")
        .stdout_has(", gone");
}

#[test]
fn times_are_shown_relative_to_the_given_clock() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a", "--ttl", "2h"]);
    repo.run_at(&at(90), &["show", "1"])
        .ok()
        .stdout_has("14:00 UTC")
        .stdout_has("in 1h 58m");
}

#[test]
fn colour_follows_gits_convention() {
    let repo = TestRepo::new();
    let painted = |run: &crate::env::Run| run.stdout.contains("\u{1b}[");
    // Not a terminal: no colour by default.
    let run = repo.run_at(T0, &["acquire", "1", "--holder", "a"]);
    assert!(!painted(&run), "{run}");
    let run = repo.run_at(T0, &["--color=always", "check", "1", "--token", "1"]);
    assert!(painted(&run), "{run}");
    assert!(
        run.stdout.contains("\u{1b}[32mok:\u{1b}[m token 1"),
        "{run}"
    );
    let run = repo.run_at(T0, &["acquire", "1", "--holder", "b", "--color=always"]);
    assert!(run.stdout.starts_with("\u{1b}[31mheld:"), "{run}");
    repo.git(&["config", "color.ui", "always"]);
    assert!(painted(&repo.run_at(T0, &["show", "1"])));
    assert!(!painted(&repo.run_at(T0, &["show", "1", "--color=never"])));
    // NO_COLOR wins over color.ui, and --color over NO_COLOR; JSON is never painted.
    let no_color = |args: &[&str]| repo.lease().now(T0).env("NO_COLOR", "1").args(args).run();
    assert!(!painted(&no_color(&["show", "1"])));
    assert!(painted(&no_color(&["show", "1", "--color=always"])));
    assert!(!painted(&no_color(&[
        "--json",
        "show",
        "1",
        "--color=always"
    ])));
}

/// A subcommand's help shows its own options before the global ones, and its exit codes:
/// `acquire --help` says 3 when held, which a held claim then exits with.
#[test]
fn a_commands_help_shows_its_own_options_first_and_its_exit_codes() {
    let repo = TestRepo::new();
    for flag in ["--help", "-h"] {
        let help = repo.lease().args(["acquire", flag]).run();
        let text = &help.ok().stdout;
        let own = text.find("--ttl").expect("--ttl is shown");
        let global = text
            .find("Global options:")
            .expect("a heading for the global ones");
        let dash_c = text.find("-C <PATH>").expect("-C is shown");
        assert!(own < global && global < dash_c, "{text}");
        assert!(text.contains("Exit codes: 0 acquired"), "{text}");
        assert!(text.contains("3 held by someone else"), "{text}");
    }
    repo.run_at(T0, &["acquire", "7", "--holder", "alice"]).ok();
    repo.run_at(T0, &["acquire", "7", "--holder", "bob"])
        .code(3);
}
