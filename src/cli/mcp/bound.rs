//! Session-bound leases: what `acquire` claims without `detached` is held for the connection.
//! A thread per lease renews its tenure, as `git lease run` does (every third of the TTL, the
//! same [`keep`] and renew deadline), reading the clock once per round. A loss (revoked, taken
//! over, no renewal in time) is sent to the client as a notice, and that lease's renewals stop.
//! When the connection ends, every tenure still held is released.

use std::collections::HashMap;
use std::sync::mpsc as sync_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git_lease::rules::{self, Ending, Outcome, Tenure};
use git_lease::{Error, Holder, IssueId, Ttl};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::Notice;
use crate::cli::output::json::SCHEMA_VERSION;
use crate::cli::run::{keep, renew_interval, Handle, RenewalFound, StopWindow};
use crate::cli::{Context, HolderName, TtlArg};

/// The TTL of a session-bound lease when neither the call nor `lease.ttl` gives one: renewed
/// every 100 s while the client is connected, and lapsed 5 minutes after its server was killed.
pub(super) const BOUND_DEFAULT_TTL: &str = "5m";

/// The TTL of a session-bound claim: `ttl` as the call gave it, else `lease.ttl`, else
/// [`BOUND_DEFAULT_TTL`]. A lease nobody renews once its server is killed lapses at its
/// expiry, so it is short by default.
pub(super) fn session_ttl(ctx: &Context, ttl: Option<String>) -> Option<String> {
    ttl.or_else(|| {
        (ctx.ledger.store().config_string("lease.ttl").is_none())
            .then(|| BOUND_DEFAULT_TTL.to_owned())
    })
}

/// What a claim of this connection is bound by, known before it is made: who claims, on which
/// ledgers, when, for how long, and how often it is renewed.
pub(super) struct Terms {
    dir: std::path::PathBuf,
    now: DateTime<Utc>,
    target: git_lease::backend::Target,
    holder: Holder,
    ttl: Ttl,
    every: Duration,
}

impl Terms {
    /// The terms of a claim of `ctx` by `holder` for `ttl`, refused before anything is written
    /// when the TTL is too short to be renewed in time.
    pub(super) fn of(
        ctx: &Context,
        dir: &std::path::Path,
        holder: Option<String>,
        ttl: Option<String>,
    ) -> Result<Terms, Error> {
        let ttl_given = ctx.ttl(&TtlArg { ttl })?;
        let every = match renew_interval(ttl_given, None) {
            Ok(Some(every)) => every,
            _ => {
                return Err(Error::InvalidInput(
                    "ttl: too short for a lease this server renews (instants are recorded in \
                     whole seconds); give 2s or more, or detached: true"
                        .into(),
                ))
            }
        };
        Ok(Terms {
            dir: dir.to_owned(),
            now: ctx.now,
            target: ctx.target(),
            holder: ctx.holder(&HolderName { holder })?,
            ttl: ttl_given,
            every,
        })
    }
}

/// One lease held for the connection: its tenure and the thread that renews it.
struct Held {
    handle: Handle,
    tenure: Tenure,
    stop: sync_mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// The leases held for this connection, by issue.
#[derive(Clone)]
pub(super) struct Bound {
    held: Arc<Mutex<HashMap<String, Held>>>,
    notices: mpsc::UnboundedSender<Notice>,
}

impl Bound {
    pub(super) fn new(notices: mpsc::UnboundedSender<Notice>) -> Bound {
        Bound {
            held: Arc::default(),
            notices,
        }
    }

    /// Binds each issue `printed` (an `acquire --json` document) says was acquired by these
    /// terms to the connection; `secret` gives the session secret of an issue, if any. Only a
    /// tenure this call began, or one already bound here, is bound: the same holder's live
    /// lease of another client (an idempotent claim) stays that client's.
    pub(super) fn bind_claimed(
        &self,
        terms: &Terms,
        printed: &[u8],
        secret: impl Fn(&str) -> Option<String>,
    ) {
        for item in acquired(printed) {
            let Some(issue) = item["issue"].as_str().and_then(|i| IssueId::new(i).ok()) else {
                continue;
            };
            let secret = item["secret"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| secret(issue.as_str()));
            let Some((tenure, expires_at)) = tenure_of(&item, secret.as_deref()) else {
                continue;
            };
            let began = item["wrote"] == true && tenure.acquired_at == terms.now;
            if began || self.is_bound(issue.as_str(), &tenure) {
                let handle = Handle {
                    dir: terms.dir.clone(),
                    target: terms.target.clone(),
                    issue,
                    holder: terms.holder.clone(),
                    secret,
                };
                self.bind(handle, tenure, (terms.ttl, terms.every), expires_at);
            }
        }
    }

