//! `git lease mcp`: the lease commands as Model Context Protocol tools, over stdio.
//!
//! A thin adapter, like the rest of the command line: each tool builds the arguments of its
//! command, runs that command's body (`commands::<name>::run`) in JSON mode on a clock read
//! for the call, and answers with what `--json` prints (docs/JSON.md), so that no rule and
//! no shape lives here. A non-zero exit code makes the result a tool error (`isError`), its
//! code in the result's `_meta.exit_code`; a failed command answers with the JSON error object
//! (`kind`, `message`, `exit_code`). Arguments that do not fit a tool's schema are protocol
//! errors (invalid params).
//!
//! Session secrets of claims made here (`session: true`) are kept in this process's memory
//! only, by issue, and given back to the commands of the same client that need them (renew,
//! release, complete, abandon, acquire again): no result carries one.
//!
//! Lease events (the watch of `git lease watch`, on the same ledgers) reach the client as
//! logging notifications (`notifications/message`, logger `git-lease`, level `info`), each
//! one's `data` a `watch --json` event. A tool call waits until the watch has read the
//! ledgers it starts from, so every event from the first call on is notified. The protocol's
//! newest revision deprecates logging (SEP-2577); the revisions clients speak today carry it,
//! and rmcp still serves it: hence the `deprecated` allowed here.
#![allow(deprecated)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, LoggingLevel, LoggingMessageNotificationParam,
    MetaObject, ServerCapabilities, ServerConfig,
};
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use git_lease::{Ending, Error, Ledger};

use super::output::json::{error_text, json_text};
use super::{commands, exit, resolve_for_write, Context, Failure, HolderArg, HolderName, TtlArg};

/// The logger name of the notifications this server sends.
const LOGGER: &str = "git-lease";

/// What the watch's thread tells the connection.
enum Notice {
    /// A lease event, as `watch --json` prints it.
    Event(Value),
    /// Something the client should know (the watch could not start, or failed).
    Warning(String),
}

/// What every call shares: where the repository is, where its leases are by default (a remote,
/// or else why the local refs are for reading only, when they are), the session secrets of this
/// client's claims, and whether the watch has started.
struct State {
    dir: PathBuf,
    remote: Option<String>,
    unshared: Option<git_lease::backend::Unshared>,
    secrets: Mutex<HashMap<String, String>>,
    watching: watch::Receiver<bool>,
}

impl State {
    fn secret(&self, issue: &str) -> Option<String> {
        self.secrets.lock().ok()?.get(issue).cloned()
    }

    fn has_secrets(&self) -> bool {
        self.secrets.lock().is_ok_and(|s| !s.is_empty())
    }
}

/// What a command said: its exit code and its JSON document, or the error that ended it.
enum Answer {
    Done(u8, String, Value),
    Failed(Failure),
}

#[derive(Clone)]
struct Server {
    state: Arc<State>,
    tool_router: ToolRouter<Server>,
}

