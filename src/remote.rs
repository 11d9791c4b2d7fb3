//! Claims through a remote: the remote is the authority, `git push` with an expected old value
//! is the compare-and-swap.
//!
//! gix cannot push, so pushes and fetches run the git CLI, which brings every transport and
//! the credentials git has configured. What the remote was last seen to hold is kept in
//! remote-tracking lease refs, `refs/lease-remotes/<remote>/<issue>`, the way
//! `refs/remotes/<remote>/*` tracks branches. A write decides optimistically from that copy and
//! pushes against it, so an uncontended claim is one round trip; when the push finds the
//! remote moved, or the copy says someone else holds the lease, it fetches and decides again
//! with the same rules. After a push lands, the local `refs/leases/<issue>` is set to exactly
//! what the remote accepted.

use std::process::{Command, Stdio};
use std::time::Duration;

use gix::ObjectId;

use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};
use crate::lease::Lease;
use crate::ledger::{resolve_among, Ledger, Report};
use crate::rules::Transition;
use crate::store::Entry;

/// The namespace of remote-tracking lease refs.
pub const TRACKING_PREFIX: &str = "refs/lease-remotes/";

/// How many times a write fetches and decides again after losing the push race, by default.
pub const DEFAULT_ATTEMPTS: u32 = 12;

/// A remote that holds the authoritative lease refs.
pub struct Remote<'a> {
    ledger: &'a Ledger,
    remote: String,
    tracking: String,
    attempts: u32,
}

/// What one push told us.
enum PushResult {
    Done,
    Lost,
    Refused(String),
}

impl<'a> Remote<'a> {
    /// Returns the remote `remote` (a configured remote's name, or a URL) of `ledger`'s
    /// repository.
    pub fn new(ledger: &'a Ledger, remote: &str) -> Result<Remote<'a>> {
        if remote.is_empty() || remote.starts_with('-') {
            return Err(Error::InvalidInput(format!(
                "invalid remote {remote:?}: give a remote name or a URL"
            )));
        }
        let store = ledger.store();
        let configured = store
            .config_string(&format!("remote.{remote}.url"))
            .is_some();
        let slug = if configured && IssueId::new(remote).is_ok() && !remote.contains('/') {
            remote.to_owned()
        } else {
            format!("url-{:016x}", fnv1a(remote.as_bytes()))
        };
        let attempts = store
            .config_string("lease.pushAttempts")
            .and_then(|s| s.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_ATTEMPTS);
        Ok(Remote {
            ledger,
            remote: remote.to_owned(),
            tracking: format!("{TRACKING_PREFIX}{slug}/"),
            attempts,
        })
    }

    /// Returns the remote as given.
    pub fn name(&self) -> &str {
        &self.remote
    }

    /// Returns the ref prefix under which this remote's lease refs are tracked locally.
    pub fn tracking_prefix(&self) -> &str {
        &self.tracking
    }

    fn tracking_ref(&self, issue: &IssueId) -> String {
        format!("{}{}", self.tracking, issue)
    }

    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir").arg(self.ledger.store().git_dir());
        cmd.env_remove("GIT_DIR").stdin(Stdio::null());
        cmd
    }

