//! An ordered queue through MCP (`acquire` with `any` and `ordered`): the first free
//! candidate, the next client the next, racing claimers each a distinct one, and what each
//! passed over said as the command line says it.

use super::*;

/// The names of a JSON object's fields.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// `acquire --any --ordered <queue>` as `holder` on the command line, in JSON.
fn cli_ordered(repo: &TestRepo, holder: &str, queue: &[&str], code: i32) -> Value {
    let run = repo
        .lease()
        .args([
            "--json",
            "acquire",
            "--any",
            "--ordered",
            "--holder",
            holder,
        ])
        .args(queue)
        .run();
    run.code(code);
    run.json()
}

#[test]
fn mcp_acquire_any_ordered_claims_the_first_free_candidate_and_the_next_client_the_next() {
    let repo = TestRepo::new();
    let queue = ["q1", "q2", "q3", "q4"];
    repo.lease()
        .args(["acquire", "q2", "--holder", BOB])
        .run()
        .ok();
    let ordered = |holder: &str| {
        call(
            "acquire",
            json!({"issues": queue, "any": true, "ordered": true, "holder": holder, "detached": true}),
        )
    };
    // One second for both calls, so the holder's retry refreshes nothing and writes nothing.
    let now = env::rfc3339(chrono::Utc::now());
    let Some((first, _)) = session_at(&repo, json!([ordered(ALICE), ordered(ALICE)]), Some(&now))
    else {
        return;
    };
    // The first free candidate in the order, at the first attempt, nothing passed over.
    let claimed = result(&first[0], 0);
    env::assert_fields(
        claimed,
        &[
            ("outcome", json!("acquired")),
            ("issue", json!("q1")),
            ("holder", json!(ALICE)),
            ("token", json!(1)),
            ("candidates", json!(4)),
            ("attempts", json!(1)),
            ("lost", json!(0)),
            ("passed_over", json!([])),
        ],
    );
    // The live holder keeps its own candidate, wherever it stands in the order.
    env::assert_fields(
        result(&first[1], 0),
        &[("issue", json!("q1")), ("wrote", json!(false))],
    );

    // A second client: q2 is held, so q3 is next.
    let Some((second, _)) = session(&repo, json!([ordered(CAROL)])) else {
        return;
    };
    let next = result(&second[0], 0);
    env::assert_fields(
        next,
        &[
            ("issue", json!("q3")),
            ("holder", json!(CAROL)),
            ("lost", json!(0)),
            ("passed_over", json!([])),
        ],
    );
    // The command line's answer is the same object: the same fields, lost and passed_over.
    let cli = cli_ordered(&repo, "dave@example.com", &queue, 0);
    assert_eq!(cli["issue"], "q4", "{cli}");
    assert_eq!(keys(next), keys(&cli), "{next:#}\n{cli:#}");

    // Nothing free: exit 3 as the command line's, nothing written; without `ordered` no
    // passed_over; `ordered` without `any` is bad usage.
    let Some((third, _)) = session(
        &repo,
        json!([
            ordered("erin@example.com"),
            call("release", json!({"issue": "q3", "holder": CAROL})),
            call(
                "acquire",
                json!({"issues": queue, "any": true, "holder": "erin@example.com", "detached": true})
            ),
            call(
                "acquire",
                json!({"issues": queue, "ordered": true, "holder": "erin@example.com"})
            ),
        ]),
    ) else {
        return;
    };
    let none = result(&third[0], 3);
    env::assert_fields(
        none,
        &[
            ("outcome", json!("held")),
            ("issue", Value::Null),
            ("wrote", json!(false)),
        ],
    );
    let cli = cli_ordered(&repo, "frank@example.com", &queue, 3);
    assert_eq!(keys(none), keys(&cli), "{none:#}\n{cli:#}");
    let unordered = result(&third[2], 0);
    env::assert_fields(unordered, &[("issue", json!("q3")), ("lost", json!(0))]);
    assert!(unordered.get("passed_over").is_none(), "{unordered:#}");
    assert_eq!(result(&third[3], 2)["error"]["kind"], "usage");
    // One claim each, and q3's three steps: acquire, release, acquire.
    let counts: Vec<usize> = queue.iter().map(|q| repo.commit_count(q)).collect();
    assert_eq!(counts, [1, 1, 3, 1]);
}

#[test]
fn mcp_ordered_claimers_racing_each_get_a_distinct_candidate_and_settle() {
    let repo = TestRepo::new();
    let Some(python) = python() else {
        return;
    };
    let queue = ["r1", "r2", "r3", "r4"];
    let holders = ["a@race", "b@race", "c@race", "d@race"];
    // Detached: a client done first would otherwise free its claim for the slower ones.
    let args =
        json!({"issues": queue, "any": true, "ordered": true, "ttl": "1h", "detached": true});
    let out = client(
        &python,
        &repo,
        &[&["race", "-"][..], &holders].concat(),
        &args,
    );
    let answers = out["answers"].as_array().expect("answers");
    let mut won = std::collections::BTreeSet::new();
    for (answer, holder) in answers.iter().zip(holders) {
        let v = result(answer, 0);
        env::assert_fields(
            v,
            &[("outcome", json!("acquired")), ("holder", json!(holder))],
        );
        let issue = v["issue"].as_str().expect("an issue");
        assert!(won.insert(issue.to_owned()), "{issue} was claimed twice");
        // A settled claimer leaves nothing free ahead of it, and moves only up.
        assert_eq!(v["passed_over"], json!([]), "{v}");
        let at = queue.iter().position(|q| *q == issue).expect("a candidate");
        for left in v["moved_from"].as_array().expect("moved_from, ordered") {
            let left = queue.iter().position(|q| left == q);
            assert!(left.is_some_and(|l| l > at), "moved down: {v}");
        }
        // The ledger holds the tenure the claimer was told of.
        let shown = repo.json_at(v["at"].as_str().expect("at"), 0, &["show", issue]);
        env::assert_fields(
            &shown,
            &[("holder", json!(holder)), ("token", v["token"].clone())],
        );
    }
    assert_eq!(
        won.len(),
        queue.len(),
        "every claimer got one: {answers:#?}"
    );
}