    fn is_bound(&self, issue: &str, tenure: &Tenure) -> bool {
        self.held
            .lock()
            .is_ok_and(|held| held.get(issue).is_some_and(|h| h.tenure == *tenure))
    }

    /// Unbinds each issue `printed` says was acquired: a detached claim of an issue this
    /// connection held keeps the lease past the connection.
    pub(super) fn unbind_claimed(&self, printed: &[u8]) {
        for item in acquired(printed) {
            if let Some(issue) = item["issue"].as_str() {
                self.unbind(issue);
            }
        }
    }

    /// Stops renewing `issue`, leaving its lease as it is (freed by the client, or detached).
    /// Does not wait: a renewal under way ends unsaid, so calls are never held up by one.
    pub(super) fn unbind(&self, issue: &str) {
        let held = self.held.lock().ok().and_then(|mut h| h.remove(issue));
        drop(held);
    }

    fn bind(
        &self,
        handle: Handle,
        tenure: Tenure,
        (ttl, every): (Ttl, Duration),
        expires_at: Option<DateTime<Utc>>,
    ) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        let (stop_renewing, stopped) = sync_mpsc::channel();
        let renewer = Renewer {
            handle: handle.clone(),
            tenure: tenure.clone(),
            ttl,
            every,
            expires_at,
            bound: self.clone(),
        };
        let thread = std::thread::spawn(move || renewer.run(&stopped));
        let issue = handle.issue.to_string();
        let new = Held {
            handle,
            tenure,
            stop: stop_renewing,
            thread,
        };
        // A claim of an issue already bound (the live holder's again) replaces its renewals.
        held.insert(issue, new);
    }

    /// Forgets `tenure` of `issue` once it is lost, unless a newer claim replaced it.
    fn forget_lost(&self, issue: &str, tenure: &Tenure) {
        if let Ok(mut held) = self.held.lock() {
            if held.get(issue).is_some_and(|h| h.tenure == *tenure) {
                held.remove(issue);
            }
        }
    }

    /// Ends the connection's leases: stops every renewal, then releases each tenure still
    /// held, on a clock read for each. What cannot be released lapses at its expiry.
    pub(super) fn release_all(&self) {
        let all: Vec<Held> = match self.held.lock() {
            Ok(mut held) => held.drain().map(|(_, h)| h).collect(),
            Err(_) => return,
        };
        for held in all {
            let (handle, tenure) = (held.handle.clone(), held.tenure.clone());
            // A renewal under way lands first: then the release is of the tenure as renewed.
            drop(held.stop);
            let _ = held.thread.join();
            let released = crate::cli::now().and_then(|now| {
                handle.apply(now, |cur| {
                    rules::release_tenure(
                        &handle.issue,
                        cur,
                        &tenure,
                        handle.credentials(),
                        Ending::Release,
                        now,
                    )
                })
            });
            if let Err(e) = released {
                eprintln!(
                    "warning: the lease of {} was not released, it lapses at its expiry: {}",
                    handle.issue,
                    git_lease::redact::urls(&e.chain())
                );
            }
        }
    }
}

/// The objects of an `acquire --json` document (one, several, or `--any`'s) that were acquired.
fn acquired(printed: &[u8]) -> Vec<Value> {
    let items = match serde_json::from_slice::<Value>(printed) {
        Ok(Value::Array(items)) => items,
        Ok(one) => vec![one],
        Err(_) => Vec::new(),
    };
    items
        .into_iter()
        .filter(|i| i["outcome"] == Outcome::Acquired.as_str())
        .collect()
}

