//! Signatures in a local repository: an unsigned step refused by `list`, `show`, `check`, `log`
//! and `watch`, the list cache vouching only under the same allowed signers, SHA-256, and the
//! ledgers git-lease signs itself.

use super::*;

/// Makes `repo` sign its ledger commits with `key` (git's own settings).
fn sign_with(repo: &TestRepo, key: &Path) {
    repo.git(&["config", "gpg.format", "ssh"]);
    repo.git(&["config", "user.signingKey", path(key)]);
    repo.git(&["config", "lease.sign", "true"]);
}

/// The allowed signers version the list cache of `repo` says its records were verified under.
fn cache_verified(repo: &TestRepo) -> Option<String> {
    let gix = gix::open_opts(repo.path(), gix::open::Options::isolated()).expect("open");
    let store = git_lease::Store::from_repo(gix).expect("a store");
    git_lease::cache::ListCache::for_leases(&store)
        .load()
        .and_then(|s| s.verified().map(str::to_owned))
}

/// A repository requiring signatures whose ledger 42 is alice's signed tenure from 0 for 600
/// seconds, then an unsigned renew at 300; and alice's first step.
fn local_ledger_with_an_unsigned_renew() -> (TestRepo, Keys, String) {
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
    let renew = step(
        &repo,
        &keys,
        &renewed("42", "alice", 1, 0, 300, 600),
        Some(&first),
        None,
    );
    forge::set_ledger(&repo, "42", &renew);
    (repo, keys, first)
}

#[test]
fn a_local_ledger_with_an_unsigned_step_is_refused_by_list_show_check_and_log() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let (repo, keys, first) = local_ledger_with_an_unsigned_renew();
    for args in [
        &["list"][..],
        &["show", "42"],
        &["check", "42", "--token", "1"],
        &["log", "42"],
        &["verify"],
    ] {
        let run = lease(&repo, 320, args);
        run.code(1);
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains("signature") && said.contains("unsigned"),
            "{run}"
        );
    }
    // Signed as it should be, it reads.
    let signed = step(
        &repo,
        &keys,
        &renewed("42", "alice", 1, 0, 300, 600),
        Some(&first),
        Some("alice"),
    );
    forge::set_ledger(&repo, "42", &signed);
    lease(&repo, 320, &["show", "42"]).ok().stdout_has("alice");
    lease(&repo, 320, &["list"]).ok().stdout_has("alice");
}

#[test]
fn the_list_cache_vouches_only_for_ledgers_verified_under_the_same_allowed_signers() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    // Enough ledgers for a listing to write its cache: 64 of alice's and one of bob's.
    let repo = TestRepo::new();
    let keys = Keys::new(&repo);
    for i in 0..64 {
        let issue = format!("a{i}");
        let c = step(
            &repo,
            &keys,
            &acquired(&issue, "alice", 1, 0, None),
            None,
            Some("alice"),
        );
        forge::set_ledger(&repo, &issue, &c);
    }
    let bobs = step(
        &repo,
        &keys,
        &acquired("b", "bob", 1, 0, None),
        None,
        Some("bob"),
    );
    forge::set_ledger(&repo, "b", &bobs);
    // A listing that does not verify writes a cache that vouches for nothing.
    lease(&repo, 10, &["list"]).ok();
    assert_eq!(cache_verified(&repo), None);
    // An unsigned step under those records: a listing requiring signatures finds it.
    let unsigned = step(
        &repo,
        &keys,
        &acquired("a0", "alice", 1, 0, None),
        None,
        None,
    );
    forge::set_ledger(&repo, "a0", &unsigned);
    keys.require_in(&repo);
    lease(&repo, 10, &["list"]).code(1).stderr_has("unsigned");
    forge::set_ledger(
        &repo,
        "a0",
        &step(
            &repo,
            &keys,
            &acquired("a0", "alice", 1, 0, None),
            None,
            Some("alice"),
        ),
    );
    // The first listing verifies every ledger and records the list's version.
    lease(&repo, 10, &["list"]).ok().stdout_has("bob");
    // The version is the list's blob id and the edition of the signature rules.
    let blob = repo.git(&["hash-object", &keys.list.display().to_string()]);
    let version = format!("{blob}.2");
    assert_eq!(cache_verified(&repo).as_deref(), Some(version.as_str()));
    lease(&repo, 10, &["list"]).ok().stdout_has("bob");
    // A ledger that grew since is verified from the tip the cache vouched for.
    let a1 = repo.git(&["rev-parse", "refs/leases/a1"]);
    let renew = renewed("a1", "alice", 1, 0, 5, 600);
    forge::set_ledger(
        &repo,
        "a1",
        &step(&repo, &keys, &renew, Some(&a1), Some("alice")),
    );
    lease(&repo, 10, &["list"]).ok().stdout_has("a1");
    let a2 = repo.git(&["rev-parse", "refs/leases/a2"]);
    let renew = renewed("a2", "alice", 1, 0, 5, 600);
    forge::set_ledger(
        &repo,
        "a2",
        &step(&repo, &keys, &renew, Some(&a2), Some("bob")),
    );
    lease(&repo, 10, &["list"])
        .code(1)
        .stderr_has("not allowed for alice");
    forge::set_ledger(&repo, "a2", &a2);
    // A list without bob's key: the records verified under the old one vouch for nothing.
    let text = std::fs::read_to_string(&keys.list).expect("the list");
    let without_bob: String = text
        .lines()
        .filter(|l| !l.starts_with("bob "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&keys.list, without_bob).expect("write the list");
    lease(&repo, 10, &["list"])
        .code(1)
        .stderr_has("does not allow");
}

