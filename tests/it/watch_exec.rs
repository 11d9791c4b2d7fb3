//! `watch --exec CMD` and `lease.onEvent` (docs/EVENTS.md): a real shell command run for each
//! event, in order, with the event's JSON on its stdin and `LEASE_*` in its environment; a
//! failing one said on stderr while the watch goes on; a slow one that delays later commands
//! but loses none; a signal during a command passed on to it.
//!
//! Each command writes one line per event to a FIFO the test holds open for reading and
//! writing ([`Records`]): a command never blocks on it, and the test reads each line as it is
//! written, with no sleep. A slow command waits on a second FIFO, the gate, until the test
//! opens it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;

use serde_json::Value;

use crate::env::{at, line_reader, write_program, Cmd, TestRepo, Watch, BOUND, T0};

const ALICE: &str = "alice";
const BOB: &str = "bob";

/// The shell line that records an event: issue, event, holder and token from the
/// environment, then the JSON read from stdin, on one line of the FIFO `$RECORDS`.
const RECORD: &str = r#"printf '%s|%s|%s|%s|%s\n' "$LEASE_ISSUE" "$LEASE_EVENT" "$LEASE_HOLDER" "$LEASE_TOKEN" "$(cat)" >> "$RECORDS""#;

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The lines commands write to a FIFO, read as they come.
struct Records {
    path: PathBuf,
    lines: mpsc::Receiver<String>,
}

impl Records {
    /// A FIFO in `repo`'s scratch space, held open for reading and writing.
    fn new(repo: &TestRepo) -> Records {
        let path = repo.scratch("exec").join("records");
        mkfifo(&path);
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open the records FIFO");
        Records {
            path,
            lines: line_reader(fifo),
        }
    }

    /// Waits (at most [`BOUND`]) for the next line.
    #[track_caller]
    fn next(&self, watch: &Watch) -> String {
        self.lines.recv_timeout(BOUND).unwrap_or_else(|_| {
            panic!(
                "no command wrote a line within {BOUND:?}\nstderr:\n{}",
                watch.stderr()
            )
        })
    }

    /// Asserts that no command wrote a line the test has not read: a line the test writes
    /// now is the next one read (the FIFO keeps the order of its writes).
    #[track_caller]
    fn none_left(&self, watch: &Watch) {
        std::fs::write(&self.path, "none left\n").expect("write to the records FIFO");
        assert_eq!(self.next(watch), "none left", "a command too many");
    }

    /// Reads the next `n` lines, each split into issue, event, holder, token and the JSON.
    #[track_caller]
    fn take(&self, watch: &Watch, n: usize) -> Vec<(Vec<String>, Value)> {
        (0..n)
            .map(|_| {
                let line = self.next(watch);
                let fields: Vec<&str> = line.splitn(5, '|').collect();
                assert_eq!(fields.len(), 5, "{line}");
                let json = serde_json::from_str(fields[4])
                    .unwrap_or_else(|e| panic!("stdin was not the JSON ({e}): {line}"));
                (fields[..4].iter().map(|f| (*f).to_owned()).collect(), json)
            })
            .collect()
    }
}

/// `watch --json` on the clock `GIT_LEASE_NOW=T0`, with `$RECORDS` set.
fn watch_cmd(repo: &TestRepo, records: &Records) -> Cmd {
    repo.lease()
        .now(T0)
        .env("RECORDS", &records.path)
        .arg_json()
        .args(["watch"])
}

/// Claims `marker` a minute before T0, starts `cmd` with `--since <T0 - 1h>` and waits for
/// the marker's replayed line: the watch has read the refs, so every later claim is an event.
/// The marker's command has run, or runs next.
fn start(repo: &TestRepo, cmd: Cmd) -> Watch {
    repo.lease()
        .now(&at(-60))
        .args(["acquire", "marker", "--holder", ALICE, "--ttl", "never"])
        .run()
        .ok();
    let mut watch = Watch::spawn(repo, cmd.args(["--since", &at(-3600)]));
    watch.wait_event("marker", "acquire");
    watch
}

