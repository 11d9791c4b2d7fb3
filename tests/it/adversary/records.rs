//! Times and records: the step an honest client would record from the server's ledger, its
//! times spelled otherwise than the format, and the mutations a forger makes of it.

use super::*;

/// The instant a record's time field holds, read as leniently as RFC 3339 allows.
pub(crate) fn time(v: &Value) -> Option<DateTime<Utc>> {
    let text = v.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_rfc3339(&text.to_uppercase().replacen(' ', "T", 1)))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `secs` seconds after T0.
pub(crate) fn instant(secs: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(secs)
}

/// `text` (a canonical instant) spelled as `spelling` says.
pub(super) fn spell(t: DateTime<Utc>, spelling: Spelling) -> String {
    let canonical = rfc3339(t);
    let body = canonical.trim_end_matches('Z');
    match spelling {
        Spelling::HalfSecond => format!("{body}.5Z"),
        Spelling::ZeroFraction => format!("{body}.000Z"),
        Spelling::PlusZero => format!("{body}+00:00"),
        Spelling::LowerZ => format!("{body}z"),
        Spelling::LowerT => canonical.replacen('T', "t", 1),
        Spelling::Space => canonical.replacen('T', " ", 1),
        Spelling::Offset => {
            (t + Duration::hours(1))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                .trim_end_matches('Z')
                .to_owned()
                + "+01:00"
        }
    }
}

/// Whether `process` (a `lease.json` `process` object) ran on this machine and is gone.
pub(super) fn gone_here(process: &Value, boot: &str) -> bool {
    let (Some(b), Some(pid), Some(ticks)) = (
        process["boot_id"].as_str(),
        process["pid"].as_u64(),
        process["start_ticks"].as_u64(),
    ) else {
        return false;
    };
    b == boot && u32::try_from(pid).map_or(true, |pid| start_ticks(pid) != Some(ticks))
}

pub(super) fn process_object(process: Proc, boot: &str) -> Value {
    let me = std::process::id();
    let ticks = start_ticks(me).unwrap_or(1);
    match process {
        Proc::Elsewhere => json!({ "pid": 4242, "boot_id": "another-machine", "start_ticks": 1 }),
        Proc::GoneHere => json!({ "pid": me, "boot_id": boot, "start_ticks": ticks + 1 }),
        Proc::LiveHere => json!({ "pid": me, "boot_id": boot, "start_ticks": ticks }),
    }
}

pub(super) fn remove(v: &mut Value, field: &str) {
    if let Some(map) = v.as_object_mut() {
        map.remove(field);
    }
}

/// The step an honest client of `me`, whose clock reads `now`, records for `action` on top of
/// `prev`. Where no honest client would write anything (a renew of someone else's lease, an
/// acquire of a live lease), the record it would write if it believed it could: an attempt.
pub(crate) fn honest(
    issue: &str,
    prev: Option<&Value>,
    me: &str,
    action: Action,
    ttl: Option<i64>,
    now: DateTime<Utc>,
    boot: &str,
) -> Value {
    let at = prev
        .and_then(|p| time(&p["at"]))
        .map_or(now, |a| a.max(now));
    let expiry = ttl.map(|s| rfc3339(at + Duration::seconds(s)));
    let holder = prev.and_then(|p| p["holder"].as_str());
    let token = prev.and_then(|p| p["token"].as_u64()).unwrap_or(0);
    let gone = prev.is_some_and(|p| gone_here(&p["process"], boot));
    let expired = prev.is_some_and(|p| time(&p["expires_at"]).is_some_and(|e| at >= e));
    let live = holder.is_some() && !expired && !gone;
    let why = if gone && !expired {
        "process_gone"
    } else {
        "expired"
    };
    let tenure = |event: &str, token: u64| {
        let mut v = json!({
            "version": 1,
            "issue": issue,
            "event": event,
            "holder": me,
            "token": token,
            "acquired_at": rfc3339(at),
            "expires_at": expiry,
            "at": rfc3339(at),
        });
        if let Some(h) = holder {
            v["previous_holder"] = json!(h);
            v["takeover"] = json!(why);
        }
        v
    };
    let extend = |event: &str| {
        let mut v = prev.cloned().unwrap_or(Value::Null);
        v["event"] = json!(event);
        v["holder"] = json!(me);
        v["at"] = json!(rfc3339(at));
        v["expires_at"] = json!(expiry);
        for field in ["takeover", "previous_holder", "by", "reason"] {
            remove(&mut v, field);
        }
        v
    };
    let free = |event: &str, previous: &str| {
        let mut v = forge::freed(issue, event, previous, token, (at - t0()).num_seconds());
        if event == "revoke" {
            v["by"] = json!(me);
            v["reason"] = json!("stuck");
        } else if previous != me {
            v["by"] = json!(me);
            v["takeover"] = json!(why);
        }
        v
    };
    let nobody = prev
        .and_then(|p| p["previous_holder"].as_str())
        .unwrap_or(me);
    match action {
        Action::Acquire if live && holder == Some(me) => extend("reacquire"),
        Action::Acquire => tenure("acquire", token + 1),
        Action::Renew if holder.is_some() => extend("renew"),
        Action::Renew => tenure("renew", token.max(1)),
        Action::Revoke => free("revoke", holder.unwrap_or(nobody)),
        ending => free(ending.command(), holder.unwrap_or(nobody)),
    }
}

