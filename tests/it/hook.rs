//! The server hook against real pushes: forged and invalid ledger commits, built with plain git
//! plumbing (`hash-object`, `mktree`, `commit-tree`) in a client clone and pushed for real to
//! a bare repository served by `git daemon` with `git lease install-hook`, must each be refused
//! with the rule's name while the server's refs stay as they were; legitimate transitions
//! pushed by the tool itself are accepted; the `update` hook mode refuses too.
//!
//! The server's clock is fixed: every server here is started with `lease.hookNow` in the
//! served repository's own configuration, which the hook reads ([`Server::start_at`]; the same
//! [`Server`] serves the fencing and http tests, restarted at another instant or over http).
//!
//! Instants are seconds after [`crate::env::T0`], the server's clock unless a test says
//! otherwise; the default `lease.maxClockSkew` is 5 minutes.

use serde_json::{json, Value};

use crate::env::{at, TestRepo, BIN};
use crate::forge::{self, acquired, blob, freed, lease_bytes, renewed, tree, with, without};
use crate::pushes::{
    assert_refused, chain_on, check_refused, commit, lease_commit, push, push_accepted,
};
use crate::server::Server;

// ---------------------------------------------------------------------------------------------
// The table of forged pushes
// ---------------------------------------------------------------------------------------------

/// What a case pushes.
struct Forged {
    /// The commit to push to `refs/leases/<issue>`; `None` deletes the ref.
    new: Option<String>,
    /// Push with `--force` (a rewrite or rewind).
    force: bool,
    /// The commit the refusal must name.
    offender: String,
}

impl Forged {
    fn tip(commit: String) -> Forged {
        Forged {
            new: Some(commit.clone()),
            force: false,
            offender: commit,
        }
    }
    fn forced(commit: String) -> Forged {
        Forged {
            force: true,
            ..Forged::tip(commit)
        }
    }
}

type Forge = Box<dyn Fn(&TestRepo, &str, &[String]) -> Forged>;

/// One forged or invalid push: the legitimate history the server has first (pushed and
/// accepted), what is forged on top, and the rule the refusal must name.
struct Case {
    issue: &'static str,
    base: Vec<Value>,
    forge: Forge,
    rule: &'static str,
}

fn case(
    issue: &'static str,
    base: impl Fn(&str) -> Vec<Value>,
    rule: &'static str,
    forge: impl Fn(&TestRepo, &str, &[String]) -> Forged + 'static,
) -> Case {
    Case {
        issue,
        base: base(issue),
        forge: Box::new(forge),
        rule,
    }
}

/// alice's live lease: acquired 60 s before the server's clock for 10 minutes.
fn alice_live(issue: &str) -> Vec<Value> {
    vec![acquired(issue, "alice", 1, -60, Some(600))]
}

/// alice's lease that is live by the server's clock for one more minute only.
fn alice_until_plus_60(issue: &str) -> Vec<Value> {
    vec![acquired(issue, "alice", 1, -60, Some(120))]
}

/// alice's tenure, released.
fn alice_released(issue: &str) -> Vec<Value> {
    vec![
        acquired(issue, "alice", 1, -120, Some(600)),
        freed(issue, "release", "alice", 1, -60),
    ]
}

fn nothing(_: &str) -> Vec<Value> {
    Vec::new()
}

/// Runs every case against one server (its clock at T0), each on its own issue; reports every
/// failing case at once.
fn run_cases(cases: Vec<Case>) {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let client = server.client("alice");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| run_case(&server, &client, case).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} forged pushes were not refused as expected:\n\n{}\n\nserver log:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n"),
        server.log()
    );
}

