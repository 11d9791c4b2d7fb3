//! The matrix of cases: every event type, pusher role and data variant, the ledger each case
//! starts from and the step it pushes.

use super::*;

/// What the pushed commit does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Event {
    /// A new tenure of an issue never leased.
    AcquireFree,
    /// A new tenure over alice's lease, expired a minute ago.
    AcquireExpired,
    /// A new tenure over alice's live lease, recorded as `takeover: expired`.
    AcquireLive,
    /// A new tenure over alice's live lease, recorded as `takeover: process_gone` of a process
    /// that ran on another machine (which the server cannot check).
    AcquireProcessGone,
    /// alice's live lease acquired again.
    Reacquire,
    /// alice's live lease renewed.
    Renew,
    /// alice's live lease released.
    Release,
    /// alice's live lease completed.
    Complete,
    /// alice's live lease abandoned.
    Abandon,
    /// alice's lease, expired a minute ago, released by whoever pushes (`by`).
    ReleaseExpired,
    /// alice's live lease revoked.
    Revoke,
}

impl Event {
    const ALL: [Event; 11] = [
        Event::AcquireFree,
        Event::AcquireExpired,
        Event::AcquireLive,
        Event::AcquireProcessGone,
        Event::Reacquire,
        Event::Renew,
        Event::Release,
        Event::Complete,
        Event::Abandon,
        Event::ReleaseExpired,
        Event::Revoke,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Event::AcquireFree => "acquire-free",
            Event::AcquireExpired => "acquire-expired",
            Event::AcquireLive => "acquire-live",
            Event::AcquireProcessGone => "acquire-process-gone",
            Event::Reacquire => "reacquire",
            Event::Renew => "renew",
            Event::Release => "release",
            Event::Complete => "complete",
            Event::Abandon => "abandon",
            Event::ReleaseExpired => "release-expired",
            Event::Revoke => "revoke",
        }
    }

    /// The `event` recorded in `lease.json`.
    pub(super) fn recorded(self) -> &'static str {
        match self {
            Event::AcquireFree
            | Event::AcquireExpired
            | Event::AcquireLive
            | Event::AcquireProcessGone => "acquire",
            Event::Reacquire => "reacquire",
            Event::Renew => "renew",
            Event::Release | Event::ReleaseExpired => "release",
            Event::Complete => "complete",
            Event::Abandon => "abandon",
            Event::Revoke => "revoke",
        }
    }

    pub(super) fn is_acquire(self) -> bool {
        self.recorded() == "acquire"
    }

    /// Who would do this step in the ordinary course of things: what a forged `by` names.
    pub(super) fn rightful(self) -> &'static str {
        match self {
            Event::AcquireFree
            | Event::Reacquire
            | Event::Renew
            | Event::Release
            | Event::Complete
            | Event::Abandon => HOLDER,
            Event::AcquireExpired
            | Event::AcquireLive
            | Event::AcquireProcessGone
            | Event::ReleaseExpired => OTHER,
            Event::Revoke => ADMIN,
        }
    }
}

/// Who pushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// alice, the holder of every prior lease, authenticated.
    Holder,
    /// bob, authenticated.
    Other,
    /// ops, authenticated and in `lease.admins`.
    Admin,
    /// Nobody authenticated: a `file://` push without `REMOTE_USER`.
    Anonymous,
}

impl Role {
    const ALL: [Role; 4] = [Role::Holder, Role::Other, Role::Admin, Role::Anonymous];

    /// The authenticated identity, if any.
    pub(super) fn user(self) -> Option<&'static str> {
        match self {
            Role::Holder => Some(HOLDER),
            Role::Other => Some(OTHER),
            Role::Admin => Some(ADMIN),
            Role::Anonymous => None,
        }
    }

    /// The name the pusher records for itself.
    pub(super) fn name(self) -> &'static str {
        self.user().unwrap_or(NOBODY)
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Role::Anonymous => "anonymous",
            _ => self.name(),
        }
    }
}

