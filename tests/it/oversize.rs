//! Honest input never bricks a ledger: a note, task or reason over its bound is refused with
//! exit 2 before anything is written, on the command line (through MCP: `mcp::bounds`, in the
//! `zoo` test binary); a remark at its bound is written and read back by every reader; the
//! hook refuses a forged over-size record; and a repository with one over-size ledger (made with plain git) still lists and
//! draws every other one, naming the bad one.

use serde_json::{json, Value};

use crate::env::{TestRepo, T0};
use crate::forge::{self, acquired, with};
use crate::server::Server;

/// The note of the report: 70 KB, more than a whole record may be.
fn seventy_kb() -> String {
    "n".repeat(70_000)
}

#[test]
fn a_note_task_or_reason_over_its_bound_is_refused_and_nothing_is_written() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "alice"]);
    let before = repo.snapshot();
    let big = seventy_kb();
    for (args, field) in [
        (
            vec!["acquire", "42", "--holder", "alice", "--note", &big],
            "note",
        ),
        (
            vec!["acquire", "43", "--holder", "alice", "--note", &big],
            "note",
        ),
        (
            vec!["acquire", "43", "--holder", "alice", "--task", &big],
            "task",
        ),
        (
            vec!["revoke", "42", "--holder", "ops", "--reason", &big],
            "reason",
        ),
        (
            vec!["acquire", "43", "--any", "--holder", "a", "--note", &big],
            "note",
        ),
    ] {
        let run = repo.run_at(T0, &args);
        run.code(2)
            .stderr_has(&format!("the {field} is 70000 bytes"))
            .stderr_has("nothing was written");
        // With --json, the error says the same, as JSON on stderr.
        let run = repo.lease().now(T0).args(["--json"]).args(&args).run();
        run.code(2);
        let v: Value = serde_json::from_str(run.stderr.trim()).expect("a JSON error");
        assert_eq!(v["error"]["kind"], "usage", "{v}");
    }
    assert_eq!(repo.snapshot(), before, "git sees nothing new");
    repo.json_at(T0, 0, &["show", "42"]);
}

#[test]
fn escaping_counts_toward_the_bound_and_a_note_at_its_bound_reads_back_everywhere() {
    let repo = TestRepo::new();
    // 9000 control characters are 54000 bytes as stored: over the 53248 of a note.
    let escaped = "\u{1}".repeat(9000);
    repo.run_at(T0, &["acquire", "7", "--holder", "a", "--note", &escaped])
        .code(2)
        .stderr_has("the note is 54000 bytes");
    assert_eq!(repo.lease_refs(), "");
    // A note of exactly its bound and the longest task: every reader reads the ledger.
    let note = "\"".repeat(52 * 1024 / 2);
    let task = "t".repeat(2 * 1024);
    repo.json_at(
        T0,
        0,
        &[
            "acquire", "7", "--holder", "a", "--note", &note, "--task", &task,
        ],
    );
    assert_eq!(repo.lease_json("7")["note"], json!(note));
    for args in [&["show", "7"][..], &["list"], &["log", "7"], &["verify"]] {
        repo.run_at(T0, args).ok();
    }
    repo.json_at(T0, 0, &["release", "7", "--holder", "a"]);
    repo.json_at(T0, 0, &["acquire", "7", "--holder", "b"]);
    repo.assert_fsck();
}

/// `lease.json` of an acquire of `issue` carrying the 70 KB note.
fn over_size(issue: &str) -> Value {
    with(
        acquired(issue, "mallory", 1, 0, Some(3600)),
        "note",
        json!(seventy_kb()),
    )
}

#[test]
fn the_hook_refuses_a_forged_over_size_record() {
    let mut server = Server::with_hook();
    server.start_at(T0);
    let client = server.client("mallory");
    let commits = forge::build_ledger(&client, "9", &[over_size("9")]);
    let push = client.git_run(&["push", "origin", "refs/leases/9:refs/leases/9"]);
    assert_ne!(push.code, 0, "{push}");
    assert!(push.stderr.contains("git-lease: refused"), "{push}");
    assert!(push.stderr.contains("65536 bytes"), "{push}");
    assert!(push.stderr.contains(&commits[0][..10]), "{push}");
    assert_eq!(server.lease_refs(), "", "nothing landed");
}

#[test]
fn one_over_size_ledger_is_named_and_every_other_still_listed_and_drawn() {
    let repo = TestRepo::new();
    for issue in ["1", "2", "10"] {
        repo.json_at(T0, 0, &["acquire", issue, "--holder", "alice"]);
    }
    forge::build_ledger(&repo, "3", &[over_size("3")]);
    for args in [
        &["list"][..],
        &["list", "--all"],
        &["list", "--state", "held"],
    ] {
        let run = repo.run_at(T0, args);
        run.code(1)
            .stderr_has("the ledger of 3 is corrupt")
            .stderr_has("65536 bytes");
        for issue in ["1 ", "2 ", "10 "] {
            assert!(
                run.stdout.lines().any(|l| l.starts_with(issue)),
                "{issue} is listed: {run}"
            );
        }
    }
    let listed = repo.json_at(T0, 1, &["list", "--json"]);
    assert_eq!(crate::env::issues(&listed), ["1", "2", "10"]);
    let drawn = repo.json_at(T0, 1, &["timeline", "--json"]);
    let rows: Vec<&str> = drawn["issues"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["issue"].as_str().expect("an id"))
        .collect();
    assert_eq!(rows, ["1", "2", "10"]);
    let page = repo.scratch("out").join("page.html");
    repo.run_at(T0, &["timeline", "-o", page.to_str().expect("utf-8")])
        .code(1)
        .stderr_has("the ledger of 3 is corrupt");
    let html = std::fs::read_to_string(&page).expect("the page");
    for issue in ["1", "2", "10"] {
        assert!(
            html.contains(&format!("data-issue=\"{issue}\"")),
            "{issue} is drawn"
        );
    }
    assert!(!html.contains("data-issue=\"3\""), "3 is not drawn");
    // Readers of that one issue say what is wrong with it.
    repo.run_at(T0, &["show", "3"])
        .code(1)
        .stderr_has("65536 bytes");
}
