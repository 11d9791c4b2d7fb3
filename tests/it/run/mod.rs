//! `git lease run` and `git lease wait` (issue 6): leases held for exactly as long as a command
//! runs, and waiting for an issue to become free.
//!
//! These features are defined over real time (renewals, grace periods, polling), so some tests
//! run on the system clock and last a few seconds. Nothing sleeps to decide an outcome: a
//! background process is awaited with a generous bound, and readiness (a lease shown held, a
//! child that says it is ready, signal handlers installed) is polled a bounded number of times.

mod processes;
mod remote;
mod stopping;
mod wait;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::env::{assert_fields, at, at_min, Cmd, Run, TestRepo, BIN};
use crate::server::Server;
use crate::session::{assert_secret_shape, boot_id, sha256_hex, start_ticks, Sleeper};

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";
const WORKER: &str = "worker@ci";

/// How often and how long readiness is polled (10 s in all).
const POLLS: usize = 400;
const POLL_EVERY: Duration = Duration::from_millis(25);
/// The bound on waiting for a background process to end.
const EXIT_BOUND: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Polls `probe` until it answers, at most [`POLLS`] times; panics naming `what` otherwise.
#[track_caller]
fn poll_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..POLLS {
        if let Some(v) = probe() {
            return v;
        }
        std::thread::sleep(POLL_EVERY);
    }
    panic!("{what}: not ready after {POLLS} polls");
}

/// A background process (`git-lease run`, `git-lease wait`) with its output in files; killed
/// and reaped if the test ends while it still runs.
struct Bg {
    child: Child,
    name: String,
    out: PathBuf,
    err: PathBuf,
}

impl Bg {
    /// Starts `cmd` with stdout and stderr in `<dir>/<name>.out` and `.err`, with SIGINT and
    /// SIGTERM at their defaults whatever the test runner inherited.
    fn spawn(cmd: Cmd, dir: &Path, name: &str) -> Bg {
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.err"));
        let mut command = cmd.command();
        command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("create the stdout file"))
            .stderr(std::fs::File::create(&err).expect("create the stderr file"));
        // SAFETY: signal(2) is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Bg {
            child,
            name: name.to_owned(),
            out,
            err,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it printed so far.
    fn output(&self) -> String {
        format!(
            "--- {} stdout\n{}--- stderr\n{}---",
            self.name,
            std::fs::read_to_string(&self.out).unwrap_or_default(),
            std::fs::read_to_string(&self.err).unwrap_or_default()
        )
    }

    /// Returns its exit status if it has ended.
    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits for it to end, at most `bound`; panics (and kills it) otherwise.
    #[track_caller]
    fn wait_within(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} did not end within {bound:?}\n{}",
                    self.name,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asserts that it ended with exit code `want` within the bound.
    #[track_caller]
    fn expect_exit(&mut self, want: i32) {
        let status = self.wait_within(EXIT_BOUND);
        assert_eq!(
            status.code(),
            Some(want),
            "{} ended with {status:?} instead of exit {want}\n{}",
            self.name,
            self.output()
        );
    }

    /// SIGKILL and reap.
    fn kill_and_reap(&mut self) -> ExitStatus {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap")
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A process that is not our child (an orphaned grandchild), killed when dropped if it is
/// still the same process (same start time).
struct Stray {
    pid: u32,
    ticks: Option<u64>,
}

impl Stray {
    fn new(pid: u32) -> Stray {
        Stray {
            pid,
            ticks: start_ticks(pid),
        }
    }

    fn kill(&self) {
        if self.ticks.is_some() && start_ticks(self.pid) == self.ticks {
            signal(self.pid, libc::SIGKILL);
        }
    }
}

impl Drop for Stray {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal(pid: u32, sig: i32) {
    let pid = i32::try_from(pid).expect("a pid");
    // SAFETY: kill(2) has no memory effects.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}) failed");
}

/// The children of `pid`, from `/proc/<pid>/task/*/children`.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    found
}

/// `show <issue> --json` on the system clock (or at `now`).
fn show(repo: &TestRepo, issue: &str, now: Option<&str>) -> Value {
    let mut cmd = repo.lease().arg_json().args(["show", issue]);
    if let Some(now) = now {
        cmd = cmd.now(now);
    }
    let run = cmd.run();
    match run.code {
        0 => run.json(),
        4 => Value::Null,
        _ => panic!("show failed\n{run}"),
    }
}

/// Polls until `issue` is shown held by `holder`.
#[track_caller]
fn wait_held(repo: &TestRepo, issue: &str, holder: &str, now: Option<&str>) -> Value {
    poll_until(&format!("{issue} held by {holder}"), || {
        let v = show(repo, issue, now);
        (v["held"] == json!(true) && v["holder"] == json!(holder)).then_some(v)
    })
}

/// Polls until `path` exists; returns its contents.
#[track_caller]
fn wait_file(path: &Path) -> String {
    poll_until(&format!("{} written", path.display()), || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|t| t.ends_with('\n'))
    })
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `T` for stopped...).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// The `event` of every commit of `issue`'s ledger, oldest first.
fn events(chain: &[(String, Value)]) -> Vec<String> {
    chain
        .iter()
        .map(|(_, l)| l["event"].as_str().expect("an event").to_owned())
        .collect()
}

