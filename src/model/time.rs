//! Instants and durations as git-lease reads and writes them.
//!
//! No rule reads the clock: every rule takes `now` as a parameter, and the command
//! line reads it once per command (or takes `GIT_LEASE_NOW`; `run`, `wait` and `watch` then let
//! that reading run on the monotonic clock). Times are whole seconds in UTC, written as
//! RFC 3339 (`2026-11-30T14:05:00Z`), so what is stored is exactly what is compared.

use chrono::{DateTime, Duration, SubsecRound, TimeZone, Utc};

use crate::Error;

/// How long a claim lasts: a fixed time to live, or until released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The lease never expires by itself: it ends only when it is freed (release, complete,
    /// abandon, revoke) or its reader sees the holder process gone.
    Never,
    /// The lease expires this long after it is acquired or renewed.
    For(Duration),
}

impl Ttl {
    /// Parses `90s`, `15m`, `2h`, `1d`, `1h30m` or `never`.
    ///
    /// Returns [`Error::InvalidTtl`] for anything else, zero included.
    pub fn parse(input: &str) -> Result<Ttl, Error> {
        let text = input.trim();
        if text.eq_ignore_ascii_case("never") {
            return Ok(Ttl::Never);
        }
        let invalid = |reason: String| Error::InvalidTtl {
            input: input.to_owned(),
            reason,
        };
        if text.starts_with('-') {
            return Err(invalid("cannot be negative".into()));
        }
        let std = humantime::parse_duration(text).map_err(|e| invalid(unreadable(&e)))?;
        if std.as_secs() == 0 {
            return Err(invalid("must be at least one second".into()));
        }
        if std.subsec_nanos() != 0 {
            return Err(invalid("must be a whole number of seconds".into()));
        }
        let too_long = || invalid("is too long; use `never` for an open-ended lease".into());
        let span = latest() - earliest();
        let secs = i64::try_from(std.as_secs()).map_err(|_| too_long())?;
        if secs > span.num_seconds() {
            return Err(too_long());
        }
        Ok(Ttl::For(Duration::seconds(secs)))
    }

    /// Returns the expiry of a claim made or renewed at `now`, never past [`latest`] (the
    /// command line refuses such a claim first, with [`Ttl::check_from`]).
    pub fn expiry_from(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Ttl::Never => None,
            Ttl::For(d) => Some(
                now.checked_add_signed(d)
                    .map_or(latest(), |t| t.min(latest())),
            ),
        }
    }

    /// Checks that a claim made at `now` for this long ends at an instant the ledger can
    /// record (no later than [`latest`]).
    ///
    /// Returns [`Error::InvalidTtl`] otherwise.
    pub fn check_from(self, now: DateTime<Utc>) -> Result<(), Error> {
        let Ttl::For(d) = self else {
            return Ok(());
        };
        match now.checked_add_signed(d) {
            Some(end) if end <= latest() => Ok(()),
            _ => Err(Error::InvalidTtl {
                input: self.to_string(),
                reason: format!(
                    "would expire after {}, the last instant a lease can record; use `never` for an open-ended lease",
                    format_instant(latest())
                ),
            }),
        }
    }
}

/// Says why `humantime` could not read a TTL in words that suggest only accepted forms: its
/// own messages offer units (`ns`, `ms`) and values (`15ms`) that a TTL refuses.
fn unreadable(error: &humantime::DurationError) -> String {
    use humantime::DurationError as E;
    match error {
        E::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            let accepted: Vec<String> = ["s", "m", "h", "d"]
                .iter()
                .map(|unit| format!("{value}{unit}"))
                .filter(|ttl| Ttl::parse(ttl).is_ok())
                .collect();
            match accepted.split_last() {
                Some((last, [])) => format!("a number needs a unit: {last}"),
                Some((last, rest)) => {
                    format!("a number needs a unit: {} or {last}", rest.join(", "))
                }
                None => "is too long; use `never` for an open-ended lease".into(),
            }
        }
        E::UnknownUnit { unit, .. } => {
            format!("unknown unit {unit:?}: use s, m, h, d or w (seconds to weeks)")
        }
        E::NumberOverflow => "is too long; use `never` for an open-ended lease".into(),
        E::Empty => "is empty".into(),
        E::InvalidCharacter(_) | E::NumberExpected(_) => {
            "is not a number followed by a unit (s, m, h, d or w)".into()
        }
    }
}

