//! `git lease mcp`, driven by an MCP client written by others: the Python MCP SDK (pinned,
//! [`MCP_SDK`], in the virtual environment `.ci/run` installs under `$GIT_LEASE_TEST_TOOLS`),
//! through `tests/it/mcp_client.py`, which starts the real binary as its stdio server. The
//! tools answer with the `--json` documents; a non-zero exit code is a tool error carrying it;
//! session secrets stay in the server; lease events arrive as logging notifications; text a
//! forged ledger carries (controls, escapes, JSON-RPC look-alikes, shell commands, huge notes)
//! reaches the client as JSON data in well-framed messages, and nothing of it runs.
//! Without the SDK each test is skipped (a failure with `CI=true`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::env::{self, TestRepo};
use crate::forge::{self, acquired, freed, with};
use crate::server::Server;
use crate::servers::thirdparty::DEFAULT_TOOLS;
use crate::session::{ALICE, BOB};

const CAROL: &str = "carol@example.com";

/// The Python MCP SDK release the tests use.
const MCP_SDK: &str = "1.30.0";
/// The client script.
pub(crate) const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp_client.py");

/// Returns the Python of the SDK's environment, or records the skip (fails with `CI=true`).
pub(crate) fn python() -> Option<PathBuf> {
    let tools = std::env::var_os("GIT_LEASE_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_TOOLS));
    let python = tools.join(format!("mcp-{MCP_SDK}/bin/python3"));
    if python.is_file() {
        return Some(python);
    }
    let why = format!(
        "the Python MCP SDK {MCP_SDK} is not installed at {} (.ci/run installs it)",
        python.display()
    );
    env::unavailable(env::Skip::Host, "", &why)
}

/// Runs the client in `repo` with `args` (and `input` on stdin); returns its JSON answer:
/// `{"answers": [...], "seen": [every result's text and notification]}`.
fn client(python: &PathBuf, repo: &TestRepo, args: &[&str], input: &Value) -> Value {
    client_at(python, repo, args, input, None)
}

/// [`client`], with the server's clock held at `now` (`GIT_LEASE_NOW`) when given: a test
/// whose answers depend on two calls reading the same second does not race the clock.
fn client_at(
    python: &PathBuf,
    repo: &TestRepo,
    args: &[&str],
    input: &Value,
    now: Option<&str>,
) -> Value {
    let mut cmd = Command::new(python);
    env::hermetic(&mut cmd, repo.home(), repo.root());
    if let Some(now) = now {
        cmd.env("GIT_LEASE_NOW", now);
    }
    cmd.arg(CLIENT)
        .arg(env::BIN)
        .args(args)
        .current_dir(repo.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start the MCP client");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(input.to_string().as_bytes())
        .expect("write the steps");
    let out = child.wait_with_output().expect("wait for the MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MCP client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Runs `steps` in one session; returns the answers and everything the client saw.
pub(crate) fn session(repo: &TestRepo, steps: Value) -> Option<(Vec<Value>, Vec<String>)> {
    session_at(repo, steps, None)
}

/// [`session`] on a clock held at `now` (see [`client_at`]).
pub(crate) fn session_at(
    repo: &TestRepo,
    steps: Value,
    now: Option<&str>,
) -> Option<(Vec<Value>, Vec<String>)> {
    let python = python()?;
    let out = client_at(&python, repo, &["steps"], &steps, now);
    let answers = out["answers"].as_array().expect("answers").clone();
    let seen = out["seen"]
        .as_array()
        .expect("seen")
        .iter()
        .map(|s| s.as_str().expect("text").to_owned())
        .collect();
    Some((answers, seen))
}

pub(crate) fn call(tool: &str, args: Value) -> Value {
    json!({"op": "call", "tool": tool, "args": args})
}

/// Asserts a tool result's exit code (and so `isError`), and returns its JSON document.
#[track_caller]
pub(crate) fn result(answer: &Value, code: u64) -> &Value {
    assert_eq!(answer["meta"]["exit_code"], json!(code), "{answer:#}");
    assert_eq!(answer["isError"], json!(code != 0), "{answer:#}");
    &answer["json"]
}

#[test]
fn mcp_tools_are_the_lease_commands_with_json_schemas() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(&repo, json!([{"op": "tools"}])) else {
        return;
    };
    let tools = answers[0].as_array().expect("tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "abandon", "acquire", "check", "complete", "list", "log", "release", "renew", "revoke",
            "show"
        ]
    );
    let acquire = tools.iter().find(|t| t["name"] == "acquire").unwrap();
    let schema = &acquire["inputSchema"];
    assert_eq!(schema["type"], "object");
    // `issue` or `issues`: neither is required by itself.
    assert!(
        schema.get("required").is_none_or(|r| r == &json!([])),
        "{schema:#}"
    );
    for field in [
        "issue", "issues", "any", "holder", "ttl", "note", "task", "session", "detached", "remote",
    ] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field}: {schema:#}"
        );
    }
    let check = tools.iter().find(|t| t["name"] == "check").unwrap();
    assert_eq!(
        check["inputSchema"]["properties"]["token"]["type"],
        "integer"
    );
    // Every tool says what it answers and whether it changes anything.
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool:#}");
        assert!(
            tool["outputSchema"]["properties"]["schema_version"].is_object(),
            "{tool:#}"
        );
        let hints = &tool["annotations"];
        let reads_only = ["check", "show", "list", "log"].contains(&name);
        assert_eq!(hints["readOnlyHint"], json!(reads_only), "{tool:#}");
        let frees = ["release", "complete", "abandon", "revoke"].contains(&name);
        if !reads_only {
            assert_eq!(hints["destructiveHint"], json!(frees), "{tool:#}");
        }
    }
}

