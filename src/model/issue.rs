//! Issue ids: the part of `refs/leases/<issue>` that names an issue.
//!
//! An id must be usable as ref name components, so it is checked against git's
//! `check-ref-format` rules up front, and every refusal names the rule it broke. `/` is allowed
//! inside an id for namespaces (`gh/123`), where git allows it.

use crate::Error;

/// The namespace every tenure ledger lives in.
pub const REF_PREFIX: &str = "refs/leases/";

/// A validated issue id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IssueId(String);

impl IssueId {
    /// Checks `id` against the ref-name rules.
    ///
    /// Returns [`Error::InvalidIssue`] naming the first rule `id` breaks.
    pub fn new(id: &str) -> Result<IssueId, Error> {
        let refuse = |rule: &'static str| Error::InvalidIssue {
            id: id.to_owned(),
            rule,
        };
        if id.is_empty() {
            return Err(refuse("an issue id must not be empty"));
        }
        if id.len() > 200 {
            return Err(refuse("an issue id must be at most 200 bytes"));
        }
        if id.chars().any(|c| c.is_control()) {
            return Err(refuse("an issue id must not contain control characters"));
        }
        // Ids that look alike are one id, or none: invisible and bidi characters are refused,
        // and an id is in Unicode NFC, so `café` typed composed or decomposed is one issue.
        if id.chars().any(crate::text::is_hidden) {
            return Err(refuse(
                "an issue id must not contain invisible or bidirectional control characters",
            ));
        }
        if !unicode_normalization::is_nfc(id) {
            return Err(refuse(
                "an issue id must be in Unicode normalization form C (NFC): type it composed",
            ));
        }
        if id.contains(' ') {
            return Err(refuse("an issue id must not contain spaces"));
        }
        if id.contains(['~', '^', ':', '?', '*', '[', '\\']) {
            return Err(refuse("an issue id must not contain any of ~ ^ : ? * [ \\"));
        }
        if id.contains("..") {
            return Err(refuse("an issue id must not contain '..'"));
        }
        if id.contains("@{") {
            return Err(refuse("an issue id must not contain '@{'"));
        }
        if id.starts_with('-') {
            return Err(refuse("an issue id must not start with '-'"));
        }
        if id.starts_with('/') || id.ends_with('/') {
            return Err(refuse("an issue id must not start or end with '/'"));
        }
        if id.contains("//") {
            return Err(refuse("an issue id must not contain '//'"));
        }
        if id.ends_with('.') {
            return Err(refuse("an issue id must not end with '.'"));
        }
        for component in id.split('/') {
            if component.starts_with('.') {
                return Err(refuse(
                    "an issue id (and each '/'-separated part) must not start with '.'",
                ));
            }
            if component.ends_with(".lock") {
                return Err(refuse(
                    "an issue id (and each '/'-separated part) must not end with '.lock'",
                ));
            }
        }
        // git's own parser is the final word on anything the rules above missed.
        if gix::refs::FullName::try_from(format!("{REF_PREFIX}{id}")).is_err() {
            return Err(refuse("an issue id must be a valid git ref name component"));
        }
        Ok(IssueId(id.to_owned()))
    }

    /// Returns the id as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Returns `refs/leases/<id>`.
    pub fn ref_name(&self) -> String {
        format!("{REF_PREFIX}{}", self.0)
    }

    /// Returns the full ref name as gix wants it.
    pub(crate) fn full_name(&self) -> gix::refs::FullName {
        gix::refs::FullName::try_from(self.ref_name()).expect("validated in IssueId::new")
    }

    /// Returns the ids of the refs this one would clash with as file versus directory: each
    /// `/`-separated ancestor (`a` and `a/b` for `a/b/c`).
    pub(crate) fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').map(|(i, _)| &self.0[..i])
    }
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
    fn ancestors_are_the_directory_prefixes() {
        let id = IssueId::new("a/b/c").unwrap();
        assert_eq!(id.ancestors().collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(IssueId::new("a").unwrap().ancestors().count(), 0);
    }
}
