//! Leases for workers that run unattended (issue 6), everything but `run` and `wait`:
//!
//! - sessions: `acquire --session` prints a secret once and stores only its SHA-256; every
//!   renew, release, complete, abandon and re-acquire of that tenure needs it;
//! - local liveness: a lease that records its holder process is not live on this machine once
//!   that process is gone, and the takeover is recorded as such; on other machines only the
//!   TTL counts;
//! - end states (`complete`, `abandon`) and context on a claim (`--note`, `--task`), with the
//!   `list` filters;
//! - multi-issue claims: all or none, locally (one ref transaction) and through a remote (one
//!   atomic push), alone and under a race.
//!
//! Everything here runs at fixed instants (`GIT_LEASE_NOW`) except where a real process has to
//! live or die.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};

use serde_json::{json, Value};

use crate::env::{assert_fields, at_min, issues, jrun, Run, TestRepo};
use crate::server::Server;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

// ---------------------------------------------------------------------------------------------
// Helpers (also used by `run`)
// ---------------------------------------------------------------------------------------------

/// Returns the SHA-256 of `text` in hex, as computed by `sha256sum` (not by the product).
pub(crate) fn sha256_hex(text: &str) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sha256sum");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(text.as_bytes())
        .expect("write to sha256sum");
    let out = child.wait_with_output().expect("wait for sha256sum");
    assert!(out.status.success(), "sha256sum failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("sha256sum prints ASCII");
    let hex = text.split_whitespace().next().expect("a digest").to_owned();
    assert_eq!(hex.len(), 64, "not a SHA-256 digest: {text}");
    hex
}

/// Asserts that `secret` is `gls_` followed by 64 lowercase hex digits.
#[track_caller]
pub(crate) fn assert_secret_shape(secret: &str) {
    let hex = secret
        .strip_prefix("gls_")
        .unwrap_or_else(|| panic!("a session secret starts with gls_: {secret:?}"));
    assert!(
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "a session secret is gls_ and 64 hex digits: {secret:?}"
    );
}

fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Returns every file under `dir` (recursively) whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let kind = std::fs::symlink_metadata(&path).expect("metadata");
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                if contains_bytes(&bytes, needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

/// Asserts that nothing readable in `repo` contains `secret` (nor its 64 hex digits): no
/// object (`git cat-file --batch-all-objects --batch`), no commit or diff (`git log -p --all`),
/// no ref, and no file anywhere under the repository (reflogs, config, packed-refs, index...).
/// `stored_hash` (the hex SHA-256 of the secret) must be found in the objects, which shows the
/// search looks at the lease records themselves.
#[track_caller]
pub(crate) fn assert_secret_nowhere(repo: &TestRepo, secret: &str, stored_hash: &str) {
    let hex = secret.strip_prefix("gls_").unwrap_or(secret);
    let objects = repo.git_run(&["cat-file", "--batch-all-objects", "--batch"]);
    objects.ok();
    assert!(
        objects.stdout.contains(stored_hash),
        "the lease objects should hold the session hash {stored_hash}:\n{}",
        objects.stdout
    );
    assert!(
        !objects.stdout.contains(hex),
        "an object contains the session secret {secret}:\n{}",
        objects.stdout
    );
    let log = repo.git(&["log", "-p", "--all", "--reflog", "--format=fuller"]);
    assert!(
        !log.contains(hex),
        "git log -p --all shows the secret:\n{log}"
    );
    let refs = repo.git(&["for-each-ref"]);
    assert!(!refs.contains(hex), "a ref mentions the secret:\n{refs}");
    let files = files_containing(repo.path(), hex.as_bytes());
    assert!(
        files.is_empty(),
        "files under the repository contain the secret {secret}: {files:?}"
    );
}

/// This machine's boot id.
pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .expect("this test needs /proc/sys/kernel/random/boot_id")
        .trim()
        .to_owned()
}

/// Field 22 of `/proc/<pid>/stat` (the start time in clock ticks), read independently of the
/// product.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// A child process (`sleep 300`) standing in for a worker; killed and reaped when dropped.
pub(crate) struct Sleeper(Child);

impl Sleeper {
    pub(crate) fn start() -> Sleeper {
        Sleeper(
            Command::new("sleep")
                .arg("300")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start sleep"),
        )
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL, then wait(): the process is gone, not a zombie.
    pub(crate) fn kill_and_reap(&mut self) {
        self.0.kill().expect("SIGKILL the sleeper");
        let status = self.0.wait().expect("reap the sleeper");
        assert!(!status.success(), "sleep was killed: {status:?}");
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Returns the pid of a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("start true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

/// Writes `lease` as a one-commit ledger `refs/leases/<issue>` with plain git plumbing (the
/// ref must not exist yet).
fn forge(repo: &TestRepo, issue: &str, lease: &Value) -> String {
    let mut text = serde_json::to_string_pretty(lease).expect("serialize");
    text.push('\n');
    let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], text.as_bytes());
    let tree = repo.git_stdin(
        &["mktree"],
        format!("100644 blob {blob}\tlease.json\n").as_bytes(),
    );
    let commit = repo.git(&["commit-tree", &tree, "-m", &format!("acquire {issue}")]);
    repo.git(&["update-ref", &format!("refs/leases/{issue}"), &commit, ""]);
    commit
}

/// The `event` of every commit of `issue`'s ledger, oldest first.
fn events(repo: &TestRepo, issue: &str) -> Vec<String> {
    repo.chain(issue)
        .iter()
        .map(|(_, l)| l["event"].as_str().expect("an event").to_owned())
        .collect()
}

/// Asserts `git lease verify` (at `min`) finds every ledger clean.
#[track_caller]
fn assert_verify_clean(repo: &TestRepo, min: i64) {
    let run = jrun(repo, min, &["verify"]);
    run.ok();
    assert_eq!(run.json()["clean"], json!(true), "{run}");
}

/// `acquire <issue> --holder <holder> --ttl <ttl>` at `min` minutes after T0.
fn acquire(repo: &TestRepo, min: i64, issue: &str, holder: &str, ttl: &str) -> Run {
    jrun(
        repo,
        min,
        &["acquire", issue, "--holder", holder, "--ttl", ttl],
    )
}

/// The entry of `issue` in a `list --json` answer.
#[track_caller]
fn listed<'a>(list: &'a Value, issue: &str) -> &'a Value {
    list.as_array()
        .expect("an array")
        .iter()
        .find(|v| v["issue"] == json!(issue))
        .unwrap_or_else(|| panic!("{issue} is listed: {list}"))
}

/// `acquire <issue> --holder alice --ttl <ttl> --session`.
fn session_claim<'a>(issue: &'a str, ttl: &'a str) -> Vec<&'a str> {
    vec![
        "acquire",
        issue,
        "--holder",
        ALICE,
        "--ttl",
        ttl,
        "--session",
    ]
}

/// Starts a session lease of `issue` for alice at T0 ([`session_claim`]); returns its secret.
#[track_caller]
fn alice_session(repo: &TestRepo, issue: &str, ttl: &str) -> String {
    let v = repo.json_at(&at_min(0), 0, &session_claim(issue, ttl));
    v["secret"].as_str().expect("a secret").to_owned()
}

