//! Folds as bytes: an archive commit's trees and links written with plain git, honest or
//! carried in nested commits.

use super::*;

/// One entry of a fold's tree: its path (`/`-separated), mode and object; the issue whose
/// entry it is or was meant to be.
#[derive(Clone, Debug)]
pub(super) struct Leaf {
    pub(super) issue: Option<String>,
    pub(super) path: String,
    pub(super) mode: &'static str,
    pub(super) oid: String,
}

/// A fold before it is written.
#[derive(Clone, Debug)]
pub(super) struct Draft {
    pub(super) leaves: Vec<Leaf>,
    pub(super) parents: Vec<String>,
    /// The author and committer time, in seconds after T0.
    pub(super) time: i64,
}

impl Draft {
    /// The entry of `issue`, added at its own path at `tip` if there is none.
    pub(super) fn leaf(&mut self, issue: &str, tip: &str) -> &mut Leaf {
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
    pub(super) fn set(&mut self, issue: &str, tip: &str) {
        let leaf = self.leaf(issue, tip);
        leaf.oid = tip.to_owned();
    }
}

/// An entry of a tree to write: its path's names, mode and object.
pub(super) type Part<'a> = (Vec<&'a str>, &'a str, &'a str);

/// A gitlink of a tree to write: its path's names and commit.
pub(super) type Link<'a> = (Vec<&'a str>, &'a str);

/// Writes the trees and the commit of `draft` as git stores them (`hash-object --literally`:
/// whatever they hold); returns the commit.
pub(super) fn write_fold(repo: &TestRepo, draft: &Draft) -> String {
    write_fold_carried(repo, draft, Carried::Nested(1))
}

/// How a written fold carries its tips.
#[derive(Clone, Copy, Debug)]
pub(super) enum Carried {
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
pub(super) fn write_fold_carried(repo: &TestRepo, draft: &Draft, carried: Carried) -> String {
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
pub(super) fn carry_message(n: usize) -> String {
    format!("git-lease: carry {n} archived tips")
}

/// Writes a commit of `tree` with `parents`, `who` as author and committer, and `message`, as
/// git stores it (`hash-object --literally`); returns its id.
pub(super) fn write_commit(
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
pub(super) fn write_tree(repo: &TestRepo, leaves: &[Part]) -> String {
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

pub(super) fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The tree of `leaves` as `git mktree` writes it, level by level: gitlinks only.
pub(super) fn mktree(repo: &TestRepo, leaves: &[Link]) -> String {
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
