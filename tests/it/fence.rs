//! Fenced work branches end to end, over a real `git daemon` whose hook judges with a fixed
//! clock: with `lease.fence = refs/heads/issue/*`, a push to `issue/<N>` is accepted only
//! while issue N is held, and, when it carries `-o lease-token=<T>`, only with the live
//! tenure's token. A worker whose lease expired and was taken over is fenced off by its stale
//! token; without identity the token is mandatory unless `lease.requireToken=false`; without
//! `lease.fence` the usual glob is fenced; other branches are unaffected.
//!
//! The story (seconds after T0 = the server's first clock):
//! - server clock T0: alice acquires issue 7 at -200 for 10 minutes (token 1, until +400) and
//!   pushes her work to `issue/7` with `git lease push` (token 1): accepted;
//! - the server restarts with its clock at +1000: alice's lease expired at +400; bob acquires
//!   issue 7 (token 2) and pushes on top of alice's work with `git lease push`: accepted;
//! - alice, late, pushes with her token 1: refused, naming tenure 2.

use crate::env::{at, Run, TestRepo};
use crate::pushes::assert_fenced;
use crate::server::Server;

const FENCE: &str = "refs/heads/issue/*";

/// A server with the fence configured and its clock at `now`; `lease.maxClockSkew` is an hour
/// so that clients a few minutes off are accepted.
fn fenced_server(now: i64) -> Server {
    let mut server = Server::with_hook();
    server.config("lease.fence", FENCE);
    server.config("lease.maxClockSkew", "1h");
    server.start_at(&at(now));
    server
}

/// Commits `message` (an empty commit) on the current branch of `client`; returns its id.
fn work(client: &TestRepo, message: &str) -> String {
    client.git(&["commit", "-q", "--allow-empty", "-m", message]);
    client.git(&["rev-parse", "HEAD"])
}

/// `git lease push` (the current branch, with the holder's token) at client time `now`.
fn lease_push(client: &TestRepo, now: i64) -> Run {
    client.run_at(&at(now), &["push"])
}

#[test]
fn a_stale_holder_is_fenced_off_after_a_takeover() {
    let mut server = fenced_server(0);
    let alice = server.client("alice");
    let bob = server.client("bob");

    // Before anyone holds issue 7, its branch is closed.
    alice.git(&["switch", "-q", "-c", "issue/7"]);
    let early = work(&alice, "alice: before acquiring");
    let run = alice.git_run(&["push", "origin", "issue/7"]);
    assert_fenced(&run, "issue/7", &["nobody holds issue 7"]);
    assert_eq!(server.rev("refs/heads/issue/7"), None);

    // alice acquires at -200 for 10 minutes (token 1) and pushes with her token.
    let run = alice.run_at(
        &at(-200),
        &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
    );
    run.ok();
    assert_eq!(server.leases("7")[0]["token"], 1);
    let alice_work = work(&alice, "alice: work");
    lease_push(&alice, -200).ok();
    assert_eq!(server.rev("refs/heads/issue/7"), Some(alice_work.clone()));
    assert_ne!(early, alice_work);

    // Later: the server's clock is +1000, alice's lease expired at +400.
    server.start_at(&at(1000));
    server.attach(&alice);
    server.attach(&bob);

    // bob takes issue 7 over (token 2) and pushes on top of alice's work with his token.
    let run = bob.run_at(
        &at(1000),
        &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
    );
    run.ok();
    let chain = server.leases("7");
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(chain[1]["token"], 2);
    assert_eq!(chain[1]["holder"], "bob");
    bob.git(&["fetch", "-q", "origin"]);
    bob.git(&["switch", "-q", "-c", "issue/7", "origin/issue/7"]);
    let bob_work = work(&bob, "bob: work");
    lease_push(&bob, 1000).ok();
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bob_work.clone()));

    // alice comes back late: she brings her branch up to date (so git itself has nothing to
    // object to) and pushes her next commit with her old token 1.
    alice.git(&["fetch", "-q", "origin"]);
    alice.git(&["merge", "-q", "--ff-only", "origin/issue/7"]);
    work(&alice, "alice: late work");
    let run = alice.git_run(&["push", "-o", "lease-token=1", "origin", "issue/7"]);
    assert_fenced(
        &run,
        "issue/7",
        &["token 1 is stale", "tenure 2", "held by bob"],
    );
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bob_work.clone()));

    // Nor may she delete the branch with it.
    let run = alice.git_run(&["push", "-o", "lease-token=1", "origin", ":issue/7"]);
    assert_fenced(&run, "issue/7", &["token 1 is stale", "tenure 2"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bob_work.clone()));

    // `git lease push` does not even try: by the remote's ledger she does not hold it.
    let run = lease_push(&alice, 1000);
    run.code(3).stderr_has("held by bob");
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bob_work.clone()));

    // A token that is not a number is refused too.
    let run = alice.git_run(&["push", "-o", "lease-token=two", "origin", "issue/7"]);
    assert_fenced(&run, "issue/7", &["lease-token=two", "not a number"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(bob_work.clone()));

    // A branch outside the fence is not the hook's business, stale token or not.
    alice.git(&["branch", "-q", "feature/7"]);
    let run = alice.git_run(&[
        "push",
        "-o",
        "lease-token=1",
        "origin",
        "feature/7",
        "HEAD:main",
    ]);
    run.ok();
    let late = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/feature/7"), Some(late.clone()));
    assert_eq!(server.rev("refs/heads/main"), Some(late.clone()));
    // `issue-7` does not match `refs/heads/issue/*`.
    let run = alice.git_run(&["push", "origin", "HEAD:refs/heads/issue-7"]);
    run.ok();
    assert_eq!(server.rev("refs/heads/issue-7"), Some(late));
}

