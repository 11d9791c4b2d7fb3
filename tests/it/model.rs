//! Property test of the library against a model written from the rules' description.
//!
//! Random sequences of acquire / renew / release (or complete, abandon) / check / reads by
//! holders a, b and c on two issues, with random TTLs and a clock that only moves forward (by
//! random amounts, or to an expiry give or take a second), are run against a real
//! [`git_lease::Ledger`] on a temporary repository and against [`Model`], a few lines of plain
//! state. After every step the outcomes, the written/not-written flag and the recorded state
//! must agree; at the end the ledger's `log()` replayed from the root must give the same state.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use git_lease::{
    Claim, Ending, Event, FenceFailure, Holder, IssueId, Ledger, Outcome, Report, Store, Ttl,
};
use proptest::prelude::*;

use crate::env::{t0, TestRepo};

fn holder_named(name: &str) -> Holder {
    Holder::new(name).unwrap()
}

const HOLDERS: [&str; 3] = ["a", "b", "c"];
const ISSUES: [&str; 2] = ["7", "gh/8"];

#[derive(Clone, Debug)]
enum Op {
    Acquire {
        issue: usize,
        holder: usize,
        ttl: Option<i64>,
    },
    Renew {
        issue: usize,
        holder: usize,
        ttl: Option<i64>,
    },
    Release {
        issue: usize,
        holder: usize,
        ending: usize,
    },
    Check {
        issue: usize,
        token_delta: i64,
        holder: Option<usize>,
    },
    Read {
        issue: usize,
    },
    Advance(i64),
    ToExpiry {
        issue: usize,
        delta: i64,
    },
}

fn ttl() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![1 => Just(None), 4 => (1i64..=600).prop_map(Some)]
}

fn op() -> impl Strategy<Value = Op> {
    let issue = 0..ISSUES.len();
    let holder = 0..HOLDERS.len();
    prop_oneof![
        4 => (issue.clone(), holder.clone(), ttl())
            .prop_map(|(issue, holder, ttl)| Op::Acquire { issue, holder, ttl }),
        2 => (issue.clone(), holder.clone(), ttl())
            .prop_map(|(issue, holder, ttl)| Op::Renew { issue, holder, ttl }),
        3 => (issue.clone(), holder.clone(), 0..3usize)
            .prop_map(|(issue, holder, ending)| Op::Release { issue, holder, ending }),
        2 => (issue.clone(), -1i64..=1, proptest::option::of(holder))
            .prop_map(|(issue, token_delta, holder)| Op::Check { issue, token_delta, holder }),
        1 => issue.clone().prop_map(|issue| Op::Read { issue }),
        3 => (0i64..=900).prop_map(Op::Advance),
        2 => (issue, -1i64..=1).prop_map(|(issue, delta)| Op::ToExpiry { issue, delta }),
    ]
}

/// The recorded state of one issue, as the model keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tenure {
    holder: Option<String>,
    token: u64,
    acquired_at: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
}

/// Why the model's fencing check fails.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fence {
    Never,
    NotLive(u64),
    Stale(u64, String),
    WrongHolder(String),
}

/// One issue's lease, modelled directly from the rules as stated in the design.
#[derive(Clone, Debug, Default)]
struct Model {
    state: Option<Tenure>,
    commits: usize,
}

impl Model {
    fn live(&self, now: DateTime<Utc>) -> Option<&str> {
        let s = self.state.as_ref()?;
        let holder = s.holder.as_deref()?;
        match s.expires_at {
            Some(e) if now >= e => None,
            _ => Some(holder),
        }
    }

