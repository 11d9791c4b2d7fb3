//! `git lease run` and `git lease wait` (issue 6): leases held for exactly as long as a command
//! runs, and waiting for an issue to become free.
//!
//! These features are defined over real time (renewals, grace periods, polling), so some tests
//! run on the system clock and last a few seconds. Nothing sleeps to decide an outcome: a
//! background process is awaited with a generous bound, and readiness (a lease shown held, a
//! child that says it is ready, signal handlers installed) is polled a bounded number of times.

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

/// True if `pid` catches signal `sig` (the `SigCgt` mask of `/proc/<pid>/status`).
fn catches(pid: u32, sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
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

/// Stops `pid` (SIGSTOP) at a moment when it does not hold the lock of `refs/leases/<issue>`,
/// so that others can still write the ledger: a bounded number of tries, each resuming it
/// at once if it was caught holding the lock. (With reftable the lock is git's, taken by a
/// `git update-ref` child that a stopped parent does not stop; it is checked all the same.)
fn pause_outside_the_ref_lock(repo: &TestRepo, pid: u32, issue: &str) {
    let lock = repo.ref_lock(issue);
    poll_until("stopping the run outside its ref lock", || {
        signal(pid, libc::SIGSTOP);
        poll_until("the run stopped", || {
            (process_state(pid) == Some('T')).then_some(())
        });
        if lock.exists() {
            signal(pid, libc::SIGCONT);
            None
        } else {
            Some(())
        }
    });
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
    // Five fencing checks one second apart, by the child itself, with what run gave it.
    let script = format!(
        "i=0; while [ $i -lt 5 ]; do \
           \"{BIN}\" check 5 --token \"$GIT_LEASE_TOKEN\" --holder \"$GIT_LEASE_HOLDER\" || exit 9; \
           i=$((i+1)); sleep 1; \
         done"
    );
    let (run, took) = timed(|| {
        repo.lease()
            .args([
                "run", "5", "--holder", WORKER, "--ttl", "2s", "--every", "500ms",
            ])
            .args(["--", "sh", "-c", &script])
            .run()
    });
    run.ok();
    assert!(
        took >= Duration::from_secs(4),
        "the child ran 5 checks a second apart ({took:?})"
    );
    let passed = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("ok: token 1 is the live tenure of 5"))
        .count();
    assert_eq!(passed, 5, "every check of the child passed\n{run}");

    let chain = repo.chain("5");
    let evs = events(&chain);
    assert_eq!(evs.first().map(String::as_str), Some("acquire"), "{evs:?}");
    assert_eq!(evs.last().map(String::as_str), Some("complete"), "{evs:?}");
    let renews = evs.iter().filter(|e| *e == "renew").count();
    assert!(
        renews >= 3,
        "at least 3 renewals in ~5s of a 2s TTL: {evs:?}"
    );
    assert_eq!(renews + 2, evs.len(), "only renewals in between: {evs:?}");
    for (_, lease) in &chain {
        assert_eq!(lease["token"], json!(1), "one tenure: {lease}");
    }
    // Each renewal extends the lease 2s from its own instant.
    for (_, lease) in chain.iter().filter(|(_, l)| l["event"] == json!("renew")) {
        let at = lease["at"].as_str().expect("at");
        let until = lease["expires_at"].as_str().expect("expires_at");
        let at = chrono::DateTime::parse_from_rfc3339(at).expect("a time");
        let until = chrono::DateTime::parse_from_rfc3339(until).expect("a time");
        assert_eq!((until - at).num_seconds(), 2, "{lease}");
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

#[test]
fn a_revoked_run_stops_its_child_with_sigterm_and_exits_6() {
    let repo = TestRepo::new();
    let cmd = repo
        .lease()
        .args(renewing(&["11", "--holder", WORKER], "1h"));
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_held(&repo, "11", WORKER, None);
    wait_file(&ready);
    assert!(
        run.try_wait().is_none(),
        "run ended early\n{}",
        run.output()
    );

    repo.run(&revoke("11")).ok();
    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    assert!(
        run.output().contains("was revoked by admin: test"),
        "run says who revoked the lease, and why\n{}",
        run.output()
    );
    let chain = repo.chain("11");
    let tip = &chain.last().expect("a tip").1;
    assert_eq!(
        tip["event"],
        json!("revoke"),
        "nothing after the revoke: {chain:?}"
    );
    assert_eq!(tip["by"], json!("admin"), "{tip}");
    assert_verify_clean(&repo);
}

/// A tenure taken over by another holder once expired (bob's clock two hours ahead) ends the
/// run, whose message names the new holder, its token and the ground of the takeover.
#[test]
fn a_run_taken_over_says_by_whom_and_why() {
    let repo = TestRepo::new();
    let cmd = repo
        .lease()
        .args(renewing(&["12", "--holder", WORKER], "1h"));
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_held(&repo, "12", WORKER, None);
    wait_file(&ready);
    let later = crate::env::rfc3339(chrono::Utc::now() + chrono::Duration::hours(2));
    // While it is live, bob is refused.
    jrun(&repo, &["acquire", "12", "--holder", BOB]).outcome(3, "held");
    let taken = repo
        .lease()
        .now(&later)
        .args(["--json", "acquire", "12", "--holder", BOB, "--ttl", "1h"])
        .run();
    taken.outcome(0, "acquired");
    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    assert!(
        run.output().contains(&format!(
            "was taken over by {BOB} (token 2) once it had expired"
        )),
        "run says who took the lease over, and why\n{}",
        run.output()
    );
}

#[test]
fn a_child_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let repo = TestRepo::new();
    let cmd = repo
        .lease()
        .args(renewing(&["11", "--holder", WORKER], "1h"));
    let (mut run, ready, _) = spawn_run(&repo, cmd, STUBBORN_CHILD, "run");
    wait_held(&repo, "11", WORKER, None);
    let child: u32 = wait_file(&ready).trim().parse().expect("the child's pid");
    let _stray = Stray::new(child);
    assert!(start_ticks(child).is_some(), "the child runs");

    repo.run(&revoke("11")).ok();
    let ((), took) = timed(|| run.expect_exit(6));
    assert!(
        took >= Duration::from_secs(1),
        "run must give the child its grace period before SIGKILL ({took:?})"
    );
    assert!(
        start_ticks(child).is_none(),
        "the child (pid {child}) still runs after run exited\n{}",
        run.output()
    );
    assert_eq!(
        repo.lease_json("11")["event"],
        json!("revoke"),
        "nothing after the revoke"
    );
}

#[test]
fn a_run_whose_renewer_was_paused_past_expiry_and_taken_over_stops_its_child() {
    let repo = TestRepo::new();
    // The run's clock starts at T0 (and runs on with the machine's): its lease lasts a minute.
    let cmd = repo
        .lease()
        .now(&at(0))
        .args(renewing(&["16", "--holder", WORKER], "1m"));
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_held(&repo, "16", WORKER, Some(&at(0)));
    wait_file(&ready);
    // The renewer stops (the process is still there: liveness does not free it) ...
    pause_outside_the_ref_lock(&repo, run.pid(), "16");
    // ... and at T0+2m, long after its expiry, bob takes the lease over.
    let taken = repo
        .lease()
        .now(&at_min(2))
        .arg_json()
        .args(["acquire", "16", "--holder", BOB, "--ttl", "1h"])
        .run();
    signal(run.pid(), libc::SIGCONT);
    taken.ok();
    taken.json_has(&[("token", json!(2))]);
    assert_eq!(repo.lease_json("16")["takeover"], json!("expired"));

    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    let tip = repo.lease_json("16");
    assert_eq!(
        tip["holder"],
        json!(BOB),
        "the run wrote nothing after losing: {tip}"
    );
    assert_eq!(tip["event"], json!("acquire"), "{tip}");
    assert_verify_clean(&repo);
}

#[test]
fn signals_to_run_are_forwarded_to_the_child() {
    for (sig, name, issue) in [(libc::SIGTERM, "TERM", "17"), (libc::SIGINT, "INT", "18")] {
        let repo = TestRepo::new();
        let cmd = repo
            .lease()
            .args(["run", issue, "--holder", WORKER, "--ttl", "1h"]);
        let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child(name), name);
        wait_held(&repo, issue, WORKER, None);
        wait_file(&ready);
        let pid = run.pid();
        poll_until("run's signal handlers", || catches(pid, sig).then_some(()));

        signal(pid, sig);
        run.expect_exit(0);
        assert_child_got(&run, &marker, name);
        let chain = repo.chain(issue);
        assert_eq!(
            events(&chain),
            vec!["acquire", "complete"],
            "SIG{name}: the child exited 0"
        );
    }
}

