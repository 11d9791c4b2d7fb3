//! Third-party servers as the engine ([`super::thirdparty`]): the harness itself, then claims
//! and races through JGit's daemon and dulwich's daemon and HTTP server.

use std::collections::BTreeSet;

use serde_json::Value;

use super::thirdparty::{Engine, ThirdParty};
use crate::env::race;
use crate::env::{Run, TestRepo, T0};
use crate::forge::hello_commit;
use crate::server::{assert_port_closed, git, lease};

/// How many claimer processes race, each in a clone of its own.
const RACERS: usize = 8;

/// Each engine takes a push and serves a fetch of it, and is gone once dropped.
#[test]
fn each_third_party_server_serves_pushes_and_stops_when_dropped() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        let client = server.client("alice");
        let commit = hello_commit(&client);
        let push = git(
            &client,
            &["push", "origin", &format!("{commit}:refs/leases/t")],
        );
        assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
        assert_eq!(
            server.tip("t").as_deref(),
            Some(commit.as_str()),
            "{engine:?}"
        );
        assert!(
            server
                .ls_remote()
                .contains(&format!("{commit}\trefs/leases/t")),
            "{engine:?}"
        );
        let port = server.port();
        drop(server);
        assert_port_closed(port, &format!("the {engine:?} server"));
    }
}

/// Each engine advertises `atomic` as [`Engine::atomic`] says: git refuses an atomic push to
/// one that does not, before it sends anything.
#[test]
fn third_party_servers_advertise_atomic_as_the_harness_says() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        assert_eq!(server.engine(), engine);
        let client = server.client("alice");
        let commit = client.git(&["commit-tree", EMPTY_TREE, "-m", "x"]);
        let push = git(
            &client,
            &[
                "push",
                "--atomic",
                "origin",
                &format!("{commit}:refs/leases/a"),
            ],
        );
        if engine.atomic() {
            assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
        } else {
            assert_ne!(push.code, 0, "{engine:?}\n{push}");
            push.stderr_has("does not support --atomic push");
            assert_eq!(server.ls_remote(), "", "{engine:?}: nothing landed");
        }
    }
}

/// The served repository's hooks run on a push where [`Engine::runs_hooks`] says so: a
/// pre-receive hook that declines everything declines it there; JGit's daemon runs none.
#[test]
fn third_party_servers_run_hooks_as_the_harness_says() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        let hook = server.bare().join("hooks/pre-receive");
        crate::env::write_program(
            &hook,
            "#!/bin/sh\necho 'no pushes here' >&2\nexit 1\n",
            0o755,
        );
        let client = server.client("alice");
        let commit = client.git(&["commit-tree", EMPTY_TREE, "-m", "x"]);
        let push = git(
            &client,
            &["push", "origin", &format!("{commit}:refs/leases/h")],
        );
        if engine.runs_hooks() {
            assert_ne!(push.code, 0, "{engine:?}: the hook did not run\n{push}");
            assert_eq!(server.tip("h"), None, "{engine:?}");
            assert!(server.chain("h").is_empty());
        } else {
            assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
            assert_eq!(server.tip("h").as_deref(), Some(commit.as_str()));
            assert_eq!(server.repo().git(&["cat-file", "-t", &commit]), "commit");
        }
    }
}

/// git's empty tree, which every repository knows.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

// ---------------------------------------------------------------------------------------------
// Races through servers that honour the compare-and-swap
// ---------------------------------------------------------------------------------------------

/// One client per racer, `racer-<i>`, each with `origin` at `server`.
fn racers(server: &ThirdParty) -> Vec<TestRepo> {
    let racers: Vec<TestRepo> = (0..RACERS)
        .map(|i| server.client(&format!("racer-{i}")))
        .collect();
    // dulwich's git:// daemon serves one connection at a time, so each first write's probe
    // waits out its limit (20 s) while the others queue behind it, and eight of them in a row
    // approach the push time limit: one racer's probe judges the server, and its verdict
    // (kept per user, docs/SERVER.md) is copied to the others.
    if matches!(
        server.engine(),
        Engine::DulwichDaemon | Engine::DulwichDaemonWithoutAtomic
    ) {
        let first = &racers[0];
        first.lease().args(["doctor", "--remote", "origin"]).run();
        let verdicts = crate::doctor_checks::verdict_dir(first);
        for other in &racers[1..] {
            let to = crate::doctor_checks::verdict_dir(other);
            std::fs::create_dir_all(&to).expect("a verdict directory");
            for entry in std::fs::read_dir(&verdicts).expect("doctor's verdicts") {
                let entry = entry.expect("a verdict");
                std::fs::copy(entry.path(), to.join(entry.file_name())).expect("a copy");
            }
        }
    }
    racers
}

