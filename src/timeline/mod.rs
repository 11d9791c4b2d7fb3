//! Who held what, when: every ledger's history as tenures on a time line, the data of
//! `git lease timeline` (its `--json` document, and what [`html`] draws).
//!
//! A tenure runs from the acquire that began it (a new token) to what ended it: the holder's
//! release, complete or abandon, an administrator's revoke, an expiry (nothing recorded after
//! it, or someone else clearing the lease once it was no longer live), or a takeover (an
//! acquire by someone else over it, once it had expired or its holder process was gone). A
//! tenure still live at `now` ([`rules::is_live`]) reaches `now`. Renewals and re-acquires
//! are marks on their tenure.

pub mod axis;
pub mod html;

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::Result;
use crate::issue::natural_cmp;
use crate::lease::{Event, Takeover};
use crate::listing::Unreadable;
use crate::rules;
use crate::store::{Entry, Store};
use crate::time::rfc3339;

/// The version of the timeline document (docs/JSON.md, "timeline").
pub const SCHEMA_VERSION: u32 = 1;

/// How a tenure ended: the class of its bar, and the `ending` of `--json`.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Still live at `now`.
    Live,
    /// Its holder released it.
    Released,
    /// Its holder completed the work.
    Completed,
    /// Its holder gave the work up.
    Abandoned,
    /// An administrator revoked it.
    Revoked,
    /// It stopped being live (its expiry passed, or its holder process was gone) and nobody
    /// took it over: nothing recorded since, or someone else cleared it.
    Expired,
    /// Someone else acquired the issue once it was no longer live.
    TakenOver,
}

impl Ending {
    /// Every ending, in the order the legend shows them.
    pub const ALL: [Ending; 7] = [
        Ending::Live,
        Ending::Completed,
        Ending::Released,
        Ending::Abandoned,
        Ending::Revoked,
        Ending::Expired,
        Ending::TakenOver,
    ];

    /// Returns the name of `--json` and of the bar's class (`ending-<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Live => "live",
            Ending::Released => "released",
            Ending::Completed => "completed",
            Ending::Abandoned => "abandoned",
            Ending::Revoked => "revoked",
            Ending::Expired => "expired",
            Ending::TakenOver => "taken_over",
        }
    }

    /// Returns the words a person reads for it.
    pub fn label(self) -> &'static str {
        match self {
            Ending::Live => "live",
            Ending::Released => "released",
            Ending::Completed => "completed",
            Ending::Abandoned => "abandoned",
            Ending::Revoked => "revoked",
            Ending::Expired => "expired",
            Ending::TakenOver => "taken over",
        }
    }
}

/// A renewal (or a re-acquire by the live holder) of a tenure: a mark on its bar.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// When.
    #[serde(with = "rfc3339")]
    pub at: DateTime<Utc>,
    /// `renew` or `reacquire`.
    pub event: Event,
    /// The ledger commit.
    pub commit: String,
    /// The expiry it set (null: open-ended).
    #[serde(with = "rfc3339::option")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// One tenure: one token's holder, from its acquire to its end.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The fencing token.
    pub token: u64,
    /// The holder, as recorded (text others wrote).
    pub holder: String,
    /// When it began.
    #[serde(with = "rfc3339")]
    pub start: DateTime<Utc>,
    /// When it stopped being held: the ending event's time, or the expiry for one that
    /// expired (or expired and was taken over); null while live.
    #[serde(with = "rfc3339::option")]
    pub end: Option<DateTime<Utc>>,
    /// How it ended.
    pub ending: Ending,
    /// For an expiry or a takeover, why the holder lost it: `expired` or `process_gone`.
    pub takeover: Option<Takeover>,
    /// The last expiry recorded (null: open-ended).
    #[serde(with = "rfc3339::option")]
    pub expires_at: Option<DateTime<Utc>>,
    /// The acquire's commit.
    pub commit: String,
    /// The commit that ended it (a release, complete, abandon, revoke, or the takeover's
    /// acquire); null for a live tenure and for one that expired with nothing after it.
    pub end_commit: Option<String>,
    /// The note of the claim, last recorded.
    pub note: Option<String>,
    /// The task of the claim, last recorded.
    pub task: Option<String>,
    /// Who ended it when not its holder (an administrator, whoever cleared it or took over).
    pub by: Option<String>,
    /// A revoke's reason.
    pub reason: Option<String>,
    /// Its renewals and re-acquires, oldest first.
    pub renewals: Vec<Renewal>,
}