#[test]
fn without_identity_a_fenced_push_needs_its_token_by_default() {
    let server = fenced_server(0);
    let alice = server.client("alice");
    alice
        .run_at(
            &at(0),
            &["--remote", "origin", "acquire", "9", "--ttl", "10m"],
        )
        .ok();
    alice.git(&["switch", "-q", "-c", "issue/9"]);

    // git daemon knows nobody, so the token is the fence: even the holder's plain push, which
    // carries none, is refused while lease.requireToken is unset.
    let first = work(&alice, "alice: plain push");
    let run = alice.git_run(&["push", "origin", "issue/9"]);
    assert_fenced(&run, "issue/9", &["lease-token", "lease.requireToken"]);
    assert_eq!(server.rev("refs/heads/issue/9"), None);

    // The same commit with the token (`git lease push`) is accepted.
    lease_push(&alice, 0).ok();
    assert_eq!(server.rev("refs/heads/issue/9"), Some(first.clone()));

    // lease.requireToken=false is the explicit way out: the holder's plain push goes through.
    server.config("lease.requireToken", "false");
    let second = work(&alice, "alice: second plain push");
    alice.git_run(&["push", "origin", "issue/9"]).ok();
    assert_eq!(server.rev("refs/heads/issue/9"), Some(second.clone()));

    // Branches outside the fence need no token either way.
    server.config("lease.requireToken", "true");
    let run = alice.git_run(&["push", "origin", "HEAD:refs/heads/topic"]);
    run.ok();
    assert_eq!(server.rev("refs/heads/topic"), Some(second));
}

#[test]
fn without_lease_fence_issue_branches_are_fenced_and_an_empty_value_clears_the_fence() {
    // The hook installed, and no lease.fence: refs/heads/issue/* is fenced all the same.
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");
    alice.git(&["switch", "-q", "-c", "issue/7"]);
    work(&alice, "alice: before acquiring");
    let run = alice.git_run(&["push", "origin", "issue/7"]);
    assert_fenced(&run, "issue/7", &["nobody holds issue 7"]);
    assert_eq!(server.rev("refs/heads/issue/7"), None);

    // An empty value clears the globs: install-hook says that nothing is fenced, and the push
    // lands.
    server.config("lease.fence", "");
    let run = server.lease(&["install-hook", "--repo", server_path(&server)]);
    run.ok()
        .stdout_has("fenced branches: none")
        .stderr_has("no work branch is fenced");
    alice.git_run(&["push", "origin", "issue/7"]).ok();
    let head = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(head));
}

/// The served repository's path, as text.
fn server_path(server: &Server) -> &str {
    server.bare().to_str().expect("a UTF-8 path")
}