/// The process group of `pid` (field 5 of `/proc/<pid>/stat`).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
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

#[test]
fn a_run_killed_by_sigkill_takes_its_child_with_it_so_no_orphan_races_the_next_holder() {
    let repo = TestRepo::new();
    let cmd = repo
        .lease()
        .args(["run", "22", "--holder", WORKER, "--ttl", "1h"]);
    // A child that ignores SIGTERM: only SIGKILL ends it.
    let (mut run, ready, _) = spawn_run(&repo, cmd, STUBBORN_CHILD, "run");
    wait_held(&repo, "22", WORKER, None);
    let child: u32 = wait_file(&ready).trim().parse().expect("the child's pid");
    let stray = Stray::new(child);
    assert!(stray.ticks.is_some(), "the child runs");
    assert_eq!(
        process_group(child),
        Some(child),
        "the child leads a process group of its own"
    );

    let status = run.kill_and_reap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    wait_ended(child, stray.ticks, "the child of the killed run ended");

    // The lease is free on this machine at once, and nothing works on token 1 any more.
    let taken = jrun(&repo, &["acquire", "22", "--holder", BOB, "--ttl", "1h"]);
    taken.outcome(0, "acquired");
    taken.json_has(&[("token", json!(2))]);
    assert_eq!(repo.lease_json("22")["takeover"], json!("process_gone"));
    assert_verify_clean(&repo);
}