/// `args` followed by `--secret <secret>`.
fn with_secret<'a>(args: &[&'a str], secret: &'a str) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--secret", secret]);
    all
}

/// Like [`jrun`], with the secret given by `GIT_LEASE_SECRET`.
fn jrun_env_secret(repo: &TestRepo, min: i64, args: &[&str], secret: &str) -> Run {
    repo.lease()
        .now(&at_min(min))
        .arg_json()
        .args(args)
        .env("GIT_LEASE_SECRET", secret)
        .run()
}

/// `field` of every answer of a multi-issue `--json` answer, in order.
#[track_caller]
fn each(answers: &Value, field: &str) -> Vec<Value> {
    answers
        .as_array()
        .unwrap_or_else(|| panic!("an array: {answers}"))
        .iter()
        .map(|a| a[field].clone())
        .collect()
}

/// The `sha256:<hex>` a lease records for the session of `secret`.
fn session_hash(secret: &str) -> Value {
    json!(format!("sha256:{}", sha256_hex(secret)))
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

#[test]
fn a_session_secret_is_printed_once_and_only_its_hash_is_stored() {
    let repo = TestRepo::new();
    let run = jrun(&repo, 0, &session_claim("s1", "1h"));
    let v = run.outcome(0, "acquired");
    let secret = v["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("acquire --session --json gives a secret\n{run}"))
        .to_owned();
    assert_secret_shape(&secret);

    // lease.json stores sha256:<hex of the secret> and never the secret.
    let hash = sha256_hex(&secret);
    let stored = repo.lease_json("s1");
    assert_eq!(
        stored["session"],
        json!(format!("sha256:{hash}")),
        "{stored}"
    );

    // A second session gets another secret.
    let other = jrun(&repo, 0, &session_claim("s2", "1h"));
    other.ok();
    let other_secret = other.json()["secret"]
        .as_str()
        .expect("a secret")
        .to_owned();
    assert_secret_shape(&other_secret);
    assert_ne!(other_secret, secret, "every session has its own secret");

    // The human form prints it once too.
    let human = repo.run_at(&at_min(0), &session_claim("s3", "1h"));
    human.ok();
    let lines: Vec<&str> = human
        .stdout
        .lines()
        .filter(|l| l.contains("gls_"))
        .collect();
    assert_eq!(lines.len(), 1, "the secret is printed once\n{human}");

    // The same holder acquiring again with the secret: a re-acquire, no new secret, same
    // session.
    let again = jrun(&repo, 1, &with_secret(&session_claim("s1", "1h"), &secret));
    again.outcome(0, "acquired");
    let a = again.json_has(&[("token", json!(1))]);
    assert!(
        a.get("secret").is_none(),
        "a re-acquire does not start a session, so prints no secret\n{again}"
    );
    assert_eq!(repo.lease_json("s1")["event"], json!("reacquire"));
    assert_eq!(
        repo.lease_json("s1")["session"],
        json!(format!("sha256:{hash}"))
    );

    // No later read ever shows it (human or JSON).
    for args in [
        vec!["show", "s1"],
        vec!["list"],
        vec!["list", "--all"],
        vec!["log", "s1"],
        vec!["verify"],
    ] {
        for json in [false, true] {
            let mut cmd = repo.lease().now(&at_min(2));
            if json {
                cmd = cmd.arg_json();
            }
            let run = cmd.args(&args).run();
            run.ok();
            assert!(
                !run.stdout.contains(&secret[4..]) && !run.stderr.contains(&secret[4..]),
                "`{}` shows the secret\n{run}",
                run.command
            );
        }
    }
    assert_secret_nowhere(&repo, &secret, &hash);
    assert_secret_nowhere(&repo, &other_secret, &sha256_hex(&other_secret));
}

#[test]
fn a_missing_or_wrong_secret_is_refused_even_for_the_same_holder_and_writes_nothing() {
    let repo = TestRepo::new();
    let mut secrets = BTreeMap::new();
    for issue in ["renew", "release", "complete", "abandon"] {
        secrets.insert(issue, alice_session(&repo, issue, "1h"));
    }
    // A well-formed secret of another session.
    let foreign = alice_session(&repo, "other", "1h");

    for op in ["renew", "release", "complete", "abandon"] {
        let before = repo.snapshot();
        // No secret, the other session's secret by flag, a garbage one by the environment.
        let attempts: Vec<(&str, crate::env::Cmd)> = vec![
            ("no secret", repo.lease().args([op, op, "--holder", ALICE])),
            (
                "another session's secret (--secret)",
                repo.lease()
                    .args([op, op, "--holder", ALICE, "--secret", &foreign]),
            ),
            (
                "another session's secret (GIT_LEASE_SECRET)",
                repo.lease()
                    .args([op, op, "--holder", ALICE])
                    .env("GIT_LEASE_SECRET", &foreign),
            ),
            (
                "a malformed secret",
                repo.lease()
                    .args([op, op, "--holder", ALICE])
                    .env("GIT_LEASE_SECRET", "gls_nope"),
            ),
        ];
        for (what, cmd) in attempts {
            let run = cmd.now(&at_min(5)).arg_json().run();
            run.code(3);
            let v = run.json();
            assert_eq!(
                v["outcome"],
                json!("wrong_secret"),
                "{op} with {what}\n{run}"
            );
            assert_eq!(v["wrote"], json!(false), "{op} with {what}\n{run}");
            assert_eq!(v["holder"], json!(ALICE), "still held\n{run}");
            assert_eq!(repo.snapshot(), before, "{op} with {what} wrote something");
        }
        // The lease is untouched: only the acquire.
        assert_eq!(events(&repo, op), vec!["acquire"]);
    }

    // With the secret, by flag or by environment, each works.
    let renew = ["renew", "renew", "--holder", ALICE, "--ttl", "1h"];
    let r = jrun_env_secret(&repo, 10, &renew, &secrets["renew"]);
    r.outcome(0, "renewed");
    r.json_has(&[("expires_at", json!(at_min(70)))]);
    jrun(&repo, 11, &with_secret(&renew, &secrets["renew"])).outcome(0, "renewed");
    assert_eq!(events(&repo, "renew"), vec!["acquire", "renew", "renew"]);

    let release = ["release", "release", "--holder", ALICE];
    jrun(&repo, 12, &with_secret(&release, &secrets["release"])).outcome(0, "released");
    let complete = ["complete", "complete", "--holder", ALICE];
    jrun_env_secret(&repo, 12, &complete, &secrets["complete"]).outcome(0, "released");
    let abandon = ["abandon", "abandon", "--holder", ALICE];
    jrun(&repo, 12, &with_secret(&abandon, &secrets["abandon"])).outcome(0, "released");
    for op in ["release", "complete", "abandon"] {
        assert_eq!(events(&repo, op), vec!["acquire", op]);
        let tip = repo.lease_json(op);
        assert_eq!(tip["holder"], Value::Null);
        assert_eq!(tip["token"], json!(1));
        assert_eq!(tip["previous_holder"], json!(ALICE));
    }
    assert_verify_clean(&repo, 12);
    for secret in secrets.values().chain([&foreign]) {
        assert_secret_nowhere(&repo, secret, &sha256_hex(secret));
    }
}

#[test]
fn another_holder_is_not_the_holder_whatever_secret_it_gives() {
    let repo = TestRepo::new();
    let v = repo.json_at(
        &at_min(0),
        0,
        &["acquire", "42", "--holder", ALICE, "--session"],
    );
    let secret = v["secret"].as_str().expect("a secret").to_owned();
    let before = repo.snapshot();
    for op in ["renew", "release", "complete", "abandon"] {
        jrun(&repo, 1, &[op, "42", "--holder", BOB, "--secret", &secret]).outcome(3, "not_holder");
    }
    let claim = ["acquire", "42", "--holder", BOB];
    jrun(&repo, 1, &with_secret(&claim, &secret)).outcome(3, "held");
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn a_reacquire_by_the_same_holder_needs_the_secret() {
    let repo = TestRepo::new();
    let secret = alice_session(&repo, "42", "1h");
    let before = repo.snapshot();

    jrun(&repo, 5, &["acquire", "42", "--holder", ALICE]).outcome(3, "wrong_secret");
    // Asking for a new session does not help either.
    let run = jrun(&repo, 5, &["acquire", "42", "--holder", ALICE, "--session"]);
    let v = run.outcome(3, "wrong_secret");
    assert!(
        v.get("secret").is_none(),
        "a refused call shows no secret\n{run}"
    );
    let zeros = format!("gls_{}", "0".repeat(64));
    jrun_env_secret(&repo, 5, &["acquire", "42", "--holder", ALICE], &zeros)
        .outcome(3, "wrong_secret");
    assert_eq!(
        repo.snapshot(),
        before,
        "refused re-acquires wrote something"
    );

    let claim = ["acquire", "42", "--holder", ALICE, "--ttl", "1h"];
    let run = jrun_env_secret(&repo, 5, &claim, &secret);
    run.outcome(0, "acquired");
    run.json_has(&[("token", json!(1)), ("expires_at", json!(at_min(65)))]);
    assert_fields(
        &repo.lease_json("42"),
        &[
            ("event", json!("reacquire")),
            ("session", session_hash(&secret)),
        ],
    );
    assert_eq!(events(&repo, "42"), vec!["acquire", "reacquire"]);
}

#[test]
fn an_expired_session_lease_can_be_freed_by_anyone_without_the_secret() {
    let repo = TestRepo::new();
    for issue in ["e1", "e2", "e3"] {
        alice_session(&repo, issue, "10m");
    }
    // Before expiry: refused.
    jrun(&repo, 9, &["release", "e1", "--holder", ALICE]).outcome(3, "wrong_secret");

    // At expiry: anyone, no secret.
    jrun(&repo, 10, &["release", "e1", "--holder", BOB]).outcome(0, "released");
    assert_fields(
        &repo.lease_json("e1"),
        &[
            ("previous_holder", json!(ALICE)),
            ("by", json!(BOB)),
            ("token", json!(1)),
        ],
    );
    // The holder itself without its secret, too.
    jrun(&repo, 10, &["release", "e2", "--holder", ALICE]).outcome(0, "released");
    // And a takeover needs no secret.
    let run = jrun(&repo, 10, &["acquire", "e3", "--holder", BOB]);
    run.ok();
    let v = run.json();
    assert_eq!(
        (v["token"].clone(), v["holder"].clone()),
        (json!(2), json!(BOB))
    );
    let tip = repo.lease_json("e3");
    assert_eq!(tip["takeover"], json!("expired"));
    assert!(
        tip.get("session").is_none(),
        "the new tenure has no session: {tip}"
    );
    assert_verify_clean(&repo, 10);
}

#[test]
fn the_secret_never_reaches_any_object_ref_reflog_or_file() {
    let repo = TestRepo::new();
    // Reflogs for every ref, so the search covers them too.
    repo.git(&["config", "core.logAllRefUpdates", "always"]);
    let v = repo.json_at(
        &at_min(0),
        0,
        &[
            "acquire",
            "x",
            "y",
            "--holder",
            ALICE,
            "--ttl",
            "1h",
            "--session",
            "--note",
            "n",
            "--task",
            "t",
        ],
    );
    let secret = v[0]["secret"].as_str().expect("a secret").to_owned();
    assert_eq!(v[1]["secret"], json!(secret), "one session for the claim");
    let hash = sha256_hex(&secret);
    assert_eq!(repo.lease_json("y")["session"], session_hash(&secret));

    // Every way of giving the secret, refusals included.
    let renew = ["renew", "x", "--holder", ALICE];
    jrun(&repo, 1, &renew).code(3);
    jrun(&repo, 1, &with_secret(&renew, &secret)).ok();
    jrun_env_secret(&repo, 2, &["acquire", "x", "--holder", ALICE], &secret).ok();
    jrun(
        &repo,
        3,
        &with_secret(&["complete", "x", "--holder", ALICE], &secret),
    )
    .ok();
    jrun_env_secret(&repo, 3, &["abandon", "y", "--holder", ALICE], &secret).ok();
    assert_eq!(
        events(&repo, "x"),
        vec!["acquire", "renew", "reacquire", "complete"]
    );
    assert_eq!(events(&repo, "y"), vec!["acquire", "abandon"]);

    // A `run`, whose secret only its child sees: the child saves it outside the repository.
    let saved = repo.scratch("out").join("secret");
    let run = repo
        .lease()
        .now(&at_min(4))
        .args([
            "run",
            "z",
            "--holder",
            ALICE,
            "--ttl",
            "1h",
            "--",
            "sh",
            "-c",
            "printf %s \"$GIT_LEASE_SECRET\" > \"$1\"",
            "sh",
            saved.to_str().expect("UTF-8"),
        ])
        .run();
    run.ok();
    let run_secret = std::fs::read_to_string(&saved).expect("the child saved the secret");
    assert_secret_shape(&run_secret);
    let run_hash = sha256_hex(&run_secret);
    let first = &repo.chain("z")[0].1;
    assert_eq!(first["session"], session_hash(&run_secret), "{first}");
    assert_eq!(events(&repo, "z"), vec!["acquire", "complete"]);

    assert_secret_nowhere(&repo, &secret, &hash);
    assert_secret_nowhere(&repo, &run_secret, &run_hash);
    // Packing changes nothing.
    repo.git(&["gc", "-q", "--prune=now"]);
    assert_secret_nowhere(&repo, &secret, &hash);
    assert_secret_nowhere(&repo, &run_secret, &run_hash);
}

// ---------------------------------------------------------------------------------------------
// Local liveness
// ---------------------------------------------------------------------------------------------

#[test]
fn a_gone_holder_process_frees_the_lease_at_once_on_this_machine() {
    let repo = TestRepo::new();
    let mut worker = Sleeper::start();
    let pid = worker.pid();
    let pid_text = pid.to_string();
    let run = jrun(
        &repo,
        0,
        &[
            "acquire", "7", "--holder", ALICE, "--ttl", "1h", "--pid", &pid_text,
        ],
    );
    run.ok();
    run.json_has(&[("token", json!(1))]);
    let stored = repo.lease_json("7");
    assert_eq!(stored["process"]["pid"], json!(pid), "{stored}");
    assert_eq!(stored["process"]["boot_id"], json!(boot_id()), "{stored}");
    assert_eq!(
        stored["process"]["start_ticks"],
        json!(start_ticks(pid).expect("the sleeper runs")),
        "{stored}"
    );

    // While the process lives: held, for every command.
    let run = jrun(&repo, 5, &["acquire", "7", "--holder", BOB]);
    run.outcome(3, "held");
    run.json_has(&[("holder", json!(ALICE))]);
    let shown = repo.json_at(&at_min(5), 0, &["show", "7"]);
    assert_eq!(shown["held"], json!(true), "{shown}");
    jrun(&repo, 5, &["check", "7", "--token", "1"]).ok();
    assert_eq!(issues(&repo.json_at(&at_min(5), 0, &["list"])), ["7"]);
    jrun(&repo, 5, &["release", "7", "--holder", BOB]).outcome(3, "not_holder");

    // Gone (killed and reaped): not live, at the same instant, long before the expiry.
    worker.kill_and_reap();
    assert_eq!(start_ticks(pid), None, "the sleeper is gone");
    let before = repo.snapshot();
    let shown = repo.json_at(&at_min(5), 0, &["show", "7"]);
    assert_eq!(shown["held"], json!(false), "{shown}");
    assert_eq!(shown["holder"], Value::Null, "{shown}");
    assert_eq!(shown["last_holder"], json!(ALICE), "{shown}");
    assert_ne!(shown["state"], json!("held"), "{shown}");
    jrun(&repo, 5, &["check", "7", "--token", "1"]).code(3);
    assert!(issues(&repo.json_at(&at_min(5), 0, &["list"])).is_empty());
    assert_eq!(repo.snapshot(), before, "reads wrote nothing");

    let run = jrun(&repo, 5, &["acquire", "7", "--holder", BOB, "--ttl", "1h"]);
    run.outcome(0, "acquired");
    run.json_has(&[("token", json!(2)), ("holder", json!(BOB))]);
    let tip = repo.lease_json("7");
    assert_fields(
        &tip,
        &[
            ("takeover", json!("process_gone")),
            ("previous_holder", json!(ALICE)),
            ("at", json!(at_min(5))),
        ],
    );
    assert!(
        tip.get("process").is_none(),
        "bob recorded no process: {tip}"
    );
    assert_verify_clean(&repo, 5);

    let log = repo.json_at(&at_min(5), 0, &["log", "7"]);
    let log_events: Vec<(Value, Value, Value)> = log
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| (e["event"].clone(), e["token"].clone(), e["holder"].clone()))
        .collect();
    assert_eq!(
        log_events,
        vec![
            (json!("acquire"), json!(2), json!(BOB)),
            (json!("acquire"), json!(1), json!(ALICE)),
        ]
    );
    let human = repo.run_at(&at_min(5), &["log", "7"]);
    human.ok();
    human.stdout_has("took over from alice@example.com");
}

#[test]
fn a_gone_session_holder_can_be_freed_without_its_secret() {
    let repo = TestRepo::new();
    let mut worker = Sleeper::start();
    let pid = worker.pid().to_string();
    let v = repo.json_at(
        &at_min(0),
        0,
        &[
            "acquire",
            "8",
            "--holder",
            ALICE,
            "--ttl",
            "1h",
            "--session",
            "--pid",
            &pid,
        ],
    );
    assert_secret_shape(v["secret"].as_str().expect("a secret"));
    jrun(&repo, 1, &["release", "8", "--holder", ALICE]).outcome(3, "wrong_secret");
    worker.kill_and_reap();
    jrun(&repo, 1, &["release", "8", "--holder", BOB]).outcome(0, "released");
    assert_fields(
        &repo.lease_json("8"),
        &[("by", json!(BOB)), ("previous_holder", json!(ALICE))],
    );
    assert_verify_clean(&repo, 1);
}

#[test]
fn acquire_pid_of_no_process_is_refused() {
    let repo = TestRepo::new();
    let pid = dead_pid().to_string();
    let run = repo.run_at(
        &at_min(0),
        &["acquire", "9", "--holder", ALICE, "--pid", &pid],
    );
    run.code(2);
    assert_eq!(repo.tip("9"), None);
}

/// A forged first commit: alice holds `issue` from T0 to T0+10m with process `process`.
fn forged_lease(issue: &str, process: Value) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": "acquire",
        "holder": ALICE,
        "token": 1,
        "acquired_at": at_min(0),
        "expires_at": at_min(10),
        "at": at_min(0),
        "process": process,
    })
}