/// `acquire` takes `issue` like every other tool, and `issues` for several; the structured
/// result is the `--json` document (an array's items under `items`), which the SDK checks
/// against the tool's `outputSchema` on every call of these tests.
#[test]
fn mcp_acquire_takes_issue_like_every_tool_and_issues_for_several() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            call("acquire", json!({"issue": "7", "holder": ALICE})),
            call("acquire", json!({"issues": ["8", "9"], "holder": ALICE})),
            call(
                "acquire",
                json!({"issue": "7", "issues": ["8"], "holder": ALICE})
            ),
            call("acquire", json!({"holder": ALICE})),
            call("list", json!({})),
        ]),
    ) else {
        return;
    };
    let one = result(&answers[0], 0);
    env::assert_fields(
        one,
        &[("outcome", json!("acquired")), ("issue", json!("7"))],
    );
    assert_eq!(answers[0]["structured"], *one);
    let several = result(&answers[1], 0);
    assert_eq!(env::issues(several), ["8", "9"]);
    assert_eq!(answers[1]["structured"]["items"], *several);
    assert_eq!(answers[1]["structured"]["schema_version"], json!(1));
    for (answer, reason) in [
        (&answers[2], "not both"),
        (&answers[3], "missing field `issue`"),
    ] {
        assert_eq!(answer["error"]["code"], json!(-32602), "{answer:#}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{answer:#}");
    }
    assert_eq!(
        env::issues(&answers[4]["structured"]["items"]),
        ["7", "8", "9"]
    );
}

/// Arguments the input schema refuses are a JSON-RPC error, invalid params (-32602), whose
/// message says what is wrong; nothing runs.
#[test]
fn mcp_arguments_the_schema_refuses_are_invalid_params_with_the_reason() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            call("show", json!({})),
            call("check", json!({"issue": "7", "token": "one"})),
            call("list", json!({"state": "gone"})),
            call("release", json!({"issue": "7", "bogus": 1})),
            call("acquire", json!({"issue": 7, "holder": ALICE})),
        ]),
    ) else {
        return;
    };
    for (answer, reason) in answers.iter().zip([
        "missing field `issue`",
        "invalid type: string \"one\"",
        "unknown variant `gone`",
        "unknown field `bogus`",
        "invalid type: integer `7`",
    ]) {
        assert_eq!(answer["error"]["code"], json!(-32602), "{answer:#}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{reason}: {answer:#}");
    }
    assert_eq!(repo.lease_refs(), "");
}

