//! What a remote holds, verified: fetches land in `refs/lease-incoming/<remote>/`; each
//! ledger's new commits are judged ([`crate::step::judge`]) against what was verified before,
//! and only then does `refs/lease-remotes/<remote>/<issue>` move. A ledger the remote rewound
//! or rewrote is reported ([`Diverged`]), never taken.

use std::collections::BTreeMap;

use gix::ObjectId;

use super::{backoff, run, Remote};
use crate::error::{Error, Result};
use crate::issue::{IssueId, REF_PREFIX};
use crate::step::{Judgement, Rule};
use crate::store::{Entry, Place};
use crate::verify;

/// How many times a fetch is retried when a concurrent command in the same clone holds the
/// lock of a ref it updates.
const FETCH_LOCK_ATTEMPTS: u32 = 12;

/// How many times `lease.networkTimeout` a fetch of every ledger may take.
const WHOLE_FETCH_FACTOR: u32 = 10;

/// How a remote's ledger departs from what this clone verified before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Divergence {
    /// The remote's ledger is behind what was seen, or gone: history was cut back.
    Rewound,
    /// The remote's ledger left the seen history, or its new commits break a rule.
    Rewritten,
}

impl Divergence {
    /// Returns `rewound` or `rewritten`.
    pub fn as_str(self) -> &'static str {
        match self {
            Divergence::Rewound => "rewound",
            Divergence::Rewritten => "rewritten",
        }
    }
}

/// One remote ledger that was refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diverged {
    /// The issue.
    pub issue: String,
    /// How it diverged.
    pub divergence: Divergence,
    /// The tip this clone verified before (kept in the tracking ref).
    pub seen: Option<String>,
    /// The remote's tip now (`None`: the remote no longer has the ledger).
    pub remote: Option<String>,
    /// What exactly is wrong, in one line.
    pub detail: String,
    /// The rules the remote's new commits break, when that is why.
    pub findings: Vec<verify::Finding>,
}

impl Diverged {
    /// Returns the error a command that needs this ledger fails with.
    pub fn into_error(self, remote: &str) -> Error {
        Error::RemoteDiverged {
            remote: remote.to_owned(),
            issue: self.issue,
            divergence: self.divergence.as_str(),
            detail: self.detail,
        }
    }
}

/// What one fetch of every lease ref found.
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    /// The remote's lease refs as fetched, `(issue, tip)`, sorted by issue.
    pub remote: Vec<(String, ObjectId)>,
    /// The verified tracking refs afterwards, `(issue, tip)`, sorted by issue, without the
    /// diverged ledgers.
    pub verified: Vec<(String, ObjectId)>,
    /// The ledgers the remote rewound or rewrote; their tracking refs keep what was verified.
    pub diverged: Vec<Diverged>,
}