/// The holder a call names, else the server's `GIT_LEASE_HOLDER`, else the repository's
/// `lease.holder` or `user.email` (as the command line).
fn holder_arg(holder: Option<String>, secret: Option<String>) -> HolderArg {
    HolderArg {
        name: HolderName {
            holder: holder.or_else(super::env_holder),
        },
        secret,
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AcquireInput {
    /// The exact issue ids: one, or several claimed all or none; with `any`, the candidates
    /// of which exactly one free one is claimed (tried in a random order)
    issues: Vec<String>,
    /// Claim exactly one free issue of `issues`
    #[serde(default)]
    any: bool,
    /// With `any`: `issues` are a priority order, most urgent first; the first free one is
    /// taken (spreading over the first few only after a race lost to another claimer)
    #[serde(default)]
    ordered: bool,
    /// Who holds [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    holder: Option<String>,
    /// How long the lease lasts: 90s, 15m, 2h, 1d or never [default: lease.ttl, else 1h]
    ttl: Option<String>,
    /// Free text stored with the claim
    note: Option<String>,
    /// An external task or job id stored with the claim
    task: Option<String>,
    /// Start a session: its secret stays in this server, which gives it to this client's
    /// later renew, release, complete, abandon and acquire of the issue
    #[serde(default)]
    session: bool,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenewInput {
    /// The issue id or a unique prefix
    issue: String,
    /// Who holds [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    holder: Option<String>,
    /// The new TTL from now [default: lease.ttl, else 1h]
    ttl: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EndInput {
    /// The issue id or a unique prefix
    issue: String,
    /// Who holds [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    holder: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckInput {
    /// The exact issue id
    issue: String,
    /// The fencing token to check
    token: u64,
    /// Also require this holder
    holder: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IssueInput {
    /// The issue id or a unique prefix
    issue: String,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

/// A state `list` can keep.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ListState {
    Held,
    Expired,
    Free,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListInput {
    /// Also leases that are not live (expired, free)
    #[serde(default)]
    all: bool,
    /// Only this holder's (the live holder, else the last one)
    holder: Option<String>,
    /// Only mine (GIT_LEASE_HOLDER, then lease.holder, then user.email)
    #[serde(default)]
    mine: bool,
    /// Only leases in this state
    state: Option<ListState>,
    /// Only issues starting with this prefix
    prefix: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RevokeInput {
    /// The exact issue id
    issue: String,
    /// Why (recorded)
    reason: String,
    /// Who revokes [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    holder: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    remote: Option<String>,
}

#[tool_router]
impl Server {
    #[tool(
        description = "Claim issues: one, several all or none, or with any=true exactly one free one of the candidates; idempotent for the live holder. Answers as `git lease --json acquire` (an array for several issues)."
    )]
    async fn acquire(
        &self,
        Parameters(input): Parameters<AcquireInput>,
    ) -> Result<CallToolResult, ErrorData> {
        if input.issues.is_empty() {
            return Ok(usage("issues: name at least one issue"));
        }
        if input.ordered && !input.any {
            return Ok(usage("ordered: only with any=true"));
        }
        if input.any && input.issues.iter().any(|i| i == "-") {
            return Ok(usage(
                "issues: `-` (candidates from standard input) has no meaning here",
            ));
        }
        let secret = if input.any {
            None
        } else {
            input.issues.iter().find_map(|i| self.state.secret(i))
        };
        let args = commands::acquire::Args {
            issues: input.issues,
            any: input.any,
            ordered: input.ordered,
            holder: holder_arg(input.holder, secret),
            ttl: TtlArg { ttl: input.ttl },
            note: input.note,
            task: input.task,
            session: input.session,
            pid: None,
        };
        self.call(input.remote, move |ctx, out| {
            commands::acquire::run(ctx, args, out)
        })
        .await
    }

    #[tool(
        description = "Extend your live lease from now by the TTL. Answers as `git lease --json renew`."
    )]
    async fn renew(
        &self,
        Parameters(input): Parameters<RenewInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = self.state.clone();
        self.call(input.remote, move |ctx, out| {
            let (issue, secret) = with_secret(&state, ctx, input.issue)?;
            let args = commands::renew::Args {
                issue,
                holder: holder_arg(input.holder, secret),
                ttl: TtlArg { ttl: input.ttl },
            };
            commands::renew::run(ctx, args, out)
        })
        .await
    }

    #[tool(
        description = "Free your lease (or one no longer live), keeping its token. Answers as `git lease --json release`."
    )]
    async fn release(
        &self,
        Parameters(input): Parameters<EndInput>,
    ) -> Result<CallToolResult, ErrorData> {
        self.end(input, Ending::Release).await
    }

    #[tool(
        description = "Free your lease and record that the work is done. Answers as `git lease --json complete`."
    )]
    async fn complete(
        &self,
        Parameters(input): Parameters<EndInput>,
    ) -> Result<CallToolResult, ErrorData> {
        self.end(input, Ending::Complete).await
    }

    #[tool(
        description = "Free your lease and record that the work was given up. Answers as `git lease --json abandon`."
    )]
    async fn abandon(
        &self,
        Parameters(input): Parameters<EndInput>,
    ) -> Result<CallToolResult, ErrorData> {
        self.end(input, Ending::Abandon).await
    }

    #[tool(
        description = "Fencing check: succeeds (isError false) only if the token is the live tenure's token. Answers as `git lease --json check`."
    )]
    async fn check(
        &self,
        Parameters(input): Parameters<CheckInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = commands::check::Args {
            issue: input.issue,
            token: input.token,
            holder: input.holder,
        };
        self.call(input.remote, move |ctx, out| {
            commands::check::run(ctx, args, out)
        })
        .await
    }

    #[tool(description = "Show one lease (reads only). Answers as `git lease --json show`.")]
    async fn show(
        &self,
        Parameters(input): Parameters<IssueInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = commands::show::Args { issue: input.issue };
        self.call(input.remote, move |ctx, out| {
            commands::show::run(ctx, args, out)
        })
        .await
    }

    #[tool(
        description = "List live leases, oldest tenure first (reads only). Answers as `git lease --json list` (an array)."
    )]
    async fn list(
        &self,
        Parameters(input): Parameters<ListInput>,
    ) -> Result<CallToolResult, ErrorData> {
        if input.mine && input.holder.is_some() {
            return Ok(usage("holder and mine cannot be used together"));
        }
        let args = commands::list::Args {
            all: input.all,
            holder: input.holder,
            mine: input.mine,
            state: input.state.map(|s| {
                match s {
                    ListState::Held => "held",
                    ListState::Expired => "expired",
                    ListState::Free => "free",
                }
                .to_string()
            }),
            prefix: input.prefix,
        };
        self.call(input.remote, move |ctx, out| {
            commands::list::run(ctx, args, out)
        })
        .await
    }

    #[tool(
        description = "The tenure history of one issue, newest first (reads only). Answers as `git lease --json log` (an array)."
    )]
    async fn log(
        &self,
        Parameters(input): Parameters<IssueInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = commands::log::Args { issue: input.issue };
        self.call(input.remote, move |ctx, out| {
            commands::log::run(ctx, args, out)
        })
        .await
    }

    #[tool(
        description = "Free someone else's lease as an administrator (token kept; who and why recorded). Answers as `git lease --json revoke`."
    )]
    async fn revoke(
        &self,
        Parameters(input): Parameters<RevokeInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = commands::revoke::Args {
            issue: input.issue,
            reason: input.reason,
            holder: holder_arg(input.holder, None),
        };
        self.call(input.remote, move |ctx, out| {
            commands::revoke::run(ctx, args, out)
        })
        .await
    }
}

