//! Issue ids: the part of `refs/leases/<issue>` that names an issue.
//!
//! An id must be usable as ref name components, so it is checked against git's
//! `check-ref-format` rules up front, and every refusal names the rule it broke. `/` is allowed
//! inside an id for namespaces (`gh/123`), where git allows it. Each part must also name a file
//! on every system git runs on (no `" < > |`, no Windows device name): git's files backend
//! keeps a ref as a file, and gix refuses any other in a ref's path. This is the one
//! definition the command line, the hook, `sync` and every reader use.

use std::cmp::Ordering;

use crate::Error;

/// The namespace every tenure ledger lives in.
pub const REF_PREFIX: &str = "refs/leases/";

/// A validated issue id. Ids are ordered naturally ([`natural_cmp`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IssueId(String);

impl Ord for IssueId {
    fn cmp(&self, other: &IssueId) -> Ordering {
        natural_cmp(&self.0, &other.0)
    }
}

impl PartialOrd for IssueId {
    fn partial_cmp(&self, other: &IssueId) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl IssueId {
    /// Checks `id` against the ref-name rules.
    ///
    /// Returns [`Error::InvalidIssue`] naming the first rule `id` breaks.
    pub fn new(id: &str) -> Result<IssueId, Error> {
        match broken_rule(id) {
            Some(rule) => Err(Error::InvalidIssue {
                id: id.to_owned(),
                rule,
            }),
            None => Ok(IssueId(id.to_owned())),
        }
    }

    /// Returns the id as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Returns `refs/leases/<id>`.
    pub fn ref_name(&self) -> String {
        format!("{REF_PREFIX}{}", self.0)
    }

    /// Returns the ids of the refs this one would clash with as file versus directory: each
    /// `/`-separated ancestor (`a` and `a/b` for `a/b/c`).
    pub(crate) fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').map(|(i, _)| &self.0[..i])
    }
}

/// The order in which issue ids are shown to people, in every listing: natural order, where
/// runs of ASCII digits compare by their value, so `2 < 10` and `issue-2 < issue-10`.
///
/// Each id is read as a sequence of runs, each all ASCII digits or all other characters, and
/// the sequences are compared run by run: two digit runs by value (`007` and `7` alike), two
/// other runs byte by byte (code point order), a digit run and another by their first
/// characters; a sequence that is a prefix of the other comes first. Ids that still tie (`07`
/// and `7`) are ordered byte by byte, so this is a total order whose only equal ids are
/// identical ones: sorting never depends on where an id started.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    // Most pairs are told apart where they first differ (a listing sorts 100k ids); only a
    // digit run with a leading zero needs the runs compared from the start.
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let same = x.iter().zip(y).take_while(|(p, q)| p == q).count();
    let (Some(&p), Some(&q)) = (x.get(same), y.get(same)) else {
        // One is the other's prefix: it has fewer runs, or a shorter last one.
        return x.len().cmp(&y.len());
    };
    // Where the run under way at the first difference starts, if it is of digits.
    let start = same
        - x[..same]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .count();
    match (p.is_ascii_digit(), q.is_ascii_digit()) {
        // Two runs of other bytes differ here (any digit runs before ended together).
        (false, false) => p.cmp(&q),
        // A run of other bytes ends here on one side only, a prefix of the other's; or the
        // first runs differ in kind, compared by their first bytes.
        (true, false) | (false, true) if start == same => match (same, p.is_ascii_digit()) {
            (0, _) => p.cmp(&q),
            (_, true) => Ordering::Less,
            (_, false) => Ordering::Greater,
        },
        // Inside a digit run on both sides: by value, which without leading zeros is the
        // number of digits, then the first digit that differs.
        _ if x[start] != b'0' && y[start] != b'0' => {
            let digits = |s: &[u8]| s[start..].iter().take_while(|c| c.is_ascii_digit()).count();
            digits(x).cmp(&digits(y)).then(p.cmp(&q))
        }
        _ => natural_cmp_by_runs(a, b),
    }
}

/// [`natural_cmp`] taken run by run from the start, as its documentation says.
fn natural_cmp_by_runs(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (Runs(a.as_bytes()), Runs(b.as_bytes()));
    loop {
        let order = match (x.next(), y.next()) {
            (None, None) => return a.as_bytes().cmp(b.as_bytes()),
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(r), Some(s)) => match (is_digit_run(r), is_digit_run(s)) {
                (true, true) => {
                    let (r, s) = (without_leading_zeros(r), without_leading_zeros(s));
                    r.len().cmp(&s.len()).then_with(|| r.cmp(s))
                }
                _ => r.cmp(s),
            },
        };
        if order != Ordering::Equal {
            return order;
        }
    }
}

