//! Sessions: `acquire --session` prints a secret once and stores only its SHA-256; every
//! renew, release, complete, abandon and re-acquire of that tenure needs it, and the secret
//! reaches no object, ref, reflog or file. The helpers above the tests serve the other tests
//! of claims by programs too (`liveness`, `end_states`, `multi_acquire`, `run`).
//!
//! Everything here runs at fixed instants (`GIT_LEASE_NOW`) except where a real process has to
//! live or die.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::env::{assert_fields, at_min, jrun, Run, TestRepo};

pub(crate) use crate::env::{ALICE, BOB};

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

/// This process's PID namespace: the inode of `/proc/self/ns/pid` (the test binary and the
/// binary under test share it).
pub(crate) fn pid_ns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid")
        .expect("this test needs /proc/self/ns/pid")
        .ino()
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
pub(crate) fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("start true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

/// Writes `lease` as a one-commit ledger `refs/leases/<issue>` with plain git plumbing (the
/// ref must not exist yet).
pub(crate) fn forge(repo: &TestRepo, issue: &str, lease: &Value) -> String {
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
pub(crate) fn events(repo: &TestRepo, issue: &str) -> Vec<String> {
    repo.chain(issue)
        .iter()
        .map(|(_, l)| l["event"].as_str().expect("an event").to_owned())
        .collect()
}

/// Asserts `git lease verify` (at `min`) finds every ledger clean.
#[track_caller]
pub(crate) fn assert_verify_clean(repo: &TestRepo, min: i64) {
    let run = jrun(repo, min, &["verify"]);
    run.ok();
    assert_eq!(run.json()["clean"], json!(true), "{run}");
}

/// `acquire <issue> --holder <holder> --ttl <ttl>` at `min` minutes after T0.
pub(crate) fn acquire(repo: &TestRepo, min: i64, issue: &str, holder: &str, ttl: &str) -> Run {
    jrun(
        repo,
        min,
        &["acquire", issue, "--holder", holder, "--ttl", ttl],
    )
}

/// The entry of `issue` in a `list --json` answer.
#[track_caller]
pub(crate) fn listed<'a>(list: &'a Value, issue: &str) -> &'a Value {
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
pub(crate) fn with_secret<'a>(args: &[&'a str], secret: &'a str) -> Vec<&'a str> {
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
pub(crate) fn each(answers: &Value, field: &str) -> Vec<Value> {
    answers
        .as_array()
        .unwrap_or_else(|| panic!("an array: {answers}"))
        .iter()
        .map(|a| a[field].clone())
        .collect()
}

/// The `sha256:<hex>` a lease records for the session of `secret`.
pub(crate) fn session_hash(secret: &str) -> Value {
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