/// Asserts `git lease verify` finds every ledger clean.
#[track_caller]
fn assert_verify_clean(repo: &TestRepo) {
    let run = jrun(repo, &["verify"]);
    run.ok();
    run.json_has(&[("clean", json!(true))]);
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Runs `git lease --json <args>` in `repo` on the system clock.
fn jrun(repo: &TestRepo, args: &[&str]) -> Run {
    repo.lease().arg_json().args(args).run()
}

/// Runs `f`, returning what it returned and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed())
}

/// `run <target> --ttl <ttl> --every 300ms --grace 1s`: a run that renews often and gives its
/// child a second to stop once the lease is lost.
fn renewing<'a>(target: &[&'a str], ttl: &'a str) -> Vec<&'a str> {
    let mut args = vec!["run"];
    args.extend_from_slice(target);
    args.extend(["--ttl", ttl, "--every", "300ms", "--grace", "1s"]);
    args
}

/// `args` followed by `-- sh -c 'touch "$1"' sh <marker>`: a child that leaves a trace.
fn touching<'a>(args: &[&'a str], marker: &'a Path) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--", "sh", "-c", "touch \"$1\"", "sh", path_str(marker)]);
    all
}

/// `revoke <issue>` by an admin.
fn revoke(issue: &str) -> [&str; 6] {
    ["revoke", issue, "--reason", "test", "--holder", "admin"]
}

/// Starts `cmd` in the background with its output in `<tmp>/bg`.
fn spawn_bg(repo: &TestRepo, cmd: Cmd, name: &str) -> Bg {
    Bg::spawn(cmd, &repo.scratch("bg"), name)
}

/// Starts `cmd` (a `run` without its command) in the background with the child
/// `sh -c <script> sh <ready> <marker>`; returns it with the ready and marker files.
fn spawn_run(repo: &TestRepo, cmd: Cmd, script: &str, name: &str) -> (Bg, PathBuf, PathBuf) {
    let dir = repo.scratch("bg");
    let (ready, marker) = (dir.join("ready"), dir.join("marker"));
    let cmd = cmd
        .args(["--", "sh", "-c", script, "sh"])
        .args([&ready, &marker]);
    (Bg::spawn(cmd, &dir, name), ready, marker)
}

/// Asserts that the child of `run` wrote `got-<sig>` to `marker`: it got SIG`<sig>`.
#[track_caller]
fn assert_child_got(run: &Bg, marker: &Path, sig: &str) {
    assert_eq!(
        std::fs::read_to_string(marker).ok().as_deref(),
        Some(format!("got-{sig}\n").as_str()),
        "the child got SIG{sig}\n{}",
        run.output()
    );
}

/// Asserts that the tip of `issue` is the end of `WORKER`'s tenure.
#[track_caller]
fn assert_ended_by_worker(tip: &Value) {
    assert_fields(
        tip,
        &[("holder", Value::Null), ("previous_holder", json!(WORKER))],
    );
}

/// `sh -c` script of a child that traps `sig` (writing `got-<sig>` to `$2` and exiting 0), says
/// it is ready in `$1` and then loops until a signal ends it.
fn trapping_child(sig: &str) -> String {
    format!(
        "trap 'echo got-{sig} > \"$2\"; exit 0' {sig}; echo $$ > \"$1\"; \
         while :; do sleep 0.1; done"
    )
}

/// `sh -c` script of a child that ignores SIGTERM, says it is ready (its pid) in `$1`, and
/// loops forever (whatever else it is given).
const STUBBORN_CHILD: &str = "trap '' TERM; echo $$ > \"$1\"; while :; do sleep 0.1; done";