/// `logging/setLevel` is answered (the server declares logging), and lease events, at
/// `info`, still arrive at that level.
#[test]
fn mcp_set_level_is_answered_and_info_events_arrive_at_info() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            {"op": "level", "level": "error"},
            {"op": "level", "level": "info"},
            call("acquire", json!({"issue": "7", "holder": ALICE})),
            {"op": "event", "issue": "7", "event": "acquire"},
        ]),
    ) else {
        return;
    };
    assert_eq!(answers[0], json!({"ok": true}));
    assert_eq!(answers[1], json!({"ok": true}));
    result(&answers[2], 0);
    assert_eq!(answers[3]["holder"], json!(ALICE), "{:#}", answers[3]);
}

/// A request over the server's bound (16 MiB of note) gets an error answer, where it once got
/// none at all; nothing is written, and the session goes on.
#[test]
fn mcp_an_oversized_request_gets_an_error_answer() {
    let repo = TestRepo::new();
    let huge = json!({
        "op": "call",
        "tool": "acquire",
        "args": {"issue": "7", "holder": ALICE},
        "pad": {"field": "note", "bytes": 16 * 1024 * 1024},
    });
    let Some((answers, _)) = session(
        &repo,
        json!([
            huge,
            call("acquire", json!({"issue": "8", "holder": ALICE}))
        ]),
    ) else {
        return;
    };
    assert_eq!(
        answers[0]["error"]["code"],
        json!(-32600),
        "{:#}",
        answers[0]
    );
    let message = answers[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("over the"), "{message}");
    assert!(message.contains("nothing was done"), "{message}");
    result(&answers[1], 0);
    assert_eq!(repo.tip("7"), None);
}

#[test]
fn mcp_acquire_refuses_a_second_client_then_renew_check_release_answer_as_json() {
    let repo = TestRepo::new();
    let Some((first, _)) = session(
        &repo,
        json!([call(
            "acquire",
            json!({"issues": ["42"], "holder": ALICE, "ttl": "1h", "detached": true})
        )]),
    ) else {
        return;
    };
    let acquired = result(&first[0], 0);
    env::assert_fields(
        acquired,
        &[
            ("schema_version", json!(1)),
            ("outcome", json!("acquired")),
            ("issue", json!("42")),
            ("holder", json!(ALICE)),
            ("token", json!(1)),
        ],
    );
    // What the command line prints for the same lease is what the tool answered.
    let shown = repo.lease().args(["--json", "show", "42"]).run();
    shown.ok();
    assert_eq!(shown.json()["commit"], acquired["commit"]);

    let Some((second, _)) = session(
        &repo,
        json!([
            call("acquire", json!({"issues": ["42"], "holder": BOB})),
            call(
                "renew",
                json!({"issue": "42", "holder": ALICE, "ttl": "2h"})
            ),
            call("check", json!({"issue": "42", "token": 1, "holder": ALICE})),
            call("check", json!({"issue": "42", "token": 2})),
            call("release", json!({"issue": "42", "holder": ALICE})),
            call("list", json!({"all": true})),
            call("log", json!({"issue": "42"})),
        ]),
    ) else {
        return;
    };
    env::assert_fields(
        result(&second[0], 3),
        &[
            ("outcome", json!("held")),
            ("holder", json!(ALICE)),
            ("wrote", json!(false)),
        ],
    );
    env::assert_fields(result(&second[1], 0), &[("outcome", json!("renewed"))]);
    env::assert_fields(
        result(&second[2], 0),
        &[("ok", json!(true)), ("checked_token", json!(1))],
    );
    env::assert_fields(
        result(&second[3], 3),
        &[("ok", json!(false)), ("checked_token", json!(2))],
    );
    env::assert_fields(
        result(&second[4], 0),
        &[("outcome", json!("released")), ("state", json!("free"))],
    );
    let listed = result(&second[5], 0);
    assert_eq!(listed[0]["issue"], "42");
    assert_eq!(listed[0]["state"], "free");
    let events: Vec<&Value> = result(&second[6], 0)
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| &e["event"])
        .collect();
    assert_eq!(
        events,
        [&json!("release"), &json!("renew"), &json!("acquire")]
    );
    assert_eq!(repo.commit_count("42"), 3);
}

