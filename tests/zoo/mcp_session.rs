//! Session-bound leases of `git lease mcp`, driven by the Python MCP SDK
//! (`tests/zoo/mcp_client.py`): a lease `acquire` claims is renewed by the server while its
//! client stays, released when the client goes, lapses at its expiry when the server is
//! killed, and its loss reaches the client as a notification; `detached` keeps the lease
//! as it was before (neither renewed nor released). Time is real, the TTLs short; each test
//! waits on events the server notifies, never on a sleep.

use serde_json::{json, Value};

use crate::env::{self, TestRepo};
use crate::env::{ALICE, BOB};
use crate::mcp::{call, result, session};
use crate::server::Server;

/// `git lease --json show <issue>` in `repo`, at `now` when given (else the system clock).
fn show(repo: &TestRepo, issue: &str, now: Option<&str>) -> Value {
    let mut cmd = repo.lease();
    if let Some(now) = now {
        cmd = cmd.now(now);
    }
    let run = cmd.args(["--json", "show", issue]).run();
    run.ok();
    run.json()
}

/// The events of `issue`'s ledger, newest first, as `git lease log` gives them.
fn events(repo: &TestRepo, issue: &str) -> Vec<String> {
    let run = repo.lease().args(["--json", "log", issue]).run();
    run.ok();
    run.json()
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| e["event"].as_str().expect("an event").to_owned())
        .collect()
}

/// An instant of a JSON field.
fn instant(value: &Value) -> chrono::DateTime<chrono::Utc> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("an instant: {value}"));
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .into()
}

#[test]
fn mcp_a_client_that_stays_past_three_ttls_still_holds_its_lease() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            call("acquire", json!({"issue": "7", "holder": ALICE, "ttl": "3s"})),
            // A renewal three TTLs or more after the claim: the client never called renew.
            {"op": "event", "issue": "7", "event": "renew", "ttls": 3},
            call("show", json!({"issue": "7"})),
        ]),
    ) else {
        return;
    };
    let acquired = result(&answers[0], 0);
    let shown = result(&answers[2], 0);
    env::assert_fields(
        shown,
        &[
            ("state", json!("held")),
            ("holder", json!(ALICE)),
            ("token", acquired["token"].clone()),
            ("acquired_at", acquired["acquired_at"].clone()),
        ],
    );
    // The expiry moved past three TTLs after the claim.
    let moved = instant(&shown["expires_at"]) - instant(&acquired["acquired_at"]);
    assert!(moved > chrono::Duration::seconds(9), "{shown:#}");
    assert!(instant(&shown["expires_at"]) > instant(&acquired["expires_at"]));
    // The client closed its session: the lease was released at once, by its tenure.
    let events = events(&repo, "7");
    assert_eq!(
        events.first().map(String::as_str),
        Some("release"),
        "{events:?}"
    );
    assert!(
        events.iter().filter(|e| *e == "renew").count() >= 3,
        "{events:?}"
    );
}

#[test]
fn mcp_a_clients_leases_are_released_when_it_closes_its_session_or_its_server_is_stopped() {
    let repo = TestRepo::new();
    let Some((closed, _)) = session(
        &repo,
        json!([
            call(
                "acquire",
                json!({"issue": "7", "holder": ALICE, "ttl": "1h"})
            ),
            call(
                "acquire",
                json!({"issues": ["8", "9"], "holder": ALICE, "session": true})
            ),
        ]),
    ) else {
        return;
    };
    result(&closed[0], 0);
    result(&closed[1], 0);
    // Its input closed: every lease it held is free at once, an hour before its expiry.
    for issue in ["7", "8", "9"] {
        let shown = show(&repo, issue, None);
        env::assert_fields(
            &shown,
            &[
                ("state", json!("free")),
                ("event", json!("release")),
                ("last_holder", json!(ALICE)),
            ],
        );
        assert_eq!(events(&repo, issue), ["release", "acquire"]);
    }
    // SIGTERM or SIGINT to the server: the same.
    for (issue, signal) in [("10", 15), ("11", 2)] {
        let Some((stopped, _)) = session(
            &repo,
            json!([
                call("acquire", json!({"issue": issue, "holder": BOB})),
                {"op": "kill", "signal": signal},
            ]),
        ) else {
            return;
        };
        result(&stopped[0], 0);
        let shown = show(&repo, issue, None);
        env::assert_fields(
            &shown,
            &[("state", json!("free")), ("event", json!("release"))],
        );
    }
}