#[test]
fn what_the_child_leaves_running_in_its_group_is_killed_before_the_lease_ends() {
    let repo = TestRepo::new();
    // The child starts a background worker, says its pid, and exits 0 at once.
    let run = repo
        .lease()
        .args(["run", "24", "--holder", WORKER, "--ttl", "1h", "--"])
        .args(["sh", "-c", "sleep 300 & echo $! > \"$1\"", "sh"])
        .args([repo.scratch("out").join("left")])
        .run();
    run.ok();
    let left: u32 = std::fs::read_to_string(repo.scratch("out").join("left"))
        .expect("the child wrote its worker's pid")
        .trim()
        .parse()
        .expect("a pid");
    let stray = Stray::new(left);
    // run killed it before it completed the lease; it may still await reaping by its new parent.
    wait_ended(left, stray.ticks, "the child's background worker ended");
    assert_eq!(events(&repo.chain("24")), vec!["acquire", "complete"]);
}

#[test]
fn a_lease_revoked_and_taken_again_under_the_same_name_between_renewals_is_lost() {
    let repo = TestRepo::new();
    let cmd = repo
        .lease()
        .args(renewing(&["26", "--holder", WORKER], "1h"));
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_held(&repo, "26", WORKER, None);
    wait_file(&ready);
    // Between two renewals (the run is stopped meanwhile) an administrator revokes the lease,
    // and someone elsewhere takes it again under the same holder name, without a session: a
    // renewal by that name alone would extend the new tenure.
    pause_outside_the_ref_lock(&repo, run.pid(), "26");
    let revoked = repo.run(&revoke("26"));
    let taken = jrun(&repo, &["acquire", "26", "--holder", WORKER, "--ttl", "1h"]);
    signal(run.pid(), libc::SIGCONT);
    revoked.ok();
    taken.outcome(0, "acquired");
    taken.json_has(&[("token", json!(2)), ("holder", json!(WORKER))]);
    let theirs = repo.tip("26");

    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    assert!(
        run.output().contains("its tenure (token 1,"),
        "run says which tenure it lost\n{}",
        run.output()
    );
    assert_eq!(
        repo.tip("26"),
        theirs,
        "the run wrote nothing on the new tenure"
    );
    assert_eq!(
        events(&repo.chain("26")),
        vec!["acquire", "revoke", "acquire"]
    );
    assert_verify_clean(&repo);
}