impl std::fmt::Display for Ttl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ttl::Never => f.write_str("never"),
            Ttl::For(d) => f.write_str(&short_duration(*d)),
        }
    }
}

/// Returns the first instant a ledger records: the unix epoch.
pub fn earliest() -> DateTime<Utc> {
    DateTime::UNIX_EPOCH
}

/// Returns the last instant a ledger records, `9999-12-31T23:59:59Z`: RFC 3339 has four-digit
/// years, so every instant written is one every reader parses back.
pub fn latest() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Parses an instant given as unix seconds (`1796045100`) or RFC 3339
/// (`2026-11-30T14:05:00Z`, any offset), truncated to whole seconds.
///
/// Returns [`Error::InvalidTime`] when it is neither, or is outside [`earliest`]..=[`latest`].
pub fn parse_instant(input: &str) -> Result<DateTime<Utc>, Error> {
    let text = input.trim();
    let invalid = || Error::InvalidTime {
        input: input.to_owned(),
    };
    let parsed = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = text.parse().map_err(|_| invalid())?;
        Utc.timestamp_opt(secs, 0).single().ok_or_else(invalid)?
    } else {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc).trunc_subsecs(0))
            .map_err(|_| invalid())?
    };
    if parsed < earliest() || parsed > latest() {
        return Err(invalid());
    }
    Ok(parsed)
}

/// Returns `at` as stored: RFC 3339 in UTC with whole seconds and a `Z`.
pub fn format_instant(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses an instant as `lease.json` stores it, in its one canonical form only:
/// `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds, an upper-case `T` and `Z`), exactly what
/// [`format_instant`] writes. Any other spelling of an instant (fractional seconds, `+00:00`,
/// a space, a lower-case `z`) is refused, so that every reader and writer agrees on what a
/// recorded time is and a renew can keep a tenure's `acquired_at` byte for byte.
pub fn parse_stored(text: &str) -> Result<DateTime<Utc>, String> {
    // A time of the stored shape that names a date and a time of day is read from its digits
    // (a cold listing reads three per ledger); anything else is parsed as RFC 3339, then
    // checked to be in the form written: by its shape where that alone decides (no
    // allocation), and a leap second by writing it back.
    let parsed = match shaped_instant(text.as_bytes()) {
        Some(parsed) => parsed,
        None => {
            let parsed = DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| format!("bad time {text:?}: {e}"))?;
            let canonical = match text.as_bytes() {
                shape @ [.., b'6', b'0', b'Z'] if shape.len() == 20 => {
                    format_instant(parsed) == text
                }
                shape => has_stored_shape(shape) || format_instant(parsed) == text,
            };
            if !canonical {
                return Err(format!(
                    "bad time {text:?}: not in the stored form {} (UTC, whole seconds, `T` and `Z`)",
                    format_instant(parsed)
                ));
            }
            parsed
        }
    };
    if parsed < earliest() || parsed > latest() {
        return Err(format!(
            "bad time {text:?}: outside {}..{}",
            format_instant(earliest()),
            format_instant(latest())
        ));
    }
    Ok(parsed)
}

/// The instant `text` names when it has the stored shape ([`has_stored_shape`]) and its
/// fields make a date and a time of day, a leap second not among them: what parsing it as
/// RFC 3339 gives. `None` for any other text.
fn shaped_instant(text: &[u8]) -> Option<DateTime<Utc>> {
    if !has_stored_shape(text) {
        return None;
    }
    let field = |digits: &[u8]| {
        digits
            .iter()
            .fold(0u32, |n, digit| n * 10 + u32::from(digit - b'0'))
    };
    let year = i32::try_from(field(&text[0..4])).ok()?;
    let date = chrono::NaiveDate::from_ymd_opt(year, field(&text[5..7]), field(&text[8..10]))?;
    let time = date.and_hms_opt(
        field(&text[11..13]),
        field(&text[14..16]),
        field(&text[17..19]),
    )?;
    Some(time.and_utc())
}

