//! Who may sign is decided by what the team controls: the allowed signers list comes from
//! `lease.allowedSigners`, else the remote's default branch as fetched
//! (`refs/remotes/origin/HEAD`), never from the branch checked out or a working tree; what a
//! clone verified is verified again when the list changes; a key is judged valid or not at the
//! event's own time, and a signed commit whose committer time strays from its event's beyond
//! `lease.maxClockSkew` is refused. Each attack is met as its attacker meets it: through a
//! hookless `git daemon`, where anyone with push access writes anything.

use serde_json::{json, Value};

use crate::env::{at, TestRepo};
use crate::forge::{self, acquired, freed, with};
use crate::server::{lease, Server};
use crate::signatures::{refused_by_every_reader, step, Keys, LISTED, UNLISTED};

/// The allowed signers list of `who` (each `(name, options)`: `namespaces="git"` and these
/// options), `ops` its administrator.
fn list_of(keys: &Keys, who: &[(&str, &str)]) -> String {
    let mut text = String::from("# lease-admins: ops\n");
    for (name, options) in who {
        let public = std::fs::read_to_string(keys.key(name).with_extension("pub")).expect("a key");
        let sep = if options.is_empty() { "" } else { "," };
        text += &format!("{name} namespaces=\"git\"{sep}{options} {public}");
    }
    text
}

/// Commits `list` as `.git-lease/allowed_signers` on top of `parent` in `repo` and moves
/// `branch` there; returns the commit.
fn commit_list(repo: &TestRepo, branch: &str, list: &str, parent: Option<&str>) -> String {
    let blob = forge::blob(repo, list.as_bytes());
    let dir = forge::tree(repo, &[("100644", "allowed_signers", &blob)]);
    let root = forge::tree(repo, &[("040000", ".git-lease", &dir)]);
    let parents: Vec<&str> = parent.into_iter().collect();
    let commit = forge::commit(repo, &root, &parents, &at(0), "allowed signers");
    repo.git(&["update-ref", &format!("refs/heads/{branch}"), &commit]);
    commit
}

/// A hookless daemon whose default branch `main` lists alice, bob and ops (`who`, with their
/// options), and whose ledger 42 is alice's signed tenure from 0 for 600 seconds; alice's
/// clone requiring signatures with no `lease.allowedSigners`, `origin/HEAD` recorded. Returns
/// the server, its keys, alice's clone, alice's first step and the list's commit.
fn team(who: &[(&str, &str)]) -> (Server, Keys, TestRepo, String, String) {
    let server = Server::daemon();
    let repo = server.repo();
    let keys = Keys::new(repo);
    let main = commit_list(repo, "main", &list_of(&keys, who), None);
    repo.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    let first = step(
        repo,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("alice"),
    );
    forge::set_ledger(repo, "42", &first);
    let alice = server.client("alice");
    alice.git(&["config", "lease.requireSignatures", "true"]);
    fetch(&alice);
    alice.git(&["remote", "set-head", "origin", "--auto"]);
    (server, keys, alice, first, main)
}

/// `git fetch origin`: the branches, never the lease refs.
fn fetch(client: &TestRepo) {
    client.git(&["fetch", "-q", "origin"]);
}

fn said(run: &crate::env::Run) -> String {
    format!("{}{}", run.stdout, run.stderr)
}

const EVERYONE: [(&str, &str); 3] = [("alice", ""), ("bob", ""), ("ops", "")];

