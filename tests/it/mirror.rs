//! Mirrors: `git lease sync` replicates every `refs/leases/*` of a remote, fast-forward only
//! and verified, and reports what it refused while the other ledgers land. Upstream history is
//! forged with plain git in the daemon's bare repository.

use serde_json::{json, Value};

use crate::env::{jrun, Run, TestRepo};
use crate::forge::{build_chain, build_chain_on, set_ledger};
use crate::server::Server;
use crate::verify::acquired;

/// Runs `git lease --json sync`, asserting the exit code, and returns the summary.
#[track_caller]
fn sync_json(mirror: &TestRepo, code: i32) -> (Run, Value) {
    let run = mirror.run(&["--json", "sync"]);
    run.code(code);
    let v = run.json();
    (run, v)
}

/// The issues of one list of the summary (`updated`, `new`, `refused`).
fn issues(summary: &Value, list: &str) -> Vec<String> {
    let mut out: Vec<String> = summary[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is not an array: {summary}"))
        .iter()
        .map(|m| m["issue"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

/// The entry for `issue` in one list of the summary.
fn entry<'a>(summary: &'a Value, list: &str, issue: &str) -> &'a Value {
    summary[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["issue"] == json!(issue))
        .unwrap_or_else(|| panic!("{issue} is not in {list}: {summary}"))
}

/// Replaces the upstream ledger of `issue` with a different root: mallory's acquire of
/// token 1, forced in with `git update-ref`. Returns the forged tip.
fn rewrite_upstream(daemon: &Server, issue: &str) -> String {
    let forged = build_chain(daemon.repo(), &[acquired(issue, "mallory", 1, 0, 60)]);
    set_ledger(daemon.repo(), issue, &forged[0]);
    forged[0].clone()
}

#[test]
fn sync_copies_moves_forward_and_refuses_a_rewritten_ledger() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &[
            "acquire", "--remote", "origin", "a", "b", "c", "--ttl", "2h",
        ],
    )
    .ok();
    jrun(&w, 1, &["release", "--remote", "origin", "b"]).ok();

    // A first sync brings every ledger, with the server's tips.
    let mirror = daemon.mirror();
    let run = mirror.run(&["sync"]);
    run.ok().stdout_has("3 new");
    assert_eq!(mirror.lease_refs(), daemon.lease_refs());
    assert_eq!(mirror.commit_count("b"), 2);
    let (run, v) = sync_json(&mirror, 0);
    assert_eq!(v["unchanged"], json!(3), "{run}");
    assert_eq!(v["updated"], json!([]), "{run}");
    assert_eq!(v["new"], json!([]), "{run}");
    assert_eq!(v["refused"], json!([]), "{run}");
    assert_eq!(v["remote"], json!("origin"), "{run}");

    // More events upstream: one ledger moves, one is new.
    let old_a = daemon.tip("a").unwrap();
    jrun(&w, 2, &["release", "--remote", "origin", "a"]).ok();
    jrun(
        &w,
        3,
        &["acquire", "--remote", "origin", "d", "--ttl", "1h"],
    )
    .ok();
    let (run, v) = sync_json(&mirror, 0);
    assert_eq!(issues(&v, "updated"), vec!["a"], "{run}");
    assert_eq!(issues(&v, "new"), vec!["d"], "{run}");
    assert_eq!(v["unchanged"], json!(2), "{run}");
    assert_eq!(v["refused"], json!([]), "{run}");
    let moved = entry(&v, "updated", "a");
    assert_eq!(moved["from"], json!(old_a), "{run}");
    assert_eq!(moved["to"], json!(daemon.tip("a").unwrap()), "{run}");
    assert_eq!(moved["commits"], json!(1), "{run}");
    assert_eq!(entry(&v, "new", "d")["from"], json!(null), "{run}");
    assert_eq!(mirror.lease_refs(), daemon.lease_refs());

    // Upstream rewrites c with plain git, and b moves forward legitimately.
    let old_c = daemon.tip("c").unwrap();
    let forged = rewrite_upstream(&daemon, "c");
    jrun(
        &w,
        4,
        &["acquire", "--remote", "origin", "b", "--ttl", "1h"],
    )
    .ok();

    let (run, v) = sync_json(&mirror, 1);
    assert_eq!(issues(&v, "refused"), vec!["c"], "{run}");
    let refused = entry(&v, "refused", "c");
    assert_eq!(refused["local"], json!(old_c), "{run}");
    assert_eq!(refused["remote"], json!(forged), "{run}");
    let reason = refused["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("rewr") || reason.contains("fast-forward"),
        "the reason should say the ledger was rewritten: {reason:?}\n{run}"
    );
    // The local copy keeps the old tip; the other ledgers still land in the same run.
    assert_eq!(mirror.tip("c").as_deref(), Some(old_c.as_str()));
    assert_eq!(issues(&v, "updated"), vec!["b"], "{run}");
    assert_eq!(mirror.tip("b"), daemon.tip("b"));
    assert_eq!(v["unchanged"], json!(2), "{run}");

    // The human summary says the same, and the refusal is stable.
    let run = mirror.run(&["sync"]);
    run.code(1)
        .stdout_has("refused")
        .stdout_has("c")
        .stdout_has(&forged);
    assert_eq!(mirror.tip("c").as_deref(), Some(old_c.as_str()));
    mirror.run(&["verify"]).ok();
}

