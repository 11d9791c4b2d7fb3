//! The hook's policy, read from the served repository's configuration: who pushed
//! (`lease.identity`, `lease.pusherEnv`), who may revoke (`lease.admins`), which branches are
//! fenced (`lease.fence`) and whether a fenced push needs its token (`lease.requireToken`).
//!
//! A fence holds by default. With no `lease.fence` the usual glob, [`DEFAULT_FENCE`], is
//! fenced; an empty value clears the globs before it (as git's `credential.helper` does), the
//! one way to fence no branch. With no `lease.requireToken` a fenced push needs the live
//! tenure's token exactly where the server knows nobody: without identity the token is the
//! only fence, and with identity the pusher must be the live holder already.
//! `lease.requireToken=false` turns the token off, `true` asks for it whatever the identity.

use chrono::Duration;

pub use crate::step::Pusher;
use crate::store::Store;

/// The fence glob where `lease.fence` names none: an issue's branch `issue/<id>`.
pub const DEFAULT_FENCE: &str = "refs/heads/issue/*";

/// How the server learns who pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Not configured: lease pushes are checked by the rules alone.
    None,
    /// Signed pushes (`git push --signed`): `GIT_PUSH_CERT_SIGNER` with status `G`.
    PushCert,
    /// The named environment variable (`REMOTE_USER`, `GL_USER`, ...) set by the server.
    Env(String),
}

/// Where a value of the policy comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Its setting is absent: the default applies.
    Default,
    /// Its setting says so.
    Configured,
}

/// The hook's configuration, read from the receiving repository.
#[derive(Clone, Debug)]
pub struct Policy {
    /// How far a pushed event's `at` may be from the server's clock (`lease.maxClockSkew`, 5
    /// minutes by default).
    pub max_skew: Duration,
    /// Where the pusher's identity comes from (`lease.identity`, `lease.pusherEnv`).
    pub identity: Identity,
    /// Who may revoke (`lease.admins`, one whole identity per value).
    pub admins: Vec<String>,
    /// Globs of fenced refs (`lease.fence`, else [`DEFAULT_FENCE`]).
    pub fences: Vec<String>,
    /// Whether `fences` is the default glob or `lease.fence`'s.
    pub fences_from: Source,
    /// Refuse fenced pushes without the live tenure's `lease-token` (`lease.requireToken`,
    /// by default where `identity` is [`Identity::None`]).
    pub require_token: bool,
    /// Whether `require_token` is the default or `lease.requireToken`'s.
    pub token_from: Source,
    /// With `lease.requireSignatures`: the allowed signers every pushed step must be signed by
    /// (the served repository's `lease.allowedSigners`, or its `HEAD`'s
    /// `.git-lease/allowed_signers`).
    pub signers: Option<crate::rules::signers::AllowedSigners>,
}

impl Policy {
    /// Reads the policy from the repository's configuration.
    pub fn from_config(store: &Store) -> Result<Policy, crate::Error> {
        let max_skew =
            crate::config::max_clock_skew(store.config_string("lease.maxClockSkew").as_deref())?;
        let identity = identity_from_config(store)?;
        // One identity per value, taken whole and exactly as written: "Ops Team" is one
        // identity, not two, and "ops " is not "ops". An empty value names nobody.
        let admins = store
            .config_strings("lease.admins")
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let configured = crate::config::boolean(
            "lease.requireToken",
            store.config_flag("lease.requireToken").as_deref(),
        )?;
        let (require_token, token_from) = match configured {
            Some(required) => (required, Source::Configured),
            None => (identity == Identity::None, Source::Default),
        };
        let (fences, fences_from) = fence_globs(store)?;
        let signers = crate::ledger::signers::served(store)?;
        Ok(Policy {
            max_skew,
            identity,
            admins,
            fences,
            fences_from,
            require_token,
            token_from,
            signers,
        })
    }

