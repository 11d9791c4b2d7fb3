//! `git lease timeline`'s page opened in a real browser, the distribution's headless Chromium:
//! each test reads the DOM the browser built (`--dump-dom`) and keeps a screenshot under the
//! target directory (`target/tmp/timeline-*.png`, a CI artifact). Without Chromium a browser
//! test is skipped, and fails with `CI=true` (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::{self, at_min, TestRepo};
use crate::timeline_story::{expected_bars, story, tenure, timeline_json, Bars, EVE, NOW, ODD};

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
