//! What users see. Here, human output: one clear line per outcome, aligned tables, absolute
//! and relative times, and the answer of an operation in either form ([`emit_reports`]);
//! [`color`] paints it as git would; [`json`] holds the versioned JSON shapes of `--json`.
//!
//! Every string others may have written (issue ids, holders, notes, tasks, reasons) goes
//! through [`printable`] before it is shown, so that no control character or invisible
//! Unicode reaches the terminal; JSON output keeps the exact strings.

pub(crate) mod color;
pub(crate) mod diagnostics;
pub(crate) mod json;

use std::borrow::Cow;
use std::io::Write;

use crate::cli::{exit, Context, Failure};
use chrono::{DateTime, Utc};
use git_lease::remote::Diverged;
use git_lease::time::push_short_duration;
use git_lease::{Entry, Outcome, Report};
use json::{json_line, LeaseView, ReportView, State};

pub use git_lease::text::{printable, push_printable};

/// `holder` for people: printable, `?` if there is none.
fn holder(name: Option<&str>) -> Cow<'_, str> {
    printable(name.unwrap_or("?"))
}

/// Returns `at` for people, relative to `now`: `14:05 UTC, in 14m` on the same day,
/// `2026-12-01 09:00 UTC, in 18h 55m` otherwise.
pub fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let mut text = String::with_capacity(32);
    push_when(&mut text, at, now);
    text
}

/// Appends [`when`]`(at, now)` to `out`.
pub fn push_when(out: &mut String, at: DateTime<Utc>, now: DateTime<Utc>) {
    push_clock(out, at, at.naive_utc().date() != now.naive_utc().date());
    out.push_str(" UTC, ");
    push_relative(out, at, now);
}

/// Appends `14:05`, or `2026-12-01 14:05` with the date: what `%H:%M` and `%Y-%m-%d %H:%M`
/// print, without a format string parsed per call (`list` prints tens of thousands).
fn push_clock(out: &mut String, at: DateTime<Utc>, with_date: bool) {
    use chrono::{Datelike, Timelike};
    fn two(out: &mut String, n: u32) {
        out.push(char::from(b'0' + (n / 10 % 10) as u8));
        out.push(char::from(b'0' + (n % 10) as u8));
    }
    let at = at.naive_utc();
    if with_date {
        let year = at.year();
        if !(0..=9999).contains(&year) {
            out.push_str(&at.format("%Y-%m-%d %H:%M").to_string());
            return;
        }
        let year = year as u32;
        two(out, year / 100);
        two(out, year % 100);
        out.push('-');
        two(out, at.month());
        out.push('-');
        two(out, at.day());
        out.push(' ');
    }
    two(out, at.hour());
    out.push(':');
    two(out, at.minute());
}

/// Appends `at` relative to `now`: `in 14m`, `now`, `3h 2m ago`.
fn push_relative(out: &mut String, at: DateTime<Utc>, now: DateTime<Utc>) {
    let delta = at - now;
    match delta.num_seconds() {
        s if s > 0 => {
            out.push_str("in ");
            push_short_duration(out, delta);
        }
        0 => out.push_str("now"),
        _ => {
            push_short_duration(out, -delta);
            out.push_str(" ago");
        }
    }
}

fn until(entry: &Entry, now: DateTime<Utc>) -> String {
    match entry.lease.expires_at {
        Some(t) => format!("until {}", when(t, now)),
        None => "with no expiry".to_owned(),
    }
}

/// Returns the one line that reports an operation.
pub fn report_line(report: &Report, now: DateTime<Utc>) -> String {
    let line = plain_report_line(report, now);
    let tone = if report.outcome.is_refusal() {
        color::Tone::Bad
    } else {
        color::Tone::Good
    };
    color::paint_head(&line, tone)
}