impl Tenure {
    /// Returns when it stopped being held, or `now` for a live one.
    pub fn end_or(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.end.unwrap_or(now).max(self.start)
    }

    /// Returns true if it was held at some instant of `[since, until]`.
    pub fn overlaps(&self, since: DateTime<Utc>, until: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        self.start <= until && self.end_or(now) >= since
    }
}

/// Returns the tenures of one ledger, oldest first, from its `chain` (oldest first, as
/// recorded), with `tip_live` telling whether its newest state is live at `now` (by
/// [`rules::is_live`], with what its reader observed).
pub fn tenures(chain: &[Entry], tip_live: bool, now: DateTime<Utc>) -> Vec<Tenure> {
    let (mut out, open) = closed_tenures(chain);
    out.extend(open.map(|t| close(t, tip_live, now)));
    out
}

/// The tenure the acquire `l` (at `commit`) begins, live until a later event ends it.
fn begun(l: &crate::lease::Lease, commit: String) -> Tenure {
    Tenure {
        token: l.token,
        holder: l.holder.clone().unwrap_or_default(),
        start: l.acquired_at.unwrap_or(l.at),
        end: None,
        ending: Ending::Live,
        takeover: None,
        expires_at: l.expires_at,
        commit,
        end_commit: None,
        note: l.note.as_deref().map(str::to_owned),
        task: l.task.as_deref().map(str::to_owned),
        by: None,
        reason: None,
        renewals: Vec::new(),
    }
}

/// Returns the tenures `chain` (oldest first) ended, and the one its newest state still
/// records a holder for, whose end depends on liveness at `now` ([`close`]).
fn closed_tenures(chain: &[Entry]) -> (Vec<Tenure>, Option<Tenure>) {
    let mut out: Vec<Tenure> = Vec::new();
    let mut open: Option<Tenure> = None;
    for entry in chain {
        let l = &entry.lease;
        let commit = entry.commit.to_string();
        match l.event {
            Event::Acquire => {
                if let Some(mut previous) = open.take() {
                    let reason = l.takeover;
                    previous.ending = Ending::TakenOver;
                    previous.takeover = reason;
                    previous.end = Some(match (reason, previous.expires_at) {
                        (Some(Takeover::Expired), Some(expiry)) => expiry.min(l.at),
                        _ => l.at,
                    });
                    previous.end_commit = Some(commit.clone());
                    previous.by = l.holder.clone();
                    out.push(previous);
                }
                open = Some(begun(l, commit));
            }
            Event::Renew | Event::Reacquire => {
                if let Some(t) = open.as_mut() {
                    t.expires_at = l.expires_at;
                    t.note = l.note.as_deref().map(str::to_owned);
                    t.task = l.task.as_deref().map(str::to_owned);
                    t.renewals.push(Renewal {
                        at: l.at,
                        event: l.event,
                        commit,
                        expires_at: l.expires_at,
                    });
                }
            }
            Event::Release | Event::Complete | Event::Abandon | Event::Revoke => {
                let Some(mut t) = open.take() else { continue };
                t.end_commit = Some(commit);
                t.by = l.by.as_deref().map(str::to_owned);
                t.reason = l.reason.as_deref().map(str::to_owned);
                match (l.event, l.takeover) {
                    // Someone else cleared it: legitimate only once it was no longer live.
                    (Event::Release | Event::Complete | Event::Abandon, Some(why)) => {
                        t.ending = Ending::Expired;
                        t.takeover = Some(why);
                        t.end = Some(match (why, t.expires_at) {
                            (Takeover::Expired, Some(expiry)) => expiry.min(l.at),
                            _ => l.at,
                        });
                    }
                    (event, _) => {
                        t.ending = match event {
                            Event::Complete => Ending::Completed,
                            Event::Abandon => Ending::Abandoned,
                            Event::Revoke => Ending::Revoked,
                            _ => Ending::Released,
                        };
                        t.end = Some(l.at);
                    }
                }
                out.push(t);
            }
        }
    }
    (out, open)
}

