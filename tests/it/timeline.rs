//! `git lease timeline`: every ledger's tenures, from its acquire to how it ended, as one
//! self-contained HTML page, and the same data as one JSON document. The page in a real browser
//! is `timeline_browser`, in the `zoo` test binary.

use serde_json::Value;

use crate::env::{self, at_min};
use crate::server::{self, Server};
use crate::timeline_story::{
    bars_of, expected_bars, story, tenure, timeline_json, ALICE, NOW, ODD,
};

// ---------------------------------------------------------------------------------------------
// The data (--json)

#[test]
fn each_tenure_runs_from_its_acquire_to_how_it_ended() {
    let repo = story();
    let json = timeline_json(&repo, &[]);
    assert_eq!(json["schema_version"], 1);
    assert_eq!(bars_of(&json), expected_bars());
    let span = |t: &Value| (t["start"].clone(), t["end"].clone());
    // Completed by its holder, with both renewals marked on it.
    let two = tenure(&json, "2", 1);
    assert_eq!(
        span(two),
        (Value::from(at_min(0)), Value::from(at_min(150)))
    );
    let renewals: Vec<&Value> = two["renewals"].as_array().unwrap().iter().collect();
    assert_eq!(renewals.len(), 2);
    assert_eq!(renewals[0]["at"], at_min(50));
    assert_eq!(renewals[1]["expires_at"], at_min(220));
    assert_eq!(
        (two["note"].clone(), two["task"].clone()),
        ("parser flake".into(), "JOB-7".into())
    );
    // Expired at its expiry, cleared later by someone else.
    let erin = tenure(&json, "7", 1);
    assert_eq!(span(erin).1, at_min(60));
    assert_eq!(
        (erin["takeover"].clone(), erin["by"].clone()),
        ("expired".into(), "frank".into())
    );
    let frank = tenure(&json, "7", 2);
    assert_eq!(frank["reason"], "wrong branch");
    assert_eq!(frank["by"], "ops");
    // Taken over once it expired: held until its expiry, ended by the next acquire.
    let bob = tenure(&json, "10", 1);
    assert_eq!(span(bob).1, at_min(70));
    assert_eq!(bob["takeover"], "expired");
    assert_eq!(bob["by"], "carol");
    assert_eq!(bob["end_commit"], tenure(&json, "10", 2)["commit"]);
    // Live: no end yet.
    let dave = tenure(&json, "10", 3);
    assert_eq!(dave["end"], Value::Null);
    assert_eq!(dave["end_commit"], Value::Null);
    // Expired with nothing after it.
    let eve = tenure(&json, ODD, 1);
    assert_eq!(
        (eve["end"].clone(), eve["end_commit"].clone()),
        (Value::from(at_min(50)), Value::Null)
    );
    // The commits are the ledger's, as plain git sees them.
    let root = repo.git(&["rev-list", "--max-parents=0", "refs/leases/10"]);
    assert_eq!(bob["commit"], root.trim());
}

#[test]
fn the_summary_counts_live_leases_holders_tenures_and_expiries_taken_over() {
    let repo = story();
    let s = timeline_json(&repo, &[])["summary"].clone();
    assert_eq!(s["issues"], 5);
    assert_eq!(s["tenures"], 10);
    assert_eq!(s["live"], 2);
    assert_eq!(s["holders"], 7);
    assert_eq!(s["expiries_taken_over"], 2);
    // Held: 150 + 30 + 35 + 20 + 60 + 90 + 40 + 30 + 60 + 60 minutes (live ones up to now).
    let mean = s["mean_held_seconds"].as_f64().expect("a mean");
    assert_eq!(mean, (575.0 * 60.0) / 10.0);
    assert_eq!(s["endings"]["taken_over"], 2);
    assert_eq!(s["endings"]["expired"], 2);
}

#[test]
fn rows_come_in_natural_issue_order_or_by_most_recent_activity() {
    let repo = story();
    let issues =
        |json: Value| -> Vec<String> { bars_of(&json).into_iter().map(|(i, _)| i).collect() };
    assert_eq!(
        issues(timeline_json(&repo, &[])),
        ["2", "7", "10", ODD, "gh/31"]
    );
    // 10 and gh/31 are live (now), then 7 (160), 2 (150), a&b'c (50).
    assert_eq!(
        issues(timeline_json(&repo, &["--order", "recent"])),
        ["10", "gh/31", "7", "2", ODD]
    );
}

