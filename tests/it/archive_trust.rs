//! `lease.trustArchive` (docs/SECURITY.md, "Trust on first sight"): a clone that never verified
//! a remote's archive claims from the remote's newest fold alone, fetched into a shallow side
//! repository, never into the clone; a claim of an issue that fold records, and every read
//! that shows the archive, verify it whole; once verified, every later fold is judged.

use crate::archive::{on_server, seven_free_and_eight_held, seven_free_and_eight_held_on};
use crate::env::{at, TestRepo};
use crate::server::{lease, Server};

/// `client`, trusting its remote's newest fold.
fn trusting(client: TestRepo) -> TestRepo {
    client.git(&["config", "lease.trustArchive", "true"]);
    client
}

/// Whether `client`'s object database holds `id`.
fn has(client: &TestRepo, id: &str) -> bool {
    client.git_run(&["cat-file", "-e", id]).code == 0
}

/// Where `refname` points in `client`, if it exists.
fn rev(client: &TestRepo, refname: &str) -> Option<String> {
    let run = client.git_run(&["rev-parse", "--verify", "--quiet", refname]);
    (run.code == 0).then(|| run.stdout.trim().to_owned())
}

/// The fold `client`'s archive index of `origin` holds.
fn indexed(client: &TestRepo) -> String {
    let index = client.path().join(".git/lease-archive-index/origin");
    client.git(&[
        "--git-dir".as_ref(),
        index.as_os_str(),
        "rev-parse".as_ref(),
        "refs/lease-archive".as_ref(),
    ])
}

/// How many packs `client`'s archive index of `origin` holds.
fn index_packs(client: &TestRepo) -> usize {
    let packs = client
        .path()
        .join(".git/lease-archive-index/origin/objects/pack");
    std::fs::read_dir(packs).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        })
        .count()
    })
}

/// The server folds, at `secs` (its hook's clock set to it too), every ledger free for a
/// minute.
fn fold_at(server: &Server, secs: i64) {
    server.config("lease.hookNow", &at(secs));
    on_server(server, &at(secs), &["archive", "--quiet-for", "1m"]);
}

/// Makes `server` filter what it sends (`uploadpack.allowFilter`), folds it at 200 s, and
/// returns bob's new trusting clone of it.
fn filtering_fold_for_bob(server: &Server) -> TestRepo {
    server.config("uploadpack.allowFilter", "true");
    fold_at(server, 200);
    trusting(server.client("bob"))
}

/// Claims `issue` for a minute as `client` at `secs` and frees it a second later.
fn claim_and_free(client: &TestRepo, secs: i64, issue: &str) {
    lease(
        client,
        secs,
        &["acquire", issue, "--ttl", "1m", "--remote", "origin"],
    )
    .ok();
    lease(client, secs + 1, &["release", issue, "--remote", "origin"]).ok();
}

