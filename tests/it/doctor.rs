//! `git lease doctor` against real servers: a healthy hooked one (every check ok, the hook's
//! version and policy shown), one with no identity, a hookless one (told what to install), one
//! that ignores a push's expected old value (dulwich's HTTP server: reported, remembered, and
//! writes through it refused until the danger is accepted by name or the server is found
//! fixed), one that serves one connection at a time (dulwich's git:// daemon: told apart, not
//! condemned), a login that is not the holder name (with the line to run), a server clock
//! beyond the skew, and a clone whose refspecs work against its ledgers. No probe leaves a ref behind;
//! and the hook lets doctor's scratch refs pass, reporting itself to them.

use serde_json::Value;

use crate::env::{at, Run, TestRepo};
use crate::server::{git, lease, Server};
use crate::servers::thirdparty::{Engine, ThirdParty};

/// `git lease doctor <extra>` in `client` at client time `secs`.
fn doctor(client: &TestRepo, secs: i64, extra: &[&str]) -> Run {
    let mut args = vec!["doctor"];
    args.extend_from_slice(extra);
    lease(client, secs, &args)
}

/// The line of check `name` in doctor's human output, without its status word; and that word.
#[track_caller]
fn check<'a>(run: &'a Run, name: &str) -> (&'a str, &'a str) {
    run.stdout
        .lines()
        .find_map(|l| {
            let (word, rest) = l.split_once(' ')?;
            let rest = rest.trim_start().strip_prefix(&format!("{name}: "))?;
            Some((word, rest))
        })
        .unwrap_or_else(|| panic!("no {name} line\n{run}"))
}

#[track_caller]
fn assert_check(run: &Run, name: &str, status: &str, needle: &str) {
    let (word, text) = check(run, name);
    assert_eq!(word, status, "{name}\n{run}");
    assert!(text.contains(needle), "{name} should say {needle:?}\n{run}");
}

/// The checks of doctor's JSON answer by name: (status, message, fix).
fn checks(answer: &Value) -> Vec<(String, String, String, Option<String>)> {
    answer["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().expect("name").to_owned(),
                c["status"].as_str().expect("status").to_owned(),
                c["message"].as_str().expect("message").to_owned(),
                c["fix"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The verdicts that a server ignores expected old values, kept in `client`'s git dir.
fn verdicts(client: &TestRepo) -> Vec<String> {
    records(client, false)
}

/// The records of servers found safe to write through, kept in `client`'s git dir.
fn allowed(client: &TestRepo) -> Vec<String> {
    records(client, true)
}

fn records(client: &TestRepo, allowed: bool) -> Vec<String> {
    match std::fs::read_dir(client.git_dir().join("lease-doctor")) {
        Ok(entries) => entries
            .map(|e| e.expect("an entry").path())
            .filter(|path| path.extension().is_some_and(|x| x == "allowed") == allowed)
            .map(|path| std::fs::read_to_string(path).expect("a verdict"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[track_caller]
fn assert_no_probe_ref(refs: &str) {
    assert!(
        !refs.contains("refs/lease-probe/"),
        "a probe ref was left behind:\n{refs}"
    );
}

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

#[test]
fn a_server_that_ignores_expected_old_values_is_remembered_and_writes_through_it_are_refused() {
    let Some(dulwich) = ThirdParty::start(Engine::DulwichHttp) else {
        return;
    };
    let alice = dulwich.client("alice");

    let run = doctor(&alice, 0, &[]);
    run.code(1);
    assert_check(
        &run,
        "compare_and_swap",
        "fail",
        "origin does not honour a push's expected old value",
    );
    assert_check(
        &run,
        "compare_and_swap",
        "fail",
        "writes through it are refused from now on",
    );
    assert_check(
        &run,
        "compare_and_swap",
        "fail",
        "git config remote.origin.leaseUnsafeCas true",
    );
    assert_check(&run, "hook", "warn", "no git-lease hook answered the probe");
    let remembered = verdicts(&alice);
    assert_eq!(remembered.len(), 1, "{run}");
    assert!(
        remembered[0].contains("without making it"),
        "{remembered:?}"
    );
    assert_no_probe_ref(&dulwich.repo().git(&["for-each-ref"]));

    // A claim through it is refused with the reason, exit 1, and nothing is pushed.
    let claim = lease(&alice, 0, &["--remote", "origin", "acquire", "7"]);
    claim
        .code(1)
        .stderr_has("refusing to write through origin")
        .stderr_has("does not honour a push's expected old value")
        .stderr_has("git config remote.origin.leaseUnsafeCas true");
    assert_eq!(dulwich.tip("7"), None);
    // Reads still work.
    lease(&alice, 0, &["--remote", "origin", "list", "--all"]).ok();

    // Accepted by name, the danger lets writes through.
    alice.git(&["config", "remote.origin.leaseUnsafeCas", "true"]);
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"]).ok();
    assert!(dulwich.tip("7").is_some());
    alice.git(&["config", "--unset", "remote.origin.leaseUnsafeCas"]);
    lease(&alice, 60, &["--remote", "origin", "renew", "7"])
        .code(1)
        .stderr_has("refusing to write through origin");

    // The same URL answered by a server that honours old values (git daemon, through
    // url.<base>.insteadOf): doctor finds it fixed and forgets the verdict.
    let mut fixed = Server::with_hook();
    fixed.start_at(&at(0));
    alice.git(&[
        "config",
        &format!("url.{}.insteadOf", fixed.url()),
        &dulwich.url(),
    ]);
    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(
        &run,
        "compare_and_swap",
        "ok",
        "refused a push whose expected old value was stale",
    );
    assert!(verdicts(&alice).is_empty(), "{run}");
    assert_eq!(allowed(&alice).len(), 1, "{run}");
    lease(&alice, 0, &["--remote", "origin", "acquire", "8"]).ok();
    assert!(fixed.tip("8").is_some());
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
    assert_eq!(probes_seen(&server), first, "probed once per clone");
    // Another clone judges for itself, once.
    let bob = server.client("bob");
    lease(&bob, 120, &["--remote", "origin", "acquire", "10"]).ok();
    let second = probes_seen(&server);
    assert!(second > first, "bob's clone probed");
    lease(&bob, 120, &["--remote", "origin", "release", "10"]).ok();
    assert_eq!(probes_seen(&server), second);
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
fn a_server_that_serves_one_connection_at_a_time_is_told_apart_from_one_that_ignores_old_values() {
    let Some(dulwich) = ThirdParty::start(Engine::DulwichDaemon) else {
        return;
    };
    let alice = dulwich.client("alice");

    // Its git:// daemon answers one connection after the other: the probe's own push holds
    // it, so the push that would move the ref behind it is never answered, and the probe
    // gives up at its limit.
    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(
        &run,
        "compare_and_swap",
        "warn",
        "it took no second connection while the probe's push held one open",
    );
    assert!(verdicts(&alice).is_empty(), "{run}");
    assert_no_probe_ref(&dulwich.repo().git(&["for-each-ref"]));
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"]).ok();
}