#[test]
fn mcp_the_lease_of_a_server_killed_with_sigkill_lapses_at_its_expiry() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            call("acquire", json!({"issue": "7", "holder": ALICE})),
            {"op": "kill", "signal": 9},
        ]),
    ) else {
        return;
    };
    let acquired = result(&answers[0], 0);
    // A session-bound lease's TTL is short by default: 5 minutes, not lease.ttl's 1 hour.
    assert_eq!(
        instant(&acquired["expires_at"]) - instant(&acquired["acquired_at"]),
        chrono::Duration::minutes(5),
        "{acquired}"
    );
    // Nothing could release it: held until its expiry, then expired.
    assert_eq!(events(&repo, "7"), ["acquire"]);
    env::assert_fields(
        &show(&repo, "7", None),
        &[("state", json!("held")), ("holder", json!(ALICE))],
    );
    let past = env::rfc3339(instant(&acquired["expires_at"]) + chrono::Duration::seconds(1));
    env::assert_fields(
        &show(&repo, "7", Some(&past)),
        &[("state", json!("expired")), ("held", json!(false))],
    );
}

#[test]
fn mcp_a_revoke_reaches_the_client_as_a_notification_and_renewals_stop() {
    let repo = TestRepo::new();
    let Some((answers, seen)) = session(
        &repo,
        json!([
            call("acquire", json!({"issue": "7", "holder": ALICE, "ttl": "3s"})),
            // Another process revokes it.
            {"op": "lease", "args": ["revoke", "7", "--reason", "reassigned", "--holder", BOB]},
            {"op": "event", "issue": "7", "event": "lease_lost"},
            // A TTL later (three renewal rounds of 7), the client has heard of the loss once.
            call("acquire", json!({"issue": "8", "holder": ALICE, "ttl": "3s"})),
            {"op": "event", "issue": "8", "event": "renew", "ttls": 1},
        ]),
    ) else {
        return;
    };
    let acquired = result(&answers[0], 0);
    assert_eq!(answers[1]["code"], json!(0), "{:#}", answers[1]);
    let lost = &answers[2];
    env::assert_fields(
        lost,
        &[
            ("schema_version", json!(1)),
            ("holder", json!(ALICE)),
            ("token", acquired["token"].clone()),
        ],
    );
    let reason = lost["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("revoked by"), "{lost:#}");
    assert!(reason.contains("reassigned"), "{lost:#}");
    let notified = seen
        .iter()
        .filter(|s| s.contains("\"lease_lost\"") && s.contains("\"7\""))
        .count();
    assert_eq!(notified, 1, "{seen:#?}");
    // Nothing written for 7 after the revoke: no renewal, and no release at the end.
    assert_eq!(
        events(&repo, "7").first().map(String::as_str),
        Some("revoke")
    );
}

#[test]
fn mcp_a_detached_lease_is_neither_renewed_nor_released_and_a_too_short_bound_one_is_refused() {
    let repo = TestRepo::new();
    let claim = |issue: &str, ttl: &str, detached: bool| {
        call(
            "acquire",
            json!({"issue": issue, "holder": ALICE, "ttl": ttl, "detached": detached}),
        )
    };
    let Some((answers, seen)) = session(
        &repo,
        json!([
            claim("7", "3s", true),
            // Bound, then released by the client; bound, then claimed again detached.
            claim("11", "3s", false),
            call("release", json!({"issue": "11", "holder": ALICE})),
            claim("12", "3s", false),
            claim("12", "3s", true),
            claim("8", "3s", false),
            // A TTL after the claims: 7, 11 and 12 would have been renewed by now.
            {"op": "event", "issue": "8", "event": "renew", "ttls": 1},
            claim("9", "1s", false),
            claim("10", "1s", true),
        ]),
    ) else {
        return;
    };
    for answer in &answers[..6] {
        result(answer, 0);
    }
    assert_eq!(events(&repo, "7"), ["acquire"]);
    // Bound, so renewed until the client released it (a renewal falls between the two calls
    // only when they are a renewal interval apart, as on a loaded machine).
    let eleven = events(&repo, "11");
    let (newest, rest) = eleven.split_first().expect("events of 11");
    assert_eq!(newest, "release", "{eleven:?}");
    assert_eq!(
        rest.last().map(String::as_str),
        Some("acquire"),
        "{eleven:?}"
    );
    let between = &rest[..rest.len() - 1];
    assert!(between.iter().all(|e| e == "renew"), "{eleven:?}");
    // Claimed again detached by its live holder: a re-acquire, written only if the clock passed
    // a second between the two claims. Never renewed or released after.
    let twelve = events(&repo, "12");
    let twelve: Vec<&str> = twelve.iter().map(String::as_str).collect();
    assert!(
        matches!(twelve[..], ["acquire"] | ["reacquire", "acquire"]),
        "{twelve:?}"
    );
    assert_eq!(
        events(&repo, "8").first().map(String::as_str),
        Some("release")
    );
    // Nothing freed by the client, or detached, was reported lost.
    assert!(!seen.iter().any(|s| s.contains("lease_lost")), "{seen:#?}");
    // A second cannot be renewed in time: refused before anything is written.
    let refused = &result(&answers[7], 2)["error"];
    assert_eq!(refused["kind"], "usage", "{refused:#}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("detached")),
        "{refused:#}"
    );
    assert_eq!(repo.tip("9"), None);
    result(&answers[8], 0);
    assert_eq!(events(&repo, "10"), ["acquire"]);
}

#[test]
fn mcp_renewals_that_keep_failing_end_in_a_lost_notification() {
    let mut daemon = Server::with_hook();
    daemon.start();
    let repo = daemon.client(ALICE);
    repo.git(&["config", "lease.remote", "origin"]);
    let Some((answers, seen)) = session(
        &repo,
        json!([
            // Renewed every 3s: the first renewal comes well before the renew deadline.
            call("acquire", json!({"issue": "7", "ttl": "9s"})),
            // The remote can no longer be reached: every renewal fails from now on.
            {"op": "git", "args": ["remote", "set-url", "origin", "git://127.0.0.1:1/gone"]},
            {"op": "event", "issue": "7", "event": "lease_lost"},
        ]),
    ) else {
        return;
    };
    let acquired = result(&answers[0], 0);
    assert_eq!(
        daemon.tip("7"),
        acquired["commit"].as_str().map(str::to_owned)
    );
    let reason = answers[2]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("no renewal succeeded before the renew deadline"),
        "{:#}",
        answers[2]
    );
    // Each failure before the deadline was said, as a warning.
    assert!(
        seen.iter().any(|s| s.contains("failed, will retry")),
        "{seen:#?}"
    );
}

#[test]
fn mcp_the_same_holders_lease_taken_elsewhere_stays_unbound() {
    let repo = TestRepo::new();
    repo.lease()
        .args(["acquire", "7", "--holder", ALICE, "--ttl", "1h"])
        .run()
        .ok();
    let Some((answers, _)) = session(
        &repo,
        json!([call(
            "acquire",
            json!({"issue": "7", "holder": ALICE, "ttl": "1h"})
        )]),
    ) else {
        return;
    };
    // Idempotent for the live holder; the tenure began on the command line, so it stays
    // that client's: the session's end releases nothing.
    env::assert_fields(
        result(&answers[0], 0),
        &[("outcome", json!("acquired")), ("token", json!(1))],
    );
    env::assert_fields(
        &show(&repo, "7", None),
        &[("state", json!("held")), ("holder", json!(ALICE))],
    );
    // The claim refreshed it (reacquire) or, within the second, wrote nothing; no release.
    let events = events(&repo, "7");
    assert!(
        ["acquire", "reacquire"].contains(&events[0].as_str()),
        "{events:?}"
    );
    assert!(!events.contains(&"release".to_owned()), "{events:?}");
}