#[test]
fn sync_refuses_a_new_commit_that_breaks_a_rule() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &["acquire", "--remote", "origin", "x", "--ttl", "1h"],
    )
    .ok();
    jrun(&w, 1, &["release", "--remote", "origin", "x"]).ok();
    jrun(
        &w,
        0,
        &["acquire", "--remote", "origin", "y", "--ttl", "1h"],
    )
    .ok();
    let mirror = daemon.mirror();
    mirror.run(&["sync"]).ok();

    // On top of x's valid tip (free, token 1): an acquire of token 3.
    let tip = daemon.tip("x").unwrap();
    let bad = build_chain_on(
        daemon.repo(),
        Some(&tip),
        &[acquired("x", "mallory", 3, 20, 60)],
    );
    set_ledger(daemon.repo(), "x", &bad[0]);
    jrun(&w, 2, &["release", "--remote", "origin", "y"]).ok();

    let (run, v) = sync_json(&mirror, 1);
    assert_eq!(issues(&v, "refused"), vec!["x"], "{run}");
    let refused = entry(&v, "refused", "x");
    assert_eq!(refused["local"], json!(tip), "{run}");
    assert_eq!(refused["remote"], json!(bad[0]), "{run}");
    let findings = refused["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f["rule"] == json!("token-step") && f["commit"] == json!(bad[0])),
        "the findings should name token-step at {}\n{run}",
        bad[0]
    );
    assert!(
        refused["reason"]
            .as_str()
            .unwrap_or("")
            .contains("token-step"),
        "the reason should name the rule\n{run}"
    );
    assert_eq!(mirror.tip("x").as_deref(), Some(tip.as_str()));
    assert_eq!(issues(&v, "updated"), vec!["y"], "{run}");
    assert_eq!(mirror.tip("y"), daemon.tip("y"));
    mirror.run(&["verify"]).ok();
}

#[test]
fn sync_refuses_a_new_ledger_that_breaks_a_rule() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &["acquire", "--remote", "origin", "ok", "--ttl", "1h"],
    )
    .ok();
    let forged = build_chain(daemon.repo(), &[acquired("z", "mallory", 2, 0, 60)]);
    set_ledger(daemon.repo(), "z", &forged[0]);

    let mirror = daemon.mirror();
    let (run, v) = sync_json(&mirror, 1);
    assert_eq!(issues(&v, "new"), vec!["ok"], "{run}");
    assert_eq!(issues(&v, "refused"), vec!["z"], "{run}");
    let refused = entry(&v, "refused", "z");
    assert_eq!(refused["local"], json!(null), "{run}");
    assert!(refused["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["rule"] == json!("first-token")));
    assert_eq!(
        mirror.tip("z"),
        None,
        "a refused ledger was created locally"
    );
    assert_eq!(mirror.tip("ok"), daemon.tip("ok"));
}

#[test]
fn sync_refuses_rewound_and_deleted_ledgers_and_keeps_the_copies() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &[
            "acquire", "--remote", "origin", "a", "e", "f", "--ttl", "1h",
        ],
    )
    .ok();
    jrun(&w, 1, &["release", "--remote", "origin", "a"]).ok();
    let mirror = daemon.mirror();
    mirror.run(&["sync"]).ok();
    let tip_a = daemon.tip("a").unwrap();
    let tip_e = daemon.tip("e").unwrap();

    // Upstream rewinds a to its parent and deletes e; f moves forward.
    let parent = daemon.git(&["rev-parse", &format!("{tip_a}^")]);
    set_ledger(daemon.repo(), "a", &parent);
    daemon.git(&["update-ref", "-d", "refs/leases/e"]);
    jrun(&w, 2, &["release", "--remote", "origin", "f"]).ok();

    let (run, v) = sync_json(&mirror, 1);
    assert_eq!(issues(&v, "refused"), vec!["a", "e"], "{run}");
    let a = entry(&v, "refused", "a");
    assert_eq!(a["local"], json!(tip_a), "{run}");
    assert_eq!(a["remote"], json!(parent), "{run}");
    assert!(
        a["reason"].as_str().unwrap_or("").contains("rewound"),
        "{run}"
    );
    let e = entry(&v, "refused", "e");
    assert_eq!(e["local"], json!(tip_e), "{run}");
    assert_eq!(e["remote"], json!(null), "{run}");
    assert!(
        e["reason"].as_str().unwrap_or("").contains("deleted"),
        "{run}"
    );
    assert_eq!(issues(&v, "updated"), vec!["f"], "{run}");
    assert_eq!(mirror.tip("a").as_deref(), Some(tip_a.as_str()));
    assert_eq!(mirror.tip("e").as_deref(), Some(tip_e.as_str()));
    assert_eq!(mirror.tip("f"), daemon.tip("f"));
}

