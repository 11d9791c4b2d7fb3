//! The processes of a run: signals to `run` reach its child, and whatever the command started
//! (its group, a grandchild in a session of its own, everything under a cgroup) ends with it,
//! even when `run` itself is killed with SIGKILL.

use super::*;

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

/// Reads the pid a process wrote to `path`.
#[track_caller]
fn pid_in(path: &Path) -> u32 {
    wait_file(path).trim().parse().expect("a pid")
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

/// `$1` with `suffix`: where a grandchild of [`spawn_run`]'s child says its pid.
fn beside(ready: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", ready.display()))
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

/// The process group of `pid` (field 5 of `/proc/<pid>/stat`).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
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
