//! The table of forged pushes: shapes, tokens and holders, and times the hook must refuse,
//! each naming its rule and leaving the server's refs as they were.

use super::*;

/// A tree holding `lease.json` = `value` plus `extra` entries.
fn tree_with(repo: &TestRepo, value: &Value, extra: &[(&str, &str, &str)]) -> String {
    let b = blob(repo, &lease_bytes(value));
    let mut entries = vec![("100644", "lease.json", b.as_str())];
    entries.extend_from_slice(extra);
    tree(repo, &entries)
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

/// alice's tenure, released.
fn alice_released(issue: &str) -> Vec<Value> {
    vec![
        acquired(issue, "alice", 1, -120, Some(600)),
        freed(issue, "release", "alice", 1, -60),
    ]
}

/// alice's lease that is live by the server's clock for one more minute only.
fn alice_until_plus_60(issue: &str) -> Vec<Value> {
    vec![acquired(issue, "alice", 1, -60, Some(120))]
}

/// alice's live lease: acquired 60 s before the server's clock for 10 minutes.
fn alice_live(issue: &str) -> Vec<Value> {
    vec![acquired(issue, "alice", 1, -60, Some(600))]
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