/// What the pushed data says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Variant {
    /// The pusher's own step, acting as itself: its own name as a new tenure's holder, and as
    /// `by` wherever it acts on alice's lease (the holder's own steps name nobody else).
    Honest,
    /// The step as alice would record it, whoever pushes: alice as a new tenure's holder, no
    /// `by`.
    Impersonating,
    /// The honest step with `by` naming someone other than the pusher (the step's rightful
    /// actor, or a third name if that is the pusher).
    ForgedBy,
    /// The honest step, dated (within the skew) when it would be legitimate though it is not
    /// at the server's clock: a renew or reacquire backdated to a minute before the expiry,
    /// a takeover or release of someone else's lease dated a minute after it.
    Misdated,
    /// The honest step dated 6 minutes ahead of the server's clock, beyond the skew.
    BeyondSkew,
    /// A release of alice's live lease recorded as `takeover: process_gone` of her process
    /// on another machine.
    Unverifiable,
    /// The `process_gone` takeover or release of alice's lease whose process ran on the
    /// server's own machine and PID namespace and is gone: something the server can verify.
    VerifiedGone,
    /// The same takeover or release, of a process recorded on the server's machine (its boot
    /// id) but in another PID namespace (another container's): its pid says nothing here.
    OtherNamespace,
    /// The same, of a process recorded on the server's machine without its PID namespace (a
    /// record from before it was recorded): unknown, never gone.
    NoNamespace,
}

impl Variant {
    const ALL: [Variant; 9] = [
        Variant::Honest,
        Variant::Impersonating,
        Variant::ForgedBy,
        Variant::Misdated,
        Variant::BeyondSkew,
        Variant::Unverifiable,
        Variant::VerifiedGone,
        Variant::OtherNamespace,
        Variant::NoNamespace,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Variant::Honest => "honest",
            Variant::Impersonating => "impersonating",
            Variant::ForgedBy => "forged-by",
            Variant::Misdated => "misdated",
            Variant::BeyondSkew => "beyond-skew",
            Variant::Unverifiable => "unverifiable",
            Variant::VerifiedGone => "verified-gone",
            Variant::OtherNamespace => "other-pid-namespace",
            Variant::NoNamespace => "no-pid-namespace",
        }
    }

    pub(super) fn applies(self, event: Event, role: Role) -> bool {
        match self {
            Variant::Honest | Variant::ForgedBy | Variant::BeyondSkew => true,
            // alice impersonating herself is her honest step; a revoke names its actor in `by`.
            Variant::Impersonating => role != Role::Holder && event != Event::Revoke,
            Variant::Misdated => matches!(
                event,
                Event::AcquireExpired | Event::ReleaseExpired | Event::Reacquire | Event::Renew
            ),
            Variant::Unverifiable => event == Event::ReleaseExpired,
            Variant::VerifiedGone | Variant::OtherNamespace | Variant::NoNamespace => {
                matches!(event, Event::AcquireProcessGone | Event::ReleaseExpired)
            }
        }
    }
}

/// One push of the matrix.
pub(super) struct Case {
    pub(super) event: Event,
    pub(super) role: Role,
    pub(super) variant: Variant,
    pub(super) issue: String,
    /// The ledger the server has before the push (the administrator's setup), oldest first.
    pub(super) prior: Vec<Value>,
    /// The `lease.json` of the one pushed commit.
    pub(super) next: Value,
}

impl Case {
    pub(super) fn describe(&self) -> String {
        format!(
            "{} pushes {} ({})",
            self.role.label(),
            self.event.name(),
            self.variant.name()
        )
    }
}

/// A `process` object of `lease.json` (without `pid_ns` where `pid_ns` is `None`).
pub(super) fn process(boot_id: &str, pid_ns: Option<u64>, pid: u32, start_ticks: u64) -> Value {
    let mut p = json!({ "pid": pid, "boot_id": boot_id, "start_ticks": start_ticks });
    if let Some(ns) = pid_ns {
        p["pid_ns"] = json!(ns);
    }
    p
}

/// A holder process on another machine: the server cannot tell whether it is gone.
pub(super) fn process_elsewhere() -> Value {
    process("another-machine", Some(1), 4242, 1)
}

/// A holder process on the server's machine, in the PID namespace `pid_ns`, that looks gone
/// by this namespace's pids: this test's own pid with another start time (a recycled pid).
/// Verifiably gone in the server's own namespace only.
pub(super) fn process_gone_here(boot_id: &str, pid_ns: Option<u64>) -> Value {
    process(boot_id, pid_ns, std::process::id(), 1)
}