#[test]
fn a_lease_lost_before_the_child_ended_is_lost_and_nobody_elses_tenure_is_ended() {
    // The child ends (successfully) after its lease was revoked and taken again, before any
    // renewal could notice: by bob, and by someone under the run's own holder name.
    for (issue, taker) in [("27", BOB), ("28", WORKER)] {
        let repo = TestRepo::new();
        let cmd = repo.lease().args([
            "run", issue, "--holder", WORKER, "--ttl", "1h", "--every", "30m",
        ]);
        // Ready in $1; exits 0 once $2 exists.
        let script = "echo $$ > \"$1\"; while [ ! -e \"$2\" ]; do sleep 0.05; done";
        let (mut run, ready, go) = spawn_run(&repo, cmd, script, taker);
        wait_held(&repo, issue, WORKER, None);
        wait_file(&ready);
        repo.run(&revoke(issue)).ok();
        jrun(&repo, &["acquire", issue, "--holder", taker, "--ttl", "1h"]).outcome(0, "acquired");
        let theirs = repo.tip(issue);
        std::fs::write(&go, "").expect("write the go file");

        run.expect_exit(6);
        assert!(
            run.output()
                .contains("lease lost while sh ran (it exited with 0)"),
            "{}",
            run.output()
        );
        assert_eq!(repo.tip(issue), theirs, "{taker}'s tenure was left alone");
        assert_fields(
            &repo.lease_json(issue),
            &[("holder", json!(taker)), ("token", json!(2))],
        );
    }
}

#[test]
fn a_run_whose_lease_never_expires_still_stops_its_child_when_revoked() {
    let repo = TestRepo::new();
    // Read every 10s by default: the revoke is found within that.
    let cmd = repo.lease().args([
        "run", "29", "--holder", WORKER, "--ttl", "never", "--grace", "1s",
    ]);
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_held(&repo, "29", WORKER, None);
    wait_file(&ready);
    repo.run(&revoke("29")).ok();
    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    // A lease that never expires is read, not renewed: nothing but the acquire and the revoke.
    assert_eq!(events(&repo.chain("29")), vec!["acquire", "revoke"]);
    assert_verify_clean(&repo);
}

/// A lease that never expires, read by `--every` only once an hour: a revoke by another
/// process stops the child all the same, as soon as it is written, since `run` reads the lease
/// again whenever a ref of its local ledger moves. (Before, it was found only at the next
/// reading: an hour here, 10 s by default.)
#[test]
fn a_run_whose_lease_never_expires_stops_its_child_as_soon_as_it_is_revoked() {
    let repo = TestRepo::new();
    let cmd = repo.lease().args([
        "run", "29", "--holder", WORKER, "--ttl", "never", "--every", "1h", "--grace", "1s",
    ]);
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_held(&repo, "29", WORKER, None);
    wait_file(&ready);
    let revoked = Instant::now();
    repo.run(&revoke("29")).ok();
    run.expect_exit(6);
    eprintln!(
        "run --ttl never: exit 6 {:?} after the revoke",
        revoked.elapsed()
    );
    assert_child_got(&run, &marker, "TERM");
    assert!(run.output().contains("lease lost"), "{}", run.output());
    assert_eq!(events(&repo.chain("29")), vec!["acquire", "revoke"]);
    assert_verify_clean(&repo);
}

/// The parent of `pid` (field 4 of `/proc/<pid>/stat`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `$1` with `suffix`: where a grandchild of [`spawn_run`]'s child says its pid.
fn beside(ready: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", ready.display()))
}