impl Remote<'_> {
    /// Runs `git fetch` with `args`, retrying while a concurrent command in this clone holds
    /// the lock of a ref it would update. Returns git's output of the last attempt.
    pub(crate) fn fetch(&self, args: &[&str], shown: &str) -> Result<std::process::Output> {
        self.fetch_configured(&[], args, shown)
    }

    /// Runs `git fetch` with `args` as [`Remote::fetch`] does, for a fetch of every ledger:
    /// its time limit is ten times `lease.networkTimeout`, since a first fetch of a large
    /// history moves many objects.
    fn fetch_every(&self, args: &[&str], shown: &str) -> Result<std::process::Output> {
        let limit = self.network_timeout.map(|l| l * WHOLE_FETCH_FACTOR);
        self.fetch_within(&[], args, shown, limit)
    }

    /// Runs `git -c <config>… fetch <args>` as [`Remote::fetch`] does.
    pub(crate) fn fetch_configured(
        &self,
        config: &[&str],
        args: &[&str],
        shown: &str,
    ) -> Result<std::process::Output> {
        self.fetch_within(config, args, shown, self.network_timeout)
    }

    fn fetch_within(
        &self,
        config: &[&str],
        args: &[&str],
        shown: &str,
        limit: Option<std::time::Duration>,
    ) -> Result<std::process::Output> {
        self.fetch_into(
            self.ledger.store().git_dir(),
            config,
            &[],
            args,
            shown,
            limit,
        )
    }

    /// Runs `git fetch` as [`Remote::fetch_configured`] does, in the repository at `git_dir`
    /// (this clone's, or its archive index of the remote), with `env` set, for at most
    /// `limit`.
    pub(crate) fn fetch_into(
        &self,
        git_dir: &std::path::Path,
        config: &[&str],
        env: &[(String, String)],
        args: &[&str],
        shown: &str,
        limit: Option<std::time::Duration>,
    ) -> Result<std::process::Output> {
        let mut attempt = 0;
        loop {
            let mut cmd = self.git_in(git_dir)?;
            for c in config {
                cmd.arg("-c").arg(c);
            }
            // `--refmap=`: only the refspecs given here move refs, never one the user
            // configured for the remote (git's opportunistic remote-tracking update would
            // move them to commits nothing has verified yet).
            // No FETCH_HEAD, no maintenance after it: a read leaves nothing else behind.
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            cmd.env("LC_ALL", "C")
                .arg("fetch")
                .arg("--refmap=")
                .args(["--no-write-fetch-head", "--no-auto-maintenance"])
                .args(args);
            let out = run(cmd, shown, limit)?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let locked = stderr.contains("cannot lock ref") || stderr.contains(".lock");
            if out.status.success() || !locked || attempt + 1 >= FETCH_LOCK_ATTEMPTS {
                return Ok(out);
            }
            backoff(attempt);
            attempt += 1;
        }
    }

    /// Fetches the remote's `refs/leases/<issue>` and verifies what is new.
    ///
    /// Returns the remote's tip, now also the tracking ref's, and where it is: the remote's
    /// ref, or, when the remote has no such ref, its archive ([`Place::Archive`]: a claim
    /// revives the ledger). `None` if neither has the ledger; [`Error::RemoteDiverged`] if the
    /// remote rewound or rewrote the ledger this clone verified before, or its archive.
    pub fn fetch_one(&self, issue: &IssueId) -> Result<Option<(ObjectId, Place)>> {
        let answer = self.settled(
            || {
                self.forget_archive();
                // What was verified is read before the fetch: a command of this clone may
                // verify newer history meanwhile, which this fetch would not be behind.
                let seen = self.seen_tip(issue)?;
                let fetched = self.fetch_tip(issue)?;
                let verdict = self.judge_fetched(issue.as_str(), seen, fetched)?;
                if let Ok(Some(tip)) = verdict {
                    if Some(tip) != seen {
                        self.track(&[(issue.as_str(), tip, seen)]);
                    }
                }
                let place = if fetched.is_some() {
                    Place::Ref
                } else {
                    Place::Archive
                };
                Ok(match verdict {
                    // Never seen here, and not on the remote: the archive may have it.
                    Ok(None) => match self.archived_tip(issue.as_str())? {
                        Some(archived) => self
                            .judge_fetched(issue.as_str(), None, Some(archived))?
                            .map(|tip| tip.map(|t| (t, Place::Archive))),
                        None => Ok(None),
                    },
                    verdict => verdict.map(|tip| tip.map(|t| (t, place))),
                })
            },
            |verdict| verdict.is_err(),
        )?;
        answer.map_err(|diverged| diverged.into_error(&self.shown))
    }

    /// Runs `read` (a fetch and its verdict) again while `diverged` says it found a
    /// divergence, twice at most: concurrent fetches of one clone share the staging refs, so
    /// one may briefly find another's older snapshot there. A real rewind is found every time.
    pub(crate) fn settled<T>(
        &self,
        mut read: impl FnMut() -> Result<T>,
        diverged: impl Fn(&T) -> bool,
    ) -> Result<T> {
        let mut answer = read()?;
        for _ in 0..2 {
            if !diverged(&answer) {
                break;
            }
            answer = read()?;
        }
        Ok(answer)
    }

    /// Fetches `issue`'s ledger into the staging ref and returns its tip there (`None`: the
    /// remote has no such ledger).
    fn fetch_tip(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        let incoming = self.incoming_ref(issue);
        if !self.fetch_exact(&issue.ref_name(), &incoming)? {
            return Ok(None);
        }
        self.ledger.store().tip_of(&incoming)
    }

    /// Fetches the remote's one ref `src` into `dst`, forced. Returns `false` when the remote
    /// has no such ref (nothing fetched), [`Error::Transport`] for any other failure.
    pub(crate) fn fetch_exact(&self, src: &str, dst: &str) -> Result<bool> {
        let refspec = format!("+{src}:{dst}");
        let shown = format!("git fetch {} {refspec}", self.shown);
        let out = self.fetch(
            &["--quiet", "--no-tags", "--", &self.remote, &refspec],
            &shown,
        )?;
        if out.status.success() {
            return Ok(true);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("couldn't find remote ref") {
            return Ok(false);
        }
        Err(Error::Transport {
            command: shown,
            message: stderr.trim().to_owned(),
        })
    }

    /// Fetches every `refs/leases/*` of the remote in one fetch and verifies what is new in
    /// each ledger.
    pub fn fetch_all(&self) -> Result<Fetched> {
        self.settled(|| self.fetch_all_once(), |f| !f.diverged.is_empty())
    }

    pub(crate) fn fetch_all_once(&self) -> Result<Fetched> {
        let store = self.ledger.store();
        self.forget_archive();
        // What was verified is read before the fetch (see `fetch_one`).
        let seen = self.seen_all()?;
        let refspec = format!("+{REF_PREFIX}*:{}*", self.incoming);
        let shown = format!("git fetch --prune {} {refspec}", self.shown);
        let out = self.fetch_every(
            &[
                "--quiet",
                "--no-tags",
                "--prune",
                "--",
                &self.remote,
                &refspec,
            ],
            &shown,
        )?;
        if !out.status.success() {
            return Err(Error::Transport {
                command: shown,
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        let remote = store.refs_under(&self.incoming)?;
        let mut fetched = Fetched {
            remote: Vec::with_capacity(remote.len()),
            ..Fetched::default()
        };
        // Every issue either side has: (the remote's tip, the tip verified before).
        let mut sides: std::collections::BTreeMap<String, (Option<ObjectId>, Option<ObjectId>)> =
            std::collections::BTreeMap::new();
        for (issue, tip) in remote {
            sides.entry(issue).or_default().0 = Some(tip);
        }
        for (issue, tip) in seen {
            sides.entry(issue).or_default().1 = Some(tip);
        }
        let mut moves = Vec::new();
        for (issue, (remote_tip, seen_tip)) in &sides {
            if let Some(tip) = remote_tip {
                fetched.remote.push((issue.clone(), *tip));
            }
            match self.judge_fetched(issue, *seen_tip, *remote_tip)? {
                Ok(Some(tip)) => {
                    if Some(tip) != *seen_tip {
                        moves.push((issue.as_str(), tip, *seen_tip));
                    }
                    fetched.verified.push((issue.clone(), tip));
                }
                Ok(None) => {}
                Err(diverged) => fetched.diverged.push(diverged),
            }
        }
        self.track(&moves);
        Ok(fetched)
    }

    /// Decides whether the remote's `fetched` tip of `issue` may replace the `seen` one: it
    /// must descend from it, and its new commits must pass the transition rules. Returns the
    /// tip to track (the caller moves the tracking ref) or why it was refused.
    pub(crate) fn judge_fetched(
        &self,
        issue: &str,
        seen: Option<ObjectId>,
        fetched: Option<ObjectId>,
    ) -> Result<std::result::Result<Option<ObjectId>, Diverged>> {
        let store = self.ledger.store();
        let diverged = |divergence, detail: String| Diverged {
            issue: issue.to_owned(),
            divergence,
            seen: seen.map(|s| s.to_string()),
            remote: fetched.map(|f| f.to_string()),
            detail,
            findings: Vec::new(),
        };
        let Some(tip) = fetched else {
            let Some(seen) = seen else {
                return Ok(Ok(None));
            };
            // A ledger ref goes only once the archive records its tip: the ledger is judged
            // there, from what was seen.
            return match self.archived_tip(issue)? {
                Some(archived) => self.judge_fetched(issue, Some(seen), Some(archived)),
                None => Ok(Err(diverged(
                    Divergence::Rewound,
                    format!(
                        "the remote no longer has this ledger, which was at {seen} here, and its archive does not record it"
                    ),
                ))),
            };
        };
        let unvouched = self.unvouched(issue, seen);
        if seen == Some(tip) && unvouched.is_none() {
            return Ok(Ok(Some(tip)));
        }
        let reading = self.ledger.reading();
        let judgement = Judgement::reader(reading.as_ref());
        let check = match seen {
            Some(seen) if seen == tip => verify::SegmentCheck::default(),
            _ => verify::verify_segment(store, issue, tip, seen, judgement),
        };
        if let Some(first) = check.findings.first() {
            let seen_text = seen.map_or_else(|| "none".to_owned(), |s| s.to_string());
            return Ok(Err(if first.rule == Rule::FastForward {
                match seen {
                    Some(seen) if verify::descends_from(store, seen, tip) => diverged(
                        Divergence::Rewound,
                        format!("the remote is at {tip}, behind {seen_text} seen here before"),
                    ),
                    _ => diverged(
                        Divergence::Rewritten,
                        format!(
                            "the remote is at {tip}, which does not descend from {seen_text} seen here before"
                        ),
                    ),
                }
            } else {
                Diverged {
                    findings: check.findings.clone(),
                    ..diverged(
                        Divergence::Rewritten,
                        format!("the remote's new commits break a rule: {first}"),
                    )
                }
            }));
        }
        if let Some(refused) = self.verify_again(issue, unvouched, tip, judgement) {
            let detail = format!(
                "the history verified here before breaks a rule under the allowed signers list now: {}",
                refused[0]
            );
            return Ok(Err(Diverged {
                findings: refused,
                ..diverged(Divergence::Rewritten, detail)
            }));
        }
        Ok(Ok(Some(tip)))
    }

    /// Returns `seen` when signatures are required and it was verified under another allowed
    /// signers list (or none): what was verified before is verified again under this one.
    fn unvouched(&self, issue: &str, seen: Option<ObjectId>) -> Option<ObjectId> {
        let vouched = self.vouched.as_ref()?;
        seen.filter(|s| vouched.recall_one(issue) != Some(*s))
    }

    /// Verifies the history up to `unvouched` again, from the root; returns its findings if
    /// it breaks a rule, else records `tip` as verified whole under the list read now.
    fn verify_again(
        &self,
        issue: &str,
        unvouched: Option<ObjectId>,
        tip: ObjectId,
        judgement: Judgement<'_>,
    ) -> Option<Vec<verify::Finding>> {
        if let Some(seen) = unvouched {
            let again = verify::verify_segment(self.ledger.store(), issue, seen, None, judgement);
            if !again.findings.is_empty() {
                return Some(again.findings);
            }
        }
        self.vouch(issue, tip);
        None
    }

    /// Records that `issue`'s ledger up to `tip` was verified whole under the allowed signers
    /// list read now, when signatures are required (best effort).
    fn vouch(&self, issue: &str, tip: ObjectId) {
        let Some(vouched) = &self.vouched else {
            return;
        };
        if vouched.recall_one(issue) != Some(tip) {
            vouched.remember([(issue, tip)]);
            vouched.forget_siblings();
        }
    }

    /// Moves the tracking refs of `moves` (`(issue, new, seen)`) to what was verified. Best
    /// effort: a concurrent command in this clone may have moved one on, or hold its lock; the
    /// next read verifies again from what is there.
    pub(crate) fn track(&self, moves: &[(&str, ObjectId, Option<ObjectId>)]) {
        if moves.is_empty() {
            return;
        }
        let recalled = self.recalled.borrow();
        let edits: Vec<(String, ObjectId, Option<ObjectId>)> = moves
            .iter()
            .map(|(issue, new, seen)| {
                // A tip recalled without its commit has no tracking ref to move from.
                let seen = seen.filter(|_| !recalled.contains(*issue));
                (format!("{}{issue}", self.tracking), *new, seen)
            })
            .collect();
        let moved = self
            .ledger
            .store()
            .move_refs(&edits, &format!("git-lease: verified from {}", self.shown));
        // Only what the tracking refs now say: a move another command overtook would
        // otherwise leave an older tip last in the memory.
        if moved.is_ok() {
            self.memory
                .remember(moves.iter().map(|(issue, new, _)| (*issue, *new)));
        }
    }

    /// Returns the tip of `issue` last verified from this remote: its tracking ref, or, when
    /// a fetch or prune the user ran deleted that, what the memory kept ([`memory`]).
    pub(crate) fn seen_tip(&self, issue: &IssueId) -> Result<Option<ObjectId>> {
        if let Some(tip) = self.ledger.store().tip_of(&self.tracking_ref(issue))? {
            return Ok(Some(tip));
        }
        let recalled = self.memory.recall_one(issue.as_str());
        if let Some(tip) = recalled {
            self.restore(&[(issue.as_str(), tip)]);
        }
        Ok(recalled)
    }

    /// Returns every tip last verified from this remote, as `(issue, tip)` sorted by issue:
    /// the tracking refs, and what the memory kept of any that are gone.
    pub(crate) fn seen_all(&self) -> Result<Vec<(String, ObjectId)>> {
        let mut seen: BTreeMap<String, ObjectId> = self.tracked()?.into_iter().collect();
        let mut missing = Vec::new();
        for (issue, tip) in self.memory.recall() {
            if !seen.contains_key(&issue) {
                missing.push((issue, tip));
            }
        }
        self.restore(
            &missing
                .iter()
                .map(|(i, t)| (i.as_str(), *t))
                .collect::<Vec<_>>(),
        );
        seen.extend(missing);
        Ok(seen.into_iter().collect())
    }

    /// Sets the tracking refs of `recalled` tips again where their commits are still here;
    /// notes the others, which are judged without a ref to move from.
    fn restore(&self, recalled: &[(&str, ObjectId)]) {
        let store = self.ledger.store();
        let mut edits = Vec::new();
        for (issue, tip) in recalled {
            if store.raw_entry(*tip).is_ok() {
                edits.push((format!("{}{issue}", self.tracking), *tip, None));
            } else {
                self.recalled.borrow_mut().insert((*issue).to_owned());
            }
        }
        if !edits.is_empty() {
            let _ = store.move_refs(&edits, "git-lease: recalled what was verified before");
        }
    }

    /// Returns the tracking refs, as last verified, as `(issue, tip)`.
    pub fn tracked(&self) -> Result<Vec<(String, ObjectId)>> {
        self.ledger.store().refs_under(&self.tracking)
    }

    /// Returns the newest entry of `issue` as last verified.
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
}