/// The runs of a byte string: maximal stretches of ASCII digits, and of other bytes. Splitting
/// at ASCII digits never splits a UTF-8 character.
struct Runs<'a>(&'a [u8]);

impl<'a> Iterator for Runs<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let first = self.0.first()?;
        let digits = first.is_ascii_digit();
        let end = self
            .0
            .iter()
            .position(|b| b.is_ascii_digit() != digits)
            .unwrap_or(self.0.len());
        let (run, rest) = self.0.split_at(end);
        self.0 = rest;
        Some(run)
    }
}

fn is_digit_run(run: &[u8]) -> bool {
    run.first().is_some_and(u8::is_ascii_digit)
}

fn without_leading_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|b| **b == b'0').count();
    &digits[zeros..]
}

impl std::fmt::Display for IssueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for IssueId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IssueId::new(s)
    }
}

/// The first ref-name rule `id` breaks, if any ([`IssueId::new`]).
fn broken_rule(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        return Some("an issue id must not be empty");
    }
    if id.len() > 200 {
        return Some("an issue id must be at most 200 bytes");
    }
    if id.chars().any(|c| c.is_control()) {
        return Some("an issue id must not contain control characters");
    }
    // Ids that look alike are one id, or none: invisible and bidi characters are refused,
    // and an id is in Unicode NFC, so `café` typed composed or decomposed is one issue.
    if id.chars().any(crate::text::is_hidden) {
        return Some("an issue id must not contain invisible or bidirectional control characters");
    }
    if !unicode_normalization::is_nfc(id) {
        return Some("an issue id must be in Unicode normalization form C (NFC): type it composed");
    }
    if id.contains(' ') {
        return Some("an issue id must not contain spaces");
    }
    if id.contains(['~', '^', ':', '?', '*', '[', '\\']) {
        return Some("an issue id must not contain any of ~ ^ : ? * [ \\");
    }
    // git carries these in ref names, but they cannot name a file where git's files
    // backend keeps a ref on Windows, and gix, which reads every ref here, refuses them in
    // a ref's path (tests/it/odd_ids.rs).
    if id.contains(['"', '<', '>', '|']) {
        return Some("an issue id must not contain any of \" < > |");
    }
    if id.contains("..") {
        return Some("an issue id must not contain '..'");
    }
    if id.contains("@{") {
        return Some("an issue id must not contain '@{'");
    }
    if id.starts_with('-') {
        return Some("an issue id must not start with '-'");
    }
    if id.starts_with('/') || id.ends_with('/') {
        return Some("an issue id must not start or end with '/'");
    }
    if id.contains("//") {
        return Some("an issue id must not contain '//'");
    }
    if id.ends_with('.') {
        return Some("an issue id must not end with '.'");
    }
    if let Some(rule) = id.split('/').find_map(broken_part_rule) {
        return Some(rule);
    }
    // git's own parser is the final word on anything the rules above missed.
    let name = format!("{REF_PREFIX}{id}");
    if gix_validate::reference::name(name.as_bytes().into()).is_err() {
        return Some("an issue id must be a valid git ref name component");
    }
    None
}

