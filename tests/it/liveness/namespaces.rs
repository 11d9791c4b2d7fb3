//! Liveness across PID namespaces and hidden `/proc` entries, as an attacker would try it.
//!
//! Containers on one kernel share the boot id, so a boot id alone does not place a process: a
//! pid means something only in its own PID namespace, and a `/proc` mounted with `hidepid`
//! hides other users' processes. A reader that cannot see a holder process must take it for
//! unknown (live until its expiry), never for gone. Real namespaces are made with `unshare
//! --pid --fork --mount-proc` (util-linux), and a hidden `/proc` with `unshare --mount` and a
//! proc mounted `hidepid`, read as `nobody` through `setpriv`; where this machine allows
//! neither, the test says so on stderr and passes without running. The forged records below
//! need no namespace and always run.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use serde_json::json;

use crate::env::{assert_fields, at_min, hermetic, jrun, line_reader, Run, TestRepo, BIN, BOUND};
use crate::session::{assert_verify_clean, boot_id, dead_pid, forge, pid_ns, Sleeper, ALICE, BOB};

/// The user the hidden-`/proc` reader runs as.
const NOBODY: &str = "65534";

/// Says on stderr (past the harness's capture) that `test` did not run, and why.
fn skipped(test: &str, why: &str) {
    crate::env::skipped(crate::env::Skip::Host, test, why);
}

/// `program args` with the hermetic environment of `repo`, in its work tree.
fn command<S: AsRef<OsStr>>(repo: &TestRepo, program: &str, args: &[S]) -> Command {
    let mut cmd = Command::new(program);
    hermetic(&mut cmd, repo.home(), repo.root());
    cmd.args(args).current_dir(repo.path());
    cmd
}

/// `unshare --pid --fork --mount-proc` in front of `args`: a new PID namespace with its own
/// `/proc`, the first of `args` its pid 1. Its exit code is that of `args`.
fn in_new_pid_namespace<S: AsRef<OsStr>>(repo: &TestRepo, args: &[S]) -> Command {
    let mut cmd = command(
        repo,
        "unshare",
        &["--pid", "--fork", "--mount-proc", "--kill-child"],
    );
    cmd.args(args);
    cmd
}

/// Returns true if this machine lets the tests make PID namespaces; says why not otherwise.
fn pid_namespaces_allowed(test: &str) -> bool {
    let repo = TestRepo::new();
    let run = Run::capture(in_new_pid_namespace(&repo, &["true"]), "unshare --pid");
    if run.code != 0 {
        skipped(
            test,
            &format!(
                "`unshare --pid --fork --mount-proc` fails here: {}",
                run.stderr.trim()
            ),
        );
    }
    run.code == 0
}

/// The shell script that mounts a proc with `$1` (`hidepid=2`...) over `/proc` in the private
/// mount namespace `unshare --mount` made, then runs `$0 "$@"` (after `$1`) as nobody.
const HIDDEN_PROC: &str = r#"opt=$1; shift; mount -t proc -o "$opt" proc /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$0" "$@""#;

/// `args` run as nobody, in a private mount namespace where `/proc` is mounted with `option`.
fn behind_hidden_proc(repo: &TestRepo, option: &str, args: &[&str]) -> Command {
    let mut cmd = command(repo, "unshare", &["--mount", "sh", "-c", HIDDEN_PROC]);
    cmd.args(args[..1].iter().chain(&[option]).chain(&args[1..]));
    cmd
}

/// `args` run as nobody, with this machine's `/proc`.
fn as_nobody(repo: &TestRepo, args: &[&str]) -> Command {
    let mut cmd = command(
        repo,
        "setpriv",
        &["--reuid=65534", "--regid=65534", "--clear-groups"],
    );
    cmd.args(args);
    cmd
}