    /// Fetches the remote's `refs/leases/<issue>` into its tracking ref.
    ///
    /// Returns the remote's tip, or `None` if the remote has no such lease.
    pub fn fetch_one(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        let refspec = format!("+{}:{}", issue.ref_name(), self.tracking_ref(issue));
        let mut cmd = self.git();
        cmd.args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
        ])
        .arg(&self.remote)
        .arg(&refspec);
        let out = run(cmd, &format!("git fetch {} {refspec}", self.remote))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("couldn't find remote ref") {
                return Ok(None);
            }
            return Err(Error::Transport {
                command: format!("git fetch {} {refspec}", self.remote),
                message: stderr.trim().to_owned(),
            });
        }
        self.ledger.store().tip_of(&self.tracking_ref(issue))
    }

    /// Fetches every `refs/leases/*` of the remote into the tracking refs in one fetch, and
    /// returns them as `(issue, tip)`.
    pub fn fetch_all(&self) -> Result<Vec<(String, ObjectId)>> {
        let refspec = format!("+{REF_PREFIX}*:{}*", self.tracking);
        let mut cmd = self.git();
        cmd.args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--prune",
            "--",
        ])
        .arg(&self.remote)
        .arg(&refspec);
        let out = run(cmd, &format!("git fetch {} {refspec}", self.remote))?;
        if !out.status.success() {
            return Err(Error::Transport {
                command: format!("git fetch --prune {} {refspec}", self.remote),
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        self.tracked()
    }

    /// Returns the tracking refs as last fetched, as `(issue, tip)`.
    pub fn tracked(&self) -> Result<Vec<(String, ObjectId)>> {
        self.ledger.store().refs_under(&self.tracking)
    }

    /// Returns the newest entry of `issue` as last fetched.
    pub fn tracked_entry(&self, issue: &IssueId) -> Result<Option<Entry>> {
        let store = self.ledger.store();
        store
            .tip_of(&self.tracking_ref(issue))?
            .map(|tip| {
                store
                    .entry(issue.as_str(), tip)
                    .map(|e| self.ledger.observe(e))
            })
            .transpose()
    }

    /// Fetches `issue` and returns its newest entry on the remote.
    pub fn current(&self, issue: &IssueId) -> Result<Option<Entry>> {
        match self.fetch_one(issue)? {
            None => Ok(None),
            Some(tip) => Ok(Some(
                self.ledger
                    .observe(self.ledger.store().entry(issue.as_str(), tip)?),
            )),
        }
    }

    /// Fetches all leases and returns the newest entry of each, sorted by issue.
    pub fn list(&self) -> Result<Vec<Entry>> {
        let refs = self.fetch_all()?;
        let (entries, _) = crate::cache::list(self.ledger.store(), &self.tracking, refs)?;
        Ok(entries
            .into_iter()
            .map(|e| self.ledger.observe(e))
            .collect())
    }

    /// Fetches `issue` and returns its ledger on the remote, newest first.
    pub fn log(&self, issue: &IssueId) -> Result<Vec<Entry>> {
        let tip = self.fetch_one(issue)?;
        self.ledger.store().history(issue.as_str(), tip)
    }

    /// Resolves an id or unique prefix against the remote's leases: first against the copy
    /// last fetched, then, if nothing matches there, after fetching them all.
    pub fn resolve(&self, prefix: &str) -> Result<IssueId> {
        let local = self.tracked()?;
        match resolve_among(prefix, local.iter().map(|(n, _)| n.as_str())) {
            Err(Error::NoSuchLease(_)) => {
                let all = self.fetch_all()?;
                resolve_among(prefix, all.iter().map(|(n, _)| n.as_str()))
            }
            other => other,
        }
    }

    /// Applies one rule to the remote's ledger of `issue` under compare-and-swap by push.
    ///
    /// The first decision is made from the tracking copy; any answer that writes nothing is
    /// confirmed against a fresh fetch, so a refusal always reflects the remote. A lost push
    /// fetches and decides again, with jittered backoff, up to the attempt limit; then it
    /// fails with [`Error::LostRace`] having changed nothing.
    pub fn apply(
        &self,
        issue: &IssueId,
        mut decide: impl FnMut(Option<&Lease>) -> Transition,
    ) -> Result<Report> {
        let store = self.ledger.store();
        let mut fresh = false;
        let mut current = self.tracked_entry(issue)?;
        for attempt in 0..self.attempts {
            let transition = decide(current.as_ref().map(|e| &e.lease));
            let Some(next) = transition.next else {
                if !fresh {
                    current = self.current(issue)?;
                    fresh = true;
                    continue;
                }
                return Ok(Report::unchanged(transition.outcome, issue, current));
            };
            let parent = current.as_ref().map(|e| e.commit);
            let commit = store.write(&next, parent)?;
            match self.push(&[(issue.clone(), commit, parent)])? {
                PushResult::Done => {
                    self.record_accepted(issue, commit, &next)?;
                    return Ok(Report::written(
                        transition.outcome,
                        issue,
                        commit,
                        parent,
                        next,
                    ));
                }
                PushResult::Refused(message) => {
                    return Err(Error::PushRefused {
                        issue: issue.to_string(),
                        message,
                    })
                }
                PushResult::Lost => {
                    if fresh {
                        backoff(attempt);
                    }
                    current = self.current(issue)?;
                    fresh = true;
                }
            }
        }
        Err(Error::LostRace {
            issue: issue.to_string(),
            attempts: self.attempts,
        })
    }

    /// Claims all of `issues` on the remote in one atomic push, or none of them.
    pub fn acquire_all(
        &self,
        issues: &[IssueId],
        claim: &crate::rules::Claim,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<Report>> {
        crate::lease::validate_holder(&claim.holder)?;
        for attempt in 0..self.attempts {
            let currents = issues
                .iter()
                .map(|issue| self.current(issue))
                .collect::<Result<Vec<_>>>()?;
            // The remote's own refs decide clashes: its push refuses them.
            let (reports, edits) = self
                .ledger
                .write_planned(issues, currents, claim, now, false)?;
            if edits.is_empty() {
                return Ok(reports);
            }
            match self.push(&edits)? {
                PushResult::Done => {
                    for r in &reports {
                        if let (true, Some(e)) = (r.wrote, &r.entry) {
                            self.record_accepted(&r.issue, e.commit, &e.lease)?;
                        }
                    }
                    return Ok(reports);
                }
                PushResult::Refused(message) => {
                    return Err(Error::PushRefused {
                        issue: issues
                            .iter()
                            .map(|i| i.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        message,
                    })
                }
                PushResult::Lost => backoff(attempt),
            }
        }
        Err(Error::LostRace {
            issue: issues
                .iter()
                .map(|i| i.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            attempts: self.attempts,
        })
    }

    /// Sets the tracking ref and the local lease ref to what the remote accepted.
    fn record_accepted(&self, issue: &IssueId, commit: ObjectId, lease: &Lease) -> Result<()> {
        let store = self.ledger.store();
        let message = format!("git-lease: {} via {}", lease.event, self.remote);
        store.set_ref(&self.tracking_ref(issue), commit, &message)?;
        store.set_ref(&issue.ref_name(), commit, &message)
    }

    /// Pushes `edits` as `(issue, new, expected old)` in one atomic push with a lease on each
    /// old value.
    fn push(&self, edits: &[(IssueId, ObjectId, Option<ObjectId>)]) -> Result<PushResult> {
        let mut cmd = self.git();
        cmd.args(["push", "--porcelain", "--atomic", "--no-verify"]);
        for (issue, _, old) in edits {
            cmd.arg(format!(
                "--force-with-lease={}:{}",
                issue.ref_name(),
                old.map(|o| o.to_string()).unwrap_or_default()
            ));
        }
        cmd.arg("--").arg(&self.remote);
        for (issue, new, _) in edits {
            cmd.arg(format!("{new}:{}", issue.ref_name()));
        }
        let shown = format!("git push --atomic {} refs/leases/…", self.remote);
        let out = run(cmd, &shown)?;
        if out.status.success() {
            return Ok(PushResult::Done);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let rejections: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
        if rejections.iter().any(|l| l.contains("hook declined")) {
            let said: Vec<&str> = stderr
                .lines()
                .filter_map(|l| l.strip_prefix("remote: "))
                .map(str::trim_end)
                .filter(|l| !l.is_empty())
                .collect();
            let message = if said.is_empty() {
                "the server's hook declined it".to_owned()
            } else {
                said.join("; ")
            };
            return Ok(PushResult::Refused(message));
        }
        const LOST: [&str; 8] = [
            "stale info",
            "atomic push failed",
            "atomic transaction failed",
            "failed to update ref",
            "cannot lock ref",
            "incorrect old value",
            "fetch first",
            "non-fast-forward",
        ];
        if !rejections.is_empty()
            && rejections
                .iter()
                .all(|l| LOST.iter().any(|reason| l.contains(reason)))
        {
            return Ok(PushResult::Lost);
        }
        let detail = if rejections.is_empty() {
            stderr.trim().to_owned()
        } else {
            format!("{}\n{}", rejections.join("\n"), stderr.trim())
        };
        Err(Error::Transport {
            command: shown,
            message: detail,
        })
    }
}

fn run(mut cmd: Command, shown: &str) -> Result<std::process::Output> {
    cmd.output().map_err(|e| Error::Transport {
        command: shown.to_owned(),
        message: format!("cannot run git: {e}"),
    })
}

/// Sleeps before retry `attempt` (0-based): exponential from 10 ms, capped at 640 ms, with
/// full jitter, so that racers spread out instead of colliding again in step.
fn backoff(attempt: u32) {
    let ceiling_ms = 10u64 << attempt.min(6);
    let ms = fastrand::u64(ceiling_ms / 2..=ceiling_ms);
    std::thread::sleep(Duration::from_millis(ms));
}

/// A stable, dependency-free hash for naming a URL's tracking namespace.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