#[test]
fn mcp_session_secret_stays_in_the_server_and_reaches_no_result_or_object() {
    let repo = TestRepo::new();
    let Some((answers, seen)) = session(
        &repo,
        json!([
            call(
                "acquire",
                json!({"issues": ["7"], "holder": ALICE, "session": true})
            ),
            // The same holder without the secret, as the command line would be: refused.
            call("renew", json!({"issue": "7", "holder": ALICE})),
            call("complete", json!({"issue": "7", "holder": ALICE})),
        ]),
    ) else {
        return;
    };
    let acquired = result(&answers[0], 0);
    env::assert_fields(
        acquired,
        &[("outcome", json!("acquired")), ("session", json!(true))],
    );
    assert!(acquired.get("secret").is_none(), "{acquired:#}");
    // The server gave its secret to the later calls: renewed and completed.
    env::assert_fields(result(&answers[1], 0), &[("outcome", json!("renewed"))]);
    env::assert_fields(
        result(&answers[2], 0),
        &[("outcome", json!("released")), ("event", json!("complete"))],
    );
    // Another client (the command line) holds no secret: refused.
    let Some((other, _)) = session(
        &repo,
        json!([call(
            "acquire",
            json!({"issues": ["8"], "holder": ALICE, "session": true, "detached": true})
        ),]),
    ) else {
        return;
    };
    result(&other[0], 0);
    let cli = repo
        .lease()
        .args(["--json", "renew", "8", "--holder", ALICE])
        .run();
    assert_eq!(cli.json()["outcome"], "wrong_secret", "{cli}");
    // No secret anywhere: no result, no notification, no object, ref or file of the
    // repository holds a `gls_` secret.
    for text in &seen {
        assert!(
            !text.contains("gls_"),
            "a secret reached the client: {text}"
        );
    }
    let objects = repo.git(&["cat-file", "--batch-all-objects", "--batch"]);
    assert!(!objects.contains("gls_"), "a secret reached an object");
    let grep = repo
        .git_cmd()
        .args(["grep", "--no-index", "-l", "gls_", "--", "."])
        .cwd(repo.git_dir())
        .run();
    assert_eq!(
        grep.code, 1,
        "a secret reached a file of the repository: {grep}"
    );
}

#[test]
fn mcp_errors_carry_the_command_lines_kind_and_exit_code() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            call("show", json!({"issue": "nope"})),
            call("acquire", json!({"issues": ["bad..id"], "holder": ALICE})),
            call(
                "acquire",
                json!({"issues": ["1"], "holder": ALICE, "ttl": "soon"})
            ),
        ]),
    ) else {
        return;
    };
    for (answer, kind, code) in [
        (&answers[0], "not_found", 4),
        (&answers[1], "usage", 2),
        (&answers[2], "usage", 2),
    ] {
        let error = &result(answer, code)["error"];
        assert_eq!(error["kind"], kind, "{answer:#}");
        assert_eq!(error["exit_code"], code, "{answer:#}");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // The command line says the same.
    let cli = repo.lease().args(["--json", "show", "nope"]).run();
    cli.code(4);
    let printed: Value = serde_json::from_str(cli.stderr.trim()).expect("a JSON error");
    assert_eq!(printed, answers[0]["json"]);
}

#[test]
fn mcp_lease_events_arrive_as_logging_notifications() {
    let repo = TestRepo::new();
    let Some((answers, _)) = session(
        &repo,
        json!([
            call("acquire", json!({"issues": ["5"], "holder": ALICE})),
            {"op": "event", "issue": "5", "event": "acquire"},
            call("release", json!({"issue": "5", "holder": ALICE})),
            {"op": "event", "issue": "5", "event": "release"},
        ]),
    ) else {
        return;
    };
    let acquired = result(&answers[0], 0);
    env::assert_fields(
        &answers[1],
        &[
            ("schema_version", json!(1)),
            ("event", json!("acquire")),
            ("holder", json!(ALICE)),
            ("token", json!(1)),
            ("commit", acquired["commit"].clone()),
        ],
    );
    env::assert_fields(
        &answers[3],
        &[("event", json!("release")), ("token", json!(1))],
    );
}

