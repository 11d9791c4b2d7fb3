//! Signed ledger events: with `lease.requireSignatures`, every reader refuses a step that is
//! not SSH-signed by a key of the allowed signers list allowed for the one the step needs (its
//! holder, its new holder, whoever frees an expired lease, an administrator for a revoke),
//! through a hookless server where anyone with push access can write anything; the hook
//! refuses such pushes early when the served repository requires signatures too; and plain
//! `git verify-commit`, given the same list, agrees on every signature.
//!
//! Keys are made by `ssh-keygen -t ed25519 -N ''` in each test's temporary directory; signed
//! ledger commits are written with plain git (`commit-tree -S`, `gpg.format=ssh`).

mod generated;
mod local;
mod readers;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::env::{at, TestRepo, Watch};
use crate::forge::{self, acquired, freed, renewed, with};
use crate::server::{lease, Server};

/// The listed signers; `ops` is the administrator. `mallory` has a key nobody listed.
pub(crate) const LISTED: [&str; 3] = ["alice", "bob", "ops"];
pub(crate) const UNLISTED: &str = "mallory";

pub(crate) fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// Returns true, having recorded why, when `ssh-keygen` (openssh-client, which `.ci/run`
/// installs) cannot run here: the caller, a test of signed ledgers, returns early. With
/// `CI=true` that is a failure instead.
pub(crate) fn no_ssh_keygen() -> bool {
    let runs = std::process::Command::new("ssh-keygen")
        .arg("-?")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    !runs
        && crate::env::unavailable::<()>(
            crate::env::Skip::Host,
            "",
            "ssh-keygen is missing (openssh-client, which .ci/run installs)",
        )
        .is_none()
}