/// Takes the marker's record (see [`start`]).
#[track_caller]
fn marker_recorded(records: &Records, watch: &Watch) {
    let marker = records.take(watch, 1);
    assert_eq!(marker[0].0, fields(&["marker", "acquire", ALICE, "1"]));
}

fn lease(repo: &TestRepo, args: &[&str]) {
    repo.lease().now(T0).args(args).run().ok();
}

fn fields(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_command_gets_each_event_as_json_on_stdin_and_lease_variables_in_order() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    // What the command prints goes to the watch's stderr, never among its events.
    let command = format!("echo \"said for $LEASE_EVENT of $LEASE_ISSUE\"; {RECORD}");
    let mut watch = start(&repo, watch_cmd(&repo, &records).args(["--exec", &command]));
    marker_recorded(&records, &watch);

    lease(&repo, &["acquire", "a-1", "--holder", ALICE, "--ttl", "1h"]);
    lease(&repo, &["release", "a-1", "--holder", ALICE]);
    lease(&repo, &["acquire", "a-1", "--holder", BOB, "--ttl", "1h"]);
    let got = records.take(&watch, 3);
    let env: Vec<Vec<String>> = got.iter().map(|(f, _)| f.clone()).collect();
    assert_eq!(
        env,
        vec![
            fields(&["a-1", "acquire", ALICE, "1"]),
            // No holder after a release: the variable is empty.
            fields(&["a-1", "release", "", "1"]),
            fields(&["a-1", "acquire", BOB, "2"]),
        ]
    );
    // The JSON on stdin is the line `watch --json` printed for the same event.
    for (_, json) in &got {
        let printed = watch.wait_for("the same event", |v| v["commit"] == json["commit"]);
        assert_eq!(&printed, json);
    }
    assert_eq!(got[1].1["previous_holder"], ALICE, "{}", got[1].1);
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
    // Every line of its stdout was an event (drain parses each as JSON).
    watch.drain();
    assert_eq!(watch.seen.len(), 4, "{:#?}", watch.seen);
    let stderr = watch.stderr();
    assert!(stderr.contains("said for release of a-1\n"), "{stderr}");
}

#[test]
fn a_failing_command_is_said_on_stderr_and_the_watch_goes_on_with_exit_0() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    let command =
        format!("case $LEASE_ISSUE in fails) exit 7 ;; killed) kill -KILL $$ ;; esac; {RECORD}");
    let mut watch = start(&repo, watch_cmd(&repo, &records).args(["--exec", &command]));
    marker_recorded(&records, &watch);
    lease(
        &repo,
        &["acquire", "fails", "--holder", ALICE, "--ttl", "1h"],
    );
    lease(
        &repo,
        &["acquire", "killed", "--holder", ALICE, "--ttl", "1h"],
    );
    lease(&repo, &["acquire", "after", "--holder", BOB, "--ttl", "1h"]);
    // The command of the event after both failures ran: the watch went on.
    let after = records.take(&watch, 1);
    assert_eq!(after[0].0, fields(&["after", "acquire", BOB, "1"]));
    watch.signal("TERM");
    let status = watch.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", watch.stderr());
    let stderr = watch.stderr();
    for said in [
        "the on-event command for the acquire of fails (token 1) failed with exit code 7; the watch goes on",
        "the on-event command for the acquire of killed (token 1) was killed by signal 9; the watch goes on",
    ] {
        assert!(stderr.contains(said), "{said:?} not in stderr:\n{stderr}");
    }
    watch.drain();
    let printed: Vec<&str> = watch
        .seen
        .iter()
        .filter_map(|v| v["issue"].as_str())
        .collect();
    assert_eq!(printed, ["marker", "fails", "killed", "after"]);
}