/// [`report_line`] without colour.
fn plain_report_line(report: &Report, now: DateTime<Utc>) -> String {
    let issue = printable(report.issue.as_str());
    let entry = report.entry.as_ref();
    match (report.outcome, entry) {
        (Outcome::Acquired, Some(e)) => {
            let again = if e.lease.event == git_lease::Event::Acquire {
                ""
            } else {
                ", already held: expiry refreshed"
            };
            format!(
                "acquired {issue} for {} (token {}{again}) {}",
                holder(e.lease.holder.as_deref()),
                e.lease.token,
                until(e, now)
            )
        }
        (Outcome::Renewed, Some(e)) => format!(
            "renewed {issue} for {} (token {}) {}",
            holder(e.lease.holder.as_deref()),
            e.lease.token,
            until(e, now)
        ),
        (Outcome::Held | Outcome::NotHolder, Some(e)) if git_lease::is_live(e.current(), now) => {
            let what = if report.outcome == Outcome::Held {
                "held"
            } else {
                "not holder"
            };
            format!(
                "{what}: {issue} is held by {} (token {}) {}",
                holder(e.lease.holder.as_deref()),
                e.lease.token,
                until(e, now)
            )
        }
        (Outcome::NotHolder, Some(e)) => format!(
            "not holder: nobody holds {issue} now (last token {})",
            e.lease.token
        ),
        (Outcome::NotHolder, None) => format!("not holder: {issue} was never leased"),
        (Outcome::Skipped, _) => format!(
            "skipped {issue}: not taken, because another issue of this all-or-none claim is held"
        ),
        (Outcome::WrongSecret, _) => format!(
            "wrong secret: {issue} was taken with a session; give its secret with --secret or GIT_LEASE_SECRET"
        ),
        (Outcome::Released | Outcome::Revoked, Some(e)) => {
            let what = match e.lease.event {
                git_lease::Event::Complete => "completed",
                git_lease::Event::Abandon => "abandoned",
                git_lease::Event::Revoke => "revoked",
                _ => "released",
            };
            let whose = e
                .lease
                .previous_holder
                .as_deref()
                .map(|h| format!(" held by {}", printable(h)))
                .unwrap_or_default();
            format!("{what} {issue}{whose} (token {} kept)", e.lease.token)
        }
        (Outcome::NotHeld, Some(e)) => format!(
            "not held: nobody holds {issue} (last token {}); nothing to release",
            e.lease.token
        ),
        (Outcome::NotHeld, None) => {
            format!("not held: {issue} was never leased; nothing to release")
        }
        (outcome, _) => format!("{}: {issue}", outcome.as_str()),
    }
}

/// Returns the multi-line `show` output.
pub fn show(view: &LeaseView, entry: Option<&Entry>, now: DateTime<Utc>) -> String {
    use color::{paint, Tone};
    let state = match view.state {
        State::Expired if view.process_gone => paint("free (holder's process gone)", Tone::Notice),
        State::Expired => paint("expired", Tone::Notice),
        State::Held => paint("held", Tone::Good),
        other => other.as_str().to_owned(),
    };
    let mut rows: Vec<(&str, String)> = vec![("issue", printable(&view.issue).into_owned())];
    rows.push(("state", state));
    if let Some(e) = entry {
        let l = &e.lease;
        let stamp = |t: DateTime<Utc>| format!("{} ({})", t.format(FULL_TIME), when(t, now));
        match (view.state, &view.last_holder) {
            (State::Held, _) => rows.push((
                "holder",
                printable(l.holder.as_deref().unwrap_or("")).into_owned(),
            )),
            (_, Some(h)) => rows.push(("last holder", printable(h).into_owned())),
            _ => {}
        }
        rows.push(("token", l.token.to_string()));
        if let Some(t) = l.acquired_at {
            rows.push(("acquired", stamp(t)));
        }
        match l.expires_at {
            Some(t) => rows.push(("expires", stamp(t))),
            None if l.holder.is_some() => rows.push(("expires", "never".into())),
            None => {}
        }
        if let Some(n) = &l.note {
            rows.push(("note", printable(n).into_owned()));
        }
        if let Some(t) = &l.task {
            rows.push(("task", printable(t).into_owned()));
        }
        if let (Some(p), Some(takeover)) = (&l.previous_holder, l.takeover) {
            let why = match takeover {
                git_lease::lease::Takeover::Expired => "expired",
                git_lease::lease::Takeover::ProcessGone => "its holder's process was gone",
            };
            rows.push(("took over", format!("from {} ({why})", printable(p))));
        }
        if let Some(p) = &l.process {
            let gone = if view.process_gone { ", gone" } else { "" };
            rows.push(("process", format!("pid {}{gone}", p.pid)));
        }
        if l.session.is_some() {
            rows.push((
                "session",
                "yes (its secret is needed to renew or free it)".into(),
            ));
        }
        rows.push((
            "last event",
            format!("{} at {}", l.event, l.at.format(FULL_TIME)),
        ));
        rows.push(("commit", e.commit.to_string()));
    }
    let width = rows.iter().map(|(label, _)| label.len()).max().unwrap_or(0) + 1;
    rows.iter()
        .map(|(label, value)| format!("{:<width$} {value}\n", format!("{label}:")))
        .collect()
}