/// Runs ssh-keygen, which must succeed.
pub(crate) fn ssh_keygen(args: &[&str]) {
    let out = std::process::Command::new("ssh-keygen")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ssh-keygen");
    assert!(
        out.status.success(),
        "ssh-keygen {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Keys made in one test's temporary directory, and the allowed signers file listing them.
pub(crate) struct Keys {
    pub(crate) dir: PathBuf,
    pub(crate) list: PathBuf,
}

impl Keys {
    /// Makes a key for each of [`LISTED`] and [`UNLISTED`] in `repo`'s scratch space and
    /// writes the allowed signers list of the listed ones, `ops` its administrator.
    pub(crate) fn new(repo: &TestRepo) -> Keys {
        let dir = repo.scratch("keys");
        let mut text = String::from("# lease-admins: ops\n");
        for who in LISTED.iter().chain([&UNLISTED]) {
            let key = dir.join(who);
            ssh_keygen(&["-q", "-t", "ed25519", "-N", "", "-C", who, "-f", path(&key)]);
            if *who != UNLISTED {
                let public = std::fs::read_to_string(key.with_extension("pub")).expect("a key");
                text += &format!("{who} namespaces=\"git\" {public}");
            }
        }
        let list = dir.join("allowed_signers");
        std::fs::write(&list, text).expect("write the allowed signers");
        Keys { dir, list }
    }

    pub(crate) fn key(&self, who: &str) -> PathBuf {
        self.dir.join(who)
    }

    /// Requires signatures in `repo`, against this list.
    pub(crate) fn require_in(&self, repo: &TestRepo) {
        repo.git(&["config", "lease.requireSignatures", "true"]);
        repo.git(&[
            "config",
            "lease.allowedSigners",
            &self.list.display().to_string(),
        ]);
    }

    /// What `git verify-commit` says of `commit` in `repo`, given this list.
    pub(crate) fn git_accepts(&self, repo: &TestRepo, commit: &str) -> bool {
        let file = format!("gpg.ssh.allowedSignersFile={}", self.list.display());
        repo.git_run(&["-c", &file, "verify-commit", commit]).code == 0
    }
}

/// Writes `value` on top of `parent` in `repo`, signed by `who`'s key (unsigned for `None`).
pub(crate) fn step(
    repo: &TestRepo,
    keys: &Keys,
    value: &Value,
    parent: Option<&str>,
    who: Option<&str>,
) -> String {
    let key = who.map(|w| keys.key(w));
    let parents: Vec<&str> = parent.into_iter().collect();
    forge::signed_lease_commit(repo, value, &parents, key.as_deref())
}

/// The commit object `commit` of `repo` with its signature moved onto `onto`'s content: a
/// good signature over other bytes.
fn graft(repo: &TestRepo, signature_of: &str, onto: &str) -> String {
    let signed = repo.git(&["cat-file", "commit", signature_of]);
    let header: Vec<&str> = signed
        .lines()
        .skip_while(|l| !l.starts_with("gpgsig "))
        .take_while(|l| l.starts_with("gpgsig ") || l.starts_with(' '))
        .collect();
    let body = repo.git(&["cat-file", "commit", onto]);
    let (headers, message) = body.split_once("\n\n").expect("a commit has a message");
    let text = format!("{headers}\n{}\n\n{message}\n", header.join("\n"));
    repo.git_stdin(
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        text.as_bytes(),
    )
}

/// The commit `unsigned` of `repo` signed by `who`'s key in the namespace `namespace`, with
/// ssh-keygen itself (git always signs in `git`).
fn signed_in_namespace(
    repo: &TestRepo,
    keys: &Keys,
    unsigned: &str,
    who: &str,
    namespace: &str,
) -> String {
    let body = repo.git(&["cat-file", "commit", unsigned]) + "\n";
    let file = repo.scratch("ns").join(unsigned);
    std::fs::write(&file, &body).expect("write the payload");
    ssh_keygen(&[
        "-q",
        "-Y",
        "sign",
        "-n",
        namespace,
        "-f",
        path(&keys.key(who)),
        path(&file),
    ]);
    let sig = std::fs::read_to_string(file.with_extension("sig")).expect("the signature");
    let (headers, message) = body.split_once("\n\n").expect("a commit has a message");
    let header = format!("gpgsig {}", sig.trim_end().replace('\n', "\n "));
    let text = format!("{headers}\n{header}\n\n{message}");
    repo.git_stdin(
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        text.as_bytes(),
    )
}

/// A hookless daemon whose ledger 42 is alice's signed tenure from 0 for 600 seconds (and
/// `marker`, alice's too, never expiring), then `forged(server repo, alice's tip)` on top;
/// alice's clone, requiring signatures; a mirror, requiring them too, synced before the
/// forgery; and alice's first step.
pub(crate) fn forged_on_a_hookless_server(
    forged: impl Fn(&TestRepo, &Keys, &str) -> String,
) -> (Server, TestRepo, TestRepo, String) {
    let server = Server::daemon();
    let keys = Keys::new(server.repo());
    let repo = server.repo();
    let first = step(
        repo,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("alice"),
    );
    let marker = step(
        repo,
        &keys,
        &acquired("marker", "alice", 1, 0, None),
        None,
        Some("alice"),
    );
    forge::set_ledger(repo, "marker", &marker);
    forge::set_ledger(repo, "42", &first);
    let mirror = server.mirror();
    keys.require_in(&mirror);
    lease(&mirror, 10, &["sync", "origin"]).ok();
    let tip = forged(repo, &keys, &first);
    forge::set_ledger(repo, "42", &tip);
    let alice = server.client("alice");
    keys.require_in(&alice);
    (server, alice, mirror, first)
}

/// Asserts that every reading command of a clone requiring signatures, at `now_s`, refuses
/// ledger 42 naming the signature rule and `why`, and that `sync` keeps what a mirror had.
#[track_caller]
pub(crate) fn refused_by_every_reader(
    forged: impl Fn(&TestRepo, &Keys, &str) -> String,
    now_s: i64,
    why: &str,
) {
    let (server, alice, mirror, first) = forged_on_a_hookless_server(forged);
    let before = server.refs();
    for args in [
        &["list", "--remote", "origin"][..],
        &["show", "--remote", "origin", "42"],
        &["check", "--remote", "origin", "42", "--token", "1"],
        &["log", "--remote", "origin", "42"],
        &["verify", "--remote", "origin"],
        &["acquire", "--remote", "origin", "42", "--holder", "bob"],
    ] {
        let run = lease(&alice, now_s, args);
        run.code(1);
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(said.contains("signature") && said.contains(why), "{run}");
    }
    assert_eq!(server.refs(), before, "nothing was pushed");
    // The honest ledger is still listed.
    lease(&alice, now_s, &["list", "--remote", "origin"]).stdout_has("marker");
    // watch's start: the refused ledger said on stderr, the others watched.
    let mut watch = Watch::spawn(
        &alice,
        alice.lease().now(&at(now_s)).arg_json().args([
            "watch",
            "--remote",
            "origin",
            "--since",
            &at(-3600),
        ]),
    );
    watch.wait_event("marker", "acquire");
    assert!(watch.stderr().contains(why), "{}", watch.stderr());
    assert!(
        watch.seen.iter().all(|e| e["issue"] != "42"),
        "{:?}",
        watch.seen
    );
    watch.signal("TERM");
    watch.wait_exit();
    // A mirror that had alice's first step keeps it.
    let run = lease(&mirror, now_s, &["sync", "origin"]);
    run.code(1);
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains(why),
        "{run}"
    );
    assert_eq!(mirror.git(&["rev-parse", "refs/leases/42"]), first);
    // Without the setting, the same clone reads the ledger as it did before.
    let plain = server.client("carol");
    lease(&plain, now_s, &["show", "--remote", "origin", "42"]).ok();
}

/// Every role's honest steps: alice renews and releases, bob takes a new tenure, ops revokes
/// it, carol's short tenure expires and alice frees it; one ledger per scenario.
fn honest_ledgers(repo: &TestRepo, keys: &Keys) -> Vec<(String, Vec<String>)> {
    let chain = |issue: &str, steps: &[(Value, &str)]| {
        let mut commits: Vec<String> = Vec::new();
        for (value, who) in steps {
            let c = step(
                repo,
                keys,
                value,
                commits.last().map(String::as_str),
                Some(who),
            );
            commits.push(c);
        }
        forge::set_ledger(repo, issue, commits.last().expect("a step"));
        (issue.to_owned(), commits)
    };
    let revoke = with(
        with(freed("2", "revoke", "bob", 1, 200), "by", json!("ops")),
        "reason",
        json!("reassigned"),
    );
    let freed_by_alice = with(freed("3", "release", "bob", 1, 200), "by", json!("alice"));
    vec![
        chain(
            "1",
            &[
                (acquired("1", "alice", 1, 0, Some(600)), "alice"),
                (renewed("1", "alice", 1, 0, 100, 600), "alice"),
                (freed("1", "release", "alice", 1, 200), "alice"),
                (acquired("1", "bob", 2, 300, Some(600)), "bob"),
            ],
        ),
        chain(
            "2",
            &[
                (acquired("2", "bob", 1, 0, Some(600)), "bob"),
                (revoke, "ops"),
            ],
        ),
        chain(
            "3",
            &[
                (acquired("3", "bob", 1, 0, Some(60)), "bob"),
                (freed_by_alice, "alice"),
            ],
        ),
    ]
}

#[test]
fn honest_signed_steps_of_every_role_pass_every_reader_and_git_agrees() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let server = Server::daemon();
    let keys = Keys::new(server.repo());
    let ledgers = honest_ledgers(server.repo(), &keys);
    let alice = server.client("alice");
    keys.require_in(&alice);
    lease(&alice, 400, &["verify", "--remote", "origin"])
        .ok()
        .stdout_has("ok: 3 ledgers, 8 commits");
    lease(&alice, 400, &["list", "--remote", "origin", "--all"])
        .ok()
        .stdout_has("bob");
    for issue in ["1", "2", "3"] {
        lease(&alice, 400, &["show", "--remote", "origin", issue]).ok();
        lease(&alice, 400, &["log", "--remote", "origin", issue]).ok();
    }
    lease(
        &alice,
        400,
        &[
            "check", "--remote", "origin", "1", "--token", "2", "--holder", "bob",
        ],
    )
    .ok();
    let mirror = server.mirror();
    keys.require_in(&mirror);
    lease(&mirror, 400, &["sync", "origin"]).ok();
    lease(&mirror, 400, &["verify"]).ok();
    // A signature git-lease accepts, git accepts.
    for (_, commits) in &ledgers {
        for c in commits {
            assert!(
                keys.git_accepts(server.repo(), c),
                "git verify-commit refuses {c}"
            );
        }
    }
}