#[test]
fn mcp_two_clients_racing_for_one_issue_get_exactly_one_winner() {
    let repo = TestRepo::new();
    let Some(python) = python() else {
        return;
    };
    for round in 0..3 {
        let issue = format!("race-{round}");
        let out = client(&python, &repo, &["race", &issue, ALICE, BOB], &json!(null));
        let answers = out["answers"].as_array().expect("answers");
        let outcomes: Vec<&str> = answers
            .iter()
            .map(|a| a["json"]["outcome"].as_str().expect("an outcome"))
            .collect();
        let won = outcomes.iter().filter(|o| **o == "acquired").count();
        assert_eq!(won, 1, "exactly one winner: {answers:#?}");
        assert!(
            outcomes.contains(&"held"),
            "the other is refused: {outcomes:?}"
        );
        assert_eq!(repo.commit_count(&issue), 1, "one claim written");
        for text in out["seen"].as_array().unwrap() {
            assert!(!text.as_str().unwrap().contains("gls_"), "{text}");
        }
    }
}

#[test]
fn mcp_works_through_a_remote_by_lease_remote_or_a_remote_argument() {
    let mut daemon = Server::with_hook();
    daemon.start();
    let Some(python) = python() else {
        return;
    };
    // Two servers of one clone on `lease.remote`: the remote's compare-and-swap (and its hook)
    // picks one winner of the two racing clients.
    let a = daemon.client(ALICE);
    a.git(&["config", "lease.remote", "origin"]);
    let out = client(&python, &a, &["race", "42", ALICE, BOB], &json!(null));
    let answers = out["answers"].as_array().expect("answers");
    let winners: Vec<&Value> = answers
        .iter()
        .filter(|a| a["json"]["outcome"] == "acquired")
        .collect();
    assert_eq!(winners.len(), 1, "exactly one winner: {answers:#?}");
    let tip = daemon.tip("42").expect("the server has refs/leases/42");
    assert_eq!(winners[0]["json"]["commit"], json!(tip));
    assert_eq!(daemon.repo().commit_count("42"), 1);

    // A clone without `lease.remote` shares with origin, which holds lease refs: a call sees
    // the server's claims with or without a remote named.
    let b = daemon.client(CAROL);
    let Some((answers, _)) = session(
        &b,
        json!([
            call("show", json!({"issue": "42"})),
            call("show", json!({"issue": "42", "remote": "origin"})),
            call("acquire", json!({"issues": ["42"], "remote": "origin"})),
            call(
                "acquire",
                json!({"issues": ["43"], "remote": "origin", "session": true})
            ),
            call("release", json!({"issue": "43", "remote": "origin"})),
        ]),
    ) else {
        return;
    };
    assert_eq!(result(&answers[0], 0)["commit"], json!(tip));
    assert_eq!(result(&answers[1], 0)["commit"], json!(tip));
    env::assert_fields(result(&answers[2], 3), &[("outcome", json!("held"))]);
    env::assert_fields(
        result(&answers[3], 0),
        &[("holder", json!(CAROL)), ("session", json!(true))],
    );
    // The session's secret, kept by the server, freed the lease through the remote's hook.
    env::assert_fields(result(&answers[4], 0), &[("outcome", json!("released"))]);
    assert_eq!(daemon.repo().commit_count("43"), 2);

    // A clone of a server without claims, where nothing says whether they are shared: a
    // claim is refused as on the command line (usage, exit 2), naming the setting; a read
    // answers from the local refs.
    let mut empty = Server::with_hook();
    empty.start();
    let d = empty.client("dave");
    let Some((answers, _)) = session(
        &d,
        json!([
            call("acquire", json!({"issues": ["5"]})),
            call("list", json!({})),
        ]),
    ) else {
        return;
    };
    let refused = result(&answers[0], 2);
    assert_eq!(refused["error"]["kind"], "usage", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("git config lease.remote origin")),
        "{refused}"
    );
    assert_eq!(result(&answers[1], 0), &json!([]));
    assert_eq!(empty.lease_refs(), "", "nothing pushed");
    assert_eq!(d.lease_refs(), "", "nothing claimed here");
}