/// `sh -c` script of a child that traps SIGTERM (writing `got-TERM` to `$2`, exiting 0) or
/// with `stubborn` ignores it; it starts a worker in its own process group (its pid in
/// `$1.group`), and a worker that ignores SIGTERM in a session of its own, orphaned at once
/// (double-forked; its pid in `$1.gone`), then says it is ready in `$1`.
fn spawning_child(stubborn: bool) -> String {
    let trap = if stubborn {
        "trap '' TERM".to_owned()
    } else {
        "trap 'echo got-TERM > \"$2\"; exit 0' TERM".to_owned()
    };
    format!(
        "{trap}; sleep 300 & echo $! > \"$1.group\"; \
         ( setsid sh -c 'trap \"\" TERM; echo $$ > \"$0\"; while :; do sleep 0.1; done' \"$1.gone\" & ); \
         while [ ! -s \"$1.gone\" ]; do sleep 0.05; done; \
         echo $$ > \"$1\"; while :; do sleep 0.1; done"
    )
}

/// Reads the pid a process wrote to `path`.
#[track_caller]
fn pid_in(path: &Path) -> u32 {
    wait_file(path).trim().parse().expect("a pid")
}

#[test]
fn a_grandchild_in_a_session_of_its_own_is_stopped_with_the_child() {
    // With a cgroup where this machine can make one, and without (the walk of /proc alone).
    for cgroup in ["1", "0"] {
        let repo = TestRepo::new();
        let cmd = repo
            .lease()
            .env("GIT_LEASE_RUN_CGROUP", cgroup)
            .args(renewing(&["30", "--holder", WORKER], "1h"));
        let (mut run, ready, marker) = spawn_run(&repo, cmd, &spawning_child(false), cgroup);
        let child = pid_in(&ready);
        let (group, gone) = (
            Stray::new(pid_in(&beside(&ready, ".group"))),
            Stray::new(pid_in(&beside(&ready, ".gone"))),
        );
        assert_eq!(
            process_group(group.pid),
            Some(child),
            "the worker is in the child's group"
        );
        assert_eq!(process_group(gone.pid), Some(gone.pid), "the other left it");
        // Its parent ended: it was reparented to run, the subreaper, not to init.
        poll_until("the orphan reparented to run", || {
            (parent_of(gone.pid) == Some(run.pid())).then_some(())
        });

        repo.run(&revoke("30")).ok();
        run.expect_exit(6);
        assert_child_got(&run, &marker, "TERM");
        wait_ended(
            group.pid,
            group.ticks,
            "the worker in the child's group ended",
        );
        wait_ended(gone.pid, gone.ticks, "the worker in its own session ended");
    }
}

/// The cgroup v2 directory of `pid`: its `0::` line of `/proc/<pid>/cgroup` under the
/// cgroup2 mount (`None` without one).
fn cgroup_dir(pid: u32) -> Option<PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next() == Some("cgroup2"))
            .then(|| left.split_whitespace().nth(4).map(str::to_owned))?
    })?;
    Some(Path::new(&mount).join(path.trim_start_matches('/')))
}

#[test]
fn a_run_killed_by_sigkill_leaves_nothing_of_its_command_running() {
    for cgroup in ["1", "0"] {
        let repo = TestRepo::new();
        let cmd = repo
            .lease()
            .env("GIT_LEASE_RUN_CGROUP", cgroup)
            .args(["run", "31", "--holder", WORKER, "--ttl", "1h"]);
        let (mut run, ready, _) = spawn_run(&repo, cmd, &spawning_child(true), cgroup);
        let child = Stray::new(pid_in(&ready));
        let group = Stray::new(pid_in(&beside(&ready, ".group")));
        let gone = Stray::new(pid_in(&beside(&ready, ".gone")));
        let own = format!("git-lease-run-{}", run.pid());
        let dir = cgroup_dir(child.pid).filter(|d| d.ends_with(&own));
        if cgroup == "1" && dir.is_none() {
            crate::env::skipped(
                crate::env::Skip::Host,
                "a_run_killed_by_sigkill_leaves_nothing_of_its_command_running",
                "its run with a cgroup: no cgroup v2 can be made here",
            );
        }
        if cgroup == "0" {
            assert_eq!(dir, None, "GIT_LEASE_RUN_CGROUP=0 makes no cgroup");
        }

        let status = run.kill_and_reap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        wait_ended(child.pid, child.ticks, "the child of the killed run ended");
        wait_ended(
            group.pid,
            group.ticks,
            "the worker in the child's group ended",
        );
        if let Some(dir) = &dir {
            wait_ended(gone.pid, gone.ticks, "the worker in its own session ended");
            poll_until("the cgroup removed", || (!dir.exists()).then_some(()));
        }
        // Without a cgroup, the worker that left the child's session runs on (README, "What
        // holds after kill -9"); it is killed when `gone` is dropped.

        let taken = jrun(&repo, &["acquire", "31", "--holder", BOB, "--ttl", "1h"]);
        taken.outcome(0, "acquired");
        assert_eq!(repo.lease_json("31")["takeover"], json!("process_gone"));
    }
}

