//! A run whose lease is revoked, taken over, lost or failing to renew stops its child (SIGTERM,
//! then SIGKILL after the grace period) and exits 6, ending nobody else's tenure; a renew
//! interval that cannot beat its deadline is refused.

use super::*;

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

    // Timed from before the revoke: run may see it before the revoking process has ended.
    let ((), took) = timed(|| {
        repo.run(&revoke("11")).ok();
        run.expect_exit(6)
    });
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

#[test]
fn a_run_whose_renewals_fail_stops_its_child_before_the_lease_expires_and_exits_6() {
    let server = TestRepo::bare();
    let repo = TestRepo::new();
    let url = path_str(server.path()).to_owned();
    // The child notes when SIGTERM came (unix seconds), then exits.
    let script = "trap 'date +%s > \"$2\"; exit 0' TERM; echo $$ > \"$1\"; \
                  while :; do sleep 0.1; done";
    let cmd = repo.lease().args([
        "run", "--remote", &url, "23", "--holder", WORKER, "--ttl", "7s", "--every", "1s",
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