#[test]
fn a_command_that_cannot_start_is_said_and_the_watch_goes_on() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    // A PATH with git alone: no `sh` to run the command through.
    let bin = repo.scratch("git-only");
    let git = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .expect("find git");
    let git = String::from_utf8_lossy(&git.stdout).trim().to_owned();
    std::os::unix::fs::symlink(&git, bin.join("git")).expect("link git");
    let cmd = watch_cmd(&repo, &records)
        .env("PATH", &bin)
        .args(["--exec", RECORD]);
    let mut watch = start(&repo, cmd);
    lease(&repo, &["acquire", "after", "--holder", BOB, "--ttl", "1h"]);
    watch.wait_event("after", "acquire");
    lease(&repo, &["acquire", "last", "--holder", BOB, "--ttl", "1h"]);
    // Each event's command is tried before the next event is printed: once `last` is
    // printed, the commands of `marker` and `after` were tried. That of `last` may not be:
    // no command starts once the signal came.
    watch.wait_event("last", "acquire");
    watch.signal("TERM");
    let status = watch.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", watch.stderr());
    let stderr = watch.stderr();
    for issue in ["marker", "after"] {
        let said =
            format!("the on-event command for the acquire of {issue} (token 1) could not start");
        assert!(stderr.contains(&said), "{said:?} not in stderr:\n{stderr}");
    }
    records.none_left(&watch);
}

#[test]
fn a_slow_command_delays_the_later_ones_but_loses_and_reorders_no_event() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    let gate = repo.scratch("exec").join("gate");
    mkfifo(&gate);
    // The first event's command says it started, then waits until the test opens the gate.
    let command = format!(
        "if [ \"$LEASE_ISSUE\" = first ]; then echo 'waiting|||' >> \"$RECORDS\"; read go < {gate}; fi; {RECORD}",
        gate = gate.display()
    );
    let mut watch = start(&repo, watch_cmd(&repo, &records).args(["--exec", &command]));
    marker_recorded(&records, &watch);
    lease(
        &repo,
        &["acquire", "first", "--holder", ALICE, "--ttl", "1h"],
    );
    assert_eq!(records.next(&watch), "waiting|||");

    // While it waits, one ledger moves three times and another appears.
    lease(
        &repo,
        &["acquire", "busy", "--holder", ALICE, "--ttl", "1h"],
    );
    lease(&repo, &["renew", "busy", "--holder", ALICE, "--ttl", "2h"]);
    lease(&repo, &["release", "busy", "--holder", ALICE]);
    lease(&repo, &["acquire", "late", "--holder", BOB, "--ttl", "1h"]);
    std::fs::write(&gate, "go\n").expect("open the gate");

    let got: Vec<Vec<String>> = records
        .take(&watch, 5)
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        got,
        vec![
            fields(&["first", "acquire", ALICE, "1"]),
            fields(&["busy", "acquire", ALICE, "1"]),
            fields(&["busy", "renew", ALICE, "1"]),
            fields(&["busy", "release", "", "1"]),
            fields(&["late", "acquire", BOB, "1"]),
        ]
    );
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
}

#[test]
fn lease_on_event_runs_without_exec_and_no_exec_or_an_empty_exec_turns_it_off() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    repo.git(&["config", "lease.onEvent", RECORD]);
    let mut watch = start(&repo, watch_cmd(&repo, &records));
    marker_recorded(&records, &watch);
    lease(
        &repo,
        &["acquire", "configured", "--holder", ALICE, "--ttl", "1h"],
    );
    let got = records.take(&watch, 1);
    assert_eq!(got[0].0, fields(&["configured", "acquire", ALICE, "1"]));
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());

    // Off: the marker's command would have ended before the next line was printed.
    for off in [&["--no-exec"][..], &["--exec", ""][..]] {
        let cmd = watch_cmd(&repo, &records)
            .args(["--since", &at(-60)])
            .args(off);
        let mut watch = Watch::spawn(&repo, cmd);
        watch.wait_event("configured", "acquire");
        watch.signal("TERM");
        assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
        records.none_left(&watch);
    }
}

#[test]
fn a_signal_during_a_command_is_passed_on_and_no_later_command_runs() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    lease(&repo, &["acquire", "one", "--holder", ALICE, "--ttl", "1h"]);
    lease(&repo, &["acquire", "two", "--holder", ALICE, "--ttl", "1h"]);
    // Replayed together, the two events are one batch: the second's command would follow.
    let command =
        format!("{RECORD}; if [ \"$LEASE_ISSUE\" = one ]; then exec tail -f /dev/null; fi");
    let cmd = watch_cmd(&repo, &records).args(["--since", &at(-60), "--exec", &command]);
    let mut watch = Watch::spawn(&repo, cmd);
    let first = records.take(&watch, 1);
    assert_eq!(first[0].0, fields(&["one", "acquire", ALICE, "1"]));

    watch.signal("INT");
    let status = watch.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", watch.stderr());
    let stderr = watch.stderr();
    assert!(
        stderr.contains("the acquire of one (token 1) was killed by signal 2"),
        "{stderr}"
    );
    records.none_left(&watch);
    watch.drain();
    let printed: Vec<&str> = watch
        .seen
        .iter()
        .filter_map(|v| v["issue"].as_str())
        .collect();
    assert_eq!(printed, ["one"], "no line after the signal");
}

