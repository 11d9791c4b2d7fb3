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

/// Ctrl-C (SIGINT to the terminal's process group) while a claim's push waits on the server
/// says that the outcome is unknown and that running the same command again converges; it
/// does: the rerun claims the issue, token 1.
#[test]
fn ctrl_c_during_a_remote_write_says_the_outcome_is_unknown_and_a_rerun_converges() {
    use std::os::unix::process::CommandExt;
    let repo = TestRepo::new();
    let origin = repo.add_bare_origin(&[]);
    let dir = repo.scratch("hook");
    let (ready, go) = (dir.join("ready"), dir.join("go"));
    // The server's hook holds a push of lease refs until `go` exists, saying so in `ready`.
    let hook = format!(
        "#!/bin/sh\nif grep -q refs/leases/; then\n  : > '{}'\n  \
         while [ ! -e '{}' ]; do sleep 0.05; done\nfi\nexit 0\n",
        ready.display(),
        go.display()
    );
    crate::env::write_program(&origin.git_dir().join("hooks/pre-receive"), &hook, 0o755);
    let claim = ["acquire", "7", "--holder", "alice", "--remote", "origin"];
    let mut cmd = repo.lease().args(claim).command();
    cmd.process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("start the claim");
    let pid = i32::try_from(child.id()).expect("a pid");
    let started = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            started.elapsed().as_secs() < 120,
            "the push never reached the hook"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the process group this test started.
    unsafe { libc::kill(-pid, libc::SIGINT) };
    let out = child.wait_with_output().expect("the claim ends");
    let run = crate::env::Run::from_output("acquire (interrupted)", out);
    run.code(1)
        .stderr_has("error: interrupted by SIGINT (Ctrl-C) while writing through origin")
        .stderr_has("the outcome is unknown")
        .stderr_has("run the same command again: it converges");
    std::fs::write(&go, "").expect("let pushes through");
    let again = repo.run(&claim);
    again.ok().stdout_has("acquired 7 for alice (token 1");
    assert!(
        origin.tip("7").is_some(),
        "the rerun's claim is on the server"
    );
}
