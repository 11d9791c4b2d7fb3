//! Human output: one clear line per outcome, aligned tables, absolute and relative times.

use chrono::{DateTime, Utc};
use git_lease::time::short_duration;
use git_lease::view::{LeaseView, State};
use git_lease::{Entry, Outcome, Report};

/// Returns `at` for people, relative to `now`: `14:05 UTC, in 14m` on the same day,
/// `2026-12-01 09:00 UTC, in 18h 55m` otherwise.
pub fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let absolute = if at.date_naive() == now.date_naive() {
        at.format("%H:%M UTC").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M UTC").to_string()
    };
    format!("{absolute}, {}", relative(at, now))
}

/// Returns `at` relative to `now`: `in 14m`, `now`, `3h 2m ago`.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let delta = at - now;
    match delta.num_seconds() {
        s if s > 0 => format!("in {}", short_duration(delta)),
        0 => "now".to_owned(),
        _ => format!("{} ago", short_duration(-delta)),
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
    let issue = &report.issue;
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
                e.lease.holder.as_deref().unwrap_or("?"),
                e.lease.token,
                until(e, now)
            )
        }
        (Outcome::Renewed, Some(e)) => format!(
            "renewed {issue} for {} (token {}) {}",
            e.lease.holder.as_deref().unwrap_or("?"),
            e.lease.token,
            until(e, now)
        ),
        (Outcome::Held | Outcome::NotHolder, Some(e)) if git_lease::is_live(&e.lease, now) => {
            let what = if report.outcome == Outcome::Held {
                "held"
            } else {
                "not holder"
            };
            format!(
                "{what}: {issue} is held by {} (token {}) {}",
                e.lease.holder.as_deref().unwrap_or("?"),
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
        (Outcome::Released, Some(e)) => {
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
                .map(|h| format!(" held by {h}"))
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
    let mut out = format!(
        "issue:     {}\nstate:     {}\n",
        view.issue,
        view.state.as_str()
    );
    let Some(e) = entry else {
        return out;
    };
    let l = &e.lease;
    match view.state {
        State::Held => out += &format!("holder:    {}\n", l.holder.as_deref().unwrap_or("")),
        _ => {
            if let Some(h) = &view.last_holder {
                out += &format!("last holder: {h}\n");
            }
        }
    }
    out += &format!("token:     {}\n", l.token);
    if let Some(t) = l.acquired_at {
        out += &format!(
            "acquired:  {} ({})\n",
            t.format("%Y-%m-%d %H:%M:%S UTC"),
            when(t, now)
        );
    }
    match l.expires_at {
        Some(t) => {
            out += &format!(
                "expires:   {} ({})\n",
                t.format("%Y-%m-%d %H:%M:%S UTC"),
                when(t, now)
            )
        }
        None if l.holder.is_some() => out += "expires:   never\n",
        None => {}
    }
    if let Some(n) = &l.note {
        out += &format!("note:      {n}\n");
    }
    if let Some(t) = &l.task {
        out += &format!("task:      {t}\n");
    }
    out += &format!(
        "last event: {} at {}\ncommit:    {}\n",
        l.event,
        l.at.format("%Y-%m-%d %H:%M:%S UTC"),
        e.commit
    );
    out
}

/// Returns rows as an aligned table with a header; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let cells: Vec<&str> = cells.collect();
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                text += cell;
            } else {
                text += &format!("{cell:<width$}  ", width = widths[i]);
            }
        }
        out += text.trim_end();
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// Returns the short form of a time for tables: `14:05` today, `2026-12-01 09:00` otherwise.
pub fn short_time(at: Option<DateTime<Utc>>, now: DateTime<Utc>, none: &str) -> String {
    match at {
        None => none.to_owned(),
        Some(t) if t.date_naive() == now.date_naive() => t.format("%H:%M").to_string(),
        Some(t) => t.format("%Y-%m-%d %H:%M").to_string(),
    }
}