#[test]
fn prefix_window_and_holder_choose_the_tenures_shown() {
    let repo = story();
    let json = timeline_json(&repo, &["gh/"]);
    assert_eq!(bars_of(&json).len(), 1);
    // Held at some instant of [since, until]: erin's (30..60) and bob's (10..70) are before it.
    let json = timeline_json(&repo, &["--since", &at_min(100), "--until", &at_min(130)]);
    assert_eq!(json["since"], at_min(100));
    assert_eq!(json["until"], at_min(130));
    let shown: Vec<(String, Vec<u64>)> = bars_of(&json)
        .into_iter()
        .map(|(i, ts)| (i, ts.into_iter().map(|t| t.2).collect()))
        .collect();
    assert_eq!(
        shown,
        [
            ("2".to_owned(), vec![1]),
            ("7".to_owned(), vec![2]),
            ("10".to_owned(), vec![2]),
            ("gh/31".to_owned(), vec![1]),
        ]
    );
    // A duration before now.
    let json = timeline_json(&repo, &["--since", "30m"]);
    assert_eq!(json["since"], at_min(NOW - 30));
    assert_eq!(bars_of(&json).len(), 2);
    let json = timeline_json(&repo, &["--holder", "bob"]);
    assert_eq!(json["summary"]["tenures"], 3);
    assert_eq!(json["summary"]["holders"], 1);
    let mine = repo
        .lease()
        .now(&at_min(NOW))
        .env("GIT_LEASE_HOLDER", ALICE)
        .arg_json()
        .args(["timeline", "--mine"])
        .run();
    assert_eq!(mine.ok().json()["summary"]["tenures"], 2);
}

#[test]
fn a_bad_window_is_bad_usage() {
    let repo = story();
    repo.run_at(&at_min(NOW), &["timeline", "--since", "yesterday-ish"])
        .code(2)
        .stderr_has("invalid --since");
    repo.run_at(
        &at_min(NOW),
        &["timeline", "--since", &at_min(10), "--until", &at_min(5)],
    )
    .code(2)
    .stderr_has("--until is before --since");
    repo.run_at(&at_min(NOW), &["timeline", "--holder", "a", "--mine"])
        .code(2);
}

#[test]
fn a_remotes_ledgers_are_drawn_from_a_verified_fetch() {
    let mut server = Server::without_hook();
    server.start();
    let client = server.client("al");
    server::lease(
        &client,
        0,
        &["--remote", "origin", "acquire", "5", "--ttl", "1h"],
    )
    .ok();
    server::lease(&client, 60, &["--remote", "origin", "complete", "5"]).ok();
    server::lease(
        &client,
        120,
        &["--remote", "origin", "acquire", "6", "--ttl", "1h"],
    )
    .ok();
    // Another clone, which has no ledger of its own.
    let other = server.mirror();
    let local = other.json_at(&env::at(180), 0, &["timeline"]);
    assert_eq!(local["issues"], Value::Array(vec![]));
    let remote = other
        .lease()
        .now(&env::at(180))
        .env("GIT_TERMINAL_PROMPT", "0")
        .arg_json()
        .args(["timeline", "--remote", "origin"])
        .run();
    let json = remote.ok().json();
    assert_eq!(
        bars_of(&json),
        [
            (
                "5".to_owned(),
                vec![("completed".to_owned(), "al".to_owned(), 1)]
            ),
            (
                "6".to_owned(),
                vec![("live".to_owned(), "al".to_owned(), 1)]
            ),
        ]
    );
}

#[test]
fn the_page_is_written_to_a_file_and_needs_nothing_from_the_network() {
    let repo = story();
    let run = repo.run_at(&at_min(NOW), &["timeline"]);
    run.ok()
        .stdout_has("wrote lease-timeline.html: 5 issues (5 drawn), 10 tenures, 2 live");
    let page = std::fs::read_to_string(repo.path().join("lease-timeline.html")).expect("the page");
    assert!(page.starts_with("<!DOCTYPE html>"));
    for external in ["http:", "https:", "//", "<link", "@import", "url(", " src="] {
        // The hostile note's own `src=` is escaped text, after the `&lt;img`.
        let found = page
            .match_indices(external)
            .any(|(i, _)| !page[..i].ends_with("&lt;img"));
        assert!(!found, "the page refers outside itself: {external}");
    }
    // `-o -`: on stdout.
    let run = repo.run_at(&at_min(NOW), &["timeline", "-o", "-"]);
    assert_eq!(run.ok().stdout, page);
    let json = repo.scratch("out").join("t.json");
    repo.lease()
        .now(&at_min(NOW))
        .arg_json()
        .args(["timeline", "-o", json.to_str().expect("UTF-8")])
        .run()
        .ok();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON")).expect("JSON");
    assert_eq!(bars_of(&written), expected_bars());
}
