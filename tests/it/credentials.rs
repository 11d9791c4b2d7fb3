//! A remote URL with a password never shows it: through every output of a remote that works
//! (a real http server, with a ledger rewound so that the rewound-ledger message is said),
//! of one that cannot be reached, and through MCP (its answers and its stderr).

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::env::{self, Run, TestRepo};
use crate::mcp;
use crate::server::{free_port, lease, Server};

/// The password of the URLs below (`Server::url_as("alice")`'s), and the user it goes with.
const PASSWORD: &str = "alicepw";

/// Asserts that nothing `run` printed holds the password; returns `run`.
#[track_caller]
fn clean(run: Run) -> Run {
    assert!(
        !run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD),
        "the password shows in `{}`:\n{run}",
        run.command
    );
    run
}

/// A hookless http server where alice took issues 9 and 10 through a URL with her password,
/// then her clone listed them (verifying token 2 of 9), then someone rewound 9 on the server.
fn rewound_over_http() -> (Server, TestRepo, String) {
    let mut server = Server::http_unhooked(&["alice"]);
    server.start();
    let url = server.url_as("alice");
    let alice = server.client("alice");
    let remote = ["--remote", url.as_str()];
    clean(lease(&alice, 0, &[&["acquire", "9"][..], &remote].concat())).ok();
    clean(lease(&alice, 1, &[&["release", "9"][..], &remote].concat())).ok();
    clean(lease(&alice, 2, &[&["acquire", "9"][..], &remote].concat())).ok();
    clean(lease(
        &alice,
        3,
        &[&["acquire", "10"][..], &remote].concat(),
    ))
    .ok();
    clean(lease(&alice, 4, &[&["list"][..], &remote].concat())).ok();
    let first = server.chain("9")[0].0.clone();
    server.git(&["update-ref", "refs/leases/9", &first]);
    (server, alice, url)
}

#[test]
fn a_url_with_a_password_never_shows_it_in_any_output() {
    let (_server, alice, url) = rewound_over_http();
    let page = alice.scratch("out").join("page.html");
    let page_arg = page.to_str().expect("utf-8").to_owned();
    let remote = ["--remote", url.as_str()];
    let with = |args: &[&'static str]| -> Vec<String> {
        args.iter().chain(&remote).map(|a| a.to_string()).collect()
    };
    for (args, code, says) in [
        (
            with(&["list"]),
            1,
            "remote ledger rewound: refs/leases/9 on http://127.0.0.1",
        ),
        (with(&["--json", "list"]), 1, "remote ledger rewound"),
        (
            [with(&["timeline"]), vec![format!("--output={page_arg}")]].concat(),
            1,
            "remote ledger rewound",
        ),
        (with(&["--json", "timeline"]), 1, "remote ledger rewound"),
        (with(&["show", "9"]), 1, "remote ledger rewound"),
        (
            with(&["--json", "acquire", "9"]),
            1,
            "remote ledger rewound",
        ),
        (with(&["verify"]), 1, "9"),
        (vec!["sync".into(), url.clone()], 1, "remote ledger rewound"),
        (
            vec!["--json".into(), "sync".into(), url.clone()],
            1,
            "remote ledger rewound",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = clean(lease(&alice, 5, &args));
        run.code(code);
        assert!(
            run.stdout.contains(says) || run.stderr.contains(says),
            "`{}` does not say {says:?}:\n{run}",
            run.command
        );
    }
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(!html.contains(PASSWORD), "the page shows the password");
    assert!(
        html.contains("from http://127.0.0.1:"),
        "the page names the remote"
    );
    // What git itself writes (reflogs, config, remote-tracking refs) is git's business; what
    // git-lease writes beside them (its memory of the remote) never holds the password.
    let common = alice.git_dir();
    for dir in ["lease-memory", "lease-doctor"] {
        for file in walk(&common.join(dir)) {
            let text = String::from_utf8_lossy(&std::fs::read(&file).expect("a file")).into_owned();
            assert!(!text.contains(PASSWORD), "{} holds it", file.display());
        }
    }
}

/// Every file under `dir` (none when it is missing).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk(&e.path()),
            _ => vec![e.path()],
        })
        .collect()
}