// ---------------------------------------------------------------------------------------------
// run: renewals, end states, exit codes, environment
// ---------------------------------------------------------------------------------------------

#[test]
fn a_child_that_outlives_several_ttls_keeps_its_lease_through_renewals() {
    let repo = TestRepo::new();
    // Seven fencing checks one second apart, by the child itself, with what run gave it. A
    // 3s lease leaves 1.3s for each renewal to land (see `StopWindow`): a loaded machine's
    // stall does not stop the child.
    let script = format!(
        "i=0; while [ $i -lt 7 ]; do \
           \"{BIN}\" check 5 --token \"$GIT_LEASE_TOKEN\" --holder \"$GIT_LEASE_HOLDER\" || exit 9; \
           i=$((i+1)); sleep 1; \
         done"
    );
    let (run, took) = timed(|| {
        repo.lease()
            .args([
                "run", "5", "--holder", WORKER, "--ttl", "3s", "--every", "500ms",
            ])
            .args(["--", "sh", "-c", &script])
            .run()
    });
    run.ok();
    assert!(
        took >= Duration::from_secs(6),
        "the child ran 7 checks a second apart ({took:?})"
    );
    let passed = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("ok: token 1 is the live tenure of 5"))
        .count();
    assert_eq!(passed, 7, "every check of the child passed\n{run}");

    let chain = repo.chain("5");
    let evs = events(&chain);
    assert_eq!(evs.first().map(String::as_str), Some("acquire"), "{evs:?}");
    assert_eq!(evs.last().map(String::as_str), Some("complete"), "{evs:?}");
    let renews = evs.iter().filter(|e| *e == "renew").count();
    assert!(
        renews >= 4,
        "at least 4 renewals in ~7s of a 3s TTL: {evs:?}"
    );
    assert_eq!(renews + 2, evs.len(), "only renewals in between: {evs:?}");
    for (_, lease) in &chain {
        assert_eq!(lease["token"], json!(1), "one tenure: {lease}");
    }
    // Each renewal extends the lease 3s from its own instant.
    for (_, lease) in chain.iter().filter(|(_, l)| l["event"] == json!("renew")) {
        let at = lease["at"].as_str().expect("at");
        let until = lease["expires_at"].as_str().expect("expires_at");
        let at = chrono::DateTime::parse_from_rfc3339(at).expect("a time");
        let until = chrono::DateTime::parse_from_rfc3339(until).expect("a time");
        assert_eq!((until - at).num_seconds(), 3, "{lease}");
    }
    // The tenure recorded a session and the run process.
    let first = &chain[0].1;
    assert!(
        first["session"]
            .as_str()
            .is_some_and(|s| s.starts_with("sha256:")),
        "{first}"
    );
    assert_eq!(first["process"]["boot_id"], json!(boot_id()), "{first}");
    assert_eq!(first["previous_holder"], Value::Null);
    assert_ended_by_worker(&chain.last().expect("a tip").1);
    assert_verify_clean(&repo);
}

/// An issue, `run` options, the command, its exit code and the event that ends the tenure.
type RunCase = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    i32,
    &'static str,
);

#[test]
fn the_childs_exit_code_is_passed_through_and_decides_the_end_state() {
    let repo = TestRepo::new();
    let cases: [RunCase; 6] = [
        ("r1", &[], &["sh", "-c", "exit 7"], 7, "release"),
        (
            "r2",
            &["--on-failure", "abandon"],
            &["sh", "-c", "exit 7"],
            7,
            "abandon",
        ),
        (
            "r3",
            &["--on-failure", "complete"],
            &["false"],
            1,
            "complete",
        ),
        ("r4", &[], &["true"], 0, "complete"),
        ("r5", &["--on-success", "release"], &["true"], 0, "release"),
        (
            "r6",
            &["--on-success", "abandon"],
            &["sh", "-c", "exit 0"],
            0,
            "abandon",
        ),
    ];
    for (issue, options, command, code, end) in cases {
        let mut args = vec!["run", issue, "--holder", WORKER, "--ttl", "1h"];
        args.extend_from_slice(options);
        args.push("--");
        args.extend_from_slice(command);
        let run = repo.run_at(&at_min(0), &args);
        run.code(code);
        let chain = repo.chain(issue);
        assert_eq!(events(&chain), vec!["acquire", end], "{issue}\n{run}");
        let tip = &chain[1].1;
        assert_eq!(tip["token"], json!(1), "{tip}");
        assert_ended_by_worker(tip);
        assert_eq!(tip["by"], Value::Null, "the holder itself ended it: {tip}");
    }
    // A child killed by a signal: 128 + the signal, and a failure.
    let run = repo.run_at(
        &at_min(0),
        &[
            "run",
            "r7",
            "--holder",
            WORKER,
            "--",
            "sh",
            "-c",
            "kill -KILL $$",
        ],
    );
    run.code(128 + 9);
    assert_eq!(events(&repo.chain("r7")), vec!["acquire", "release"]);
    // A command that cannot start: the lease is given back at once.
    let run = repo.run_at(
        &at_min(0),
        &["run", "r8", "--holder", WORKER, "--", "/nonexistent/worker"],
    );
    assert_ne!(run.code, 0, "{run}");
    let chain = repo.chain("r8");
    assert_eq!(chain.len(), 2, "acquired then given back: {chain:?}");
    assert_eq!(chain[1].1["holder"], Value::Null, "{chain:?}");
    // No command at all is bad usage.
    repo.run_at(&at_min(0), &["run", "r9", "--holder", WORKER])
        .code(2);
    assert_eq!(repo.tip("r9"), None);
    assert_verify_clean(&repo);
}