#[test]
fn a_sha256_repository_reads_the_signature_git_writes_there() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    // git signs a SHA-256 commit in its `gpgsig-sha256` header.
    let repo = TestRepo::init(&["--object-format=sha256"]);
    let keys = Keys::new(&repo);
    keys.require_in(&repo);
    let first = step(
        &repo,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("alice"),
    );
    assert!(repo
        .git(&["cat-file", "commit", &first])
        .contains("\ngpgsig-sha256 "));
    forge::set_ledger(&repo, "42", &first);
    lease(&repo, 10, &["verify"]).ok();
    lease(&repo, 10, &["show", "42"]).ok().stdout_has("alice");
    let by_bob = step(
        &repo,
        &keys,
        &acquired("42", "alice", 1, 0, Some(600)),
        None,
        Some("bob"),
    );
    forge::set_ledger(&repo, "42", &by_bob);
    lease(&repo, 10, &["verify"])
        .code(1)
        .stdout_has("not allowed for alice");
}

#[test]
fn a_local_watch_leaves_out_a_ledger_with_an_unsigned_step_and_says_so() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let (repo, keys, _) = local_ledger_with_an_unsigned_renew();
    let marker = step(
        &repo,
        &keys,
        &acquired("marker", "alice", 1, 0, None),
        None,
        Some("alice"),
    );
    forge::set_ledger(&repo, "marker", &marker);
    let mut watch = Watch::spawn(
        &repo,
        repo.lease()
            .now(&at(320))
            .arg_json()
            .args(["watch", "--since", &at(-3600)]),
    );
    watch.wait_event("marker", "acquire");
    assert!(watch.stderr().contains("unsigned"), "{}", watch.stderr());
    assert!(
        watch.seen.iter().all(|e| e["issue"] != "42"),
        "{:?}",
        watch.seen
    );
    watch.signal("TERM");
    watch.wait_exit();
}

#[test]
fn ledgers_git_lease_signs_pass_every_reader_requiring_signatures_and_git_verify_commit() {
    if crate::signatures::no_ssh_keygen() {
        return;
    }
    let server = Server::daemon();
    let keys = Keys::new(server.repo());
    // carol signs with an RSA key and erin with an ECDSA one, listed beside the others.
    let mut list = std::fs::read_to_string(&keys.list).expect("the list");
    for (who, kind) in [("carol", "rsa"), ("erin", "ecdsa")] {
        let key = keys.dir.join(who);
        ssh_keygen(&["-q", "-t", kind, "-N", "", "-C", who, "-f", path(&key)]);
        let public = std::fs::read_to_string(key.with_extension("pub")).expect("a key");
        list += &format!("{who} namespaces=\"git\" {public}");
    }
    std::fs::write(&keys.list, list).expect("write the list");
    let rsa = keys.dir.join("carol");

    let client = |who: &str, key: &Path| {
        let repo = server.client(who);
        keys.require_in(&repo);
        sign_with(&repo, key);
        repo
    };
    let alice = client("alice", &keys.key("alice"));
    let bob = client("bob", &keys.key("bob"));
    let carol = client("carol", &rsa);
    let ops = client("ops", &keys.key("ops"));
    let erin = client("erin", &keys.dir.join("erin"));
    let remote = |repo: &TestRepo, s: i64, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--remote", "origin"]);
        lease(repo, s, &all).ok();
    };
    // Every role, each step signed by the one who acted.
    remote(&alice, 0, &["acquire", "1", "--ttl", "10m"]);
    remote(&alice, 60, &["renew", "1", "--ttl", "10m"]);
    remote(&alice, 120, &["release", "1"]);
    remote(&carol, 180, &["acquire", "1", "--ttl", "1m"]);
    remote(&bob, 0, &["acquire", "2", "--ttl", "10m"]);
    remote(&ops, 60, &["revoke", "2", "--reason", "reassigned"]);
    remote(&bob, 0, &["acquire", "3", "--ttl", "1m"]);
    // bob's tenure of 3 expired at 60: alice frees it.
    remote(&alice, 300, &["release", "3", "--holder", "alice"]);
    remote(&erin, 0, &["acquire", "4", "--ttl", "10m"]);

    // A reader requiring signatures accepts all of it, and so does a mirror.
    let reader = server.client("dave");
    keys.require_in(&reader);
    lease(&reader, 400, &["verify", "--remote", "origin"]).ok();
    lease(&reader, 400, &["list", "--remote", "origin", "--all"]).ok();
    for issue in ["1", "2", "3", "4"] {
        lease(&reader, 400, &["log", "--remote", "origin", issue]).ok();
    }
    let mirror = server.mirror();
    keys.require_in(&mirror);
    lease(&mirror, 400, &["sync", "origin"]).ok();
    lease(&mirror, 400, &["verify"]).ok();
    lease(&mirror, 400, &["list", "--all"]).ok();
    // git verifies every commit with the same list, and every one is signed.
    let mut commits = 0;
    for issue in ["1", "2", "3", "4"] {
        let all = server
            .repo()
            .git(&["rev-list", &format!("refs/leases/{issue}")]);
        for c in all.lines() {
            assert!(keys.git_accepts(server.repo(), c), "git refuses {c}");
            commits += 1;
        }
    }
    assert_eq!(commits, 9);
}
