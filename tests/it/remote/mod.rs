//! Claims through a remote (`--remote`, `lease.remote`): the server is the authority and a push
//! with an expected old value is the compare-and-swap. Every test runs its own `git daemon`
//! (see [`crate::server`]) or its own `file://` bare repository.

mod race;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Barrier};

use serde_json::{json, Value};

use crate::env::{at_min, jrun, Run, TestRepo};
use crate::server::Server;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";
const CAROL: &str = "carol@example.com";

/// Runs `git lease --json <op> --remote origin <rest>` in `repo` at `min` minutes after T0.
fn via_origin(repo: &TestRepo, min: i64, op: &str, rest: &[&str]) -> Run {
    let mut args = vec![op, "--remote", "origin"];
    args.extend_from_slice(rest);
    jrun(repo, min, &args)
}

/// `acquire --remote origin <issue> --ttl 1h` in `repo` at `min` minutes after T0.
fn claim(repo: &TestRepo, min: i64, issue: &str) -> Run {
    via_origin(repo, min, "acquire", &[issue, "--ttl", "1h"])
}

/// `check --remote origin <issue> --token <token> [--holder <holder>]` at `min` minutes after
/// T0.
fn check(repo: &TestRepo, min: i64, issue: &str, token: &str, holder: Option<&str>) -> Run {
    let mut rest = vec![issue, "--token", token];
    rest.extend(holder.map(|h| ["--holder", h]).into_iter().flatten());
    via_origin(repo, min, "check", &rest)
}

/// Counts the daemon's log lines that mention `service` (`upload-pack` is a fetch,
/// `receive-pack` a push).
fn requests(daemon: &Server, service: &str) -> usize {
    daemon
        .log()
        .lines()
        .filter(|l| l.contains(&format!("Request {service}")))
        .count()
}

/// Asserts that the server's `refs/leases/<issue>` is `tip`.
#[track_caller]
fn assert_server_tip(daemon: &Server, issue: &str, tip: &str) {
    assert_eq!(daemon.tip(issue).as_deref(), Some(tip), "the server moved");
}

// ---------------------------------------------------------------------------------------------
// The remote is the authority
// ---------------------------------------------------------------------------------------------