#[test]
fn the_child_gets_the_issue_token_holder_and_a_working_session_secret() {
    let repo = TestRepo::new();
    // A previous tenure, so the token is 2.
    repo.run(&["acquire", "12", "--holder", BOB, "--ttl", "1h"])
        .ok();
    repo.run(&["release", "12", "--holder", BOB]).ok();
    let out = repo.scratch("child");
    let script = format!(
        r#"out="$1"
printf '%s\n' "$GIT_LEASE_ISSUE" "$GIT_LEASE_TOKEN" "$GIT_LEASE_HOLDER" "$GIT_LEASE_SECRET" > "$out/env"
env -u GIT_LEASE_SECRET "{BIN}" --json renew "$GIT_LEASE_ISSUE" --holder "$GIT_LEASE_HOLDER" --ttl 2h > "$out/none.json"; echo $? > "$out/none.code"
env -u GIT_LEASE_SECRET "{BIN}" --json renew "$GIT_LEASE_ISSUE" --holder "$GIT_LEASE_HOLDER" --ttl 2h --secret gls_0000 > "$out/wrong.json"; echo $? > "$out/wrong.code"
env -u GIT_LEASE_SECRET "{BIN}" --json renew "$GIT_LEASE_ISSUE" --holder "$GIT_LEASE_HOLDER" --ttl 2h --secret "$GIT_LEASE_SECRET" > "$out/flag.json"; echo $? > "$out/flag.code"
"{BIN}" --json renew "$GIT_LEASE_ISSUE" --ttl 3h > "$out/env.json"; echo $? > "$out/env.code"
"#
    );
    let run = repo
        .lease()
        .args(["run", "12", "--holder", WORKER, "--ttl", "1h"])
        .args(["--", "sh", "-c", &script, "sh", path_str(&out)])
        .run();
    run.ok();
    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect("the child wrote it");
    let env = read("env");
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(lines.len(), 4, "{env}");
    assert_eq!(&lines[..3], ["12", "2", WORKER], "{env}");
    let secret = lines[3];
    assert_secret_shape(secret);
    let chain = repo.chain("12");
    let acquired = &chain[2].1;
    assert_eq!(acquired["event"], json!("acquire"));
    assert_eq!(acquired["token"], json!(2));
    assert_eq!(
        acquired["session"],
        json!(format!("sha256:{}", sha256_hex(secret))),
        "the child's secret is the tenure's session"
    );

    let outcome = |name: &str| -> (String, Value) {
        let json: Value = serde_json::from_str(read(&format!("{name}.json")).trim())
            .unwrap_or_else(|e| panic!("{name}.json: {e}"));
        (
            read(&format!("{name}.code")).trim().to_owned(),
            json["outcome"].clone(),
        )
    };
    assert_eq!(outcome("none"), ("3".into(), json!("wrong_secret")));
    assert_eq!(outcome("wrong"), ("3".into(), json!("wrong_secret")));
    assert_eq!(outcome("flag"), ("0".into(), json!("renewed")));
    assert_eq!(outcome("env"), ("0".into(), json!("renewed")));
    assert_eq!(
        events(&chain),
        vec!["acquire", "release", "acquire", "renew", "renew", "complete"]
    );
    assert_verify_clean(&repo);
}