    fn token(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.token)
    }

    /// Returns the outcome and whether a commit is written.
    fn acquire(&mut self, holder: &str, ttl: Option<i64>, now: DateTime<Utc>) -> (Outcome, bool) {
        let expiry = ttl.map(|s| now + Duration::seconds(s));
        match self.live(now).map(str::to_owned) {
            Some(h) if h == holder => {
                let s = self.state.as_mut().expect("live means recorded");
                let wrote = s.expires_at != expiry;
                s.expires_at = expiry;
                self.commits += usize::from(wrote);
                (Outcome::Acquired, wrote)
            }
            Some(_) => (Outcome::Held, false),
            None => {
                self.state = Some(Tenure {
                    holder: Some(holder.to_owned()),
                    token: self.token() + 1,
                    acquired_at: Some(now),
                    expires_at: expiry,
                });
                self.commits += 1;
                (Outcome::Acquired, true)
            }
        }
    }

    fn renew(&mut self, holder: &str, ttl: Option<i64>, now: DateTime<Utc>) -> (Outcome, bool) {
        if self.live(now) != Some(holder) {
            return (Outcome::NotHolder, false);
        }
        let expiry = ttl.map(|s| now + Duration::seconds(s));
        let s = self.state.as_mut().expect("live means recorded");
        let wrote = s.expires_at != expiry;
        s.expires_at = expiry;
        self.commits += usize::from(wrote);
        (Outcome::Renewed, wrote)
    }

    fn release(&mut self, holder: &str, now: DateTime<Utc>) -> (Outcome, bool) {
        let Some(s) = &self.state else {
            return (Outcome::NotHeld, false);
        };
        if s.holder.is_none() {
            return (Outcome::NotHeld, false);
        }
        if self.live(now).is_some_and(|h| h != holder) {
            return (Outcome::NotHolder, false);
        }
        self.state = Some(Tenure {
            holder: None,
            token: self.token(),
            acquired_at: None,
            expires_at: None,
        });
        self.commits += 1;
        (Outcome::Released, true)
    }

    fn check(&self, token: u64, holder: Option<&str>, now: DateTime<Utc>) -> Result<(), Fence> {
        let Some(s) = &self.state else {
            return Err(Fence::Never);
        };
        let Some(live) = self.live(now) else {
            return Err(Fence::NotLive(s.token));
        };
        if s.token != token {
            return Err(Fence::Stale(s.token, live.to_owned()));
        }
        match holder {
            Some(h) if h != live => Err(Fence::WrongHolder(live.to_owned())),
            _ => Ok(()),
        }
    }
}

fn fence(f: &FenceFailure) -> Fence {
    match f {
        FenceFailure::NotLive { last_token: None } => Fence::Never,
        FenceFailure::NotLive {
            last_token: Some(t),
        } => Fence::NotLive(*t),
        FenceFailure::StaleToken { current, holder } => Fence::Stale(*current, holder.clone()),
        FenceFailure::WrongHolder { holder } => Fence::WrongHolder(holder.clone()),
    }
}

fn tenure_of(lease: &git_lease::Lease) -> Tenure {
    Tenure {
        holder: lease.holder.clone(),
        token: lease.token,
        acquired_at: lease.acquired_at,
        expires_at: lease.expires_at,
    }
}

/// Asserts that `report` has the model's outcome and written flag.
#[track_caller]
fn assert_answer(report: &Report, (outcome, wrote): (Outcome, bool), context: &str) {
    assert_eq!(
        (report.outcome, report.wrote),
        (outcome, wrote),
        "{context}"
    );
}

/// Opens the ledger without reading any configuration outside the repository.
fn open(path: &Path) -> Ledger {
    let repo = gix::open_opts(path, gix::open::Options::isolated()).expect("open the repository");
    Ledger::from_store(Store::from_repo(repo).expect("a files-backend repository"))
}

/// Counts the object files (loose objects and pack files) under the git dir.
fn object_files(git_dir: &Path) -> usize {
    let objects = git_dir.join("objects");
    let mut n = 0;
    for dir in std::fs::read_dir(&objects).expect("objects dir").flatten() {
        let name = dir.file_name();
        let name = name.to_string_lossy();
        if (name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit())) || name == "pack" {
            n += std::fs::read_dir(dir.path()).expect("read").count();
        }
    }
    n
}

struct World {
    repo: TestRepo,
    ledger: Ledger,
    ids: Vec<IssueId>,
    models: Vec<Model>,
    now: DateTime<Utc>,
}

impl World {
    fn new() -> World {
        let repo = TestRepo::new();
        let ledger = open(repo.path());
        World {
            ledger,
            repo,
            ids: ISSUES
                .iter()
                .map(|i| IssueId::new(i).expect("valid"))
                .collect(),
            models: vec![Model::default(); ISSUES.len()],
            now: t0(),
        }
    }

    /// Everything a write could change: the tips and the object files.
    fn footprint(&self) -> (Vec<Option<String>>, usize) {
        let tips = self
            .ids
            .iter()
            .map(|id| {
                self.ledger
                    .store()
                    .tip(id)
                    .expect("read tip")
                    .map(|t| t.to_string())
            })
            .collect();
        (tips, object_files(&self.repo.git_dir()))
    }

    /// Asserts the recorded state of `issue` equals the model's.
    fn assert_state(&self, issue: usize, context: &str) {
        let current = self.ledger.current(&self.ids[issue]).expect("current");
        assert_eq!(
            current.as_ref().map(|e| tenure_of(&e.lease)),
            self.models[issue].state,
            "{context}: recorded state of {}",
            ISSUES[issue]
        );
    }

