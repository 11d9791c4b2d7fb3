//! `git lease timeline`: every ledger's tenures, from its acquire to how it ended, as one
//! self-contained HTML page, and the same data as one JSON document.
//!
//! The page is opened in a real browser, the distribution's headless Chromium: each test
//! reads the DOM the browser built (`--dump-dom`) and keeps a screenshot under the target
//! directory (`target/tmp/timeline-*.png`, a CI artifact). Without Chromium a browser test
//! is skipped, and fails with `CI=true` (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::env::{self, at_min, TestRepo};
use crate::server::{self, Server};

const ALICE: &str = "alice@example.com";
/// A holder name that is markup.
const EVE: &str = "<i>eve</i>\"&";
/// An issue id with the characters HTML escapes.
const ODD: &str = "a&b'c";
const NOTE: &str = "\"><img src=x onerror=alert(1)><script>document.title=\"pwned\"</script>";
const TASK: &str = "</div></div><h1 id=\"pwned\">x</h1>";

/// The story every test draws, minutes after T0, drawn at minute 240:
///
/// - 2: alice, renewed twice, completes it (token 1);
/// - 7: erin's lease expires and frank clears it, frank's is revoked, alice releases hers;
/// - 10: bob's expires and carol takes over, carol abandons, dave holds it live;
/// - gh/31: bob's expires and he takes it again, live;
/// - a&b'c: a holder and a note written as markup, expired with nothing after it.
fn story() -> TestRepo {
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

const NOW: i64 = 240;

/// Each issue's tenures as `(ending, holder, token)`, in the order the rows show them.
type Bars = Vec<(String, Vec<(String, String, u64)>)>;

fn expected_bars() -> Bars {
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

fn timeline_json(repo: &TestRepo, args: &[&str]) -> Value {
    let mut all = vec!["timeline"];
    all.extend_from_slice(args);
    repo.json_at(&at_min(NOW), 0, &all)
}

fn bars_of(json: &Value) -> Bars {
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

fn tenure<'a>(json: &'a Value, issue: &str, token: u64) -> &'a Value {
    json["issues"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["issue"] == issue))
        .and_then(|r| r["tenures"].as_array())
        .and_then(|ts| ts.iter().find(|t| t["token"] == token))
        .unwrap_or_else(|| panic!("no tenure {token} of {issue} in {json}"))
}

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

// ---------------------------------------------------------------------------------------------
// In a real browser

/// The distribution's headless Chromium, run as root with no sandbox and an empty profile.
struct Browser {
    program: PathBuf,
    profile: tempfile::TempDir,
}

/// How long one browser run may take before the test gives up on it: the first start on a
/// busy machine is slow.
const BROWSER_BOUND_SECS: &str = "300";

impl Browser {
    /// Returns the browser, or `None` (after saying so) where none is installed; with
    /// `CI=true` a missing browser fails the test.
    fn find() -> Option<Browser> {
        let program = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists());
        let Some(program) = program else {
            return env::unavailable(
                env::Skip::Host,
                "",
                "chromium is not installed (.ci/run installs it)",
            );
        };
        Some(Browser {
            program,
            profile: tempfile::tempdir().expect("a profile directory"),
        })
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.arg(BROWSER_BOUND_SECS).arg(&self.program).args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ]);
        cmd.arg(format!("--user-data-dir={}", self.profile.path().display()));
        cmd.env("HOME", self.profile.path());
        cmd
    }

    /// Returns the DOM the browser built from `page`, after its script ran.
    fn dom(&self, page: &Path) -> String {
        self.dom_at(page, "")
    }

    /// Returns the DOM the browser built from `page` opened at `#fragment`.
    fn dom_at(&self, page: &Path, fragment: &str) -> String {
        let out = self
            .command()
            .arg("--dump-dom")
            .arg(format!("file://{}{fragment}", page.display()))
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "chromium --dump-dom: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("a UTF-8 DOM")
    }

    /// Takes a screenshot of `page` at `width` x `height` into `target/tmp/timeline-<name>.png`
    /// and returns its path.
    fn screenshot(&self, page: &Path, name: &str, width: u32, height: u32) -> PathBuf {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(dir).expect("the target's tmp directory");
        let shot = dir.join(format!(
            "timeline-{name}{}.png",
            if env::reftable() { "-reftable" } else { "" }
        ));
        let _ = std::fs::remove_file(&shot);
        let out = self
            .command()
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "chromium --screenshot: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let png = std::fs::read(&shot).expect("the screenshot");
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5000,
            "{}",
            shot.display()
        );
        shot
    }
}