#[test]
fn an_unreachable_url_with_a_password_never_shows_it() {
    let repo = TestRepo::new();
    let url = format!("http://alice:{PASSWORD}@127.0.0.1:{}/r.git", free_port());
    for args in [
        vec!["list", "--remote", &url],
        vec!["--json", "list", "--remote", &url],
        vec!["acquire", "1", "--holder", "a", "--remote", &url],
        vec!["--json", "timeline", "--remote", &url],
        vec!["sync", &url],
        vec!["doctor", "--remote", &url],
        vec!["--json", "doctor", "--remote", &url],
    ] {
        let run = clean(lease(&repo, 0, &args));
        assert_ne!(run.code, 0, "{run}");
        assert!(
            run.stderr.contains("127.0.0.1") || run.stdout.contains("127.0.0.1"),
            "{run}"
        );
    }
}

/// Runs the MCP client's `steps` in `repo` (the server started with `server_args`), returning
/// its answers and everything the client's process (and so the server) wrote on stderr.
fn mcp_with_stderr(
    repo: &TestRepo,
    server_args: &[&str],
    steps: &Value,
) -> Option<(Value, String)> {
    let python = mcp::python()?;
    // The client starts `<binary> mcp`: a wrapper adds the server's own arguments.
    let wrapper = repo.scratch("bin").join("git-lease-mcp");
    let quoted: Vec<String> = server_args.iter().map(|a| format!("'{a}'")).collect();
    env::write_program(
        &wrapper,
        &format!(
            "#!/bin/sh\nexec '{}' \"$@\" {}\n",
            env::BIN,
            quoted.join(" ")
        ),
        0o755,
    );
    let mut cmd = Command::new(python);
    env::hermetic(&mut cmd, repo.home(), repo.root());
    cmd.env("GIT_LEASE_NOW", env::at(5))
        .env("GIT_TERMINAL_PROMPT", "0")
        .arg(mcp::CLIENT)
        .arg(&wrapper)
        .arg("steps")
        .current_dir(repo.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start the MCP client");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(steps.to_string().as_bytes())
        .expect("write the steps");
    let out = child.wait_with_output().expect("wait for the MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the client failed:\n{stdout}\n{stderr}"
    );
    let answers = serde_json::from_str(&stdout).expect("the answers");
    Some((answers, stderr))
}

#[test]
fn mcp_answers_and_logs_never_show_a_password_and_say_why_a_ledger_is_missing() {
    let (_server, alice, url) = rewound_over_http();
    let unreachable = format!("http://alice:{PASSWORD}@127.0.0.1:{}/r.git", free_port());
    let steps = json!([
        mcp::call("list", json!({"remote": url})),
        mcp::call("show", json!({"issue": "9", "remote": url})),
        mcp::call("list", json!({"remote": unreachable})),
    ]);
    // The server's own remote is the URL too: its watch follows it.
    let Some((out, stderr)) = mcp_with_stderr(&alice, &["--remote", &url], &steps) else {
        return;
    };
    let text = out.to_string();
    assert!(
        !text.contains(PASSWORD),
        "an answer shows the password: {text}"
    );
    assert!(
        !stderr.contains(PASSWORD),
        "the server's stderr shows it: {stderr}"
    );
    let answers = out["answers"].as_array().expect("answers");
    // The listing answers with 10 and says why 9 is missing.
    let listed = &answers[0];
    assert_eq!(listed["meta"]["exit_code"], 1, "{listed:#}");
    let said = listed["text"].as_str().expect("text");
    assert!(said.contains("\"issue\":\"10\""), "{said}");
    assert!(
        said.contains("remote ledger rewound: refs/leases/9 on http://127.0.0.1"),
        "{said}"
    );
    for answer in &answers[1..] {
        assert_eq!(answer["isError"], true, "{answer:#}");
        assert!(
            answer["text"].as_str().expect("text").contains("127.0.0.1"),
            "{answer:#}"
        );
    }
}