/// How full instants are shown: in UTC, labelled, as everywhere in human output.
pub const FULL_TIME: &str = "%Y-%m-%d %H:%M:%S UTC";

/// An aligned table, given its cells twice: once to measure each column's widest cell, then
/// again ([`Table::write_to`]) to write each line as it is made. Columns are padded to their
/// widest cell (in characters) plus two spaces, the last column not padded, no trailing
/// spaces. Nothing but the widths is kept between the two, so tens of thousands of rows cost
/// neither an allocation per cell nor a buffer of the whole table.
pub struct Table<'o> {
    header: Vec<String>,
    widths: Vec<usize>,
    /// With [`Table::fit_last`]: the line width the last column is cut to fit, and the
    /// fewest characters it keeps.
    fit: Option<(usize, usize)>,
    /// The cells given so far in this pass, the header's included.
    cells: usize,
    /// The cell being given.
    cell: String,
    /// In the second pass: the line being made, where it goes, what the last column may
    /// show, and the first error writing it.
    line: String,
    out: Option<&'o mut dyn std::io::Write>,
    last: Option<usize>,
    error: Option<std::io::Error>,
}

impl<'o> Table<'o> {
    /// Returns a table with this header row; every row has as many cells.
    pub fn new(header: &[&str]) -> Table<'o> {
        let mut table = Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            widths: vec![0; header.len()],
            fit: None,
            cells: 0,
            cell: String::new(),
            line: String::new(),
            out: None,
            last: None,
            error: None,
        };
        table.header_row();
        table
    }

    fn header_row(&mut self) {
        let header = std::mem::take(&mut self.header);
        for h in &header {
            self.cell(h);
        }
        self.header = header;
    }

    /// Gives a cell (rows fill left to right, top to bottom), shown [`printable`].
    pub fn cell(&mut self, text: &str) {
        self.cell_with(|out| push_printable(out, text));
    }

    /// Gives a cell written by `write`, as written: for text this program made (numbers,
    /// times).
    pub fn cell_with(&mut self, write: impl FnOnce(&mut String)) {
        let mut cell = std::mem::take(&mut self.cell);
        cell.clear();
        write(&mut cell);
        let columns = self.widths.len().max(1);
        let column = self.cells % columns;
        self.cells += 1;
        let shown = shown_width(&cell);
        if self.out.is_none() {
            if let Some(w) = self.widths.get_mut(column) {
                *w = (*w).max(shown);
            }
        } else {
            match self.last {
                Some(room) if column + 1 == columns && cell.chars().nth(room).is_some() => {
                    self.line.extend(cell.chars().take(room.saturating_sub(1)));
                    self.line.push('…');
                }
                _ => self.line.push_str(&cell),
            }
            if column + 1 < columns {
                let pad = self.widths[column].saturating_sub(shown) + 2;
                self.line.extend(std::iter::repeat_n(' ', pad));
            } else {
                self.end_line();
            }
        }
        self.cell = cell;
    }

    fn end_line(&mut self) {
        let kept = self.line.trim_end().len();
        self.line.truncate(kept);
        self.line.push('\n');
        if let (Some(out), None) = (self.out.as_mut(), &self.error) {
            if let Err(e) = out.write_all(self.line.as_bytes()) {
                self.error = Some(e);
            }
        }
        self.line.clear();
    }

    /// Cuts the last column's cells (free text: notes) where a line would pass `width`
    /// characters, keeping at least `min` of each and marking a cut with `…`. The other
    /// columns are never cut.
    pub fn fit_last(&mut self, width: usize, min: usize) {
        self.fit = Some((width, min));
    }

    /// Returns the number of rows below the header given in the first pass.
    pub fn rows(&self) -> usize {
        (self.cells / self.widths.len().max(1)).saturating_sub(1)
    }

    /// Writes the table: its header, then the rows `give` gives again, exactly as it gave
    /// them to be measured.
    pub fn write_to(
        mut self,
        out: &'o mut dyn std::io::Write,
        give: impl FnOnce(&mut Table<'o>),
    ) -> std::io::Result<()> {
        let columns = self.widths.len().max(1);
        // What the last column may show: the line's width less the other columns and their
        // gaps.
        self.last = self.fit.map(|(width, min)| {
            let before: usize = self.widths[..columns - 1].iter().map(|w| w + 2).sum();
            width.saturating_sub(before).max(min)
        });
        self.out = Some(out);
        self.cells = 0;
        self.header_row();
        give(&mut self);
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// How many characters `cell` shows.
fn shown_width(cell: &str) -> usize {
    if cell.is_ascii() {
        cell.len()
    } else {
        cell.chars().count()
    }
}

/// Appends the short form of a time for tables: `14:05 UTC` today, `2026-12-01 09:00 UTC`
/// otherwise, and the caller's `none` text for no time.
pub fn push_short_time(
    out: &mut String,
    at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    none: &str,
) {
    match at {
        None => out.push_str(none),
        Some(t) => {
            push_clock(out, t, t.naive_utc().date() != now.naive_utc().date());
            out.push_str(" UTC");
        }
    }
}

/// Returns the lines that show a new session's secret, the one time it is shown.
pub fn session_secret(secret: &str) -> String {
    format!(
        "session secret: {secret}\n  (shown once; give it with --secret or GIT_LEASE_SECRET to renew or release)"
    )
}

/// Answers the operations of one command: a line each (or one JSON object, or an array of
/// them), the session secret once, and the exit code of what they came to.
pub(crate) fn emit_reports(
    ctx: &Context,
    reports: &[Report],
    as_array: bool,
    secret: Option<&str>,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    if ctx.json {
        #[derive(serde::Serialize)]
        struct WithSecret<'a> {
            #[serde(flatten)]
            report: ReportView,
            #[serde(skip_serializing_if = "Option::is_none")]
            secret: Option<&'a str>,
        }
        let views: Vec<WithSecret> = reports
            .iter()
            .map(|r| WithSecret {
                report: ReportView::new(r, ctx.now),
                secret,
            })
            .collect();
        if as_array {
            json_line(out, &views)?;
        } else {
            json_line(out, &views[0])?;
        }
    } else {
        for r in reports {
            writeln!(out, "{}", report_line(r, ctx.now))?;
        }
        if let Some(secret) = secret {
            writeln!(out, "{}", session_secret(secret))?;
        }
    }
    let refused = reports.iter().any(|r| r.outcome.is_refusal());
    Ok(if refused {
        exit::REFUSED
    } else {
        reports
            .first()
            .map_or(exit::OK, |r| exit::for_outcome(r.outcome))
    })
}

/// Says, on stderr, which remote ledgers were left out of an answer because the remote rewound
/// or rewrote them.
pub(crate) fn report_diverged(
    ctx: &Context,
    diverged: &[Diverged],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    if diverged.is_empty() {
        return Ok(());
    }
    out.flush()?;
    for d in diverged {
        let remote = ctx.remote.as_deref().map(git_lease::redact::url);
        let e = d
            .clone()
            .into_error(remote.as_deref().unwrap_or("the remote"));
        diagnostics::line("error", &e.to_string());
    }
    Ok(())
}

/// Says, on stderr, which ledgers were left out of an answer because their tip cannot be read
/// as a lease (every other one is in it).
pub(crate) fn report_unreadable(
    unreadable: &[git_lease::listing::Unreadable],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    out.flush()?;
    for u in unreadable {
        let e = u.clone().into_error();
        diagnostics::line(
            "error",
            &format!("{e}; it is left out, every other ledger is listed"),
        );
    }
    Ok(())
}

/// Who a ledger event names, escaped ([`printable`]) in one place for the lines of `log` and
/// `watch`: the texts a ledger's writers chose.
pub(crate) struct Parties<'a> {
    /// The holder after the event.
    pub holder: Option<Cow<'a, str>>,
    /// The holder before it, when the event changed or cleared the holder.
    pub previous: Option<Cow<'a, str>>,
    /// Who acted, when not the holder.
    pub by: Option<Cow<'a, str>>,
    /// Why, when recorded.
    pub reason: Option<Cow<'a, str>>,
}

