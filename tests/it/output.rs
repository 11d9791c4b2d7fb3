//! Human output never passes on control characters or invisible Unicode that others wrote:
//! a forged ledger's note, holder, reason and `by` are shown escaped by `show`, `list`, `log`,
//! `watch`, report lines, `check` and `verify`, while `--json` keeps the exact strings.

use serde_json::{json, Value};

use crate::env::{at, Run, TestRepo, Watch};
use crate::forge::{acquired, build_ledger, freed, with};

/// Clears the screen, retitles the terminal, rings the bell, returns to the line's start and
/// reverses the rest.
const NOTE: &str = "done\u{1b}[2J\u{1b}]0;pwned\u{7}\rall good \u{202e}txt.exe";
const NOTE_SHOWN: &str = "done\\x1b[2J\\x1b]0;pwned\\x07\\rall good \\u{202e}txt.exe";
const HOLDER: &str = "mallory\u{1b}[31m@example.com\u{202e}";
const HOLDER_SHOWN: &str = "mallory\\x1b[31m@example.com\\u{202e}";
const REASON: &str = "moved on\u{1b}[1A\rrevoked by nobody\u{7}";
const REASON_SHOWN: &str = "moved on\\x1b[1A\\rrevoked by nobody\\x07";
const BY: &str = "ad\u{200b}min\u{9b}0m";
const BY_SHOWN: &str = "ad\\u{200b}min\\u{9b}0m";
const TASK: &str = "job\u{0}\u{7f}\u{2066}";
const TASK_SHOWN: &str = "job\\x00\\x7f\\u{2066}";