#[test]
fn a_new_clone_claims_from_the_newest_fold_alone_and_verifies_the_archive_to_revive() {
    let (server, alice) = seven_free_and_eight_held();
    let archived_tip = server.tip("7").expect("7 has a ledger");
    fold_at(&server, 200);
    let first_fold = server.rev("refs/lease-archive").expect("an archive");

    let bob = trusting(server.client("bob"));
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    // The fold came alone: nothing it records, and the clone is whole, not shallow.
    assert!(has(&bob, &first_fold), "the fold's commit, for the push");
    assert!(
        !has(&bob, &archived_tip),
        "no archived ledger was fetched for a claim of a new issue"
    );
    assert_eq!(
        bob.git(&["rev-parse", "--is-shallow-repository"]).trim(),
        "false"
    );
    assert!(
        rev(&bob, "refs/lease-remote-archive/origin").is_none(),
        "nothing was verified"
    );
    bob.git(&["fsck", "--no-dangling"]);
    assert_eq!(indexed(&bob), first_fold);

    // The next claim decides from the index and pushes guarded by its fold.
    lease(&bob, 211, &["acquire", "11", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");

    // A new fold takes Alice's 12: Bob's guarded push loses, he reads the new fold, which
    // does not record 13, and claims it; then 12, which it records, from its archived tip.
    claim_and_free(&alice, 300, "12");
    fold_at(&server, 400);
    assert_eq!(server.tip("12"), None, "12 was folded");
    lease(&bob, 410, &["acquire", "13", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert!(!has(&bob, &archived_tip));
    lease(&bob, 411, &["acquire", "12", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    // Reviving needed the archived ledger: the archive was fetched and verified whole.
    assert!(has(&bob, &archived_tip));
    assert_eq!(
        rev(&bob, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive")
    );
    lease(&bob, 412, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    bob.git(&["fsck", "--no-dangling"]);
    on_server(&server, &at(420), &["verify"]);
    server.git(&["fsck", "--no-dangling"]);
}

/// The objects `client`'s archive index of `origin` holds, sorted (none is fetched to list
/// them).
fn index_objects(client: &TestRepo) -> Vec<String> {
    let index = client.path().join(".git/lease-archive-index/origin");
    let listed = client.git(&[
        "--git-dir".as_ref(),
        index.as_os_str(),
        "cat-file".as_ref(),
        "--batch-all-objects".as_ref(),
        "--batch-check=%(objectname)".as_ref(),
    ]);
    listed.lines().map(str::to_owned).collect()
}

/// A server that filters (`uploadpack.allowFilter`) sends a trusting clone the newest fold's
/// commit and root tree, then, for an issue whose first fan-out level the fold uses, that
/// level's tree with the trees under it: never the whole tree.
#[test]
fn a_server_that_filters_sends_the_trees_on_a_claimed_path_alone() {
    let (server, _alice) = seven_free_and_eight_held();
    let bob = filtering_fold_for_bob(&server);
    let fold = server.rev("refs/lease-archive").expect("an archive");
    let tree = |path: &str| {
        server
            .rev(&format!("refs/lease-archive:{path}"))
            .expect("a tree of the fold")
    };
    // Issue 7 is archived at 79/02/7 (the SHA-256 of "7" starts 7902); "n10" starts 7966,
    // "n247911" 7902; "10" shares no level with 7.
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    let mut expected = vec![fold.clone(), tree("")];
    expected.sort();
    assert_eq!(index_objects(&bob), expected, "the fold's commit and root");

    lease(&bob, 211, &["acquire", "n10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    expected.extend([tree("79"), tree("79/02")]);
    expected.sort();
    assert_eq!(index_objects(&bob), expected, "and the level n10 needed");
    lease(&bob, 212, &["acquire", "n247911", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert_eq!(index_objects(&bob), expected, "answered by the index");
    assert!(rev(&bob, "refs/lease-remote-archive/origin").is_none());

    // Issue 7 is recorded: the archive is verified whole, and its ledger goes on.
    lease(&bob, 213, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    assert_eq!(rev(&bob, "refs/lease-remote-archive/origin"), Some(fold));
    bob.git(&["fsck", "--no-dangling"]);
    on_server(&server, &at(220), &["verify"]);
}

/// A partial index whose tree on a claimed path is garbage (a disk error, a hostile process)
/// never reads as "not archived": the claim goes to the verified archive, and an archived
/// issue goes on from its ledger.
#[test]
fn a_garbled_tree_in_a_partial_index_never_reads_as_not_archived() {
    let (server, _alice) = seven_free_and_eight_held();
    let bob = filtering_fold_for_bob(&server);
    lease(&bob, 210, &["acquire", "n10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    // The tree 79/ (7's first level, fetched for n10) made garbage in place.
    let tree = server
        .rev("refs/lease-archive:79")
        .expect("a tree of the fold");
    let index = bob.path().join(".git/lease-archive-index/origin");
    let mut removed = 0;
    for entry in std::fs::read_dir(index.join("objects/pack")).expect("packs") {
        let idx = entry.expect("an entry").path();
        if idx.extension().is_some_and(|e| e == "idx")
            && bob
                .git(&["verify-pack".as_ref(), "-v".as_ref(), idx.as_os_str()])
                .contains(&tree)
        {
            for ext in ["idx", "pack", "rev", "promisor"] {
                let _ = std::fs::remove_file(idx.with_extension(ext));
            }
            removed += 1;
        }
    }
    assert_eq!(removed, 1, "the pack of the tree fetch");
    let loose = index.join("objects").join(&tree[..2]);
    std::fs::create_dir_all(&loose).expect("a fan-out folder");
    std::fs::write(loose.join(&tree[2..]), b"not a zlib stream").expect("garbage");

    lease(&bob, 211, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    assert_eq!(
        rev(&bob, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive"),
        "the archive was verified whole"
    );
    on_server(&server, &at(220), &["verify"]);
}

/// `acquire --any` reads its candidates' paths in one fetch for all of them, not one each.
#[test]
fn a_claim_of_any_candidate_fetches_their_paths_at_once() {
    let (server, alice) = seven_free_and_eight_held();
    claim_and_free(&alice, 10, "9");
    claim_and_free(&alice, 20, "6");
    let bob = filtering_fold_for_bob(&server);
    // 7, 9 and 6 are archived under 79/, 19/ and e7/; n10, n259 and n398 are new issues
    // under those first levels (79/66, 19/f3, e7/b1).
    let run = lease(
        &bob,
        210,
        &[
            "acquire", "--any", "n10", "n259", "n398", "--remote", "origin",
        ],
    );
    run.ok().stdout_has("(token 1)");
    assert_eq!(index_packs(&bob), 2, "the fold, then the three paths");
    let objects = index_objects(&bob);
    for path in ["79", "79/02", "19", "19/58", "e7", "e7/f6"] {
        let tree = server
            .rev(&format!("refs/lease-archive:{path}"))
            .expect("a tree of the fold");
        assert!(objects.contains(&tree), "{path} is in the index");
    }
    assert!(rev(&bob, "refs/lease-remote-archive/origin").is_none());
}

/// What trust on first sight takes and what it does not: an archive forged on the server
/// (by its own account, past the hook) is taken by a claim of a new trusting clone, and
/// refused by everything that verifies, a trusting clone that verified before included.
#[test]
fn trust_takes_the_newest_fold_unjudged_only_until_a_fold_is_verified() {
    let (server, alice) = seven_free_and_eight_held();
    fold_at(&server, 200);
    let archive = server.rev("refs/lease-archive").expect("an archive");
    // Alice verifies the archive, then trusts.
    lease(&alice, 210, &["list", "--all", "--remote", "origin"]).ok();
    let alice = trusting(alice);

    // A fold that forgets issue 7's archived tip.
    let empty = server.git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let forged = server.git(&["commit-tree", empty.trim(), "-p", &archive, "-m", "x"]);
    server.git(&["update-ref", "refs/lease-archive", forged.trim()]);

    let run = lease(&alice, 220, &["acquire", "20", "--remote", "origin"]);
    assert_eq!(run.code, 1, "a fold verified here is judged on from: {run}");
    run.stderr_has("refs/lease-archive");
    // The server's hook judges every fold, so a clone trusts by default: carol opts out.
    let doubting = server.client("carol");
    doubting.git(&["config", "lease.trustArchive", "false"]);
    let run = lease(&doubting, 220, &["acquire", "20", "--remote", "origin"]);
    assert_eq!(run.code, 1, "without trust, every fold is judged: {run}");
    let dave = trusting(server.client("dave"));
    let run = lease(&dave, 220, &["sync", "origin"]);
    assert_eq!(
        run.code, 1,
        "a sync verifies the archive, trust or not: {run}"
    );

    // The one thing trust takes unjudged: a new clone's claim of an issue the newest fold
    // does not record.
    let erin = trusting(server.client("erin"));
    lease(&erin, 220, &["acquire", "20", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    let run = lease(&erin, 221, &["list", "--all", "--remote", "origin"]);
    assert_eq!(run.code, 1, "reading the archive verifies it: {run}");
}

/// The index is fetched with the clone's own configuration: here a remote reached only
/// through a URL rewrite (`url.<base>.insteadOf`) that carries the credentials, over http.
#[test]
fn the_index_is_fetched_with_the_clones_own_url_rewrites_and_credentials() {
    let (server, _alice) = seven_free_and_eight_held_on(Server::http(&["alice", "bob"]));
    fold_at(&server, 200);
    let archived_tip = server.rev("refs/lease-archive").expect("an archive");

    let bob = trusting(server.client("bob"));
    let real = server.url_as("bob");
    let base = real.trim_end_matches("leases.git");
    bob.git(&["config", &format!("url.{base}.insteadOf"), "leases-host:"]);
    bob.git(&["remote", "set-url", "origin", "leases-host:leases.git"]);
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert!(
        has(&bob, &archived_tip),
        "the fold's commit came through the rewrite"
    );
    assert!(
        rev(&bob, "refs/lease-remote-archive/origin").is_none(),
        "from the index, not the verified archive"
    );
    assert_eq!(server.tip("10").map(|t| t.len()), Some(40));
}

/// A partial index's fetches name the remote as their promisor without writing it down: a
/// URL's credentials never land in the index's configuration file.
#[test]
fn a_partial_index_keeps_no_credentials_of_a_url_remote() {
    let (server, _alice) = seven_free_and_eight_held_on(Server::http(&["alice", "bob"]));
    let bob = filtering_fold_for_bob(&server);
    let url = server.url_as("bob");
    // n10 shares its first fan-out level with the archived 7: a tree of it is fetched.
    for (secs, issue) in [(210, "10"), (211, "n10")] {
        lease(&bob, secs, &["acquire", issue, "--remote", &url])
            .ok()
            .stdout_has("(token 1)");
    }
    let indexes = bob.path().join(".git/lease-archive-index");
    let mut configs = Vec::new();
    for index in std::fs::read_dir(&indexes).expect("an index") {
        let config = index.expect("an index").path().join("config");
        configs.push(std::fs::read_to_string(&config).expect("its config"));
    }
    assert_eq!(configs.len(), 1, "one index, for the one remote");
    assert!(
        !configs[0].contains("bobpw") && !configs[0].contains("promisor"),
        "{}",
        configs[0]
    );
    assert_eq!(
        bob.git(&["for-each-ref", "refs/lease-remote-archive/"]),
        "",
        "from the index, not the verified archive"
    );
    lease(&bob, 212, &["acquire", "7", "--remote", &url])
        .ok()
        .stdout_has("(token 2)");
}

/// An index whose packs pass 64 MiB (git keeps every object a filtered fetch brought) is made
/// anew before its next fetch of a fold, and answers as before.
#[test]
fn an_index_past_its_size_bound_is_made_anew() {
    let (server, alice) = seven_free_and_eight_held();
    let bob = filtering_fold_for_bob(&server);
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    // A pack file of 65 MiB, sparse (no disk space taken; git and git-lease never read a
    // pack without its index).
    let index = bob.path().join(".git/lease-archive-index/origin");
    let big = index.join(format!("objects/pack/pack-{}.pack", "0".repeat(40)));
    std::fs::File::create(&big)
        .and_then(|f| f.set_len(65 << 20))
        .expect("a sparse pack file");

    // A new fold: Bob's guarded claim loses, and his next fetch of the fold starts over.
    claim_and_free(&alice, 300, "12");
    fold_at(&server, 400);
    lease(&bob, 410, &["acquire", "13", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert!(!big.exists(), "the index was made anew");
    assert_eq!(
        indexed(&bob),
        server.rev("refs/lease-archive").expect("an archive")
    );
    assert!(rev(&bob, "refs/lease-remote-archive/origin").is_none());
    lease(&bob, 411, &["acquire", "12", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
}

/// Each new fold a trusting clone reads adds a pack to its index; past 16, the index is packed
/// into one, and it still answers.
#[test]
fn the_index_of_a_long_lived_clone_stays_packed() {
    stays_packed(false);
}

/// The same where the server filters: the index is partial (git's promisor packs), and its
/// fetches of single trees count too.
#[test]
fn a_partial_index_of_a_long_lived_clone_stays_packed() {
    stays_packed(true);
}

fn stays_packed(filter: bool) {
    let (server, alice) = seven_free_and_eight_held();
    server.config("uploadpack.allowFilter", &filter.to_string());
    let bob = trusting(server.client("bob"));
    let packs = || index_packs(&bob);
    let mut most = 0;
    for round in 0..20i64 {
        let t = 100 + round * 100;
        claim_and_free(&alice, t, &format!("a{round}"));
        fold_at(&server, t + 90);
        lease(
            &bob,
            t + 91,
            &["acquire", &format!("b{round}"), "--remote", "origin"],
        )
        .ok()
        .stdout_has("(token 1)");
        most = most.max(packs());
    }
    assert!(most >= 15, "every fold read added a pack ({most} at most)");
    assert!(packs() < 16, "{} packs", packs());
    assert_eq!(
        indexed(&bob),
        server.rev("refs/lease-archive").expect("an archive")
    );
    assert!(rev(&bob, "refs/lease-remote-archive/origin").is_none());
}

/// A fetch killed in the index leaves its lock, and its packs may be gone: the index cannot
/// answer, and the claim reads the verified archive instead, with the right token.
#[test]
fn a_damaged_index_is_passed_over_for_the_verified_archive() {
    let (server, alice) = seven_free_and_eight_held();
    fold_at(&server, 200);
    let bob = trusting(server.client("bob"));
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    let index = bob.path().join(".git/lease-archive-index/origin");
    std::fs::write(index.join("shallow.lock"), b"").expect("a stale lock");
    for pack in std::fs::read_dir(index.join("objects/pack")).expect("packs") {
        std::fs::remove_file(pack.expect("a pack").path()).expect("removed");
    }

    // A new fold takes 12: the index cannot fetch it, nor read the fold it had.
    claim_and_free(&alice, 300, "12");
    fold_at(&server, 400);
    lease(&bob, 410, &["acquire", "13", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert_eq!(
        rev(&bob, "refs/lease-remote-archive/origin"),
        server.rev("refs/lease-archive"),
        "the archive was verified instead"
    );
    lease(&bob, 411, &["acquire", "12", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    on_server(&server, &at(420), &["verify"]);
}

/// The fold's commit the clone holds for its guarded pushes is unreachable there: `git gc
/// --prune=now` removes it, and the next claim copies it again from the index.
#[test]
fn a_fold_commit_pruned_by_git_gc_is_copied_again_for_the_next_claim() {
    let (server, _alice) = seven_free_and_eight_held();
    fold_at(&server, 200);
    let fold = server.rev("refs/lease-archive").expect("an archive");
    let bob = trusting(server.client("bob"));
    lease(&bob, 210, &["acquire", "10", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    bob.git(&["gc", "--quiet", "--prune=now"]);
    assert!(
        !has(&bob, &fold),
        "git gc pruned the unreachable fold commit"
    );
    lease(&bob, 211, &["acquire", "11", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    assert!(has(&bob, &fold));
    assert!(rev(&bob, "refs/lease-remote-archive/origin").is_none());
    bob.git(&["fsck", "--no-dangling"]);
}

#[test]
fn a_trust_setting_that_is_no_boolean_is_bad_usage() {
    let (server, _alice) = seven_free_and_eight_held();
    let bob = server.client("bob");
    bob.git(&["config", "lease.trustArchive", "maybe"]);
    let run = lease(&bob, 10, &["acquire", "10", "--remote", "origin"]);
    assert_eq!(run.code, 2, "{run}");
    run.stderr_has("lease.trustArchive");
}

/// A server with no archive: a trusting clone claims as any other.
#[test]
fn trust_with_no_archive_on_the_remote_changes_nothing() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let bob = trusting(server.client("bob"));
    lease(&bob, 10, &["acquire", "1", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    lease(&bob, 11, &["acquire", "2", "--remote", "origin"])
        .ok()
        .stdout_has("(token 1)");
    bob.git(&["fsck", "--no-dangling"]);
}
