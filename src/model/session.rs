//! Session secrets: proof that a renew or release comes from the worker that took the lease,
//! not merely from someone using the same holder name.
//!
//! `acquire --session` makes a random secret, prints it once, and stores only its SHA-256 in
//! `lease.json`, so nothing readable in the repository (or any clone of it) can be used to
//! act on the lease.

/// The prefix of every session secret, so a leaked one is recognisable.
pub const SECRET_PREFIX: &str = "gls_";

/// The prefix of a stored session hash.
pub const HASH_PREFIX: &str = "sha256:";

/// Returns the secret made of `random`, 32 bytes from the operating system's CSPRNG
/// ([`crate::os::new_session_secret`]): `gls_` and 64 hex digits.
pub fn secret_from(random: [u8; 32]) -> String {
    let mut secret = String::with_capacity(SECRET_PREFIX.len() + 64);
    secret.push_str(SECRET_PREFIX);
    for b in random {
        secret.push_str(&format!("{b:02x}"));
    }
    secret
}

/// Returns what `lease.json` stores for `secret`: `sha256:<hex>`.
pub fn hash(secret: &str) -> String {
    let mut hasher = gix_hash::hasher(gix_hash::Kind::Sha256);
    hasher.update(secret.as_bytes());
    let digest = hasher
        .try_finalize()
        .map(|id| id.to_string())
        .unwrap_or_default();
    format!("{HASH_PREFIX}{digest}")
}

/// Returns true if `secret` proves the session whose stored hash is `stored`.
pub fn matches(stored: &str, secret: Option<&str>) -> bool {
    secret.is_some_and(|s| {
        let computed = hash(s);
        // Compare in constant time: the stored hash is public, the secret is not.
        computed.len() == stored.len()
            && computed
                .bytes()
                .zip(stored.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_secrets_hash_matches_it() {
        let a = secret_from([0xa5; 32]);
        let b = secret_from([0x5a; 32]);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == 68);
        let stored = hash(&a);
        assert!(stored.starts_with(HASH_PREFIX));
        assert!(!stored.contains(&a[SECRET_PREFIX.len()..]));
        assert!(matches(&stored, Some(&a)));
        assert!(!matches(&stored, Some(&b)));
        assert!(!matches(&stored, None));
    }

    #[test]
    fn hash_is_sha256() {
        assert_eq!(
            hash("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
