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
//! A lease `acquire` claims is held for the connection unless the call says `detached`: the
//! server renews it and releases it when the connection ends ([`bound`]).
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
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, CustomRequest, CustomResult, ErrorCode, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, ServerCapabilities, ServerConfig, SetLevelRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use git_lease::{Ending, Error};

use super::{commands, exit, resolve_for_write, Context, Failure, HolderArg, HolderName, TtlArg};

mod answer;
mod bound;
mod events;
mod inputs;
mod schema;
mod transport;

use answer::{open, usage};
use inputs::{
    AcquireInput, CheckInput, Checked, EndInput, IssueInput, ListInput, ListState, RenewInput,
    RevokeInput,
};

/// The logger name of the notifications this server sends.
const LOGGER: &str = "git-lease";

/// What the watch's thread tells the connection.
enum Notice {
    /// A lease event, as `watch --json` prints it.
    Event(Value),
    /// Something the client should know (the watch could not start, or failed).
    Warning(String),
    /// A lease held for the connection was lost: the issue, the tenure, why.
    Lost(Value),
}

/// What every call shares: where the repository is, where its leases are by default (a remote,
/// or else why the local refs are for reading only, when they are), the session secrets of this
/// client's claims, the leases held for the connection, and whether the watch has started.
struct State {
    dir: PathBuf,
    remote: Option<String>,
    unshared: Option<git_lease::backend::Unshared>,
    secrets: Mutex<HashMap<String, String>>,
    bound: bound::Bound,
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

/// What a command answered, and what it said beside it (`--json`'s `hints`), credentials
/// removed: carried to the client, never logged on the server's stderr.
struct Said(Answer, Vec<String>);

#[derive(Clone)]
struct Server {
    state: Arc<State>,
    tool_router: ToolRouter<Server>,
    /// The least level of the notifications the client wants (`logging/setLevel`).
    level: Arc<AtomicU8>,
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

#[tool_router]
impl Server {
    #[tool(description = "Claim an issue (`issue`), several all or none (`issues`), or with any=true exactly one free one of the candidates `issues`; idempotent for the live holder. Answers as `git lease --json acquire` (an array for several issues, under `items` in the structured result).",
        output_schema = schema::acquire(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true),
        input_schema = inputs::schema::<AcquireInput>(),
    )]
    async fn acquire(
        &self,
        Checked(mut input): Checked<AcquireInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let issues = input.take_issues()?;
        if input.ordered && !input.any {
            return Ok(usage("ordered: only with any=true"));
        }
        if input.any && issues.iter().any(|i| i == "-") {
            return Ok(usage(
                "issues: `-` (candidates from standard input) has no meaning here",
            ));
        }
        let secret = if input.any {
            None
        } else {
            issues.iter().find_map(|i| self.state.secret(i))
        };
        let holder = input.holder.or_else(super::env_holder);
        let terms = (!input.detached).then(|| (holder.clone(), input.ttl.clone()));
        let args = commands::acquire::Args {
            issues,
            any: input.any,
            ordered: input.ordered,
            holder: holder_arg(holder, secret),
            ttl: TtlArg { ttl: input.ttl },
            note: input.note,
            task: input.task,
            session: input.session,
            pid: None,
        };
        let state = self.state.clone();
        self.call(input.remote, move |ctx, out| {
            let mut args = args;
            // A lease too short to be renewed is refused before anything is written.
            let terms = match terms {
                Some((holder, ttl)) => {
                    let ttl = bound::session_ttl(ctx, ttl);
                    args.ttl = TtlArg { ttl: ttl.clone() };
                    Some(bound::Terms::of(ctx, &state.dir, holder, ttl)?)
                }
                None => None,
            };
            let code = commands::acquire::run(ctx, args, out)?;
            match terms {
                Some(terms) => state
                    .bound
                    .bind_claimed(&terms, out, |issue| state.secret(issue)),
                None => state.bound.unbind_claimed(out),
            }
            Ok(code)
        })
        .await
    }

