//! Generated forgeries: every step whose signer does not fit its role is refused by `verify`.

use super::*;

/// One forged step on top of alice's live tenure (from 0, for 600 seconds), at 300 or, for a
/// takeover, at 700.
#[derive(Clone, Debug)]
struct Forgery {
    kind: &'static str,
    holder: &'static str,
    signer: Option<&'static str>,
}

fn forgery() -> impl Strategy<Value = Forgery> {
    let names = prop::sample::select(vec!["alice", "bob", "ops", UNLISTED]);
    (
        prop::sample::select(vec![
            "renew",
            "release",
            "takeover",
            "revoke",
            "expired-release",
        ]),
        names.clone(),
        prop::option::weighted(0.85, names),
    )
        .prop_map(|(kind, holder, signer)| Forgery {
            kind,
            holder,
            signer,
        })
}

impl Forgery {
    fn value(&self) -> Value {
        match self.kind {
            "renew" => renewed("42", self.holder, 1, 0, 300, 600),
            "release" => with(
                freed("42", "release", "alice", 1, 300),
                "by",
                json!(self.holder),
            ),
            "takeover" => acquired("42", self.holder, 2, 700, Some(600)),
            "revoke" => with(
                freed("42", "revoke", "alice", 1, 300),
                "by",
                json!(self.holder),
            ),
            _ => with(
                freed("42", "release", "alice", 1, 700),
                "by",
                json!(self.holder),
            ),
        }
    }

    /// Whether the signer is the one the step needs, by the specification: the holder for
    /// its own steps, the new holder, whoever frees an expired lease, an administrator.
    fn signer_fits(&self) -> bool {
        let needed = match self.kind {
            "renew" | "release" => "alice",
            "revoke" if self.holder != "ops" => return false,
            _ => self.holder,
        };
        self.signer == Some(needed) && needed != UNLISTED
    }
}

proptest! {
    // The seed is the suite's (`.cargo/config.toml`); a failure is reported, not persisted.
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_forgery_whose_signer_does_not_fit_its_role_is_refused_by_verify(f in forgery()) {
        if crate::signatures::no_ssh_keygen() {
            return Ok(());
        }
        let repo = TestRepo::new();
        let keys = Keys::new(&repo);
        keys.require_in(&repo);
        let first = step(&repo, &keys, &acquired("42", "alice", 1, 0, Some(600)), None, Some("alice"));
        let forged = step(&repo, &keys, &f.value(), Some(&first), f.signer);
        forge::set_ledger(&repo, "42", &forged);
        let run = lease(&repo, 720, &["verify"]);
        if !f.signer_fits() {
            prop_assert_eq!(run.code, 1, "{:?}: {}", f, run);
            prop_assert!(run.stdout.contains("signature"), "{:?}: {}", f, run);
        } else {
            prop_assert!(!run.stdout.contains("signature"), "{:?}: {}", f, run);
        }
    }
}
