//! A note, task or reason over its bound, given through MCP, is a usage error answered as
//! such, and nothing is written.

use serde_json::json;

use crate::env::{TestRepo, T0};
use crate::mcp;

/// The note of the report: 70 KB, more than a whole record may be.
fn seventy_kb() -> String {
    "n".repeat(70_000)
}

#[test]
fn an_mcp_note_over_its_bound_is_a_usage_error_and_nothing_is_written() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "alice"]);
    let before = repo.snapshot();
    let steps = json!([
        mcp::call(
            "acquire",
            json!({"issues": ["42"], "holder": "alice", "note": seventy_kb()})
        ),
        mcp::call(
            "acquire",
            json!({"issues": ["43"], "holder": "bob", "task": seventy_kb()})
        ),
        mcp::call(
            "revoke",
            json!({"issue": "42", "holder": "ops", "reason": seventy_kb()})
        ),
    ]);
    let Some((answers, _)) = mcp::session(&repo, steps) else {
        return;
    };
    for (answer, field) in answers.iter().zip(["note", "task", "reason"]) {
        let error = &mcp::result(answer, 2)["error"];
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("the {field} is 70000 bytes")),
            "{answer:#}"
        );
        assert_eq!(error["kind"], "usage", "{answer:#}");
    }
    assert_eq!(repo.snapshot(), before, "git sees nothing new");
}
