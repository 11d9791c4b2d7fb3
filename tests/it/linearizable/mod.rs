//! A linearizability checker for recorded lease histories, after Wing and Gong's search with
//! Lowe's memoisation (the algorithm Porcupine implements), over a sequential model of one lease
//! register per issue whose transitions are the library's own rules ([`git_lease::rules`]).
//!
//! A history is a set of operations, each with the instant it was invoked and the instant it
//! returned (from one monotonic clock), its input and what it answered. An operation whose
//! answer was lost (a dropped reply, a cut connection, a killed client) has no return: it may
//! have taken effect at any point after its invocation, or never, as Jepsen treats its `info`
//! operations; its answer is not compared. An operation known to have had no effect (a push the
//! server refused) is left out of the history by its recorder.
//!
//! The history is linearizable if some order of its operations that keeps real-time order (an
//! operation that returned before another was invoked comes first) and places every answered
//! operation, replayed through the model, gives every answered operation the answer it got.
//! Issues are independent registers, so the history is checked one issue at a time
//! ([`check`]), which keeps each search small.
//!
//! stateright's linearizability tester checks histories its own actor model produces and has no
//! notion of an operation that may or may not have happened; this checker reads a history
//! recorded from real processes instead, and is small enough to be read whole.

mod tests;

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use git_lease::rules::{self, Current};
use git_lease::{Ending, Holder, IssueId, Lease, Outcome, Ttl};

/// What a client asked of one issue, at the instant its command was told (`GIT_LEASE_NOW`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// `acquire --holder <holder> --ttl <ttl_secs>s`.
    Acquire {
        holder: String,
        ttl_secs: i64,
        now: DateTime<Utc>,
    },
    /// `renew --holder <holder> --ttl <ttl_secs>s`.
    Renew {
        holder: String,
        ttl_secs: i64,
        now: DateTime<Utc>,
    },
    /// `release --holder <holder>`.
    Release { holder: String, now: DateTime<Utc> },
    /// The fencing check of `token` (`check --token`, or a fenced push judged at `now`).
    Check { token: u64, now: DateTime<Utc> },
}

/// What an operation answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Acquired { token: u64 },
    Held,
    Renewed { token: u64 },
    NotHolder,
    Released,
    NotHeld,
    CheckOk,
    CheckFailed,
}

/// One recorded operation.
#[derive(Clone, Debug)]
pub struct Op {
    /// Which client ran it (for messages).
    pub client: usize,
    /// The issue it is about.
    pub issue: String,
    /// When it was invoked, in nanoseconds of the recorder's monotonic clock.
    pub call: u64,
    /// When it returned, or `None` when its outcome is unknown (it may have happened at any
    /// point after `call`, or never).
    pub ret: Option<u64>,
    pub input: Input,
    /// What it answered; not compared when `ret` is `None`.
    pub output: Option<Output>,
}

impl Op {
    fn end(&self) -> u64 {
        self.ret.unwrap_or(u64::MAX)
    }
}

/// The sequential model: one lease register, its transitions [`git_lease::rules`]' own.
///
/// `expiry_off_by` seconds are added to every expiry the rules record (zero for the real
/// rules): a model built with one is a deliberately broken build of the rules, for the
/// checker's own tests (one second counts a lease live at its expiry instant).
#[derive(Clone, Copy, Debug, Default)]
pub struct Model {
    pub expiry_off_by: i64,
}

impl Model {
    /// Applies `input` to `state`: the answer, and the state after it.
    pub fn step(
        &self,
        issue: &IssueId,
        state: &Option<Lease>,
        input: &Input,
    ) -> (Output, Option<Lease>) {
        let current = state.as_ref().map(Current::recorded);
        let holder = |name: &str| Holder::new(name).expect("a recorded holder name is valid");
        let ttl = |secs: i64| {
            Ttl::parse(&format!("{}s", secs + self.expiry_off_by)).expect("a recorded TTL is valid")
        };
        let (outcome, next) = match input {
            Input::Acquire {
                holder: h,
                ttl_secs,
                now,
            } => {
                let claim = git_lease::Claim::new(holder(h), ttl(*ttl_secs));
                let t = rules::acquire(issue, current, &claim, *now);
                (t.outcome, t.next)
            }
            Input::Renew {
                holder: h,
                ttl_secs,
                now,
            } => {
                let t = rules::renew(current, &holder(h), ttl(*ttl_secs), *now);
                (t.outcome, t.next)
            }
            Input::Release { holder: h, now } => {
                let t = rules::release(issue, current, &holder(h), Ending::Release, *now);
                (t.outcome, t.next)
            }
            Input::Check { token, now } => {
                let answer = match rules::check(current, *token, None, *now) {
                    Ok(()) => Output::CheckOk,
                    Err(_) => Output::CheckFailed,
                };
                return (answer, state.clone());
            }
        };
        let after = next.or_else(|| state.clone());
        let token = after.as_ref().map_or(0, |l| l.token);
        let answer = match outcome {
            Outcome::Acquired => Output::Acquired { token },
            Outcome::Held => Output::Held,
            Outcome::Renewed => Output::Renewed { token },
            Outcome::NotHolder | Outcome::WrongSecret | Outcome::Skipped => Output::NotHolder,
            Outcome::Released | Outcome::Revoked => Output::Released,
            Outcome::NotHeld => Output::NotHeld,
        };
        (answer, after)
    }
}