    /// Asserts that `report` has the model's outcome and written flag (`want`) and reports
    /// the model's state of `issue`.
    #[track_caller]
    fn assert_report(&self, issue: usize, report: &Report, want: (Outcome, bool), context: &str) {
        assert_answer(report, want, context);
        assert_eq!(
            report.lease().map(tenure_of),
            self.models[issue].state,
            "{context}"
        );
    }

    fn step(&mut self, op: &Op) {
        let now = self.now;
        let context = format!("{op:?} at {now}");
        match *op {
            Op::Acquire { issue, holder, ttl } => {
                let before = self.models[issue].token();
                let claim = Claim::new(holder_named(HOLDERS[holder]), to_ttl(ttl));
                let report = self
                    .ledger
                    .acquire(&self.ids[issue], &claim, now)
                    .expect("acquire");
                let want = self.models[issue].acquire(HOLDERS[holder], ttl, now);
                assert_answer(&report, want, &context);
                let lease = report.lease().expect("an acquire reports the lease");
                if report.outcome == Outcome::Acquired {
                    assert_eq!(lease.holder.as_deref(), Some(HOLDERS[holder]), "{context}");
                    if lease.event == Event::Acquire && report.wrote {
                        assert_eq!(lease.token, before + 1, "{context}: one more per tenure");
                    } else {
                        assert_eq!(lease.token, before, "{context}: same tenure, same token");
                    }
                }
                assert_eq!(
                    Some(tenure_of(lease)),
                    self.models[issue].state,
                    "{context}"
                );
            }
            Op::Renew { issue, holder, ttl } => {
                let report = self
                    .ledger
                    .renew(
                        &self.ids[issue],
                        &holder_named(HOLDERS[holder]),
                        to_ttl(ttl),
                        now,
                    )
                    .expect("renew");
                let want = self.models[issue].renew(HOLDERS[holder], ttl, now);
                self.assert_report(issue, &report, want, &context);
            }
            Op::Release {
                issue,
                holder,
                ending,
            } => {
                let ending = [Ending::Release, Ending::Complete, Ending::Abandon][ending];
                let report = self
                    .ledger
                    .release(
                        &self.ids[issue],
                        &holder_named(HOLDERS[holder]),
                        ending,
                        now,
                    )
                    .expect("release");
                let want = self.models[issue].release(HOLDERS[holder], now);
                self.assert_report(issue, &report, want, &context);
            }
            Op::Check {
                issue,
                token_delta,
                holder,
            } => {
                let token = u64::try_from((self.models[issue].token() as i64 + token_delta).max(0))
                    .expect("non-negative");
                let holder = holder.map(|h| HOLDERS[h]);
                let before = self.footprint();
                let got = self
                    .ledger
                    .check(&self.ids[issue], token, holder, now)
                    .expect("check");
                assert_eq!(self.footprint(), before, "{context}: check wrote");
                let want = self.models[issue].check(token, holder, now);
                match (&got, &want) {
                    (Ok(entry), Ok(())) => {
                        assert_eq!(entry.lease.token, token, "{context}");
                    }
                    (Err((why, _)), Err(want)) => assert_eq!(&fence(why), want, "{context}"),
                    _ => panic!("{context}: ledger said {got:?}, model said {want:?}"),
                }
            }
            Op::Read { issue } => {
                let before = self.footprint();
                self.ledger.current(&self.ids[issue]).expect("current");
                self.ledger.list().expect("list");
                self.ledger.log(&self.ids[issue]).expect("log");
                let _ = self.ledger.resolve(ISSUES[issue]);
                assert_eq!(self.footprint(), before, "{context}: a read wrote");
            }
            Op::Advance(secs) => self.now += Duration::seconds(secs),
            Op::ToExpiry { issue, delta } => {
                if let Some(e) = self.models[issue].state.as_ref().and_then(|s| s.expires_at) {
                    let target = e + Duration::seconds(delta);
                    if target > self.now {
                        self.now = target;
                    }
                }
            }
        }
        for issue in 0..ISSUES.len() {
            self.assert_state(issue, &context);
            self.assert_one_live_holder(issue, &context);
        }
    }

    /// At most one holder passes the fencing check with the current token, and it is the
    /// model's live holder.
    fn assert_one_live_holder(&self, issue: usize, context: &str) {
        let token = self.models[issue].token();
        let passing: Vec<&str> = HOLDERS
            .iter()
            .copied()
            .filter(|h| {
                self.ledger
                    .check(&self.ids[issue], token, Some(h), self.now)
                    .expect("check")
                    .is_ok()
            })
            .collect();
        assert!(
            passing.len() <= 1,
            "{context}: several live holders {passing:?}"
        );
        assert_eq!(
            passing.first().copied(),
            self.models[issue].live(self.now),
            "{context}: live holder of {}",
            ISSUES[issue]
        );
    }