/// The recipe's script, read from docs/EVENTS.md: the `sh` block that starts with it.
fn recipe() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/EVENTS.md");
    let doc = std::fs::read_to_string(&path).expect("read docs/EVENTS.md");
    let start = doc
        .find("```sh\n#!/bin/sh\n# lease-to-github")
        .expect("the recipe's block in docs/EVENTS.md")
        + "```sh\n".len();
    let len = doc[start..]
        .find("```")
        .expect("the end of the recipe's block");
    doc[start..start + len].to_owned()
}

#[test]
fn the_github_recipe_mirrors_claims_to_the_assignee() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    let bin = repo.scratch("bin");
    // The stand-in for GitHub's CLI: it records its arguments, and reaches no forge.
    write_program(
        &bin.join("gh"),
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> \"$RECORDS\"\n",
        0o755,
    );
    let script = bin.join("lease-to-github");
    write_program(&script, &recipe(), 0o755);
    let cmd = watch_cmd(&repo, &records).path_first(&bin);
    let cmd = cmd.args(["--exec", &script.display().to_string()]);
    let mut watch = start(&repo, cmd);

    lease(
        &repo,
        &["acquire", "gh-12", "--holder", ALICE, "--ttl", "1h"],
    );
    // Not a GitHub issue: no call.
    lease(
        &repo,
        &["acquire", "local-3", "--holder", ALICE, "--ttl", "1h"],
    );
    lease(&repo, &["release", "gh-12", "--holder", ALICE]);
    lease(
        &repo,
        &["acquire", "gh-14", "--holder", ALICE, "--ttl", "1s"],
    );
    // Bob takes over once Alice's lease has expired.
    repo.lease()
        .now(&at(2))
        .args(["acquire", "gh-14", "--holder", BOB, "--ttl", "1h"])
        .run()
        .ok();
    lease(&repo, &["renew", "gh-14", "--holder", BOB, "--ttl", "2h"]);
    repo.lease()
        .now(&at(3))
        .args(["complete", "gh-14", "--holder", BOB])
        .run()
        .ok();

    let calls: Vec<String> = (0..7).map(|_| records.next(&watch)).collect();
    assert_eq!(
        calls,
        [
            "issue edit 12 --add-assignee alice",
            "issue edit 12 --remove-assignee alice",
            "issue edit 14 --add-assignee alice",
            // The expiry, then the takeover that follows it.
            "issue edit 14 --remove-assignee alice",
            "issue edit 14 --remove-assignee alice",
            "issue edit 14 --add-assignee bob",
            "issue edit 14 --remove-assignee bob",
        ],
        "stderr:\n{}",
        watch.stderr()
    );
    watch.signal("TERM");
    assert_eq!(watch.wait_exit().code(), Some(0), "{}", watch.stderr());
    records.none_left(&watch);
}

#[test]
fn a_second_signal_kills_a_command_that_ignores_the_first() {
    let repo = TestRepo::new();
    let records = Records::new(&repo);
    // The marker's command ignores SIGINT and SIGTERM, and never ends by itself.
    let command = format!("trap '' INT TERM; {RECORD}; exec tail -f /dev/null");
    let mut watch = start(&repo, watch_cmd(&repo, &records).args(["--exec", &command]));
    marker_recorded(&records, &watch);

    watch.signal("INT");
    watch.signal("TERM");
    let status = watch.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", watch.stderr());
    let stderr = watch.stderr();
    assert!(
        stderr.contains("the acquire of marker (token 1) was killed by signal 9"),
        "{stderr}"
    );
}