/// Asserts that a racer that did not win was refused as one: held (exit 3), or, having lost
/// the compare-and-swap every time, a lost race (exit 5); never a failure (exit 1).
#[track_caller]
fn assert_lost_as_a_race(server: &ThirdParty, run: &Run) {
    assert!(
        [3, 5].contains(&run.code),
        "{:?}: a losing claimer exited {} (a lost race must be held, exit 3, or lost \
         repeatedly, exit 5)\n{run}\n{}",
        server.engine(),
        run.code,
        server.log()
    );
    if run.code == 3 {
        assert_eq!(run.json()["outcome"], "held", "{run}");
    }
}

/// Eight claimer processes, each in its own clone, race for one issue through `engine`:
/// exactly one wins, with token 1; every other one is held (or lost repeatedly), never failed;
/// the server's ledger is that one claim.
fn eight_claimers_race_for_one_issue(engine: Engine) {
    let Some(server) = ThirdParty::start(engine) else {
        return;
    };
    let clients = racers(&server);
    let cmds = clients
        .iter()
        .map(|c| {
            c.lease().now(T0).args([
                "--json", "acquire", "hot", "--ttl", "1h", "--remote", "origin",
            ])
        })
        .collect();
    let runs = race(cmds);
    let winners: Vec<&Run> = runs.iter().filter(|r| r.code == 0).collect();
    assert_eq!(
        winners.len(),
        1,
        "{engine:?}: exactly one winner\n{runs:#?}"
    );
    let won = winners[0].json();
    assert_eq!(won["outcome"], "acquired", "{}", winners[0]);
    assert_eq!(won["token"], 1, "{}", winners[0]);
    for run in runs.iter().filter(|r| r.code != 0) {
        assert_lost_as_a_race(&server, run);
    }
    let chain = server.chain("hot");
    assert_eq!(chain.len(), 1, "{engine:?}: one claim landed: {chain:?}");
    assert_eq!(chain[0].1["holder"], won["holder"]);
    assert_eq!(chain[0].1["token"], 1);
}

#[test]
fn eight_claimers_racing_through_jgit_s_daemon_one_wins_the_others_are_held() {
    eight_claimers_race_for_one_issue(Engine::JGitDaemon);
}

#[test]
fn eight_claimers_racing_through_dulwich_s_daemon_one_wins_the_others_are_held() {
    eight_claimers_race_for_one_issue(Engine::DulwichDaemon);
}

/// Eight `acquire --any` (or `run --any`) claimers over eight candidates through `engine`: a
/// claimer that loses a candidate to a racer moves on to another, so every one of them gets
/// one, and no tenure is handed out twice. (`run` ends its tenure once its command is done, so
/// an issue may be claimed again, as a new tenure, by a later racer.)
fn any_claimers_move_on_after_a_lost_race(engine: Engine, run_a_command: bool) {
    let Some(server) = ThirdParty::start(engine) else {
        return;
    };
    let clients = racers(&server);
    let candidates: Vec<String> = (1..=RACERS).map(|i| format!("c{i}")).collect();
    let verb = if run_a_command { "run" } else { "acquire" };
    let cmds = clients
        .iter()
        .map(|c| {
            let cmd = c
                .lease()
                .now(T0)
                .args(["--json", verb, "--any", "--ttl", "1h"]);
            let cmd = cmd.args(["--remote", "origin"]).args(&candidates);
            if run_a_command {
                cmd.args(["--", "true"])
            } else {
                cmd
            }
        })
        .collect();
    let runs = race(cmds);
    let mut tenures = BTreeSet::new();
    for run in &runs {
        assert_eq!(
            run.code,
            0,
            "{engine:?}: every claimer gets one of as many candidates\n{run}\n{}",
            server.log()
        );
        // run reports on stderr, its first line the claim.
        let claim = if run_a_command {
            let line = run.stderr.lines().next().expect("run's report");
            serde_json::from_str(line).expect("JSON")
        } else {
            run.json()
        };
        let claim: Value = claim;
        assert_eq!(claim["outcome"], "acquired", "{run}");
        let issue = claim["issue"].as_str().expect("an issue").to_owned();
        assert!(candidates.contains(&issue), "{run}");
        let tenure = (issue, claim["token"].as_u64().expect("a token"));
        assert!(
            tenures.insert(tenure.clone()),
            "{tenure:?} was handed out twice\n{runs:#?}"
        );
    }
    // The server's ledgers hold exactly those tenures.
    let mut landed = BTreeSet::new();
    for issue in &candidates {
        for (_, lease) in server.chain(issue) {
            if lease["event"] == "acquire" {
                landed.insert((issue.clone(), lease["token"].as_u64().expect("a token")));
            }
        }
    }
    assert_eq!(landed, tenures, "{engine:?}");
}