/// Moves the record to `t`: its `at`, a new tenure's `acquired_at`, and its expiry with the
/// same TTL.
pub(super) fn retime(v: &mut Value, t: DateTime<Utc>) {
    let old = time(&v["at"]);
    if let (Some(old), Some(exp)) = (old, time(&v["expires_at"])) {
        v["expires_at"] = json!(rfc3339(t + (exp - old)));
    }
    if v["event"] == "acquire" && v["acquired_at"].is_string() {
        v["acquired_at"] = json!(rfc3339(t));
    }
    v["at"] = json!(rfc3339(t));
}

/// What a mutation needs to know besides the record.
pub(super) struct Context<'a> {
    /// The server's clock.
    pub(super) now: DateTime<Utc>,
    /// The ledger's records, oldest first.
    pub(super) ledger: &'a [Value],
    pub(super) boot: &'a str,
}

/// Applies a mutation of the record itself (the others shape the push; see
/// [`World::forge_push`]).
pub(super) fn mutate(m: &Mutation, v: &mut Value, cx: &Context<'_>) {
    let name = |i: &Option<usize>| i.map_or(Value::Null, |i| json!(USERS[i]));
    match m {
        Mutation::Holder(i) => v["holder"] = name(i),
        Mutation::Token(d) => v["token"] = json!(v["token"].as_i64().unwrap_or(0) + d),
        Mutation::By(None) => remove(v, "by"),
        Mutation::By(i) => v["by"] = name(i),
        Mutation::PreviousHolder(None) => remove(v, "previous_holder"),
        Mutation::PreviousHolder(i) => v["previous_holder"] = name(i),
        Mutation::Event(i) => v["event"] = json!(EVENTS[*i]),
        Mutation::Takeover(None) => remove(v, "takeover"),
        Mutation::Takeover(Some(gone)) => {
            v["takeover"] = json!(if *gone { "process_gone" } else { "expired" })
        }
        Mutation::Shift { field, secs } => {
            for f in field.names() {
                if let Some(t) = time(&v[*f]) {
                    v[*f] = json!(rfc3339(t + Duration::seconds(*secs)));
                }
            }
        }
        Mutation::IntoPreviousTenure { permille } => {
            // The last tenure the ledger recorded: its start and recorded end.
            let last = cx.ledger.iter().rev().find(|r| r["holder"].is_string());
            if let Some(start) = last.and_then(|r| time(&r["acquired_at"])) {
                let end = last
                    .and_then(|r| time(&r["expires_at"]))
                    .unwrap_or(start + Duration::seconds(600));
                let t = start + (end - start) * i32::from(*permille) / 1000;
                retime(v, t);
            }
        }
        Mutation::BeyondSkew { ahead, extra } => {
            let by = Duration::seconds(SKEW_S + extra);
            retime(v, if *ahead { cx.now + by } else { cx.now - by });
        }
        Mutation::Spell { field, spelling } => {
            for f in field.names() {
                if let Some(t) = time(&v[*f]) {
                    v[*f] = json!(spell(t, *spelling));
                }
            }
        }
        Mutation::Process {
            process,
            claim_gone,
        } => {
            v["process"] = process_object(*process, cx.boot);
            if *claim_gone {
                v["takeover"] = json!("process_gone");
            }
        }
        Mutation::Session => v["session"] = json!(format!("sha256:{}", "ab".repeat(32))),
        Mutation::Version(n) => v["version"] = json!(n),
        Mutation::Drop(i) => remove(v, DROPPABLE[*i]),
        Mutation::Unknown => v["comment"] = json!("an optional field no reader knows"),
        Mutation::IssueField(i) => v["issue"] = json!(ISSUES[*i]),
        Mutation::WrongRef(_)
        | Mutation::ExtraParent(_)
        | Mutation::ReplaceRef
        | Mutation::Rewind
        | Mutation::Delete
        | Mutation::Chain(_) => {}
    }
}