/// Undoes the character references a serialised DOM uses.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Returns the value of `name` in the start tag `tag` (the text after `<div`, up to `>`).
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let from = tag.find(&key)? + key.len();
    let len = tag[from..].find('"')?;
    Some(unescape(&tag[from..from + len]))
}

/// Returns the start tag at the beginning of `text`, up to the `>` that ends it (a `>`
/// inside a quoted attribute value does not).
fn start_tag(text: &str) -> &str {
    let mut quoted = false;
    for (i, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '>' if !quoted => return &text[..i],
            _ => {}
        }
    }
    text
}

/// The start tags of the elements whose class attribute begins with `class`, in order.
fn tags<'a>(dom: &'a str, class: &str) -> Vec<&'a str> {
    let open = format!("<div class=\"{class}");
    dom.match_indices(&open)
        .map(|(i, _)| start_tag(&dom[i..]))
        .collect()
}

/// The rows of a DOM, each with its bars, as `(issue, [(ending, holder, token)])`.
fn dom_bars(dom: &str) -> Bars {
    let mut rows: Bars = Vec::new();
    let rows_at: Vec<usize> = dom
        .match_indices("<div class=\"row\"")
        .map(|(i, _)| i)
        .collect();
    for (n, start) in rows_at.iter().enumerate() {
        let end = rows_at.get(n + 1).copied().unwrap_or(dom.len());
        let chunk = &dom[*start..end];
        let row_tag = start_tag(chunk);
        let issue = attr(row_tag, "data-issue").expect("data-issue");
        let bars = tags(chunk, "bar ")
            .into_iter()
            .map(|tag| {
                let class = attr(tag, "class").expect("class");
                let ending = class
                    .split(' ')
                    .find_map(|c| c.strip_prefix("ending-"))
                    .expect("an ending class")
                    .to_owned();
                assert_eq!(attr(tag, "data-ending").as_deref(), Some(ending.as_str()));
                let token = attr(tag, "data-token")
                    .expect("data-token")
                    .parse()
                    .expect("a token");
                (
                    ending,
                    attr(tag, "data-holder").expect("data-holder"),
                    token,
                )
            })
            .collect();
        rows.push((issue, bars));
    }
    rows
}

fn write_page(repo: &TestRepo, name: &str, args: &[&str]) -> PathBuf {
    let page = repo.scratch("pages").join(format!("{name}.html"));
    let mut all = vec!["timeline", "-o", page.to_str().expect("a UTF-8 path")];
    all.extend_from_slice(args);
    repo.run_at(&at_min(NOW), &all).ok();
    page
}

#[test]
fn in_a_browser_the_bars_their_order_labels_and_endings_are_the_ledgers() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let repo = story();
    let page = write_page(&repo, "story", &[]);
    let dom = browser.dom(&page);
    browser.screenshot(&page, "story", 1280, 520);
    assert_eq!(dom_bars(&dom), expected_bars());
    // Every ending has its class, and each bar is labelled with its holder and token.
    for ending in [
        "completed",
        "released",
        "abandoned",
        "revoked",
        "expired",
        "taken_over",
        "live",
    ] {
        assert!(
            !tags(&dom, &format!("bar ending-{ending}")).is_empty(),
            "no {ending} bar"
        );
    }
    assert!(
        dom.contains("<span class=\"bar-label\">carol <small>#2</small></span>"),
        "{dom}"
    );
    // The live ones, and only they, carry the live marker, and the axis marks now.
    let live_markers = dom.matches("<span class=\"live-marker\"").count();
    assert_eq!(live_markers, 2);
    for chunk in dom.split("<div class=\"bar ").skip(1) {
        let marked = chunk
            .split("<div class=\"tip\"")
            .next()
            .unwrap_or("")
            .contains("live-marker");
        assert_eq!(marked, chunk.starts_with("ending-live"), "{chunk}");
    }
    assert!(dom.contains("class=\"now-label\""));
    // The summary.
    for (id, value) in [
        ("live", "2"),
        ("holders", "7"),
        ("tenures", "10"),
        ("expiries-taken-over", "2"),
        ("mean-held", "57m 30s"),
    ] {
        let stat = format!("<div class=\"stat\" id=\"stat-{id}\"><b>{value}</b>");
        assert!(dom.contains(&stat), "{stat} in {dom}");
    }
    // What a hover shows: the commit, the times, the note and the task.
    let commit = repo.git(&["rev-list", "--max-parents=0", "refs/leases/2"]);
    assert!(dom.contains(&format!("<code>{}</code>", commit.trim())));
    assert!(dom.contains("<dd class=\"tip-note\">parser flake</dd>"));
    assert!(dom.contains("<dd class=\"tip-task\">JOB-7</dd>"));
    assert!(
        dom.contains("<dd class=\"tip-held\">2026-11-30 12:00 → 2026-11-30 14:30 (2h 30m)</dd>")
    );
    // Focus shows them: the page opened at a tenure's address focuses its bar, and the
    // page's script puts its details in the tooltip.
    let tooltip = |dom: &str| -> String {
        dom[dom.find("<div id=\"tooltip\"").expect("a tooltip")..].to_owned()
    };
    assert!(start_tag(&tooltip(&dom)).contains(" hidden"));
    let focused = tooltip(&browser.dom_at(&page, "#10:2"));
    assert!(!start_tag(&focused).contains(" hidden"), "{focused}");
    assert!(focused
        .contains("10 · token 2 · <span class=\"tip-ending ending-abandoned\">abandoned</span>"));
    assert!(focused.contains(&format!("<code>{}</code>", json_commit(&repo, "10", 2))));
}