/// Returns the tenure a ledger's newest state records a holder for, as it stands at `now`:
/// live (reaching `now`), or expired at its expiry (or, its holder process seen gone before
/// then, at `now`).
fn close(mut t: Tenure, tip_live: bool, now: DateTime<Utc>) -> Tenure {
    if !tip_live {
        let expired = t.expires_at.filter(|e| *e <= now);
        t.ending = Ending::Expired;
        t.takeover = Some(if expired.is_some() {
            Takeover::Expired
        } else {
            Takeover::ProcessGone
        });
        t.end = Some(expired.unwrap_or(now));
    }
    t
}

/// Which tenures a timeline shows.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only issues whose id starts with this.
    pub prefix: Option<String>,
    /// Only tenures held at some instant from this one on.
    pub since: Option<DateTime<Utc>>,
    /// Only tenures that began by this instant.
    pub until: Option<DateTime<Utc>>,
    /// Only this holder's tenures.
    pub holder: Option<String>,
}

/// The order of the rows.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// By issue id, naturally (`2` before `10`): [`natural_cmp`].
    #[default]
    Issue,
    /// The most recent activity first (the last start or end of a shown tenure), then by id.
    Recent,
}

/// One issue's row: its tenures in the window.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The issue id.
    pub issue: String,
    /// The latest start or end among its tenures shown (`now` for a live one).
    #[serde(with = "rfc3339")]
    pub last_activity: DateTime<Utc>,
    /// Its tenures, oldest first.
    pub tenures: Vec<Tenure>,
}

/// The summary on top of the page.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Issues with a tenure in the window.
    pub issues: usize,
    /// Tenures live at `now`.
    pub live: usize,
    /// Distinct holders of the tenures in the window.
    pub holders: usize,
    /// Tenures in the window.
    pub tenures: usize,
    /// Tenures that expired and were then taken over by someone else.
    pub expiries_taken_over: usize,
    /// The mean time a tenure in the window was held, in seconds (live ones up to `now`);
    /// null when there is none.
    pub mean_held_seconds: Option<f64>,
    /// How many tenures ended each way, by [`Ending::as_str`].
    pub endings: std::collections::BTreeMap<&'static str, usize>,
}

/// A timeline: every row of the window, its summary, and the instants it was drawn at.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Timeline {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The instant liveness was judged at.
    #[serde(with = "rfc3339")]
    pub now: DateTime<Utc>,
    /// The window's start: `--since`, else the earliest start shown (else `now`).
    #[serde(with = "rfc3339")]
    pub since: DateTime<Utc>,
    /// The window's end: `--until`, else `now` (or the latest end shown, if later).
    #[serde(with = "rfc3339")]
    pub until: DateTime<Utc>,
    /// The order of `issues`.
    pub order: Order,
    /// What the window holds.
    pub summary: Summary,
    /// One row per issue with a tenure in the window.
    pub issues: Vec<Row>,
    /// The ledgers left out because a commit of theirs cannot be read as a lease (a corrupt
    /// record, one over the size every reader accepts); not part of the document.
    #[serde(skip)]
    pub unreadable: Vec<Unreadable>,
}

