//! The arguments of each tool, as its JSON schema (`tools/list`) shows them: serde refuses
//! what the schema refuses, which rmcp answers as invalid params (-32602).

use std::sync::Arc;

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// A tool's arguments, read as its schema says. What does not fit is answered as a JSON-RPC
/// error, invalid params (-32602), with serde's reason: rmcp's own `Parameters` would make
/// it a tool result instead.
pub(super) struct Checked<T>(pub(super) T);

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Checked<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        serde_json::from_value(Value::Object(arguments))
            .map(Checked)
            .map_err(|e| ErrorData::invalid_params(format!("invalid arguments: {e}"), None))
    }
}

/// The input schema of a tool whose arguments are `T`.
pub(super) fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_input::<T>().unwrap_or_else(|_| {
        let mut object = JsonObject::new();
        object.insert("type".into(), Value::from("object"));
        Arc::new(object)
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AcquireInput {
    /// The exact issue id to claim (give this or `issues`)
    pub(super) issue: Option<String>,
    /// The exact issue ids: several claimed all or none; with `any`, the candidates of which
    /// exactly one free one is claimed (tried in a random order). Give this or `issue`
    pub(super) issues: Option<Vec<String>>,
    /// Claim exactly one free issue of `issues`
    #[serde(default)]
    pub(super) any: bool,
    /// With `any`: `issues` are a priority order, most urgent first; the first free one is
    /// taken (spreading over the first few only after a race lost to another claimer)
    #[serde(default)]
    pub(super) ordered: bool,
    /// Who holds [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    pub(super) holder: Option<String>,
    /// How long the lease lasts: 90s, 15m, 2h, 1d or never [default: lease.ttl, else 1h; 5m
    /// for a session-bound lease]
    pub(super) ttl: Option<String>,
    /// Free text stored with the claim
    pub(super) note: Option<String>,
    /// An external task or job id stored with the claim
    pub(super) task: Option<String>,
    /// Start a session: its secret stays in this server, which gives it to this client's
    /// later renew, release, complete, abandon and acquire of the issue
    #[serde(default)]
    pub(super) session: bool,
    /// Detach the lease from this connection: not renewed by the server, nor freed when the
    /// client goes. By default a lease is renewed while the client is connected (every third
    /// of its TTL) and released when it goes
    #[serde(default)]
    pub(super) detached: bool,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}

impl AcquireInput {
    /// Takes the issues to claim: `issue` alone, or `issues`. Naming both, or neither, does
    /// not fit the tool's arguments: invalid params.
    pub(super) fn take_issues(&mut self) -> Result<Vec<String>, ErrorData> {
        match (self.issue.take(), self.issues.take()) {
            (Some(one), None) => Ok(vec![one]),
            (None, Some(several)) if !several.is_empty() => Ok(several),
            (None, Some(_)) => Err(invalid("issues: name at least one issue")),
            (Some(_), Some(_)) => Err(invalid("give `issue` or `issues`, not both")),
            (None, None) => Err(invalid("missing field `issue` (or `issues` for several)")),
        }
    }
}

fn invalid(reason: &'static str) -> ErrorData {
    ErrorData::invalid_params(reason, None)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RenewInput {
    /// The issue id or a unique prefix
    pub(super) issue: String,
    /// Who holds [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    pub(super) holder: Option<String>,
    /// The new TTL from now [default: lease.ttl, else 1h]
    pub(super) ttl: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EndInput {
    /// The issue id or a unique prefix
    pub(super) issue: String,
    /// Who holds [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    pub(super) holder: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckInput {
    /// The exact issue id
    pub(super) issue: String,
    /// The fencing token to check
    pub(super) token: u64,
    /// Also require this holder
    pub(super) holder: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct IssueInput {
    /// The issue id or a unique prefix
    pub(super) issue: String,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}

/// A state `list` can keep.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum ListState {
    Held,
    Expired,
    Free,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListInput {
    /// Also leases that are not live (expired, free)
    #[serde(default)]
    pub(super) all: bool,
    /// Only this holder's (the live holder, else the last one)
    pub(super) holder: Option<String>,
    /// Only mine (GIT_LEASE_HOLDER, then lease.holder, then user.email)
    #[serde(default)]
    pub(super) mine: bool,
    /// Only leases in this state
    pub(super) state: Option<ListState>,
    /// Only issues starting with this prefix
    pub(super) prefix: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RevokeInput {
    /// The exact issue id
    pub(super) issue: String,
    /// Why (recorded)
    pub(super) reason: String,
    /// Who revokes [default: GIT_LEASE_HOLDER, then lease.holder, then user.email]
    pub(super) holder: Option<String>,
    /// Operate on this remote (a name or URL) instead of the server's default
    pub(super) remote: Option<String>,
}