/// Resolves `issue` (an id or a prefix) when this client holds session secrets, and returns
/// the secret this client holds for it, if any. Without secrets the command resolves it.
fn with_secret(
    state: &State,
    ctx: &Context,
    issue: String,
) -> Result<(String, Option<String>), Failure> {
    if let Some(secret) = state.secret(&issue) {
        return Ok((issue, Some(secret)));
    }
    if !state.has_secrets() {
        return Ok((issue, None));
    }
    let id = resolve_for_write(ctx.backend()?.as_ref(), &issue)?.to_string();
    let secret = state.secret(&id);
    Ok((id, secret))
}

/// A tool error for arguments that fit the schema yet make no call (exit 2, `usage`).
fn usage(message: &str) -> CallToolResult {
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
    async fn end(&self, input: EndInput, ending: Ending) -> Result<CallToolResult, ErrorData> {
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
    async fn call<F>(&self, remote: Option<String>, body: F) -> Result<CallToolResult, ErrorData>
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
    fn answer(&self, answer: Answer) -> CallToolResult {
        let (code, text) = match answer {
            Answer::Done(code, printed, mut value) => {
                let kept = self.keep_secrets(&mut value);
                self.forget_ended(&value);
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
                    error_text(exit::kind_name(e.kind()), &e.chain(), code, &[]),
                )
            }
            Answer::Failed(Failure::Io(e)) => (
                exit::FAILURE,
                error_text(
                    "failure",
                    &format!("cannot answer: {e}"),
                    exit::FAILURE,
                    &[],
                ),
            ),
        };
        let content = vec![ContentBlock::text(text)];
        let mut result = if code == exit::OK {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        };
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

    /// Forgets the secret of a lease this client freed.
    fn forget_ended(&self, value: &Value) {
        if value.get("outcome").and_then(Value::as_str) != Some("released") {
            return;
        }
        if let (Some(issue), Ok(mut secrets)) = (
            value.get("issue").and_then(Value::as_str),
            self.state.secrets.lock(),
        ) {
            secrets.remove(issue);
        }
    }
}

/// Opens the repository for one call, as the command line does for one command: the clock
/// read once (`GIT_LEASE_NOW`, else the system clock), local liveness, the reader's clock.
fn open(state: &State, remote: Option<String>) -> Result<Context, Error> {
    let now = super::now()?;
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

fn run_command<F>(state: &State, remote: Option<String>, body: F) -> Answer
where
    F: FnOnce(&Context, &mut Vec<u8>) -> Result<u8, Failure>,
{
    let ctx = match open(state, remote) {
        Ok(ctx) => ctx,
        Err(e) => return Answer::Failed(e.into()),
    };
    let mut out = Vec::new();
    let result = body(&ctx, &mut out);
    for notice in ctx.ledger.take_notices() {
        eprintln!(
            "git lease: warning: {}",
            git_lease::text::printable(&notice)
        );
    }
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

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        );
        info.server_info = Implementation::new("git-lease", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Claims on issues kept in git (refs/leases/<issue>). acquire before working on an \
             issue, renew before its expiry, complete or release when done; check a fencing \
             token before acting on it. Results are the JSON of `git lease --json`; lease \
             events arrive as logging notifications."
                .into(),
        );
        info
    }
}

