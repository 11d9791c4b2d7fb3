//! Settings read from git's configuration, under one policy: a value that is set but cannot be
//! read is an error naming the key, the value and what was expected ([`Error::Config`], exit
//! 2), never silently replaced by a default. Unset keys take their documented defaults.
//!
//! Each reader takes the raw value of one key (as the repository's configuration gives it),
//! so the same rules apply whether the value came through a [`crate::Store`] or through gix
//! while one is being opened.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::time::Ttl;

fn refuse(key: &str, value: &str, expected: &'static str) -> Error {
    Error::Config {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

/// Reads a duration (`3s`, `500ms`, `1h30m`), as humantime spells them.
pub fn duration(key: &str, value: Option<&str>) -> Result<Option<Duration>> {
    value
        .map(|v| {
            humantime::parse_duration(v.trim())
                .map_err(|_| refuse(key, v, "a duration such as 3s, 500ms or 1h30m"))
        })
        .transpose()
}

/// The default of `lease.maxClockSkew`: how far an event's time may be from the clock of whoever
/// judges it (the server, for a push; a reader, for an event dated ahead of it).
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);

/// Reads `lease.maxClockSkew` (a duration; 5 minutes when unset).
pub fn max_clock_skew(value: Option<&str>) -> Result<chrono::Duration> {
    const KEY: &str = "lease.maxClockSkew";
    let skew = duration(KEY, value)?.unwrap_or(DEFAULT_MAX_CLOCK_SKEW);
    chrono::Duration::from_std(skew).map_err(|_| Error::Config {
        key: KEY.into(),
        value: humantime::format_duration(skew).to_string(),
        expected: "a duration shorter than a few thousand years",
    })
}

/// Reads a boolean the way git does: `true`/`yes`/`on`/`1` and `false`/`no`/`off`/`0`, in
/// any case; a key given without a value (`[lease] requireToken`) is true.
pub fn boolean(key: &str, value: Option<&str>) -> Result<Option<bool>> {
    value
        .map(|v| match v.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" | "" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(refuse(key, v, "a boolean: true or false")),
        })
        .transpose()
}

/// Reads a non-negative integer, with git's `k`, `m` and `g` suffixes.
pub fn count(key: &str, value: Option<&str>) -> Result<Option<u64>> {
    value
        .map(|v| {
            let text = v.trim().to_ascii_lowercase();
            let (digits, scale) = match text.chars().last() {
                Some('k') => (&text[..text.len() - 1], 1 << 10),
                Some('m') => (&text[..text.len() - 1], 1 << 20),
                Some('g') => (&text[..text.len() - 1], 1 << 30),
                _ => (text.as_str(), 1),
            };
            digits
                .parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(scale))
                .ok_or_else(|| refuse(key, v, "a whole number (0 or more)"))
        })
        .transpose()
}

/// Reads a positive integer.
pub fn positive(key: &str, value: Option<&str>) -> Result<Option<u32>> {
    value
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| refuse(key, v, "a whole number of at least 1"))
        })
        .transpose()
}

/// Reads a TTL (`15m`, `2h`, `never`).
pub fn ttl(key: &str, value: Option<&str>) -> Result<Option<Ttl>> {
    value
        .map(|v| Ttl::parse(v).map_err(|_| refuse(key, v, "a TTL such as 15m, 2h, 1d or never")))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_value_is_an_error_naming_the_key_and_the_value() {
        for err in [
            duration("lease.lockTimeout", Some("soon")).map(|_| ()),
            boolean("lease.requireToken", Some("maybe")).map(|_| ()),
            count("gc.auto", Some("-3")).map(|_| ()),
            positive("lease.pushAttempts", Some("0")).map(|_| ()),
            ttl("lease.ttl", Some("0s")).map(|_| ()),
        ] {
            let message = err.expect_err("refused").to_string();
            assert!(
                message.contains("lease.") || message.contains("gc.auto"),
                "{message}"
            );
        }
        assert_eq!(
            duration("k", Some("3s")).unwrap(),
            Some(Duration::from_secs(3))
        );
        assert_eq!(boolean("k", Some("Yes")).unwrap(), Some(true));
        assert_eq!(boolean("k", None).unwrap(), None);
        assert_eq!(count("k", Some("2k")).unwrap(), Some(2048));
        assert_eq!(positive("k", Some("12")).unwrap(), Some(12));
    }
}
