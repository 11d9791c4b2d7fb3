//! The server hook against real pushes: forged and invalid ledger commits, built with plain git
//! plumbing (`hash-object`, `mktree`, `commit-tree`) in a client clone and pushed for real to
//! a bare repository served by `git daemon` with `git lease install-hook`, must each be refused
//! with the rule's name while the server's refs stay as they were; legitimate transitions
//! pushed by the tool itself are accepted; the `update` hook mode refuses too.
//!
//! The server's clock is fixed: every server here is started with `lease.hookNow` in the
//! served repository's own configuration, which the hook reads ([`Server::start_at`]; the same
//! [`Server`] serves the fencing and http tests, restarted at another instant or over http).
//!
//! Instants are seconds after [`crate::env::T0`], the server's clock unless a test says
//! otherwise; the default `lease.maxClockSkew` is 5 minutes.

mod accepted;
mod forged;

use serde_json::{json, Value};

use crate::env::{at, TestRepo, BIN};
use crate::forge::{self, acquired, blob, freed, lease_bytes, renewed, tree, with, without};
use crate::pushes::{
    assert_refused, chain_on, check_refused, commit, lease_commit, push, push_accepted,
};
use crate::server::Server;

// ---------------------------------------------------------------------------------------------
// The table of forged pushes
// ---------------------------------------------------------------------------------------------

/// What a case pushes.
struct Forged {
    /// The commit to push to `refs/leases/<issue>`; `None` deletes the ref.
    new: Option<String>,
    /// Push with `--force` (a rewrite or rewind).
    force: bool,
    /// The commit the refusal must name.
    offender: String,
}

impl Forged {
    fn tip(commit: String) -> Forged {
        Forged {
            new: Some(commit.clone()),
            force: false,
            offender: commit,
        }
    }
    fn forced(commit: String) -> Forged {
        Forged {
            force: true,
            ..Forged::tip(commit)
        }
    }
}

type Forge = Box<dyn Fn(&TestRepo, &str, &[String]) -> Forged>;

/// One forged or invalid push: the legitimate history the server has first (pushed and
/// accepted), what is forged on top, and the rule the refusal must name.
struct Case {
    issue: &'static str,
    base: Vec<Value>,
    forge: Forge,
    rule: &'static str,
}

fn case(
    issue: &'static str,
    base: impl Fn(&str) -> Vec<Value>,
    rule: &'static str,
    forge: impl Fn(&TestRepo, &str, &[String]) -> Forged + 'static,
) -> Case {
    Case {
        issue,
        base: base(issue),
        forge: Box::new(forge),
        rule,
    }
}

fn nothing(_: &str) -> Vec<Value> {
    Vec::new()
}

// ---------------------------------------------------------------------------------------------
// The update hook mode, and identity without an authenticating transport
// ---------------------------------------------------------------------------------------------

#[test]
fn the_update_hook_mode_refuses_forged_pushes() {
    let mut server = Server::without_hook();
    let bin = BIN.replace('\'', r"'\''");
    server.write_hook(
        "update",
        &format!("#!/bin/sh\nexec '{bin}' hook update \"$@\"\n"),
    );
    assert!(!server.bare().join("hooks/pre-receive").exists());
    server.start_at(&at(0));
    let client = server.client("alice");

    // A ledger that starts with token 2.
    let forged = lease_commit(&client, &acquired("7", "alice", 2, 0, Some(600)), &[]);
    let run = push(&client, false, &[&format!("{forged}:refs/leases/7")]);
    assert_refused(&run, "7", &forged, "first-token");
    assert_eq!(server.tip("7"), None);

    // The legitimate start is accepted.
    let good = chain_on(&client, None, &[acquired("7", "alice", 1, -60, Some(600))]);
    push_accepted(&server, &client, "7", &good);

    // A takeover of alice's live lease, and a deletion, are refused one ref at a time.
    let takeover = lease_commit(&client, &acquired("7", "bob", 2, 0, Some(600)), &[&good[0]]);
    let run = push(&client, false, &[&format!("{takeover}:refs/leases/7")]);
    assert_refused(&run, "7", &takeover, "holder-change");
    let run = push(&client, false, &[":refs/leases/7"]);
    assert_refused(&run, "7", &good[0], "deletion");
    assert_eq!(server.tip("7").as_deref(), Some(good[0].as_str()));
}