#[test]
fn the_remote_decides_whatever_each_clone_knew() {
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    let b = daemon.client(BOB);
    let c = daemon.client(CAROL);

    // A claims through the remote: the server and A's local ref agree.
    let run = claim(&a, 0, "42");
    run.ok();
    let v = run.json_has(&[
        ("outcome", json!("acquired")),
        ("token", json!(1)),
        ("holder", json!(ALICE)),
        ("wrote", json!(true)),
    ]);
    let tip1 = daemon.tip("42").expect("the server has refs/leases/42");
    assert_eq!(v["commit"], json!(tip1), "{run}");
    assert_eq!(a.tip("42").as_deref(), Some(tip1.as_str()));

    // B's local copy knows nothing, yet the answer reflects the remote.
    assert_eq!(b.tip("42"), None);
    let run = claim(&b, 1, "42");
    run.outcome(3, "held");
    run.json_has(&[
        ("holder", json!(ALICE)),
        ("token", json!(1)),
        ("wrote", json!(false)),
    ]);
    assert_server_tip(&daemon, "42", &tip1);
    let human = b
        .lease()
        .now(&at_min(1))
        .args(["acquire", "--remote", "origin", "42"])
        .run();
    human
        .code(3)
        .stdout_has("held")
        .stdout_has(ALICE)
        .stdout_has("token 1");
    // Whatever B keeps locally, it is never something the server does not have.
    assert!(
        b.tip("42").is_none_or(|t| t == tip1),
        "B's local ref is not the server's state"
    );

    // B cannot release A's lease.
    let run = via_origin(&b, 2, "release", &["42"]);
    run.outcome(3, "not_holder");
    run.json_has(&[("holder", json!(ALICE))]);
    assert_server_tip(&daemon, "42", &tip1);

    // A releases; the server and A's local ref agree again.
    let run = via_origin(&a, 3, "release", &["42"]);
    let v = run.outcome(0, "released");
    run.json_has(&[("token", json!(1)), ("holder", json!(null))]);
    let tip2 = daemon.tip("42").unwrap();
    assert_ne!(tip2, tip1);
    assert_eq!(v["commit"], json!(tip2), "{run}");
    assert_eq!(a.tip("42").as_deref(), Some(tip2.as_str()));

    // B now gets the next token.
    let run = claim(&b, 4, "42");
    let v = run.outcome(0, "acquired");
    run.json_has(&[("token", json!(2)), ("holder", json!(BOB))]);
    let tip3 = daemon.tip("42").unwrap();
    assert_eq!(v["commit"], json!(tip3), "{run}");
    assert_eq!(b.tip("42").as_deref(), Some(tip3.as_str()));

    // A third clone that never touched 42 sees the server's state.
    let run = via_origin(&c, 5, "show", &["42"]);
    run.ok();
    run.json_has(&[
        ("holder", json!(BOB)),
        ("token", json!(2)),
        ("state", json!("held")),
        ("commit", json!(tip3)),
    ]);
    c.lease()
        .now(&at_min(5))
        .args(["show", "--remote", "origin", "42"])
        .run()
        .ok()
        .stdout_has(BOB)
        .stdout_has(&tip3);

    // The server's chain, read with plain git: acquire, release, acquire.
    let chain = daemon.chain("42");
    let events: Vec<(&str, Value, u64)> = chain
        .iter()
        .map(|(_, l)| {
            (
                l["event"].as_str().unwrap(),
                l["holder"].clone(),
                l["token"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ("acquire", json!(ALICE), 1),
            ("release", json!(null), 1),
            ("acquire", json!(BOB), 2),
        ]
    );
    daemon.lease(&["verify"]).ok().stdout_has("ok");
}

#[test]
fn lease_remote_config_is_the_default_and_local_overrides_it() {
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    let b = daemon.client(BOB);
    a.git(&["config", "lease.remote", "origin"]);
    b.git(&["config", "lease.remote", "origin"]);

    // No --remote: it goes to the server.
    let run = jrun(&a, 0, &["acquire", "7", "--ttl", "1h"]);
    run.ok();
    let server7 = daemon.tip("7").expect("acquire went to the server");
    assert_eq!(a.tip("7").as_deref(), Some(server7.as_str()));
    let run = jrun(&b, 1, &["acquire", "7"]);
    run.code(3);
    run.json_has(&[("holder", json!(ALICE))]);
    assert_eq!(b.tip("7"), None, "a refusal wrote B's local ref");

    // --local: the local refs only; the server does not move.
    let server_before = daemon.lease_refs();
    jrun(&a, 2, &["--local", "acquire", "8", "--ttl", "1h"]).outcome(0, "acquired");
    assert!(a.tip("8").is_some(), "the local acquire wrote nothing");
    assert_eq!(daemon.tip("8"), None, "--local acquire reached the server");
    jrun(&a, 3, &["--local", "release", "7"]).outcome(0, "released");
    assert_ne!(a.tip("7").as_deref(), Some(server7.as_str()));
    assert_eq!(
        daemon.lease_refs(),
        server_before,
        "--local touched the server"
    );

    // Reads follow the same default: 8 exists only locally, 7 is still alice's on the server.
    jrun(&a, 4, &["show", "8"]).code(4);
    let run = jrun(&a, 4, &["--local", "show", "8"]);
    run.ok();
    run.json_has(&[("holder", json!(ALICE))]);
    let run = jrun(&a, 4, &["show", "7"]);
    run.ok();
    run.json_has(&[("holder", json!(ALICE)), ("commit", json!(server7))]);
    let run = jrun(&a, 4, &["--local", "show", "7"]);
    run.ok();
    run.json_has(&[("state", json!("free"))]);

    // --local with --remote is a usage error.
    a.run(&["--local", "--remote", "origin", "show", "7"])
        .code(2);

    // --remote wins over the config.
    a.git(&["config", "lease.remote", "nowhere"]);
    let run = via_origin(&a, 5, "show", &["7"]);
    run.ok();
    run.json_has(&[("holder", json!(ALICE))]);
    let run = jrun(&a, 5, &["show", "7"]);
    assert_ne!(
        run.code, 0,
        "lease.remote=nowhere should be used by default\n{run}"
    );
}

#[test]
fn reads_through_the_remote_fetch_first() {
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    let b = daemon.client(BOB);
    let c = daemon.client(CAROL);

    // Several issues at once through the remote: all or none.
    let run = via_origin(&a, 0, "acquire", &["5", "6", "--ttl", "2h"]);
    run.ok();
    let v = run.json();
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{run}");
    assert!(daemon.tip("5").is_some() && daemon.tip("6").is_some());

    // B reads once: its tracking copy now knows 5 and 6.
    let run = via_origin(&b, 1, "list", &[]);
    run.ok();
    let rows = run.json();
    let holders: Vec<(&str, &str, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["issue"].as_str().unwrap(),
                r["holder"].as_str().unwrap_or("-"),
                r["token"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(holders, vec![("5", ALICE, 1), ("6", ALICE, 1)], "{run}");
    check(&b, 1, "5", "1", None).ok();

    // Another clone changes the server behind B's back.
    via_origin(&a, 2, "release", &["5"]).ok();
    claim(&c, 3, "5").ok();
    claim(&a, 3, "55").ok();
    let tip5 = daemon.tip("5").unwrap();

    // Every read of B reflects the server, not B's earlier copy.
    let run = via_origin(&b, 4, "list", &[]);
    run.ok();
    let rows = run.json();
    let five = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["issue"] == json!("5"))
        .unwrap_or_else(|| panic!("5 is not listed\n{run}"));
    assert_eq!(five["holder"], json!(CAROL), "{run}");
    assert_eq!(five["token"], json!(2), "{run}");
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["issue"] == json!("55")),
        "an issue created after B's last fetch is missing\n{run}"
    );

    let run = via_origin(&b, 4, "show", &["5"]);
    run.ok();
    run.json_has(&[
        ("holder", json!(CAROL)),
        ("token", json!(2)),
        ("commit", json!(tip5)),
    ]);

    let run = via_origin(&b, 4, "log", &["5"]);
    run.ok();
    let log = run.json();
    let log = log.as_array().unwrap();
    let events: Vec<&str> = log.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, vec!["acquire", "release", "acquire"], "{run}");
    assert_eq!(log[0]["holder"], json!(CAROL), "{run}");
    assert_eq!(log[1]["previous_holder"], json!(ALICE), "{run}");
    let server: Vec<String> = daemon
        .chain("5")
        .into_iter()
        .rev()
        .map(|(c, _)| c)
        .collect();
    let shown: Vec<&str> = log.iter().map(|e| e["commit"].as_str().unwrap()).collect();
    assert_eq!(shown, server, "log --remote is not the server's chain");

    let run = check(&b, 4, "5", "1", None);
    run.code(3);
    run.json_has(&[("ok", json!(false))]);
    check(&b, 4, "5", "2", None).ok();
    check(&b, 4, "5", "2", Some(CAROL)).ok();
    check(&b, 4, "5", "2", Some(ALICE)).code(3);

    // An issue first seen on the server is found by show without a prior list.
    let run = via_origin(&c, 4, "show", &["55"]);
    run.ok();
    run.json_has(&[("holder", json!(ALICE))]);

    // Reads do not write the server.
    let before = daemon.lease_refs();
    via_origin(&b, 5, "list", &["--all"]).ok();
    via_origin(&b, 5, "log", &["6"]).ok();
    assert_eq!(daemon.lease_refs(), before);
}

