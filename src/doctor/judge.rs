//! Doctor's compare-and-swap probe for a write: the first write through a push URL that no
//! doctor has judged runs it once ([`crate::remote::Remote`]), so that one winner holds on any
//! server without a manual step.

use chrono::{DateTime, Utc};

use super::engine::{self, Cas, Refused};
use crate::ledger::Ledger;
use crate::probe::ProbeReport;
use crate::remote::Remote;

/// What the probe found of a server's compare-and-swap, for a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Finding {
    /// Claims through it hold: it refused a stale expected old value, or it serves one
    /// connection at a time (what was seen).
    Holds(String),
    /// It ignores the expected old value: what it did.
    Ignored(String),
    /// The probe could not tell, for a reason that lasts (the server's hooks decline the probe
    /// ref: a server that runs hooks is git's receive-pack or one like it).
    Untold(String),
    /// The probe could not tell this time (why): a later write probes again.
    Failed(String),
}

/// What the probe found of a server: its compare-and-swap, and whether its hook said it judges
/// every fold of the archive ([`crate::probe::ProbeReport::judges_archive`]).
pub(crate) struct Judgement {
    pub(crate) finding: Finding,
    pub(crate) archive_judged: bool,
}

/// Runs doctor's compare-and-swap probe against `remote` (its scratch ref made, raced,
/// read and deleted), with commits dated `now`.
pub(crate) fn cas(
    ledger: &Ledger,
    remote: &Remote,
    now: DateTime<Utc>,
) -> crate::Result<Judgement> {
    let (scratch, nonce, probe) = engine::scratch("git-lease-probe-")?;
    let commits = ledger.store().write_probe(&nonce, now)?;
    // A hook of git-lease runs in git's own receive-pack, which refuses a stale expected old
    // value: its word, in one push that writes nothing, spares the race.
    let heard = engine::report_only(remote, &probe, commits[0], scratch.path());
    if let Some(report) = heard.filter(ProbeReport::judges_archive) {
        return Ok(Judgement {
            finding: Finding::Holds(format!(
                "its git-lease {} hook answered: git's receive-pack, which refuses a stale \
                 expected old value",
                report.version
            )),
            archive_judged: true,
        });
    }
    let probed = engine::probe(remote, &probe, commits, scratch.path());
    let archive_judged = probed
        .report
        .as_ref()
        .is_some_and(ProbeReport::judges_archive);
    let finding = match (probed.cas, probed.refused) {
        (Cas::Honoured, _) => {
            Finding::Holds("it refused a push whose expected old value was stale".into())
        }
        (Cas::OneAtATime(secs), _) => Finding::Holds(format!(
            "it took no second connection within {secs}s: one connection at a time"
        )),
        (Cas::Ignored(what), _) => Finding::Ignored(what),
        (Cas::Unknown(_), Some(Refused::Hook(_))) => {
            Finding::Untold("the server's hooks declined the probe ref".into())
        }
        (Cas::Unknown(why), Some(Refused::Push(message))) => {
            Finding::Failed(format!("{why}: {message}"))
        }
        (Cas::Unknown(why), None) => Finding::Failed(why),
    };
    Ok(Judgement {
        finding,
        archive_judged,
    })
}