/// Whether `text` is `DDDD-DD-DDTDD:DD:DDZ` (`D` an ASCII digit): what [`format_instant`]
/// writes for every instant in `earliest()..=latest()` but a leap second, byte for byte, so
/// that a time of that shape which parses is in its stored form.
fn has_stored_shape(text: &[u8]) -> bool {
    const SHAPE: &[u8; 20] = b"DDDD-DD-DDTDD:DD:DDZ";
    text.len() == SHAPE.len()
        && text.iter().zip(SHAPE).all(|(&byte, &want)| match want {
            b'D' => byte.is_ascii_digit(),
            _ => byte == want,
        })
}

/// Returns a compact human duration: `45s`, `14m`, `2h 5m`, `3d 4h`.
pub fn short_duration(d: Duration) -> String {
    let mut out = String::new();
    push_short_duration(&mut out, d);
    out
}

/// Appends [`short_duration`] of `d` to `out` (a listing writes one per row).
pub fn push_short_duration(out: &mut String, d: Duration) {
    use std::fmt::Write;
    let secs = d.num_seconds().unsigned_abs();
    let (days, hours, mins, s) = (
        secs / 86_400,
        (secs % 86_400) / 3_600,
        (secs % 3_600) / 60,
        secs % 60,
    );
    // Writing to a String cannot fail.
    let _ = match (days, hours, mins) {
        (0, 0, 0) => write!(out, "{s}s"),
        (0, 0, m) if s == 0 => write!(out, "{m}m"),
        (0, 0, m) => write!(out, "{m}m {s}s"),
        (0, h, 0) => write!(out, "{h}h"),
        (0, h, m) => write!(out, "{h}h {m}m"),
        (d, 0, _) => write!(out, "{d}d"),
        (d, h, _) => write!(out, "{d}d {h}h"),
    };
}