// ---------------------------------------------------------------------------------------------
// The optimistic path
// ---------------------------------------------------------------------------------------------

#[test]
fn an_uncontended_write_is_one_push_and_no_fetch() {
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    claim(&a, 0, "9").ok();
    let (fetches, pushes) = (
        requests(&daemon, "upload-pack"),
        requests(&daemon, "receive-pack"),
    );
    via_origin(&a, 1, "renew", &["9", "--ttl", "1h"]).outcome(0, "renewed");
    assert_eq!(
        requests(&daemon, "upload-pack"),
        fetches,
        "an uncontended renew fetched\n{}",
        daemon.log()
    );
    assert_eq!(
        requests(&daemon, "receive-pack"),
        pushes + 1,
        "an uncontended renew is one push\n{}",
        daemon.log()
    );
    assert_eq!(a.tip("9"), daemon.tip("9"));
}

#[test]
fn a_stale_tracking_copy_still_gets_the_right_answer() {
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    let a2 = daemon.client(ALICE);
    let b = daemon.client(BOB);

    claim(&a, 0, "9").ok();
    let t1 = daemon.tip("9").unwrap();

    // Meanwhile, from other clones: alice releases (elsewhere), bob acquires.
    via_origin(&a2, 1, "release", &["9"]).outcome(0, "released");
    let run = claim(&b, 2, "9");
    run.ok();
    run.json_has(&[("token", json!(2))]);
    let t2 = daemon.tip("9").unwrap();

    // A's tracking copy still says alice holds token 1.
    let tracking = a.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/lease-remotes/",
    ]);
    assert!(
        tracking.contains(&t1),
        "A's tracking copy should still be the old tip {t1}: {tracking}"
    );

    // A's renew decides from the stale copy, loses the push, fetches and decides again.
    let run = via_origin(&a, 3, "renew", &["9", "--ttl", "1h"]);
    run.outcome(3, "not_holder");
    run.json_has(&[
        ("holder", json!(BOB)),
        ("token", json!(2)),
        ("wrote", json!(false)),
    ]);
    assert_server_tip(&daemon, "9", &t2);
    assert_eq!(daemon.chain("9").len(), 3);
    // A's local ref is a state the server accepted, never the renew that lost.
    let local = a.tip("9").unwrap();
    assert!(
        local == t1 || local == t2,
        "A's local ref {local} is neither {t1} nor {t2}"
    );

    via_origin(&a, 3, "release", &["9"]).outcome(3, "not_holder");
    let run = via_origin(&a, 3, "acquire", &["9"]);
    run.outcome(3, "held");
    run.json_has(&[("holder", json!(BOB))]);
    check(&a, 3, "9", "1", None).code(3);
    assert_server_tip(&daemon, "9", &t2);

    daemon.lease(&["verify"]).ok().stdout_has("ok");
    let run = daemon.lease(&["--json", "verify"]);
    run.ok();
    run.json_has(&[("clean", json!(true))]);
}