#[test]
fn mcp_acquire_any_claims_one_free_candidate_and_several_issues_all_or_none() {
    let repo = TestRepo::new();
    // One second for every call, so the holder's retry refreshes nothing and writes nothing.
    let now = env::rfc3339(chrono::Utc::now());
    let Some((answers, _)) = session_at(
        &repo,
        json!([
            call("acquire", json!({"issues": ["1"], "holder": BOB})),
            call(
                "acquire",
                json!({"issues": ["1", "2"], "holder": ALICE, "any": true})
            ),
            call(
                "acquire",
                json!({"issues": ["1", "2"], "holder": ALICE, "any": true})
            ),
            call("acquire", json!({"issues": ["3", "4"], "holder": ALICE})),
            call("acquire", json!({"issues": ["4", "5"], "holder": BOB})),
            call(
                "acquire",
                json!({"issues": ["-"], "holder": ALICE, "any": true})
            ),
        ]),
        Some(&now),
    ) else {
        return;
    };
    result(&answers[0], 0);
    env::assert_fields(
        result(&answers[1], 0),
        &[
            ("issue", json!("2")),
            ("outcome", json!("acquired")),
            ("candidates", json!(2)),
        ],
    );
    // Idempotent: the live holder keeps its own candidate.
    env::assert_fields(
        result(&answers[2], 0),
        &[("issue", json!("2")), ("wrote", json!(false))],
    );
    let both: Vec<&Value> = result(&answers[3], 0)
        .as_array()
        .expect("an array")
        .iter()
        .collect();
    assert_eq!(both.len(), 2);
    let refused: Vec<&str> = result(&answers[4], 3)
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(refused, ["held", "skipped"]);
    assert_eq!(repo.tip("5"), None, "all or none: nothing of 5 written");
    // `-` names no standard input here: that is the protocol's.
    assert_eq!(result(&answers[5], 2)["error"]["kind"], "usage");
}

#[test]
fn mcp_server_ends_with_exit_0_on_sigterm_and_when_its_input_ends() {
    use std::io::{BufRead, BufReader};
    let repo = TestRepo::new();
    let mut child = repo
        .lease()
        .args(["mcp"])
        .command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start git lease mcp");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    writeln!(stdin, "{initialize}").expect("write initialize");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("read the answer");
    let answer: Value = serde_json::from_str(&line).expect("a JSON-RPC answer");
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "git-lease",
        "{answer}"
    );
    // Answered: its signal handlers are in place. The input stays open; SIGTERM ends it.
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let status = child.wait().expect("wait for git lease mcp");
    assert_eq!(status.code(), Some(0), "{status}");
    drop(stdin);
    // An input that ends at once: nothing to serve, exit 0.
    let run = repo.lease().args(["mcp"]).run();
    run.ok();
    assert_eq!(run.stdout, "");
}

// ---------------------------------------------------------------------------------------------
// Text that others wrote
// ---------------------------------------------------------------------------------------------

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
        rng_seed: RngSeed::Fixed(0x6d63_7068),
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

// ---------------------------------------------------------------------------------------------
// An ordered queue
// ---------------------------------------------------------------------------------------------

/// The names of a JSON object's fields.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// `acquire --any --ordered <queue>` as `holder` on the command line, in JSON.
fn cli_ordered(repo: &TestRepo, holder: &str, queue: &[&str], code: i32) -> Value {
    let run = repo
        .lease()
        .args([
            "--json",
            "acquire",
            "--any",
            "--ordered",
            "--holder",
            holder,
        ])
        .args(queue)
        .run();
    run.code(code);
    run.json()
}