#[test]
fn a_process_recorded_on_another_machine_is_judged_by_the_ttl_only() {
    let repo = TestRepo::new();
    let gone = dead_pid();
    let ours = boot_id();
    let elsewhere = "00000000-1111-4222-8333-444444444444";
    assert_ne!(ours, elsewhere);
    forge(
        &repo,
        "remote-box",
        &forged_lease(
            "remote-box",
            json!({"pid": gone, "boot_id": elsewhere, "start_ticks": 1}),
        ),
    );
    // The same record from this machine, as a control: the forging is read as intended.
    forge(
        &repo,
        "this-box",
        &forged_lease(
            "this-box",
            json!({"pid": gone, "boot_id": ours, "start_ticks": 1}),
        ),
    );
    assert_verify_clean(&repo, 0);

    // Another machine's process: live until the TTL ends, whatever this machine's pids say.
    let shown = repo.json_at(&at_min(5), 0, &["show", "remote-box"]);
    assert_eq!(shown["held"], json!(true), "{shown}");
    jrun(&repo, 5, &["acquire", "remote-box", "--holder", BOB]).outcome(3, "held");
    jrun(&repo, 9, &["check", "remote-box", "--token", "1"]).ok();

    // This machine's gone process: not live.
    let shown = repo.json_at(&at_min(5), 0, &["show", "this-box"]);
    assert_eq!(shown["held"], json!(false), "{shown}");
    let run = jrun(&repo, 5, &["acquire", "this-box", "--holder", BOB]);
    run.ok();
    run.json_has(&[("token", json!(2))]);
    assert_eq!(
        repo.lease_json("this-box")["takeover"],
        json!("process_gone")
    );

    // At the expiry, the other machine's lease is free like any other.
    let run = jrun(&repo, 10, &["acquire", "remote-box", "--holder", BOB]);
    run.ok();
    run.json_has(&[("token", json!(2))]);
    assert_fields(
        &repo.lease_json("remote-box"),
        &[
            ("takeover", json!("expired")),
            ("previous_holder", json!(ALICE)),
        ],
    );
    assert_verify_clean(&repo, 10);
}