#[test]
fn acquire_any_through_jgit_s_daemon_moves_on_after_a_lost_race() {
    any_claimers_move_on_after_a_lost_race(Engine::JGitDaemon, false);
}

#[test]
fn run_any_through_jgit_s_daemon_moves_on_after_a_lost_race() {
    any_claimers_move_on_after_a_lost_race(Engine::JGitDaemon, true);
}

#[test]
fn acquire_any_through_dulwich_s_daemon_moves_on_after_a_lost_race() {
    any_claimers_move_on_after_a_lost_race(Engine::DulwichDaemon, false);
}

#[test]
fn run_any_through_dulwich_s_daemon_moves_on_after_a_lost_race() {
    any_claimers_move_on_after_a_lost_race(Engine::DulwichDaemon, true);
}

// ---------------------------------------------------------------------------------------------
// A server without the `atomic` capability
// ---------------------------------------------------------------------------------------------

/// A claim, a renewal and a release of one issue each move one ref: they are pushed without
/// `--atomic`, and a server that lacks the capability takes them, with the compare-and-swap
/// (bob's claim of alice's lease is refused as held).
#[test]
fn one_issue_is_claimed_renewed_and_released_on_a_server_without_atomic() {
    let Some(server) = ThirdParty::start(Engine::DulwichDaemonWithoutAtomic) else {
        return;
    };
    let alice = server.client("alice");
    let bob = server.client("bob");
    // Claims through it are refused unless the danger is accepted by name.
    for client in [&alice, &bob] {
        client.git(&["config", "remote.origin.leaseUnsafeCas", "true"]);
    }
    let remote = ["--remote", "origin"];
    let with = |args: &[&'static str]| [args, &remote[..]].concat();
    let run = lease(&alice, 0, &with(&["--json", "acquire", "7", "--ttl", "1h"]));
    assert_eq!(run.code, 0, "{run}\n{}", server.log());
    assert_eq!(run.json()["token"], 1, "{run}");
    lease(&alice, 60, &with(&["renew", "7", "--ttl", "1h"])).ok();
    lease(&bob, 120, &with(&["--json", "acquire", "7"])).outcome(3, "held");
    lease(&alice, 180, &with(&["release", "7"])).ok();
    let taken = lease(&bob, 240, &with(&["--json", "acquire", "7"])).outcome(0, "acquired");
    assert_eq!(taken["token"], 2, "a new tenure: {taken}");
    let events: Vec<Value> = server
        .chain("7")
        .into_iter()
        .map(|(_, l)| l["event"].clone())
        .collect();
    assert_eq!(events, ["acquire", "renew", "release", "acquire"]);
}

/// A claim of several issues at once is all or none, which needs an atomic push: on a server
/// without the capability it fails (exit 1) before anything is pushed, saying why and what to
/// do; the server's refs are as they were, and the client recorded nothing.
#[test]
fn a_several_issue_claim_on_a_server_without_atomic_fails_before_anything_is_pushed() {
    let Some(server) = ThirdParty::start(Engine::DulwichDaemonWithoutAtomic) else {
        return;
    };
    let alice = server.client("alice");
    lease(&alice, 0, &["acquire", "1", "--remote", "origin"]).ok();
    let before = server.ls_remote();
    assert!(before.contains("refs/leases/1"), "{before}");
    let run = lease(
        &alice,
        60,
        &["acquire", "2", "3", "4", "--remote", "origin"],
    );
    assert_eq!(run.code, 1, "{run}\n{}", server.log());
    run.stderr_has("does not support atomic pushes")
        .stderr_has("all-or-none claim of 2 3 4")
        .stderr_has("nothing was pushed")
        .stderr_has("Claim one issue per command");
    assert_eq!(server.ls_remote(), before, "the server's refs moved");
    for issue in ["2", "3", "4"] {
        assert_eq!(alice.tip(issue), None, "{issue} was recorded locally");
    }
    let json = lease(
        &alice,
        60,
        &["--json", "acquire", "2", "3", "--remote", "origin"],
    );
    assert_eq!(json.code, 1, "{json}");
    let error: Value = serde_json::from_str(json.stderr.trim()).expect("a JSON error");
    assert_eq!(error["error"]["kind"], "failure", "{json}");
    // One at a time works there.
    for issue in ["2", "3", "4"] {
        lease(&alice, 120, &["acquire", issue, "--remote", "origin"]).ok();
    }
    assert_eq!(server.ls_remote().lines().count(), 4);
}

// ---------------------------------------------------------------------------------------------
// Hooks on third-party servers
// ---------------------------------------------------------------------------------------------

/// `git lease install-hook --repo <served repository>`, run outside any repository.
fn install_hook(server: &ThirdParty) -> Run {
    TestRepo::new()
        .lease()
        .args(["install-hook", "--repo"])
        .args([server.bare()])
        .run()
}

/// JGit's daemon runs no hook of the repositories it serves: with the git-lease hook
/// installed, a push the hook refuses (the deletion of a ledger) lands all the same. In a
/// repository Gerrit serves, which `refs/meta/config` shows, install-hook says so.
#[test]
fn jgit_runs_no_hook_and_install_hook_warns_in_a_gerrit_repository() {
    let Some(server) = ThirdParty::start(Engine::JGitDaemon) else {
        return;
    };
    install_hook(&server).ok();
    let alice = server.client("alice");
    lease(&alice, 0, &["acquire", "7", "--remote", "origin"]).ok();
    let deleted = git(&alice, &["push", "origin", ":refs/leases/7"]);
    assert_eq!(deleted.code, 0, "{deleted}\n{}", server.log());
    assert_eq!(server.tip("7"), None, "the hook ran");

    let config = server.repo().git(&[
        "commit-tree",
        EMPTY_TREE,
        "-m",
        "Gerrit's project configuration",
    ]);
    server
        .repo()
        .git(&["update-ref", "refs/meta/config", &config]);
    let run = install_hook(&server);
    run.ok()
        .stderr_has("warning: this repository has refs/meta/config")
        .stderr_has("never judges a push there");
}

/// dulwich runs a repository's pre-receive hook before it has received the pushed objects,
/// so the git-lease hook finds the pushed commit missing and refuses every lease push: a
/// client sees the hook's refusal (exit 3), read in dulwich's words, and nothing lands.
#[test]
fn dulwich_runs_pre_receive_before_the_objects_arrive_so_the_hook_refuses_every_claim() {
    let Some(server) = ThirdParty::start(Engine::DulwichDaemon) else {
        return;
    };
    install_hook(&server).ok();
    let alice = server.client("alice");
    let run = lease(&alice, 0, &["acquire", "7", "--remote", "origin"]);
    assert_eq!(run.code, 3, "{run}\n{}", server.log());
    run.stderr_has("the remote refused the update of refs/leases/7: git-lease: refused issue 7")
        .stderr_has("is missing");
    assert_eq!(server.tip("7"), None);
    assert_eq!(alice.tip("7"), None);
}

// ---------------------------------------------------------------------------------------------
// dulwich's HTTP server: the old value is not honoured
// ---------------------------------------------------------------------------------------------

/// dulwich's HTTP server does not honour a push's expected old value (it reports an update
/// "ok" whatever the ref holds), so racing claimers through it are not kept apart; used one
/// at a time, claims and releases work through it as through any server: each one reads the
/// ledger first and pushes on top of it.
#[test]
fn dulwich_s_http_server_takes_claims_and_releases_made_one_at_a_time() {
    let Some(server) = ThirdParty::start(Engine::DulwichHttp) else {
        return;
    };
    assert!(!server.engine().honours_old_value());
    let alice = server.client("alice");
    let bob = server.client("bob");
    // Claims through it are refused unless the danger is accepted by name.
    for client in [&alice, &bob] {
        client.git(&["config", "remote.origin.leaseUnsafeCas", "true"]);
    }
    let remote = ["--remote", "origin"];
    let with = |args: &[&'static str]| [args, &remote[..]].concat();
    let run = lease(&alice, 0, &with(&["--json", "acquire", "7", "--ttl", "1h"]));
    assert_eq!(run.code, 0, "{run}\n{}", server.log());
    assert_eq!(run.json()["token"], 1);
    lease(&bob, 60, &with(&["--json", "acquire", "7"])).outcome(3, "held");
    lease(&alice, 120, &with(&["release", "7"])).ok();
    let taken = lease(&bob, 180, &with(&["--json", "acquire", "7"])).outcome(0, "acquired");
    assert_eq!(taken["token"], 2, "{taken}");
    let tokens: Vec<Value> = server
        .chain("7")
        .into_iter()
        .map(|(_, l)| l["token"].clone())
        .collect();
    assert_eq!(tokens, [1, 1, 2]);
    assert_eq!(server.tip("7"), bob.tip("7"));
}

/// Eight claimer processes, each in a fresh clone of its own, race for one issue through
/// dulwich's HTTP server, and nobody ran doctor: each clone's first write probes the server,
/// finds that it ignores expected old values, and refuses to write through it (exit 1, naming
/// the setting that accepts the danger), so no two claimers win; the clone remembers it.
#[test]
fn eight_claimers_racing_through_dulwich_s_http_server_unjudged_are_all_refused() {
    let Some(server) = ThirdParty::start(Engine::DulwichHttp) else {
        return;
    };
    let clients = racers(&server);
    let cmds = clients
        .iter()
        .map(|c| {
            c.lease()
                .now(T0)
                .args(["acquire", "hot", "--ttl", "1h", "--remote", "origin"])
        })
        .collect();
    let runs = race(cmds);
    for run in &runs {
        assert_eq!(run.code, 1, "{run}\n{}", server.log());
        run.stderr_has("does not honour a push's expected old value")
            .stderr_has("git config remote.origin.leaseUnsafeCas true");
    }
    assert_eq!(server.tip("hot"), None, "nothing landed");
    assert!(!server.ls_remote().contains("refs/lease-probe/"));
    // Remembered: the next write is refused before any push, the server unprobed.
    let before = server.log().matches("git-receive-pack").count();
    lease(&clients[0], 60, &["acquire", "hot", "--remote", "origin"])
        .code(1)
        .stderr_has("refusing to write through origin");
    assert_eq!(server.log().matches("git-receive-pack").count(), before);
}

/// What each server does with an update whose old value is not the ref's, sent straight to its
/// receive-pack: JGit refuses it; dulwich reports it `ok` (over git:// and http alike) and
/// leaves the ref as it was, so the pusher cannot tell it lost. Through dulwich's daemon no
/// git client meets that (one connection at a time: the old value it sends is the one just
/// advertised); through its HTTP server, racing claimers do.
#[test]
fn a_stale_old_value_is_refused_by_jgit_and_reported_ok_by_dulwich() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        let client = server.client("alice");
        let first = client.git(&["commit-tree", EMPTY_TREE, "-m", "first"]);
        let second = client.git(&["commit-tree", EMPTY_TREE, "-m", "second"]);
        let push = git(
            &client,
            &[
                "push",
                "origin",
                &format!("{first}:refs/leases/s"),
                &format!("{second}:refs/leases/other"),
            ],
        );
        assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
        // refs/leases/s is at `first`; the update claims it is at `second`.
        let report = server.stale_update("refs/leases/s", &second, &second);
        assert_eq!(
            report.first().map(String::as_str),
            Some("unpack ok"),
            "{engine:?}: {report:?}\n{}",
            server.log()
        );
        let status = report.get(1).cloned().unwrap_or_default();
        if engine.reports_stale_updates_ok() {
            assert_eq!(status, "ok refs/leases/s", "{engine:?}: {report:?}");
        } else {
            assert!(
                status.starts_with("ng refs/leases/s "),
                "{engine:?}: {report:?}"
            );
        }
        assert_eq!(
            server.tip("s").as_deref(),
            Some(first.as_str()),
            "{engine:?}: the ref moved"
        );
    }
}