#[test]
fn a_run_whose_renewals_fail_stops_its_child_before_the_lease_expires_and_exits_6() {
    let server = TestRepo::bare();
    let repo = TestRepo::new();
    let url = path_str(server.path()).to_owned();
    // The child notes when SIGTERM came (unix seconds), then exits.
    let script = "trap 'date +%s > \"$2\"; exit 0' TERM; echo $$ > \"$1\"; \
                  while :; do sleep 0.1; done";
    let cmd = repo.lease().args([
        "run", "--remote", &url, "23", "--holder", WORKER, "--ttl", "3s", "--every", "1s",
    ]);
    let (mut run, ready, marker) = spawn_run(&repo, cmd, script, "run");
    let child: u32 = wait_file(&ready).trim().parse().expect("the child's pid");
    let stray = Stray::new(child);
    // The remote becomes unreachable: every renewal fails from now on.
    let moved = server.root().join("moved.git");
    std::fs::rename(server.path(), &moved).expect("move the remote away");

    run.expect_exit(6);
    assert!(
        run.output().contains("no renewal succeeded in time"),
        "{}",
        run.output()
    );
    wait_ended(child, stray.ticks, "the child ended");
    let stopped_at: i64 = wait_file(&marker)
        .trim()
        .parse()
        .expect("the child noted SIGTERM's time");
    // The last lease the remote recorded, and so what everyone else judges by.
    let text = repo.git(&[
        "--git-dir",
        path_str(&moved),
        "show",
        "refs/leases/23:lease.json",
    ]);
    let tip: Value = serde_json::from_str(&text).expect("lease.json is JSON");
    assert_eq!(tip["holder"], json!(WORKER), "nothing ended it: {tip}");
    let expires_at =
        chrono::DateTime::parse_from_rfc3339(tip["expires_at"].as_str().expect("an expiry"))
            .expect("an RFC 3339 expiry")
            .timestamp();
    assert!(
        stopped_at < expires_at,
        "the child was stopped at {stopped_at}, not before the lease's expiry at {expires_at}\n{}",
        run.output()
    );
}

#[test]
fn run_refuses_a_renew_interval_that_cannot_beat_its_renew_deadline() {
    let repo = TestRepo::new();
    let marker = repo.scratch("out").join("ran");
    let before = repo.snapshot();
    for (ttl, every) in [("3s", Some("2s")), ("1h", Some("1h")), ("1s", None)] {
        let mut args = vec!["run", "25", "--holder", WORKER, "--ttl", ttl];
        if let Some(every) = every {
            args.extend(["--every", every]);
        }
        let run = repo.run(&touching(&args, &marker));
        run.code(2);
        assert!(!marker.exists(), "the child ran\n{run}");
    }
    assert_eq!(repo.snapshot(), before, "a refused run wrote something");
    // A 2s lease renews by default, in time.
    repo.run(&touching(
        &["run", "25", "--holder", WORKER, "--ttl", "2s"],
        &marker,
    ))
    .ok();
    assert!(marker.exists(), "the child ran");
}

// ---------------------------------------------------------------------------------------------
// run --remote
// ---------------------------------------------------------------------------------------------