/// The commit of `issue`'s tenure `token`, as `timeline --json` gives it.
fn json_commit(repo: &TestRepo, issue: &str, token: u64) -> String {
    let json = timeline_json(repo, &[]);
    tenure(&json, issue, token)["commit"]
        .as_str()
        .expect("a commit")
        .to_owned()
}

#[test]
fn in_a_browser_a_hostile_note_holder_and_issue_stay_text() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let repo = story();
    let page = write_page(&repo, "hostile", &[ODD]);
    let dom = browser.dom(&page);
    browser.screenshot(&page, "hostile", 1000, 360);
    // Only the page's own script, no element the ledger's texts spelled, and its title kept.
    assert_eq!(dom.matches("<script").count(), 1, "{dom}");
    assert!(dom.contains("<title>Lease timeline</title>"));
    for injected in ["<img", "<h1 id=\"pwned\"", "<i>eve", "onerror=alert(1)>"] {
        assert!(!dom.contains(injected), "{injected} became markup: {dom}");
    }
    // They are there as text.
    assert!(dom.contains("<dd class=\"tip-note\">\"&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;document.title=\"pwned\"&lt;/script&gt;</dd>"), "{dom}");
    assert!(dom.contains("&lt;/div&gt;&lt;/div&gt;&lt;h1 id=\"pwned\"&gt;x&lt;/h1&gt;"));
    assert!(
        dom.contains("<span class=\"bar-label\">&lt;i&gt;eve&lt;/i&gt;\"&amp; <small>#1</small>")
    );
    assert_eq!(
        dom_bars(&dom),
        [(
            ODD.to_owned(),
            vec![("expired".to_owned(), EVE.to_owned(), 1)]
        )]
    );
}

#[test]
fn in_a_browser_ten_thousand_issues_draw_the_first_rows_and_say_how_many_are_left_out() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let repo = TestRepo::new();
    let ids: Vec<String> = (1..=10_000).map(|n| n.to_string()).collect();
    let mut args = vec!["acquire".to_owned()];
    args.extend(ids.iter().cloned());
    args.extend([
        "--holder".to_owned(),
        "bulk".to_owned(),
        "--ttl".to_owned(),
        "8h".to_owned(),
    ]);
    repo.run_at(&at_min(0), &args).ok();
    repo.run_at(
        &at_min(10),
        &["acquire", "77", "--holder", "late", "--ttl", "2h"],
    )
    .code(3);
    let page = write_page(&repo, "many", &["--limit", "500"]);
    let dom = browser.dom(&page);
    browser.screenshot(&page, "many", 1280, 640);
    let rows = dom_bars(&dom);
    assert_eq!(rows.len(), 500);
    let first: Vec<&str> = rows.iter().take(3).map(|(i, _)| i.as_str()).collect();
    assert_eq!(first, ["1", "2", "3"]);
    assert!(
        dom.contains("Showing 500 of 10000 issues (the first in issue order)"),
        "a note"
    );
    assert!(dom.contains("<div class=\"stat\" id=\"stat-live\"><b>10000</b>"));
}

#[test]
fn in_a_browser_an_empty_window_says_so() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let repo = TestRepo::new();
    let page = write_page(&repo, "empty", &[]);
    let dom = browser.dom(&page);
    assert!(dom.contains("No tenure in this window."));
    assert!(dom_bars(&dom).is_empty());
}