    #[tool(description = "Extend your live lease from now by the TTL. Answers as `git lease --json renew`.",
        output_schema = schema::operation(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false),
        input_schema = inputs::schema::<RenewInput>(),
    )]
    async fn renew(
        &self,
        Checked(input): Checked<RenewInput>,
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

    #[tool(description = "Free your lease (or one no longer live), keeping its token. Answers as `git lease --json release`.",
        output_schema = schema::operation(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true),
        input_schema = inputs::schema::<EndInput>(),
    )]
    async fn release(
        &self,
        Checked(input): Checked<EndInput>,
    ) -> Result<CallToolResult, ErrorData> {
        self.end(input, Ending::Release).await
    }

    #[tool(description = "Free your lease and record that the work is done. Answers as `git lease --json complete`.",
        output_schema = schema::operation(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true),
        input_schema = inputs::schema::<EndInput>(),
    )]
    async fn complete(
        &self,
        Checked(input): Checked<EndInput>,
    ) -> Result<CallToolResult, ErrorData> {
        self.end(input, Ending::Complete).await
    }

    #[tool(description = "Free your lease and record that the work was given up. Answers as `git lease --json abandon`.",
        output_schema = schema::operation(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true),
        input_schema = inputs::schema::<EndInput>(),
    )]
    async fn abandon(
        &self,
        Checked(input): Checked<EndInput>,
    ) -> Result<CallToolResult, ErrorData> {
        self.end(input, Ending::Abandon).await
    }

    #[tool(description = "Fencing check: succeeds (isError false) only if the token is the live tenure's token. Answers as `git lease --json check`.",
        output_schema = schema::check(),
        annotations(read_only_hint = true),
        input_schema = inputs::schema::<CheckInput>(),
    )]
    async fn check(
        &self,
        Checked(input): Checked<CheckInput>,
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

    #[tool(description = "Show one lease (reads only). Answers as `git lease --json show`.",
        output_schema = schema::lease(),
        annotations(read_only_hint = true),
        input_schema = inputs::schema::<IssueInput>(),
    )]
    async fn show(&self, Checked(input): Checked<IssueInput>) -> Result<CallToolResult, ErrorData> {
        let args = commands::show::Args { issue: input.issue };
        self.call(input.remote, move |ctx, out| {
            commands::show::run(ctx, args, out)
        })
        .await
    }

    #[tool(description = "List live leases, oldest tenure first (reads only). Answers as `git lease --json list` (an array).",
        output_schema = schema::list(),
        annotations(read_only_hint = true),
        input_schema = inputs::schema::<ListInput>(),
    )]
    async fn list(&self, Checked(input): Checked<ListInput>) -> Result<CallToolResult, ErrorData> {
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

    #[tool(description = "The tenure history of one issue, newest first (reads only). Answers as `git lease --json log` (an array).",
        output_schema = schema::log(),
        annotations(read_only_hint = true),
        input_schema = inputs::schema::<IssueInput>(),
    )]
    async fn log(&self, Checked(input): Checked<IssueInput>) -> Result<CallToolResult, ErrorData> {
        let args = commands::log::Args { issue: input.issue };
        self.call(input.remote, move |ctx, out| {
            commands::log::run(ctx, args, out)
        })
        .await
    }

    #[tool(description = "Free someone else's lease as an administrator (token kept; who and why recorded). Answers as `git lease --json revoke`.",
        output_schema = schema::operation(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false),
        input_schema = inputs::schema::<RevokeInput>(),
    )]
    async fn revoke(
        &self,
        Checked(input): Checked<RevokeInput>,
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

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    /// Keeps the level the client asked for: notifications below it are not sent.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.store(request.level as u8, Ordering::Relaxed);
        Ok(())
    }

    /// Answers a request that was over [`transport::MAX_REQUEST`] (read, not kept) with an
    /// error; any other method is not found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != transport::OVERSIZED {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let bytes = request
            .params
            .as_ref()
            .and_then(|p| p.get("bytes"))
            .cloned();
        Err(ErrorData::invalid_request(
            format!(
                "the request is {} bytes, over the {} bytes this server reads: nothing was done",
                bytes.unwrap_or(Value::Null),
                transport::MAX_REQUEST
            ),
            None,
        ))
    }

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
             issue, complete or release when done; check a fencing token before acting on it. \
             This server renews what you acquire while you stay connected and releases it when \
             you go (detached: true keeps a lease past the session, renewed by you). Results \
             are the JSON of `git lease --json`; lease events, and the loss of a lease held \
             for you (lease_lost), arrive as logging notifications."
                .into(),
        );
        info
    }
}

