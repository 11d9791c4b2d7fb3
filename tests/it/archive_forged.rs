//! Forged folds against the server hook (docs/FORMAT.md, "The archive"): a generator of pushes
//! to `refs/lease-archive`, each the honest next fold with one or more mutations, pushed with
//! plain git through a real `git daemon` with the hook installed, must each be refused by the
//! hook (`pre-receive hook declined`, the rule `archive`) while every ref of the server stays
//! as it was.
//!
//! The archive keeps the token count of every ledger it folds: a fold the hook lets through
//! that forgets an entry, moves one back, records a live lease or a tip its ref is not at, or
//! that readers would read otherwise than the hook judged it, lets a revival start over and
//! issue a token twice. So the attacker here builds folds byte by byte (`git hash-object
//! --literally`, which writes any tree and any commit git would store), starting from the fold
//! `git lease archive` would make next, and mutates:
//!
//! - the entries: one the previous fold records dropped; one moved to an older commit of its
//!   own ledger or to another ledger's tip; the live ledger recorded; a ledger recorded at a tip
//!   its ref is not at (an archived ledger moved on with no ref, a ledger never pushed); an
//!   entry at a wrong fan-out path, with mode `100644`, `100755`, `120000` or `040000` instead
//!   of a gitlink, or a gitlink to a tree, a blob, a tag or a missing object; an issue recorded
//!   twice in one tree, readers taking the first entry and the hook perhaps the last; an empty
//!   tree, or a `lease.json`, beside the fan-out; nothing recorded at all;
//! - the parents, after the entries (the attacker lists the tips its tree records, reading a
//!   doubled entry first-wins or last-wins): one missing, one extra (a duplicate included), two
//!   swapped, a first parent that is a ledger commit rather than the previous fold, none;
//! - the time: a committer time just or far outside `lease.maxClockSkew` (the honest time
//!   itself jitters within it);
//! - the object: an annotated tag of the fold, its tree, a blob, or a ledger commit pushed as
//!   the archive.
//!
//! The server is set up once for all cases (a start costs more than a push): ledgers `a` and
//! `b` released long ago and folded by `git lease archive` on the server, `a` revived and
//! released since, `d` (its lease expired) and `gh/7` quiet and not folded yet, `l` live. Every
//! mutation of the catalogue is tried alone on every run, then proptest draws combinations.
//!
//! Last, the honest fold the generator starts from is pushed, and the hook takes it: each
//! refusal was the mutation's. git's `receive-pack` then refuses the update itself, as it
//! refuses any of a ref one level under `refs/` ("funny refname"), whatever the hook said; so
//! the hook's verdict is also run on the server once the fold's objects are there, the
//! archive moved to the fold, and the server's own `git lease archive` finds every quiet
//! ledger recorded.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `GIT_LEASE_FORGED_FOLD_CASES` | 48 | generated cases, beside the catalogue |
//! | `GIT_LEASE_FORGED_FOLD_SEED` | 20261130 | proptest's seed |

use std::collections::HashSet;

use git_lease::store::entry_path;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use crate::adversary::env_number;
use crate::archive::on_server;
use crate::env::{at, t0, Run, TestRepo};
use crate::forge::{acquired, freed};
use crate::pushes::{chain_on, push, push_accepted};
use crate::server::Server;

/// The server's clock while the forged folds arrive, in seconds after [`crate::env::T0`].
const NOW: i64 = 900;

/// The default `lease.maxClockSkew`, in seconds: a fold's time may be this far from the clock.
const SKEW: i64 = 300;

/// What the hook says of each fold it refuses (`remote:` on the pusher's stderr).
const REFUSED: &str = "git-lease: refused refs/lease-archive at ";

/// The issues the honest next fold has an entry for: `a` and `b` carried or changed from the
/// previous fold, `d` and `gh/7` new.
const ENTRIES: [&str; 4] = ["a", "b", "d", "gh/7"];

/// The mode of a tree entry that is a tree, as git writes it.
const TREE: &str = "40000";

/// The mode of a gitlink.
const GITLINK: &str = "160000";

// ---------------------------------------------------------------------------------------------
// The server, its ledgers and its archive
// ---------------------------------------------------------------------------------------------

/// One ledger the attacker knows, pushed or not.
struct Ledger {
    issue: &'static str,
    /// Its commits, oldest first; the last is where its ref is (for `b`, archived, the tip
    /// the archive records).
    commits: Vec<String>,
}

/// The objects of a ledger tip an attacker puts where a gitlink belongs.
struct Objects {
    tree: String,
    blob: String,
    tag: String,
}