// ---------------------------------------------------------------------------------------------
// End states and context
// ---------------------------------------------------------------------------------------------

#[test]
fn complete_and_abandon_are_recorded_as_their_own_events_and_keep_the_token() {
    let repo = TestRepo::new();
    for issue in ["done", "dropped", "freed"] {
        acquire(&repo, 0, issue, ALICE, "1h").ok();
    }
    for (op, issue) in [
        ("complete", "done"),
        ("abandon", "dropped"),
        ("release", "freed"),
    ] {
        let run = jrun(&repo, 1, &[op, issue, "--holder", ALICE]);
        run.outcome(0, "released");
        run.json_has(&[
            ("event", json!(op)),
            ("token", json!(1)),
            ("held", json!(false)),
        ]);

        let log = repo.json_at(&at_min(1), 0, &["log", issue]);
        assert_fields(
            &log[0],
            &[
                ("event", json!(op)),
                ("token", json!(1)),
                ("holder", Value::Null),
                ("previous_holder", json!(ALICE)),
            ],
        );
        assert_eq!(log[1]["event"], json!("acquire"), "{log}");
        let human = repo.run_at(&at_min(1), &["log", issue]);
        human.ok();
        assert!(
            human.stdout.lines().next().is_some_and(|l| l.contains(op)),
            "log shows {op} first\n{human}"
        );
        // A second end of the same tenure is a release of nothing.
        jrun(&repo, 2, &[op, issue, "--holder", ALICE]).outcome(0, "not_held");
        assert_eq!(events(&repo, issue), vec!["acquire", op]);
    }

    // list --all shows them free, with their last event and token.
    let all = repo.json_at(&at_min(2), 0, &["list", "--all"]);
    let rows: Vec<(Value, Value, Value, Value)> = all
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| {
            (
                v["issue"].clone(),
                v["state"].clone(),
                v["event"].clone(),
                v["token"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (json!("done"), json!("free"), json!("complete"), json!(1)),
            (json!("dropped"), json!("free"), json!("abandon"), json!(1)),
            (json!("freed"), json!("free"), json!("release"), json!(1)),
        ]
    );
    let human = repo.run_at(&at_min(2), &["list", "--all"]);
    human.ok();
    for issue in ["done", "dropped", "freed"] {
        assert!(
            human
                .stdout
                .lines()
                .any(|l| l.starts_with(issue) && l.contains("free")),
            "list --all shows {issue} free\n{human}"
        );
    }
    // Live-only list: nothing.
    assert!(issues(&repo.json_at(&at_min(2), 0, &["list"])).is_empty());
    // The next tenure counts on.
    let run = jrun(&repo, 3, &["acquire", "done", "--holder", BOB]);
    run.ok();
    run.json_has(&[("token", json!(2))]);
    assert_verify_clean(&repo, 3);
}

#[test]
fn note_and_task_are_stored_with_the_claim_and_shown_everywhere() {
    let repo = TestRepo::new();
    let note = "flaky test in CI: see run 7";
    let run = jrun(
        &repo,
        0,
        &[
            "acquire", "n1", "--holder", ALICE, "--ttl", "1h", "--note", note, "--task", "JOB-42",
        ],
    );
    run.ok();
    let v = run.json();
    assert_eq!(
        (v["note"].clone(), v["task"].clone()),
        (json!(note), json!("JOB-42"))
    );
    acquire(&repo, 0, "n2", BOB, "1h").ok();

    let stored = repo.lease_json("n1");
    assert_eq!(stored["note"], json!(note), "{stored}");
    assert_eq!(stored["task"], json!("JOB-42"), "{stored}");

    let shown = repo.json_at(&at_min(1), 0, &["show", "n1"]);
    assert_eq!(shown["note"], json!(note), "{shown}");
    assert_eq!(shown["task"], json!("JOB-42"), "{shown}");
    let human = repo.run_at(&at_min(1), &["show", "n1"]);
    human.ok();
    human.stdout_has(note).stdout_has("JOB-42");

    let list = repo.json_at(&at_min(1), 0, &["list"]);
    let n1 = listed(&list, "n1");
    assert_eq!(n1["note"], json!(note), "{list}");
    assert_eq!(n1["task"], json!("JOB-42"), "{list}");
    let n2 = listed(&list, "n2");
    assert!(
        n2.get("note").is_none() && n2.get("task").is_none(),
        "{list}"
    );

    // A renew keeps the context; log shows it on every event of the tenure.
    jrun(&repo, 2, &["renew", "n1", "--holder", ALICE, "--ttl", "1h"]).ok();
    let stored = repo.lease_json("n1");
    assert_eq!(
        (stored["note"].clone(), stored["task"].clone()),
        (json!(note), json!("JOB-42"))
    );
    let log = repo.json_at(&at_min(2), 0, &["log", "n1"]);
    for entry in log.as_array().expect("an array") {
        assert_eq!(entry["note"], json!(note), "{log}");
        assert_eq!(entry["task"], json!("JOB-42"), "{log}");
    }
    assert_eq!(log.as_array().map(Vec::len), Some(2), "{log}");

    // A re-acquire can change it.
    jrun(
        &repo,
        3,
        &["acquire", "n1", "--holder", ALICE, "--task", "JOB-43"],
    )
    .ok();
    let stored = repo.lease_json("n1");
    assert_eq!(stored["task"], json!("JOB-43"), "{stored}");
    assert_eq!(stored["note"], json!(note), "{stored}");
}

#[test]
fn list_filters_by_holder_state_and_prefix() {
    let repo = TestRepo::new();
    acquire(&repo, 0, "gh/1", ALICE, "1h").ok();
    acquire(&repo, 0, "gh/2", ALICE, "10m").ok();
    acquire(&repo, 0, "gh/3", BOB, "1h").ok();
    acquire(&repo, 0, "jira/9", ALICE, "1h").ok();
    jrun(&repo, 1, &["complete", "jira/9", "--holder", ALICE]).ok();
    acquire(&repo, 1, "jira/10", BOB, "1h").ok();
    // At +20m: gh/1 held (alice), gh/2 expired (alice), gh/3 held (bob), jira/9 free (was
    // alice), jira/10 held (bob).
    let list = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list"];
        all.extend_from_slice(args);
        let mut got = issues(&repo.json_at(&at_min(20), 0, &all));
        got.sort();
        got
    };
    assert_eq!(list(&[]), ["gh/1", "gh/3", "jira/10"]);
    assert_eq!(
        list(&["--all"]),
        ["gh/1", "gh/2", "gh/3", "jira/10", "jira/9"]
    );
    assert_eq!(list(&["--holder", ALICE]), ["gh/1"]);
    assert_eq!(list(&["--holder", BOB]), ["gh/3", "jira/10"]);
    assert_eq!(
        list(&["--holder", ALICE, "--all"]),
        ["gh/1", "gh/2", "jira/9"]
    );
    assert_eq!(list(&["--state", "held"]), ["gh/1", "gh/3", "jira/10"]);
    assert_eq!(list(&["--state", "expired"]), ["gh/2"]);
    assert_eq!(list(&["--state", "free"]), ["jira/9"]);
    assert_eq!(list(&["gh/"]), ["gh/1", "gh/3"]);
    assert_eq!(list(&["gh/", "--all"]), ["gh/1", "gh/2", "gh/3"]);
    assert_eq!(list(&["jira/", "--state", "free"]), ["jira/9"]);
    assert_eq!(list(&["--holder", BOB, "--state", "held", "gh"]), ["gh/3"]);
    assert_eq!(list(&["--holder", ALICE, "--state", "expired"]), ["gh/2"]);
    assert!(list(&["--holder", "carol@example.com", "--all"]).is_empty());
    assert!(list(&["nothing/"]).is_empty());

    // The human table agrees.
    let human = repo.run_at(&at_min(20), &["list", "--state", "expired"]);
    human.ok();
    let rows: Vec<&str> = human.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{human}");
    assert!(
        rows[0].starts_with("gh/2") && rows[0].contains("expired"),
        "{human}"
    );
    let bad = repo.run_at(&at_min(20), &["list", "--state", "sleeping"]);
    bad.code(2);
}