#[test]
fn run_works_through_a_remote() {
    let daemon = Server::daemon();
    let repo = daemon.client(WORKER);
    let other = daemon.client(BOB);
    let script = format!(
        "\"{BIN}\" check \"$GIT_LEASE_ISSUE\" --remote origin --token \"$GIT_LEASE_TOKEN\" \
         --holder \"$GIT_LEASE_HOLDER\""
    );
    let run = repo
        .lease()
        .args(["run", "--remote", "origin", "15", "--ttl", "1h"])
        .args(["--", "sh", "-c", &script])
        .run();
    run.ok();
    run.stdout_has("ok: token 1 is the live tenure of 15");
    let chain = daemon.chain("15");
    assert_eq!(events(&chain), vec!["acquire", "complete"], "on the server");
    assert_eq!(chain[0].1["holder"], json!(WORKER));
    assert!(chain[0].1["session"].is_string(), "{:?}", chain[0].1);
    assert_eq!(repo.tip("15"), daemon.tip("15"));

    // Held on the server by someone this clone never heard of: refused, nothing runs.
    other
        .lease()
        .args(["acquire", "--remote", "origin", "16", "--ttl", "1h"])
        .run()
        .ok();
    let marker = repo.scratch("out").join("ran");
    let before = daemon.lease_refs();
    let run = repo.run(&touching(&["run", "--remote", "origin", "16"], &marker));
    run.code(3);
    assert!(!marker.exists(), "the child ran\n{run}");
    assert_eq!(daemon.lease_refs(), before);
    daemon.lease(&["verify"]).ok();
}