#[test]
fn sync_takes_the_remote_from_its_argument_or_lease_remote() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &["acquire", "--remote", "origin", "1", "--ttl", "1h"],
    )
    .ok();

    let mirror = TestRepo::new();
    mirror.git(&["remote", "add", "upstream", &daemon.url()]);
    // No origin: the default fails, naming the remote is enough.
    assert_ne!(mirror.run(&["sync"]).code, 0);
    let (run, v) = {
        let run = mirror.run(&["--json", "sync", "upstream"]);
        run.ok();
        let v = run.json();
        (run, v)
    };
    assert_eq!(v["remote"], json!("upstream"), "{run}");
    assert_eq!(issues(&v, "new"), vec!["1"], "{run}");

    jrun(&w, 1, &["release", "--remote", "origin", "1"]).ok();
    mirror.git(&["config", "lease.remote", "upstream"]);
    let (run, v) = sync_json(&mirror, 0);
    assert_eq!(v["remote"], json!("upstream"), "{run}");
    assert_eq!(issues(&v, "updated"), vec!["1"], "{run}");
    assert_eq!(mirror.lease_refs(), daemon.lease_refs());
}

#[test]
fn plain_git_fetch_without_plus_refuses_a_rewritten_ledger() {
    // The plain-git way of docs/FORMAT.md: fast-forward only, but no lease rules.
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(
        &w,
        0,
        &["acquire", "--remote", "origin", "p", "--ttl", "1h"],
    )
    .ok();
    let plain = daemon.mirror();
    plain.git(&[
        "config",
        "--add",
        "remote.origin.fetch",
        "refs/leases/*:refs/leases/*",
    ]);
    plain.git(&["fetch", "-q", "origin"]);
    let old = daemon.tip("p").unwrap();
    assert_eq!(plain.tip("p").as_deref(), Some(old.as_str()));

    // A fast-forward replicates.
    jrun(&w, 1, &["release", "--remote", "origin", "p"]).ok();
    plain.git(&["fetch", "-q", "origin"]);
    let old = daemon.tip("p").unwrap();
    assert_eq!(plain.tip("p").as_deref(), Some(old.as_str()));

    // A rewrite is rejected.
    let forged = rewrite_upstream(&daemon, "p");
    let run = plain.git_run(&["fetch", "origin"]);
    assert_ne!(
        run.code, 0,
        "plain fetch accepted a rewritten ledger\n{run}"
    );
    assert!(
        run.stderr.contains("non-fast-forward") || run.stderr.contains("rejected"),
        "plain fetch should say why\n{run}"
    );
    assert_eq!(plain.tip("p").as_deref(), Some(old.as_str()));

    // Which is why `+refs/leases/*` must never be used: it takes the rewrite silently.
    let run = plain.git_run(&["fetch", "origin", "+refs/leases/*:refs/leases/*"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(plain.tip("p").as_deref(), Some(forged.as_str()));
}

/// A mirror filled by plain git (`git fetch` of `refs/leases/*`), whose remote then went back
/// to an ancestor of what it copied: `sync` reports the remote's ledger rewound, not claims
/// made here, and keeps the copy.
#[test]
fn sync_reports_a_remote_gone_back_behind_a_plain_copy_as_rewound() {
    let daemon = Server::daemon();
    let w = daemon.client("alice@example.com");
    jrun(&w, 0, &["acquire", "--remote", "origin", "a"]).ok();
    jrun(&w, 1, &["release", "--remote", "origin", "a"]).ok();
    jrun(&w, 2, &["acquire", "--remote", "origin", "a"]).ok();
    let mirror = daemon.mirror();
    mirror.git(&["fetch", "-q", "origin", "+refs/leases/*:refs/leases/*"]);
    let copied = mirror.tip("a").expect("the plain copy");
    let first = daemon.chain("a")[0].0.clone();
    set_ledger(daemon.repo(), "a", &first);

    let (run, v) = sync_json(&mirror, 1);
    assert_eq!(issues(&v, "refused"), vec!["a"], "{run}");
    let reason = entry(&v, "refused", "a")["reason"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(reason.contains("remote ledger rewound"), "{run}");
    assert!(!reason.contains("claims made here"), "{run}");
    assert_eq!(mirror.tip("a"), Some(copied), "the copy is kept");
}
