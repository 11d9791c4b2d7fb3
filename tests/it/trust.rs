//! What the hook accepts, every reader accepts, and nothing outside a ledger's own objects
//! changes what it means: replacement refs, backdated or non-canonical times, steps dated
//! ahead of the reader, takeovers of a process the reader sees running, refspecs the user
//! configured, files in the git directory that are not refs, and remotes that never answer.
//!
//! Each test is an attack staged with plain git: commits forged with plumbing ([`forge`]),
//! pushed through the real hook of a served repository with identity configured (`git
//! http-backend` with basic auth, `lease.pusherEnv=REMOTE_USER`), or written straight into a
//! hookless one.

use std::net::TcpListener;

use serde_json::json;

use crate::attack::{judge, push_to, seed, Got};
use crate::env::{at, TestRepo};
use crate::forge::{self, acquired, freed, renewed, with};
use crate::server::{lease, Server};
use crate::session::{boot_id, pid_ns, start_ticks};

/// The holder of every prior lease, and another user.
const ALICE: &str = "alice";
const BOB: &str = "bob";

/// A served repository with the hook, identity from `REMOTE_USER`, fences on
/// `refs/heads/issue/*`, and the server's clock at `now_s` seconds after T0.
fn hooked_server(now_s: i64) -> Server {
    let mut server = Server::http(&[ALICE, BOB]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.fence", "refs/heads/issue/*");
    server.start_at(&at(now_s));
    server
}

/// Pushes `value` forged on top of `parent` to `refs/leases/<issue>` as `who`; returns the
/// server's verdict.
fn push_step(
    server: &Server,
    client: &TestRepo,
    who: &str,
    issue: &str,
    value: &serde_json::Value,
    parent: &str,
) -> Got {
    let commit = forge::lease_commit(client, value, &[parent]);
    let refname = format!("refs/leases/{issue}");
    let before = server.rev(&refname);
    let run = push_to(client, &server.url_as(who), &format!("{commit}:{refname}"));
    judge(server, &run, &refname, &commit, before.as_deref())
}

/// Seeds the served repository with alice's tenure of 42 from `since_s` for 600 seconds;
/// returns the client that forged it and the ledger's tip.
fn alice_holds_42(server: &Server, since_s: i64) -> (TestRepo, String) {
    let client = TestRepo::new();
    let tips = seed(
        server,
        &client,
        [("42", &[acquired("42", ALICE, 1, since_s, Some(600))][..])],
    );
    let tip = tips["42"].clone();
    (client, tip)
}

#[track_caller]
fn assert_refused(got: Got, rule: &str, what: &str) {
    match got {
        Got::Refused(line) if line.starts_with(&format!("{rule}: ")) => {}
        other => panic!("{what}: must be refused by rule {rule}, got {other:?}"),
    }
}

#[test]
fn a_replacement_ref_cannot_make_anyone_the_holder() {
    let server = hooked_server(0);
    let client = TestRepo::new();
    let tips = seed(
        &server,
        &client,
        [("42", &[acquired("42", ALICE, 1, -60, Some(600))][..])],
    );
    let alices = tips["42"].clone();
    // bob's copy of alice's tip, naming himself: what a replace ref would make readers see.
    let copy = forge::lease_commit(&client, &acquired("42", BOB, 1, -60, Some(600)), &[]);
    let replace = format!("refs/replace/{alices}");
    let before = server.rev(&replace);
    let run = push_to(&client, &server.url_as(BOB), &format!("{copy}:{replace}"));
    assert_refused(
        judge(&server, &run, &replace, &copy, before.as_deref()),
        "replace",
        "bob's push of a replacement for alice's tip",
    );
    // Say one lands anyway (an administrator's `git replace`, or a writer that runs no hook):
    // nothing that judges a lease honours it.
    let copy = forge::lease_commit(server.repo(), &acquired("42", BOB, 1, -60, Some(600)), &[]);
    server.git(&["replace", &alices, &copy]);
    let seen = server.git(&["cat-file", "-p", &format!("{alices}:lease.json")]);
    assert!(
        seen.contains(BOB),
        "plain git honours the replacement: {seen}"
    );
    // bob's work on alice's issue is still fenced off ...
    client.git(&["commit", "-q", "--allow-empty", "-m", "bob: work"]);
    let work = client.git(&["rev-parse", "HEAD"]);
    let branch = "refs/heads/issue/42";
    let run = push_to(&client, &server.url_as(BOB), &format!("{work}:{branch}"));
    assert_refused(
        judge(&server, &run, branch, &work, None),
        "fence",
        "bob's work on alice's issue",
    );
    // ... his takeover of her live tenure is refused ...
    assert_refused(
        push_step(
            &server,
            &client,
            BOB,
            "42",
            &acquired("42", BOB, 2, 0, Some(600)),
            &alices,
        ),
        "holder-change",
        "bob's takeover of alice's live tenure",
    );
    // ... and alice, through the real client, renews as if nothing had happened.
    let alice = server.client(ALICE);
    lease(&alice, 0, &["renew", "--remote", "origin", "42"])
        .ok()
        .stdout_has("renewed");
    // Readers ignore the replacement too: the server's own `show`, and a clone that fetched
    // every replace ref.
    server.lease(&["show", "42"]).ok().stdout_has(ALICE);
    server.lease(&["verify"]).ok();
    alice.git(&["fetch", "-q", "origin", "+refs/replace/*:refs/replace/*"]);
    let shown = lease(&alice, 1, &["show", "--json", "--remote", "origin", "42"])
        .ok()
        .json();
    assert_eq!(shown["holder"], json!(ALICE), "{shown}");
}

#[test]
fn a_step_dated_inside_an_expired_tenure_is_refused() {
    // alice held 42 from 0 to 600; the server's clock is at 700, and the skew allows 300.
    let server = hooked_server(700);
    let (client, tip) = alice_holds_42(&server, 0);
    // Dated 500, inside alice's tenure: legitimate by the server's clock, not by its own
    // time, which is how every reader judges it afterwards.
    assert_refused(
        push_step(
            &server,
            &client,
            BOB,
            "42",
            &acquired("42", BOB, 2, 500, Some(600)),
            &tip,
        ),
        "holder-change",
        "a takeover dated inside alice's tenure",
    );
    assert_refused(
        push_step(
            &server,
            &client,
            BOB,
            "42",
            &with(freed("42", "release", ALICE, 1, 500), "by", json!(BOB)),
            &tip,
        ),
        "holder-change",
        "a release by bob dated inside alice's tenure",
    );
    assert_eq!(server.tip("42").as_deref(), Some(tip.as_str()));
    // Dated after her expiry, the same takeover is accepted, and the server's ledger stays
    // clean for every reader.
    assert!(matches!(
        push_step(
            &server,
            &client,
            BOB,
            "42",
            &acquired("42", BOB, 2, 650, Some(600)),
            &tip
        ),
        Got::Accepted
    ));
    server.lease(&["verify"]).ok().stdout_has("ok");
    let bob = server.client(BOB);
    lease(&bob, 660, &["show", "--remote", "origin", "42"])
        .ok()
        .stdout_has(BOB);
}

/// One way of spelling a stored instant otherwise.
type Spelling = fn(&str) -> String;

#[test]
fn only_canonical_times_are_accepted() {
    let server = hooked_server(60);
    let (client, tip) = alice_holds_42(&server, 0);
    let honest = renewed("42", ALICE, 1, 0, 60, 600);
    // Every other way RFC 3339 allows to spell the same instant.
    let spellings: [(&str, Spelling); 5] = [
        ("fractional seconds", |t| t.replace('Z', ".000Z")),
        ("an offset", |t| t.replace('Z', "+00:00")),
        ("a space", |t| t.replace('T', " ")),
        ("a lower-case z", |t| t.replace('Z', "z")),
        ("a lower-case t", |t| t.replace('T', "t")),
    ];
    for (how, spell) in spellings {
        for field in ["acquired_at", "at", "expires_at"] {
            let stored = honest[field].as_str().expect("a time");
            let forged = with(honest.clone(), field, json!(spell(stored)));
            assert_refused(
                push_step(&server, &client, ALICE, "42", &forged, &tip),
                "json",
                &format!("{field} spelled with {how}"),
            );
        }
    }
    // The honest renew, spelled as stored, lands; alice can go on renewing it.
    assert!(matches!(
        push_step(&server, &client, ALICE, "42", &honest, &tip),
        Got::Accepted
    ));
    let alice = server.client(ALICE);
    lease(&alice, 90, &["renew", "--remote", "origin", "42"]).ok();
    server.lease(&["verify"]).ok();
}

/// A hookless server where alice holds 42 (through her clone, which has seen it), and the
/// step `next` (made from the server's tip) written straight into the served repository.
fn hookless_with(next: impl Fn(&str) -> serde_json::Value) -> (Server, TestRepo) {
    let server = Server::daemon();
    let alice = server.client(ALICE);
    lease(
        &alice,
        0,
        &["acquire", "--remote", "origin", "42", "--ttl", "10m"],
    )
    .ok();
    let tip = server.tip("42").expect("alice's tenure");
    let forged = forge::lease_commit(server.repo(), &next(&tip), &[&tip]);
    forge::set_ledger(server.repo(), "42", &forged);
    (server, alice)
}

#[test]
fn a_clone_refuses_a_step_dated_beyond_its_clock() {
    // mallory takes 42 over in a step dated 200 days ahead, when alice's lease has long
    // expired: the rules alone cannot tell; the reader's clock can.
    let days = 200 * 86_400;
    let (server, alice) = hookless_with(|_| acquired("42", "mallory", 2, days, Some(600)));
    for args in [
        &["show", "--remote", "origin", "42"][..],
        &["check", "--remote", "origin", "42", "--token", "1"],
        &["sync", "origin"],
    ] {
        let run = lease(&alice, 60, args);
        run.code(1);
        assert!(
            format!("{}{}", run.stdout, run.stderr).contains("clock-skew"),
            "{run}"
        );
    }
    assert_eq!(
        alice.lease_json("42")["holder"],
        json!(ALICE),
        "nothing was written"
    );
    // A mirror that copied it with plain git hears the same from verify.
    let mirror = server.mirror();
    mirror.git(&["fetch", "-q", "origin", "+refs/leases/*:refs/leases/*"]);
    lease(&mirror, 60, &["verify"])
        .code(1)
        .stdout_has("clock-skew");
    // At its own time, the step is plausible again.
    lease(&mirror, days, &["verify"]).ok();
}

#[test]
fn a_reader_refuses_a_takeover_of_a_process_it_sees_running() {
    // alice's tenure records this very test process; mallory says it is gone.
    let me = std::process::id();
    let ticks = start_ticks(me).expect("this process's start time");
    let server = Server::daemon();
    let held = with(
        acquired("42", ALICE, 1, 0, Some(3600)),
        "process",
        json!({"pid": me, "boot_id": boot_id(), "pid_ns": pid_ns(), "start_ticks": ticks}),
    );
    let tip = forge::build_ledger(server.repo(), "42", &[held])[0].clone();
    let takeover = with(
        acquired("42", "mallory", 2, 60, Some(600)),
        "takeover",
        json!("process_gone"),
    );
    let forged = forge::lease_commit(server.repo(), &takeover, &[&tip]);
    forge::set_ledger(server.repo(), "42", &forged);
    let alice = server.client(ALICE);
    lease(&alice, 120, &["show", "--remote", "origin", "42"])
        .code(1)
        .stderr_has("is running on this machine");
}

#[test]
fn a_refspec_the_user_configured_moves_nothing() {
    // FORMAT.md's plain-git refspec, configured for origin: git's fetch would move the local
    // ledger along with anything it fetches by that remote's name.
    let (_server, alice) = hookless_with(|_| acquired("42", "mallory", 1, 60, Some(600)));
    alice.git(&[
        "config",
        "--add",
        "remote.origin.fetch",
        "+refs/leases/*:refs/leases/*",
    ]);
    let before = alice.tip("42");
    lease(&alice, 120, &["show", "--remote", "origin", "42"])
        .code(1)
        .stderr_has("holder-change");
    assert_eq!(alice.tip("42"), before, "the local ledger must not move");
    assert_eq!(alice.lease_json("42")["holder"], json!(ALICE));
}

#[test]
fn a_ledger_is_its_own_ref_never_a_name_that_completes_to_it() {
    let repo = TestRepo::new();
    lease(&repo, 0, &["acquire", "--holder", ALICE, "7"]).ok();
    let alices = repo.tip("7").expect("the ledger of 7");
    // Where a lookup that completes names as `git rev-parse` does (refs/tags/…, refs/heads/…,
    // refs/remotes/…/HEAD) would find refs/leases/<id>: files in the git directory itself,
    // which are no refs to git, and refs anyone who may push a tag or a branch can make. Each
    // names alice's tip.
    let git_dir = repo.git_dir();
    for file in ["tags/refs/leases/8", "remotes/refs/leases/9/HEAD"] {
        let path = git_dir.join(file);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, format!("{alices}\n")).expect("plant the file");
    }
    for name in [
        "refs/tags/refs/leases/10",
        "refs/heads/refs/leases/11",
        "refs/remotes/refs/leases/12/HEAD",
        "refs/refs/leases/13",
    ] {
        repo.git(&["update-ref", name, &alices]);
    }
    for issue in ["8", "9", "10", "11", "12", "13"] {
        let exact = [
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/leases/{issue}"),
        ];
        assert_ne!(
            repo.git_run(&exact).code,
            0,
            "git has no refs/leases/{issue}"
        );
        lease(&repo, 1, &["show", issue])
            .code(4)
            .stderr_has("no lease matches");
        // A claim starts the ledger: token 1, on no parent.
        let claimed = repo.json_at(&at(2), 0, &["acquire", "--holder", BOB, issue]);
        assert_eq!(claimed["token"], json!(1), "{issue}: {claimed}");
        let tip = repo.tip(issue).expect("the new ledger");
        let commits = repo.git(&["rev-list", "--count", &tip]);
        assert_eq!(commits, "1", "{issue}: a root commit");
    }
    let listed = repo.json_at(&at(3), 0, &["list"]);
    let want = ["10", "11", "12", "13", "7", "8", "9"];
    let mut got = crate::env::issues(&listed);
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn a_remote_that_never_answers_is_given_up() {
    // Accepts connections and never says a word.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = listener.local_addr().expect("its address").port();
    // Not joined: should the client never connect, the test must still end.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(1).collect();
        // Keep the connection open until the client gives up and closes it.
        for stream in held.into_iter().flatten() {
            let mut buf = [0u8; 64];
            let mut stream = stream;
            while std::io::Read::read(&mut stream, &mut buf).is_ok_and(|n| n > 0) {}
        }
    });
    let repo = TestRepo::new();
    repo.git(&["config", "lease.networkTimeout", "1s"]);
    lease(
        &repo,
        0,
        &[
            "show",
            "--remote",
            &format!("git://127.0.0.1:{port}/x"),
            "42",
        ],
    )
    .code(1)
    .stderr_has("lease.networkTimeout");
}