impl<'a> Parties<'a> {
    /// Returns the parties `lease` names, escaped.
    pub fn of(lease: &'a git_lease::Lease) -> Parties<'a> {
        let shown = |text: Option<&'a str>| text.map(printable);
        Parties {
            holder: shown(lease.holder.as_deref()),
            previous: shown(lease.previous_holder.as_deref()),
            by: shown(lease.by.as_deref()),
            reason: shown(lease.reason.as_deref()),
        }
    }
}

/// Returns the human line of one ledger commit, as `log` shows it.
pub(crate) fn log_line(e: &Entry) -> String {
    let l = &e.lease;
    let short = e.commit.to_hex_with_len(10).to_string();
    let mut text = format!(
        "{short} {} {:<9} token {}",
        l.at.format(FULL_TIME),
        l.event.as_str(),
        l.token
    );
    let Parties {
        holder,
        previous,
        by,
        reason,
    } = Parties::of(l);
    match (holder, previous) {
        (Some(h), Some(p)) => {
            let why = match l.takeover {
                Some(git_lease::lease::Takeover::ProcessGone) => ", whose process was gone",
                _ => ", expired",
            };
            text += &format!("  {h} (took over from {p}{why})")
        }
        (Some(h), _) => text += &format!("  {h}"),
        (None, Some(p)) => text += &format!("  was {p}"),
        (None, None) => {}
    }
    if let Some(by) = by {
        text += &format!(" by {by}");
    }
    if let Some(t) = l.expires_at {
        text += &format!("  until {}", t.format(FULL_TIME));
    } else if l.holder.is_some() {
        text += "  no expiry";
    }
    if let Some(r) = reason {
        text += &format!("  reason: {r}");
    }
    if let Some(context) = claim_context(l) {
        text += &format!("\n{:width$}{context}", "", width = short.len() + 1);
    }
    text
}

/// Returns what a claim recorded beside its holder, for people: `task: T  note: N`, or
/// `None` when it recorded neither.
pub(crate) fn claim_context(lease: &git_lease::Lease) -> Option<String> {
    let task = lease
        .task
        .as_deref()
        .map(|t| format!("task: {}", printable(t)));
    let note = lease
        .note
        .as_deref()
        .map(|n| format!("note: {}", printable(n)));
    match (task, note) {
        (Some(t), Some(n)) => Some(format!("{t}  {n}")),
        (one, other) => one.or(other),
    }
}