/// Returns true if this machine lets the tests mount a `hidepid` proc in a private mount
/// namespace and run as nobody there; says why not otherwise.
fn hidden_proc_allowed(test: &str) -> bool {
    let repo = TestRepo::new();
    let run = Run::capture(
        behind_hidden_proc(&repo, "hidepid=2", &["true"]),
        "unshare --mount",
    );
    if run.code != 0 {
        skipped(
            test,
            &format!(
                "no proc mounted hidepid=2 read as nobody here (unshare --mount, mount, setpriv): {}",
                run.stderr.trim()
            ),
        );
    }
    run.code == 0
}

/// Gives everything under `repo`'s temporary directory to `owner` (`uid:gid`).
fn chown(repo: &TestRepo, owner: &str) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(owner)
        .arg(repo.root())
        .status()
        .expect("run chown");
    assert!(status.success(), "chown -R {owner} failed");
}

/// A command running in its own PID namespace, whose stdout a thread reads line by line;
/// killed (the namespace with it) and reaped when dropped.
struct Contained {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Contained {
    fn spawn(repo: &TestRepo, args: &[&str]) -> Contained {
        let stderr = repo.scratch("contained").join("stderr");
        let mut cmd = in_new_pid_namespace(repo, args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("create the stderr file"));
        let mut child = cmd.spawn().expect("start unshare");
        let lines = line_reader(child.stdout.take().expect("piped stdout"));
        Contained {
            child,
            lines,
            stderr,
        }
    }

    /// Waits (at most [`BOUND`]) for the line `want` on its stdout.
    #[track_caller]
    fn wait_line(&self, want: &str) {
        let deadline = std::time::Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == want => return,
                Ok(_) => {}
                Err(_) => panic!(
                    "no line {want:?} within {BOUND:?}; stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                ),
            }
        }
    }

    /// The PID namespace its command runs in: where `unshare` makes its children.
    fn pid_ns(&self) -> u64 {
        std::fs::metadata(format!("/proc/{}/ns/pid_for_children", self.child.id()))
            .expect("unshare's namespace for its children")
            .ino()
    }