// ---------------------------------------------------------------------------------------------
// Multi-issue claims
// ---------------------------------------------------------------------------------------------

#[test]
fn acquire_of_several_issues_takes_all_of_them_in_one_answer() {
    let repo = TestRepo::new();
    let mut claim = vec!["acquire", "a", "b", "c"];
    claim.extend(["--holder", ALICE, "--ttl", "1h", "--session", "--task", "T"]);
    let run = jrun(&repo, 0, &claim);
    run.ok();
    let v = run.json();
    let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
    assert_eq!(answers.len(), 3, "{run}");
    let secret = answers[0]["secret"].as_str().expect("a secret").to_owned();
    for (answer, issue) in answers.iter().zip(["a", "b", "c"]) {
        assert_eq!(answer["issue"], json!(issue), "in the order given\n{run}");
        assert_fields(
            answer,
            &[
                ("outcome", json!("acquired")),
                ("wrote", json!(true)),
                ("holder", json!(ALICE)),
                ("token", json!(1)),
                ("secret", json!(secret)),
            ],
        );
        assert_eq!(repo.commit_count(issue), 1);
        assert_fields(
            &repo.lease_json(issue),
            &[("task", json!("T")), ("session", session_hash(&secret))],
        );
        assert_eq!(answer["commit"], json!(repo.tip(issue).expect("a ledger")));
    }
    // The one session frees each of them.
    for issue in ["a", "b", "c"] {
        jrun(&repo, 1, &["release", issue, "--holder", ALICE]).code(3);
        jrun(
            &repo,
            1,
            &with_secret(&["complete", issue, "--holder", ALICE], &secret),
        )
        .ok();
    }
    // Again, over a history: token 2 everywhere; a repeated id counts once.
    let run = jrun(
        &repo,
        2,
        &[
            "acquire", "a", "b", "c", "a", "--holder", BOB, "--ttl", "1h",
        ],
    );
    run.ok();
    let v = run.json();
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{run}");
    for answer in v.as_array().expect("an array") {
        assert_eq!(answer["token"], json!(2), "{run}");
        assert!(
            answer.get("secret").is_none(),
            "no session, no secret\n{run}"
        );
    }
    assert_verify_clean(&repo, 2);
}