#[test]
fn a_run_through_a_remote_whose_lease_is_revoked_on_the_server_exits_6() {
    let daemon = Server::daemon();
    let repo = daemon.client(WORKER);
    let cmd = repo
        .lease()
        .args(renewing(&["--remote", "origin", "19"], "1h"));
    let (mut run, ready, marker) = spawn_run(&repo, cmd, &trapping_child("TERM"), "run");
    wait_file(&ready);
    poll_until("19 on the server", || daemon.tip("19"));
    daemon.lease(&revoke("19")).ok();
    run.expect_exit(6);
    assert_child_got(&run, &marker, "TERM");
    let chain = daemon.chain("19");
    assert_eq!(
        chain.last().map(|(_, l)| l["event"].clone()),
        Some(json!("revoke")),
        "nothing after the revoke: {chain:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// wait
// ---------------------------------------------------------------------------------------------

#[test]
fn wait_on_a_free_issue_returns_at_once() {
    let repo = TestRepo::new();
    repo.run(&["acquire", "w2", "--holder", ALICE]).ok();
    repo.run(&["release", "w2", "--holder", ALICE]).ok();
    let before = repo.snapshot();
    for issue in ["never-leased", "w2"] {
        let (run, took) = timed(|| repo.run(&["wait", issue, "--timeout", "30s"]));
        run.ok();
        assert!(
            took < Duration::from_secs(5),
            "wait on a free issue returns at once\n{run}"
        );
    }
    assert_eq!(
        repo.snapshot(),
        before,
        "wait without --acquire writes nothing"
    );
    // With --acquire: taken at once.
    repo.run(&[
        "wait",
        "w2",
        "--acquire",
        "--holder",
        BOB,
        "--timeout",
        "30s",
    ])
    .ok();
    let tip = repo.lease_json("w2");
    assert_eq!(
        (tip["holder"].clone(), tip["token"].clone()),
        (json!(BOB), json!(2))
    );
}

#[test]
fn wait_on_a_held_issue_times_out_with_exit_3() {
    let repo = TestRepo::new();
    repo.run(&["acquire", "w1", "--holder", ALICE, "--ttl", "1h"])
        .ok();
    let before = repo.snapshot();
    let (run, took) = timed(|| repo.run(&["wait", "w1", "--timeout", "1s"]));
    run.code(3);
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "wait --timeout 1s took {took:?}\n{run}"
    );
    repo.run(&[
        "wait",
        "w1",
        "--timeout",
        "1s",
        "--acquire",
        "--holder",
        BOB,
    ])
    .code(3);
    assert_eq!(
        repo.snapshot(),
        before,
        "a wait that timed out wrote something"
    );
}

#[test]
fn wait_acquire_takes_the_issue_once_its_holder_releases_it() {
    let repo = TestRepo::new();
    repo.run(&["acquire", "w3", "--holder", ALICE, "--ttl", "1h"])
        .ok();
    let mut wait = spawn_bg(
        &repo,
        repo.lease()
            .args(["wait", "w3", "--acquire", "--holder", BOB])
            .args(["--ttl", "1h", "--timeout", "30s"]),
        "wait",
    );
    // It blocks while the issue is held.
    let blocked_until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < blocked_until {
        assert!(
            wait.try_wait().is_none(),
            "wait ended while the issue was held\n{}",
            wait.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    repo.run(&["release", "w3", "--holder", ALICE]).ok();
    wait.expect_exit(0);
    let chain = repo.chain("w3");
    assert_eq!(events(&chain), vec!["acquire", "release", "acquire"]);
    assert_fields(&chain[2].1, &[("holder", json!(BOB)), ("token", json!(2))]);
    assert_verify_clean(&repo);
}

#[test]
fn wait_acquire_takes_over_once_the_holder_process_is_gone() {
    let repo = TestRepo::new();
    let mut holder = Sleeper::start();
    let pid = holder.pid().to_string();
    repo.run(&[
        "acquire", "w4", "--holder", ALICE, "--ttl", "1h", "--pid", &pid,
    ])
    .ok();
    let mut wait = spawn_bg(
        &repo,
        repo.lease().args([
            "wait",
            "w4",
            "--acquire",
            "--holder",
            BOB,
            "--timeout",
            "30s",
        ]),
        "wait",
    );
    assert!(wait.try_wait().is_none(), "{}", wait.output());
    holder.kill_and_reap();
    wait.expect_exit(0);
    assert_fields(
        &repo.lease_json("w4"),
        &[
            ("holder", json!(BOB)),
            ("token", json!(2)),
            ("takeover", json!("process_gone")),
        ],
    );
    assert_verify_clean(&repo);
}

#[test]
fn wait_returns_when_the_lease_expires() {
    let repo = TestRepo::new();
    repo.run_at(&at(0), &["acquire", "w5", "--holder", ALICE, "--ttl", "2s"])
        .ok();
    // wait's clock starts at T0 and runs with the machine's: the lease ends 2s later.
    let (run, took) = timed(|| repo.run_at(&at(0), &["wait", "w5", "--timeout", "20s"]));
    run.ok();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(15),
        "wait returned after {took:?}\n{run}"
    );
}

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

#[test]
fn run_wait_blocks_until_the_issue_is_free_then_runs_and_gives_up_at_its_timeout() {
    let repo = TestRepo::new();
    // Held by bob for good: a bounded wait gives up with exit 3 and runs nothing.
    repo.lease()
        .args(["acquire", "busy", "--holder", "bob", "--ttl", "1h"])
        .run()
        .ok();
    let marker = repo.scratch("w").join("ran");
    let touch = format!("touch '{}'", marker.display());
    repo.lease()
        .args([
            "run",
            "busy",
            "--holder",
            "al",
            "--wait=300ms",
            "--",
            "sh",
            "-c",
            &touch,
        ])
        .run()
        .code(3)
        .stderr_has("held");
    assert!(!marker.exists(), "the command ran without the lease");
    // Held by bob until bob releases: run --wait starts the command once it is free.
    let mut waiting = repo
        .lease()
        .args([
            "run", "busy", "--holder", "al", "--wait", "--", "sh", "-c", &touch,
        ])
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start run --wait");
    repo.lease()
        .args(["release", "busy", "--holder", "bob"])
        .run()
        .ok();
    let status = waiting.wait().expect("wait for run");
    assert_eq!(status.code(), Some(0));
    assert!(marker.exists(), "the command ran");
    let log = repo.lease().arg_json().args(["log", "busy"]).run().json();
    assert_eq!(log[0]["event"], "complete", "{log}");
    assert_eq!(log[1]["holder"], "al", "{log}");
    assert_eq!(log[1]["token"], 2, "{log}");
}
