//! The rules a ledger step can break, by the stable names `--json` output and hook refusals
//! give them.

use serde::Serialize;

/// A rule a ledger step can break. The names are stable: they appear in `--json` output and in
/// hook refusals.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A ledger commit has at most one parent (none for the first).
    SingleParent,
    /// A ledger commit's tree holds exactly one regular file, `lease.json`.
    Tree,
    /// `lease.json` is valid JSON of the documented shape.
    Json,
    /// `lease.json` is of a version this build knows.
    Version,
    /// `lease.json`'s issue is the ref's issue.
    Issue,
    /// A ledger starts with an acquire of token 1.
    FirstToken,
    /// The token grows by exactly one per new tenure and never otherwise.
    TokenStep,
    /// The holder changes, or someone else frees the lease (a revoke aside), only once it is
    /// no longer live (free, expired, or its holder process gone).
    HolderChange,
    /// Events are in time order and each state's times are consistent.
    TimeOrder,
    /// The event agrees with the state it records (a freed lease has no holder, a renew keeps
    /// the tenure, a release frees something that was held).
    Event,
    /// The ledger was rewound or rewritten: the new tip does not descend from the old one.
    FastForward,
    /// A pushed event's time is too far from the server's clock.
    ClockSkew,
    /// The step names an actor other than the authenticated pusher, or no pusher was
    /// authenticated.
    Identity,
    /// Only an administrator (`lease.admins`) may revoke.
    Admin,
    /// A takeover the server cannot check (a holder process on another machine or in another
    /// PID namespace, or one hidden from it).
    Unverifiable,
    /// With `lease.requireSignatures`, the step is not signed by a key of the allowed signers
    /// list that may make it ([`crate::rules::signers`]).
    Signature,
    /// The archive of quiet ledgers keeps every token: a fold records only free ledgers at
    /// their tips and never drops an entry; a ledger ref goes only once the archive records
    /// its tip; a revived ledger continues from its archived tip (docs/FORMAT.md, "The
    /// archive").
    Archive,
}

impl Rule {
    /// Returns the rule's stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::SingleParent => "single-parent",
            Rule::Tree => "tree",
            Rule::Json => "json",
            Rule::Version => "version",
            Rule::Issue => "issue",
            Rule::FirstToken => "first-token",
            Rule::TokenStep => "token-step",
            Rule::HolderChange => "holder-change",
            Rule::TimeOrder => "time-order",
            Rule::Event => "event",
            Rule::FastForward => "fast-forward",
            Rule::ClockSkew => "clock-skew",
            Rule::Identity => "identity",
            Rule::Admin => "admin",
            Rule::Unverifiable => "unverifiable",
            Rule::Signature => "signature",
            Rule::Archive => "archive",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule broken by one step, before it is tied to a commit.
pub type Violation = (Rule, String);