    /// The policy in a few lines (identity, fence, token, administrators), as `install-hook`
    /// prints it.
    pub fn summary(&self) -> Vec<String> {
        let identity = match &self.identity {
            Identity::None => "none: the server authenticates nobody".to_owned(),
            Identity::PushCert => "signed pushes (lease.identity=push-cert)".to_owned(),
            Identity::Env(var) => format!("{var}, as the server sets it (lease.pusherEnv)"),
        };
        let fences = if self.fences.is_empty() {
            "none (lease.fence is cleared)".to_owned()
        } else {
            let from = match self.fences_from {
                Source::Default => "the default; lease.fence sets others",
                Source::Configured => "lease.fence",
            };
            format!("{} ({from})", self.fences.join(", "))
        };
        let token = match (self.require_token, self.token_from) {
            (true, Source::Default) => {
                "required on a fenced push (the default without identity; lease.requireToken)"
            }
            (true, Source::Configured) => "required on a fenced push (lease.requireToken)",
            (false, Source::Default) => {
                "checked when a push carries one; the pusher must be the live holder (the \
                 default with identity; lease.requireToken)"
            }
            (false, Source::Configured) => {
                "checked when a push carries one (lease.requireToken=false)"
            }
        };
        let admins = if self.admins.is_empty() {
            "none (lease.admins)".to_owned()
        } else {
            self.admins
                .iter()
                .map(|a| crate::text::printable(a))
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            format!("identity: {identity}"),
            format!("fenced branches: {fences}"),
            format!("token: {token}"),
            format!("admins: {admins}"),
        ]
    }

    /// What the policy leaves open on fenced branches, one warning each: no branch fenced, or
    /// a fence that takes anyone's push while the issue is held (no identity, no token).
    pub fn open_fences(&self) -> Vec<String> {
        let mut open = Vec::new();
        if self.fences.is_empty() {
            open.push(
                "lease.fence is cleared (an empty value): no work branch is fenced, so a worker \
                 whose lease was taken over still lands its work; unset lease.fence for the \
                 default refs/heads/issue/*, or name your issue branches"
                    .to_owned(),
            );
        } else if self.identity == Identity::None && !self.require_token {
            open.push(
                "lease.requireToken=false without identity: a fenced branch takes anyone's push \
                 while its issue is held, so a worker whose lease was taken over still lands \
                 its work; unset lease.requireToken, or configure identity (lease.pusherEnv)"
                    .to_owned(),
            );
        }
        open
    }
}

/// Reads the fence globs (`lease.fence`, multi-valued): an empty value clears the globs before
/// it; none at all is [`DEFAULT_FENCE`]. Each glob must hold exactly one `*`.
pub fn fence_globs(store: &Store) -> Result<(Vec<String>, Source), crate::Error> {
    let values = store.config_strings("lease.fence");
    if values.is_empty() {
        return Ok((vec![DEFAULT_FENCE.to_owned()], Source::Default));
    }
    let cleared = values.iter().rposition(String::is_empty);
    let globs: Vec<String> = values[cleared.map_or(0, |i| i + 1)..].to_vec();
    if let Some(bad) = globs.iter().find(|g| g.matches('*').count() != 1) {
        return Err(crate::Error::Config {
            key: "lease.fence".into(),
            value: bad.clone(),
            expected: "a glob with exactly one `*`, which matches the issue id (an empty value \
                       clears the globs before it)",
        });
    }
    Ok((globs, Source::Configured))
}

