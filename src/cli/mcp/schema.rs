//! Each tool's `outputSchema`: the shape of its result's `structuredContent`, which is the
//! JSON document the command prints with `--json` (docs/JSON.md), an array's items under
//! `items` (a structured result is an object). Fields are only ever added within a schema
//! version, so no schema here forbids a field it does not name.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{json, Value};

use crate::cli::output::json::SCHEMA_VERSION;

/// A type that is also allowed to be null.
fn nullable(kind: &str) -> Value {
    json!({ "type": [kind, "null"] })
}

/// The fields of a lease as seen now (docs/JSON.md, `show`, the items of `list`).
fn lease_fields() -> JsonObject {
    let fields = json!({
        "schema_version": { "type": "integer" },
        "issue": { "type": "string" },
        "holder": nullable("string"),
        "last_holder": nullable("string"),
        "token": nullable("integer"),
        "acquired_at": nullable("string"),
        "expires_at": nullable("string"),
        "held": { "type": "boolean" },
        "state": { "enum": ["held", "expired", "free", "none"] },
        "event": nullable("string"),
        "at": nullable("string"),
        "commit": nullable("string"),
        "note": { "type": "string" },
        "task": { "type": "string" },
        "takeover": nullable("string"),
        "process": nullable("object"),
        "process_gone": { "type": "boolean" },
        "session": { "type": "boolean" },
    });
    object(fields)
}

/// The fields of an operation: the lease after it, its outcome, whether it wrote.
fn operation_fields() -> JsonObject {
    let mut fields = lease_fields();
    fields.insert("outcome".into(), json!({ "type": "string" }));
    fields.insert("wrote".into(), json!({ "type": "boolean" }));
    fields
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// An object of `fields`, of which `required` must be there.
fn shape(fields: JsonObject, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": fields, "required": required })
}

/// A top-level document: `schema_version` first, as every one `--json` prints.
fn document(fields: JsonObject, required: &[&str]) -> Arc<JsonObject> {
    let mut all = vec!["schema_version"];
    all.extend_from_slice(required);
    Arc::new(object(shape(fields, &all)))
}

/// An array answer, given as `{"schema_version", "items"}`.
fn items(item: Value) -> Arc<JsonObject> {
    let fields = object(json!({
        "schema_version": { "type": "integer" },
        "items": { "type": "array", "items": item },
    }));
    document(fields, &["items"])
}

/// `acquire`: one operation (`issue`); the claim of `any` (its `issue` null when none was
/// free); or, for several issues, their operations under `items`.
pub(super) fn acquire() -> Arc<JsonObject> {
    let mut fields = operation_fields();
    fields.insert("issue".into(), nullable("string"));
    for count in ["candidates", "attempts", "lost"] {
        fields.insert(count.into(), json!({ "type": "integer" }));
    }
    for names in ["passed_over", "moved_from"] {
        fields.insert(
            names.into(),
            json!({ "type": "array", "items": { "type": "string" } }),
        );
    }
    let each = shape(operation_fields(), &["issue", "outcome"]);
    fields.insert("items".into(), json!({ "type": "array", "items": each }));
    document(fields, &[])
}

/// `renew`, `release`, `complete`, `abandon`, `revoke`: one operation.
pub(super) fn operation() -> Arc<JsonObject> {
    document(operation_fields(), &["issue", "outcome", "wrote"])
}

/// `show`: a lease as seen now.
pub(super) fn lease() -> Arc<JsonObject> {
    document(lease_fields(), &["issue", "held", "state"])
}

/// `check`: the lease, and whether the token is the live tenure's.
pub(super) fn check() -> Arc<JsonObject> {
    let mut fields = lease_fields();
    fields.insert("ok".into(), json!({ "type": "boolean" }));
    fields.insert("checked_token".into(), json!({ "type": "integer" }));
    fields.insert("reason".into(), nullable("string"));
    document(fields, &["issue", "ok", "checked_token"])
}

/// `list`: the leases, as `show` gives each.
pub(super) fn list() -> Arc<JsonObject> {
    items(shape(lease_fields(), &["issue", "held", "state"]))
}

/// `log`: one entry per ledger commit, newest first.
pub(super) fn log() -> Arc<JsonObject> {
    let entry = object(json!({
        "commit": { "type": "string" },
        "event": { "type": "string" },
        "at": { "type": "string" },
        "token": { "type": "integer" },
        "holder": nullable("string"),
        "previous_holder": nullable("string"),
        "by": nullable("string"),
        "reason": nullable("string"),
        "acquired_at": nullable("string"),
        "expires_at": nullable("string"),
        "note": { "type": "string" },
        "task": { "type": "string" },
        "takeover": nullable("string"),
        "process": nullable("object"),
        "session": { "type": "boolean" },
    }));
    items(shape(entry, &["commit", "event", "at", "token"]))
}

/// The structured form of a command's document: itself, or an array's items under `items`.
pub(super) fn structured(document: &Value) -> Value {
    match document {
        Value::Array(list) => json!({ "schema_version": SCHEMA_VERSION, "items": list }),
        other => other.clone(),
    }
}