/// Asserts that `run`'s stdout has no control character but newlines, and no invisible or
/// bidi character.
#[track_caller]
fn assert_printable(run: &Run) {
    let bad: Vec<char> = run
        .stdout
        .chars()
        .filter(|c| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(
        bad.is_empty(),
        "raw {bad:?} in the output of `{}`\n{run}",
        run.command
    );
}

/// A repository with `held` (live, by [`HOLDER`], with [`NOTE`] and [`TASK`]) and `gone`
/// (taken by [`HOLDER`], then revoked by [`BY`] for [`REASON`]).
fn forged() -> TestRepo {
    let repo = TestRepo::new();
    let held = with(
        with(
            acquired("held", HOLDER, 1, 0, Some(3600)),
            "note",
            json!(NOTE),
        ),
        "task",
        json!(TASK),
    );
    build_ledger(&repo, "held", &[held]);
    let revoked = with(
        with(freed("gone", "revoke", HOLDER, 1, 60), "by", json!(BY)),
        "reason",
        json!(REASON),
    );
    build_ledger(
        &repo,
        "gone",
        &[acquired("gone", HOLDER, 1, 0, Some(3600)), revoked],
    );
    repo
}

/// Asserts that `show` printed the line `label`, padded, then `value`.
#[track_caller]
fn assert_shows(show: &Run, label: &str, value: &str) {
    let found = show.stdout.lines().any(|line| {
        line.strip_prefix(label)
            .is_some_and(|rest| rest.starts_with(' ') && rest.trim_start() == value)
    });
    assert!(found, "`show` should print {label} {value}\n{show}");
}

#[test]
fn show_list_and_log_escape_what_a_ledger_says() {
    let repo = forged();
    let now = at(120);

    let show = repo.run_at(&now, &["show", "held"]);
    show.ok();
    assert_printable(&show);
    assert_shows(&show, "holder:", HOLDER_SHOWN);
    assert_shows(&show, "note:", NOTE_SHOWN);
    assert_shows(&show, "task:", TASK_SHOWN);
    let show = repo.run_at(&now, &["show", "gone"]);
    show.ok();
    assert_printable(&show);
    assert_shows(&show, "last holder:", HOLDER_SHOWN);

    let list = repo.run_at(&now, &["list", "--all"]);
    list.ok();
    assert_printable(&list);
    let rows: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(rows.len(), 3, "{list}");
    assert!(rows[1..].iter().all(|r| r.contains(HOLDER_SHOWN)), "{list}");
    // The table stays aligned: the escaped holder counts as what is shown.
    let column = |row: &str| row.find("1  ").expect("a token column");
    assert_eq!(column(rows[1]), column(rows[2]), "{list}");
    // The task and the note (cut to fit, the cut marked) are shown escaped too.
    let held = rows[1..]
        .iter()
        .find(|r| r.starts_with("held "))
        .expect("held is listed");
    let (before, note) = held.rsplit_once("  ").expect("a note column");
    assert!(before.trim_end().ends_with(TASK_SHOWN), "{list}");
    let kept = note.strip_suffix('…').expect("a long note is cut");
    assert!(NOTE_SHOWN.starts_with(kept) && kept.len() >= 9, "{list}");

    let log = repo.run_at(&now, &["log", "held"]);
    log.ok();
    assert_printable(&log);
    log.stdout_has(&format!("task: {TASK_SHOWN}  note: {NOTE_SHOWN}"));

    let log = repo.run_at(&now, &["log", "gone"]);
    log.ok();
    assert_printable(&log);
    log.stdout_has(&format!("was {HOLDER_SHOWN} by {BY_SHOWN}"))
        .stdout_has(&format!("reason: {REASON_SHOWN}"))
        .stdout_has(&format!("  {HOLDER_SHOWN}  until"));
}

#[test]
fn report_check_and_verify_lines_escape_what_a_ledger_says() {
    let repo = forged();
    let now = at(120);

    let refused = repo.run_at(&now, &["acquire", "held", "--holder", "bob"]);
    refused.code(3);
    assert_printable(&refused);
    refused.stdout_has(&format!("held: held is held by {HOLDER_SHOWN} (token 1)"));

    let check = repo.run_at(&now, &["check", "held", "--token", "7"]);
    check.code(3);
    assert_printable(&check);
    check.stdout_has(&format!("(held by {HOLDER_SHOWN})"));

    // A release that still names a holder breaks a rule, and the finding quotes the holder.
    let bad = with(
        freed("bad", "release", HOLDER, 1, 60),
        "holder",
        json!(HOLDER),
    );
    build_ledger(&repo, "bad", &[acquired("bad", HOLDER, 1, 0, None), bad]);
    let verify = repo.run_at(&now, &["verify"]);
    verify.code(1);
    assert_printable(&verify);
    verify.stdout_has(&format!("records holder {HOLDER_SHOWN}"));
    let audit = repo.lease().now(&now).arg_json().args(["verify"]).run();
    audit.code(1);
    let detail = audit.json()["findings"][0]["detail"].clone();
    assert!(
        detail.as_str().is_some_and(|d| d.contains(HOLDER)),
        "the JSON finding keeps the exact holder: {detail}"
    );

    // A holder may be given with invisible characters (they are not control characters): the
    // report shows them.
    let sneaky = "bob\u{200b}";
    let taken = repo.run_at(&now, &["acquire", "new", "--holder", sneaky]);
    taken.ok();
    assert_printable(&taken);
    taken.stdout_has("acquired new for bob\\u{200b} (token 1)");
}

#[test]
fn json_output_keeps_the_exact_strings() {
    let repo = forged();
    let now = at(120);
    let json = |args: &[&str]| -> Value {
        let run = repo.lease().now(&now).arg_json().args(args).run();
        run.ok();
        run.json()
    };
    let shown = json(&["show", "held"]);
    assert_eq!(shown["holder"], json!(HOLDER), "{shown}");
    assert_eq!(shown["note"], json!(NOTE), "{shown}");
    assert_eq!(shown["task"], json!(TASK), "{shown}");
    let listed = json(&["list", "--all"]);
    let holders: Vec<&Value> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| &v["last_holder"])
        .collect();
    assert_eq!(holders, vec![&json!(HOLDER), &json!(HOLDER)], "{listed}");
    let logged = json(&["log", "gone"]);
    let tip = &logged[0];
    assert_eq!(
        (&tip["reason"], &tip["by"], &tip["previous_holder"]),
        (&json!(REASON), &json!(BY), &json!(HOLDER)),
        "{logged}"
    );
}

#[test]
fn watch_lines_escape_what_a_ledger_says() {
    let repo = forged();
    // The replayed history: held's acquire, gone's acquire, gone's revoke.
    let mut watch = Watch::spawn(
        &repo,
        repo.lease()
            .now(&at(120))
            .args(["watch", "--since", &at(-60)]),
    );
    let seen: Vec<String> = (0..3).map(|_| watch.next_line()).collect();
    let run = Run {
        command: "git lease watch --since <T0 - 60s>".into(),
        code: 0,
        stdout: seen.join("\n"),
        stderr: String::new(),
    };
    assert!(seen[2].contains(" revoke "), "three events replayed\n{run}");
    assert_printable(&run);
    run.stdout_has(HOLDER_SHOWN);
    run.stdout_has(&format!("by {BY_SHOWN}"));
    run.stdout_has(&format!("reason: {REASON_SHOWN}"));
}