#[test]
fn a_branch_that_adds_the_attackers_key_changes_nothing_checked_out_or_not() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let (server, keys, alice, first, main) = team(&EVERYONE);
    lease(
        &alice,
        10,
        &["check", "--remote", "origin", "42", "--token", "1"],
    )
    .ok();
    // mallory, whose key nobody listed, pushes a branch whose list adds his key, and a
    // takeover of 42 signed by it.
    let repo = server.repo();
    let forged_list = list_of(&keys, &[EVERYONE.as_slice(), &[(UNLISTED, "")]].concat());
    commit_list(repo, "review", &forged_list, Some(&main));
    let takeover = step(
        repo,
        &keys,
        &acquired("42", UNLISTED, 2, 700, Some(600)),
        Some(&first),
        Some(UNLISTED),
    );
    forge::set_ledger(repo, "42", &takeover);
    // A reviewer checks the branch out: HEAD and the working tree hold mallory's list.
    fetch(&alice);
    alice.git(&["checkout", "-q", "-b", "review", "origin/review"]);
    assert!(alice.path().join(".git-lease/allowed_signers").exists());
    let check = ["check", "--remote", "origin", "42", "--token", "2"];
    let as_mallory = [&check[..], &["--holder", UNLISTED]].concat();
    for args in [
        &as_mallory[..],
        &["show", "--remote", "origin", "42"],
        &["verify", "--remote", "origin"],
    ] {
        let run = lease(&alice, 720, args);
        run.code(1);
        assert!(said(&run).contains("signature"), "{run}");
        assert!(said(&run).contains("refs/remotes/origin/main"), "{run}");
    }
    // Back on the default branch, nothing was taken in the meantime.
    alice.git(&["checkout", "-q", "-B", "main", "origin/main"]);
    lease(&alice, 720, &as_mallory).code(1);
    assert_eq!(
        alice.git(&["rev-parse", "refs/lease-remotes/origin/42"]),
        first
    );
    // A bare clone (no checkout, no origin/HEAD) reads its own HEAD: the default branch.
    let bare = TestRepo::init(&["--bare"]);
    bare.git(&["remote", "add", "origin", &server.url()]);
    bare.git(&["fetch", "-q", "origin", "+refs/heads/*:refs/heads/*"]);
    bare.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    bare.git(&["config", "lease.requireSignatures", "true"]);
    lease(&bare, 720, &as_mallory).code(1);
}

#[test]
fn a_change_of_the_list_on_the_default_branch_verifies_again_what_was_verified() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let (server, keys, alice, first, main) = team(&EVERYONE);
    let repo = server.repo();
    let takeover = step(
        repo,
        &keys,
        &acquired("42", "bob", 2, 700, Some(600)),
        Some(&first),
        Some("bob"),
    );
    forge::set_ledger(repo, "42", &takeover);
    let check = [
        "check", "--remote", "origin", "42", "--token", "2", "--holder", "bob",
    ];
    lease(&alice, 720, &check).ok();
    // The team drops bob's line: the takeover it verified before is refused now.
    let without_bob = commit_list(
        repo,
        "main",
        &list_of(&keys, &[("alice", ""), ("ops", "")]),
        Some(&main),
    );
    fetch(&alice);
    let run = lease(&alice, 720, &check);
    run.code(1);
    assert!(said(&run).contains("verified here before"), "{run}");
    assert!(said(&run).contains("signature"), "{run}");
    // Retired the right way, valid until after his step, bob's key still vouches for it.
    let retired = [
        ("alice", ""),
        ("bob", "valid-before=\"20261130121640Z\""),
        ("ops", ""),
    ];
    commit_list(repo, "main", &list_of(&keys, &retired), Some(&without_bob));
    fetch(&alice);
    lease(&alice, 720, &check).ok();
}

#[test]
fn the_list_comes_from_the_remotes_default_branch_never_head_and_a_bad_line_is_named() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let (server, keys, alice, _, _) = team(&EVERYONE);
    lease(&alice, 10, &["verify", "--remote", "origin"]).ok();
    // Without origin/HEAD recorded, a clone with a working tree has no list: exit 2, and
    // the message says how to record it. HEAD's own list is never read.
    alice.git(&["remote", "set-head", "origin", "--delete"]);
    alice.git(&["checkout", "-q", "-B", "main", "origin/main"]);
    let run = lease(&alice, 10, &["verify", "--remote", "origin"]);
    run.code(2);
    assert!(
        run.stderr.contains("git remote set-head origin --auto"),
        "{run}"
    );
    assert!(run.stderr.contains("lease.allowedSigners"), "{run}");
    // lease.remote names the remote whose default branch holds it.
    alice.git(&["remote", "add", "team", &server.url()]);
    alice.git(&["fetch", "-q", "team"]);
    alice.git(&["remote", "set-head", "team", "--auto"]);
    alice.git(&["config", "lease.remote", "team"]);
    lease(&alice, 10, &["verify", "--remote", "origin"]).ok();
    // A malformed line: the branch, the file and the line are named, exit 2.
    let repo = server.repo();
    let main = repo.git(&["rev-parse", "refs/heads/main"]);
    let bad = format!(
        "{}alice frobnicate ssh-ed25519 AAAA\n",
        list_of(&keys, &EVERYONE)
    );
    commit_list(repo, "main", &bad, Some(&main));
    alice.git(&["fetch", "-q", "team"]);
    lease(&alice, 10, &["verify", "--remote", "origin"])
        .code(2)
        .stderr_has("refs/remotes/team/main:.git-lease/allowed_signers:5:");
}