#[test]
fn a_refused_multi_claim_writes_nothing_and_reports_the_others_skipped() {
    let repo = TestRepo::new();
    // `a` has a history (free now), `b` is held by bob, `c` was never leased.
    acquire(&repo, 0, "a", BOB, "1h").ok();
    jrun(&repo, 1, &["release", "a", "--holder", BOB]).ok();
    acquire(&repo, 1, "b", BOB, "1h").ok();
    let before = repo.snapshot();
    let refs_before = repo.lease_refs();

    let mut claim = vec!["acquire", "a", "b", "c"];
    claim.extend(["--holder", ALICE, "--ttl", "1h", "--session"]);
    let run = jrun(&repo, 5, &claim);
    run.code(3);
    let v = run.json();
    let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
    let outcomes: Vec<(Value, Value, Value)> = answers
        .iter()
        .map(|a| (a["issue"].clone(), a["outcome"].clone(), a["wrote"].clone()))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (json!("a"), json!("skipped"), json!(false)),
            (json!("b"), json!("held"), json!(false)),
            (json!("c"), json!("skipped"), json!(false)),
        ],
        "{run}"
    );
    assert_eq!(answers[1]["holder"], json!(BOB), "{run}");
    assert!(
        answers.iter().all(|a| a.get("secret").is_none()),
        "a refused claim shows no secret\n{run}"
    );
    assert_eq!(repo.snapshot(), before, "a refused claim wrote something");
    assert_eq!(repo.lease_refs(), refs_before);
    assert_eq!(repo.tip("c"), None);

    // The human form says so and exits 3 too.
    let human = repo.run_at(&at_min(5), &["acquire", "c", "b", "--holder", ALICE]);
    human.code(3);
    assert_eq!(repo.snapshot(), before);

    // Once b is free, the same claim takes all three.
    jrun(&repo, 6, &["release", "b", "--holder", BOB]).ok();
    let run = jrun(&repo, 7, &["acquire", "a", "b", "c", "--holder", ALICE]);
    run.ok();
    let tokens = each(&run.json(), "token");
    assert_eq!(tokens, vec![json!(2), json!(2), json!(1)], "{run}");
    assert_verify_clean(&repo, 7);
}

const RACERS_PER_SIDE: usize = 6;
const RACE_CYCLES: usize = 5;

/// What one racing worker saw.
#[derive(Debug, Default)]
struct ClaimTally {
    holder: String,
    issues: Vec<&'static str>,
    /// For every claim it won: the token of each issue.
    wins: Vec<BTreeMap<String, u64>>,
    refused: usize,
    lost_race: usize,
}

fn claim_worker(
    repo: &TestRepo,
    holder: String,
    issues: Vec<&'static str>,
    barrier: &Barrier,
) -> ClaimTally {
    let mut args: Vec<&str> = vec!["acquire"];
    args.extend(issues.iter().copied());
    args.extend(["--holder", holder.as_str(), "--ttl", "never"]);
    let mut tally = ClaimTally {
        holder: holder.clone(),
        issues: issues.clone(),
        ..ClaimTally::default()
    };
    barrier.wait();
    for _ in 0..RACE_CYCLES {
        let run = repo.lease().arg_json().args(&args).run();
        match run.code {
            0 => {
                let v = run.json();
                let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
                assert_eq!(answers.len(), issues.len(), "{run}");
                let mut tokens = BTreeMap::new();
                for (answer, issue) in answers.iter().zip(&issues) {
                    assert_eq!(answer["issue"], json!(issue), "{run}");
                    assert_eq!(answer["outcome"], json!("acquired"), "{run}");
                    assert_eq!(answer["wrote"], json!(true), "{run}");
                    assert_eq!(answer["holder"], json!(holder), "{run}");
                    tokens.insert(
                        issue.to_string(),
                        answer["token"].as_u64().expect("a token"),
                    );
                }
                // Open-ended and only its holder can free it: it holds every issue now.
                for issue in &issues {
                    let shown = repo.lease().arg_json().args(["show", issue]).run();
                    shown.ok();
                    let s = shown.json();
                    assert_eq!(s["holder"], json!(holder), "a partial claim?\n{shown}");
                    assert_eq!(s["token"], json!(tokens[*issue]), "{shown}");
                }
                for issue in &issues {
                    let rel = repo
                        .lease()
                        .arg_json()
                        .args(["release", issue, "--holder", holder.as_str()])
                        .run();
                    rel.ok();
                    assert_eq!(rel.json()["outcome"], json!("released"), "{rel}");
                }
                tally.wins.push(tokens);
            }
            3 => {
                let v = run.json();
                let answers = v.as_array().unwrap_or_else(|| panic!("an array\n{run}"));
                assert_eq!(answers.len(), issues.len(), "{run}");
                let mut held = 0;
                for answer in answers {
                    assert_eq!(answer["wrote"], json!(false), "{run}");
                    match answer["outcome"].as_str() {
                        Some("held") => {
                            held += 1;
                            assert_ne!(answer["holder"], json!(holder), "{run}");
                        }
                        Some("skipped") => {}
                        _ => panic!("a refused claim answers held or skipped\n{run}"),
                    }
                }
                assert!(held >= 1, "a refused claim names what was held\n{run}");
                tally.refused += 1;
            }
            5 => tally.lost_race += 1,
            _ => panic!("unexpected answer to a multi-claim\n{run}"),
        }
    }
    tally
}

