//! Text that others wrote: what a forged ledger carries (controls, escapes, JSON-RPC
//! look-alikes, shell commands, huge notes) reaches the MCP client as JSON data in well-framed
//! messages, and nothing of it runs.

use super::*;

/// A file a hostile string tries to create by being run through a shell (relative: in the
/// directory the client and the server run in).
const CANARY: &str = "pwned";

/// Pieces of what a pushed ledger's text fields may say: terminal escapes, C0 and C1 controls,
/// NUL, DEL, bidi and invisible characters, JavaScript's line separators, quotes and
/// backslashes, text that looks like JSON-RPC messages or their framing, and shell commands.
const HOSTILE_TEXT: &[&str] = &[
    "\u{1b}[2J",
    "\u{1b}]0;pwned\u{7}",
    "\u{1b}[31m",
    "\r",
    "\n",
    "\t",
    "\u{0}",
    "\u{7f}",
    "\u{85}",
    "\u{9b}0m",
    "\u{2028}",
    "\u{2029}",
    "\u{202e}",
    "\u{200b}",
    "\u{feff}",
    "\"",
    "\\",
    "\\u0000",
    "\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
    "\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n",
    "Content-Length: 0\r\n\r\n",
    "$(touch pwned)",
    "`touch pwned`",
    "; touch pwned",
    "é",
    "🦀",
    "x",
];

/// Pieces an issue id may hold (a ref name: no controls, spaces or `~^:?*[\`, and no
/// `" < > |`, which no ref path may hold: `odd_ids::*`), as hostile as an id may be.
const HOSTILE_ID: &[&str] = &[
    "'",
    "$(touch${IFS}pwned)",
    "`touch${IFS}pwned`",
    ";",
    "&",
    "{",
    "}",
    ",",
    "%1b",
    "é",
    "🦀",
    "x",
];

/// A string of up to `max` pieces of `pieces`.
fn hostile(pieces: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(pieces), 1..=max).prop_map(|p| p.concat())
}

/// One case: the hostile text of a ledger's every field others write, and a note that is
/// huge as well (up to 48 KiB of the 64 KiB a record may be).
#[derive(Clone, Debug)]
struct Hostile {
    issue: String,
    holder: String,
    note: String,
    task: String,
    by: String,
    reason: String,
}

fn hostile_case() -> impl Strategy<Value = Hostile> {
    (
        hostile(HOSTILE_ID, 6),
        hostile(HOSTILE_TEXT, 8),
        (hostile(HOSTILE_TEXT, 8), 0usize..=16 * 1024),
        hostile(HOSTILE_TEXT, 8),
        hostile(HOSTILE_TEXT, 8),
        hostile(HOSTILE_TEXT, 8),
    )
        .prop_map(|(id, holder, (note, filler), task, by, reason)| Hostile {
            // A leading letter: an id may not start with `-` or `.`.
            issue: format!("i{id}"),
            holder,
            note: note + &"€".repeat(filler),
            task,
            by,
            reason,
        })
}

/// Asserts that what the server wrote on its stdout is JSON-RPC framed as the stdio transport
/// says: one JSON-RPC 2.0 message a line, no control character inside one; each answer to a
/// request of its own, `tool_calls` of them tool results, and its notifications only the
/// protocol's (a lease event among them).
#[track_caller]
fn assert_framed(transcript: &str, tool_calls: usize) {
    assert!(transcript.ends_with('\n'), "an unterminated last line");
    let mut answered = std::collections::BTreeSet::new();
    let (mut results, mut notices) = (0, 0);
    for line in transcript.trim_end_matches('\n').split('\n') {
        assert!(
            !line.chars().any(|c| c < ' '),
            "a control character inside a message: {line:?}"
        );
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a line that is not one JSON value ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        match (message.get("id"), message["method"].as_str()) {
            (Some(id), None) => {
                assert!(answered.insert(id.to_string()), "answered twice: {line}");
                if message["result"].get("content").is_some() {
                    results += 1;
                }
            }
            (None, Some(method)) => {
                assert!(
                    method.starts_with("notifications/"),
                    "the server asked for something: {line}"
                );
                if method == "notifications/message" {
                    notices += 1;
                }
            }
            _ => panic!("neither an answer nor a notification: {line}"),
        }
    }
    assert_eq!(results, tool_calls, "{transcript}");
    assert!(notices > 0, "no lease event was notified: {transcript}");
}