/// Reads where the pusher's identity comes from (`lease.identity`, `lease.pusherEnv`).
fn identity_from_config(store: &Store) -> Result<Identity, crate::Error> {
    let pusher_env = store.config_string("lease.pusherEnv");
    match store.config_string("lease.identity").as_deref() {
        Some("push-cert") => Ok(Identity::PushCert),
        // Fails closed: a server told to read the pusher from the environment, but not from
        // which variable, knows nobody; the hook refuses every push until that is fixed.
        Some("env") => match pusher_env {
            Some(var) if !var.is_empty() => Ok(Identity::Env(var)),
            _ => Err(crate::Error::ConfigMissing {
                key: "lease.pusherEnv".into(),
                needed: "lease.identity=env needs it: the name of the variable the server sets \
                         to the authenticated pusher (REMOTE_USER, GL_USER, ...)",
            }),
        },
        None => match pusher_env {
            Some(var) if var.is_empty() => Err(crate::Error::Config {
                key: "lease.pusherEnv".into(),
                value: var,
                expected: "the name of the variable the server sets to the authenticated \
                           pusher (REMOTE_USER, GL_USER, ...)",
            }),
            Some(var) => Ok(Identity::Env(var)),
            None => Ok(Identity::None),
        },
        Some(other) => Err(crate::Error::Config {
            key: "lease.identity".into(),
            value: other.to_owned(),
            expected: "push-cert or env",
        }),
    }
}

/// Establishes the pusher from the hook's environment under `identity`.
///
/// The value is the identity exactly as the server set it, never trimmed or otherwise
/// normalised: `"ops "` is not the administrator `ops`, and `" alice"` is not `alice`. An empty
/// (or unset) value is no identity.
pub fn pusher_from_env(identity: &Identity) -> Pusher {
    match identity {
        Identity::None => Pusher::Unknown,
        Identity::PushCert => {
            let status = std::env::var("GIT_PUSH_CERT_STATUS").unwrap_or_default();
            if status != "G" {
                return Pusher::Unauthenticated(if status.is_empty() {
                    "the push is not signed (use git push --signed)".into()
                } else {
                    format!("the push certificate's status is {status}, not G (good)")
                });
            }
            match std::env::var("GIT_PUSH_CERT_SIGNER") {
                Ok(signer) if !signer.is_empty() => Pusher::Known(signer),
                Ok(_) | Err(std::env::VarError::NotPresent) => Pusher::Unauthenticated(
                    "the push certificate's key is not in the allowed signers".into(),
                ),
                Err(std::env::VarError::NotUnicode(_)) => Pusher::Unauthenticated(
                    "the push certificate's signer is not valid UTF-8".into(),
                ),
            }
        }
        Identity::Env(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Pusher::Known(v),
            Ok(_) | Err(std::env::VarError::NotPresent) => {
                Pusher::Unauthenticated(format!("the server did not set {var}"))
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                Pusher::Unauthenticated(format!("the server set {var} to text that is not UTF-8"))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(identity: Identity, fences: &[&str], require_token: bool) -> Policy {
        Policy {
            max_skew: Duration::minutes(5),
            identity,
            admins: Vec::new(),
            fences: fences.iter().map(|f| (*f).to_owned()).collect(),
            fences_from: Source::Configured,
            require_token,
            token_from: Source::Configured,
            signers: None,
        }
    }

    #[test]
    fn a_fence_is_open_without_globs_or_without_both_identity_and_token() {
        let env = || Identity::Env("REMOTE_USER".into());
        assert!(policy(Identity::None, &[DEFAULT_FENCE], true)
            .open_fences()
            .is_empty());
        assert!(policy(env(), &[DEFAULT_FENCE], false)
            .open_fences()
            .is_empty());
        let open = policy(Identity::None, &[DEFAULT_FENCE], false).open_fences();
        assert!(open[0].contains("lease.requireToken=false"), "{open:?}");
        let open = policy(env(), &[], true).open_fences();
        assert!(open[0].contains("no work branch is fenced"), "{open:?}");
    }

    #[test]
    fn the_summary_names_identity_fence_token_and_admins() {
        let lines = policy(Identity::PushCert, &["refs/heads/wip/*"], true).summary();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].starts_with("identity: signed pushes"));
        assert!(lines[1].contains("refs/heads/wip/* (lease.fence)"));
        assert!(lines[2].contains("required on a fenced push (lease.requireToken)"));
        assert_eq!(lines[3], "admins: none (lease.admins)");
    }
}
