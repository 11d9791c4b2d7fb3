//! Ids git carries but no ref path may hold (`" < > |`, Windows device names): one definition
//! (`IssueId::new`) refuses them on the command line with exit 2 naming the rule, the hook
//! refuses a pushed ledger under one, and a mirror that meets one on its remote reports it as
//! skipped and syncs every other ledger, run after run, without failing.

use serde_json::Value;

use crate::env::{jrun, TestRepo, T0};
use crate::forge::{build_chain, set_ledger};
use crate::server::Server;
use crate::verify::acquired;

/// Each odd id, with the words of the rule that refuses it.
const ODD_IDS: &[(&str, &str)] = &[
    ("a\"b", "\" < > |"),
    ("a<b", "\" < > |"),
    ("a>b", "\" < > |"),
    ("a|b", "\" < > |"),
    ("CON", "Windows device name"),
    ("gh/nul", "Windows device name"),
    ("aux.txt", "Windows device name"),
    ("com1", "Windows device name"),
];

#[test]
fn odd_ids_are_refused_by_the_command_line_with_the_rule_named() {
    let repo = TestRepo::new();
    for (id, rule) in ODD_IDS {
        for args in [
            &["acquire", "--holder", "a", "--", id][..],
            &["acquire", "--any", "--holder", "a", "--", id],
            &["check", "--token", "1", "--", id],
            &["revoke", "--reason", "r", "--holder", "a", "--", id],
        ] {
            repo.run_at(T0, args)
                .code(2)
                .stderr_has("invalid issue id")
                .stderr_has(rule);
        }
    }
    assert_eq!(repo.lease_refs(), "", "nothing was created");
    // Ids that only look like them are valid.
    for id in ["CONx", "a/com0", "a{b}", "a'b", "a&b"] {
        repo.json_at(T0, 0, &["acquire", id, "--holder", "a"]);
    }
    repo.assert_fsck();
}

#[test]
fn the_hook_refuses_a_pushed_ledger_under_an_odd_id() {
    let mut server = Server::with_hook();
    server.start_at(T0);
    let client = server.client("mallory");
    for (id, rule) in ODD_IDS {
        let forged = build_chain(&client, &[acquired(id, "mallory", 1, 0, 60)]);
        set_ledger(&client, id, &forged[0]);
        let refspec = format!("refs/leases/{id}:refs/leases/{id}");
        let push = client.git_run(&["push", "origin", &refspec]);
        assert_ne!(push.code, 0, "{push}");
        assert!(push.stderr.contains("git-lease: refused"), "{push}");
        assert!(push.stderr.contains(rule), "{id}: {push}");
    }
    assert_eq!(server.lease_refs(), "", "nothing landed");
}

#[test]
fn a_mirror_skips_odd_ids_and_syncs_every_other_ledger_run_after_run() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &["acquire", "--remote", "origin", "ok", "--ttl", "1h"],
    )
    .ok();
    // Honest-looking ledgers under odd ids, made with plain git on the server.
    for (id, _) in ODD_IDS {
        let forged = build_chain(daemon.repo(), &[acquired(id, "mallory", 1, 0, 60)]);
        set_ledger(daemon.repo(), id, &forged[0]);
    }
    let mirror = daemon.mirror();
    let skipped_ids = |v: &Value| -> Vec<String> {
        let mut ids: Vec<String> = v["skipped"]
            .as_array()
            .expect("skipped")
            .iter()
            .map(|s| s["issue"].as_str().expect("an id").to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut odd: Vec<String> = ODD_IDS.iter().map(|(id, _)| id.to_string()).collect();
    odd.sort();
    for (run, new, unchanged) in [(1, vec!["ok"], 0), (2, vec![], 1)] {
        let v = mirror.json_at(T0, 0, &["sync"]);
        assert_eq!(crate::env::issues(&v["new"]), new, "run {run}: {v}");
        assert_eq!(v["unchanged"], unchanged, "run {run}: {v}");
        assert_eq!(v["refused"], serde_json::json!([]), "run {run}: {v}");
        assert_eq!(skipped_ids(&v), odd, "run {run}: {v}");
        for skipped in v["skipped"].as_array().expect("skipped") {
            let reason = skipped["reason"].as_str().expect("a reason");
            assert!(reason.contains("invalid issue id"), "{reason}");
        }
    }
    let human = mirror.run_at(T0, &["sync"]);
    human.ok().stdout_has("skipped  a\"b: invalid issue id");
    human.stdout_has(&format!("{} skipped", ODD_IDS.len()));
    assert_eq!(mirror.tip("ok"), daemon.tip("ok"));
    assert_eq!(
        mirror.lease_refs().lines().count(),
        1,
        "only ok is kept: {}",
        mirror.lease_refs()
    );
    // The mirror's own ledgers go on working.
    mirror.json_at(T0, 0, &["list", "--local"]);
    mirror.json_at(T0, 0, &["acquire", "mine", "--holder", "m", "--local"]);
}

#[test]
fn a_local_ledger_under_an_odd_id_is_named_and_every_other_still_listed() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "ok", "--holder", "alice"]);
    // Made with plain git, as an older git-lease or anyone could have.
    for (id, _) in ODD_IDS {
        let forged = build_chain(&repo, &[acquired(id, "mallory", 1, 0, 60)]);
        set_ledger(&repo, id, &forged[0]);
    }
    let listed = repo.json_at(T0, 1, &["list"]);
    assert_eq!(crate::env::issues(&listed), ["ok"]);
    let run = repo.run_at(T0, &["list"]);
    run.code(1).stderr_has("invalid issue id \"a\\\"b\"");
    let drawn = repo.json_at(T0, 1, &["timeline"]);
    assert_eq!(
        drawn["issues"].as_array().expect("rows").len(),
        1,
        "{drawn}"
    );
    repo.run_at(T0, &["timeline", "--json"])
        .stderr_has("Windows device name");
}