/// Why a history is not linearizable (or could not be decided).
#[derive(Debug)]
pub struct Violation {
    pub issue: String,
    /// The longest order of operations the search could place, as indices into the issue's
    /// operations, and the operations it could not place after it.
    pub placed: Vec<usize>,
    pub unplaced: Vec<usize>,
    pub ops: Vec<Op>,
    /// True when the search gave up at its budget rather than exhausting every order.
    pub gave_up: bool,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.gave_up {
            "could not be decided within the search budget"
        } else {
            "is not linearizable"
        };
        writeln!(
            f,
            "the history of issue {} {verdict}; longest linearization:",
            self.issue
        )?;
        for &i in &self.placed {
            writeln!(f, "  {}", show(&self.ops[i]))?;
        }
        writeln!(f, "then none of these fits:")?;
        for &i in &self.unplaced {
            writeln!(f, "  {}", show(&self.ops[i]))?;
        }
        Ok(())
    }
}

fn show(op: &Op) -> String {
    let ret = op.ret.map_or("unknown".to_owned(), |r| r.to_string());
    format!(
        "client {} [{} .. {ret}] {:?} -> {:?}",
        op.client, op.call, op.input, op.output
    )
}

/// How many (linearized set, state) pairs one issue's search may visit before giving up.
const BUDGET: usize = 2_000_000;

/// Checks `history` issue by issue; returns the first violation found.
pub fn check(model: Model, history: &[Op]) -> Result<(), Box<Violation>> {
    let mut by_issue: BTreeMap<&str, Vec<Op>> = BTreeMap::new();
    for op in history {
        by_issue
            .entry(op.issue.as_str())
            .or_default()
            .push(op.clone());
    }
    for (issue, ops) in by_issue {
        check_one(model, issue, ops)?;
    }
    Ok(())
}

/// The search over one issue's operations.
fn check_one(model: Model, issue: &str, mut ops: Vec<Op>) -> Result<(), Box<Violation>> {
    ops.sort_by_key(|op| (op.call, op.end()));
    let id: IssueId = issue.parse().expect("a recorded issue id is valid");
    let n = ops.len();
    let words = n.div_ceil(64);
    let answered = ops.iter().filter(|op| op.ret.is_some()).count();
    let mut search = Search {
        model,
        id: &id,
        ops: &ops,
        seen: HashSet::new(),
        best: Vec::new(),
        order: Vec::new(),
        answered,
        gave_up: false,
    };
    let mut done = vec![0u64; words];
    if search.dfs(&mut done, &None, 0) {
        return Ok(());
    }
    let placed = search.best.clone();
    let unplaced = (0..n)
        .filter(|i| !placed.contains(i) && ops[*i].ret.is_some())
        .collect();
    let gave_up = search.gave_up;
    Err(Box::new(Violation {
        issue: issue.to_owned(),
        placed,
        unplaced,
        ops,
        gave_up,
    }))
}

struct Search<'a> {
    model: Model,
    id: &'a IssueId,
    ops: &'a [Op],
    /// (linearized set, state) pairs already explored without success.
    seen: HashSet<(Vec<u64>, String)>,
    best: Vec<usize>,
    order: Vec<usize>,
    answered: usize,
    gave_up: bool,
}

impl Search<'_> {
    /// Tries to extend the linearization `done` (in state `state`, `placed_answered` answered
    /// operations placed so far) until every answered operation is placed; operations whose
    /// outcome is unknown may be left out (they never happened, or happened after the rest).
    fn dfs(&mut self, done: &mut Vec<u64>, state: &Option<Lease>, placed_answered: usize) -> bool {
        if placed_answered == self.answered {
            return true;
        }
        if self.seen.len() >= BUDGET {
            self.gave_up = true;
            return false;
        }
        let key = (done.clone(), state_key(state));
        if !self.seen.insert(key) {
            return false;
        }
        let is_done = |done: &[u64], i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        // The earliest return among the operations not placed yet: nothing invoked after it
        // can come next.
        let horizon = (0..self.ops.len())
            .filter(|&i| !is_done(done, i))
            .map(|i| self.ops[i].end())
            .min()
            .unwrap_or(u64::MAX);
        for i in 0..self.ops.len() {
            if is_done(done, i) {
                continue;
            }
            let op = &self.ops[i];
            if op.call > horizon {
                break;
            }
            let (answer, next) = self.model.step(self.id, state, &op.input);
            if op.ret.is_some() && op.output.as_ref() != Some(&answer) {
                continue;
            }
            done[i / 64] |= 1 << (i % 64);
            self.order.push(i);
            if self.order.len() > self.best.len() {
                self.best = self.order.clone();
            }
            let found = self.dfs(done, &next, placed_answered + usize::from(op.ret.is_some()));
            self.order.pop();
            done[i / 64] &= !(1 << (i % 64));
            if found {
                return true;
            }
            if self.gave_up {
                return false;
            }
        }
        false
    }
}

fn state_key(state: &Option<Lease>) -> String {
    serde_json::to_string(state).expect("a lease serializes")
}
