//! The story `timeline` draws in its tests, as data (`--json`, in `it`) and in a browser (in
//! `zoo`): five issues whose tenures end every way a tenure ends, one of them hostile markup.

use serde_json::Value;

use crate::env::{at_min, TestRepo};

pub const ALICE: &str = "alice@example.com";
/// A holder name that is markup.
pub const EVE: &str = "<i>eve</i>\"&";
/// An issue id with the characters HTML escapes.
pub const ODD: &str = "a&b'c";
pub const NOTE: &str = "\"><img src=x onerror=alert(1)><script>document.title=\"pwned\"</script>";
pub const TASK: &str = "</div></div><h1 id=\"pwned\">x</h1>";

/// The story every test draws, minutes after T0, drawn at minute 240:
///
/// - 2: alice, renewed twice, completes it (token 1);
/// - 7: erin's lease expires and frank clears it, frank's is revoked, alice releases hers;
/// - 10: bob's expires and carol takes over, carol abandons, dave holds it live;
/// - gh/31: bob's expires and he takes it again, live;
/// - a&b'c: a holder and a note written as markup, expired with nothing after it.
pub fn story() -> TestRepo {
    let repo = TestRepo::new();
    let step = |min: i64, args: &[&str]| {
        repo.run_at(&at_min(min), args).ok();
    };
    step(
        0,
        &[
            "acquire",
            "2",
            "--holder",
            ALICE,
            "--ttl",
            "2h",
            "--note",
            "parser flake",
            "--task",
            "JOB-7",
        ],
    );
    step(10, &["acquire", "10", "--holder", "bob", "--ttl", "1h"]);
    step(
        20,
        &[
            "acquire", ODD, "--holder", EVE, "--ttl", "30m", "--note", NOTE, "--task", TASK,
        ],
    );
    step(30, &["acquire", "7", "--holder", "erin", "--ttl", "30m"]);
    step(50, &["renew", "2", "--holder", ALICE, "--ttl", "2h"]);
    step(60, &["acquire", "gh/31", "--holder", "bob", "--ttl", "1h"]);
    step(75, &["release", "7", "--holder", "frank"]);
    step(90, &["acquire", "10", "--holder", "carol", "--ttl", "3h"]);
    step(90, &["acquire", "7", "--holder", "frank", "--ttl", "1h"]);
    step(100, &["renew", "2", "--holder", ALICE, "--ttl", "2h"]);
    step(
        125,
        &["revoke", "7", "--holder", "ops", "--reason", "wrong branch"],
    );
    step(140, &["acquire", "7", "--holder", ALICE, "--ttl", "1h"]);
    step(150, &["complete", "2", "--holder", ALICE]);
    step(160, &["release", "7", "--holder", ALICE]);
    step(180, &["abandon", "10", "--holder", "carol"]);
    step(
        180,
        &["acquire", "gh/31", "--holder", "bob", "--ttl", "90m"],
    );
    step(200, &["acquire", "10", "--holder", "dave", "--ttl", "4h"]);
    repo
}

pub const NOW: i64 = 240;

/// Each issue's tenures as `(ending, holder, token)`, in the order the rows show them.
pub type Bars = Vec<(String, Vec<(String, String, u64)>)>;

pub fn expected_bars() -> Bars {
    let t = |e: &str, h: &str, n: u64| (e.to_owned(), h.to_owned(), n);
    vec![
        ("2".into(), vec![t("completed", ALICE, 1)]),
        (
            "7".into(),
            vec![
                t("expired", "erin", 1),
                t("revoked", "frank", 2),
                t("released", ALICE, 3),
            ],
        ),
        (
            "10".into(),
            vec![
                t("taken_over", "bob", 1),
                t("abandoned", "carol", 2),
                t("live", "dave", 3),
            ],
        ),
        (ODD.into(), vec![t("expired", EVE, 1)]),
        (
            "gh/31".into(),
            vec![t("taken_over", "bob", 1), t("live", "bob", 2)],
        ),
    ]
}

pub fn timeline_json(repo: &TestRepo, args: &[&str]) -> Value {
    let mut all = vec!["timeline"];
    all.extend_from_slice(args);
    repo.json_at(&at_min(NOW), 0, &all)
}

pub fn bars_of(json: &Value) -> Bars {
    json["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .map(|row| {
            let tenures = row["tenures"]
                .as_array()
                .expect("tenures")
                .iter()
                .map(|t| {
                    (
                        t["ending"].as_str().expect("ending").to_owned(),
                        t["holder"].as_str().expect("holder").to_owned(),
                        t["token"].as_u64().expect("token"),
                    )
                })
                .collect();
            (row["issue"].as_str().expect("issue").to_owned(), tenures)
        })
        .collect()
}

pub fn tenure<'a>(json: &'a Value, issue: &str, token: u64) -> &'a Value {
    json["issues"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["issue"] == issue))
        .and_then(|r| r["tenures"].as_array())
        .and_then(|ts| ts.iter().find(|t| t["token"] == token))
        .unwrap_or_else(|| panic!("no tenure {token} of {issue} in {json}"))
}