/// Writes `value` on top of `parent` in `repo`, signed by `who`'s key, with the committer
/// time `committed_s` (seconds after T0) instead of the event's own.
fn backdated(
    repo: &TestRepo,
    keys: &Keys,
    value: &Value,
    parent: &str,
    who: &str,
    committed_s: i64,
) -> String {
    let blob = forge::blob(repo, &forge::lease_bytes(value));
    let tree = forge::tree(repo, &[("100644", "lease.json", &blob)]);
    let key = keys.key(who);
    forge::commit_signed(
        repo,
        &tree,
        &[parent],
        &at(committed_s),
        "forged",
        Some(&key),
    )
}

#[test]
fn a_key_revoked_with_valid_before_signs_nothing_after_even_backdated() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    // bob's key is valid until 1000 seconds after T0 (12:16:40).
    let retired = [
        ("alice", ""),
        ("bob", "valid-before=\"20261130121640Z\""),
        ("ops", ""),
    ];
    let (server, keys, alice, first, _) = team(&retired);
    lease(
        &alice,
        10,
        &["check", "--remote", "origin", "42", "--token", "1"],
    )
    .ok();
    let repo = server.repo();
    // At 2000, bob takes 42 over, his commit dated 500: git checks the key at the committer
    // time, and plain `git verify-commit` takes it.
    let takeover = acquired("42", "bob", 2, 2000, Some(600));
    let forged = backdated(repo, &keys, &takeover, &first, "bob", 500);
    let team_list = alice.scratch("list").join("allowed_signers");
    std::fs::write(&team_list, list_of(&keys, &retired)).expect("write the list");
    let file = format!("gpg.ssh.allowedSignersFile={}", team_list.display());
    let git = repo.git_run(&["-c", &file, "verify-commit", &forged]);
    assert_eq!(git.code, 0, "{git}");
    forge::set_ledger(repo, "42", &forged);
    let check = [
        "check", "--remote", "origin", "42", "--token", "2", "--holder", "bob",
    ];
    for args in [
        &check[..],
        &["show", "--remote", "origin", "42"],
        &["verify", "--remote", "origin"],
    ] {
        let run = lease(&alice, 2010, args);
        run.code(1);
        assert!(said(&run).contains("from its event's time"), "{run}");
    }
    // Backdated within the skew allowance (at 1200, committed at 950): the key is judged at
    // the event's time, when it was no longer valid.
    let late = acquired("42", "bob", 2, 1200, Some(600));
    let within_skew = backdated(repo, &keys, &late, &first, "bob", 950);
    forge::set_ledger(repo, "42", &within_skew);
    let run = lease(&alice, 1210, &check);
    run.code(1);
    assert!(said(&run).contains("at the event's time"), "{run}");
    // Dated honestly, the same takeover is signed by a key no longer valid at its time.
    let honest_date = step(repo, &keys, &takeover, Some(&first), Some("bob"));
    forge::set_ledger(repo, "42", &honest_date);
    let run = lease(&alice, 2010, &check);
    run.code(1);
    assert!(said(&run).contains("at the event's time"), "{run}");
    assert_eq!(
        alice.git(&["rev-parse", "refs/lease-remotes/origin/42"]),
        first
    );
    // Within its validity, bob's key signs: a takeover at 900.
    let in_time = step(
        repo,
        &keys,
        &acquired("42", "bob", 2, 900, Some(600)),
        Some(&first),
        Some("bob"),
    );
    forge::set_ledger(repo, "42", &in_time);
    lease(
        &alice,
        910,
        &[
            "check", "--remote", "origin", "42", "--token", "2", "--holder", "bob",
        ],
    )
    .ok();
}

/// Catches the mutant of `rules::signers` that accepts a revoke by any listed principal
/// whenever the list names administrators at all (`list.admins().is_empty()` for the check
/// that the principal is one of them), which a seeded property test alone used to find.
#[test]
fn a_revoke_signed_by_a_listed_non_administrator_is_refused_by_every_reader() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    // ops is the administrator; bob, listed but no administrator, revokes alice's live lease
    // with his own good signature.
    assert!(LISTED.contains(&"bob"));
    refused_by_every_reader(
        |repo, keys, tip| {
            step(
                repo,
                keys,
                &with(freed("42", "revoke", "alice", 1, 300), "by", json!("bob")),
                Some(tip),
                Some("bob"),
            )
        },
        320,
        "bob revoked, but is not an administrator",
    );
}