/// Builds the timeline of the ledgers `refs` (`(issue, tip)`, as [`Store::lease_refs`] or a
/// remote's verified tips give them) at `now`: each ledger read whole from `store` (on
/// several threads when there are many), the tip of one that still records a holder observed
/// by `observe` (a reader's local liveness: [`crate::Ledger::observe`]) and judged by
/// [`rules::is_live`], its tenures cut by `filter`.
pub fn build(
    store: &Store,
    refs: &[(String, gix::ObjectId)],
    filter: &Filter,
    order: Order,
    now: DateTime<Utc>,
    observe: &dyn Fn(Entry) -> Entry,
) -> Result<Timeline> {
    let chosen: Vec<(String, gix::ObjectId)> = refs
        .iter()
        .filter(|(issue, _)| {
            filter
                .prefix
                .as_deref()
                .is_none_or(|p| issue.starts_with(p))
        })
        .cloned()
        .collect();
    let (since, until) = (filter.since, filter.until);
    let keep = |t: &Tenure| filter.keeps(t, now);
    // Each ledger on its own: only its tenures are kept, never its whole chain.
    // One ledger that cannot be read is set aside and named; every other one is drawn.
    let read = store.per_ledger(&chosen, |store, issue, tip| {
        let read = crate::listing::invalid_id(issue, tip)
            .map_or_else(|| store.history(issue, Some(tip)), Err);
        let mut chain = match read {
            Ok(chain) => chain,
            Err(e) => return Unreadable::from_error(e).map(Err),
        };
        chain.reverse();
        let (closed, open) = closed_tenures(&chain);
        let closed: Vec<Tenure> = closed.into_iter().filter(|t| keep(t)).collect();
        let open = open.map(|t| (t, chain.pop()));
        Ok(Ok((closed, open)))
    })?;
    let mut unreadable = Vec::new();
    let rows = chosen
        .iter()
        .zip(read)
        .filter_map(|(row, read)| read.map_err(|u| unreadable.push(u)).ok().map(|r| (row, r)))
        .map(|((issue, _), (mut tenures, open))| {
            if let Some((t, Some(tip))) = open {
                let live = rules::is_live(observe(tip).current(), now);
                let t = close(t, live, now);
                if keep(&t) {
                    tenures.push(t);
                }
            }
            (!tenures.is_empty()).then(|| Row {
                issue: issue.clone(),
                last_activity: tenures.iter().map(|t| t.end_or(now)).max().unwrap_or(now),
                tenures,
            })
        });
    let mut issues: Vec<Row> = rows.into_iter().flatten().collect();
    sort_rows(&mut issues, order);
    let all = || issues.iter().flat_map(|r| &r.tenures);
    let since = since
        .or_else(|| all().map(|t| t.start).min())
        .unwrap_or(now);
    let until = until
        .unwrap_or_else(|| all().map(|t| t.end_or(now)).max().unwrap_or(now).max(now))
        .max(since);
    let summary = summarize(&issues, now);
    Ok(Timeline {
        schema_version: SCHEMA_VERSION,
        now,
        since,
        until,
        order,
        summary,
        issues,
        unreadable,
    })
}

/// Returns the summary of `rows` at `now`.
pub fn summarize(rows: &[Row], now: DateTime<Utc>) -> Summary {
    let mut summary = Summary {
        issues: rows.len(),
        ..Summary::default()
    };
    let mut holders: BTreeSet<&str> = BTreeSet::new();
    let mut held = 0f64;
    for t in rows.iter().flat_map(|r| &r.tenures) {
        summary.tenures += 1;
        holders.insert(&t.holder);
        *summary.endings.entry(t.ending.as_str()).or_default() += 1;
        match t.ending {
            Ending::Live => summary.live += 1,
            Ending::TakenOver if t.takeover == Some(Takeover::Expired) => {
                summary.expiries_taken_over += 1
            }
            _ => {}
        }
        held += (t.end_or(now) - t.start).num_milliseconds() as f64 / 1000.0;
    }
    summary.holders = holders.len();
    summary.mean_held_seconds = (summary.tenures > 0).then(|| held / summary.tenures as f64);
    summary
}

/// Sorts `rows` as `order` says: by issue (in natural order: 2 before 10), or the most recent
/// activity first.
fn sort_rows(rows: &mut [Row], order: Order) {
    match order {
        Order::Issue => rows.sort_by(|a, b| natural_cmp(&a.issue, &b.issue)),
        Order::Recent => rows.sort_by(|a, b| {
            b.last_activity
                .cmp(&a.last_activity)
                .then_with(|| natural_cmp(&a.issue, &b.issue))
        }),
    }
}

impl Filter {
    /// Whether the timeline keeps tenure `t`: of the holder asked for, if any, and overlapping
    /// the span asked for, at `now`.
    fn keeps(&self, t: &Tenure, now: DateTime<Utc>) -> bool {
        self.holder.as_deref().is_none_or(|h| t.holder == h)
            && t.overlaps(
                self.since.unwrap_or(DateTime::<Utc>::MIN_UTC),
                self.until.unwrap_or(DateTime::<Utc>::MAX_UTC),
                now,
            )
    }
}