/// Whether a notification of `level` reaches a client that asked for `least` and above.
fn is_sent(level: LoggingLevel, least: u8) -> bool {
    level as u8 >= least
}

/// Sends each notice as a logging notification, those below the level the client set
/// (`least`) left out, until the connection ends.
async fn notify(
    peer: rmcp::Peer<RoleServer>,
    mut received: mpsc::UnboundedReceiver<Notice>,
    least: Arc<AtomicU8>,
) {
    while let Some(notice) = received.recv().await {
        let (level, data) = match notice {
            Notice::Event(event) => (LoggingLevel::Info, event),
            Notice::Warning(text) => (LoggingLevel::Warning, Value::from(text)),
            Notice::Lost(lost) => (LoggingLevel::Warning, lost),
        };
        if !is_sent(level, least.load(Ordering::Relaxed)) {
            continue;
        }
        let message = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
        if peer.notify_logging_message(message).await.is_err() {
            return;
        }
    }
}

/// Ends the server on SIGINT, SIGTERM or SIGHUP, even before the client has initialized it.
fn stop_on_signals(stop: CancellationToken) -> Result<(), Error> {
    crate::cli::watch::on_stop_signal(move || stop.cancel())
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
    let (notices, received) = mpsc::unbounded_channel();
    let bound = bound::Bound::new(notices.clone());
    let (started, watching) = watch::channel(false);
    let stop = CancellationToken::new();
    stop_on_signals(stop.clone())?;
    events::start_watch(
        dir.clone(),
        (ctx.remote.clone(), ctx.unshared.clone()),
        notices,
        started,
    );
    // Until the client sets one, every notification is sent: lease events are `info`.
    let level = Arc::new(AtomicU8::new(LoggingLevel::Debug as u8));
    let server = Server {
        state: Arc::new(State {
            dir,
            remote: ctx.remote.clone(),
            unshared: ctx.unshared.clone(),
            secrets: Mutex::default(),
            bound: bound.clone(),
            watching,
        }),
        tool_router: Server::tool_router(),
        level: level.clone(),
    };
    let served: Result<(), String> = runtime.block_on(async move {
        // rmcp reads the client's lines through a pipe that bounds each one.
        let (bounded, reader) = tokio::io::duplex(64 * 1024);
        tokio::spawn(transport::bound_lines(tokio::io::stdin(), bounded));
        let io = (reader, tokio::io::stdout());
        let service = match server.serve_with_ct(io, stop).await {
            Ok(service) => service,
            // The input ended, or a signal came, before a client initialized: nothing to serve.
            Err(
                rmcp::service::ServerInitializeError::ConnectionClosed(_)
                | rmcp::service::ServerInitializeError::Cancelled,
            ) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        tokio::spawn(notify(service.peer().clone(), received, level));
        service.waiting().await.map_err(|e| e.to_string())?;
        Ok(())
    });
    // The client is gone (its input ended, or a signal came): its leases are released.
    bound.release_all();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_below_the_level_the_client_set_are_not_sent() {
        let warning = LoggingLevel::Warning as u8;
        assert!(!is_sent(LoggingLevel::Info, warning));
        assert!(is_sent(LoggingLevel::Warning, warning));
        assert!(is_sent(LoggingLevel::Error, warning));
        assert!(is_sent(LoggingLevel::Info, LoggingLevel::Debug as u8));
        assert!(is_sent(LoggingLevel::Info, LoggingLevel::Info as u8));
    }
}
