//! A remote URL with a password never shows through MCP: not in its answers, not on the
//! server's stderr; and a rewound ledger is said as on the command line.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::env::{self, TestRepo};
use crate::mcp;
use crate::password_urls::{rewound_over_http, PASSWORD};
use crate::server::free_port;

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