#[test]
fn racing_multi_claims_are_all_or_nothing() {
    let repo = Arc::new(TestRepo::new());
    let barrier = Arc::new(Barrier::new(2 * RACERS_PER_SIDE));
    let mut handles = Vec::new();
    for i in 0..2 * RACERS_PER_SIDE {
        let (holder, issues) = if i < RACERS_PER_SIDE {
            (format!("p{i}"), vec!["x", "y", "z"])
        } else {
            (format!("q{i}"), vec!["z", "w"])
        };
        let repo = Arc::clone(&repo);
        let barrier = Arc::clone(&barrier);
        handles.push(std::thread::spawn(move || {
            claim_worker(&repo, holder, issues, &barrier)
        }));
    }
    let tallies: Vec<ClaimTally> = handles
        .into_iter()
        .map(|h| h.join().expect("a racer panicked"))
        .collect();
    let wins: usize = tallies.iter().map(|t| t.wins.len()).sum();
    assert!(wins > 0, "someone must have won: {tallies:?}");
    for t in &tallies {
        assert_eq!(t.wins.len() + t.refused + t.lost_race, RACE_CYCLES, "{t:?}");
    }

    // Every ledger alternates acquire/release by the same holder, tokens 1..=n.
    let mut tenures: BTreeMap<&str, Vec<(String, u64)>> = BTreeMap::new();
    for issue in ["x", "y", "z", "w"] {
        let chain = repo.chain(issue);
        assert_eq!(chain.len() % 2, 0, "{issue} ends free: {chain:?}");
        let mut list = Vec::new();
        for (i, pair) in chain.chunks(2).enumerate() {
            let (acq, rel) = (&pair[0].1, &pair[1].1);
            assert_eq!(acq["event"], json!("acquire"), "{issue}: {chain:?}");
            assert_eq!(rel["event"], json!("release"), "{issue}: {chain:?}");
            assert_eq!(acq["token"], json!(i + 1), "{issue}: {chain:?}");
            assert_eq!(rel["token"], json!(i + 1), "{issue}: {chain:?}");
            assert_eq!(rel["previous_holder"], acq["holder"], "{issue}: {chain:?}");
            list.push((
                acq["holder"].as_str().expect("a holder").to_owned(),
                i as u64 + 1,
            ));
        }
        tenures.insert(issue, list);
    }
    // Each win is exactly one tenure on each of its issues, with the tokens it was told; no
    // tenure exists that no win accounts for (a partial claim would be one).
    let mut accounted: BTreeMap<&str, BTreeSet<(String, u64)>> = BTreeMap::new();
    for t in &tallies {
        for win in &t.wins {
            for (issue, token) in win {
                let issue: &str = t
                    .issues
                    .iter()
                    .find(|i| *i == issue)
                    .expect("one of its issues");
                assert!(
                    tenures[issue].contains(&(t.holder.clone(), *token)),
                    "{} won {issue} with token {token}, which the ledger does not record: {:?}",
                    t.holder,
                    tenures[issue]
                );
                assert!(
                    accounted
                        .entry(issue)
                        .or_default()
                        .insert((t.holder.clone(), *token)),
                    "token {token} of {issue} reported twice"
                );
            }
        }
    }
    for (issue, list) in &tenures {
        let recorded: BTreeSet<(String, u64)> = list.iter().cloned().collect();
        assert_eq!(
            recorded,
            accounted.get(issue).cloned().unwrap_or_default(),
            "{issue}: tenures that no whole claim accounts for"
        );
    }
    // Per holder, the same number of tenures on each of its issues; none on the others.
    for t in &tallies {
        for issue in ["x", "y", "z", "w"] {
            let n = tenures[issue]
                .iter()
                .filter(|(h, _)| *h == t.holder)
                .count();
            let want = if t.issues.contains(&issue) {
                t.wins.len()
            } else {
                0
            };
            assert_eq!(n, want, "{} has {n} tenures of {issue}", t.holder);
        }
    }
    assert_eq!(tenures["z"].len(), wins, "every claim includes z");
    let none: Vec<String> = issues(&repo.json_at(&at_min(0), 0, &["list"]));
    assert!(none.is_empty(), "everything was released: {none:?}");
    let run = repo.lease().arg_json().args(["verify"]).run();
    run.ok();
    assert_eq!(run.json()["clean"], json!(true), "{run}");
}

#[test]
fn a_multi_claim_through_a_remote_is_one_atomic_push() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    let bob = daemon.client(BOB);

    // Uncontended: all three land in one push.
    let pushes = |d: &Server| {
        d.log()
            .lines()
            .filter(|l| l.contains("Request receive-pack"))
            .count()
    };
    let before_pushes = pushes(&daemon);
    let run = jrun(
        &alice,
        0,
        &[
            "acquire", "--remote", "origin", "m1", "m2", "m3", "--ttl", "1h",
        ],
    );
    run.ok();
    assert_eq!(
        pushes(&daemon),
        before_pushes + 1,
        "one push for the claim\n{}",
        daemon.log()
    );
    for issue in ["m1", "m2", "m3"] {
        let chain = daemon.chain(issue);
        assert_eq!(chain.len(), 1, "{issue}: {chain:?}");
        assert_eq!(chain[0].1["holder"], json!(ALICE));
        assert_eq!(alice.tip(issue), daemon.tip(issue));
    }

    // Refused by the rules: b held by alice on the server, which bob's clone has never seen.
    let server_before = daemon.lease_refs();
    let run = jrun(
        &bob,
        1,
        &[
            "acquire", "--remote", "origin", "n1", "m2", "n3", "--ttl", "1h",
        ],
    );
    run.code(3);
    let outcomes = each(&run.json(), "outcome");
    assert_eq!(
        outcomes,
        vec![json!("skipped"), json!("held"), json!("skipped")],
        "{run}"
    );
    assert_eq!(
        daemon.lease_refs(),
        server_before,
        "nothing reached the server"
    );
    assert_eq!(bob.tip("n1"), None);

    // Refused by the server for one ref only: an update hook that declines n3. A push that
    // was not atomic would land n1 and n2.
    daemon.install_hook(
        "update",
        "case \"$1\" in refs/leases/n3) echo \"n3 is frozen\" >&2; exit 1;; esac\nexit 0",
    );
    let run = jrun(
        &bob,
        2,
        &[
            "acquire", "--remote", "origin", "n1", "n2", "n3", "--ttl", "1h",
        ],
    );
    assert_ne!(run.code, 0, "the server refused part of the claim\n{run}");
    assert_eq!(
        daemon.lease_refs(),
        server_before,
        "part of a refused claim landed on the server\n{run}"
    );
    for issue in ["n1", "n2", "n3"] {
        assert_eq!(bob.tip(issue), None, "{issue} recorded locally\n{run}");
    }
    let run = daemon.lease(&["verify"]);
    run.ok();
}

