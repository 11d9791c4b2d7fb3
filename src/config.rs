//! Settings read from git's configuration, under one policy: a value that is set but cannot be
//! read is an error naming the key, the value and what was expected ([`Error::Config`], exit
//! 2), never silently replaced by a default. Unset keys take their documented defaults.
//!
//! Each reader takes the raw value of one key (as the repository's configuration gives it),
//! so the same rules apply whether the value came through a [`crate::Store`] or through gix
//! while one is being opened.
//!
//! The configuration is git's, with its scopes in git's order: system, global, the
//! repository's, `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`, then the
//! `-c` settings that `git -c key=value lease …` passes down in `GIT_CONFIG_PARAMETERS`
//! ([`command_line`]), the last of which wins.

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

/// Reads a boolean the way git does: `true`/`yes`/`on` and `false`/`no`/`off` in any case, an
/// empty value as false, and a whole number (with git's `k`, `m` or `g` suffix) as true unless
/// it is 0. A key given without a value (`[lease] requireToken`) is true: the store gives it
/// as `true` ([`crate::Store::config_flag`]).
pub fn boolean(key: &str, value: Option<&str>) -> Result<Option<bool>> {
    value
        .map(|v| match v.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(true),
            "false" | "no" | "off" | "" => Ok(false),
            number => whole_number(number)
                .map(|n| n != 0)
                .ok_or_else(|| refuse(key, v, "a boolean: true or false")),
        })
        .transpose()
}