#[test]
fn run_on_an_issue_held_by_someone_else_is_refused_and_never_starts_the_child() {
    let repo = TestRepo::new();
    repo.run(&["acquire", "13", "--holder", BOB, "--ttl", "1h"])
        .ok();
    // The same holder name over a session lease it cannot prove is refused too.
    jrun(
        &repo,
        &[
            "acquire",
            "14",
            "--holder",
            WORKER,
            "--ttl",
            "1h",
            "--session",
        ],
    )
    .ok();
    let marker = repo.scratch("out").join("ran");
    let before = repo.snapshot();
    for issue in ["13", "14"] {
        let run = repo.run(&touching(&["run", issue, "--holder", WORKER], &marker));
        run.code(3);
        assert!(!marker.exists(), "the child ran on {issue}\n{run}");
        assert_eq!(
            repo.snapshot(),
            before,
            "a refused run wrote something\n{run}"
        );
    }
    assert_eq!(show(&repo, "13", None)["holder"], json!(BOB));
    assert_eq!(show(&repo, "14", None)["holder"], json!(WORKER));
}

// ---------------------------------------------------------------------------------------------
// run: crashes, lost leases, signals
// ---------------------------------------------------------------------------------------------

#[test]
fn a_run_killed_by_sigkill_leaves_a_lease_taken_over_at_once_on_this_machine() {
    let repo = TestRepo::new();
    let mut run = spawn_bg(
        &repo,
        repo.lease().args([
            "run", "9", "--holder", WORKER, "--ttl", "1h", "--", "sleep", "300",
        ]),
        "run",
    );
    let run_pid = run.pid();
    wait_held(&repo, "9", WORKER, None);
    let sleeper = poll_until("the run's child", || children_of(run_pid).first().copied());
    let sleeper = Stray::new(sleeper);
    let recorded = repo.lease_json("9");
    assert_eq!(recorded["process"]["pid"], json!(run_pid), "{recorded}");
    assert_eq!(
        recorded["process"]["boot_id"],
        json!(boot_id()),
        "{recorded}"
    );

    // While it runs: held.
    jrun(&repo, &["acquire", "9", "--holder", BOB]).outcome(3, "held");

    // SIGKILL: no chance to release.
    let status = run.kill_and_reap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    sleeper.kill();

    let shown = show(&repo, "9", None);
    assert_eq!(shown["held"], json!(false), "{shown}");
    let taken = jrun(&repo, &["acquire", "9", "--holder", BOB, "--ttl", "1h"]);
    taken.outcome(0, "acquired");
    taken.json_has(&[("token", json!(2))]);
    assert_fields(
        &repo.lease_json("9"),
        &[
            ("takeover", json!("process_gone")),
            ("previous_holder", json!(WORKER)),
        ],
    );
    assert_eq!(events(&repo.chain("9")), vec!["acquire", "acquire"]);
    assert_verify_clean(&repo);
}

/// True once the process `pid` that started at `ticks` has ended: gone from `/proc`, a zombie
/// waiting for its new parent, or the id taken by another process.
fn ended(pid: u32, ticks: Option<u64>) -> bool {
    start_ticks(pid) != ticks || matches!(process_state(pid), None | Some('Z' | 'X'))
}

/// Polls (a bounded number of times) until `pid` has ended.
#[track_caller]
fn wait_ended(pid: u32, ticks: Option<u64>, what: &str) {
    poll_until(what, || ended(pid, ticks).then_some(()));
}

// ---------------------------------------------------------------------------------------------
// wait
// ---------------------------------------------------------------------------------------------

#[test]
fn a_command_that_is_not_there_exits_127_and_one_that_cannot_run_126_as_in_the_shell() {
    let repo = TestRepo::new();
    let not_executable = repo.scratch("bin").join("plain-file");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").expect("write a file");
    repo.lease()
        .args(["run", "x", "--holder", "a", "--", "/no/such/command"])
        .run()
        .code(127)
        .stderr_has("/no/such/command");
    let path = not_executable.to_str().expect("a UTF-8 path");
    repo.lease()
        .args(["run", "x", "--holder", "a", "--", path])
        .run()
        .code(126);
    // Nothing ran, so nobody is left waiting for the lease.
    let v = repo.lease().arg_json().args(["show", "x"]).run().json();
    assert_eq!(v["held"], false, "{v}");
}