/// The tenure an acquired object records, and its expiry; `None` for a session tenure whose
/// secret this server does not have (it cannot renew it).
fn tenure_of(item: &Value, secret: Option<&str>) -> Option<(Tenure, Option<DateTime<Utc>>)> {
    let at = |field: &str| {
        item[field]
            .as_str()
            .and_then(|t| git_lease::time::parse_instant(t).ok())
    };
    let session = match (item["session"].as_bool(), secret) {
        (Some(true), Some(secret)) => Some(git_lease::session::hash(secret)),
        (Some(true), None) => return None,
        _ => None,
    };
    let tenure = Tenure {
        holder: item["holder"].as_str()?.to_owned(),
        token: item["token"].as_u64()?,
        acquired_at: at("acquired_at")?,
        session,
    };
    Some((tenure, at("expires_at")))
}

/// The renewals of one lease held for the connection.
struct Renewer {
    handle: Handle,
    tenure: Tenure,
    ttl: Ttl,
    every: Duration,
    expires_at: Option<DateTime<Utc>>,
    bound: Bound,
}

impl Renewer {
    /// Renews every `every` (attempts start that far apart) until stopped or the lease is
    /// lost; a failed renewal is said to the client and tried again until the renew deadline.
    fn run(mut self, stopped: &sync_mpsc::Receiver<()>) {
        let mut next = Instant::now() + self.every;
        loop {
            match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Err(sync_mpsc::RecvTimeoutError::Timeout) => next += self.every,
                Ok(()) | Err(sync_mpsc::RecvTimeoutError::Disconnected) => return,
            }
            let Err(why) = self.round() else {
                continue;
            };
            // Unbound while this round ran (freed by the client, detached): nothing was lost.
            if matches!(
                stopped.try_recv(),
                Err(sync_mpsc::TryRecvError::Disconnected)
            ) {
                return;
            }
            let _ = self.bound.notices.send(Notice::Lost(json!({
                "schema_version": SCHEMA_VERSION,
                "issue": self.handle.issue.as_str(),
                "event": "lease_lost",
                "holder": self.tenure.holder,
                "token": self.tenure.token,
                "reason": why,
            })));
            self.bound
                .forget_lost(self.handle.issue.as_str(), &self.tenure);
            return;
        }
    }

    /// One renewal on one reading of the clock: `Err` says why the lease is lost.
    fn round(&mut self) -> Result<(), String> {
        let now = crate::cli::now().map_err(|e| e.chain())?;
        let failed = match keep(&self.handle, &self.tenure, self.ttl, now) {
            Ok(RenewalFound::StillHeld(expires_at)) => {
                self.expires_at = expires_at.or(self.expires_at);
                return Ok(());
            }
            Ok(RenewalFound::Lost(why)) => return Err(why),
            Err(e) => git_lease::redact::urls(&e.chain()),
        };
        let deadline = match (self.ttl, self.expires_at) {
            (Ttl::For(ttl), Some(expires_at)) => Some(StopWindow::before(expires_at, ttl).term_at),
            _ => None,
        };
        if deadline.is_some_and(|d| now >= d) {
            return Err(format!(
                "no renewal succeeded before the renew deadline (the lease expires at {}): {failed}",
                git_lease::time::format_instant(self.expires_at.unwrap_or(now))
            ));
        }
        let _ = self.bound.notices.send(Notice::Warning(format!(
            "renewing the lease of {} failed, will retry: {failed}",
            self.handle.issue
        )));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_acquired_objects_are_bound_and_a_session_tenure_needs_its_secret() {
        let printed = json!([
            {"issue": "7", "outcome": "acquired", "wrote": true, "holder": "a", "token": 3,
             "acquired_at": "2026-11-30T12:00:00Z", "expires_at": "2026-11-30T12:00:09Z",
             "session": true},
            {"issue": "8", "outcome": "held", "holder": "b", "token": 1},
        ])
        .to_string();
        let items = acquired(printed.as_bytes());
        assert_eq!(items.len(), 1);
        assert!(tenure_of(&items[0], None).is_none());
        let (tenure, expires_at) = tenure_of(&items[0], Some("gls_x")).expect("a tenure");
        assert_eq!(tenure.token, 3);
        assert_eq!(tenure.holder, "a");
        assert_eq!(tenure.session, Some(git_lease::session::hash("gls_x")));
        assert_eq!(
            expires_at.map(git_lease::time::format_instant).as_deref(),
            Some("2026-11-30T12:00:09Z")
        );
        // `any`'s answer when nothing was free: one object, nothing acquired.
        let none = json!({"issue": null, "outcome": "held"}).to_string();
        assert!(acquired(none.as_bytes()).is_empty());
    }
}
