//! Individual rules of the hook, each against the pushes that would break it: a pusher's own
//! clock ignored, a fenced branch belonging to its whole issue, administrators and identities
//! compared exactly.

use super::*;

#[test]
fn git_lease_now_in_the_pushers_environment_is_ignored() {
    // Pushes over a local path and a file:// URL run the hook with the pusher's environment:
    // GIT_LEASE_NOW there must not move the server's clock, whether that is lease.hookNow or
    // the real clock. No identity is configured: only the clock is judged.
    let server = Server::with_hook();
    let client = TestRepo::new();
    let path = server.bare().to_str().expect("a UTF-8 path").to_owned();
    let mut failures = Vec::new();
    let real_now = Utc::now();
    let real_now = real_now - Duration::nanoseconds(real_now.timestamp_subsec_nanos().into());
    for (clock, now) in [("hook-now", t0()), ("real-clock", real_now)] {
        match clock {
            "hook-now" => server.config("lease.hookNow", &rfc3339(now)),
            _ => {
                let _ = server.git_run(&["config", "--unset", "lease.hookNow"]);
            }
        }
        let s = |secs: i64| (now - t0()).num_seconds() + secs;
        for (route, url) in [("path", path.clone()), ("file-url", file_url(&server))] {
            let issue = |name: &str| format!("{clock}.{route}.{name}");
            let (takeover, ahead, renew) = (issue("takeover"), issue("ahead"), issue("renew"));
            let tips = seed(
                &server,
                &client,
                [
                    // alice's lease, live for one more minute by the server's clock.
                    (
                        takeover.as_str(),
                        &[acquired(&takeover, HOLDER, 1, s(-500), Some(560))][..],
                    ),
                    // alice's lease, live for 9 more minutes.
                    (
                        renew.as_str(),
                        &[acquired(&renew, HOLDER, 1, s(-60), Some(600))][..],
                    ),
                ],
            );
            let mut attempt = |issue: &str, next: Value, fake_now: i64, want: bool, what: &str| {
                let before = tips.get(issue).map(String::as_str);
                let parents: Vec<&str> = before.into_iter().collect();
                let commit = forge::lease_commit(&client, &next, &parents);
                let refname = format!("refs/leases/{issue}");
                let run = client
                    .git_cmd()
                    .now(&at(s(fake_now)))
                    .args(["push", &url, &format!("{commit}:{refname}")])
                    .run();
                let got = judge(&server, &run, &refname, &commit, before);
                expect(
                    &mut failures,
                    &format!("{issue} ({what}, GIT_LEASE_NOW = server + {fake_now}s)"),
                    want,
                    got,
                );
            };
            // bob takes over 2 minutes ahead, when alice's lease would have expired.
            let bob = with(
                with(
                    acquired(&takeover, OTHER, 2, s(120), Some(TTL_S)),
                    "previous_holder",
                    json!(HOLDER),
                ),
                "takeover",
                json!("expired"),
            );
            attempt(&takeover, bob, 120, false, "a takeover of a live lease");
            // A new ledger an hour ahead.
            let late = acquired(&ahead, HOLDER, 1, s(3600), Some(TTL_S));
            attempt(&ahead, late, 3600, false, "an event an hour ahead");
            // alice's honest renew now, with her environment's clock an hour ahead (where
            // her lease has expired and her `at` is beyond the skew): accepted.
            let mut renewal = acquired(&renew, HOLDER, 1, s(-60), Some(600));
            renewal["event"] = json!("renew");
            renewal["at"] = json!(at(s(0)));
            renewal["expires_at"] = json!(at(s(TTL_S)));
            attempt(
                &renew,
                renewal,
                3600,
                true,
                "the holder's renew at the server's clock",
            );
        }
    }
    assert!(
        failures.is_empty(),
        "the hook took the pusher's GIT_LEASE_NOW into account:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_fenced_branch_belongs_to_the_whole_issue_its_star_matched() {
    // lease.fence = refs/heads/issue/*: refs/heads/issue/gh/123 is issue gh/123, not 123.
    let mut server = Server::http(&[HOLDER, OTHER]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.fence", "refs/heads/issue/*");
    server.start_at(&at(0));
    let client = TestRepo::new();
    seed(
        &server,
        &client,
        [
            ("123", &[acquired("123", HOLDER, 1, -60, Some(600))][..]),
            (
                "gh/123",
                &[acquired("gh/123", OTHER, 1, -60, Some(600))][..],
            ),
        ],
    );
    let mut failures = Vec::new();
    // Each branch: the pusher who must be refused first, then the holder; each pushes work
    // of its own (a new commit on one line of history, so every push is a fast-forward).
    for (branch, intruder, holder) in [
        ("refs/heads/issue/gh/123", HOLDER, OTHER),
        ("refs/heads/issue/123", OTHER, HOLDER),
    ] {
        for (who, want) in [(intruder, false), (holder, true)] {
            client.git(&[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("{who}: work"),
            ]);
            let work = client.git(&["rev-parse", "HEAD"]);
            let before = server.rev(branch);
            let run = push_to(&client, &server.url_as(who), &format!("{work}:{branch}"));
            let got = judge(&server, &run, branch, &work, before.as_deref());
            if let Got::Refused(line) = &got {
                if !line.starts_with("fence: ") && !line.starts_with("identity: ") {
                    failures.push(format!(
                        "{who} to {branch}: refused, but not by the fence: {line}"
                    ));
                }
            }
            expect(
                &mut failures,
                &format!("{who} pushes to {branch}"),
                want,
                got,
            );
        }
    }
    assert!(
        failures.is_empty(),
        "fences must take the issue as everything the glob's * matched:\n{}",
        failures.join("\n")
    );
}

#[test]
fn lease_admins_names_whole_identities() {
    // lease.admins = "Ops Team" (one value with a space) makes `Ops Team` an administrator,
    // and neither `Ops` nor `Team`.
    let team = "Ops Team";
    let mut server = Server::http(&[HOLDER, "Ops", "Team", team]);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.admins", team);
    server.start_at(&at(0));
    let client = TestRepo::new();
    let pushers = [("Ops", false), ("Team", false), (team, true)];
    let issues: Vec<String> = pushers
        .iter()
        .map(|(who, _)| format!("admins.{}", who.replace(' ', "-")))
        .collect();
    let ledgers: Vec<Vec<Value>> = issues
        .iter()
        .map(|issue| vec![acquired(issue, HOLDER, 1, -60, Some(600))])
        .collect();
    let tips = seed(
        &server,
        &client,
        issues
            .iter()
            .zip(&ledgers)
            .map(|(i, l)| (i.as_str(), l.as_slice())),
    );
    let mut failures = Vec::new();
    for ((who, want), issue) in pushers.iter().zip(&issues) {
        let mut revoke = freed(issue, "revoke", HOLDER, 1, 0);
        revoke["by"] = json!(who);
        revoke["reason"] = json!("stuck");
        let before = tips.get(issue).map(String::as_str);
        let commit = forge::lease_commit(&client, &revoke, &[before.expect("a tip")]);
        let refname = format!("refs/leases/{issue}");
        let enc = |s: &str| s.replace(' ', "%20");
        let url = format!(
            "http://{}:{}@127.0.0.1:{}/leases.git",
            enc(who),
            enc(&format!("{who}pw")),
            server.port()
        );
        let run = push_to(&client, &url, &format!("{commit}:{refname}"));
        let got = judge(&server, &run, &refname, &commit, before);
        expect(
            &mut failures,
            &format!("{who} revokes alice's live lease"),
            *want,
            got,
        );
    }
    assert!(
        failures.is_empty(),
        "lease.admins must hold whole identities:\n{}\n\nserver log:\n{}",
        failures.join("\n"),
        server.log()
    );
}

#[test]
fn identities_are_compared_exactly_never_trimmed() {
    // The server authenticates accounts whose names differ from others' only by white space:
    // "ops " is not the administrator ops, " alice" is not alice, and the administrator value
    // "admin " names the account "admin ", not "admin".
    let users = [HOLDER, " alice", ADMIN, "ops ", "admin", "admin "];
    let mut server = Server::http_builtin(&users);
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.config("lease.admins", ADMIN);
    server.git(&["config", "--add", "lease.admins", "admin "]);
    server.start_at(&at(0));
    let client = TestRepo::new();
    let revoke = |issue: &str, by: &str| {
        let mut value = freed(issue, "revoke", HOLDER, 1, 0);
        value["by"] = json!(by);
        value["reason"] = json!("stuck");
        value
    };
    let renew = |issue: &str| crate::forge::renewed(issue, HOLDER, 1, -60, 0, TTL_S);
    let release = |issue: &str| freed(issue, "release", HOLDER, 1, 0);
    // (pusher, issue, the step, accepted?, the rule a refusal must be by)
    let cases = [
        // Recording the administrator it would pass for if trimmed.
        (
            "ops ",
            "exact.ops-space",
            revoke("exact.ops-space", ADMIN),
            false,
            "admin",
        ),
        (
            "admin",
            "exact.admin",
            revoke("exact.admin", "admin"),
            false,
            "admin",
        ),
        (
            "admin ",
            "exact.admin-space",
            revoke("exact.admin-space", "admin "),
            true,
            "",
        ),
        (ADMIN, "exact.ops", revoke("exact.ops", ADMIN), true, ""),
        (
            " alice",
            "exact.renew-space",
            renew("exact.renew-space"),
            false,
            "identity",
        ),
        (
            " alice",
            "exact.release-space",
            release("exact.release-space"),
            false,
            "identity",
        ),
        (HOLDER, "exact.renew", renew("exact.renew"), true, ""),
    ];
    let ledgers: Vec<Vec<Value>> = cases
        .iter()
        .map(|(_, issue, ..)| vec![acquired(issue, HOLDER, 1, -60, Some(TTL_S))])
        .collect();
    let tips = seed(
        &server,
        &client,
        cases
            .iter()
            .zip(&ledgers)
            .map(|((_, issue, ..), l)| (*issue, l.as_slice())),
    );
    let mut failures = Vec::new();
    for (who, issue, value, want, rule) in &cases {
        let before = tips.get(*issue).map(String::as_str);
        let commit = forge::lease_commit(&client, value, &[before.expect("a tip")]);
        let refname = format!("refs/leases/{issue}");
        let enc = |s: &str| s.replace(' ', "%20");
        let url = format!(
            "http://{}:{}@127.0.0.1:{}/leases.git",
            enc(who),
            enc(&format!("{who}pw")),
            server.port()
        );
        let run = push_to(&client, &url, &format!("{commit}:{refname}"));
        let got = judge(&server, &run, &refname, &commit, before);
        if let Got::Refused(line) = &got {
            if !line.starts_with(&format!("{rule}: ")) {
                failures.push(format!(
                    "{who:?} on {issue}: refused, but not by {rule}: {line}"
                ));
            }
        }
        let event = value["event"].as_str().unwrap_or_default();
        expect(
            &mut failures,
            &format!("{who:?} pushes a {event} of {issue}"),
            *want,
            got,
        );
    }
    assert!(
        failures.is_empty(),
        "identities must be compared exactly:\n{}\n\nserver log:\n{}",
        failures.join("\n"),
        server.log()
    );
}
