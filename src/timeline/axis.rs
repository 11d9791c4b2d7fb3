//! The time axis of a timeline: ticks at round instants (UTC), from minutes to years, at most
//! [`MAX_TICKS`] across the window, and where an instant falls on it.

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Timelike, Utc};

/// The most ticks an axis shows.
pub const MAX_TICKS: i64 = 10;

/// The steps below a day, in seconds: ticks at multiples of them since the epoch (UTC).
const STEPS: [i64; 11] = [
    60,
    5 * 60,
    15 * 60,
    30 * 60,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86_400,
    2 * 86_400,
    7 * 86_400,
];

/// Month steps beyond a week: ticks on the first of a month.
const MONTH_STEPS: [u32; 5] = [1, 3, 6, 12, 60];

/// One tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    /// Its instant.
    pub at: DateTime<Utc>,
    /// What it reads.
    pub label: String,
}

/// Returns the ticks of `[since, until]`: the finest step that gives at most [`MAX_TICKS`],
/// each labelled as precisely as the step needs (the date too where it changes).
pub fn ticks(since: DateTime<Utc>, until: DateTime<Utc>) -> Vec<Tick> {
    let span = (until - since).num_seconds().max(1);
    if let Some(step) = STEPS.iter().copied().find(|s| span / s < MAX_TICKS) {
        return seconds_ticks(since, until, step);
    }
    let months = i64::from(months_between(since, until)).max(1);
    let step = MONTH_STEPS
        .iter()
        .copied()
        .find(|s| months / i64::from(*s) < MAX_TICKS)
        .unwrap_or(120);
    month_ticks(since, until, step)
}

fn seconds_ticks(since: DateTime<Utc>, until: DateTime<Utc>, step: i64) -> Vec<Tick> {
    // Weeks start on Monday: the epoch was a Thursday, three days after one.
    let offset = if step == 7 * 86_400 { -3 * 86_400 } else { 0 };
    let first = (since.timestamp() - offset).div_euclid(step) * step + offset;
    let first = if first < since.timestamp() {
        first + step
    } else {
        first
    };
    let mut out = Vec::new();
    let mut previous_day: Option<NaiveDate> = None;
    let mut t = first;
    while t <= until.timestamp() && out.len() <= MAX_TICKS as usize {
        let Some(at) = DateTime::<Utc>::from_timestamp(t, 0) else {
            break;
        };
        let day = at.date_naive();
        let label = if step >= 86_400 {
            if previous_day.is_none() || at.month() == 1 && at.day() <= 7 {
                at.format("%b %-d %Y").to_string()
            } else {
                at.format("%b %-d").to_string()
            }
        } else if previous_day != Some(day) {
            at.format("%b %-d %H:%M").to_string()
        } else {
            at.format("%H:%M").to_string()
        };
        previous_day = Some(day);
        out.push(Tick { at, label });
        t += step;
    }
    out
}

fn months_between(since: DateTime<Utc>, until: DateTime<Utc>) -> u32 {
    let a = since.year() * 12 + since.month0() as i32;
    let b = until.year() * 12 + until.month0() as i32;
    (b - a).max(0) as u32
}

fn month_ticks(since: DateTime<Utc>, until: DateTime<Utc>, step: u32) -> Vec<Tick> {
    let mut index = since.year() * 12 + since.month0() as i32;
    let step = step as i32;
    index = index.div_euclid(step) * step;
    let mut out = Vec::new();
    while out.len() <= MAX_TICKS as usize {
        let (year, month0) = (index.div_euclid(12), index.rem_euclid(12) as u32);
        let Some(at) = Utc.with_ymd_and_hms(year, month0 + 1, 1, 0, 0, 0).single() else {
            break;
        };
        if at > until {
            break;
        }
        if at >= since {
            let label = if month0 == 0 || out.is_empty() || step >= 12 {
                at.format("%b %Y").to_string()
            } else {
                at.format("%b").to_string()
            };
            out.push(Tick { at, label });
        }
        index += step;
    }
    out
}

/// Returns where `at` falls on `[since, until]`, in percent from its left, within 0 to 100.
pub fn percent(at: DateTime<Utc>, since: DateTime<Utc>, until: DateTime<Utc>) -> f64 {
    let span = (until - since).num_milliseconds().max(1) as f64;
    let x = (at - since).num_milliseconds() as f64 / span * 100.0;
    x.clamp(0.0, 100.0)
}

/// Returns `at` to the minute (or second, when it has one), as the page shows instants.
pub fn instant(at: DateTime<Utc>) -> String {
    if at.second() == 0 {
        at.format("%Y-%m-%d %H:%M").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M:%S").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn labels(since: &str, until: &str) -> Vec<String> {
        ticks(t(since), t(until))
            .into_iter()
            .map(|k| k.label)
            .collect()
    }

    #[test]
    fn ticks_go_from_minutes_to_years_and_never_crowd() {
        assert_eq!(
            labels("2026-12-02T10:00:30Z", "2026-12-02T10:05:00Z"),
            ["Dec 2 10:01", "10:02", "10:03", "10:04", "10:05"]
        );
        assert_eq!(
            labels("2026-12-02T09:10:00Z", "2026-12-02T15:00:00Z"),
            ["Dec 2 10:00", "11:00", "12:00", "13:00", "14:00", "15:00"]
        );
        assert_eq!(
            labels("2026-12-01T20:00:00Z", "2026-12-02T08:00:00Z")[..3],
            ["Dec 1 21:00", "Dec 2 00:00", "03:00"]
        );
        assert_eq!(
            labels("2026-11-29T00:00:00Z", "2026-12-04T00:00:00Z")[..2],
            ["Nov 29 2026", "Nov 30"]
        );
        assert_eq!(
            labels("2026-09-15T00:00:00Z", "2027-02-01T00:00:00Z"),
            ["Oct 2026", "Nov", "Dec", "Jan 2027", "Feb"]
        );
        assert_eq!(
            labels("2020-01-01T00:00:00Z", "2026-12-01T00:00:00Z")[..2],
            ["Jan 2020", "Jan 2021"]
        );
        for (a, b) in [
            ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00Z"),
            ("2026-12-02T10:00:00Z", "2026-12-02T19:59:00Z"),
            ("2026-01-01T00:00:00Z", "2026-03-10T00:00:00Z"),
            ("1970-01-01T00:00:00Z", "9999-12-31T00:00:00Z"),
        ] {
            let n = ticks(t(a), t(b)).len() as i64;
            assert!(n <= MAX_TICKS + 1, "{a}..{b}: {n}");
        }
    }

    #[test]
    fn weeks_start_on_monday() {
        let ticks = ticks(t("2026-10-01T00:00:00Z"), t("2026-12-01T00:00:00Z"));
        assert!(ticks.iter().all(|k| k.at.weekday() == chrono::Weekday::Mon));
    }

    #[test]
    fn positions_stay_on_the_axis() {
        let (a, b) = (t("2026-12-02T10:00:00Z"), t("2026-12-02T12:00:00Z"));
        assert_eq!(percent(t("2026-12-02T11:00:00Z"), a, b), 50.0);
        assert_eq!(percent(t("2026-12-01T11:00:00Z"), a, b), 0.0);
        assert_eq!(percent(t("2026-12-03T11:00:00Z"), a, b), 100.0);
    }
}