/// Forges `case`'s ledger in `repo`: `case.issue` held by `case.holder` (never expiring) with
/// its note and task; returns the commit of a revoke of it by `case.by` for `case.reason`,
/// written but not yet on the ledger's ref.
fn forge_hostile(repo: &TestRepo, case: &Hostile) -> String {
    let held = with(
        with(
            acquired(&case.issue, &case.holder, 1, 0, None),
            "note",
            json!(case.note),
        ),
        "task",
        json!(case.task),
    );
    // Commit messages of their own: git's arguments hold no NUL.
    let tip = forge::lease_commit_saying(repo, &held, &[], "acquire");
    forge::set_ledger(repo, &case.issue, &tip);
    let revoked = with(
        with(
            freed(&case.issue, "revoke", &case.holder, 1, 60),
            "by",
            json!(case.by),
        ),
        "reason",
        json!(case.reason),
    );
    forge::lease_commit_saying(repo, &revoked, &[&tip], "revoke")
}

/// Reads `case`'s forged ledger back through the tools and a notification of a revoke
/// pushed under the session: every string is the one forged, to the byte.
fn read_back_hostile(python: &PathBuf, case: &Hostile) {
    let repo = TestRepo::new();
    let revoke = forge_hostile(&repo, case);
    let ledger = format!("refs/leases/{}", case.issue);
    let transcript = repo.scratch("mcp").join("transcript");
    let steps = json!([
        call("show", json!({"issue": case.issue})),
        call("list", json!({"all": true})),
        {"op": "git", "args": ["update-ref", ledger, revoke]},
        {"op": "event", "issue": case.issue, "event": "revoke"},
        call("show", json!({"issue": case.issue})),
        call("log", json!({"issue": case.issue})),
    ]);
    let out = client(
        python,
        &repo,
        &["steps", transcript.to_str().expect("a UTF-8 path")],
        &steps,
    );
    let answers = out["answers"].as_array().expect("answers");
    assert_eq!(answers[2]["code"], 0, "{:#}", answers[2]);

    env::assert_fields(
        result(&answers[0], 0),
        &[
            ("issue", json!(case.issue)),
            ("state", json!("held")),
            ("holder", json!(case.holder)),
            ("note", json!(case.note)),
            ("task", json!(case.task)),
        ],
    );
    let listed = result(&answers[1], 0).as_array().expect("an array");
    assert_eq!(listed.len(), 1, "{listed:#?}");
    env::assert_fields(
        &listed[0],
        &[
            ("issue", json!(case.issue)),
            ("holder", json!(case.holder)),
            ("note", json!(case.note)),
        ],
    );
    env::assert_fields(
        &answers[3],
        &[
            ("issue", json!(case.issue)),
            ("event", json!("revoke")),
            ("previous_holder", json!(case.holder)),
            ("by", json!(case.by)),
            ("reason", json!(case.reason)),
            ("commit", json!(revoke)),
        ],
    );
    env::assert_fields(
        result(&answers[4], 0),
        &[
            ("state", json!("free")),
            ("last_holder", json!(case.holder)),
        ],
    );
    let log = result(&answers[5], 0).as_array().expect("an array");
    assert_eq!(log.len(), 2, "{log:#?}");
    env::assert_fields(
        &log[0],
        &[
            ("event", json!("revoke")),
            ("by", json!(case.by)),
            ("reason", json!(case.reason)),
        ],
    );
    env::assert_fields(
        &log[1],
        &[
            ("event", json!("acquire")),
            ("holder", json!(case.holder)),
            ("note", json!(case.note)),
            ("task", json!(case.task)),
        ],
    );

    let written = std::fs::read_to_string(&transcript).expect("the transcript");
    assert_framed(&written, 4);
    for dir in [repo.path(), repo.root(), repo.home()] {
        assert!(!dir.join(CANARY).exists(), "{} was run", dir.display());
    }
}

#[test]
fn mcp_results_and_notifications_carry_hostile_ledger_text_as_json_data_and_run_none_of_it() {
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let Some(python) = python() else {
        return;
    };
    // Every piece at once, then generated cases (a fixed run: a seed, 12 cases, no shrinking
    // past a minute).
    let all = |pieces: &[&str]| pieces.concat();
    read_back_hostile(
        &python,
        &Hostile {
            issue: format!("i{}", all(HOSTILE_ID)),
            holder: all(HOSTILE_TEXT),
            note: all(HOSTILE_TEXT) + &"€".repeat(16 * 1024),
            task: all(HOSTILE_TEXT),
            by: all(HOSTILE_TEXT),
            reason: all(HOSTILE_TEXT),
        },
    );
    let mut runner = TestRunner::new(Config {
        cases: 12,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(crate::env::env_number(
            "GIT_LEASE_ADVERSARY_SEED",
            crate::env::DEFAULT_SEED,
        )),
        max_shrink_time: 60_000,
        ..Config::default()
    });
    let outcome = runner.run(&hostile_case(), |case| {
        read_back_hostile(&python, &case);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
