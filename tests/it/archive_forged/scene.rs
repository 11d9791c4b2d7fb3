//! The scene every forgery is pushed to: a server with the hook, its ledgers and its archive,
//! and the honest fold they came from.

use super::*;

/// One ledger the attacker knows, pushed or not.
pub(super) struct Ledger {
    pub(super) issue: &'static str,
    /// Its commits, oldest first; the last is where its ref is (for `b`, archived, the tip
    /// the archive records).
    pub(super) commits: Vec<String>,
}

/// The objects of a ledger tip an attacker puts where a gitlink belongs.
pub(super) struct Objects {
    pub(super) tree: String,
    pub(super) blob: String,
    pub(super) tag: String,
}

/// The served repository once set up, and the attacker's clone of it.
pub(super) struct Scene {
    pub(super) server: Server,
    pub(super) client: TestRepo,
    /// The newest fold, made by `git lease archive` on the server.
    pub(super) previous: String,
    /// Its entries.
    pub(super) archived: Vec<Leaf>,
    /// What the honest next fold records, `(issue, tip)`.
    pub(super) honest: Vec<(&'static str, String)>,
    /// Every ledger on the server, archived or with a ref: `a` (both tenures), `b`, `d`,
    /// `gh/7`, `l`.
    pub(super) ledgers: Vec<Ledger>,
    /// `b` moved on past its archived tip in the attacker's clone alone: no ref is there.
    pub(super) b_moved_on: String,
    /// The tip of `z`, a ledger never pushed.
    pub(super) unpushed: String,
    /// The tree of no entries.
    pub(super) empty_tree: String,
    /// The objects of each tip in [`ENTRIES`]' order.
    pub(super) objects: Vec<Objects>,
    /// Every ref of the server before any forged push.
    pub(super) refs: String,
}

impl Scene {
    pub(super) fn new() -> Scene {
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

    pub(super) fn ledger(&self, issue: &str) -> &Ledger {
        self.ledgers
            .iter()
            .find(|l| l.issue == issue)
            .expect("a known ledger")
    }

    /// The tip the honest next fold records for `issue` (for `b`, the archived one).
    pub(super) fn tip_of(&self, issue: &str) -> &str {
        match self.honest.iter().find(|(i, _)| *i == issue) {
            Some((_, tip)) => tip,
            None => self.ledger(issue).commits.last().expect("a commit"),
        }
    }

    /// The tip the previous fold records for `issue`, if any.
    pub(super) fn archived_tip(&self, issue: &str) -> Option<&str> {
        self.archived
            .iter()
            .find(|l| l.issue.as_deref() == Some(issue))
            .map(|l| l.oid.as_str())
    }

    /// The commits of `issue`'s own ledger a fold may not record for it: older than the tip
    /// its ref is at, and not the one archived before (which is no change).
    pub(super) fn older(&self, issue: &str) -> Vec<&str> {
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
    pub(super) fn others(&self, issue: &str) -> Vec<&str> {
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
    pub(super) fn ledger_commits(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self
            .ledgers
            .iter()
            .flat_map(|l| l.commits.iter().map(String::as_str))
            .collect();
        all.extend([self.b_moved_on.as_str(), self.unpushed.as_str()]);
        all
    }

    pub(super) fn objects(&self, issue: &str) -> &Objects {
        let at = ENTRIES.iter().position(|i| *i == issue).expect("an entry");
        &self.objects[at]
    }

    /// Pushes `fold`'s objects to the server as `refs/heads/<branch>`, then returns the hook's
    /// verdict on the archive's move to it (git's receive-pack itself moves no ref one level
    /// under `refs/`, whatever its hooks say).
    pub(super) fn judged_as_the_archive(&self, fold: &str, branch: &str) -> Run {
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
    pub(super) fn honest_draft(&self) -> Draft {
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
    pub(super) fn parents_for(&self, leaves: &[Leaf], view: View) -> Vec<String> {
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
    pub(super) fn forge(&self, forgery: &Forgery) -> String {
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

    pub(super) fn apply(&self, draft: &mut Draft, change: &Content) {
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

    pub(super) fn mutate_parents(&self, parents: &mut Vec<String>, change: &Parents) {
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
pub(super) fn secs(secs: i64) -> i64 {
    t0().timestamp() + secs
}

/// The `n`th of `pool` (any `n`).
pub(super) fn pick<T: Clone>(pool: &[T], n: usize) -> T {
    pool[n % pool.len()].clone()
}

/// The path of `issue`'s entry (docs/FORMAT.md: the first two and next two hex digits of the
/// SHA-256 of the id, then the id).
pub(super) fn entry(issue: &str) -> String {
    entry_path(issue).expect("a path")
}

/// A path for `issue`'s entry that is not its own.
pub(super) fn misplaced(issue: &str, how: Misplace) -> String {
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
pub(super) fn leaves_of(repo: &TestRepo, fold: &str) -> Vec<Leaf> {
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
