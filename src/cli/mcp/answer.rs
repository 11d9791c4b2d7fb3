//! How a tool call runs and answers: the command's body on a clock read for the call, off the
//! connection's thread, and its JSON document as the tool's result (text, structured content,
//! `_meta.exit_code`), with any session secret kept in the server.

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use rmcp::ErrorData;
use serde_json::Value;

use git_lease::{Ending, Error, Ledger};

use super::inputs::EndInput;
use super::{holder_arg, schema, with_secret, Answer, Said, Server, State};
use crate::cli::output::json::{error_text, json_text};
use crate::cli::{commands, exit, Context, Failure};

/// A tool error for arguments that fit the schema yet make no call (exit 2, `usage`).
pub(super) fn usage(message: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(error_text(
        exit::kind_name(git_lease::ErrorKind::Usage),
        message,
        exit::USAGE,
        &[],
    ))]);
    result.meta = Some(exit_meta(exit::USAGE));
    result
}

fn exit_meta(code: u8) -> MetaObject {
    let mut meta = MetaObject::new();
    meta.0.insert("exit_code".into(), Value::from(code));
    meta
}

impl Server {
    pub(super) async fn end(
        &self,
        input: EndInput,
        ending: Ending,
    ) -> Result<CallToolResult, ErrorData> {
        let state = self.state.clone();
        self.call(input.remote, move |ctx, out| {
            let (issue, secret) = with_secret(&state, ctx, input.issue)?;
            let args = commands::end::Args {
                issue,
                holder: holder_arg(input.holder, secret),
            };
            commands::end::run(ctx, args, ending, out)
        })
        .await
    }

    /// Runs one command's body in JSON mode on the clock read now, off the connection's
    /// thread, and answers with what it printed.
    pub(super) async fn call<F>(
        &self,
        remote: Option<String>,
        body: F,
    ) -> Result<CallToolResult, ErrorData>
    where
        F: FnOnce(&Context, &mut Vec<u8>) -> Result<u8, Failure> + Send + 'static,
    {
        let mut watching = self.state.watching.clone();
        // Ends at once when started, or when the watch is gone.
        let _ = watching.wait_for(|started| *started).await;
        let state = self.state.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let remote = remote.or_else(|| state.remote.clone());
            run_command(&state, remote, body)
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("the call did not finish: {e}"), None))?;
        Ok(self.answer(answer))
    }

    /// Turns what a command said into the tool's result, keeping any session secret in this
    /// server's memory, out of the result.
    fn answer(&self, Said(answer, said): Said) -> CallToolResult {
        let mut structured = None;
        let done = matches!(answer, Answer::Done(..));
        let (code, text) = match answer {
            Answer::Done(code, printed, mut value) => {
                let kept = self.keep_secrets(&mut value);
                self.forget_ended(&value);
                structured = Some(schema::structured(&value));
                let text = match value {
                    // Printed again as `--json` prints it: `schema_version` first.
                    Value::Object(mut object) if kept => {
                        object.remove("schema_version");
                        json_text(&object).unwrap_or_default()
                    }
                    _ => printed,
                };
                (code, text)
            }
            Answer::Failed(Failure::Lib(e)) => {
                let code = exit::for_error(e.kind());
                (
                    code,
                    error_text(exit::kind_name(e.kind()), &e.chain(), code, &said),
                )
            }
            Answer::Failed(Failure::Io(e)) => (
                exit::FAILURE,
                error_text(
                    "failure",
                    &format!("cannot answer: {e}"),
                    exit::FAILURE,
                    &said,
                ),
            ),
        };
        let mut content = vec![ContentBlock::text(text)];
        // Why a listing answered with fewer ledgers (one a remote went back on, one that
        // cannot be read), as the command line's stderr says it.
        if done && !said.is_empty() {
            let hints = serde_json::json!({ "hints": said });
            content.push(ContentBlock::text(json_text(&hints).unwrap_or_default()));
        }
        let mut result = if code == exit::OK {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        };
        // What the tool's `outputSchema` describes: the document, not an error object.
        result.structured_content = structured;
        result.meta = Some(exit_meta(code));
        result
    }

    /// Takes the `secret` out of each object of `value` (one, or an array's items), keeping
    /// it in memory for its issue; returns whether there was one.
    fn keep_secrets(&self, value: &mut Value) -> bool {
        let mut kept = false;
        let items: Vec<&mut Value> = match value {
            Value::Array(items) => items.iter_mut().collect(),
            other => vec![other],
        };
        for item in items {
            let Some(object) = item.as_object_mut() else {
                continue;
            };
            let Some(Value::String(secret)) = object.remove("secret") else {
                continue;
            };
            kept = true;
            if let (Some(Value::String(issue)), Ok(mut secrets)) =
                (object.get("issue"), self.state.secrets.lock())
            {
                secrets.insert(issue.clone(), secret);
            }
        }
        kept
    }

    /// Forgets the secret of a lease this client freed, and stops renewing it.
    fn forget_ended(&self, value: &Value) {
        if value.get("outcome").and_then(Value::as_str) != Some("released") {
            return;
        }
        let Some(issue) = value.get("issue").and_then(Value::as_str) else {
            return;
        };
        self.state.bound.unbind(issue);
        if let Ok(mut secrets) = self.state.secrets.lock() {
            secrets.remove(issue);
        }
    }
}

/// Opens the repository for one call, as the command line does for one command: the clock
/// read once (`GIT_LEASE_NOW`, else the system clock), local liveness, the reader's clock.
pub(super) fn open(state: &State, remote: Option<String>) -> Result<Context, Error> {
    let now = crate::cli::now()?;
    let ledger = Ledger::discover(&state.dir)?
        .with_local_liveness()
        .with_reader_clock(now)?;
    Ok(Context {
        ledger,
        now,
        json: true,
        unshared: remote.is_none().then(|| state.unshared.clone()).flatten(),
        remote,
        local: false,
    })
}

fn run_command<F>(state: &State, remote: Option<String>, body: F) -> Said
where
    F: FnOnce(&Context, &mut Vec<u8>) -> Result<u8, Failure>,
{
    let ((answer, notices), said) = crate::cli::output::diagnostics::captured(|| {
        let ctx = match open(state, remote) {
            Ok(ctx) => ctx,
            Err(e) => return (Answer::Failed(e.into()), Vec::new()),
        };
        let mut out = Vec::new();
        let result = body(&ctx, &mut out);
        (done_or_failed(result, out), ctx.ledger.take_notices())
    });
    for notice in notices {
        eprintln!(
            "warning: {}",
            git_lease::redact::urls(&git_lease::text::printable(&notice))
        );
    }
    Said(answer, said)
}

/// The answer of a command that printed `out` and returned `result`.
fn done_or_failed(result: Result<u8, Failure>, out: Vec<u8>) -> Answer {
    match result {
        Ok(code) => match serde_json::from_slice::<Value>(&out) {
            Ok(value) => Answer::Done(code, String::from_utf8_lossy(&out).trim_end().into(), value),
            Err(e) => Answer::Failed(Failure::Lib(Error::Io {
                context: "the command printed no JSON document".into(),
                source: std::io::Error::other(e),
            })),
        },
        Err(e) => Answer::Failed(e),
    }
}
