//! `git lease list`: the leases as they stand now, filtered and sorted.

use std::borrow::Cow;
use std::io::Write;

use git_lease::issue::natural_cmp;
use git_lease::listing::Entries;
use git_lease::Entry;

use crate::cli::output::json::{json_array_line, LeaseView, State};
use crate::cli::output::{self, report_diverged};
use crate::cli::{exit, Context, Failure};

// The arguments of `list`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Also list free and expired leases with their last token
    #[arg(long)]
    pub(crate) all: bool,
    /// Only leases whose live (or, with --all, last) holder is this
    #[arg(long, conflicts_with = "mine")]
    pub(crate) holder: Option<String>,
    /// Only your own leases (the holder of --holder's default: GIT_LEASE_HOLDER, then
    /// lease.holder, then user.email)
    #[arg(long)]
    pub(crate) mine: bool,
    /// Only leases in this state (implies --all for expired and free)
    #[arg(long, value_parser = ["held", "expired", "free"])]
    pub(crate) state: Option<String>,
    /// Only issues starting with this prefix
    pub(crate) prefix: Option<String>,
}

/// Runs `git lease list`.
pub(crate) fn run(ctx: &Context, args: Args, out: &mut dyn Write) -> Result<u8, Failure> {
    let Args {
        all,
        holder,
        mine,
        state,
        prefix,
    } = args;
    let target = ctx.backend()?;
    let filters = Filters {
        // `--state expired` and `--state free` list more than the held ones.
        all: all || state.as_deref().is_some_and(|s| s != "held"),
        holder: ctx.holder_filter(mine, holder)?,
        state,
        prefix,
    };
    let mut shown = Err(Failure::Io(std::io::Error::other(
        "the listing was not shown",
    )));
    // Shown while the list cache is written beside it, when this listing rewrites it.
    let listing = target.list_then(&mut |entries, diverged| {
        shown = (|| {
            // Archived ledgers are free: only a listing of more than the held ones reads them.
            let archived = if filters.all {
                target.archived()?
            } else {
                Vec::new()
            };
            let code = list(ctx, entries, archived, &filters, out)?;
            report_diverged(ctx, diverged, out)?;
            Ok(if diverged.is_empty() {
                code
            } else {
                exit::FAILURE
            })
        })();
    })?;
    // The process exits right after printing: letting the OS reclaim 100k entries at exit is
    // cheaper than freeing them one by one.
    output::report_unreadable(&listing.1, out)?;
    let unreadable = !listing.1.is_empty();
    let _ = std::mem::ManuallyDrop::new(listing);
    match shown {
        Ok(_) if unreadable => Ok(exit::FAILURE),
        shown => shown,
    }
}

/// Which leases `list` shows.
struct Filters {
    /// More than the held ones: `--all`, or a `--state` other than `held`.
    all: bool,
    holder: Option<String>,
    state: Option<String>,
    prefix: Option<String>,
}

/// Prints the listing of `entries` and of `archived` (those ledgers only the archive holds) at
/// `now`, filtered and sorted as `list` shows them: a table (with a state column for `--all`),
/// or one JSON array.
fn list(
    ctx: &Context,
    entries: &Entries,
    archived: Vec<Entry>,
    filters: &Filters,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let now = ctx.now;
    // A remote's ledger this clone saw before its fold is listed already. (Never freed, as
    // the entries are not: the process exits right after printing.)
    let archived = std::mem::ManuallyDrop::new(if archived.is_empty() {
        archived
    } else {
        let listed: std::collections::HashSet<&str> =
            (0..entries.len()).map(|i| entries.issue(i)).collect();
        archived
            .into_iter()
            .filter(|e| !listed.contains(e.lease.issue.as_str()))
            .collect()
    });
    let listing = Listing {
        entries,
        archived: &archived,
    };
    let shown = shown_rows(&listing, filters, now);
    if ctx.json {
        let views = shown.rows.iter().map(|row| {
            let e = listing.entry(row.at);
            LeaseView::new(&e.lease.issue, Some(&e), now)
        });
        json_array_line(out, views)?;
        return Ok(exit::OK);
    }
    write_table(&listing, &shown, filters.all, now, out)
}

/// The ledgers `list` lists: the entries, then the archived ones, by one index.
struct Listing<'a> {
    entries: &'a Entries,
    archived: &'a [Entry],
}

impl Listing<'_> {
    fn len(&self) -> usize {
        self.entries.len() + self.archived.len()
    }

    fn issue(&self, at: usize) -> &str {
        match at.checked_sub(self.entries.len()) {
            None => self.entries.issue(at),
            Some(archived) => &self.archived[archived].lease.issue,
        }
    }

    fn entry(&self, at: usize) -> Cow<'_, Entry> {
        match at.checked_sub(self.entries.len()) {
            None => self.entries.get(at),
            Some(archived) => Cow::Borrowed(&self.archived[archived]),
        }
    }
}

/// One row of `list`: a ledger's state, the start of its tenure when it is held (what live
/// leases are sorted by), and where it is in the [`Listing`].
#[derive(Clone, Copy)]
struct Row {
    state: State,
    held_since: Option<chrono::DateTime<chrono::Utc>>,
    at: usize,
}

/// The rows `list` shows, and whether any of them has a task, or a note.
struct Shown {
    rows: Vec<Row>,
    tasks: bool,
    notes: bool,
}