// ---------------------------------------------------------------------------------------------
// A server that says no
// ---------------------------------------------------------------------------------------------

#[test]
fn a_push_refused_by_a_server_hook_is_reported_and_not_retried() {
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    let b = daemon.client(BOB);
    claim(&a, 0, "11").ok();
    let tip = daemon.tip("11").unwrap();
    // B's first write probes the server, before the hook that counts pushes is there.
    claim(&b, 0, "10").ok();

    let counter = daemon.root().join("hook-runs");
    daemon.install_hook(
        "pre-receive",
        &format!(
            "echo run >> '{}'\necho \"lease policy says no\" >&2\nexit 1",
            counter.display()
        ),
    );
    let runs = || {
        std::fs::read_to_string(&counter)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };

    // An update of an existing ledger.
    let run = a
        .lease()
        .now(&at_min(1))
        .args(["release", "--remote", "origin", "11"])
        .run();
    // A hook that is not git-lease's (no `git-lease: refused` mark): the server's failure.
    run.code(1)
        .stderr_has("the server's hook failed")
        .stderr_has("lease policy says no");
    assert_server_tip(&daemon, "11", &tip);
    assert_eq!(
        a.tip("11").as_deref(),
        Some(tip.as_str()),
        "A's local ref moved"
    );
    assert_eq!(
        runs(),
        1,
        "the hook ran {} times: a refusal was retried",
        runs()
    );

    // A new ledger.
    let run = b
        .lease()
        .now(&at_min(1))
        .arg_json()
        .args(["acquire", "--remote", "origin", "12"])
        .run();
    run.code(1).stderr_has("lease policy says no");
    assert_eq!(
        daemon.tip("12"),
        None,
        "the server has a ledger the hook refused"
    );
    assert_eq!(b.tip("12"), None, "B's local ref records a refused claim");
    assert_eq!(runs(), 2, "the hook ran {} times for two pushes", runs());
}

// ---------------------------------------------------------------------------------------------
// Other transports
// ---------------------------------------------------------------------------------------------