#[test]
fn git_verify_commit_agrees_on_every_signature_and_the_role_is_git_leases_alone() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let repo = TestRepo::new();
    let keys = Keys::new(&repo);
    keys.require_in(&repo);
    let first = step(
        &repo,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("alice"),
    );
    let renew = renewed("42", "alice", 1, 0, 300, 600);
    let good = step(&repo, &keys, &renew, Some(&first), Some("alice"));
    let unsigned = step(&repo, &keys, &renew, Some(&first), None);
    let by_bob = step(&repo, &keys, &renew, Some(&first), Some("bob"));
    let unlisted = step(&repo, &keys, &renew, Some(&first), Some(UNLISTED));
    let other = step(
        &repo,
        &keys,
        &renewed("42", "alice", 1, 0, 300, 9000),
        Some(&first),
        None,
    );
    let grafted = graft(&repo, &good, &other);
    let namespaced = signed_in_namespace(&repo, &keys, &unsigned, "alice", "file");
    // (commit, git accepts its signature, git-lease accepts the step)
    for (commit, git, ours) in [
        (&good, true, true),
        (&unsigned, false, false),
        (&by_bob, true, false),
        (&unlisted, false, false),
        (&grafted, false, false),
        (&namespaced, false, false),
    ] {
        forge::set_ledger(&repo, "42", commit);
        assert_eq!(keys.git_accepts(&repo, commit), git, "git on {commit}");
        let run = lease(&repo, 320, &["verify"]);
        assert_eq!(run.code == 0, ours, "git-lease on {commit}: {run}");
        if !ours {
            run.stdout_has("signature");
        }
    }
}

