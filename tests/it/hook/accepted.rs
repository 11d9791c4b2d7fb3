//! What the hook accepts: the tool's own transitions, a push of several commits checked step
//! by step, and a pre-receive that refuses a whole push when one ledger in it is forged.

use super::*;

#[test]
fn the_tools_own_transitions_are_accepted_by_the_hook() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");
    let bob = server.client("bob");
    let steps: [(&TestRepo, i64, &[&str]); 4] = [
        (
            &alice,
            -30,
            &["--remote", "origin", "acquire", "42", "--ttl", "10m"],
        ),
        (
            &alice,
            0,
            &["--remote", "origin", "renew", "42", "--ttl", "10m"],
        ),
        (&alice, 10, &["--remote", "origin", "release", "42"]),
        (
            &bob,
            20,
            &["--remote", "origin", "acquire", "42", "--ttl", "10m"],
        ),
    ];
    for (client, secs, args) in steps {
        let run = client.run_at(&at(secs), args);
        assert_eq!(
            run.code,
            0,
            "the hook refused a legitimate step\n{run}\n{}",
            server.log()
        );
    }
    let chain = server.leases("42");
    let summary: Vec<(String, u64, Value)> = chain
        .iter()
        .map(|v| {
            (
                v["event"].as_str().unwrap_or("?").to_owned(),
                v["token"].as_u64().unwrap_or(0),
                v["holder"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("acquire".to_owned(), 1, json!("alice")),
            ("renew".to_owned(), 1, json!("alice")),
            ("release".to_owned(), 1, json!(null)),
            ("acquire".to_owned(), 2, json!("bob")),
        ]
    );
    assert_eq!(chain[3]["at"], json!(at(20)));
    // The chain the server accepted verifies clean, and the client's copy is what it holds.
    server.lease(&["verify"]).ok().stdout_has("ok");
    assert_eq!(bob.tip("42"), server.tip("42"));
}

#[test]
fn a_push_of_several_commits_is_checked_step_by_step() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let client = server.client("alice");
    let issue = "multi";

    // Two valid commits at once.
    let first = chain_on(
        &client,
        None,
        &[
            acquired(issue, "alice", 1, -60, Some(600)),
            renewed(issue, "alice", 1, -60, -40, 600),
        ],
    );
    push_accepted(&server, &client, issue, &first);
    assert_eq!(server.chain(issue).len(), 2);
    let tip = first[1].clone();

    // Valid, then invalid: refused naming the second commit, not the first.
    let bad = chain_on(
        &client,
        Some(&tip),
        &[
            renewed(issue, "alice", 1, -60, -30, 600),
            renewed(issue, "alice", 5, -60, -20, 600),
        ],
    );
    let run = push(
        &client,
        false,
        &[&format!("{}:refs/leases/{issue}", bad[1])],
    );
    assert_refused(&run, issue, &bad[1], "token-step");
    assert!(
        !run.stderr.contains(&format!("at {}", &bad[0][..12])),
        "the valid first commit should not be named\n{run}"
    );
    assert_eq!(server.tip(issue).as_deref(), Some(tip.as_str()));

    // Invalid, then valid: the first commit is named.
    let bad_first = chain_on(
        &client,
        Some(&tip),
        &[
            renewed(issue, "alice", 1, -60, -50, 600), // earlier than the tip's -40
            renewed(issue, "alice", 1, -60, -10, 600),
        ],
    );
    let run = push(
        &client,
        false,
        &[&format!("{}:refs/leases/{issue}", bad_first[1])],
    );
    assert_refused(&run, issue, &bad_first[0], "time-order");
    assert_eq!(server.tip(issue).as_deref(), Some(tip.as_str()));

    // Valid by the recorded times, but the second is an hour ahead of the server's clock: the
    // server's own rules are applied to each new commit too.
    let late = chain_on(
        &client,
        Some(&tip),
        &[
            renewed(issue, "alice", 1, -60, -5, 7200),
            renewed(issue, "alice", 1, -60, 3600, 600),
        ],
    );
    let run = push(
        &client,
        false,
        &[&format!("{}:refs/leases/{issue}", late[1])],
    );
    assert_refused(&run, issue, &late[1], "clock-skew");
    assert_eq!(server.tip(issue).as_deref(), Some(tip.as_str()));

    // The valid commit alone is still accepted afterwards.
    push_accepted(&server, &client, issue, &late[..1]);
    assert_eq!(server.chain(issue).len(), 3);
}

#[test]
fn pre_receive_refuses_the_whole_push_when_one_ledger_is_forged() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let client = server.client("alice");
    let good = lease_commit(&client, &acquired("good", "alice", 1, 0, Some(600)), &[]);
    let bad = lease_commit(&client, &acquired("bad", "alice", 3, 0, Some(600)), &[]);
    let run = push(
        &client,
        false,
        &[
            &format!("{good}:refs/leases/good"),
            &format!("{bad}:refs/leases/bad"),
        ],
    );
    assert_refused(&run, "bad", &bad, "first-token");
    assert!(
        !run.stderr.contains("refused issue good"),
        "the legitimate ledger is not the one refused\n{run}"
    );
    assert_eq!(
        server.tip("good"),
        None,
        "pre-receive refuses every ref of the push"
    );
    assert_eq!(server.tip("bad"), None);
}
