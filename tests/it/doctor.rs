//! `git lease doctor` against real servers: a healthy hooked one (every check ok, the hook's
//! version and policy shown), one with no identity, a hookless one (told what to install), a
//! login that is not the holder name (with the line to run), a server clock
//! beyond the skew, and a clone whose refspecs work against its ledgers. No probe leaves a ref
//! behind; and the hook lets doctor's scratch refs pass, reporting itself to them. Servers this
//! project did not write (dulwich's) are `doctor_thirdparty`, in the `zoo` test binary.

use crate::doctor_checks::{allowed, assert_check, assert_no_probe_ref, checks, doctor, verdicts};
use crate::env::{at, TestRepo};
use crate::server::{git, lease, Server};

#[test]
fn a_healthy_hooked_server_passes_every_check_and_shows_its_hook_and_policy() {
    let mut server = Server::http_builtin(&["alice", "ops"]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.admins", "ops");
    server.config("lease.fence", "refs/heads/issue/*");
    server.start_at(&at(0));
    let alice = server.client("alice");
    alice.git(&["config", "lease.remote", "origin"]);

    let run = doctor(&alice, 0, &[]);
    run.ok();
    for l in run.stdout.lines() {
        assert!(l.starts_with("ok "), "every check should be ok: {l}\n{run}");
    }
    let version = env!("CARGO_PKG_VERSION");
    assert_check(&run, "reachable", "ok", "origin over http://");
    assert_check(
        &run,
        "compare_and_swap",
        "ok",
        "refused a push whose expected old value was stale",
    );
    assert_check(
        &run,
        "hook",
        "ok",
        &format!("git-lease {version} answered the probe"),
    );
    assert_check(
        &run,
        "policy",
        "ok",
        "identity from REMOTE_USER; fences: refs/heads/issue/*; requireToken: false; admins: ops",
    );
    assert_check(
        &run,
        "identity",
        "ok",
        "the server knows you as alice, your holder name",
    );
    assert_check(&run, "clock", "ok", "agrees with yours");
    assert_check(&run, "capabilities", "ok", "atomic, push-options");

    let answer = lease(&alice, 0, &["--json", "doctor"]);
    answer.ok();
    let answer = answer.json();
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["compare_and_swap"], "honoured");
    assert_eq!(answer["hook"]["version"], version);
    assert_eq!(answer["hook"]["pusher"], "alice");
    assert_eq!(answer["hook"]["admins"], serde_json::json!(["ops"]));
    assert_eq!(answer["server"]["transport"], "http://");
    assert!(checks(&answer)
        .iter()
        .all(|(_, status, _, fix)| status == "ok" && fix.is_none()));

    assert_no_probe_ref(&server.refs());
    assert_no_probe_ref(&alice.git(&["for-each-ref"]));
    assert!(verdicts(&alice).is_empty());
}

#[test]
fn a_hooked_daemon_without_identity_passes_with_a_warning_that_anyone_can_act_as_anyone() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");

    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(&run, "reachable", "ok", "over git://, protocol v");
    assert_check(
        &run,
        "compare_and_swap",
        "ok",
        "refused a push whose expected old value was stale",
    );
    assert_check(&run, "hook", "ok", "answered the probe, refs stored as ");
    assert_check(&run, "policy", "warn", "anyone can act as anyone");
    assert_check(
        &run,
        "policy",
        "warn",
        "fix: on the server: git config lease.pusherEnv",
    );
    assert_check(
        &run,
        "lease_remote",
        "warn",
        "fix: git config lease.remote origin",
    );
    assert!(!run.stdout.contains("fail "), "{run}");
    // Who pushes is not known: no identity line.
    assert!(!run.stdout.contains(" identity: "), "{run}");
    assert_no_probe_ref(&server.refs());
}

#[test]
fn the_hook_lets_probe_refs_pass_whatever_a_fence_says_and_reports_itself_to_them() {
    let mut server = Server::with_hook();
    server.config("lease.fence", "refs/lease-probe/*");
    server.config("lease.requireToken", "true");
    server.start_at(&at(0));
    let alice = server.client("alice");
    alice.git(&["commit", "-q", "--allow-empty", "-m", "scratch"]);

    let made = git(&alice, &["push", "origin", "HEAD:refs/lease-probe/x"]);
    made.ok();
    let version = env!("CARGO_PKG_VERSION");
    made.stderr_has(&format!("remote: git-lease: probe: format=1 version={version} now=2026-11-30T12:00:00Z max_skew=300 identity=none fences=refs/lease-probe/* require_token=true admins= refs="));
    git(&alice, &["push", "origin", ":refs/lease-probe/x"]).ok();
    assert_no_probe_ref(&server.refs());
    // Other pushes hear nothing of it.
    let other = git(&alice, &["push", "origin", "HEAD:refs/heads/main"]);
    other.ok();
    assert!(!other.stderr.contains("probe"), "{other}");
}

