//! The guard on the client (`git lease install-hook --client`): a working repository's
//! pre-push hook refuses a push to a fenced branch unless it carries this holder's live token,
//! and its pre-commit hook refuses a commit on a fenced branch whose lease is lost. The server
//! here is a hookless `git daemon` (where the guard is all there is); `--no-verify` skips it.
//! Against a plain bare repository, which takes no push options, the guard checks the holder
//! itself: the live holder pushes, plainly or with `git lease push`, and a stale one is refused.

use crate::env::{at, Run, TestRepo};
use crate::server::Server;

const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";

/// A hookless server that accepts push options, and a client of it for `holder` (claims on
/// the server: `lease.remote origin`) with the guard installed.
fn guarded(holder: &str) -> (Server, TestRepo) {
    let server = Server::without_hook();
    server.config("receive.advertisePushOptions", "true");
    let mut server = server;
    server.start();
    let client = guarded_client(&server, holder);
    (server, client)
}

fn guarded_client(server: &Server, holder: &str) -> TestRepo {
    let client = server.client(holder);
    client.git(&["config", "lease.remote", "origin"]);
    client.git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    client
        .run(&["install-hook", "--client"])
        .ok()
        .stdout_has("pre-push")
        .stdout_has("pre-commit");
    client
}

/// `git <args>` in `client` at client time `secs` after T0 (the hooks read that clock too).
fn git_at(client: &TestRepo, secs: i64, args: &[&str]) -> Run {
    client
        .git_cmd()
        .env("GIT_LEASE_NOW", at(secs))
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(args)
        .run()
}

/// `git lease <args>` in `client` at client time `secs` after T0.
fn lease_at(client: &TestRepo, secs: i64, args: &[&str]) -> Run {
    client.run_at(&at(secs), args)
}

/// Starts `issue/<issue>` in `client` with one commit on it.
fn branch_with_work(client: &TestRepo, issue: &str, secs: i64) {
    client.git(&["switch", "-q", "-c", &format!("issue/{issue}")]);
    git_at(
        client,
        secs,
        &["commit", "-q", "--allow-empty", "-m", "work"],
    )
    .ok();
}