#[test]
fn claims_work_over_file_urls_and_plain_paths() {
    let server = TestRepo::bare();
    let path = server.path().to_str().unwrap().to_owned();
    let url = format!("file://{path}");
    let a = TestRepo::new();
    a.git(&["remote", "add", "origin", &url]);
    a.git(&["config", "lease.holder", ALICE]);
    let b = TestRepo::new();
    b.git(&["config", "lease.holder", BOB]);

    let run = claim(&a, 0, "3");
    run.ok();
    run.json_has(&[("token", json!(1))]);
    assert!(server.tip("3").is_some());
    assert_eq!(a.tip("3"), server.tip("3"));

    // B names the server by its path, with no remote configured.
    let run = jrun(&b, 1, &["acquire", "--remote", &path, "3", "--ttl", "1h"]);
    run.code(3);
    run.json_has(&[("holder", json!(ALICE))]);

    via_origin(&a, 2, "release", &["3"]).ok();
    let run = jrun(&b, 3, &["acquire", "--remote", &path, "3", "--ttl", "1h"]);
    run.ok();
    run.json_has(&[("token", json!(2))]);
    assert_eq!(b.tip("3"), server.tip("3"));
    // A URL gets its own tracking namespace.
    let tracking = b.git(&["for-each-ref", "--format=%(refname)", "refs/lease-remotes/"]);
    assert!(
        tracking.lines().any(|r| r.ends_with("/3")),
        "no tracking ref for 3: {tracking:?}"
    );

    // And by file:// URL.
    let run = jrun(&a, 4, &["show", "--remote", &url, "3"]);
    run.ok();
    run.json_has(&[("holder", json!(BOB))]);

    assert_eq!(server.chain("3").len(), 3);
    server.run(&["verify"]).ok().stdout_has("ok");
}

// ---------------------------------------------------------------------------------------------
// A race of real processes through the daemon
// ---------------------------------------------------------------------------------------------

const WORKERS: usize = 6;
const ROUNDS: usize = 30;
const ISSUES: [&str; 3] = ["r0", "r1", "r2"];
/// How often a worker retries a release that lost the race (it holds the lease, so it must
/// free it for the others).
const RELEASE_RETRIES: usize = 10;

#[test]
fn a_client_clock_behind_the_servers_last_event_never_writes_backwards() {
    // The race above in slow motion: bob's events are at minutes 10 and 11; alice's process
    // reads its clock at minute 5 (a clock behind, or a process that read the clock before
    // bob's push landed). Whatever alice is answered, the server's ledger must still follow
    // the rules: `at` never goes backwards.
    let daemon = Server::daemon();
    let a = daemon.client(ALICE);
    let b = daemon.client(BOB);
    claim(&b, 10, "42").ok();
    via_origin(&b, 11, "release", &["42"]).ok();
    let run = claim(&a, 5, "42");
    let verify = daemon.lease(&["--json", "verify"]);
    assert_eq!(
        verify.code, 0,
        "after alice's acquire ({run}) the server's ledger breaks a rule\n{verify}"
    );
    for pair in daemon.chain("42").windows(2) {
        assert!(
            pair[1].1["at"].as_str() >= pair[0].1["at"].as_str(),
            "an event earlier than its parent: {} then {}",
            pair[0].1,
            pair[1].1
        );
    }
}

#[test]
fn a_multi_issue_remote_claim_learns_every_state_in_one_fetch() {
    let daemon = Server::daemon();
    let clone = daemon.client(ALICE);
    claim(&clone, 0, "already").ok();
    let issues: Vec<String> = (0..20).map(|i| format!("many-{i}")).collect();
    let before = requests(&daemon, "upload-pack");
    let mut args = vec!["acquire", "--remote", "origin", "already"];
    args.extend(issues.iter().map(String::as_str));
    let run = jrun(&clone, 1, &args);
    run.ok();
    assert_eq!(
        requests(&daemon, "upload-pack") - before,
        1,
        "one fetch for 21 issues\n{}",
        daemon.log()
    );
    for issue in &issues {
        assert_eq!(daemon.leases(issue).len(), 1, "{issue}");
    }
}