/// Writes the watch's output as notices, one JSON event a line; its first flush (after the
/// ledgers it starts from are read) says that the watch has started.
struct Sink {
    line: Vec<u8>,
    notices: mpsc::UnboundedSender<Notice>,
    started: watch::Sender<bool>,
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                let _ = self.notices.send(Notice::Event(event));
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.started.send_replace(true);
        Ok(())
    }
}

/// Follows the ledgers in a thread of its own, as `git lease watch --json` does, until a
/// signal or the end of the connection.
fn start_watch(
    dir: PathBuf,
    (remote, unshared): (Option<String>, Option<git_lease::backend::Unshared>),
    notices: mpsc::UnboundedSender<Notice>,
    started: watch::Sender<bool>,
) {
    std::thread::spawn(move || {
        let state = State {
            dir,
            remote: remote.clone(),
            unshared,
            secrets: Mutex::default(),
            watching: started.subscribe(),
        };
        let result = open(&state, remote).map_err(Failure::from).and_then(|ctx| {
            let mut sink = Sink {
                line: Vec::new(),
                notices: notices.clone(),
                started: started.clone(),
            };
            let args = super::watch::WatchArgs {
                since: None,
                interval: None,
                prefix: None,
                holder: None,
            };
            super::watch::watch(&ctx, args, &mut sink)
        });
        if let Err(e) = result {
            let message = match e {
                Failure::Lib(e) => e.chain(),
                Failure::Io(e) => e.to_string(),
            };
            let _ = notices.send(Notice::Warning(format!(
                "lease events will not be notified: {message}"
            )));
        }
        // Tool calls no longer wait for it.
        started.send_replace(true);
    });
}

/// Ends the server on SIGINT, SIGTERM or SIGHUP, even before the client has initialized it.
fn stop_on_signals(stop: CancellationToken) -> Result<(), Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM]).map_err(|e| Error::Io {
            context: "cannot install signal handlers".into(),
            source: e,
        })?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop.cancel();
        }
    });
    Ok(())
}

/// Serves the tools over stdio until the client closes the connection or a signal ends it.
pub(crate) fn serve(ctx: &Context) -> Result<u8, Failure> {
    let dir = std::env::current_dir().map_err(|e| Error::Io {
        context: "cannot read the current directory".into(),
        source: e,
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Io {
            context: "cannot start the MCP server's runtime".into(),
            source: e,
        })?;
    let (notices, mut received) = mpsc::unbounded_channel();
    let (started, watching) = watch::channel(false);
    let stop = CancellationToken::new();
    stop_on_signals(stop.clone())?;
    start_watch(
        dir.clone(),
        (ctx.remote.clone(), ctx.unshared.clone()),
        notices,
        started,
    );
    let server = Server {
        state: Arc::new(State {
            dir,
            remote: ctx.remote.clone(),
            unshared: ctx.unshared.clone(),
            secrets: Mutex::default(),
            watching,
        }),
        tool_router: Server::tool_router(),
    };
    let served: Result<(), String> = runtime.block_on(async move {
        let service = match server.serve_with_ct(rmcp::transport::stdio(), stop).await {
            Ok(service) => service,
            // The input ended, or a signal came, before a client initialized: nothing to serve.
            Err(
                rmcp::service::ServerInitializeError::ConnectionClosed(_)
                | rmcp::service::ServerInitializeError::Cancelled,
            ) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let peer = service.peer().clone();
        tokio::spawn(async move {
            while let Some(notice) = received.recv().await {
                let (level, data) = match notice {
                    Notice::Event(event) => (LoggingLevel::Info, event),
                    Notice::Warning(text) => (LoggingLevel::Warning, Value::from(text)),
                };
                let message = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
                if peer.notify_logging_message(message).await.is_err() {
                    return;
                }
            }
        });
        service.waiting().await.map_err(|e| e.to_string())?;
        Ok(())
    });
    // Not waiting for the read of standard input that the runtime may still have going.
    runtime.shutdown_background();
    // A remote's fetch the watch may be waiting on ends with the server.
    git_lease::git::stop_commands(std::time::Duration::from_secs(1));
    match served {
        Ok(()) => Ok(exit::OK),
        Err(message) => Err(Error::Io {
            context: format!("MCP: {message}"),
            source: std::io::Error::other("the connection failed"),
        }
        .into()),
    }
}