#[test]
fn a_hookless_server_is_told_to_install_the_hook() {
    let server = Server::daemon();
    let alice = server.client("alice");

    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(
        &run,
        "compare_and_swap",
        "ok",
        "refused a push whose expected old value was stale",
    );
    assert_check(&run, "hook", "warn", "no git-lease hook answered the probe");
    assert_check(
        &run,
        "hook",
        "warn",
        "fix: on the server: git lease install-hook --repo",
    );
    for absent in [" policy: ", " identity: ", " clock: "] {
        assert!(!run.stdout.contains(absent), "{absent}\n{run}");
    }
    assert_no_probe_ref(&server.refs());
}

/// The probe refs a served repository's `post-receive` hook saw pushed (`probes.log`).
fn probes_seen(server: &Server) -> usize {
    std::fs::read_to_string(server.root().join("probes.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("refs/lease-probe/"))
        .count()
}

#[test]
fn the_first_write_through_an_unjudged_server_probes_it_once_and_remembers_it() {
    // Without git-lease's hook, whose word would spare the race (archive_default::
    // the_first_write_through_a_hooked_server_asks_its_hook_in_one_push_that_writes_nothing).
    let mut server = Server::without_hook();
    let log = server.root().join("probes.log");
    server.install_hook("post-receive", &format!("cat >> '{}'", log.display()));
    server.start_at(&at(0));
    let alice = server.client("alice");
    // No doctor ran: the first claim probes the server, then claims.
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"]).ok();
    let first = probes_seen(&server);
    assert!(first > 0, "the first write probed the server");
    let kept = allowed(&alice);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].contains("refused a push whose expected old value was stale"));
    assert!(verdicts(&alice).is_empty());
    assert_no_probe_ref(&server.refs());
    // Remembered: later writes of this clone push their claims alone.
    lease(&alice, 60, &["--remote", "origin", "renew", "7"]).ok();
    lease(&alice, 60, &["--remote", "origin", "acquire", "8", "9"]).ok();
    assert_eq!(probes_seen(&server), first, "probed once");
    // Another user judges for himself, once.
    let bob = server.client("bob");
    lease(&bob, 120, &["--remote", "origin", "acquire", "10"]).ok();
    let second = probes_seen(&server);
    assert!(second > first, "bob probed");
    lease(&bob, 120, &["--remote", "origin", "release", "10"]).ok();
    assert_eq!(probes_seen(&server), second);
    // The verdict is the user's, as ssh's known hosts are: Alice's new clone writes unprobed.
    let new_clone = server.client("alice");
    let claim = ["--remote", "origin", "acquire", "11"];
    let as_alice = new_clone.lease().now(&at(130)).env("HOME", alice.home());
    as_alice.args(claim).run().ok();
    assert_eq!(probes_seen(&server), second, "alice's verdict was read");
    // Without a home, a clone keeps its own verdict, in its repository.
    let homeless = server.client("carol");
    let claim = ["--remote", "origin", "acquire", "12"];
    homeless
        .lease()
        .now(&at(140))
        .env_remove("HOME")
        .args(claim)
        .run()
        .ok();
    assert!(probes_seen(&server) > second, "carol probed");
    let kept =
        std::fs::read_dir(homeless.git_dir().join("lease-doctor")).map_or(0, Iterator::count);
    assert_eq!(kept, 1, "the verdict is in carol's repository");
    // ...which is read too, home or not.
    let probed = probes_seen(&server);
    lease(&homeless, 150, &["--remote", "origin", "acquire", "13"]).ok();
    assert_eq!(
        probes_seen(&server),
        probed,
        "carol's repository's verdict was read"
    );
    // A path needs no probe: git's own receive-pack serves it.
    let local = TestRepo::new();
    let _origin = local.add_bare_origin(&[]);
    lease(
        &local,
        0,
        &["--remote", "origin", "acquire", "1", "--holder", "a"],
    )
    .ok();
    assert!(allowed(&local).is_empty() && verdicts(&local).is_empty());
}

