//! The specification of who may push what, and when: the verdict every forged push must get,
//! computed from the facts of the case alone.

use super::*;

/// Parses an RFC 3339 instant of `lease.json`.
fn instant(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text:?} is not RFC 3339: {e}"))
        .with_timezone(&Utc)
}

/// What the specification needs to know of the server.
pub(super) struct Facts {
    /// Its clock.
    pub(super) now: DateTime<Utc>,
    /// `lease.maxClockSkew`, in seconds.
    pub(super) max_skew_s: i64,
    /// `lease.admins`, whole identities.
    pub(super) admins: Vec<String>,
    /// Its `/proc/sys/kernel/random/boot_id`.
    pub(super) boot_id: Option<String>,
    /// Its PID namespace (the inode of `/proc/self/ns/pid`).
    pub(super) pid_ns: Option<u64>,
}

impl Facts {
    /// Whether `lease` is live by the server's clock: held, not expired, and its recorded
    /// process not verifiably gone (it ran on the server's machine, in its PID namespace, and
    /// is no longer there).
    pub(super) fn is_live(&self, lease: &Value) -> bool {
        lease["holder"].is_string()
            && lease["expires_at"]
                .as_str()
                .is_none_or(|e| self.now < instant(e))
            && !self.verifiably_gone(&lease["process"])
    }

    /// Whether the server can see that `process` (a `lease.json` `process` object) is gone:
    /// only in its own boot and PID namespace (a record without its namespace is unknown).
    pub(super) fn verifiably_gone(&self, process: &Value) -> bool {
        let (Some(boot), Some(ns), Some(pid), Some(ticks)) = (
            process["boot_id"].as_str(),
            process["pid_ns"].as_u64(),
            process["pid"].as_u64(),
            process["start_ticks"].as_u64(),
        ) else {
            return false;
        };
        self.boot_id.as_deref() == Some(boot)
            && self.pid_ns == Some(ns)
            && start_ticks(pid as u32) != Some(ticks)
    }
}

/// The verdict the server must give to `next` pushed on top of `prior` (`None`: a new ledger)
/// by `pusher` (`None`: nobody authenticated): `Ok`, or `Err` saying why it must be refused.
pub(super) fn spec(
    server: &Facts,
    prior: Option<&Value>,
    next: &Value,
    pusher: Option<&str>,
) -> Result<(), String> {
    // Without an authenticated pusher every lease push is refused.
    let Some(pusher) = pusher else {
        return Err("nobody authenticated pushed it".into());
    };
    // The event's time is within the skew of the server's clock.
    let at = instant(next["at"].as_str().expect("at"));
    if (at - server.now).num_seconds().abs() > server.max_skew_s {
        return Err(format!(
            "its at {} is more than {}s from the server's clock",
            rfc3339(at),
            server.max_skew_s
        ));
    }
    // `by`, when present, is the pusher.
    let by = next["by"].as_str();
    if let Some(by) = by.filter(|b| *b != pusher) {
        return Err(format!("by names {by}, but {pusher} pushed it"));
    }
    let previous = prior.and_then(|p| p["holder"].as_str());
    // Judged at the server's clock, never the pushed `at`; a takeover the server cannot
    // verify leaves the lease live.
    let live = prior.is_some_and(|p| server.is_live(p));
    let event = next["event"].as_str().expect("event");
    match event {
        // A new tenure of a free or expired issue, by the new holder only.
        "acquire" => {
            let holder = next["holder"].as_str().unwrap_or("nobody");
            if holder != pusher {
                Err(format!("a new tenure for {holder}, pushed by {pusher}"))
            } else if live {
                Err(format!(
                    "{} holds it, live by the server's clock",
                    previous.unwrap_or("?")
                ))
            } else {
                Ok(())
            }
        }
        // The holder's own steps that need the lease live.
        "reacquire" | "renew" => {
            if previous != Some(pusher) {
                Err(format!(
                    "only the holder {} may {event}, not {pusher}",
                    previous.unwrap_or("nobody")
                ))
            } else if !live {
                Err(format!(
                    "a {event} needs the lease live by the server's clock"
                ))
            } else {
                Ok(())
            }
        }
        // An administrator only, recording who revoked.
        "revoke" => {
            if !server.admins.iter().any(|a| a == pusher) {
                Err(format!("{pusher} is not an administrator"))
            } else if by.is_none() {
                Err("a revoke records who revoked".into())
            } else {
                Ok(())
            }
        }
        // release, complete, abandon: the holder, or anyone once the lease is not live.
        _ => {
            let actor = by.or(previous);
            if live && previous != Some(pusher) {
                Err(format!(
                    "only the holder {} may {event} a live lease, not {pusher}",
                    previous.unwrap_or("nobody")
                ))
            } else if actor != Some(pusher) {
                Err(format!(
                    "the commit records {} as acting, but {pusher} pushed it",
                    actor.unwrap_or("nobody")
                ))
            } else {
                Ok(())
            }
        }
    }
}
