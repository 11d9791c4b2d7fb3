//! Local liveness: a lease that records its holder process is not live on this machine once
//! that process is gone, and the takeover is recorded as such; on other machines only the TTL
//! counts. Real processes live and die here; everything else runs at fixed instants. Holders
//! a reader cannot see (another PID namespace, a hidden `/proc`) are in [`namespaces`].

mod namespaces;

use serde_json::{json, Value};

use crate::env::{assert_fields, at_min, issues, jrun, TestRepo};
use crate::session::{
    assert_secret_shape, assert_verify_clean, boot_id, dead_pid, forge, pid_ns, start_ticks,
    Sleeper, ALICE, BOB,
};

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
    assert_eq!(stored["process"]["pid_ns"], json!(pid_ns()), "{stored}");
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
pub(crate) fn forged_lease(issue: &str, process: Value) -> Value {
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
            json!({"pid": gone, "boot_id": ours, "pid_ns": pid_ns(), "start_ticks": 1}),
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

#[test]
fn a_cold_listing_of_leases_whose_holder_is_gone_keeps_every_ledger_in_its_cache() {
    let repo = TestRepo::new();
    let mut worker = Sleeper::start();
    let pid = worker.pid().to_string();
    // More ledgers than a listing decodes before it rewrites the cache, in one claim.
    let held: Vec<String> = (0..70).map(|i| format!("gone-{i:02}")).collect();
    let mut claim = vec!["acquire"];
    claim.extend(held.iter().map(String::as_str));
    claim.extend(["--holder", ALICE, "--ttl", "1h", "--pid", &pid]);
    jrun(&repo, 0, &claim).ok();
    worker.kill_and_reap();
    // Read cold, each lease observed free: its holder process is gone.
    let cache = repo.git_dir().join("git-lease").join("list-cache");
    let _ = std::fs::remove_file(&cache);
    let cold = repo.json_at(&at_min(5), 0, &["list", "--all"]);
    assert_eq!(issues(&cold).len(), held.len());
    assert!(cold
        .as_array()
        .is_some_and(|all| all.iter().all(|lease| lease["held"] == json!(false))));
    // What the cache keeps is what each ledger records, not what this reader saw beside it.
    let written = std::fs::read(&cache).expect("a cold listing writes the cache");
    for issue in &held {
        assert!(
            written.windows(issue.len()).any(|w| w == issue.as_bytes()),
            "no record of {issue}"
        );
    }
    assert_eq!(repo.json_at(&at_min(5), 0, &["list", "--all"]), cold);
}