/// The ledger the server has before the case's push.
pub(super) fn prior_ledger(
    issue: &str,
    event: Event,
    variant: Variant,
    facts: &Facts,
) -> Vec<Value> {
    // alice's lease acquired 2 minutes ago, live for 10 more minutes.
    let live = || acquired(issue, HOLDER, 1, -120, Some(720));
    let live_with = |p: Value| vec![with(live(), "process", p)];
    match (event, variant) {
        (Event::AcquireFree, _) => Vec::new(),
        // Live for one more minute by the server's clock.
        (Event::AcquireExpired | Event::ReleaseExpired, Variant::Misdated) => {
            vec![acquired(issue, HOLDER, 1, -500, Some(560))]
        }
        // Expired a minute ago by the server's clock.
        (Event::Reacquire | Event::Renew, Variant::Misdated) => {
            vec![acquired(issue, HOLDER, 1, -400, Some(340))]
        }
        (_, Variant::VerifiedGone | Variant::OtherNamespace | Variant::NoNamespace) => {
            let boot = facts.boot_id.as_deref().unwrap_or("?");
            let ns = match variant {
                Variant::VerifiedGone => facts.pid_ns,
                Variant::OtherNamespace => facts.pid_ns.map(|ns| ns + 1),
                _ => None,
            };
            live_with(process_gone_here(boot, ns))
        }
        (Event::AcquireProcessGone, _) | (_, Variant::Unverifiable) => {
            live_with(process_elsewhere())
        }
        // Expired a minute ago by the server's clock.
        (Event::AcquireExpired | Event::ReleaseExpired, _) => {
            vec![acquired(issue, HOLDER, 1, -700, Some(640))]
        }
        _ => vec![live()],
    }
}

/// The `lease.json` of the case's pushed commit.
pub(super) fn pushed_step(
    issue: &str,
    event: Event,
    role: Role,
    variant: Variant,
    prior: Option<&Value>,
) -> Value {
    let at_s = match (variant, event) {
        (Variant::Misdated, Event::Reacquire | Event::Renew) => -120,
        (Variant::Misdated, _) => 120,
        (Variant::BeyondSkew, _) => SKEW_S + 60,
        _ => 0,
    };
    let me = role.name();
    // Who the data names as acting.
    let named = if variant == Variant::Impersonating {
        HOLDER
    } else {
        me
    };
    let by: Option<&str> = if variant == Variant::ForgedBy {
        Some(if event.rightful() != me {
            event.rightful()
        } else {
            THIRD
        })
    } else if event == Event::Revoke {
        Some(named)
    } else if event.is_acquire() {
        None
    } else {
        // The holder's own steps and the release of her expired lease: alice is the previous
        // holder of every one; anyone else records itself.
        (named != HOLDER).then_some(named)
    };
    let previous = prior.and_then(|p| p["holder"].as_str());
    let token = prior.map_or(0, |p| p["token"].as_u64().expect("token"));
    let takeover_kind = if matches!(
        variant,
        Variant::Unverifiable
            | Variant::VerifiedGone
            | Variant::OtherNamespace
            | Variant::NoNamespace
    ) || event == Event::AcquireProcessGone
    {
        "process_gone"
    } else {
        "expired"
    };
    let mut v = match event.recorded() {
        "acquire" => {
            let mut v = acquired(issue, named, token + 1, at_s, Some(TTL_S));
            if let Some(h) = previous {
                v["previous_holder"] = json!(h);
                v["takeover"] = json!(takeover_kind);
            }
            v
        }
        recorded @ ("reacquire" | "renew") => {
            let mut v = prior.expect("a live lease").clone();
            v["event"] = json!(recorded);
            v["at"] = json!(at(at_s));
            v["expires_at"] = json!(at(at_s + TTL_S));
            v
        }
        recorded => {
            let previous = previous.expect("a held lease");
            let mut v = freed(issue, recorded, previous, token, at_s);
            if event == Event::Revoke {
                v["reason"] = json!("stuck");
            } else if by.is_some_and(|b| b != previous) {
                v["takeover"] = json!(takeover_kind);
            }
            v
        }
    };
    if let Some(by) = by {
        v["by"] = json!(by);
    }
    v
}

/// Every case of the matrix, each with its own issue.
pub(super) fn cases(facts: &Facts) -> Vec<Case> {
    let mut cases = Vec::new();
    for event in Event::ALL {
        for role in Role::ALL {
            for variant in Variant::ALL {
                if !variant.applies(event, role)
                    || (matches!(variant, Variant::VerifiedGone | Variant::OtherNamespace)
                        && (facts.boot_id.is_none() || facts.pid_ns.is_none()))
                {
                    continue;
                }
                let issue = format!("{}.{}.{}", event.name(), role.label(), variant.name());
                let prior = prior_ledger(&issue, event, variant, facts);
                let next = pushed_step(&issue, event, role, variant, prior.last());
                cases.push(Case {
                    event,
                    role,
                    variant,
                    issue,
                    prior,
                    next,
                });
            }
        }
    }
    cases
}