/// Pushes a case's base history (must be accepted), then its forgery (must be refused with
/// its rule, naming its offending commit, and change no ref of the server).
fn run_case(server: &Server, client: &TestRepo, case: &Case) -> Result<(), String> {
    let issue = case.issue;
    let base = chain_on(client, None, &case.base);
    if let Some(tip) = base.last() {
        let run = push(client, false, &[&format!("{tip}:refs/leases/{issue}")]);
        if run.code != 0 || server.tip(issue).as_deref() != Some(tip.as_str()) {
            return Err(format!(
                "[{issue}] the legitimate base history was not accepted\n{run}"
            ));
        }
    }
    let forged = (case.forge)(client, issue, &base);
    let refspec = match &forged.new {
        Some(c) => format!("{c}:refs/leases/{issue}"),
        None => format!(":refs/leases/{issue}"),
    };
    let before_tip = server.tip(issue);
    let before_refs = server.refs();
    let run = push(client, forged.force, &[&refspec]);
    let mut problems = Vec::new();
    if let Err(why) = check_refused(&run, issue, &forged.offender, case.rule) {
        problems.push(why);
    }
    let after_tip = server.tip(issue);
    if after_tip != before_tip {
        problems.push(format!(
            "the server's refs/leases/{issue} moved from {before_tip:?} to {after_tip:?}"
        ));
    }
    let after_refs = server.refs();
    if after_refs != before_refs {
        problems.push(format!(
            "the server's refs changed:\nbefore:\n{before_refs}\nafter:\n{after_refs}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("[{issue}] {}", problems.join("\n")))
    }
}

/// A tree holding `lease.json` = `value` plus `extra` entries.
fn tree_with(repo: &TestRepo, value: &Value, extra: &[(&str, &str, &str)]) -> String {
    let b = blob(repo, &lease_bytes(value));
    let mut entries = vec![("100644", "lease.json", b.as_str())];
    entries.extend_from_slice(extra);
    tree(repo, &entries)
}

#[test]
fn forged_shapes_are_refused_and_leave_the_server_unchanged() {
    run_cases(vec![
        case("deletion", alice_live, "deletion", |_, _, base| Forged {
            new: None,
            force: false,
            offender: base[0].clone(),
        }),
        case("rewrite", alice_live, "fast-forward", |c, issue, _| {
            // Another chain from another root: a rewrite of history.
            Forged::forced(lease_commit(
                c,
                &acquired(issue, "alice", 1, -50, Some(600)),
                &[],
            ))
        }),
        case(
            "rewind",
            |issue| {
                vec![
                    acquired(issue, "alice", 1, -60, Some(600)),
                    renewed(issue, "alice", 1, -60, -30, 600),
                ]
            },
            "fast-forward",
            |_, _, base| Forged::forced(base[0].clone()),
        ),
        case("merge", alice_live, "single-parent", |c, issue, base| {
            let other = lease_commit(c, &acquired(issue, "alice", 1, -50, Some(600)), &[]);
            let t = tree_with(c, &renewed(issue, "alice", 1, -60, -30, 600), &[]);
            Forged::tip(commit(c, &t, &[&base[0], &other], &at(-30)))
        }),
        case("extra-file", alice_live, "tree", |c, issue, base| {
            let notes = blob(c, b"notes\n");
            let t = tree_with(
                c,
                &renewed(issue, "alice", 1, -60, -30, 600),
                &[("100644", "notes.txt", &notes)],
            );
            Forged::tip(commit(c, &t, &[&base[0]], &at(-30)))
        }),
        case(
            "missing-lease-json",
            alice_live,
            "tree",
            |c, issue, base| {
                let b = blob(c, &lease_bytes(&renewed(issue, "alice", 1, -60, -30, 600)));
                let t = tree(c, &[("100644", "state.json", &b)]);
                Forged::tip(commit(c, &t, &[&base[0]], &at(-30)))
            },
        ),
        case("empty-tree", alice_live, "tree", |c, _, base| {
            let t = tree(c, &[]);
            Forged::tip(commit(c, &t, &[&base[0]], &at(-30)))
        }),
        case("symlink", alice_live, "tree", |c, _, base| {
            let target = blob(c, b"elsewhere.json");
            let t = tree(c, &[("120000", "lease.json", &target)]);
            Forged::tip(commit(c, &t, &[&base[0]], &at(-30)))
        }),
        case("directory", alice_live, "tree", |c, issue, base| {
            let inner = tree_with(c, &renewed(issue, "alice", 1, -60, -30, 600), &[]);
            let t = tree(c, &[("040000", "lease.json", &inner)]);
            Forged::tip(commit(c, &t, &[&base[0]], &at(-30)))
        }),
        case("not-json", alice_live, "json", |c, _, base| {
            let b = blob(c, b"this is not json\n");
            let t = tree(c, &[("100644", "lease.json", &b)]);
            Forged::tip(commit(c, &t, &[&base[0]], &at(-30)))
        }),
        case("wrong-shape", alice_live, "json", |c, issue, base| {
            let v = without(renewed(issue, "alice", 1, -60, -30, 600), "token");
            Forged::tip(lease_commit(c, &v, &[&base[0]]))
        }),
        case(
            "unknown-version",
            alice_live,
            "version",
            |c, issue, base| {
                let v = with(
                    renewed(issue, "alice", 1, -60, -30, 600),
                    "version",
                    json!(2),
                );
                Forged::tip(lease_commit(c, &v, &[&base[0]]))
            },
        ),
        case("not-a-commit", nothing, "tree", |c, issue, _| {
            // An annotated tag of a legitimate acquire, not the commit itself.
            let target = lease_commit(c, &acquired(issue, "alice", 1, 0, Some(600)), &[]);
            let tag = format!(
                "object {target}\ntype commit\ntag t\ntagger Test <test@example.com> 1796040000 +0000\n\nt\n"
            );
            Forged::tip(c.git_stdin(&["mktag"], tag.as_bytes()))
        }),
        case("-dash", nothing, "issue", |c, issue, _| {
            // A ref git accepts but whose name is not a valid issue id.
            Forged::tip(lease_commit(
                c,
                &acquired(issue, "alice", 1, 0, Some(600)),
                &[],
            ))
        }),
        case("issue-mismatch", alice_live, "issue", |c, issue, base| {
            let v = with(
                renewed(issue, "alice", 1, -60, -30, 600),
                "issue",
                json!("someone-else"),
            );
            Forged::tip(lease_commit(c, &v, &[&base[0]]))
        }),
    ]);
}

#[test]
fn forged_tokens_and_holders_are_refused_and_leave_the_server_unchanged() {
    run_cases(vec![
        case("first-token-2", nothing, "first-token", |c, issue, _| {
            Forged::tip(lease_commit(
                c,
                &acquired(issue, "alice", 2, 0, Some(600)),
                &[],
            ))
        }),
        case("first-is-renew", nothing, "first-token", |c, issue, _| {
            Forged::tip(lease_commit(
                c,
                &renewed(issue, "alice", 1, -60, 0, 600),
                &[],
            ))
        }),
        case(
            "token-skip",
            alice_released,
            "token-step",
            |c, issue, base| {
                let v = acquired(issue, "bob", 3, 0, Some(600));
                Forged::tip(lease_commit(
                    c,
                    &with(v, "previous_holder", json!("alice")),
                    &[&base[1]],
                ))
            },
        ),
        case(
            "token-reuse",
            alice_released,
            "token-step",
            |c, issue, base| {
                // A new tenure that keeps the old token: a stale worker's writes would pass.
                let v = acquired(issue, "bob", 1, 0, Some(600));
                Forged::tip(lease_commit(
                    c,
                    &with(v, "previous_holder", json!("alice")),
                    &[&base[1]],
                ))
            },
        ),
        case(
            "new-tenure-while-live",
            alice_live,
            "token-step",
            |c, issue, base| {
                // The live holder starting a second tenure: a re-acquire keeps the token.
                Forged::tip(lease_commit(
                    c,
                    &acquired(issue, "alice", 2, 0, Some(600)),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "renew-new-token",
            alice_live,
            "token-step",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &renewed(issue, "alice", 2, -60, -30, 600),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "release-new-token",
            alice_live,
            "token-step",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &freed(issue, "release", "alice", 2, -30),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "takeover-live",
            alice_live,
            "holder-change",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &acquired(issue, "bob", 2, 0, Some(600)),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "takeover-live-by-server-clock",
            alice_until_plus_60,
            "holder-change",
            |c, issue, base| {
                // Dated 200 s ahead (within the skew), when alice's lease would have expired;
                // by the server's clock it is still live.
                Forged::tip(lease_commit(
                    c,
                    &acquired(issue, "bob", 2, 200, Some(600)),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "renew-changes-holder",
            alice_live,
            "holder-change",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &renewed(issue, "bob", 1, -60, -30, 600),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "release-by-other",
            alice_live,
            "holder-change",
            |c, issue, base| {
                let v = with(freed(issue, "release", "alice", 1, 0), "by", json!("bob"));
                Forged::tip(lease_commit(c, &v, &[&base[0]]))
            },
        ),
        case(
            "release-by-other-by-server-clock",
            alice_until_plus_60,
            "holder-change",
            |c, issue, base| {
                // Dated after alice's expiry by its own time, but she is live by the server's.
                let v = with(freed(issue, "release", "alice", 1, 200), "by", json!("bob"));
                Forged::tip(lease_commit(c, &v, &[&base[0]]))
            },
        ),
        case(
            "release-keeps-holder",
            alice_live,
            "event",
            |c, issue, base| {
                let v = with(
                    freed(issue, "release", "alice", 1, 0),
                    "holder",
                    json!("alice"),
                );
                Forged::tip(lease_commit(c, &v, &[&base[0]]))
            },
        ),
        case(
            "release-no-previous-holder",
            alice_live,
            "event",
            |c, issue, base| {
                let v = without(freed(issue, "release", "alice", 1, 0), "previous_holder");
                Forged::tip(lease_commit(c, &v, &[&base[0]]))
            },
        ),
        case(
            "revoke-without-by",
            alice_live,
            "event",
            |c, issue, base| {
                let v = with(
                    freed(issue, "revoke", "alice", 1, 0),
                    "reason",
                    json!("stuck"),
                );
                Forged::tip(lease_commit(c, &v, &[&base[0]]))
            },
        ),
        case(
            "release-of-free",
            alice_released,
            "event",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &freed(issue, "release", "alice", 1, 0),
                    &[&base[1]],
                ))
            },
        ),
        case("acquire-without-holder", nothing, "event", |c, issue, _| {
            let v = with(
                acquired(issue, "alice", 1, 0, Some(600)),
                "holder",
                json!(null),
            );
            Forged::tip(lease_commit(c, &v, &[]))
        }),
        case(
            "renew-of-expired",
            |issue| vec![acquired(issue, "alice", 1, -250, Some(200))],
            "event",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &renewed(issue, "alice", 1, -250, 0, 600),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "renew-moves-acquired-at",
            alice_live,
            "event",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &renewed(issue, "alice", 1, -40, -30, 600),
                    &[&base[0]],
                ))
            },
        ),
    ]);
}

#[test]
fn forged_times_are_refused_and_leave_the_server_unchanged() {
    run_cases(vec![
        case(
            "acquired-an-hour-ago",
            nothing,
            "clock-skew",
            |c, issue, _| {
                // acquired_at (= at) an hour before the server's clock, still live by its own times.
                Forged::tip(lease_commit(
                    c,
                    &acquired(issue, "alice", 1, -3600, Some(7200)),
                    &[],
                ))
            },
        ),
        case(
            "acquired-in-an-hour",
            nothing,
            "clock-skew",
            |c, issue, _| {
                Forged::tip(lease_commit(
                    c,
                    &acquired(issue, "alice", 1, 3600, Some(600)),
                    &[],
                ))
            },
        ),
        case(
            "renew-in-an-hour",
            |issue| vec![acquired(issue, "alice", 1, -60, None)],
            "clock-skew",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &renewed(issue, "alice", 1, -60, 3600, 3600),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "acquire-a-day-ahead",
            alice_released,
            "clock-skew",
            |c, issue, base| {
                // A new tenure recorded a day ahead of the server's clock.
                let v = acquired(issue, "bob", 2, 86_400, Some(600));
                Forged::tip(lease_commit(
                    c,
                    &with(v, "previous_holder", json!("alice")),
                    &[&base[1]],
                ))
            },
        ),
        case("already-expired", nothing, "time-order", |c, issue, _| {
            // expires_at a minute before the event (and the server's clock).
            let v = with(
                acquired(issue, "alice", 1, 0, Some(600)),
                "expires_at",
                json!(at(-60)),
            );
            Forged::tip(lease_commit(c, &v, &[]))
        }),
        case(
            "time-backwards",
            alice_live,
            "time-order",
            |c, issue, base| {
                Forged::tip(lease_commit(
                    c,
                    &renewed(issue, "alice", 1, -60, -120, 600),
                    &[&base[0]],
                ))
            },
        ),
        case(
            "acquired-at-not-at",
            nothing,
            "time-order",
            |c, issue, _| {
                let v = with(
                    acquired(issue, "alice", 1, 0, Some(600)),
                    "acquired_at",
                    json!(at(-30)),
                );
                Forged::tip(lease_commit(c, &v, &[]))
            },
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// What is accepted
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// The update hook mode, and identity without an authenticating transport
// ---------------------------------------------------------------------------------------------

#[test]
fn the_update_hook_mode_refuses_forged_pushes() {
    let mut server = Server::without_hook();
    let bin = BIN.replace('\'', r"'\''");
    server.write_hook(
        "update",
        &format!("#!/bin/sh\nexec '{bin}' hook update \"$@\"\n"),
    );
    assert!(!server.bare().join("hooks/pre-receive").exists());
    server.start_at(&at(0));
    let client = server.client("alice");

    // A ledger that starts with token 2.
    let forged = lease_commit(&client, &acquired("7", "alice", 2, 0, Some(600)), &[]);
    let run = push(&client, false, &[&format!("{forged}:refs/leases/7")]);
    assert_refused(&run, "7", &forged, "first-token");
    assert_eq!(server.tip("7"), None);

    // The legitimate start is accepted.
    let good = chain_on(&client, None, &[acquired("7", "alice", 1, -60, Some(600))]);
    push_accepted(&server, &client, "7", &good);

    // A takeover of alice's live lease, and a deletion, are refused one ref at a time.
    let takeover = lease_commit(&client, &acquired("7", "bob", 2, 0, Some(600)), &[&good[0]]);
    let run = push(&client, false, &[&format!("{takeover}:refs/leases/7")]);
    assert_refused(&run, "7", &takeover, "holder-change");
    let run = push(&client, false, &[":refs/leases/7"]);
    assert_refused(&run, "7", &good[0], "deletion");
    assert_eq!(server.tip("7").as_deref(), Some(good[0].as_str()));
}

#[test]
fn with_pusher_env_configured_a_push_without_that_identity_is_refused() {
    // git daemon authenticates nobody: with lease.pusherEnv=REMOTE_USER every lease push is
    // refused as unauthenticated (the http suite covers authenticated pushers).
    let mut server = Server::with_hook();
    server.config("lease.pusherEnv", "REMOTE_USER");
    server.start_at(&at(0));
    let client = server.client("alice");
    let c = lease_commit(&client, &acquired("7", "alice", 1, 0, Some(600)), &[]);
    let run = push(&client, false, &[&format!("{c}:refs/leases/7")]);
    assert_refused(&run, "7", &c, "identity");
    run.stderr_has("REMOTE_USER");
    assert_eq!(server.tip("7"), None);
    // The tool reports the hook's refusal as such (exit 3).
    let run = client.run_at(&at(0), &["--remote", "origin", "acquire", "7"]);
    run.code(3).stderr_has("identity");
    assert_eq!(server.tip("7"), None);
}

#[test]
fn identity_env_without_the_variables_name_refuses_every_push_and_install_hook() {
    // lease.identity=env without lease.pusherEnv once meant no identity at all: bob could
    // release alice's live lease in her name. It is a configuration error: the hook refuses
    // every push saying which setting is missing, and install-hook refuses to install (exit 2).
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");
    let mine = chain_on(&alice, None, &[acquired("7", "alice", 1, -60, Some(600))]);
    push_accepted(&server, &alice, "7", &mine);
    let hook_before = std::fs::read(server.bare().join("hooks/pre-receive")).expect("the hook");
    // Anyone (git daemon authenticates nobody) releasing alice's live lease in her name, with
    // plain git, from a clone that has her ledger.
    let release = lease_commit(&alice, &freed("7", "release", "alice", 1, 0), &[&mine[0]]);
    let bob = server.client("bob");
    for (setting, value, names) in [
        ("lease.identity", "env", "lease.pusherEnv is not set"),
        // Set but empty is no name either.
        (
            "lease.pusherEnv",
            "",
            "bad config value \"\" for lease.pusherEnv",
        ),
    ] {
        server.config(setting, value);
        if setting == "lease.pusherEnv" {
            let _ = server.git_run(&["config", "--unset", "lease.identity"]);
        }
        let run = push(&alice, false, &[&format!("{release}:refs/leases/7")]);
        assert_ne!(
            run.code, 0,
            "{setting}={value:?}: the push was accepted\n{run}"
        );
        run.stderr_has(names).stderr_has("hook declined");
        assert_eq!(server.tip("7").as_deref(), Some(mine[0].as_str()));
        // The tool reports a server that cannot judge as the server's failure (exit 1).
        let run = bob.run_at(&at(0), &["--remote", "origin", "acquire", "8"]);
        run.code(1)
            .stderr_has("the server's hook failed")
            .stderr_has(names);
        assert_eq!(server.tip("8"), None);
        // install-hook refuses, and writes nothing.
        let run = server.lease(&[
            "install-hook",
            "--repo",
            server.bare().to_str().expect("UTF-8"),
        ]);
        run.code(2).stderr_has(names);
        assert_eq!(
            std::fs::read(server.bare().join("hooks/pre-receive")).expect("the hook"),
            hook_before
        );
    }
    // With the variable's name the same push is judged, and refused for what it is.
    server.config("lease.pusherEnv", "REMOTE_USER");
    let run = push(&alice, false, &[&format!("{release}:refs/leases/7")]);
    assert_refused(&run, "7", &release, "identity");
}

#[test]
fn the_servers_clock_rules_hold_at_exact_instants() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let client = server.client("alice");
    let root = |issue: &str, at_s: i64| {
        let c = lease_commit(&client, &acquired(issue, "alice", 1, at_s, Some(600)), &[]);
        (
            c.clone(),
            push(&client, false, &[&format!("{c}:refs/leases/{issue}")]),
        )
    };

    // The default lease.maxClockSkew is 5 minutes, inclusive.
    for (issue, at_s) in [("skew-past", -300), ("skew-future", 300)] {
        let (c, run) = root(issue, at_s);
        assert_eq!(
            run.code, 0,
            "{issue}: exactly 5 minutes off is within the skew\n{run}"
        );
        assert_eq!(server.tip(issue), Some(c));
    }
    for (issue, at_s) in [("skew-past-1", -301), ("skew-future-1", 301)] {
        let (c, run) = root(issue, at_s);
        assert_refused(&run, issue, &c, "clock-skew");
        assert_eq!(server.tip(issue), None);
    }

    // lease.maxClockSkew is read at every push.
    server.config("lease.maxClockSkew", "30s");
    let (c, run) = root("skew-30s-1", -31);
    assert_refused(&run, "skew-30s-1", &c, "clock-skew");
    let (c, run) = root("skew-30s", -30);
    run.ok();
    assert_eq!(server.tip("skew-30s"), Some(c));
    server.config("lease.maxClockSkew", "5m");

    // A lease is free at the instant it expires by the server's clock, not a second before.
    for (issue, ttl, taken) in [("expiry", 60, true), ("expiry-1", 61, false)] {
        let alice = chain_on(
            &client,
            None,
            &[acquired(issue, "alice", 1, -60, Some(ttl))],
        );
        push_accepted(&server, &client, issue, &alice);
        let bob = lease_commit(
            &client,
            &acquired(issue, "bob", 2, 0, Some(600)),
            &[&alice[0]],
        );
        let run = push(&client, false, &[&format!("{bob}:refs/leases/{issue}")]);
        if taken {
            assert_eq!(
                run.code, 0,
                "{issue}: the lease expired at the server's clock\n{run}"
            );
            assert_eq!(server.tip(issue), Some(bob));
        } else {
            assert_refused(&run, issue, &bob, "holder-change");
            assert_eq!(server.tip(issue), Some(alice[0].clone()));
        }
    }
}

#[test]
fn ids_that_look_alike_are_refused_by_the_tool_and_the_hook_alike() {
    let mut server = Server::with_hook();
    server.start_at(&at(0));
    let alice = server.client("alice");
    let composed = "caf\u{e9}";
    let decomposed = "cafe\u{301}";
    alice
        .run_at(
            &at(0),
            &["acquire", composed, "--holder", "alice", "--local"],
        )
        .ok();
    for id in [decomposed, "ca\u{200b}fe", "ab\u{202e}cd"] {
        alice
            .run_at(&at(0), &["acquire", id, "--holder", "alice", "--local"])
            .code(2)
            .stderr_has("issue id");
        // A ledger under such a name, built with plain git, is refused by the server.
        let root = lease_commit(&alice, &forge::acquired(id, "alice", 1, 0, Some(600)), &[]);
        let run = push(&alice, false, &[&format!("{root}:refs/leases/{id}")]);
        assert_ne!(run.code, 0, "{run}");
        run.stderr_has(&format!("at {}: issue: ", &root[..12]))
            .stderr_has("hook declined");
        assert_eq!(server.tip(id), None);
    }
}

#[test]
fn install_hook_prints_the_policy_it_installed_and_warns_on_a_fence_left_open() {
    let served = TestRepo::bare();
    let path = served.path().to_str().expect("a UTF-8 path").to_owned();
    let install = || served.run(&["install-hook", "--repo", &path]);
    let set = |key: &str, value: &str| served.git(&["config", key, value]);

    // Nothing configured: the default fence, and the token as the fence (nobody is known).
    let run = install();
    run.ok()
        .stdout_has("identity: none")
        .stdout_has("fenced branches: refs/heads/issue/* (the default")
        .stdout_has("token: required on a fenced push (the default without identity")
        .stdout_has("admins: none")
        .stderr_has("no identity is configured");
    assert!(!run.stderr.contains("lease.requireToken=false"), "{run}");

    // Identity, a fence of its own and administrators: the holder's account is the fence.
    set("lease.pusherEnv", "REMOTE_USER");
    set("lease.fence", "refs/heads/wip/*");
    set("lease.admins", "ops");
    let run = install();
    run.ok()
        .stdout_has("identity: REMOTE_USER")
        .stdout_has("fenced branches: refs/heads/wip/* (lease.fence)")
        .stdout_has("the pusher must be the live holder (the default with identity")
        .stdout_has("admins: ops");
    assert!(!run.stderr.contains("warning"), "{run}");

    // The token turned off where nobody is known: the fence takes anyone's push. Said, and
    // in the JSON answer's policy too.
    served.git(&["config", "--unset", "lease.pusherEnv"]);
    set("lease.requireToken", "false");
    let answer = served
        .lease()
        .args(["--json", "install-hook", "--repo", &path])
        .run();
    let answer = answer.ok().json();
    assert_eq!(answer["policy"]["identity"], "none");
    assert_eq!(answer["policy"]["require_token"], false);
    assert_eq!(answer["policy"]["require_token_default"], false);
    assert_eq!(answer["policy"]["fences"], json!(["refs/heads/wip/*"]));
    assert_eq!(answer["policy"]["admins"], json!(["ops"]));
    let warnings = answer["warnings"].to_string();
    assert!(
        warnings.contains("lease.requireToken=false without identity"),
        "{warnings}"
    );
}
