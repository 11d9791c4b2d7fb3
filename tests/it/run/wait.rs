//! `git lease wait`, and `run --wait`: waiting for an issue to become free (released, expired,
//! or its holder process gone), taking it with `--acquire`, and a timeout with exit 3.

use super::*;

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