    /// Replays `log()` from the root and checks it gives the current state, one entry per
    /// written event, linked parent to child.
    fn assert_replay(&self) {
        let listed = self.ledger.list().expect("list");
        assert_eq!(
            listed.len(),
            self.models.iter().filter(|m| m.state.is_some()).count(),
            "list has one entry per leased issue"
        );
        for (issue, model) in self.models.iter().enumerate() {
            let id = &self.ids[issue];
            let log = self.ledger.log(id).expect("log");
            assert_eq!(log.len(), model.commits, "one log entry per write of {id}");
            let current = self.ledger.current(id).expect("current");
            assert_eq!(log.first(), current.as_ref(), "log starts at the tip");
            for pair in log.windows(2) {
                assert_eq!(pair[0].parent, Some(pair[1].commit), "linked");
            }
            if let Some(root) = log.last() {
                assert_eq!(root.parent, None, "the oldest entry is a root");
            }
            let mut replayed: Option<Tenure> = None;
            for entry in log.iter().rev() {
                let l = &entry.lease;
                let prev = replayed.clone();
                let prev_token = prev.as_ref().map_or(0, |p| p.token);
                assert_eq!(l.issue, id.as_str());
                match l.event {
                    Event::Acquire => {
                        assert_eq!(l.token, prev_token + 1, "{l:?}");
                        assert_eq!(l.acquired_at, Some(l.at), "{l:?}");
                        assert!(l.holder.is_some(), "{l:?}");
                    }
                    Event::Reacquire | Event::Renew => {
                        let p = prev.expect("something to extend");
                        assert_eq!(l.holder, p.holder, "{l:?}");
                        assert_eq!(l.token, p.token, "{l:?}");
                        assert_eq!(l.acquired_at, p.acquired_at, "{l:?}");
                        assert!(
                            p.expires_at.is_none_or(|e| l.at < e),
                            "extended while live: {l:?}"
                        );
                    }
                    Event::Release | Event::Complete | Event::Abandon => {
                        let p = prev.expect("something to free");
                        assert_eq!(l.holder, None, "{l:?}");
                        assert_eq!(l.token, p.token, "{l:?}");
                        assert_eq!(l.previous_holder.as_deref(), p.holder.as_deref(), "{l:?}");
                    }
                    Event::Revoke => panic!("nobody revoked: {l:?}"),
                }
                replayed = Some(tenure_of(l));
            }
            assert_eq!(replayed, model.state, "replaying the log of {id}");
        }
    }
}

fn to_ttl(ttl: Option<i64>) -> Ttl {
    ttl.map_or(Ttl::Never, |s| Ttl::For(Duration::seconds(s)))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_ledger_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..=30)) {
        let mut world = World::new();
        for op in &ops {
            world.step(op);
        }
        world.assert_replay();
    }
}

#[test]
fn the_model_test_covers_expiry_boundaries() {
    // A fixed sequence through the exact expiry instant, so the boundary is exercised on
    // every run whatever proptest draws.
    let mut world = World::new();
    for op in [
        Op::Acquire {
            issue: 0,
            holder: 0,
            ttl: Some(60),
        },
        Op::ToExpiry {
            issue: 0,
            delta: -1,
        },
        Op::Acquire {
            issue: 0,
            holder: 1,
            ttl: Some(60),
        },
        Op::Renew {
            issue: 0,
            holder: 0,
            ttl: Some(60),
        },
        Op::ToExpiry { issue: 0, delta: 0 },
        Op::Renew {
            issue: 0,
            holder: 0,
            ttl: Some(60),
        },
        Op::Check {
            issue: 0,
            token_delta: 0,
            holder: Some(0),
        },
        Op::Acquire {
            issue: 0,
            holder: 1,
            ttl: None,
        },
        Op::Acquire {
            issue: 0,
            holder: 1,
            ttl: None,
        },
        Op::Release {
            issue: 0,
            holder: 2,
            ending: 0,
        },
        Op::Release {
            issue: 0,
            holder: 1,
            ending: 1,
        },
        Op::Release {
            issue: 0,
            holder: 1,
            ending: 0,
        },
        Op::Read { issue: 0 },
    ] {
        world.step(&op);
    }
    world.assert_replay();
    assert_eq!(world.models[0].token(), 2);
    assert_eq!(world.models[0].commits, 4);
}