/// Reads a whole number as git does for a boolean: a sign, digits, and `k`, `m` or `g`.
fn whole_number(text: &str) -> Option<i64> {
    let (digits, scale) = match text.as_bytes().last() {
        Some(b'k') => (&text[..text.len() - 1], 1i64 << 10),
        Some(b'm') => (&text[..text.len() - 1], 1 << 20),
        Some(b'g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    let unsigned = digits.strip_prefix(['-', '+']).unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(scale)
}

/// What a colour setting (`color.ui`) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    /// Colour whatever the output is.
    Always,
    /// Never colour.
    Never,
    /// Colour a terminal only.
    Auto,
}

/// Reads a colour setting as git does: `always`, `never` or `auto` in any case, or a boolean,
/// true meaning `auto`; anything else is refused, as git refuses it.
pub fn color(key: &str, value: Option<&str>) -> Result<Option<Color>> {
    value
        .map(|v| match v.trim().to_ascii_lowercase().as_str() {
            "always" => Ok(Color::Always),
            "never" => Ok(Color::Never),
            "auto" => Ok(Color::Auto),
            _ => match boolean(key, Some(v)) {
                Ok(Some(true)) => Ok(Color::Auto),
                Ok(_) => Ok(Color::Never),
                Err(_) => Err(refuse(
                    key,
                    v,
                    "always, never, auto or a boolean (true meaning auto)",
                )),
            },
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

/// The variable in which git passes its `-c` settings to the commands it runs.
pub const PARAMETERS_ENV: &str = "GIT_CONFIG_PARAMETERS";

/// One `-c` setting: its key as git names it (section and variable name in lower case, a
/// subsection as given) and its value, `None` for a key given without `=` (a boolean true).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameter {
    /// The key, such as `lease.ttl` or `remote.origin.url`.
    pub key: Vec<u8>,
    /// The value; `None` when the key was given without `=`.
    pub value: Option<Vec<u8>>,
}

/// Returns the `-c` settings of the `git` that started this process (`GIT_CONFIG_PARAMETERS`),
/// in order; none when it is unset.
///
/// Returns [`Error::CommandLineConfig`] for what git itself refuses there: a list that is not
/// in git's quoting, or a key without a section or with a character git does not allow.
pub fn command_line() -> Result<Vec<Parameter>> {
    use std::os::unix::ffi::OsStrExt;
    match std::env::var_os(PARAMETERS_ENV) {
        Some(text) => parameters(text.as_bytes()),
        None => Ok(Vec::new()),
    }
}

/// Reads a `GIT_CONFIG_PARAMETERS` list as git does: items separated by white space, each
/// either `'key=value'` (the form of git before 2.31; no `=` makes a boolean true) or
/// `'key'='value'` (`'key'=` alone: a boolean true), quoted as a POSIX shell single-quotes,
/// with `'\''` and `'\!'` for a quote and an exclamation mark.
pub fn parameters(text: &[u8]) -> Result<Vec<Parameter>> {
    let bogus = || Error::CommandLineConfig(format!("bogus format in {PARAMETERS_ENV}"));
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (first, after) = dequote_step(rest).ok_or_else(bogus)?;
        let (parameter, after) = match after.first() {
            None => (old_style(&first)?, after),
            Some(c) if c.is_ascii_whitespace() => (old_style(&first)?, after),
            Some(b'=') => {
                let after = &after[1..];
                match after.first() {
                    Some(b'\'') => {
                        let (value, after) = dequote_step(after).ok_or_else(bogus)?;
                        if after.first().is_some_and(|c| !c.is_ascii_whitespace()) {
                            return Err(bogus());
                        }
                        (pair(&first, Some(value))?, after)
                    }
                    None => (pair(&first, None)?, after),
                    Some(c) if c.is_ascii_whitespace() => (pair(&first, None)?, after),
                    Some(_) => return Err(bogus()),
                }
            }
            Some(_) => return Err(bogus()),
        };
        out.push(parameter);
        rest = after.trim_ascii_start();
    }
    Ok(out)
}

/// Reads one single-quoted word at the start of `text`: returns it unquoted and what follows
/// it, or `None` when `text` does not start with a quote or ends inside one. Between quoted
/// parts, only `\'` and `\!` may stand, each followed by a quote that opens the next part.
fn dequote_step(text: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut rest = text.strip_prefix(b"'")?;
    let mut word = Vec::new();
    loop {
        let close = rest.iter().position(|c| *c == b'\'')?;
        word.extend_from_slice(&rest[..close]);
        rest = &rest[close + 1..];
        match rest {
            [b'\\', c @ (b'\'' | b'!'), b'\'', more @ ..] => {
                word.push(*c);
                rest = more;
            }
            _ => return Some((word, rest)),
        }
    }
}

/// Reads an old-style item, `key=value` or `key`, the key trimmed and the value as it is.
fn old_style(text: &[u8]) -> Result<Parameter> {
    let (key, value) = match text.iter().position(|c| *c == b'=') {
        Some(eq) => (&text[..eq], Some(text[eq + 1..].to_vec())),
        None => (text, None),
    };
    let key = key.trim_ascii();
    if key.is_empty() {
        return Err(Error::CommandLineConfig(format!(
            "bogus config parameter: {}",
            String::from_utf8_lossy(text)
        )));
    }
    pair(key, value)
}

/// Checks `key` as git checks a configuration key, and returns the setting with the key in
/// git's form: the section and the variable name in lower case, a subsection kept as given.
fn pair(key: &[u8], value: Option<Vec<u8>>) -> Result<Parameter> {
    let shown = String::from_utf8_lossy(key);
    let refuse = |why: &str| Err(Error::CommandLineConfig(format!("{why}: {shown}")));
    if key.is_empty() {
        return Err(Error::CommandLineConfig("empty config key".into()));
    }
    let (Some(first_dot), Some(last_dot)) = (
        key.iter().position(|c| *c == b'.'),
        key.iter().rposition(|c| *c == b'.'),
    ) else {
        return refuse("key does not contain a section");
    };
    if last_dot == 0 {
        return refuse("key does not contain a section");
    }
    if last_dot + 1 == key.len() {
        return refuse("key does not contain variable name");
    }
    let (section, name) = (&key[..first_dot], &key[last_dot + 1..]);
    let key_char = |c: &u8| c.is_ascii_alphanumeric() || *c == b'-';
    if section.is_empty()
        || !section.iter().all(key_char)
        || !name.iter().all(key_char)
        || !name[0].is_ascii_alphabetic()
        || key[first_dot..last_dot].contains(&b'\n')
    {
        return refuse("invalid key");
    }
    let mut key = key.to_vec();
    key[..first_dot].make_ascii_lowercase();
    key[last_dot + 1..].make_ascii_lowercase();
    Ok(Parameter { key, value })
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
        assert_eq!(boolean("k", Some("")).unwrap(), Some(false));
        assert_eq!(boolean("k", Some("2")).unwrap(), Some(true));
        assert_eq!(boolean("k", Some("-1k")).unwrap(), Some(true));
        assert_eq!(boolean("k", Some("0")).unwrap(), Some(false));
        assert!(boolean("k", Some("1x")).is_err());
        assert!(boolean("k", Some("-")).is_err());
        assert_eq!(boolean("k", None).unwrap(), None);
        assert_eq!(count("k", Some("2k")).unwrap(), Some(2048));
        assert_eq!(positive("k", Some("12")).unwrap(), Some(12));
        assert_eq!(color("k", Some("Always")).unwrap(), Some(Color::Always));
        assert_eq!(color("k", Some("true")).unwrap(), Some(Color::Auto));
        assert_eq!(color("k", Some("off")).unwrap(), Some(Color::Never));
        assert!(color("color.ui", Some("sometimes")).is_err());
    }

    fn p(key: &str, value: Option<&str>) -> Parameter {
        Parameter {
            key: key.into(),
            value: value.map(Into::into),
        }
    }

    #[test]
    fn command_line_settings_are_read_in_both_of_gits_forms() {
        assert_eq!(
            parameters(b"'lease.TTL'='5m' 'Color.UI=always'  'core.bare' 'advice.x'=").unwrap(),
            [
                p("lease.ttl", Some("5m")),
                p("color.ui", Some("always")),
                p("core.bare", None),
                p("advice.x", None),
            ]
        );
        // A subsection is kept as given, '=' and spaces and quotes included.
        assert_eq!(
            parameters(b"'Remote.My=Host.URL'=' a'\\''b '").unwrap(),
            [p("remote.My=Host.url", Some(" a'b "))]
        );
        assert_eq!(
            parameters(b"'user.email=a=b '").unwrap(),
            [p("user.email", Some("a=b "))]
        );
        assert_eq!(parameters(b"").unwrap(), []);
        for bogus in [
            &b"lease.ttl=5m"[..],
            b"'lease.ttl",
            b"'lease.ttl'x",
            b"'lease.ttl'='5m'x",
            b"'ttl=5m'",
            b"'lease.=5m'",
            b"'.ttl=5m'",
            b"'lease.5m=x'",
            b"'le_ase.ttl=x'",
            b"'=x'",
        ] {
            let err = parameters(bogus).expect_err(&String::from_utf8_lossy(bogus));
            assert_eq!(err.kind(), crate::ErrorKind::Usage, "{err}");
        }
    }
}