#[test]
fn mcp_acquire_any_ordered_claims_the_first_free_candidate_and_the_next_client_the_next() {
    let repo = TestRepo::new();
    let queue = ["q1", "q2", "q3", "q4"];
    repo.lease()
        .args(["acquire", "q2", "--holder", BOB])
        .run()
        .ok();
    let ordered = |holder: &str| {
        call(
            "acquire",
            json!({"issues": queue, "any": true, "ordered": true, "holder": holder, "detached": true}),
        )
    };
    // One second for both calls, so the holder's retry refreshes nothing and writes nothing.
    let now = env::rfc3339(chrono::Utc::now());
    let Some((first, _)) = session_at(&repo, json!([ordered(ALICE), ordered(ALICE)]), Some(&now))
    else {
        return;
    };
    // The first free candidate in the order, at the first attempt, nothing passed over.
    let claimed = result(&first[0], 0);
    env::assert_fields(
        claimed,
        &[
            ("outcome", json!("acquired")),
            ("issue", json!("q1")),
            ("holder", json!(ALICE)),
            ("token", json!(1)),
            ("candidates", json!(4)),
            ("attempts", json!(1)),
            ("lost", json!(0)),
            ("passed_over", json!([])),
        ],
    );
    // The live holder keeps its own candidate, wherever it stands in the order.
    env::assert_fields(
        result(&first[1], 0),
        &[("issue", json!("q1")), ("wrote", json!(false))],
    );

    // A second client: q2 is held, so q3 is next.
    let Some((second, _)) = session(&repo, json!([ordered(CAROL)])) else {
        return;
    };
    let next = result(&second[0], 0);
    env::assert_fields(
        next,
        &[
            ("issue", json!("q3")),
            ("holder", json!(CAROL)),
            ("lost", json!(0)),
            ("passed_over", json!([])),
        ],
    );
    // The command line's answer is the same object: the same fields, lost and passed_over.
    let cli = cli_ordered(&repo, "dave@example.com", &queue, 0);
    assert_eq!(cli["issue"], "q4", "{cli}");
    assert_eq!(keys(next), keys(&cli), "{next:#}\n{cli:#}");

    // Nothing free: exit 3 as the command line's, nothing written; without `ordered` no
    // passed_over; `ordered` without `any` is bad usage.
    let Some((third, _)) = session(
        &repo,
        json!([
            ordered("erin@example.com"),
            call("release", json!({"issue": "q3", "holder": CAROL})),
            call(
                "acquire",
                json!({"issues": queue, "any": true, "holder": "erin@example.com", "detached": true})
            ),
            call(
                "acquire",
                json!({"issues": queue, "ordered": true, "holder": "erin@example.com"})
            ),
        ]),
    ) else {
        return;
    };
    let none = result(&third[0], 3);
    env::assert_fields(
        none,
        &[
            ("outcome", json!("held")),
            ("issue", Value::Null),
            ("wrote", json!(false)),
        ],
    );
    let cli = cli_ordered(&repo, "frank@example.com", &queue, 3);
    assert_eq!(keys(none), keys(&cli), "{none:#}\n{cli:#}");
    let unordered = result(&third[2], 0);
    env::assert_fields(unordered, &[("issue", json!("q3")), ("lost", json!(0))]);
    assert!(unordered.get("passed_over").is_none(), "{unordered:#}");
    assert_eq!(result(&third[3], 2)["error"]["kind"], "usage");
    // One claim each, and q3's three steps: acquire, release, acquire.
    let counts: Vec<usize> = queue.iter().map(|q| repo.commit_count(q)).collect();
    assert_eq!(counts, [1, 1, 3, 1]);
}

#[test]
fn mcp_ordered_claimers_racing_each_get_a_distinct_candidate_and_say_what_they_passed_over() {
    let repo = TestRepo::new();
    let Some(python) = python() else {
        return;
    };
    let queue = ["r1", "r2", "r3", "r4"];
    let holders = ["a@race", "b@race", "c@race", "d@race"];
    // Detached: a client done first would otherwise free its claim for the slower ones.
    let args =
        json!({"issues": queue, "any": true, "ordered": true, "ttl": "1h", "detached": true});
    let out = client(
        &python,
        &repo,
        &[&["race", "-"][..], &holders].concat(),
        &args,
    );
    let answers = out["answers"].as_array().expect("answers");
    let mut won = std::collections::BTreeSet::new();
    for (answer, holder) in answers.iter().zip(holders) {
        let v = result(answer, 0);
        env::assert_fields(
            v,
            &[
                ("outcome", json!("acquired")),
                ("holder", json!(holder)),
                ("token", json!(1)),
            ],
        );
        let issue = v["issue"].as_str().expect("an issue");
        assert!(won.insert(issue.to_owned()), "{issue} was claimed twice");
        let passed = v["passed_over"].as_array().expect("passed_over, ordered");
        if v["lost"] == 0 {
            assert!(passed.is_empty(), "passed over without a lost race: {v}");
        }
        // Only candidates ahead of the one claimed are ever passed over.
        let at = queue.iter().position(|q| *q == issue).expect("a candidate");
        for p in passed {
            assert!(queue[..at].contains(&p.as_str().expect("an id")), "{v}");
        }
    }
    assert_eq!(
        won.len(),
        queue.len(),
        "every claimer got one: {answers:#?}"
    );
}