#[test]
fn racing_multi_claims_through_a_remote_are_all_or_nothing() {
    const PER_SIDE: usize = 3;
    let daemon = Arc::new(Server::daemon());
    let barrier = Arc::new(Barrier::new(2 * PER_SIDE));
    let mut handles = Vec::new();
    for i in 0..2 * PER_SIDE {
        let (holder, issues): (String, Vec<&str>) = if i < PER_SIDE {
            (format!("p{i}"), vec!["x", "y", "z"])
        } else {
            (format!("q{i}"), vec!["z", "w"])
        };
        let daemon = Arc::clone(&daemon);
        let barrier = Arc::clone(&barrier);
        handles.push(std::thread::spawn(move || {
            let repo = daemon.client(&holder);
            let mut args = vec!["acquire", "--remote", "origin"];
            args.extend(issues.iter().copied());
            args.extend(["--ttl", "never"]);
            barrier.wait();
            let run = repo.lease().arg_json().args(&args).run();
            (holder, issues, run)
        }));
    }
    let results: Vec<(String, Vec<&str>, Run)> = handles
        .into_iter()
        .map(|h| h.join().expect("a racer panicked"))
        .collect();
    // Open-ended claims that all include z: exactly one can win.
    let winners: Vec<&(String, Vec<&str>, Run)> =
        results.iter().filter(|(_, _, r)| r.code == 0).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one claim wins z: {:?}",
        results.iter().map(|r| &r.2).collect::<Vec<_>>()
    );
    let (winner, won, _) = winners[0];
    for issue in ["x", "y", "z", "w"] {
        let chain = daemon.chain(issue);
        if won.contains(&issue) {
            assert_eq!(chain.len(), 1, "{issue}: {chain:?}");
            assert_eq!(chain[0].1["holder"], json!(winner), "{issue}: {chain:?}");
            assert_eq!(chain[0].1["token"], json!(1));
        } else {
            assert!(
                chain.is_empty(),
                "{issue} was written by a claim that lost: {chain:?}"
            );
        }
    }
    daemon.lease(&["verify"]).ok();
    // Every loser answered as a loser.
    for (_, _, run) in &results {
        match run.code {
            0 => {}
            3 => {
                for answer in run.json().as_array().expect("an array") {
                    assert_ne!(answer["outcome"], json!("acquired"), "{run}");
                    assert_eq!(answer["wrote"], json!(false), "{run}");
                }
            }
            5 => {}
            _ => panic!(
                "a claim that lost the race must be retried, refused (3) or reported lost (5)\n{run}"
            ),
        }
    }
}

/// Writes `<dir>/git`, a wrapper that runs `before_first_push` (with the real PATH) the first
/// time it is asked to push, then the real git: a deterministic way to land a concurrent write
/// between a claim's fetch and its push.
fn git_wrapper(dir: &Path, real_path: &str, before_first_push: &str) {
    use std::os::unix::fs::PermissionsExt;
    let mark = dir.join("pushed-once");
    let script = format!(
        "#!/bin/sh\nPATH='{real_path}'; export PATH\n\
         case \" $* \" in *\" push \"*)\n\
           if [ ! -e '{mark}' ]; then : > '{mark}'; {before_first_push}; fi;;\n\
         esac\nexec git \"$@\"\n",
        mark = mark.display()
    );
    let path = dir.join("git");
    std::fs::write(&path, script).expect("write the git wrapper");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("make the wrapper executable");
}

#[test]
fn a_multi_claim_that_loses_its_atomic_push_to_a_concurrent_write_fetches_and_decides_again() {
    let daemon = Server::daemon();
    let alice = daemon.client(ALICE);
    let bob = daemon.client(BOB);
    let k1 = ["acquire", "--remote", "origin", "k1", "--ttl", "1h"];
    jrun(&bob, 0, &k1).ok();
    jrun(&bob, 1, &["release", "--remote", "origin", "k1"]).ok();

    // Between alice's fetches and her push, bob takes k1 and frees it again on the server:
    // her push carries a stale expected value for k1 and is refused as a whole; k1 is free
    // again, so after fetching and deciding again she takes both (token 3 and 1).
    let real_path = std::env::var("PATH").expect("PATH");
    let wrap = alice.scratch("wrap");
    let bob_dir = bob.path().display().to_string();
    git_wrapper(
        &wrap,
        &real_path,
        &format!(
            "(cd '{bob_dir}' && GIT_CEILING_DIRECTORIES='{bob_root}'; export GIT_CEILING_DIRECTORIES; \
             GIT_LEASE_NOW={now2} '{bin}' acquire --remote origin k1 \
             --ttl 1h && GIT_LEASE_NOW={now3} '{bin}' release --remote origin k1) >/dev/null",
            bob_root = bob.root().display(),
            now2 = at_min(2),
            now3 = at_min(3),
            bin = crate::env::BIN,
        ),
    );
    let run = alice
        .lease()
        .now(&at_min(4))
        .env("PATH", format!("{}:{real_path}", wrap.display()))
        .arg_json()
        .args(["acquire", "--remote", "origin", "k1", "k2", "--ttl", "1h"])
        .run();
    assert!(wrap.join("pushed-once").exists(), "the wrapper ran\n{run}");
    let chain = daemon.chain("k1");
    assert_eq!(
        chain
            .iter()
            .filter(|(_, l)| l["holder"] == json!(BOB))
            .count(),
        2,
        "bob's concurrent tenure landed in between: {chain:?}"
    );
    // Whatever the answer, never a partial claim on the server.
    let alice_has_k1 = chain
        .last()
        .is_some_and(|(_, l)| l["holder"] == json!(ALICE));
    assert_eq!(
        daemon.tip("k2").is_some(),
        alice_has_k1,
        "a partial claim landed\n{run}"
    );
    run.ok();
    let tokens = each(&run.json(), "token");
    assert_eq!(tokens, vec![json!(3), json!(1)], "{run}");
    let chain = daemon.chain("k1");
    assert_eq!(chain.len(), 5, "{chain:?}");
    assert_eq!(chain[4].1["holder"], json!(ALICE));
    assert_eq!(daemon.chain("k2").len(), 1);
    daemon.lease(&["verify"]).ok();
}