#[test]
fn a_fenced_branch_closes_at_the_instant_the_lease_expires_by_the_servers_clock() {
    let mut server = fenced_server(0);
    let alice = server.client("alice");
    alice
        .run_at(
            &at(0),
            &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
        )
        .ok();
    alice.git(&["switch", "-q", "-c", "issue/7"]);

    // One second before the expiry (+600) the token still opens the branch.
    server.start_at(&at(599));
    server.attach(&alice);
    let first = work(&alice, "alice: just in time");
    alice
        .git_run(&["push", "-o", "lease-token=1", "origin", "issue/7"])
        .ok();
    assert_eq!(server.rev("refs/heads/issue/7"), Some(first.clone()));

    // At the expiry it no longer does: nobody holds the issue.
    server.start_at(&at(600));
    server.attach(&alice);
    work(&alice, "alice: too late");
    let run = alice.git_run(&["push", "-o", "lease-token=1", "origin", "issue/7"]);
    assert_fenced(&run, "issue/7", &["nobody holds issue 7", "last token 1"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(first));
}

#[test]
fn a_fenced_branchs_issue_is_what_the_star_matched_slashes_included() {
    let server = fenced_server(0);
    let alice = server.client("alice");
    let bob = server.client("bob");
    // alice holds 123 (token 1); bob holds gh/123 in its second tenure (token 2).
    let claim = |who: &TestRepo, issue: &str, now: i64| {
        who.run_at(
            &at(now),
            &["--remote", "origin", "acquire", issue, "--ttl", "10m"],
        )
        .ok();
    };
    claim(&alice, "123", 0);
    claim(&bob, "gh/123", -60);
    bob.run_at(&at(-50), &["--remote", "origin", "release", "gh/123"])
        .ok();
    claim(&bob, "gh/123", -40);
    // The branch issue/gh/123 belongs to gh/123, not to 123: alice's token 1 is stale there.
    alice.git(&["switch", "-q", "-c", "issue/gh/123"]);
    work(&alice, "alice: not her issue");
    let run = alice.git_run(&["push", "-o", "lease-token=1", "origin", "issue/gh/123"]);
    assert_fenced(&run, "issue/gh/123", &["gh/123", "token 1 is stale"]);
    let run = lease_push(&alice, 0);
    run.code(3).stderr_has("gh/123");
    assert_eq!(server.rev("refs/heads/issue/gh/123"), None);
    // bob, its holder, gets in, with `git lease push` and its token.
    bob.git(&["switch", "-q", "-c", "issue/gh/123"]);
    let head = work(&bob, "bob: his issue");
    lease_push(&bob, 0).ok();
    assert_eq!(server.rev("refs/heads/issue/gh/123"), Some(head));
    // A branch outside every fence glob is not a fenced issue branch to push with a token.
    bob.git(&["switch", "-q", "-c", "topic/123"]);
    lease_push(&bob, 0)
        .code(2)
        .stderr_has("not a fenced issue branch");
}

/// Waits (a bounded poll) until `path` exists.
#[track_caller]
fn wait_for(path: &std::path::Path, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_fenced_push_is_judged_again_when_its_ref_lands() {
    // alice holds issue 7 until +400 and pushes work with her token just before that; the
    // checking of her push takes long (an update hook of the server's, after git-lease's
    // check, waits for a gate), and meanwhile her lease expires and bob takes issue 7.
    let server = fenced_server(0);
    let alice = server.client("alice");
    let bob = server.client("bob");
    alice
        .run_at(
            &at(-200),
            &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
        )
        .ok();
    let (reached, gate) = (server.root().join("reached"), server.root().join("gate"));
    let hook = server.bare().join("hooks/update");
    crate::env::write_program(
        &hook,
        &format!(
            "#!/bin/sh\ncase \"$1\" in refs/heads/issue/*)\n\ttouch '{}'\n\ti=0\n\twhile [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\nesac\nexit 0\n",
            reached.display(),
            gate.display()
        ),
        0o755,
    );
    alice.git(&["switch", "-q", "-c", "issue/7"]);
    let late = work(&alice, "alice: late work");
    let pushing = alice
        .lease()
        .now(&at(390))
        .args(["push"])
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start alice's push");
    wait_for(&reached, "alice's push reaching the slow check");
    // The server's clock moves past alice's expiry; bob takes issue 7 (token 2).
    server.config("lease.hookNow", &at(1000));
    bob.run_at(&at(1000), &["--remote", "origin", "acquire", "7"])
        .ok()
        .stdout_has("token 2");
    std::fs::write(&gate, "").expect("open the gate");
    let run = Run::from_output(
        "git lease push (alice, token 1)",
        pushing.wait_with_output().expect("alice's push ends"),
    );
    // git gives the reference-transaction hook no channel to the pusher: receive-pack ends
    // the push ("ref updates aborted by hook"), which the pusher sees as a hang-up.
    assert_ne!(run.code, 0, "alice's stale push must fail\n{run}");
    assert_ne!(
        server.rev("refs/heads/issue/7").as_deref(),
        Some(late.as_str()),
        "alice's stale work must not land"
    );
    assert!(
        std::fs::read_dir(server.bare().join("lease-fence-approvals"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "the approval is forgotten once its transaction is over"
    );
}

/// The boundary of the fence (docs/SECURITY.md, "Fences are judged when the ref lands"): the
/// judgment when the push's ref transaction is prepared is the last one. A receive-pack that
/// stops after it (here a wrapper around the lease hook waits for a gate once it approved)
/// lands work approved while alice's tenure was live: with files refs after bob took the
/// issue over meanwhile; with reftable, whose one lock guards every ref, bob's takeover waits.
#[test]
fn work_approved_when_its_ref_transaction_was_prepared_lands_after_a_later_takeover() {
    let server = fenced_server(0);
    let alice = server.client("alice");
    let bob = server.client("bob");
    alice
        .run_at(
            &at(-200),
            &["--remote", "origin", "acquire", "7", "--ttl", "10m"],
        )
        .ok();
    let (reached, gate) = (server.root().join("reached"), server.root().join("gate"));
    let hooks = server.bare().join("hooks");
    std::fs::rename(
        hooks.join("reference-transaction"),
        hooks.join("reference-transaction.judge"),
    )
    .expect("move the lease hook aside");
    crate::env::write_program(
        &hooks.join("reference-transaction"),
        &format!(
            "#!/bin/sh
input=$(cat)
             printf '%s\n' \"$input\" | \"$0.judge\" \"$@\" || exit $?
             case \"$1 $input\" in prepared*refs/heads/issue/*)
             \ttouch '{}'
             \ti=0
             \twhile [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
             esac
exit 0
",
            reached.display(),
            gate.display()
        ),
        0o755,
    );
    alice.git(&["switch", "-q", "-c", "issue/7"]);
    let late = work(&alice, "alice: approved, then held");
    let pushing = alice
        .lease()
        .now(&at(390))
        .args(["push"])
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start alice's push");
    wait_for(
        &reached,
        "alice's push approved in its prepared transaction",
    );
    server.config("lease.hookNow", &at(1000));
    let takeover = bob.run_at(&at(1000), &["--remote", "origin", "acquire", "7"]);
    if crate::env::reftable() {
        // One lock guards every ref of a reftable repository: no takeover lands meanwhile.
        takeover.code(1).stderr_has("lock");
    } else {
        takeover.ok().stdout_has("token 2");
    }
    std::fs::write(&gate, "").expect("open the gate");
    let run = Run::from_output(
        "git lease push (alice, token 1)",
        pushing.wait_with_output().expect("alice's push ends"),
    );
    run.ok();
    assert_eq!(
        server.rev("refs/heads/issue/7").as_deref(),
        Some(late.as_str()),
        "work approved while the tenure was live lands"
    );
    if crate::env::reftable() {
        bob.run_at(&at(1001), &["--remote", "origin", "acquire", "7"])
            .ok()
            .stdout_has("token 2");
    }
}

#[test]
fn a_symbolic_ref_moved_in_a_fenced_repository_is_no_business_of_the_hook() {
    // `git symbolic-ref HEAD refs/heads/main` on the server: git passes the transaction to the
    // reference-transaction hook with `ref:refs/heads/main` for a value, never a push's.
    let server = fenced_server(0);
    let before = server.git(&["symbolic-ref", "HEAD"]);
    server.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    assert_eq!(
        server.git(&["symbolic-ref", "HEAD"]),
        "refs/heads/main",
        "was {before}"
    );
    server.git(&["symbolic-ref", "refs/heads/issue/alias", "refs/heads/main"]);
    assert_eq!(
        server.git(&["symbolic-ref", "refs/heads/issue/alias"]),
        "refs/heads/main"
    );
}