#[test]
fn a_plain_push_to_a_fenced_branch_is_refused_locally_with_what_to_run() {
    let (server, alice) = guarded(ALICE);
    lease_at(&alice, 0, &["acquire", "7", "--ttl", "10m"]).ok();
    branch_with_work(&alice, "7", 1);
    let run = git_at(&alice, 2, &["push", "-q", "origin", "issue/7"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease guard: refused refs/heads/issue/7")
        .stderr_has("git lease push");
    assert_eq!(
        server.rev("refs/heads/issue/7"),
        None,
        "it reached the server"
    );

    // A push of a branch that is not fenced is none of the guard's business.
    git_at(&alice, 2, &["push", "-q", "origin", "HEAD:refs/heads/main"]).ok();
    assert!(server.rev("refs/heads/main").is_some());
}

#[test]
fn the_live_holders_push_with_its_token_is_accepted_through_a_daemon() {
    let (server, alice) = guarded(ALICE);
    lease_at(&alice, 0, &["acquire", "7", "--ttl", "10m"]).ok();
    branch_with_work(&alice, "7", 1);
    lease_at(&alice, 2, &["push", "origin"]).ok();
    let head = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(head));

    // A plain git push that passes the live token as the push option is the same push.
    git_at(&alice, 3, &["commit", "-q", "--allow-empty", "-m", "more"]).ok();
    git_at(
        &alice,
        3,
        &["push", "-q", "-o", "lease-token=1", "origin", "issue/7"],
    )
    .ok();
    let head = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(server.rev("refs/heads/issue/7"), Some(head));
}

#[test]
fn a_stale_push_after_a_takeover_is_refused_locally_and_no_verify_skips_the_guard() {
    let (server, alice) = guarded(ALICE);
    lease_at(&alice, 0, &["acquire", "7", "--ttl", "10m"]).ok();
    branch_with_work(&alice, "7", 1);
    // Alice's lease expires; Bob takes the issue over (token 2).
    let bob = guarded_client(&server, BOB);
    lease_at(&bob, 700, &["acquire", "7", "--ttl", "10m"]).ok();

    // Alice's old token: refused by her own repository, before anything is sent.
    let run = git_at(
        &alice,
        701,
        &["push", "-q", "-o", "lease-token=1", "origin", "issue/7"],
    );
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease guard: refused refs/heads/issue/7")
        .stderr_has("held by bob@example.com");
    // Even with the live token copied, it is not her tenure.
    let run = git_at(
        &alice,
        701,
        &["push", "-q", "-o", "lease-token=2", "origin", "issue/7"],
    );
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("not by alice@example.com");
    assert_eq!(
        server.rev("refs/heads/issue/7"),
        None,
        "it reached the server"
    );

    // `git lease push` refuses too (exit 3): she holds no live lease.
    lease_at(&alice, 701, &["push", "origin"]).code(3);

    // The guard is a courtesy: --no-verify skips it, and this hookless server takes the push.
    git_at(
        &alice,
        701,
        &["push", "-q", "--no-verify", "origin", "issue/7"],
    )
    .ok();
    assert!(server.rev("refs/heads/issue/7").is_some());
}

#[test]
fn an_existing_pre_push_hook_still_runs_first() {
    let server = Server::without_hook();
    let mut server = server;
    server.start();
    let alice = server.client(ALICE);
    alice.git(&["config", "lease.remote", "origin"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    let marker = alice.scratch("hook").join("ran");
    let hooks = alice.git_dir().join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks/");
    let script = format!("#!/bin/sh\necho \"$1 $(cat)\" >> '{}'\n", marker.display());
    let hook = hooks.join("pre-push");
    crate::env::write_program(&hook, &script, 0o755);
    alice
        .run(&["install-hook", "--client"])
        .ok()
        .stdout_has("the existing hook runs first");
    assert!(hooks.join("pre-push.before-git-lease").exists());

    git_at(&alice, 0, &["push", "-q", "origin", "HEAD:refs/heads/main"]).ok();
    let ran = std::fs::read_to_string(&marker).expect("the existing hook ran");
    assert!(
        ran.starts_with("origin ") && ran.contains("refs/heads/main"),
        "{ran}"
    );

    // A refusal by the existing hook still refuses the push, whatever the guard says.
    std::fs::write(
        hooks.join("pre-push.before-git-lease"),
        "#!/bin/sh\nexit 1\n",
    )
    .expect("rewrite the old hook");
    let run = git_at(
        &alice,
        0,
        &["push", "-q", "origin", "HEAD:refs/heads/other"],
    );
    assert_ne!(run.code, 0, "{run}");
    assert_eq!(server.rev("refs/heads/other"), None);

    // Installing again replaces the guard, and keeps the kept hook as it is.
    alice.run(&["install-hook", "--client"]).ok();
    let kept = std::fs::read_to_string(hooks.join("pre-push.before-git-lease")).expect("kept");
    assert_eq!(kept, "#!/bin/sh\nexit 1\n");
}

#[test]
fn a_commit_on_a_fenced_branch_whose_lease_is_lost_is_refused_unless_no_verify() {
    let (server, alice) = guarded(ALICE);
    lease_at(&alice, 0, &["acquire", "7", "--ttl", "10m"]).ok();
    branch_with_work(&alice, "7", 1);
    // While the lease is live, commits go on.
    git_at(&alice, 2, &["commit", "-q", "--allow-empty", "-m", "live"]).ok();

    // Expired: the commit is refused, saying how to commit anyway.
    let run = git_at(
        &alice,
        601,
        &["commit", "-q", "--allow-empty", "-m", "late"],
    );
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease guard: refused refs/heads/issue/7")
        .stderr_has("not live")
        .stderr_has("--no-verify");
    git_at(
        &alice,
        601,
        &[
            "commit",
            "-q",
            "--no-verify",
            "--allow-empty",
            "-m",
            "anyway",
        ],
    )
    .ok();

    // Under `git lease run`, the tenure it began must be the live one: a stale token is
    // refused even though the holder's name is the same.
    lease_at(&alice, 602, &["acquire", "7", "--ttl", "10m"]).ok();
    git_at(
        &alice,
        603,
        &["commit", "-q", "--allow-empty", "-m", "again"],
    )
    .ok();
    let run = alice
        .git_cmd()
        .env("GIT_LEASE_NOW", at(603))
        .env("GIT_LEASE_TOKEN", "1")
        .args(["commit", "-q", "--allow-empty", "-m", "old tenure"])
        .run();
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("token 1 is stale");

    // A branch that is not fenced commits whatever the leases say.
    alice.git(&["switch", "-q", "-c", "notes"]);
    git_at(
        &alice,
        5000,
        &["commit", "-q", "--allow-empty", "-m", "notes"],
    )
    .ok();
    drop(server);
}

/// A client of the plain bare repository at `url` (no hook, no push options) for `holder`,
/// claiming there (`lease.remote origin`), with the guard installed.
fn plain_client(url: &str, holder: &str) -> TestRepo {
    let client = TestRepo::client_of(url, holder);
    client.git(&["config", "lease.remote", "origin"]);
    client.git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    client.run(&["install-hook", "--client"]).ok();
    client
}

/// What the plain bare repository `origin`'s `refname` points at, if it exists.
fn rev_of(origin: &TestRepo, refname: &str) -> Option<String> {
    let run = origin
        .git_cmd()
        .args(["rev-parse", "--verify", "--quiet", refname])
        .run();
    (run.code == 0).then(|| run.stdout.trim().to_owned())
}

#[test]
fn against_a_plain_bare_repository_the_holder_pushes_and_a_stale_push_is_refused() {
    // A bare repository reached by its path: no hook, and no push options.
    let origin = TestRepo::bare();
    let url = origin.path().to_str().expect("a UTF-8 path").to_owned();
    let alice = plain_client(&url, ALICE);
    lease_at(&alice, 0, &["acquire", "7", "--ttl", "10m"]).ok();
    branch_with_work(&alice, "7", 1);

    // The holder's plain push: the server takes no token, so the guard checks the holder.
    git_at(&alice, 2, &["push", "-q", "origin", "issue/7"]).ok();
    let head = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(rev_of(&origin, "refs/heads/issue/7"), Some(head));
    // `git lease push` pushes there without `-o`, and says so.
    git_at(&alice, 3, &["commit", "-q", "--allow-empty", "-m", "more"]).ok();
    lease_at(&alice, 4, &["push", "origin"])
        .ok()
        .stderr_has("takes no push options");
    let head = alice.git(&["rev-parse", "HEAD"]);
    assert_eq!(rev_of(&origin, "refs/heads/issue/7"), Some(head.clone()));

    // alice commits while still live; her lease expires, and bob takes issue 7 (token 2).
    git_at(
        &alice,
        500,
        &["commit", "-q", "--allow-empty", "-m", "late"],
    )
    .ok();
    let bob = plain_client(&url, BOB);
    lease_at(&bob, 700, &["acquire", "7", "--ttl", "10m"]).ok();

    // alice's stale plain push, and her `git lease push`, are refused before anything is sent.
    let run = git_at(&alice, 701, &["push", "-q", "origin", "issue/7"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease guard: refused refs/heads/issue/7")
        .stderr_has("held by bob@example.com");
    lease_at(&alice, 701, &["push", "origin"])
        .code(3)
        .stderr_has("held by bob@example.com");
    assert_eq!(rev_of(&origin, "refs/heads/issue/7"), Some(head));

    // bob, the live holder, pushes on top of alice's work: plainly, then with `git lease push`.
    bob.git(&["fetch", "-q", "origin"]);
    bob.git(&["switch", "-q", "-c", "issue/7", "origin/issue/7"]);
    git_at(&bob, 702, &["commit", "-q", "--allow-empty", "-m", "bob"]).ok();
    git_at(&bob, 702, &["push", "-q", "origin", "issue/7"]).ok();
    git_at(&bob, 703, &["commit", "-q", "--allow-empty", "-m", "bob 2"]).ok();
    lease_at(&bob, 703, &["push", "origin"]).ok();
    let bobs = bob.git(&["rev-parse", "HEAD"]);
    assert_eq!(rev_of(&origin, "refs/heads/issue/7"), Some(bobs));
}

/// Alice's own tenure taken again (token 2) does not make her old token good: her push with
/// token 1, from work done under the tenure she released, is refused by her own repository.
/// Catches the mutant of `guard::check_push` that ignores the pushed token whenever the live
/// tenure is the pusher's own (`not_holding(.., None, ..)`): it let that push through.
#[test]
fn a_push_with_the_token_of_the_holders_own_earlier_tenure_is_refused_locally() {
    let (server, alice) = guarded(ALICE);
    lease_at(&alice, 0, &["acquire", "7", "--ttl", "10m"])
        .ok()
        .stdout_has("(token 1)");
    branch_with_work(&alice, "7", 1);
    lease_at(&alice, 2, &["release", "7"]).ok();
    lease_at(&alice, 3, &["acquire", "7", "--ttl", "10m"])
        .ok()
        .stdout_has("(token 2)");

    let run = git_at(
        &alice,
        4,
        &["push", "-q", "-o", "lease-token=1", "origin", "issue/7"],
    );
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease guard: refused refs/heads/issue/7")
        .stderr_has("token 1 is stale");
    assert_eq!(
        server.rev("refs/heads/issue/7"),
        None,
        "it reached the server"
    );

    // Her live token passes.
    git_at(
        &alice,
        5,
        &["push", "-q", "-o", "lease-token=2", "origin", "issue/7"],
    )
    .ok();
    assert!(server.rev("refs/heads/issue/7").is_some());
}