/// The served repository once set up, and the attacker's clone of it.
struct Scene {
    server: Server,
    client: TestRepo,
    /// The newest fold, made by `git lease archive` on the server.
    previous: String,
    /// Its entries.
    archived: Vec<Leaf>,
    /// What the honest next fold records, `(issue, tip)`.
    honest: Vec<(&'static str, String)>,
    /// Every ledger on the server, archived or with a ref: `a` (both tenures), `b`, `d`,
    /// `gh/7`, `l`.
    ledgers: Vec<Ledger>,
    /// `b` moved on past its archived tip in the attacker's clone alone: no ref is there.
    b_moved_on: String,
    /// The tip of `z`, a ledger never pushed.
    unpushed: String,
    /// The tree of no entries.
    empty_tree: String,
    /// The objects of each tip in [`ENTRIES`]' order.
    objects: Vec<Objects>,
    /// Every ref of the server before any forged push.
    refs: String,
}

impl Scene {
    fn new() -> Scene {
        let mut server = Server::with_hook();
        server.start_at(&at(0));
        let client = server.client("alice");
        let push_ledger = |issue: &str, commits: &[String]| {
            push_accepted(&server, &client, issue, commits);
        };

        // Released long ago, and folded by the server's own `git lease archive`.
        let a1 = chain_on(
            &client,
            None,
            &[
                acquired("a", "alice", 1, 0, Some(60)),
                freed("a", "release", "alice", 1, 10),
            ],
        );
        push_ledger("a", &a1);
        let b = chain_on(
            &client,
            None,
            &[
                acquired("b", "alice", 1, 0, Some(60)),
                freed("b", "release", "alice", 1, 5),
            ],
        );
        push_ledger("b", &b);
        let l = chain_on(
            &client,
            None,
            &[acquired("l", "alice", 1, 0, Some(30 * 86_400))],
        );
        push_ledger("l", &l);
        server.config("lease.hookNow", &at(300));
        on_server(&server, &at(300), &["archive", "--quiet-for", "1m"]);
        assert_eq!(server.tip("a"), None, "the fold removed a's ref");
        assert_eq!(server.tip("b"), None, "the fold removed b's ref");
        let previous = server.rev("refs/lease-archive").expect("an archive");

        // `a` revived on its archived tip, and released; two new quiet ledgers, `d`'s last lease
        // expired rather than released.
        let a2 = chain_on(
            &client,
            Some(&a1[1]),
            &[
                acquired("a", "alice", 2, 300, Some(60)),
                freed("a", "release", "alice", 2, 310),
            ],
        );
        push_ledger("a", &a2);
        let d = chain_on(
            &client,
            None,
            &[
                acquired("d", "alice", 1, 300, Some(60)),
                freed("d", "release", "alice", 1, 305),
                acquired("d", "alice", 2, 306, Some(10)),
            ],
        );
        push_ledger("d", &d);
        let g = chain_on(
            &client,
            None,
            &[
                acquired("gh/7", "alice", 1, 300, Some(60)),
                freed("gh/7", "release", "alice", 1, 301),
            ],
        );
        push_ledger("gh/7", &g);
        // In the attacker's clone only.
        let b_moved_on = chain_on(
            &client,
            Some(&b[1]),
            &[acquired("b", "alice", 2, 400, Some(60))],
        )
        .remove(0);
        let z = chain_on(
            &client,
            None,
            &[
                acquired("z", "alice", 1, 400, Some(60)),
                freed("z", "release", "alice", 1, 410),
            ],
        );
        server.config("lease.hookNow", &at(NOW));

        client.git(&[
            "fetch",
            "-q",
            "origin",
            "refs/lease-archive:refs/lease-archive",
        ]);
        let archived = leaves_of(&client, &previous);
        let honest = vec![
            ("a", a2[1].clone()),
            ("d", d[2].clone()),
            ("gh/7", g[1].clone()),
        ];
        // The fold the server's own folder would make now records exactly these.
        let out = on_server(
            &server,
            &at(NOW),
            &["--json", "archive", "--quiet-for", "1m", "--dry-run"],
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let would: Vec<(String, String)> = report["folded"]
            .as_array()
            .expect("folded")
            .iter()
            .map(|f| {
                (
                    f["issue"].as_str().unwrap().into(),
                    f["tip"].as_str().unwrap().into(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = honest
            .iter()
            .map(|(i, t)| ((*i).to_owned(), t.clone()))
            .collect();
        assert_eq!(would, expected, "the honest next fold is the server's own");

        let mut a = a1;
        a.extend(a2);
        let ledgers = [("a", a), ("b", b), ("d", d), ("gh/7", g), ("l", l)]
            .into_iter()
            .map(|(issue, commits)| Ledger { issue, commits })
            .collect();
        let empty_tree = client.git_stdin(
            &["hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
            b"",
        );
        let mut scene = Scene {
            refs: server.refs(),
            server,
            client,
            previous,
            archived,
            honest,
            ledgers,
            b_moved_on,
            unpushed: z[1].clone(),
            empty_tree,
            objects: Vec::new(),
        };
        scene.objects = ENTRIES
            .iter()
            .map(|issue| {
                let tip = scene.tip_of(issue).to_owned();
                let tag = format!(
                    "object {tip}\ntype commit\ntag forged\ntagger git-lease \
                     <git-lease@localhost> {} +0000\n\nforged\n",
                    secs(NOW)
                );
                Objects {
                    tree: scene.client.git(&["rev-parse", &format!("{tip}^{{tree}}")]),
                    blob: scene
                        .client
                        .git(&["rev-parse", &format!("{tip}:lease.json")]),
                    tag: scene.client.git_stdin(&["mktag"], tag.as_bytes()),
                }
            })
            .collect();
        scene
    }

    fn ledger(&self, issue: &str) -> &Ledger {
        self.ledgers
            .iter()
            .find(|l| l.issue == issue)
            .expect("a known ledger")
    }

    /// The tip the honest next fold records for `issue` (for `b`, the archived one).
    fn tip_of(&self, issue: &str) -> &str {
        match self.honest.iter().find(|(i, _)| *i == issue) {
            Some((_, tip)) => tip,
            None => self.ledger(issue).commits.last().expect("a commit"),
        }
    }

    /// The tip the previous fold records for `issue`, if any.
    fn archived_tip(&self, issue: &str) -> Option<&str> {
        self.archived
            .iter()
            .find(|l| l.issue.as_deref() == Some(issue))
            .map(|l| l.oid.as_str())
    }

    /// The commits of `issue`'s own ledger a fold may not record for it: older than the tip
    /// its ref is at, and not the one archived before (which is no change).
    fn older(&self, issue: &str) -> Vec<&str> {
        let tip = self.tip_of(issue);
        let archived = self.archived_tip(issue);
        self.ledger(issue)
            .commits
            .iter()
            .map(String::as_str)
            .filter(|c| *c != tip && Some(*c) != archived)
            .collect()
    }

    /// The tips of every ledger but `issue`'s, pushed or not.
    fn others(&self, issue: &str) -> Vec<&str> {
        let mut tips: Vec<&str> = self
            .ledgers
            .iter()
            .filter(|l| l.issue != issue)
            .map(|l| l.commits.last().expect("a commit").as_str())
            .collect();
        tips.push(&self.unpushed);
        if issue != "b" {
            tips.push(&self.b_moved_on);
        }
        tips
    }

    /// Every ledger commit the attacker has.
    fn ledger_commits(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self
            .ledgers
            .iter()
            .flat_map(|l| l.commits.iter().map(String::as_str))
            .collect();
        all.extend([self.b_moved_on.as_str(), self.unpushed.as_str()]);
        all
    }

    fn objects(&self, issue: &str) -> &Objects {
        let at = ENTRIES.iter().position(|i| *i == issue).expect("an entry");
        &self.objects[at]
    }

    /// Pushes `fold`'s objects to the server as `refs/heads/<branch>`, then returns the hook's
    /// verdict on the archive's move to it (git's receive-pack itself moves no ref one level
    /// under `refs/`, whatever its hooks say).
    fn judged_as_the_archive(&self, fold: &str, branch: &str) -> Run {
        let run = push(
            &self.client,
            false,
            &[&format!("{fold}:refs/heads/{branch}")],
        );
        assert_eq!(run.code, 0, "{run}");
        self.server
            .repo()
            .lease()
            .args(["-C"])
            .args([self.server.bare()])
            .args(["hook", "pre-receive"])
            .stdin(format!("{} {fold} refs/lease-archive\n", self.previous))
            .run()
    }

    /// The honest next fold: the previous fold's entries with the honest ones upserted.
    fn honest_draft(&self) -> Draft {
        let mut draft = Draft {
            leaves: self.archived.clone(),
            parents: Vec::new(),
            time: NOW,
        };
        for (issue, tip) in &self.honest {
            draft.set(issue, tip);
        }
        draft.parents = self.parents_for(&draft.leaves, View::First);
        draft
    }

    /// The parents an attacker gives a fold of `leaves`: the previous fold, then each tip of
    /// a gitlink that is not the previous fold's, in the order of their paths (a path that
    /// holds two gitlinks read as `view` says).
    fn parents_for(&self, leaves: &[Leaf], view: View) -> Vec<String> {
        let archived: HashSet<(&str, &str)> = self
            .archived
            .iter()
            .map(|l| (l.path.as_str(), l.oid.as_str()))
            .collect();
        let commits: HashSet<&str> = self.ledger_commits().into_iter().collect();
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for leaf in leaves.iter().filter(|l| l.mode == GITLINK) {
            match seen.iter_mut().find(|(p, _)| *p == leaf.path) {
                Some(one) if view == View::Last => one.1 = &leaf.oid,
                Some(_) => {}
                None => seen.push((&leaf.path, &leaf.oid)),
            }
        }
        seen.retain(|(path, oid)| commits.contains(oid) && !archived.contains(&(path, oid)));
        seen.sort_by(|x, y| x.0.cmp(y.0));
        std::iter::once(self.previous.clone())
            .chain(seen.into_iter().map(|(_, oid)| oid.to_owned()))
            .collect()
    }

    /// Builds `forgery`: the honest fold, its entries mutated, its parents listed for them and
    /// mutated, dated, then wrapped; returns the object to push as the archive.
    fn forge(&self, forgery: &Forgery) -> String {
        let mut draft = self.honest_draft();
        for change in &forgery.content {
            self.apply(&mut draft, change);
        }
        draft.parents = self.parents_for(&draft.leaves, forgery.view);
        if let Some(change) = &forgery.parents {
            self.mutate_parents(&mut draft.parents, change);
        }
        draft.time = NOW + forgery.skew.unwrap_or(forgery.jitter);
        let fold = write_fold(&self.client, &draft);
        match &forgery.wrap {
            None => fold,
            Some(Wrap::Tag) => {
                let tag = format!(
                    "object {fold}\ntype commit\ntag fold\ntagger git-lease \
                     <git-lease@localhost> {} +0000\n\nthe next fold\n",
                    secs(NOW)
                );
                self.client.git_stdin(&["mktag"], tag.as_bytes())
            }
            Some(Wrap::Tree) => self.client.git(&["rev-parse", &format!("{fold}^{{tree}}")]),
            Some(Wrap::Blob) => self.objects("d").blob.clone(),
            Some(Wrap::Ledger(n)) => pick(&self.ledger_commits(), *n).to_owned(),
        }
    }

    fn apply(&self, draft: &mut Draft, change: &Content) {
        match change {
            Content::Drop(issue) => draft.leaves.retain(|l| l.issue.as_deref() != Some(*issue)),
            Content::Older(issue, n) => draft.set(issue, pick(&self.older(issue), *n)),
            Content::Other(issue, n) => draft.set(issue, pick(&self.others(issue), *n)),
            Content::Live => draft.set("l", self.ledger("l").commits.last().expect("a tip")),
            Content::Unreffed(true) => draft.set("b", &self.b_moved_on),
            Content::Unreffed(false) => draft.set("z", &self.unpushed),
            Content::Misplaced(issue, how) => {
                let path = misplaced(issue, *how);
                let leaf = draft.leaf(issue, self.tip_of(issue));
                leaf.path = path;
            }
            Content::Mode(issue, mode) => {
                let objects = self.objects(issue);
                let (mode, oid) = match mode {
                    NotLink::File => ("100644", &objects.blob),
                    NotLink::Executable => ("100755", &objects.blob),
                    NotLink::Symlink => ("120000", &objects.blob),
                    NotLink::Tree => (TREE, &objects.tree),
                };
                let leaf = draft.leaf(issue, self.tip_of(issue));
                leaf.mode = mode;
                leaf.oid = oid.clone();
            }
            Content::NotCommit(issue, target) => {
                let objects = self.objects(issue);
                let oid = match target {
                    Target::Tree => objects.tree.clone(),
                    Target::Blob => objects.blob.clone(),
                    Target::Tag => objects.tag.clone(),
                    Target::Missing => "0123456789".repeat(8)[..self.previous.len()].to_owned(),
                };
                let leaf = draft.leaf(issue, self.tip_of(issue));
                leaf.mode = GITLINK;
                leaf.oid = oid;
            }
            Content::Duplicate(issue, n, first) => {
                let Some(at) = draft
                    .leaves
                    .iter()
                    .position(|l| l.issue.as_deref() == Some(*issue))
                else {
                    return;
                };
                let current = draft.leaves[at].oid.clone();
                let mut pool = self.ledger(issue).commits.clone();
                pool.extend(self.others(issue).into_iter().map(str::to_owned));
                pool.retain(|c| *c != current);
                let extra = Leaf {
                    oid: pick(&pool, *n),
                    ..draft.leaves[at].clone()
                };
                draft.leaves.insert(if *first { at } else { at + 1 }, extra);
            }
            Content::EmptyTree(place) => {
                let path = match place {
                    Place::Root => "zz".to_owned(),
                    Place::FanOut(issue) => format!("{}/zz", &entry(issue)[..2]),
                    Place::Beside(issue) => format!("{}/empty", &entry(issue)[..5]),
                };
                draft.leaves.push(Leaf {
                    issue: None,
                    path,
                    mode: TREE,
                    oid: self.empty_tree.clone(),
                });
            }
            Content::LeaseFile => draft.leaves.push(Leaf {
                issue: None,
                path: "lease.json".into(),
                mode: "100644",
                oid: self.objects("d").blob.clone(),
            }),
            Content::Nothing => draft.leaves = self.archived.clone(),
        }
    }

    fn mutate_parents(&self, parents: &mut Vec<String>, change: &Parents) {
        match change {
            Parents::Drop(n) => {
                parents.remove(n % parents.len());
            }
            Parents::Insert(n, at) => {
                let mut pool = self.ledger_commits();
                pool.push(&self.previous);
                pool.extend(parents.iter().map(String::as_str));
                let extra = pick(&pool, *n).to_owned();
                parents.insert(at % (parents.len() + 1), extra);
            }
            Parents::Swap(n) => {
                let i = 0;
                let others: Vec<usize> = (0..parents.len())
                    .filter(|k| parents[*k] != parents[i])
                    .collect();
                match others.is_empty() {
                    true => {
                        parents.remove(i);
                    }
                    false => parents.swap(i, pick(&others, *n)),
                }
            }
            Parents::NotAFold(n) => parents[0] = pick(&self.ledger_commits(), *n).to_owned(),
            Parents::Orphan => parents.clear(),
        }
    }
}

/// Seconds since the epoch of `secs` after T0.
fn secs(secs: i64) -> i64 {
    t0().timestamp() + secs
}

/// The `n`th of `pool` (any `n`).
fn pick<T: Clone>(pool: &[T], n: usize) -> T {
    pool[n % pool.len()].clone()
}

/// The path of `issue`'s entry (docs/FORMAT.md: the first two and next two hex digits of the
/// SHA-256 of the id, then the id).
fn entry(issue: &str) -> String {
    entry_path(issue).expect("a path")
}

/// A path for `issue`'s entry that is not its own.
fn misplaced(issue: &str, how: Misplace) -> String {
    let right = entry(issue);
    let (x, y) = (&right[..2], &right[3..5]);
    let wrong = match how {
        Misplace::Root => issue.to_owned(),
        Misplace::OneLevel => format!("{x}/{issue}"),
        Misplace::Deeper => format!("{x}/{y}/zz/{issue}"),
        Misplace::Swapped => format!("{y}/{x}/{issue}"),
        Misplace::Zeros => format!("00/00/{issue}"),
        Misplace::Upper => format!("{}/{}/{issue}", x.to_uppercase(), y.to_uppercase()),
    };
    // `Deeper` reads as issue `zz/<issue>`, whose own path it is in one case of 65536.
    let deeper_is_right = entry(&format!("zz/{issue}")) == wrong;
    if wrong == right || deeper_is_right {
        issue.to_owned()
    } else {
        wrong
    }
}

/// The entries of the tree of `fold` (`git ls-tree -r`).
fn leaves_of(repo: &TestRepo, fold: &str) -> Vec<Leaf> {
    repo.git(&["ls-tree", "-r", fold])
        .lines()
        .map(|line| {
            let (meta, path) = line.split_once('\t').expect("a tab");
            let fields: Vec<&str> = meta.split(' ').collect();
            assert_eq!(fields[0], GITLINK, "an archive holds gitlinks: {line}");
            Leaf {
                issue: ENTRIES
                    .iter()
                    .find(|i| entry(i) == path)
                    .map(|i| (*i).to_owned()),
                path: path.to_owned(),
                mode: GITLINK,
                oid: fields[2].to_owned(),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Folds as bytes
// ---------------------------------------------------------------------------------------------

/// One entry of a fold's tree: its path (`/`-separated), mode and object; the issue whose
/// entry it is or was meant to be.
#[derive(Clone, Debug)]
struct Leaf {
    issue: Option<String>,
    path: String,
    mode: &'static str,
    oid: String,
}

/// A fold before it is written.
#[derive(Clone, Debug)]
struct Draft {
    leaves: Vec<Leaf>,
    parents: Vec<String>,
    /// The author and committer time, in seconds after T0.
    time: i64,
}

impl Draft {
    /// The entry of `issue`, added at its own path at `tip` if there is none.
    fn leaf(&mut self, issue: &str, tip: &str) -> &mut Leaf {
        let at = match self
            .leaves
            .iter()
            .position(|l| l.issue.as_deref() == Some(issue))
        {
            Some(at) => at,
            None => {
                self.leaves.push(Leaf {
                    issue: Some(issue.to_owned()),
                    path: entry(issue),
                    mode: GITLINK,
                    oid: tip.to_owned(),
                });
                self.leaves.len() - 1
            }
        };
        &mut self.leaves[at]
    }

    /// Records `tip` for `issue`, at its own path.
    fn set(&mut self, issue: &str, tip: &str) {
        let leaf = self.leaf(issue, tip);
        leaf.oid = tip.to_owned();
    }
}

/// An entry of a tree to write: its path's names, mode and object.
type Part<'a> = (Vec<&'a str>, &'a str, &'a str);

/// A gitlink of a tree to write: its path's names and commit.
type Link<'a> = (Vec<&'a str>, &'a str);

/// Writes the trees and the commit of `draft` as git stores them (`hash-object --literally`:
/// whatever they hold); returns the commit.
fn write_fold(repo: &TestRepo, draft: &Draft) -> String {
    write_fold_carried(repo, draft, Carried::Nested(1))
}

/// How a written fold carries its tips.
#[derive(Clone, Copy, Debug)]
enum Carried {
    /// On one carrier, under `n - 1` carriers of one carrier each (`Nested(1)`: as git-lease
    /// writes a fold of fewer than 256).
    Nested(usize),
    /// On one carrier whose first parent is a carrier of the first tip, the other tips beside
    /// it.
    Mixed,
    /// The carrier twice among the fold's parents.
    Twice,
}

/// Writes `draft` as [`write_fold`] does, its tips carried as `carried` says.
fn write_fold_carried(repo: &TestRepo, draft: &Draft, carried: Carried) -> String {
    let leaves: Vec<Part> = draft
        .leaves
        .iter()
        .map(|l| (l.path.split('/').collect(), l.mode, l.oid.as_str()))
        .collect();
    let tree = write_tree(repo, &leaves);
    let who = format!("git-lease <git-lease@localhost> {} +0000", secs(draft.time));
    // The parents as listed: the first (the previous fold, unless mutated) as it is, the tips
    // after it on carriers.
    let mut parents = draft.parents.iter().take(1).cloned().collect::<Vec<_>>();
    let tips = &draft.parents[draft.parents.len().min(1)..];
    if !tips.is_empty() {
        let empty = repo.git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
        let carry = |held: &[String], what: &str| {
            write_commit(
                repo,
                &empty,
                held,
                &who,
                &format!("git-lease: carry {} {what}", held.len()),
            )
        };
        let mut carrier = match carried {
            Carried::Mixed => {
                let first = carry(&tips[..1], "archived tips");
                let mut held = vec![first];
                held.extend(tips[1..].iter().cloned());
                carry(&held, "archived tips")
            }
            _ => carry(tips, "archived tips"),
        };
        if let Carried::Nested(n) = carried {
            for _ in 1..n {
                carrier = carry(&[carrier], "carriers");
            }
        }
        if let Carried::Twice = carried {
            parents.push(carrier.clone());
        }
        parents.push(carrier);
    }
    let recorded = draft.parents.len().saturating_sub(1);
    write_commit(
        repo,
        &tree,
        &parents,
        &who,
        &format!("git-lease: fold {recorded} ledgers"),
    )
}

/// The message of a carrier of `n` tips.
fn carry_message(n: usize) -> String {
    format!("git-lease: carry {n} archived tips")
}

/// Writes a commit of `tree` with `parents`, `who` as author and committer, and `message`, as
/// git stores it (`hash-object --literally`); returns its id.
fn write_commit(
    repo: &TestRepo,
    tree: &str,
    parents: &[String],
    who: &str,
    message: &str,
) -> String {
    let mut text = format!("tree {tree}\n");
    for parent in parents {
        text += &format!("parent {parent}\n");
    }
    text += &format!("author {who}\ncommitter {who}\n\n{message}\n");
    repo.git_stdin(
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--literally",
            "--stdin",
        ],
        text.as_bytes(),
    )
}

/// Writes the tree of `leaves` (`(path, mode, object)`), nested as their paths say, entries
/// in git's order (a name repeated stays in the order given); returns its id.
fn write_tree(repo: &TestRepo, leaves: &[Part]) -> String {
    let mut entries: Vec<(String, &str, String)> = Vec::new();
    let mut dirs: Vec<(&str, Vec<Part>)> = Vec::new();
    for (path, mode, oid) in leaves {
        match path.as_slice() {
            [name] => entries.push(((*name).to_owned(), mode, (*oid).to_owned())),
            [dir, rest @ ..] => {
                let sub = (rest.to_vec(), *mode, *oid);
                match dirs.iter_mut().find(|(d, _)| d == dir) {
                    Some((_, subs)) => subs.push(sub),
                    None => dirs.push((dir, vec![sub])),
                }
            }
            [] => unreachable!("a path has a name"),
        }
    }
    for (dir, subs) in dirs {
        entries.push((dir.to_owned(), TREE, write_tree(repo, &subs)));
    }
    // git orders a tree's entry as its name, with a `/` after it for a tree.
    entries.sort_by_key(|(name, mode, _)| {
        let mut key = name.as_bytes().to_vec();
        if *mode == TREE {
            key.push(b'/');
        }
        key
    });
    let mut bytes = Vec::new();
    for (name, mode, oid) in entries {
        bytes.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        bytes.extend(unhex(&oid));
    }
    repo.git_stdin(
        &["hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
        &bytes,
    )
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The tree of `leaves` as `git mktree` writes it, level by level: gitlinks only.
fn mktree(repo: &TestRepo, leaves: &[Link]) -> String {
    let mut lines = String::new();
    let mut dirs: Vec<(&str, Vec<Link>)> = Vec::new();
    for (path, oid) in leaves {
        match path.as_slice() {
            [name] => lines += &format!("160000 commit {oid}\t{name}\n"),
            [dir, rest @ ..] => match dirs.iter_mut().find(|(d, _)| d == dir) {
                Some((_, subs)) => subs.push((rest.to_vec(), oid)),
                None => dirs.push((dir, vec![(rest.to_vec(), oid)])),
            },
            [] => unreachable!("a path has a name"),
        }
    }
    for (dir, subs) in dirs {
        lines += &format!("040000 tree {}\t{dir}\n", mktree(repo, &subs));
    }
    repo.git_stdin(&["mktree"], lines.as_bytes())
}

// ---------------------------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------------------------

/// A forged fold: the honest next fold, mutated.
#[derive(Clone, Debug)]
struct Forgery {
    /// What its tree records, in order.
    content: Vec<Content>,
    /// How a path holding two gitlinks is read when the parents are listed.
    view: View,
    /// What is done to the parents listed for that tree.
    parents: Option<Parents>,
    /// Its time, in seconds from the server's clock, beyond `lease.maxClockSkew`.
    skew: Option<i64>,
    /// Its time within `lease.maxClockSkew`, when there is no `skew`.
    jitter: i64,
    /// What is pushed instead of the fold itself.
    wrap: Option<Wrap>,
}

impl Forgery {
    fn is_honest(&self) -> bool {
        self.content.is_empty()
            && self.parents.is_none()
            && self.skew.is_none()
            && self.wrap.is_none()
    }
}

/// One change to what the fold's tree records.
#[derive(Clone, Copy, Debug)]
enum Content {
    /// An entry the previous fold records, left out.
    Drop(&'static str),
    /// The entry moved to the `n`th older commit of its own ledger (neither the tip its ref
    /// is at nor the one archived before).
    Older(&'static str, usize),
    /// The entry moved to the `n`th tip of another ledger (pushed or not).
    Other(&'static str, usize),
    /// The live ledger recorded at its tip.
    Live,
    /// A ledger recorded at a tip no ref is at: `b` moved on past its archived tip in the
    /// attacker's clone (`true`), or `z`, never pushed.
    Unreffed(bool),
    /// The entry at a path not its own.
    Misplaced(&'static str, Misplace),
    /// The entry with a mode other than a gitlink's.
    Mode(&'static str, NotLink),
    /// The entry a gitlink to something other than a commit.
    NotCommit(&'static str, Target),
    /// A second entry of the same name beside the issue's (the `n`th of its own commits and
    /// the other ledgers' tips), before it or after it.
    Duplicate(&'static str, usize, bool),
    /// An empty tree beside the fan-out.
    EmptyTree(Place),
    /// A `lease.json` at the root, as a ledger commit has.
    LeaseFile,
    /// Nothing recorded: the previous fold's tree again.
    Nothing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    First,
    Last,
}

#[derive(Clone, Copy, Debug)]
enum Misplace {
    /// `<id>`.
    Root,
    /// `<hex0-1>/<id>`.
    OneLevel,
    /// `<hex0-1>/<hex2-3>/zz/<id>`.
    Deeper,
    /// `<hex2-3>/<hex0-1>/<id>`.
    Swapped,
    /// `00/00/<id>`.
    Zeros,
    /// The fan-out in upper case.
    Upper,
}

#[derive(Clone, Copy, Debug)]
enum NotLink {
    /// `100644`, the tip's `lease.json`.
    File,
    /// `100755`, the same.
    Executable,
    /// `120000`, the same.
    Symlink,
    /// `040000`, the tip's tree.
    Tree,
}

#[derive(Clone, Copy, Debug)]
enum Target {
    /// The tip's tree (which the server has).
    Tree,
    /// The tip's `lease.json` (which the server has).
    Blob,
    /// An annotated tag of the tip (which no push sends: gitlinks are not followed).
    Tag,
    /// An object that exists nowhere.
    Missing,
}

#[derive(Clone, Copy, Debug)]
enum Place {
    /// `zz` at the root.
    Root,
    /// `<hex0-1>/zz`, beside the issue's second level.
    FanOut(&'static str),
    /// `<hex0-1>/<hex2-3>/empty`, beside the issue's entry.
    Beside(&'static str),
}

/// One change to the parents listed for the tree (each leaves a different list).
#[derive(Clone, Copy, Debug)]
enum Parents {
    /// The `n`th left out (the previous fold, for 0).
    Drop(usize),
    /// The `n`th of every commit the attacker has (the parents included) inserted at `at`.
    Insert(usize, usize),
    /// The previous fold swapped with the `n`th parent that differs from it (or left out when
    /// none does): the tips may come in any order, the previous fold only first.
    Swap(usize),
    /// The previous fold replaced by the `n`th ledger commit.
    NotAFold(usize),
    /// None at all.
    Orphan,
}

/// What is pushed as the archive instead of the fold.
#[derive(Clone, Copy, Debug)]
enum Wrap {
    /// An annotated tag of it.
    Tag,
    /// Its tree.
    Tree,
    /// A blob (a `lease.json`).
    Blob,
    /// The `n`th ledger commit.
    Ledger(usize),
}

fn issue() -> impl Strategy<Value = &'static str> {
    prop::sample::select(ENTRIES.to_vec())
}

fn content() -> impl Strategy<Value = Content> {
    let misplace = prop_oneof![
        Just(Misplace::Root),
        Just(Misplace::OneLevel),
        Just(Misplace::Deeper),
        Just(Misplace::Swapped),
        Just(Misplace::Zeros),
        Just(Misplace::Upper),
    ];
    let not_link = prop_oneof![
        Just(NotLink::File),
        Just(NotLink::Executable),
        Just(NotLink::Symlink),
        Just(NotLink::Tree),
    ];
    let target = prop_oneof![
        Just(Target::Tree),
        Just(Target::Blob),
        Just(Target::Tag),
        Just(Target::Missing),
    ];
    let place = prop_oneof![
        Just(Place::Root),
        issue().prop_map(Place::FanOut),
        issue().prop_map(Place::Beside),
    ];
    prop_oneof![
        prop::sample::select(vec!["a", "b"]).prop_map(Content::Drop),
        (issue(), any::<usize>()).prop_map(|(i, n)| Content::Older(i, n)),
        (issue(), any::<usize>()).prop_map(|(i, n)| Content::Other(i, n)),
        Just(Content::Live),
        any::<bool>().prop_map(Content::Unreffed),
        (issue(), misplace).prop_map(|(i, m)| Content::Misplaced(i, m)),
        (issue(), not_link).prop_map(|(i, m)| Content::Mode(i, m)),
        (issue(), target).prop_map(|(i, t)| Content::NotCommit(i, t)),
        (issue(), any::<usize>(), any::<bool>()).prop_map(|(i, n, f)| Content::Duplicate(i, n, f)),
        place.prop_map(Content::EmptyTree),
        Just(Content::LeaseFile),
        Just(Content::Nothing),
    ]
}

fn parents() -> impl Strategy<Value = Parents> {
    prop_oneof![
        any::<usize>().prop_map(Parents::Drop),
        (any::<usize>(), any::<usize>()).prop_map(|(n, at)| Parents::Insert(n, at)),
        any::<usize>().prop_map(Parents::Swap),
        any::<usize>().prop_map(Parents::NotAFold),
        Just(Parents::Orphan),
    ]
}

fn wrap() -> impl Strategy<Value = Wrap> {
    prop_oneof![
        Just(Wrap::Tag),
        Just(Wrap::Tree),
        Just(Wrap::Blob),
        any::<usize>().prop_map(Wrap::Ledger),
    ]
}

fn forgery() -> impl Strategy<Value = Forgery> {
    let skew = prop_oneof![SKEW + 1..=SKEW + 60, SKEW + 1..=100_000_000i64];
    let signed = (skew, any::<bool>()).prop_map(|(s, late)| if late { s } else { -s });
    let view = prop_oneof![Just(View::First), Just(View::Last)];
    (
        prop::collection::vec(content(), 0..=2),
        view,
        prop::option::weighted(0.4, parents()),
        prop::option::weighted(0.2, signed),
        -SKEW..=SKEW,
        prop::option::weighted(0.1, wrap()),
    )
        .prop_map(|(content, view, parents, skew, jitter, wrap)| Forgery {
            content,
            view,
            parents,
            skew,
            jitter,
            wrap,
        })
        .prop_filter("a forgery changes something", |f| !f.is_honest())
}

/// The catalogue: every mutation alone, tried on every run whatever proptest draws.
fn catalogue() -> Vec<Forgery> {
    let alone = |content: Vec<Content>| Forgery {
        content,
        view: View::First,
        parents: None,
        skew: None,
        jitter: 0,
        wrap: None,
    };
    let mut all = Vec::new();
    let mut contents = vec![
        Content::Drop("a"),
        Content::Drop("b"),
        Content::Live,
        Content::Unreffed(true),
        Content::Unreffed(false),
        Content::EmptyTree(Place::Root),
        Content::LeaseFile,
        Content::Nothing,
    ];
    for issue in ENTRIES {
        contents.extend([
            Content::Older(issue, 0),
            Content::Older(issue, 1),
            Content::Other(issue, 0),
            Content::EmptyTree(Place::FanOut(issue)),
            Content::EmptyTree(Place::Beside(issue)),
        ]);
    }
    for how in [
        Misplace::Root,
        Misplace::OneLevel,
        Misplace::Deeper,
        Misplace::Swapped,
        Misplace::Zeros,
        Misplace::Upper,
    ] {
        contents.push(Content::Misplaced("gh/7", how));
    }
    for mode in [
        NotLink::File,
        NotLink::Executable,
        NotLink::Symlink,
        NotLink::Tree,
    ] {
        contents.push(Content::Mode("d", mode));
    }
    for target in [Target::Tree, Target::Blob, Target::Tag, Target::Missing] {
        contents.push(Content::NotCommit("a", target));
    }
    all.extend(contents.into_iter().map(|c| alone(vec![c])));
    // Doubled entries, read first-wins or last-wins when the parents are listed.
    for issue in ENTRIES {
        for first in [true, false] {
            for view in [View::First, View::Last] {
                all.push(Forgery {
                    view,
                    ..alone(vec![Content::Duplicate(issue, 0, first)])
                });
            }
        }
    }
    for parents in [
        Parents::Drop(0),
        Parents::Drop(1),
        Parents::Drop(3),
        Parents::Insert(0, 4),
        Parents::Insert(usize::MAX, 0),
        Parents::Swap(0),
        Parents::Swap(1),
        Parents::NotAFold(1),
        Parents::Orphan,
    ] {
        all.push(Forgery {
            parents: Some(parents),
            ..alone(Vec::new())
        });
    }
    for skew in [SKEW + 1, -SKEW - 1, 100_000_000, -100_000_000] {
        all.push(Forgery {
            skew: Some(skew),
            ..alone(Vec::new())
        });
    }
    for wrap in [Wrap::Tag, Wrap::Tree, Wrap::Blob, Wrap::Ledger(0)] {
        all.push(Forgery {
            wrap: Some(wrap),
            ..alone(Vec::new())
        });
    }
    all
}

// ---------------------------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------------------------

/// Pushes `forgery` as the archive; it must be refused by the hook, every ref of the server as
/// it was.
fn refused(scene: &Scene, forgery: &Forgery) -> Result<(), String> {
    let pushed = scene.forge(forgery);
    let run = push(
        &scene.client,
        true,
        &[&format!("{pushed}:refs/lease-archive")],
    );
    let refs = scene.server.refs();
    let by_hook = run.stderr.contains(REFUSED)
        && run.stderr.contains(": archive: ")
        && run.stderr.contains("pre-receive hook declined");
    if run.code == 0 || !by_hook {
        return Err(format!(
            "the hook should refuse {forgery:?} (pushed as {pushed})\n{run}"
        ));
    }
    if refs != scene.refs {
        return Err(format!(
            "{forgery:?} was refused, yet the server's refs moved:\n{refs}\nwere:\n{}",
            scene.refs
        ));
    }
    Ok(())
}

#[test]
fn the_hook_refuses_every_forged_fold_and_takes_the_honest_one_they_came_from() {
    let cases: u32 = env_number("GIT_LEASE_FORGED_FOLD_CASES", 48);
    let seed: u64 = env_number("GIT_LEASE_FORGED_FOLD_SEED", 20_261_130);
    let started = std::time::Instant::now();
    let scene = Scene::new();
    let set_up = started.elapsed();

    let catalogue = catalogue();
    let failures: Vec<String> = catalogue
        .iter()
        .filter_map(|forgery| refused(&scene, forgery).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} forged folds of the catalogue got through:\n\n{}",
        failures.len(),
        catalogue.len(),
        failures.join("\n\n")
    );

    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        max_shrink_iters: 256,
        ..Config::default()
    });
    let result = runner.run(&forgery(), |forgery| {
        refused(&scene, &forgery).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => panic!(
            "a forged fold got through.\n\n{reason}\n\nThe minimal case (rerun with \
             GIT_LEASE_FORGED_FOLD_SEED={seed}):\n{minimal:#?}"
        ),
        Err(TestError::Abort(why)) => panic!("the generator aborted: {why}"),
    }

    // The fold every forgery came from is what plain git writes ...
    let honest = scene.honest_draft();
    let fold = write_fold(&scene.client, &honest);
    let leaves: Vec<Link> = honest
        .leaves
        .iter()
        .map(|l| (l.path.split('/').collect(), l.oid.as_str()))
        .collect();
    let tree = mktree(&scene.client, &leaves);
    let date = format!("{} +0000", secs(NOW));
    let commit_tree = |tree: &str, parents: &[&str], message: &str| {
        let mut args = vec!["commit-tree", tree];
        for parent in parents {
            args.extend(["-p", parent]);
        }
        args.extend(["-m", message]);
        let run = scene
            .client
            .git_cmd()
            .env("GIT_AUTHOR_NAME", "git-lease")
            .env("GIT_AUTHOR_EMAIL", "git-lease@localhost")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_NAME", "git-lease")
            .env("GIT_COMMITTER_EMAIL", "git-lease@localhost")
            .env("GIT_COMMITTER_DATE", &date)
            .args(&args)
            .run();
        assert_eq!(run.code, 0, "{run}");
        run.stdout.trim().to_owned()
    };
    let empty = scene
        .client
        .git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let tips: Vec<&str> = honest.parents[1..].iter().map(String::as_str).collect();
    let carrier = commit_tree(&empty, &tips, &carry_message(tips.len()));
    let plain = commit_tree(
        &tree,
        &[honest.parents[0].as_str(), &carrier],
        "git-lease: fold 3 ledgers",
    );
    assert_eq!(plain, fold);
    // ... and a legitimate one: the hook takes it. git's receive-pack then refuses to update
    // a ref one level under `refs/` ("funny refname"), whatever its hooks said, so no plain
    // push moves the archive: the server's own folder does.
    let run = push(
        &scene.client,
        true,
        &[&format!("{fold}:refs/lease-archive")],
    );
    assert!(
        run.code != 0 && !run.stderr.contains("git-lease: refused"),
        "the hook refused the honest fold\n{run}"
    );
    run.stderr_has("funny refname");
    assert_eq!(scene.server.refs(), scene.refs);
    // Its objects on the server under another name, the hook's verdict on the archive's move
    // there is the same; the archive moved to it, the server's folder finds every quiet ledger
    // recorded, and only removes their refs.
    let verdict = scene.judged_as_the_archive(&fold, "next-fold");
    assert_eq!(
        verdict.code, 0,
        "the hook refused the honest fold\n{verdict}"
    );
    scene
        .server
        .git(&["update-ref", "refs/lease-archive", &fold, &scene.previous]);
    let out = on_server(
        &scene.server,
        &at(NOW),
        &["--json", "archive", "--quiet-for", "1m"],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["folded"], serde_json::json!([]), "{report}");
    assert_eq!(report["removed"], 3, "{report}");
    on_server(&scene.server, &at(NOW), &["verify"]);
    eprintln!(
        "forged folds: {} of the catalogue and {cases} generated (seed {seed}) refused, the \
         honest one accepted; set up in {set_up:.1?}, {:.1?} in all",
        catalogue.len(),
        started.elapsed()
    );
}

#[test]
fn the_hook_takes_carriers_nested_four_deep_and_refuses_deeper_mixed_or_repeated_ones() {
    let scene = Scene::new();
    let honest = scene.honest_draft();
    for (n, carried) in [(2, Carried::Nested(2)), (4, Carried::Nested(4))] {
        let fold = write_fold_carried(&scene.client, &honest, carried);
        let verdict = scene.judged_as_the_archive(&fold, &format!("nested-{n}"));
        assert_eq!(verdict.code, 0, "{carried:?}: the hook refused\n{verdict}");
    }
    for (carried, why) in [
        (Carried::Nested(5), "nests carriers deeper than 4"),
        (Carried::Mixed, "is not a carrier"),
        (Carried::Twice, "each once"),
    ] {
        let fold = write_fold_carried(&scene.client, &honest, carried);
        let run = push(
            &scene.client,
            true,
            &[&format!("{fold}:refs/lease-archive")],
        );
        assert!(
            run.code != 0 && run.stderr.contains(REFUSED),
            "{carried:?}: the hook should refuse it\n{run}"
        );
        run.stderr_has(why);
        let refs = scene.server.refs();
        let unmoved = |r: &&str| !r.contains("refs/heads/nested-");
        let refs: Vec<&str> = refs.lines().filter(unmoved).collect();
        let before: Vec<&str> = scene.refs.lines().filter(unmoved).collect();
        assert_eq!(refs, before, "{carried:?}");
    }
}
