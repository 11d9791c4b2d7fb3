//! Holder names: who claims, renews, releases or revokes.
//!
//! A holder is stored in every `lease.json` this tool writes and shown to everyone who reads
//! it, so it is checked once, where it is made ([`Holder::new`]); every writer takes a
//! [`Holder`] and cannot be handed an unchecked name. Records written by others keep their
//! holders as plain text: a reader shows them escaped ([`crate::text`]) and judges them by the
//! rules, whatever they say.

use crate::error::Error;

/// The longest holder name, in bytes.
pub const MAX_HOLDER_BYTES: usize = 256;

/// A holder name that can be stored and shown: non-empty, at most [`MAX_HOLDER_BYTES`]
/// bytes, no control characters, no surrounding whitespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holder(String);

impl Holder {
    /// Checks `name` and returns it as a holder.
    ///
    /// Returns [`Error::InvalidHolder`] naming the rule broken.
    pub fn new(name: impl Into<String>) -> Result<Holder, Error> {
        let name = name.into();
        let broken = if name.is_empty() {
            Some("a holder must not be empty")
        } else if name.len() > MAX_HOLDER_BYTES {
            Some("a holder must be at most 256 bytes")
        } else if name.chars().any(char::is_control) {
            Some("a holder must not contain control characters")
        } else if name.trim() != name {
            Some("a holder must not start or end with whitespace")
        } else {
            None
        };
        match broken {
            Some(rule) => Err(Error::InvalidHolder { holder: name, rule }),
            None => Ok(Holder(name)),
        }
    }

    /// Returns the name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Holder> for String {
    fn from(holder: Holder) -> String {
        holder.0
    }
}

impl std::str::FromStr for Holder {
    type Err = Error;

    fn from_str(name: &str) -> Result<Holder, Error> {
        Holder::new(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_checked_once_where_it_is_made() {
        assert_eq!(
            Holder::new("alice@example.com").unwrap().as_str(),
            "alice@example.com"
        );
        assert_eq!(
            Holder::new("Ops Team <ops@x>").unwrap().to_string(),
            "Ops Team <ops@x>"
        );
        assert!(Holder::new("x".repeat(MAX_HOLDER_BYTES)).is_ok());
        for bad in ["", " alice", "alice ", "al\nice", "al\u{1b}ice"] {
            assert!(
                matches!(Holder::new(bad), Err(Error::InvalidHolder { .. })),
                "{bad:?}"
            );
        }
        assert!(Holder::new("x".repeat(MAX_HOLDER_BYTES + 1)).is_err());
    }
}