    /// SIGKILL to `unshare`, which kills its child (`--kill-child`), the namespace's pid 1,
    /// and with it every process of the namespace; then reaps `unshare`.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `git lease --json <args>` on the system clock.
fn now_json(repo: &TestRepo, args: &[&str]) -> Run {
    repo.lease().arg_json().args(args).run()
}

#[test]
fn a_live_run_in_another_pid_namespace_is_not_taken_over_from_outside() {
    let test = "a_live_run_in_another_pid_namespace_is_not_taken_over_from_outside";
    if !pid_namespaces_allowed(test) {
        return;
    }
    let repo = TestRepo::new();
    // `run` is pid 1 of its namespace; pid 1 outside is another process (this machine's init)
    // with another start time: by pids alone the holder would look gone.
    let mut contained = Contained::spawn(
        &repo,
        &[
            BIN,
            "run",
            "7",
            "--holder",
            ALICE,
            "--ttl",
            "1h",
            "--",
            "sh",
            "-c",
            "echo ready; exec sleep 300",
        ],
    );
    contained.wait_line("ready");
    let record = repo.lease_json("7");
    let process = &record["process"];
    assert_eq!(process["pid"], json!(1), "{record}");
    assert_eq!(process["boot_id"], json!(boot_id()), "{record}");
    assert_eq!(process["pid_ns"], json!(contained.pid_ns()), "{record}");
    assert_ne!(process["pid_ns"], json!(pid_ns()), "{record}");

    // Outside the namespace: held, for every command.
    now_json(&repo, &["acquire", "7", "--holder", BOB]).outcome(3, "held");
    let shown = now_json(&repo, &["show", "7"]);
    shown.ok();
    assert_fields(
        &shown.json(),
        &[("held", json!(true)), ("process_gone", json!(false))],
    );
    now_json(&repo, &["release", "7", "--holder", BOB]).outcome(3, "not_holder");

    // Even once the namespace is gone, nothing outside can see that: live until its expiry.
    contained.kill();
    now_json(&repo, &["acquire", "7", "--holder", BOB]).outcome(3, "held");
    let expiry = record["expires_at"].as_str().expect("an expiry").to_owned();
    let taken = repo
        .lease()
        .now(&expiry)
        .arg_json()
        .args(["acquire", "7", "--holder", BOB])
        .run();
    taken.outcome(0, "acquired");
    assert_fields(
        &repo.lease_json("7"),
        &[
            ("takeover", json!("expired")),
            ("previous_holder", json!(ALICE)),
        ],
    );
}

#[test]
fn a_holder_outside_is_not_taken_over_from_inside_a_pid_namespace() {
    let test = "a_holder_outside_is_not_taken_over_from_inside_a_pid_namespace";
    if !pid_namespaces_allowed(test) {
        return;
    }
    let repo = TestRepo::new();
    let mut worker = Sleeper::start();
    let pid = worker.pid().to_string();
    jrun(
        &repo,
        0,
        &[
            "acquire", "8", "--holder", ALICE, "--ttl", "1h", "--pid", &pid,
        ],
    )
    .ok();
    assert_eq!(repo.lease_json("8")["process"]["pid_ns"], json!(pid_ns()));
    // Inside a new namespace the worker's pid is not in `/proc` at all.
    let bob_inside = || {
        let mut cmd = in_new_pid_namespace(
            &repo,
            &[
                BIN, "--json", "acquire", "8", "--holder", BOB, "--ttl", "1h",
            ],
        );
        cmd.env("GIT_LEASE_NOW", at_min(5));
        Run::capture(cmd, "acquire in a new PID namespace")
    };
    bob_inside().outcome(3, "held");

    // Gone for real: still unknown inside, gone outside, where the worker ran.
    worker.kill_and_reap();
    bob_inside().outcome(3, "held");
    jrun(&repo, 5, &["acquire", "8", "--holder", BOB, "--ttl", "1h"]).outcome(0, "acquired");
    assert_eq!(
        repo.lease_json("8")["takeover"],
        json!("process_gone"),
        "the reader in the worker's own namespace sees it gone"
    );
    assert_verify_clean(&repo, 5);
}

#[test]
fn a_reader_in_the_holders_own_pid_namespace_sees_it_gone() {
    let test = "a_reader_in_the_holders_own_pid_namespace_sees_it_gone";
    if !pid_namespaces_allowed(test) {
        return;
    }
    let repo = TestRepo::new();
    // Holder and reader both in one new namespace: the worker ends, the reader takes over.
    let script = r#"sleep 300 & w=$!
"$0" --json acquire 9 --holder alice@example.com --ttl 1h --pid "$w" || exit 10
kill "$w"; wait "$w"
exec "$0" --json acquire 9 --holder bob@example.com --ttl 1h"#;
    let mut cmd = in_new_pid_namespace(&repo, &["sh", "-c", script, BIN]);
    cmd.env("GIT_LEASE_NOW", at_min(1));
    let run = Run::capture(cmd, "holder and reader in one new PID namespace");
    run.ok();
    let chain = repo.chain("9");
    assert_eq!(chain.len(), 2, "{run}");
    let first = &chain[0].1["process"];
    assert_ne!(first["pid_ns"], json!(pid_ns()), "{first}");
    assert!(first["pid_ns"].is_u64(), "{first}");
    assert_fields(
        &chain[1].1,
        &[
            ("holder", json!(BOB)),
            ("takeover", json!("process_gone")),
            ("previous_holder", json!(ALICE)),
        ],
    );
    // From outside that namespace the first record is unknown, so the audit takes the
    // recorded takeover as written.
    assert_verify_clean(&repo, 1);
}

#[test]
fn a_record_of_another_pid_namespace_or_of_none_is_not_gone() {
    let repo = TestRepo::new();
    let gone = dead_pid();
    let ours = pid_ns();
    let records = [
        (
            "other-ns",
            json!({"pid": gone, "boot_id": boot_id(), "pid_ns": ours + 1, "start_ticks": 1}),
        ),
        (
            "no-ns",
            json!({"pid": gone, "boot_id": boot_id(), "start_ticks": 1}),
        ),
        // The control: the same record in this namespace is read as gone.
        (
            "this-ns",
            json!({"pid": gone, "boot_id": boot_id(), "pid_ns": ours, "start_ticks": 1}),
        ),
    ];
    for (issue, process) in &records {
        forge(&repo, issue, &super::forged_lease(issue, process.clone()));
    }
    assert_verify_clean(&repo, 0);
    for (issue, held) in [("other-ns", true), ("no-ns", true), ("this-ns", false)] {
        let shown = repo.json_at(&at_min(5), 0, &["show", issue]);
        assert_fields(
            &shown,
            &[("held", json!(held)), ("process_gone", json!(!held))],
        );
    }
    for issue in ["other-ns", "no-ns"] {
        jrun(&repo, 5, &["acquire", issue, "--holder", BOB]).outcome(3, "held");
        jrun(&repo, 9, &["check", issue, "--token", "1"]).ok();
        jrun(&repo, 5, &["release", issue, "--holder", BOB]).outcome(3, "not_holder");
    }
    jrun(&repo, 5, &["acquire", "this-ns", "--holder", BOB]).outcome(0, "acquired");
    assert_eq!(
        repo.lease_json("this-ns")["takeover"],
        json!("process_gone")
    );

    // At the expiry they are free like any other lease.
    for issue in ["other-ns", "no-ns"] {
        jrun(&repo, 10, &["acquire", issue, "--holder", BOB]).outcome(0, "acquired");
        assert_eq!(repo.lease_json(issue)["takeover"], json!("expired"));
    }
    assert_verify_clean(&repo, 10);
}

#[test]
fn a_holder_hidden_by_hidepid_is_unknown_never_gone() {
    let test = "a_holder_hidden_by_hidepid_is_unknown_never_gone";
    if !hidden_proc_allowed(test) {
        return;
    }
    let repo = TestRepo::new();
    // alice's worker runs as root: under hidepid, nobody cannot see it.
    let mut worker = Sleeper::start();
    let pid = worker.pid().to_string();
    jrun(
        &repo,
        0,
        &[
            "acquire", "10", "--holder", ALICE, "--ttl", "1h", "--pid", &pid,
        ],
    )
    .ok();
    let bob = [
        BIN, "--json", "acquire", "10", "--holder", BOB, "--ttl", "1h",
    ];
    let attempt = |mut cmd: Command, what: &str| {
        cmd.env("GIT_LEASE_NOW", at_min(5));
        Run::capture(cmd, what)
    };
    chown(&repo, &format!("{NOBODY}:{NOBODY}"));
    // hidepid=2 hides the entry (no such file); hidepid=1 leaves it unreadable.
    for option in ["hidepid=2", "hidepid=1"] {
        attempt(behind_hidden_proc(&repo, option, &bob), option).outcome(3, "held");
    }
    // Gone for real: a /proc that may hide it still cannot prove its absence.
    worker.kill_and_reap();
    for option in ["hidepid=2", "hidepid=1"] {
        attempt(behind_hidden_proc(&repo, option, &bob), option).outcome(3, "held");
    }
    // The control: the same reader with this machine's /proc, which hides nothing.
    attempt(as_nobody(&repo, &bob), "as nobody").outcome(0, "acquired");
    chown(&repo, "0:0");
    assert_fields(
        &repo.lease_json("10"),
        &[
            ("holder", json!(BOB)),
            ("takeover", json!("process_gone")),
            ("previous_holder", json!(ALICE)),
        ],
    );
    assert_verify_clean(&repo, 5);
}