/// The first rule a `/`-separated part of an issue id breaks, if any.
fn broken_part_rule(component: &str) -> Option<&'static str> {
    if component.starts_with('.') {
        return Some("an issue id (and each '/'-separated part) must not start with '.'");
    }
    if component.ends_with(".lock") {
        return Some("an issue id (and each '/'-separated part) must not end with '.lock'");
    }
    if gix_validate::path::component_is_windows_device(component.into()) {
        return Some(
                "an issue id (and each '/'-separated part) must not be a Windows device name (CON, PRN, AUX, NUL, COM1 to COM9, LPT0 to LPT9, CONIN$, CONOUT$, in any case, alone or before a '.')",
            );
    }
    // What gix checks of every path component of a ref it reads or lists.
    let options = gix_validate::path::component::Options::default();
    if gix_validate::path::component(component.into(), None, options).is_err() {
        return Some(
                "an issue id (and each '/'-separated part) must be a file name on every system git runs on",
            );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_and_namespaced_ids() {
        for ok in [
            "42",
            "gh/123",
            "PROJ-7",
            "a.b",
            "feature_x",
            "a/b/c",
            "é",
            "caf\u{e9}",
            "CONx",
            "a/com0",
            "lpt",
            "a%b",
            "a{b}",
            "a'b",
            "a&b",
        ] {
            assert!(IssueId::new(ok).is_ok(), "{ok:?} must be accepted");
        }
    }

    #[test]
    fn refuses_each_rule_by_name() {
        let cases = [
            ("", "empty"),
            ("a..b", "'..'"),
            ("a b", "spaces"),
            ("a\tb", "control"),
            ("a~1", "~ ^"),
            ("a^", "~ ^"),
            ("a:b", "~ ^"),
            ("a?", "~ ^"),
            ("a*", "~ ^"),
            ("a[", "~ ^"),
            ("a\\b", "~ ^"),
            ("-x", "start with '-'"),
            (".x", "start with '.'"),
            ("a/.x", "start with '.'"),
            ("x.lock", ".lock"),
            ("x.lock/y", ".lock"),
            ("x/", "'/'"),
            ("/x", "'/'"),
            ("a//b", "'//'"),
            ("a@{1}", "'@{'"),
            ("x.", "end with '.'"),
            ("cafe\u{301}", "NFC"),
            ("a\u{200b}b", "invisible"),
            ("a\u{202e}b", "bidirectional"),
            ("\u{feff}a", "invisible"),
            ("a\"b", "\" < > |"),
            ("a<b", "\" < > |"),
            ("a>b", "\" < > |"),
            ("a|b", "\" < > |"),
            ("CON", "Windows device"),
            ("gh/nul", "Windows device"),
            ("aux.txt", "Windows device"),
            ("com1", "Windows device"),
            ("lpt0", "Windows device"),
            ("conin$", "Windows device"),
        ];
        for (id, rule) in cases {
            match IssueId::new(id) {
                Err(Error::InvalidIssue { rule: r, .. }) => {
                    assert!(
                        r.contains(rule),
                        "{id:?}: rule {r:?} should mention {rule:?}"
                    )
                }
                other => panic!("{id:?} must be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn natural_order_compares_numbers_by_value() {
        let mut ids = [
            "issue-10", "12", "2", "gh/10", "1", "issue-2", "11", "gh/9", "10", "007", "7", "a",
        ];
        ids.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            ids,
            ["1", "2", "007", "7", "10", "11", "12", "a", "gh/9", "gh/10", "issue-2", "issue-10"]
        );
    }

    /// Ids as the order meets them: digits, letters, separators and a non-ASCII letter, so
    /// that digit runs of every length (leading zeros too) meet text runs.
    fn id() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex("[0-9a-b/é-]{0,6}").expect("a valid pattern")
    }

    proptest::proptest! {
        /// Where two ids first differ decides as comparing their runs from the start does.
        #[test]
        fn the_first_difference_orders_as_the_runs_do(a in id(), b in id()) {
            proptest::prop_assert_eq!(natural_cmp(&a, &b), natural_cmp_by_runs(&a, &b));
            let (long_a, long_b) = (format!("i{a}x17"), format!("i{a}{b}"));
            proptest::prop_assert_eq!(
                natural_cmp(&long_a, &long_b),
                natural_cmp_by_runs(&long_a, &long_b)
            );
        }

        #[test]
        fn natural_order_is_total_and_consistent_with_equality(a in id(), b in id(), c in id()) {
            let ab = natural_cmp(&a, &b);
            proptest::prop_assert_eq!(ab, natural_cmp(&b, &a).reverse());
            proptest::prop_assert_eq!(ab == Ordering::Equal, a == b);
            proptest::prop_assert_eq!(natural_cmp(&a, &a), Ordering::Equal);
            if ab != Ordering::Greater && natural_cmp(&b, &c) != Ordering::Greater {
                proptest::prop_assert_ne!(natural_cmp(&a, &c), Ordering::Greater);
            }
        }
    }

    #[test]
    fn ancestors_are_the_directory_prefixes() {
        let id = IssueId::new("a/b/c").unwrap();
        assert_eq!(id.ancestors().collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(IssueId::new("a").unwrap().ancestors().count(), 0);
    }
}