#[test]
fn with_pusher_env_configured_a_push_without_that_identity_is_refused() {
    // git daemon authenticates nobody: with lease.pusherEnv=REMOTE_USER every lease push is
    // refused as unauthenticated (the http suite covers authenticated pushers).
    let mut server = Server::with_hook();
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.start_at(&at(0));
    let client = server.client("alice");
    let c = lease_commit(&client, &acquired("7", "alice", 1, 0, Some(600)), &[]);
    let run = push(&client, false, &[&format!("{c}:refs/leases/7")]);
    assert_refused(&run, "7", &c, "identity");
    run.stderr_has("REMOTE_USER");
    assert_eq!(server.tip("7"), None);
    // The tool reports the hook's refusal as such (exit 3).
    let run = client.run_at(&at(0), &["--remote", "origin", "acquire", "7"]);
    run.code(3).stderr_has("identity");
    assert_eq!(server.tip("7"), None);
}

#[test]
fn identity_env_without_the_variables_name_refuses_every_push_and_install_hook() {
    // lease.identity=env without lease.pusherEnv once meant no identity at all: bob could
    // release alice's live lease in her name. It is a configuration error: the hook refuses
    // every push saying which setting is missing, and install-hook refuses to install (exit 2).
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");
    let mine = chain_on(&alice, None, &[acquired("7", "alice", 1, -60, Some(600))]);
    push_accepted(&server, &alice, "7", &mine);
    let hook_before = std::fs::read(server.bare().join("hooks/pre-receive")).expect("the hook");
    // Anyone (git daemon authenticates nobody) releasing alice's live lease in her name, with
    // plain git, from a clone that has her ledger.
    let release = lease_commit(&alice, &freed("7", "release", "alice", 1, 0), &[&mine[0]]);
    let bob = server.client("bob");
    for (setting, value, names) in [
        ("lease.identity", "env", "lease.pusherEnv is not set"),
        // Set but empty is no name either.
        (
            "lease.pusherEnv",
            "",
            "bad config value \"\" for lease.pusherEnv",
        ),
    ] {
        server.config(setting, value);
        if setting == "lease.pusherEnv" {
            let _ = server.git_run(&["config", "--unset", "lease.identity"]);
        }
        let run = push(&alice, false, &[&format!("{release}:refs/leases/7")]);
        assert_ne!(
            run.code, 0,
            "{setting}={value:?}: the push was accepted\n{run}"
        );
        run.stderr_has(names).stderr_has("hook declined");
        assert_eq!(server.tip("7").as_deref(), Some(mine[0].as_str()));
        // The tool reports a server that cannot judge as the server's failure (exit 1).
        let run = bob.run_at(&at(0), &["--remote", "origin", "acquire", "8"]);
        run.code(1)
            .stderr_has("the server's hook failed")
            .stderr_has(names);
        assert_eq!(server.tip("8"), None);
        // install-hook refuses, and writes nothing.
        let run = server.lease(&[
            "install-hook",
            "--repo",
            server.bare().to_str().expect("UTF-8"),
        ]);
        run.code(2).stderr_has(names);
        assert_eq!(
            std::fs::read(server.bare().join("hooks/pre-receive")).expect("the hook"),
            hook_before
        );
    }
    // With the variable's name the same push is judged, and refused for what it is.
    server.config("lease.pusherEnv", "REMOTE_USER");
    let run = push(&alice, false, &[&format!("{release}:refs/leases/7")]);
    assert_refused(&run, "7", &release, "identity");
}