#[test]
fn without_require_signatures_an_unsigned_ledger_reads_as_before() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let server = Server::daemon();
    let alice = server.client("alice");
    lease(&alice, 0, &["acquire", "--remote", "origin", "42"]).ok();
    lease(&alice, 1, &["verify", "--remote", "origin"]).ok();
    lease(&alice, 1, &["show", "--remote", "origin", "42"])
        .ok()
        .stdout_has("alice");
    // The same clone, once it requires signatures, refuses what git-lease wrote unsigned.
    let keys = Keys::new(&alice);
    keys.require_in(&alice);
    lease(&alice, 1, &["verify"]).code(1).stdout_has("unsigned");
}

#[test]
fn a_hooked_server_requiring_signatures_refuses_an_unsigned_push() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let mut server = Server::with_hook();
    let keys = Keys::new(server.repo());
    server.config("lease.requireSignatures", "true");
    server.config("lease.allowedSigners", &keys.list.display().to_string());
    server.start_at(&at(10));
    let client = server.client("alice");
    let unsigned = step(
        &client,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        None,
    );
    let run = crate::attack::push_to(
        &client,
        &server.url(),
        &format!("{unsigned}:refs/leases/42"),
    );
    assert_ne!(run.code, 0, "{run}");
    assert!(
        run.stderr.contains("signature") && run.stderr.contains("unsigned"),
        "{run}"
    );
    assert_eq!(server.tip("42"), None);
    let by_bob = step(
        &client,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("bob"),
    );
    let run = crate::attack::push_to(&client, &server.url(), &format!("{by_bob}:refs/leases/42"));
    assert!(run.stderr.contains("not allowed for alice"), "{run}");
    let signed = step(
        &client,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("alice"),
    );
    crate::attack::push_to(&client, &server.url(), &format!("{signed}:refs/leases/42")).ok();
    assert_eq!(server.tip("42").as_deref(), Some(signed.as_str()));
}
