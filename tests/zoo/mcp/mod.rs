//! `git lease mcp`, driven by an MCP client written by others: the Python MCP SDK (pinned,
//! [`MCP_SDK`], in the virtual environment `.ci/run` installs under `$GIT_LEASE_TEST_TOOLS`),
//! through `tests/zoo/mcp_client.py`, which starts the real binary as its stdio server. The
//! tools answer with the `--json` documents; a non-zero exit code is a tool error carrying it;
//! session secrets stay in the server; lease events arrive as logging notifications; text a
//! forged ledger carries (controls, escapes, JSON-RPC look-alikes, shell commands, huge notes)
//! reaches the client as JSON data in well-framed messages, and nothing of it runs.
//! Without the SDK each test is skipped (a failure with `CI=true`).

mod bounds;
mod hostile;
mod ordered;
mod passwords;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::env::{self, TestRepo};
use crate::env::{ALICE, BOB};
use crate::forge::{self, acquired, freed, with};
use crate::server::Server;
use crate::servers::thirdparty::DEFAULT_TOOLS;

pub(crate) const CAROL: &str = "carol@example.com";

/// The Python MCP SDK release the tests use.
pub(crate) const MCP_SDK: &str = "1.30.0";
/// The client script.
pub(crate) const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/zoo/mcp_client.py");

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
pub(crate) fn client(python: &PathBuf, repo: &TestRepo, args: &[&str], input: &Value) -> Value {
    client_at(python, repo, args, input, None)
}

/// [`client`], with the server's clock held at `now` (`GIT_LEASE_NOW`) when given: a test
/// whose answers depend on two calls reading the same second does not race the clock.
pub(crate) fn client_at(
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