#[test]
fn the_servers_clock_rules_hold_at_exact_instants() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let client = server.client("alice");
    let root = |issue: &str, at_s: i64| {
        let c = lease_commit(&client, &acquired(issue, "alice", 1, at_s, Some(600)), &[]);
        (
            c.clone(),
            push(&client, false, &[&format!("{c}:refs/leases/{issue}")]),
        )
    };

    // The default lease.maxClockSkew is 5 minutes, inclusive.
    for (issue, at_s) in [("skew-past", -300), ("skew-future", 300)] {
        let (c, run) = root(issue, at_s);
        assert_eq!(
            run.code, 0,
            "{issue}: exactly 5 minutes off is within the skew\n{run}"
        );
        assert_eq!(server.tip(issue), Some(c));
    }
    for (issue, at_s) in [("skew-past-1", -301), ("skew-future-1", 301)] {
        let (c, run) = root(issue, at_s);
        assert_refused(&run, issue, &c, "clock-skew");
        assert_eq!(server.tip(issue), None);
    }

    // lease.maxClockSkew is read at every push.
    server.config("lease.maxClockSkew", "30s");
    let (c, run) = root("skew-30s-1", -31);
    assert_refused(&run, "skew-30s-1", &c, "clock-skew");
    let (c, run) = root("skew-30s", -30);
    run.ok();
    assert_eq!(server.tip("skew-30s"), Some(c));
    server.config("lease.maxClockSkew", "5m");

    // A lease is free at the instant it expires by the server's clock, not a second before.
    for (issue, ttl, taken) in [("expiry", 60, true), ("expiry-1", 61, false)] {
        let alice = chain_on(
            &client,
            None,
            &[acquired(issue, "alice", 1, -60, Some(ttl))],
        );
        push_accepted(&server, &client, issue, &alice);
        let bob = lease_commit(
            &client,
            &acquired(issue, "bob", 2, 0, Some(600)),
            &[&alice[0]],
        );
        let run = push(&client, false, &[&format!("{bob}:refs/leases/{issue}")]);
        if taken {
            assert_eq!(
                run.code, 0,
                "{issue}: the lease expired at the server's clock\n{run}"
            );
            assert_eq!(server.tip(issue), Some(bob));
        } else {
            assert_refused(&run, issue, &bob, "holder-change");
            assert_eq!(server.tip(issue), Some(alice[0].clone()));
        }
    }
}

#[test]
fn ids_that_look_alike_are_refused_by_the_tool_and_the_hook_alike() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");
    let composed = "caf\u{e9}";
    let decomposed = "cafe\u{301}";
    alice
        .run_at(
            &at(0),
            &["acquire", composed, "--holder", "alice", "--local"],
        )
        .ok();
    for id in [decomposed, "ca\u{200b}fe", "ab\u{202e}cd"] {
        alice
            .run_at(&at(0), &["acquire", id, "--holder", "alice", "--local"])
            .code(2)
            .stderr_has("issue id");
        // A ledger under such a name, built with plain git, is refused by the server.
        let root = lease_commit(&alice, &forge::acquired(id, "alice", 1, 0, Some(600)), &[]);
        let run = push(&alice, false, &[&format!("{root}:refs/leases/{id}")]);
        assert_ne!(run.code, 0, "{run}");
        run.stderr_has(&format!("at {}: issue: ", &root[..12]))
            .stderr_has("hook declined");
        assert_eq!(server.tip(id), None);
    }
}

#[test]
fn install_hook_prints_the_policy_it_installed_and_warns_on_a_fence_left_open() {
    let served = TestRepo::bare();
    let path = served.path().to_str().expect("a UTF-8 path").to_owned();
    let install = || served.run(&["install-hook", "--repo", &path]);
    let set = |key: &str, value: &str| served.git(&["config", key, value]);

    // Nothing configured: the default fence, and the token as the fence (nobody is known).
    let run = install();
    run.ok()
        .stdout_has("identity: none")
        .stdout_has("fenced branches: refs/heads/issue/* (the default")
        .stdout_has("token: required on a fenced push (the default without identity")
        .stdout_has("admins: none")
        .stderr_has("no identity is configured");
    assert!(!run.stderr.contains("lease.requireToken=false"), "{run}");

    // Identity, a fence of its own and administrators: the holder's account is the fence.
    set("lease.pusherEnv", "REMOTE_USER");
    set("lease.fence", "refs/heads/wip/*");
    set("lease.admins", "ops");
    let run = install();
    run.ok()
        .stdout_has("identity: REMOTE_USER")
        .stdout_has("fenced branches: refs/heads/wip/* (lease.fence)")
        .stdout_has("the pusher must be the live holder (the default with identity")
        .stdout_has("admins: ops");
    assert!(!run.stderr.contains("warning"), "{run}");

    // The token turned off where nobody is known: the fence takes anyone's push. Said, and
    // in the JSON answer's policy too.
    served.git(&["config", "--unset", "lease.pusherEnv"]);
    set("lease.requireToken", "false");
    let answer = served
        .lease()
        .args(["--json", "install-hook", "--repo", &path])
        .run();
    let answer = answer.ok().json();
    assert_eq!(answer["policy"]["identity"], "none");
    assert_eq!(answer["policy"]["require_token"], false);
    assert_eq!(answer["policy"]["require_token_default"], false);
    assert_eq!(answer["policy"]["fences"], json!(["refs/heads/wip/*"]));
    assert_eq!(answer["policy"]["admins"], json!(["ops"]));
    let warnings = answer["warnings"].to_string();
    assert!(
        warnings.contains("lease.requireToken=false without identity"),
        "{warnings}"
    );
}