/// The rows of `list`: the ledgers of `listing` kept by `filters` at `now`, each with its
/// state; live leases first, oldest tenure first, then by issue; the rest by issue (in
/// natural order: 2 before 10).
fn shown_rows(
    listing: &Listing<'_>,
    filters: &Filters,
    now: chrono::DateTime<chrono::Utc>,
) -> Shown {
    let Filters {
        all,
        holder,
        state,
        prefix,
    } = filters;
    let mut shown = Shown {
        rows: Vec::new(),
        tasks: false,
        notes: false,
    };
    for at in 0..listing.len() {
        if prefix
            .as_deref()
            .is_some_and(|p| !listing.issue(at).starts_with(p))
        {
            continue;
        }
        let e = listing.entry(at);
        let s = State::of(Some(&e), now);
        let kept = (*all || s == State::Held)
            && state.as_deref().is_none_or(|want| s.as_str() == want)
            && holder.as_deref().is_none_or(|h| {
                let shown = if s == State::Held {
                    e.lease.holder.as_deref()
                } else {
                    e.lease
                        .holder
                        .as_deref()
                        .or(e.lease.previous_holder.as_deref())
                };
                shown == Some(h)
            });
        if kept {
            shown.tasks |= e.lease.task.is_some();
            shown.notes |= e.lease.note.is_some();
            shown.rows.push(Row {
                state: s,
                held_since: if s == State::Held {
                    e.lease.acquired_at
                } else {
                    None
                },
                at,
            });
        }
    }
    sort_halves(&mut shown.rows, |a, b| {
        (a.state != State::Held, a.held_since)
            .cmp(&(b.state != State::Held, b.held_since))
            .then_with(|| natural_cmp(listing.issue(a.at), listing.issue(b.at)))
    });
    shown
}

/// Writes the rows of `shown` as `list`'s table (with a state column for `all`) at `now`.
fn write_table(
    listing: &Listing<'_>,
    shown: &Shown,
    all: bool,
    now: chrono::DateTime<chrono::Utc>,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let mut header = vec!["ISSUE"];
    if all {
        header.push("STATE");
    }
    header.extend(["HOLDER", "TOKEN", "ACQUIRED", "EXPIRES"]);
    // A claim's task and note, in columns of their own where any listed claim has one; the
    // note last, cut to fit 80 columns (`show` and --json give it whole).
    let Shown { rows, tasks, notes } = shown;
    if *tasks {
        header.push("TASK");
    }
    if *notes {
        header.push("NOTE");
    }
    // The cells are given twice, measured then written: no buffer of the whole table.
    let give = |table: &mut output::Table<'_>| {
        for row in rows {
            let e = listing.entry(row.at);
            let l = &e.lease;
            table.cell(&l.issue);
            if all {
                table.cell(row.state.as_str());
            }
            table.cell(
                l.holder
                    .as_deref()
                    .or(l.previous_holder.as_deref())
                    .unwrap_or("-"),
            );
            table.cell_with(|b| {
                let _ = std::fmt::Write::write_fmt(b, format_args!("{}", l.token));
            });
            table.cell_with(|b| output::push_short_time(b, l.acquired_at, now, "-"));
            table.cell_with(|b| match (l.holder.is_some(), l.expires_at) {
                (false, _) => b.push('-'),
                (true, None) => b.push_str("never"),
                (true, Some(t)) => output::push_when(b, t, now),
            });
            if *tasks {
                table.cell(l.task.as_deref().unwrap_or("-"));
            }
            if *notes {
                table.cell(l.note.as_deref().unwrap_or("-"));
            }
        }
    };
    let mut table = output::Table::new(&header);
    if *notes {
        table.fit_last(80, 10);
    }
    give(&mut table);
    if table.rows() == 0 {
        if all {
            writeln!(out, "no leases")?;
        } else {
            writeln!(out, "no live leases")?;
        }
        return Ok(exit::OK);
    }
    table.write_to(out, give)?;
    Ok(exit::OK)
}

/// Sorts `rows` by `order` as a stable sort does, each half on its own thread when there are
/// many (a cold listing of 100k leases spent 50 ms sorting, alone), then merged.
fn sort_halves<T: Copy + Send>(
    rows: &mut [T],
    order: impl Fn(&T, &T) -> std::cmp::Ordering + Sync,
) {
    /// Fewer rows than this are sorted on this thread alone.
    const HALVES_MIN: usize = 8192;
    if rows.len() < HALVES_MIN {
        rows.sort_by(&order);
        return;
    }
    let (first, second) = rows.split_at_mut(rows.len() / 2);
    let order = &order;
    std::thread::scope(|scope| {
        scope.spawn(|| second.sort_by(order));
        first.sort_by(order);
    });
    let (first, second) = rows.split_at(rows.len() / 2);
    let mut merged = Vec::with_capacity(rows.len());
    let (mut i, mut j) = (0, 0);
    while i < first.len() && j < second.len() {
        // Ties go to the first half, which held them first: stable.
        if order(&second[j], &first[i]).is_lt() {
            merged.push(second[j]);
            j += 1;
        } else {
            merged.push(first[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&first[i..]);
    merged.extend_from_slice(&second[j..]);
    rows.copy_from_slice(&merged);
}

#[cfg(test)]
mod tests {
    use super::sort_halves;

    proptest::proptest! {
        /// Sorted in halves and merged, rows come out as one stable sort puts them.
        #[test]
        fn sorting_in_halves_is_one_stable_sort(
            rows in proptest::collection::vec((0u8..4, 0u16..500), 0..20_000),
        ) {
            let by_first = |a: &(u8, u16), b: &(u8, u16)| a.0.cmp(&b.0);
            let mut halves = rows.clone();
            sort_halves(&mut halves, by_first);
            let mut whole = rows;
            whole.sort_by(by_first);
            proptest::prop_assert_eq!(halves, whole);
        }
    }
}