#[test]
fn a_login_that_is_not_the_holder_name_fails_with_the_line_to_run() {
    let mut server = Server::http_builtin(&["alice"]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.start_at(&at(0));
    // The server knows her as alice; her clone claims as her e-mail address.
    let alice = server.client("alice");
    alice.git(&["config", "lease.holder", "alice@example.com"]);
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"])
        .code(3)
        .stderr_has("identity");

    let run = doctor(&alice, 0, &[]);
    run.code(1);
    assert_check(
        &run,
        "identity",
        "fail",
        "the server knows you as alice, but your holder name is alice@example.com",
    );
    assert_check(
        &run,
        "identity",
        "fail",
        "fix: git config lease.holder alice",
    );
    let answer = lease(&alice, 0, &["--json", "doctor"]);
    answer.code(1);
    let identity = checks(&answer.json())
        .into_iter()
        .find(|(name, ..)| name == "identity")
        .expect("an identity check");
    assert_eq!(identity.3.as_deref(), Some("git config lease.holder alice"));

    alice.git(&["config", "lease.holder", "alice"]);
    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(&run, "identity", "ok", "knows you as alice");
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"]).ok();
}

#[test]
fn a_server_clock_beyond_the_allowed_skew_fails_and_one_over_half_of_it_warns() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");

    let run = doctor(&alice, 600, &[]);
    run.code(1);
    assert_check(
        &run,
        "clock",
        "fail",
        "the server's clock is 10m behind yours, more than lease.maxClockSkew 5m",
    );
    let run = doctor(&alice, -200, &[]);
    run.ok();
    assert_check(&run, "clock", "warn", "3m 20s ahead of yours, over half of");
    assert_check(&doctor(&alice, 30, &[]), "clock", "ok", "30s behind yours");
}

#[test]
fn a_refspec_that_moves_the_ledgers_unverified_is_named_with_the_command_that_removes_it() {
    let client = TestRepo::new();
    client.git(&["remote", "add", "origin", "git://127.0.0.1:1/never.git"]);
    client.git(&[
        "config",
        "--add",
        "remote.origin.fetch",
        "+refs/leases/*:refs/leases/*",
    ]);

    // --local: this clone alone; the remote is never contacted.
    let run = doctor(&client, 0, &["--local"]);
    run.ok();
    assert_check(&run, "refspecs", "warn", "remote.origin.fetch +refs/leases/*:refs/leases/* makes a plain `git fetch origin` replace refs/leases/*");
    let fix = "git config --fixed-value --unset remote.origin.fetch '+refs/leases/*:refs/leases/*'";
    assert_check(&run, "refspecs", "warn", &format!("fix: {fix}"));
    assert!(!run.stdout.contains(" reachable: "), "{run}");

    client.git(&[
        "config",
        "--fixed-value",
        "--unset",
        "remote.origin.fetch",
        "+refs/leases/*:refs/leases/*",
    ]);
    client.git(&["config", "remote.origin.fetch", "refs/*:refs/*"]);
    client.git(&["config", "fetch.prune", "true"]);
    let run = doctor(&client, 0, &["--local"]);
    assert_check(
        &run,
        "refspecs",
        "warn",
        "with pruning on makes a plain `git fetch origin` delete the refs under refs/leases/",
    );
    assert_check(
        &run,
        "refspecs",
        "warn",
        "fix: git config remote.origin.prune false",
    );
    client.git(&["config", "remote.origin.prune", "false"]);
    assert_check(
        &doctor(&client, 0, &["--local"]),
        "refspecs",
        "ok",
        "no configured refspec",
    );
}

#[test]
fn new_users_first_claims_through_one_unjudged_server_all_probe_and_claim_at_once() {
    // Each user probes for himself, while someone else's probe refs come and go. A push that
    // meets a lock the server holds for another writer is refused at once (with reftable, a
    // lock of every ref: "cannot lock references"). That tells nothing of the server's
    // compare-and-swap: the probe's push is made again, and no claim is refused for it.
    const USERS: usize = 12;
    let server = Server::daemon();
    let clients: Vec<TestRepo> = (0..USERS)
        .map(|u| server.client(&format!("user-{u}")))
        .collect();
    let barrier = std::sync::Barrier::new(USERS);
    let done = std::sync::atomic::AtomicBool::new(false);
    let runs: Vec<_> = std::thread::scope(|s| {
        // Someone else's probes, made and deleted the whole time, as git's files backend does.
        s.spawn(|| churn_the_probe_namespace(&server, &done));
        let handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(u, client)| {
                let barrier = &barrier;
                s.spawn(move || {
                    let claim = client.lease().now(&at(0)).args([
                        "--remote",
                        "origin",
                        "acquire",
                        &format!("{u}"),
                    ]);
                    barrier.wait();
                    claim.run()
                })
            })
            .collect();
        let runs = handles
            .into_iter()
            .map(|h| h.join().expect("a claimer panicked"))
            .collect::<Vec<_>>();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        runs
    });
    for run in &runs {
        run.ok();
    }
    for client in &clients {
        assert_eq!(allowed(client).len(), 1, "each user kept his verdict");
    }
    assert_no_probe_ref(&server.refs());
}

/// Makes and deletes a ref of the probe namespace in `server`'s repository with plain git,
/// over and over, until `done`; a lock held by a probe only skips a turn.
fn churn_the_probe_namespace(server: &Server, done: &std::sync::atomic::AtomicBool) {
    let tree = server.git(&["mktree"]);
    let other = "refs/lease-probe/someone-else";
    let repo = server.repo();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        repo.git_cmd().args(["update-ref", other, &tree]).run();
        repo.git_cmd().args(["update-ref", "-d", other]).run();
    }
}