/// Serde helpers that keep the stored form exactly [`format_instant`].
pub(crate) mod rfc3339 {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_instant(*at))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        super::parse_stored(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }

    pub mod option {
        use chrono::{DateTime, Utc};
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(
            at: &Option<DateTime<Utc>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => super::serialize(at, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<DateTime<Utc>>, D::Error> {
            match Option::<String>::deserialize(d)? {
                None => Ok(None),
                Some(text) => super::super::parse_stored(&text)
                    .map(Some)
                    .map_err(serde::de::Error::custom),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_forms() {
        assert_eq!(Ttl::parse("90s").unwrap(), Ttl::For(Duration::seconds(90)));
        assert_eq!(Ttl::parse("15m").unwrap(), Ttl::For(Duration::minutes(15)));
        assert_eq!(Ttl::parse("2h").unwrap(), Ttl::For(Duration::hours(2)));
        assert_eq!(Ttl::parse("1d").unwrap(), Ttl::For(Duration::days(1)));
        assert_eq!(
            Ttl::parse("1h30m").unwrap(),
            Ttl::For(Duration::minutes(90))
        );
        assert_eq!(Ttl::parse("never").unwrap(), Ttl::Never);
        for bad in ["", "0s", "soon", "-5m", "1.5s", "15"] {
            assert!(Ttl::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    /// Every TTL an error message suggests (a number with a unit, or `never`) is accepted.
    #[test]
    fn ttl_errors_suggest_only_accepted_ttls() {
        for bad in [
            "15",
            "0",
            "15x",
            "15ms",
            "1.5s",
            "",
            "soon",
            "-5m",
            "99999999999",
            "2 hours min",
        ] {
            let message = Ttl::parse(bad).unwrap_err().to_string();
            // What is quoted is the input given back, not a suggestion.
            let unquoted: String = message.split('"').step_by(2).collect();
            let suggested: Vec<&str> = unquoted
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()) || *w == "never")
                .filter(|w| w.ends_with(|c: char| c.is_ascii_alphabetic()))
                .collect();
            assert!(suggested.len() >= 5, "{bad:?}: {message}");
            for ttl in suggested {
                assert!(
                    Ttl::parse(ttl).is_ok(),
                    "{bad:?} suggests {ttl:?}: {message}"
                );
            }
        }
        let bare = Ttl::parse("15").unwrap_err().to_string();
        assert!(bare.contains("15s, 15m, 15h or 15d"), "{bare}");
        assert!(!bare.contains("ms"), "{bare}");
    }

    #[test]
    fn instants_in_both_forms() {
        let a = parse_instant("1796047500").unwrap();
        let b = parse_instant("2026-11-30T14:05:00Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(parse_instant("2026-11-30T15:05:00+01:00").unwrap(), b);
        assert_eq!(format_instant(b), "2026-11-30T14:05:00Z");
        for bad in ["", "yesterday", "2026-11-30", "-1", "12:00"] {
            assert!(parse_instant(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn every_instant_written_is_one_that_reads_back() {
        let last = latest();
        assert_eq!(parse_instant(&format_instant(last)).unwrap(), last);
        for out_of_range in [
            "8210266876799",
            "253402300800",
            "1969-12-31T23:59:59Z",
            "0000-01-01T00:00:00Z",
        ] {
            assert!(parse_instant(out_of_range).is_err(), "{out_of_range}");
        }
        let now = parse_instant("2026-11-30T14:00:00Z").unwrap();
        assert!(Ttl::parse("3000000d").is_err(), "longer than any ledger");
        let huge = Ttl::parse("2920000d").unwrap();
        assert!(huge.check_from(now).is_err());
        assert_eq!(huge.expiry_from(now), Some(last), "saturates, never panics");
        assert!(Ttl::parse("100y").unwrap().check_from(now).is_ok());
        assert!(Ttl::parse("1s").unwrap().check_from(last).is_err());
        assert!(Ttl::parse("100000y").is_err());
    }

    #[test]
    fn short_durations() {
        assert_eq!(short_duration(Duration::seconds(45)), "45s");
        assert_eq!(short_duration(Duration::minutes(14)), "14m");
        assert_eq!(short_duration(Duration::minutes(125)), "2h 5m");
        assert_eq!(short_duration(Duration::hours(76)), "3d 4h");
    }

    proptest::proptest! {
        /// Every instant a ledger may record parses back from the form written, and no other
        /// spelling of it does: the shape check decides as writing it back would.
        #[test]
        fn stored_instants_parse_only_in_the_form_written(
            secs in 0i64..=253_402_300_799,
            spelling in 0usize..6,
        ) {
            let at = DateTime::from_timestamp(secs, 0).unwrap();
            let text = format_instant(at);
            proptest::prop_assert_eq!(parse_stored(&text), Ok(at));
            let other = match spelling {
                0 => text.replacen('T', "t", 1),
                1 => text.replacen('T', " ", 1),
                2 => text.replacen('Z', "z", 1),
                3 => text.replacen('Z', "+00:00", 1),
                4 => text.replacen('Z', ".0Z", 1),
                _ => text.replacen('Z', "-00:00", 1),
            };
            proptest::prop_assert!(parse_stored(&other).is_err(), "{} parsed", other);
        }
    }

    proptest::proptest! {
        /// A time of the stored shape is read from its digits exactly as RFC 3339 parsing
        /// reads it, whatever its digits (months and days that do not exist, a 24th hour, a
        /// 61st second), but for a leap second, which is left to that parsing.
        #[test]
        fn a_shaped_time_reads_as_rfc_3339_parses_it(
            fields in (0u32..=9999, 0u32..=13, 0u32..=32, 0u32..=24, 0u32..=60, 0u32..=61),
        ) {
            let (year, month, day, hour, minute, second) = fields;
            let text =
                format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z");
            let parsed = DateTime::parse_from_rfc3339(&text)
                .ok()
                .filter(|_| second < 60)
                .map(|t| t.with_timezone(&Utc));
            proptest::prop_assert_eq!(shaped_instant(text.as_bytes()), parsed, "{}", text);
        }
    }

    #[test]
    fn a_leap_second_is_taken_only_if_written_back_the_same_and_other_shapes_are_refused() {
        let leap = "2026-12-31T23:59:60Z";
        let written_back = DateTime::parse_from_rfc3339(leap)
            .is_ok_and(|t| format_instant(t.with_timezone(&Utc)) == leap);
        assert_eq!(parse_stored(leap).is_ok(), written_back);
        assert!(parse_stored("1969-12-31T23:59:59Z").is_err());
        assert!(parse_stored("2026-12-31T24:00:00Z").is_err());
        assert!(parse_stored("2026-02-30T12:00:00Z").is_err());
    }
}
