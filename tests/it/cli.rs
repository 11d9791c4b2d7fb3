//! The command line as a user and plain git see it: the stored format, `list`, `log`,
//! `--json`, prefix resolution and bad input.

use serde_json::Value;

use crate::env::{at, at_min, issues, TestRepo, T0};

/// Runs a busy history on 42: acquire, re-acquire, renew, release, release again (nothing),
/// acquire by bob. Returns the events that must be recorded, oldest first.
fn busy_42(repo: &TestRepo) -> Vec<&'static str> {
    repo.json_steps(&[
        (0, 0, "acquire 42 --holder alice --ttl 10m"),
        (1, 0, "acquire 42 --holder alice --ttl 10m"),
        (2, 0, "renew 42 --holder alice --ttl 30m"),
        (3, 3, "acquire 42 --holder bob"),
        (4, 0, "release 42 --holder alice"),
        (5, 0, "release 42 --holder alice"),
        (6, 0, "acquire 42 --holder bob --ttl never"),
    ]);
    vec!["acquire", "reacquire", "renew", "release", "acquire"]
}

// ---------------------------------------------------------------------------------------------
// What plain git sees.

#[test]
fn git_show_of_the_ref_gives_the_same_state_as_the_tool() {
    let repo = TestRepo::new();
    let v = repo.json_at(
        T0,
        0,
        &[
            "acquire",
            "42",
            "--holder",
            "alice@example.com",
            "--ttl",
            "15m",
        ],
    );
    let stored = repo.lease_json("42");
    assert_eq!(stored["version"], 1);
    assert_eq!(stored["issue"], "42");
    assert_eq!(stored["event"], "acquire");
    for field in ["holder", "token", "acquired_at", "expires_at", "issue"] {
        assert_eq!(stored[field], v[field], "field {field}");
    }
    assert_eq!(stored["at"], T0);
    assert_eq!(v["commit"].as_str(), repo.tip("42").as_deref());
    // The tool's show agrees with git show.
    let shown = repo.json_at(&at_min(1), 0, &["show", "42"]);
    for field in [
        "holder",
        "token",
        "acquired_at",
        "expires_at",
        "event",
        "at",
    ] {
        assert_eq!(shown[field], stored[field], "field {field}");
    }
    // Every field the format documents is there, with the right JSON type.
    let obj = stored.as_object().expect("lease.json is an object");
    for key in [
        "version",
        "issue",
        "event",
        "holder",
        "token",
        "acquired_at",
        "expires_at",
        "at",
    ] {
        assert!(obj.contains_key(key), "lease.json lacks {key}: {stored}");
    }
    assert!(stored["token"].is_u64());
    // The blob is pretty JSON ending with a newline.
    let raw = repo
        .git_cmd()
        .args(["cat-file", "blob", "refs/leases/42:lease.json"])
        .run();
    assert!(raw.stdout.ends_with("}\n"), "{raw}");
    assert!(raw.stdout.lines().count() > 5, "pretty-printed: {raw}");
}

#[test]
fn the_ledger_is_a_linear_chain_with_one_commit_per_event() {
    let repo = TestRepo::new();
    let events = busy_42(&repo);
    let chain = repo.chain("42");
    assert_eq!(
        chain
            .iter()
            .map(|(_, l)| l["event"].clone())
            .collect::<Vec<_>>(),
        events,
        "one commit per state-changing event, none for refusals or releases of nothing"
    );
    assert_eq!(repo.commit_count("42"), events.len());
    // Tokens along the chain: 1 for alice's tenure, 2 for bob's.
    let tokens: Vec<u64> = chain
        .iter()
        .map(|(_, l)| l["token"].as_u64().expect("token"))
        .collect();
    assert_eq!(tokens, [1, 1, 1, 1, 2]);
    // rev-list --parents: the root has no parent, every other commit exactly one, which is
    // the previous event.
    let parents = repo.git(&["rev-list", "--parents", "--reverse", "refs/leases/42"]);
    let lines: Vec<Vec<&str>> = parents
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), events.len());
    assert_eq!(lines[0].len(), 1, "the first commit is a root: {parents}");
    for pair in lines.windows(2) {
        assert_eq!(pair[1].len(), 2, "exactly one parent: {parents}");
        assert_eq!(pair[1][1], pair[0][0], "the parent is the previous event");
    }
    // Each commit's tree holds exactly lease.json, as a regular file.
    for (commit, _) in &chain {
        let tree = repo.git(&["ls-tree", commit]);
        let entries: Vec<&str> = tree.lines().collect();
        assert_eq!(entries.len(), 1, "tree of {commit}: {tree}");
        assert!(
            entries[0].starts_with("100644 blob ") && entries[0].ends_with("\tlease.json"),
            "tree of {commit}: {tree}"
        );
    }
    // The commit subject names the event, and the commit time is the event's.
    let subjects = repo.git(&["log", "--reverse", "--format=%s|%ct", "refs/leases/42"]);
    for ((line, (_, lease)), event) in subjects.lines().zip(&chain).zip(&events) {
        assert!(
            line.starts_with(&format!("{event} 42:")),
            "subject {line:?}"
        );
        let at = chrono::DateTime::parse_from_rfc3339(lease["at"].as_str().expect("at"))
            .expect("at is RFC 3339");
        assert!(line.ends_with(&format!("|{}", at.timestamp())), "{line:?}");
    }
    repo.assert_fsck();
}

#[test]
fn fsck_strict_is_clean_after_every_kind_of_event() {
    let repo = TestRepo::new();
    busy_42(&repo);
    repo.json_at(
        T0,
        0,
        &["acquire", "gh/1", "--holder", "x y <z@example.com>"],
    );
    repo.json_at(
        &at_min(1),
        0,
        &["complete", "gh/1", "--holder", "x y <z@example.com>"],
    );
    repo.json_at(
        T0,
        0,
        &[
            "acquire", "gh/2", "--holder", "ci", "--note", "n", "--task", "t",
        ],
    );
    repo.json_at(
        &at_min(61),
        0,
        &["abandon", "gh/2", "--holder", "someone-else"],
    );
    repo.assert_fsck();
    // Nothing outside refs/leases/ was touched: no branch, no HEAD commit.
    let refs = repo.git(&["for-each-ref", "--format=%(refname)"]);
    assert!(
        refs.lines().all(|r| r.starts_with("refs/leases/")),
        "only lease refs: {refs}"
    );
    assert!(repo.git_run(&["rev-parse", "--verify", "-q", "HEAD"]).code != 0);
}

// ---------------------------------------------------------------------------------------------
// list

/// Leases at T0+5m: b (T0), z (T0), a (T0+1m), c (T0+1m) live; d released; e expired;
/// gh/1 live (T0+2m) held by bob.
fn many(repo: &TestRepo) {
    for (issue, now, holder, ttl) in [
        ("z", T0.to_owned(), "alice", "1h"),
        ("c", at_min(1), "alice", "1h"),
        ("b", T0.to_owned(), "bob", "never"),
        ("a", at_min(1), "carol", "1h"),
        ("d", T0.to_owned(), "dave", "1h"),
        ("e", T0.to_owned(), "erin", "2m"),
        ("gh/1", at_min(2), "bob", "1h"),
    ] {
        repo.json_at(
            &now,
            0,
            &["acquire", issue, "--holder", holder, "--ttl", ttl],
        );
    }
    repo.json_at(&at_min(1), 0, &["release", "d", "--holder", "dave"]);
}

#[test]
fn list_shows_live_leases_oldest_tenure_first_then_by_issue() {
    let repo = TestRepo::new();
    many(&repo);
    let v = repo.json_at(&at_min(5), 0, &["list"]);
    assert_eq!(issues(&v), ["b", "z", "a", "c", "gh/1"]);
    for lease in v.as_array().expect("array") {
        assert_eq!(lease["held"], true, "{lease}");
        assert_eq!(lease["state"], "held", "{lease}");
    }
    // The table has the same order.
    let run = repo.run_at(&at_min(5), &["list"]);
    run.ok();
    let rows: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(rows, ["b", "z", "a", "c", "gh/1"], "{run}");
    assert!(run.stdout.starts_with("ISSUE"), "{run}");
}

#[test]
fn list_all_includes_free_and_expired_with_their_last_token() {
    let repo = TestRepo::new();
    many(&repo);
    // Give d a second tenure so its last token is 2.
    repo.json_at(&at_min(2), 0, &["acquire", "d", "--holder", "dave"]);
    repo.json_at(&at_min(3), 0, &["release", "d", "--holder", "dave"]);
    let v = repo.json_at(&at_min(5), 0, &["list", "--all"]);
    let got = issues(&v);
    assert_eq!(got.len(), 7, "{v}");
    for issue in ["d", "e"] {
        assert!(got.contains(&issue.to_owned()), "{issue} in {v}");
    }
    // Live ones first, in list order.
    assert_eq!(got[..5], ["b", "z", "a", "c", "gh/1"]);
    let find = |id: &str| {
        v.as_array()
            .expect("array")
            .iter()
            .find(|l| l["issue"] == id)
            .cloned()
            .expect("listed")
    };
    let d = find("d");
    assert_eq!(d["state"], "free");
    assert_eq!(d["token"], 2);
    assert_eq!(d["holder"], Value::Null);
    assert_eq!(d["held"], false);
    let e = find("e");
    assert_eq!(e["state"], "expired");
    assert_eq!(e["token"], 1);
    assert_eq!(e["holder"], Value::Null);
    assert_eq!(e["last_holder"], "erin");
    // Human --all shows the state column.
    repo.run_at(&at_min(5), &["list", "--all"])
        .ok()
        .stdout_has("STATE")
        .stdout_has("expired")
        .stdout_has("free");
}

#[test]
fn list_json_is_an_array_even_when_empty() {
    let repo = TestRepo::new();
    let v = repo.json_at(T0, 0, &["list"]);
    assert_eq!(v, Value::Array(vec![]));
    let v = repo.json_at(T0, 0, &["list", "--all"]);
    assert_eq!(v, Value::Array(vec![]));
    repo.run_at(T0, &["list"]).ok().stdout_has("no live leases");
}

#[test]
fn list_filters_by_holder_state_and_prefix() {
    let repo = TestRepo::new();
    many(&repo);
    let now = at_min(5);
    let v = repo.json_at(&now, 0, &["list", "--holder", "bob"]);
    assert_eq!(issues(&v), ["b", "gh/1"]);
    let v = repo.json_at(&now, 0, &["list", "--holder", "erin"]);
    assert_eq!(issues(&v), Vec::<String>::new(), "erin's lease expired");
    let v = repo.json_at(&now, 0, &["list", "--all", "--holder", "erin"]);
    assert_eq!(issues(&v), ["e"]);
    let v = repo.json_at(&now, 0, &["list", "--state", "expired"]);
    assert_eq!(issues(&v), ["e"]);
    let v = repo.json_at(&now, 0, &["list", "--state", "free"]);
    assert_eq!(issues(&v), ["d"]);
    let v = repo.json_at(&now, 0, &["list", "--state", "held"]);
    assert_eq!(issues(&v), ["b", "z", "a", "c", "gh/1"]);
    let v = repo.json_at(&now, 0, &["list", "gh/"]);
    assert_eq!(issues(&v), ["gh/1"]);
    let v = repo.json_at(&now, 0, &["list", "--all", "d"]);
    assert_eq!(issues(&v), ["d"]);
    let v = repo.json_at(
        &now,
        0,
        &["list", "--state", "held", "--holder", "alice", "z"],
    );
    assert_eq!(issues(&v), ["z"]);
    repo.run_at(&now, &["list", "--state", "bogus"]).code(2);
}

#[test]
fn list_at_a_later_instant_filters_by_expiry() {
    let repo = TestRepo::new();
    many(&repo);
    // At T0+61m only the open-ended b and gh/1 (until T0+62m) are live.
    let v = repo.json_at(&at_min(61), 0, &["list"]);
    assert_eq!(issues(&v), ["b", "gh/1"]);
    let v = repo.json_at(&at_min(62), 0, &["list"]);
    assert_eq!(issues(&v), ["b"]);
}

// ---------------------------------------------------------------------------------------------
// log

#[test]
fn log_is_newest_first_with_one_entry_per_commit() {
    let repo = TestRepo::new();
    let mut events = busy_42(&repo);
    events.reverse();
    let v = repo.json_at(&at_min(10), 0, &["log", "42"]);
    let entries = v.as_array().expect("log --json is an array");
    let commits = repo.git(&["rev-list", "refs/leases/42"]);
    let commits: Vec<&str> = commits.lines().collect();
    assert_eq!(entries.len(), commits.len());
    for ((entry, commit), event) in entries.iter().zip(&commits).zip(&events) {
        assert_eq!(entry["commit"], *commit);
        assert_eq!(entry["event"], *event);
        let stored = repo.lease_json_at(commit);
        for field in ["token", "holder", "at", "acquired_at", "expires_at"] {
            assert_eq!(entry[field], stored[field], "{field} of {commit}");
        }
    }
    assert_eq!(entries[0]["holder"], "bob");
    assert_eq!(entries[0]["token"], 2);
    assert_eq!(entries[1]["holder"], Value::Null);
    assert_eq!(entries[1]["previous_holder"], "alice");
    // Human: one line per commit, newest first, each starting with its abbreviated commit.
    let run = repo.run_at(&at_min(10), &["log", "42"]);
    run.ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), commits.len(), "{run}");
    for (line, commit) in lines.iter().zip(&commits) {
        assert!(line.starts_with(&commit[..10]), "{line:?} vs {commit}");
    }
    assert!(
        lines[0].contains("acquire") && lines[0].contains("bob"),
        "{run}"
    );
}

#[test]
fn log_of_an_unknown_issue_is_not_found() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["log", "42"]).code(4).stderr_has("42");
    repo.run_at(T0, &["show", "42"]).code(4).stderr_has("42");
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a"]);
    repo.run_at(T0, &["--json", "log", "2"]).code(4);
    repo.run_at(T0, &["--json", "show", "2"]).code(4);
}

// ---------------------------------------------------------------------------------------------
// --json

#[test]
fn json_flag_works_before_or_after_the_subcommand() {
    let repo = TestRepo::new();
    let first = repo
        .lease()
        .now(T0)
        .args(["--json", "acquire", "1", "--holder", "a"])
        .run();
    first.ok();
    let second = repo
        .lease()
        .now(T0)
        .args(["acquire", "2", "--holder", "a", "--json"])
        .run();
    second.ok();
    let (a, b) = (first.json(), second.json());
    assert_eq!(a["outcome"], "acquired");
    assert_eq!(b["outcome"], "acquired");
    assert_eq!(b["issue"], "2");
    for args in [
        vec!["--json", "show", "1"],
        vec!["show", "1", "--json"],
        vec!["show", "--json", "1"],
    ] {
        let run = repo.run_at(&at_min(1), &args);
        run.ok();
        assert_eq!(run.json()["issue"], "1", "{args:?}");
    }
    for args in [vec!["--json", "list"], vec!["list", "--json"]] {
        let run = repo.run_at(&at_min(1), &args);
        run.ok();
        assert_eq!(run.json().as_array().map(Vec::len), Some(2), "{args:?}");
    }
    for args in [vec!["--json", "log", "1"], vec!["log", "1", "--json"]] {
        let run = repo.run_at(&at_min(1), &args);
        run.ok();
        assert!(run.json().is_array(), "{args:?}");
    }
    // One JSON document per line on stdout, nothing else.
    assert_eq!(first.stdout.lines().count(), 1, "{first}");
}

#[test]
fn json_reports_have_the_documented_fields() {
    let repo = TestRepo::new();
    let ops: Vec<(String, Vec<&str>, i32)> = vec![
        (
            T0.into(),
            vec!["acquire", "1", "--holder", "a", "--ttl", "10m"],
            0,
        ),
        (at_min(1), vec!["acquire", "1", "--holder", "b"], 3),
        (at_min(2), vec!["renew", "1", "--holder", "a"], 0),
        (at_min(3), vec!["renew", "1", "--holder", "b"], 3),
        (at_min(4), vec!["release", "1", "--holder", "a"], 0),
        (at_min(5), vec!["release", "1", "--holder", "a"], 0),
    ];
    let expected = [
        "acquired",
        "held",
        "renewed",
        "not_holder",
        "released",
        "not_held",
    ];
    for ((now, args, code), outcome) in ops.iter().zip(expected) {
        let v = repo.json_at(now, *code, args);
        assert_eq!(v["outcome"], outcome, "{args:?}");
        for key in [
            "outcome",
            "issue",
            "holder",
            "token",
            "acquired_at",
            "expires_at",
        ] {
            assert!(
                v.as_object().is_some_and(|o| o.contains_key(key)),
                "{args:?}: no {key} in {v}"
            );
        }
        assert_eq!(v["issue"], "1");
        assert_eq!(v["token"], 1);
    }
}

#[test]
fn show_json_has_held_and_nulls_the_holder_once_expired() {
    let repo = TestRepo::new();
    repo.json_at(
        T0,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "10m"],
    );
    let live = repo.json_at(&at_min(9), 0, &["show", "42"]);
    for key in [
        "issue",
        "holder",
        "token",
        "acquired_at",
        "expires_at",
        "held",
    ] {
        assert!(
            live.as_object().is_some_and(|o| o.contains_key(key)),
            "{key}: {live}"
        );
    }
    assert_eq!(live["held"], true);
    assert_eq!(live["holder"], "alice");
    assert_eq!(live["state"], "held");
    let expired = repo.json_at(&at_min(10), 0, &["show", "42"]);
    assert_eq!(expired["held"], false);
    assert_eq!(expired["holder"], Value::Null);
    assert_eq!(expired["last_holder"], "alice");
    assert_eq!(expired["state"], "expired");
    assert_eq!(expired["token"], 1);
    assert_eq!(expired["expires_at"], at_min(10));
    // Human show says so too.
    repo.run_at(&at_min(10), &["show", "42"])
        .ok()
        .stdout_has("expired")
        .stdout_has("alice");
    repo.json_at(&at_min(11), 0, &["release", "42", "--holder", "bob"]);
    let free = repo.json_at(&at_min(12), 0, &["show", "42"]);
    assert_eq!(free["held"], false);
    assert_eq!(free["holder"], Value::Null);
    assert_eq!(free["last_holder"], "alice");
    assert_eq!(free["state"], "free");
    assert_eq!(free["token"], 1);
}

// ---------------------------------------------------------------------------------------------
// Prefix resolution

#[test]
fn an_exact_id_wins_over_a_longer_id_it_prefixes() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "forty-two"]);
    // acquire takes the exact id: "4" is a new issue, not 42.
    let v = repo.json_at(T0, 0, &["acquire", "4", "--holder", "four"]);
    assert_eq!(v["issue"], "4");
    assert_eq!(v["token"], 1);
    assert_eq!(repo.commit_count("42"), 1, "42 untouched");
    let v = repo.json_at(&at_min(1), 0, &["show", "4"]);
    assert_eq!(
        (v["issue"].clone(), v["holder"].clone()),
        ("4".into(), "four".into())
    );
    let v = repo.json_at(&at_min(1), 0, &["show", "42"]);
    assert_eq!(v["holder"], "forty-two");
    let v = repo.json_at(&at_min(1), 0, &["log", "4"]);
    assert_eq!(v.as_array().map(Vec::len), Some(1));
    assert_eq!(v[0]["holder"], "four");
    repo.json_at(
        &at_min(1),
        0,
        &["check", "4", "--token", "1", "--holder", "four"],
    );
    let v = repo.json_at(&at_min(1), 0, &["release", "4", "--holder", "four"]);
    assert_eq!(v["issue"], "4");
    assert_eq!(repo.lease_json("42")["holder"], "forty-two");
}

#[test]
fn a_unique_prefix_resolves() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "alpha", "--holder", "a"]);
    repo.json_at(T0, 0, &["acquire", "gh/123", "--holder", "g"]);
    assert_eq!(repo.json_at(T0, 0, &["show", "al"])["issue"], "alpha");
    assert_eq!(repo.json_at(T0, 0, &["show", "gh/"])["issue"], "gh/123");
    assert_eq!(repo.json_at(T0, 0, &["show", "gh/12"])["issue"], "gh/123");
    assert_eq!(repo.json_at(T0, 0, &["log", "al"])[0]["holder"], "a");
    repo.json_at(T0, 0, &["check", "alpha", "--token", "1", "--holder", "a"]);
    let v = repo.json_at(&at_min(1), 0, &["renew", "al", "--holder", "a"]);
    assert_eq!(v["issue"], "alpha");
    let v = repo.json_at(&at_min(1), 0, &["release", "gh/1", "--holder", "g"]);
    assert_eq!(v["issue"], "gh/123");
    assert_eq!(v["outcome"], "released");
    assert_eq!(repo.tip("gh/1"), None, "no ref for the prefix itself");
}

#[test]
fn an_ambiguous_prefix_is_refused_listing_the_candidates() {
    let repo = TestRepo::new();
    for issue in ["beta1", "beta2", "gamma"] {
        repo.json_at(T0, 0, &["acquire", issue, "--holder", "a"]);
    }
    let before = repo.snapshot();
    let cases: &[&[&str]] = &[
        &["show", "beta"],
        &["log", "beta"],
        &["release", "beta", "--holder", "a"],
        &["renew", "beta", "--holder", "a"],
    ];
    for args in cases {
        repo.run_at(&at_min(1), args)
            .code(4)
            .stderr_has("ambiguous")
            .stderr_has("beta1")
            .stderr_has("beta2");
    }
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn check_and_revoke_take_exact_ids_only_and_an_empty_id_is_bad_usage() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "123", "--holder", "a"]);
    let before = repo.snapshot();
    // A prefix is never a fencing answer: issue 12 was never leased.
    let v = repo.json_at(T0, 3, &["check", "12", "--token", "1"]);
    assert_eq!(v["ok"], false);
    assert_eq!(v["issue"], "12");
    repo.run_at(T0, &["check", "12", "--token", "1", "--holder", "a"])
        .code(3)
        .stdout_has("never leased");
    // Nor is it a revoke of the lease it prefixes.
    let v = repo.json_at(T0, 0, &["revoke", "12", "--reason", "r", "--holder", "ops"]);
    assert_eq!(v["outcome"], "not_held");
    assert_eq!(repo.snapshot(), before);
    repo.json_at(T0, 0, &["check", "123", "--token", "1"]);
    // A revoke says so, in text and JSON.
    let v = repo.json_at(
        T0,
        0,
        &["revoke", "123", "--reason", "r", "--holder", "ops"],
    );
    assert_eq!(v["outcome"], "revoked");
    repo.json_at(T0, 0, &["acquire", "123", "--holder", "a"]);
    repo.run_at(T0, &["revoke", "123", "--reason", "r", "--holder", "ops"])
        .ok()
        .stdout_has("revoked 123 held by a (token 2 kept)");
    let before = repo.snapshot();
    for args in [
        &["show", ""][..],
        &["log", ""],
        &["check", "", "--token", "1"],
        &["revoke", "", "--reason", "r", "--holder", "ops"],
        &["release", "", "--holder", "a"],
        &["renew", "", "--holder", "a"],
        &["verify", ""],
    ] {
        repo.run_at(T0, args)
            .code(2)
            .stderr_has("must not be empty");
    }
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn show_and_log_of_an_unknown_prefix_are_not_found() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "alpha", "--holder", "a"]);
    repo.run_at(T0, &["show", "zeta"])
        .code(4)
        .stderr_has("zeta");
    repo.run_at(T0, &["log", "zeta"]).code(4).stderr_has("zeta");
    // A longer id than any existing one is not a prefix match.
    repo.run_at(T0, &["show", "alphabet"]).code(4);
}

// ---------------------------------------------------------------------------------------------
// Bad input

/// Each rule of the ids git refuses as ref names, by the words its refusal must use, with the
/// ids it refuses.
const INVALID_IDS: &[(&str, &[&str])] = &[
    ("empty", &[""]),
    ("'..'", &["..", "a..b"]),
    ("spaces", &["a b"]),
    ("control", &["a\tb", "a\u{1}b", "a\u{7f}b"]),
    ("~", &["a~1"]),
    ("^", &["a^"]),
    (":", &["a:b"]),
    ("?", &["a?"]),
    ("*", &["a*"]),
    ("[", &["a["]),
    ("\\", &["a\\b"]),
    ("start with '-'", &["-x", "--holder"]),
    ("start with '.'", &[".x", "a/.x"]),
    (".lock", &["x.lock", "x.lock/y"]),
    ("'/'", &["x/", "/x"]),
    ("'//'", &["a//b"]),
    ("'@{'", &["a@{1}"]),
    ("end with '.'", &["x."]),
];

#[test]
fn every_invalid_issue_id_is_refused_by_its_rule() {
    let repo = TestRepo::new();
    for (rule, ids) in INVALID_IDS {
        for id in *ids {
            // `--` ends the options, so ids starting with '-' reach the id rule.
            let run = repo.run_at(T0, &["acquire", "--holder", "a", "--", id]);
            run.code(2).stderr_has("invalid issue id").stderr_has(rule);
        }
    }
    assert_eq!(repo.lease_refs(), "", "nothing was created");
}

#[test]
fn invalid_ids_are_refused_by_the_writers_that_take_prefixes_too() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "a"]);
    for (id, rule) in [
        ("a b", "spaces"),
        ("-x", "'-'"),
        ("x.lock", ".lock"),
        ("a..b", "'..'"),
    ] {
        for cmd in ["release", "renew", "complete", "abandon"] {
            repo.run_at(T0, &[cmd, "--holder", "a", "--", id])
                .code(2)
                .stderr_has(rule);
        }
        repo.run_at(T0, &["check", "--token", "1", "--", id])
            .code(2)
            .stderr_has(rule);
    }
    assert_eq!(repo.lease_refs().lines().count(), 1);
}

#[test]
fn double_dash_ends_options_so_a_dash_id_is_not_a_flag() {
    let repo = TestRepo::new();
    // Without `--`, clap sees an unknown flag; with it, the id rule refuses it.
    repo.run_at(T0, &["acquire", "--holder", "a", "--", "-x"])
        .code(2)
        .stderr_has("must not start with '-'");
    repo.run_at(T0, &["acquire", "--holder", "a", "--", "--ttl"])
        .code(2)
        .stderr_has("must not start with '-'");
    // And show does not parse it as a flag either.
    let run = repo.run_at(T0, &["show", "--", "--json"]);
    assert_ne!(run.code, 0, "{run}");
    assert!(
        run.stdout.is_empty(),
        "`show -- --json` printed JSON: {run}"
    );
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn namespaced_and_unusual_but_valid_ids_work() {
    let repo = TestRepo::new();
    for id in ["gh/123", "PROJ-7", "a.b", "feature_x", "a/b/c", "é", "x@y"] {
        let v = repo.json_at(T0, 0, &["acquire", id, "--holder", "a"]);
        assert_eq!(v["issue"], *id);
        assert_eq!(repo.lease_json(id)["issue"], *id);
        let v = repo.json_at(T0, 0, &["show", id]);
        assert_eq!(v["issue"], *id);
    }
    assert!(repo.tip("gh/123").is_some());
    repo.assert_fsck();
}

#[test]
fn a_bad_ttl_is_bad_usage() {
    let repo = TestRepo::new();
    for ttl in [
        "0",
        "0s",
        "abc",
        "-5m",
        "1.5s",
        "500ms",
        "",
        "forever",
        "99999999d",
    ] {
        // `--ttl=<value>` so that "-5m" reaches the TTL parser rather than clap.
        repo.run_at(
            T0,
            &["acquire", "1", "--holder", "a", &format!("--ttl={ttl}")],
        )
        .code(2)
        .stderr_has("TTL");
    }
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a"]);
    repo.run_at(T0, &["renew", "1", "--holder", "a", "--ttl", "soon"])
        .code(2)
        .stderr_has("TTL");
    assert_eq!(repo.commit_count("1"), 1);
    // A bad configured TTL is bad usage too, and names the key.
    repo.git(&["config", "lease.ttl", "whenever"]);
    repo.run_at(T0, &["acquire", "2", "--holder", "a"])
        .code(2)
        .stderr_has("lease.ttl");
}

#[test]
fn a_bad_clock_is_bad_usage() {
    let repo = TestRepo::new();
    for now in [
        "garbage",
        "2026-13-01T00:00:00Z",
        "12:00",
        "2026-11-30",
        "-5",
        "1e9",
    ] {
        repo.run_at(now, &["acquire", "1", "--holder", "a"])
            .code(2)
            .stderr_has(now);
        repo.run_at(now, &["list"]).code(2);
    }
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn a_clock_or_ttl_past_what_a_ledger_records_is_bad_usage_and_writes_nothing() {
    let repo = TestRepo::new();
    for now in ["8210266876799", "253402300800", "1969-12-31T23:59:59Z"] {
        repo.run_at(now, &["acquire", "1", "--holder", "a"])
            .code(2)
            .stderr_has(now);
    }
    // 2,920,000 days is a valid duration, but from 2026 it ends after year 9999.
    for ttl in ["2920000d", "3000000d", "100000y"] {
        repo.run_at(&at(0), &["acquire", "x", "--holder", "a", "--ttl", ttl])
            .code(2)
            .stderr_has("TTL");
    }
    repo.git(&["config", "lease.ttl", "2920000d"]);
    repo.run_at(&at(0), &["acquire", "x", "--holder", "a"])
        .code(2);
    assert_eq!(repo.lease_refs(), "");
    // The last instant a ledger records is one every reader parses back.
    repo.git(&["config", "--unset", "lease.ttl"]);
    repo.run_at(
        "9999-12-31T23:00:00Z",
        &["acquire", "x", "--holder", "a", "--ttl", "30m"],
    )
    .ok();
    repo.run_at("9999-12-31T23:00:00Z", &["list"])
        .ok()
        .stdout_has("x");
    repo.run_at("9999-12-31T23:00:00Z", &["verify"]).ok();
    // Durations far past any clock never overflow one.
    let forever = "18446744073709551615s";
    repo.run_at(&at(0), &["wait", "free", "--timeout", forever])
        .ok();
    repo.run_at(
        &at(0),
        &[
            "run", "r", "--holder", "a", "--grace", forever, "--", "true",
        ],
    )
    .ok();
}

#[test]
fn dash_c_to_a_missing_directory_is_bad_usage_like_any_missing_repository() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["-C", "no/such/dir", "list"])
        .code(2)
        .stderr_has("no/such/dir");
}

#[test]
fn a_bad_holder_is_bad_usage() {
    let repo = TestRepo::new();
    let long = "h".repeat(257);
    for holder in ["", " a", "a ", "a\nb", "a\u{1}b", long.as_str()] {
        repo.run_at(T0, &["acquire", "1", "--holder", holder])
            .code(2)
            .stderr_has("holder");
    }
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn outside_a_repository_the_error_says_so() {
    let repo = TestRepo::new();
    let outside = repo.scratch("not-a-repo");
    for args in [
        vec!["acquire", "1", "--holder", "a"],
        vec!["list"],
        vec!["show", "1"],
    ] {
        let run = repo.lease().now(T0).cwd(&outside).args(&args).run();
        assert_ne!(run.code, 0, "{run}");
        assert!(
            run.stderr.to_lowercase().contains("repository"),
            "stderr must say there is no repository: {run}"
        );
        assert!(run.stdout.is_empty(), "{run}");
    }
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["frobnicate"]).code(2);
    repo.run_at(T0, &["acquire"]).code(2);
    repo.run_at(T0, &["check", "1"]).code(2);
    repo.run_at(T0, &["check", "1", "--token", "x"]).code(2);
    repo.run_at(T0, &["acquire", "-x", "--holder", "a"]).code(2);
    repo.run_at(T0, &["--help"]).ok().stdout_has("acquire");
    repo.run_at(T0, &["--version"]).ok();
}

#[test]
fn holder_names_with_angle_brackets_are_stored_verbatim_and_commits_stay_valid() {
    let repo = TestRepo::new();
    let holder = "Ada <ada@example.com>";
    repo.json_at(T0, 0, &["acquire", "1", "--holder", holder]);
    assert_eq!(repo.lease_json("1")["holder"], holder);
    assert_eq!(repo.json_at(T0, 0, &["show", "1"])["holder"], holder);
    repo.assert_fsck();
}

#[test]
fn times_are_shown_relative_to_the_given_clock() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a", "--ttl", "2h"]);
    repo.run_at(&at(90), &["show", "1"])
        .ok()
        .stdout_has("14:00 UTC")
        .stdout_has("in 1h 58m");
}

#[test]
fn json_output_never_repeats_a_key() {
    // serde_json keeps the last of repeated keys, so a repeated key hides a value from every
    // consumer: `check --json` must say both which token was checked and the live one.
    let repo = TestRepo::new();
    repo.json_at(
        T0,
        0,
        &["acquire", "42", "--holder", "alice", "--ttl", "10m"],
    );
    let cases: Vec<(String, Vec<&str>)> = vec![
        (at_min(1), vec!["acquire", "42", "--holder", "bob"]),
        (at_min(1), vec!["renew", "42", "--holder", "alice"]),
        (at_min(1), vec!["show", "42"]),
        (at_min(1), vec!["list", "--all"]),
        (at_min(1), vec!["log", "42"]),
        (at_min(1), vec!["check", "42", "--token", "1"]),
        (at_min(1), vec!["check", "42", "--token", "9"]),
        (at_min(1), vec!["check", "nope", "--token", "3"]),
        (at_min(2), vec!["release", "42", "--holder", "alice"]),
    ];
    let mut repeated = Vec::new();
    for (now, args) in &cases {
        let run = repo.lease().now(now).arg_json().args(args).run();
        assert!([0, 3].contains(&run.code), "{run}");
        let dups = crate::env::duplicate_keys(&run.stdout);
        if !dups.is_empty() {
            repeated.push(format!("{args:?}: {dups:?} in {}", run.stdout.trim_end()));
        }
    }
    assert!(
        repeated.is_empty(),
        "JSON objects with repeated keys:\n{}",
        repeated.join("\n")
    );
}

#[test]
fn git_runs_the_binary_as_the_lease_subcommand() {
    let repo = TestRepo::new();
    let bin_dir = std::path::Path::new(crate::env::BIN)
        .parent()
        .expect("the binary's directory");
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let run = repo
        .git_cmd()
        .env("PATH", &path)
        .now(T0)
        .args(["lease", "--json", "acquire", "42", "--holder", "alice"])
        .run();
    run.ok();
    assert_eq!(run.json()["token"], 1);
    // `git -C <repo> lease` from elsewhere.
    let elsewhere = repo.scratch("elsewhere");
    let repo_path = repo.path().to_str().expect("UTF-8").to_owned();
    let run = repo
        .git_cmd()
        .env("PATH", &path)
        .now(&at_min(1))
        .cwd(&elsewhere)
        .args(["-C", &repo_path, "lease", "show", "42"])
        .run();
    run.ok().stdout_has("alice");
}

// ---------------------------------------------------------------------------------------------
// Several issues in one acquire

#[test]
fn acquiring_several_issues_is_all_or_none() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "2", "--holder", "other"]);
    let before = repo.snapshot();
    let run = repo.run_at(
        &at_min(1),
        &["--json", "acquire", "1", "2", "3", "--holder", "me"],
    );
    run.code(3);
    let v = run.json();
    let reports = v.as_array().expect("one report per issue");
    assert_eq!(reports.len(), 3);
    assert_eq!(reports[1]["outcome"], "held");
    assert_eq!(reports[1]["holder"], "other");
    assert_eq!(repo.snapshot(), before, "nothing was written");
    // When none is held, all are taken in one go.
    let v = repo.json_at(&at_min(1), 0, &["acquire", "4", "5", "6", "--holder", "me"]);
    let reports = v.as_array().expect("array");
    assert_eq!(reports.len(), 3);
    for (r, id) in reports.iter().zip(["4", "5", "6"]) {
        assert_eq!(r["issue"], id);
        assert_eq!(r["outcome"], "acquired");
        assert_eq!(r["token"], 1);
        assert_eq!(repo.lease_json(id)["holder"], "me");
    }
}

#[test]
fn a_refused_multi_acquire_does_not_report_untaken_issues_as_acquired() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "2", "--holder", "other"]);
    let run = repo.run_at(
        &at_min(1),
        &["--json", "acquire", "1", "2", "3", "--holder", "me"],
    );
    run.code(3);
    let v = run.json();
    for r in v.as_array().expect("array") {
        if r["issue"] != "2" {
            assert_ne!(
                r["outcome"], "acquired",
                "issue {} was not acquired (nothing was written, holder {}), yet reported as \
                 acquired: {r}",
                r["issue"], r["holder"]
            );
        }
    }
    let human = repo.run_at(&at_min(1), &["acquire", "1", "2", "3", "--holder", "me"]);
    human.code(3);
    assert!(
        !human.stdout.lines().any(|l| l.starts_with("acquired")),
        "the human report claims an acquire that did not happen:\n{human}"
    );
}

#[test]
fn one_acquire_of_clashing_ids_is_refused_as_a_clash() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["acquire", "x", "x/y", "--holder", "me"]);
    run.code(2).stderr_has("clash");
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn one_acquire_naming_an_issue_twice_is_not_a_git_failure() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["--json", "acquire", "5", "5", "--holder", "me"]);
    assert!(
        run.code == 0 || run.code == 2,
        "a repeated id is either taken once or refused as bad usage, not a failure:\n{run}"
    );
    if run.code == 0 {
        assert_eq!(repo.commit_count("5"), 1);
        assert_eq!(repo.lease_json("5")["token"], 1);
    } else {
        assert_eq!(repo.lease_refs(), "");
    }
}

/// Runs `git-lease args…` through `sh -c script`, where the script refers to the command as
/// `"$0" "$@"`, with the test's environment and directory.
fn through_shell(repo: &TestRepo, script: &str, args: &[&str]) -> std::process::Output {
    let lease = repo.lease().now(&at_min(1)).args(args).command();
    let mut sh = std::process::Command::new("bash");
    sh.arg("-c")
        .arg(script)
        .arg(lease.get_program())
        .args(lease.get_args());
    for (key, value) in lease.get_envs() {
        match value {
            Some(value) => sh.env(key, value),
            None => sh.env_remove(key),
        };
    }
    if let Some(dir) = lease.get_current_dir() {
        sh.current_dir(dir);
    }
    sh.output().expect("run bash")
}

#[test]
fn a_claim_started_with_its_standard_descriptors_closed_writes_only_the_ledger() {
    let repo = TestRepo::new();
    // The exit status goes to a file: no standard descriptor is left to print it on.
    let out = through_shell(
        &repo,
        r#"exec 0<&- 1>&- 2>&-; "$0" "$@"; echo $? > status"#,
        &["acquire", "closed", "--holder", "alice"],
    );
    assert!(out.status.success(), "{out:?}");
    let status = std::fs::read_to_string(repo.path().join("status")).expect("status file");
    assert_eq!(status.trim(), "0");
    assert_eq!(repo.lease_json("closed")["holder"], "alice");
    // The ref holds exactly a commit id, whatever descriptors its files were opened on.
    let tip = repo.tip("closed").expect("the ref exists");
    if !crate::env::skip_under_reftable(
        "a_claim_started_with_its_standard_descriptors_closed_writes_only_the_ledger",
        "the loose ref file's content (git writes the table, with descriptors of its own)",
    ) {
        let raw = std::fs::read_to_string(repo.git_dir().join("refs/leases/closed")).expect("ref");
        assert_eq!(raw, format!("{tip}\n"));
    }
    repo.assert_fsck();
}

#[test]
fn output_cut_short_by_a_closed_pipe_ends_quietly_with_success() {
    let repo = TestRepo::new();
    let issues: Vec<String> = (0..2000).map(|i| format!("pipe{i}")).collect();
    let mut args = vec!["acquire"];
    args.extend(issues.iter().map(String::as_str));
    args.extend(["--holder", "alice"]);
    repo.run_at(T0, &args).ok();
    // 2000 lines are more than a pipe holds, so git-lease writes after `head` has gone.
    let out = through_shell(
        &repo,
        r#"set -o pipefail; "$0" "$@" | head -n 1"#,
        &["list"],
    );
    assert!(
        out.status.success(),
        "exit {:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn show_aligns_its_labels_and_names_a_holder_whose_process_is_gone() {
    let repo = TestRepo::new();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("start sleep");
    let pid = sleeper.id().to_string();
    repo.run_at(
        T0,
        &[
            "acquire", "7", "--holder", "a", "--pid", &pid, "--note", "n",
        ],
    )
    .ok();
    let show = repo.run_at(T0, &["show", "7"]);
    show.ok().stdout_has(&format!("pid {pid}"));
    // Every value starts in the same column.
    let starts: std::collections::BTreeSet<usize> = show
        .stdout
        .lines()
        .map(|l| {
            let colon = l.find(':').expect("a label");
            colon + 1 + l[colon + 1..].len() - l[colon + 1..].trim_start().len()
        })
        .collect();
    assert_eq!(starts.len(), 1, "{show}");
    sleeper.kill().expect("kill sleep");
    sleeper.wait().expect("reap sleep");
    repo.run_at(T0, &["show", "7"])
        .ok()
        .stdout_has("free (holder's process gone)")
        .stdout_has(", gone");
}

#[test]
fn list_mine_shows_only_your_own_leases() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", "me@example.com"]);
    repo.run_at(T0, &["acquire", "1"]).ok();
    repo.run_at(T0, &["acquire", "2", "--holder", "other"]).ok();
    repo.run_at(T0, &["acquire", "3"]).ok();
    let v = repo.json_at(T0, 0, &["list", "--mine"]);
    assert_eq!(issues(&v), ["1", "3"]);
    let v = repo
        .lease()
        .now(T0)
        .env("GIT_LEASE_HOLDER", "other")
        .arg_json()
        .args(["list", "--mine"])
        .run()
        .json();
    assert_eq!(issues(&v), ["2"]);
    repo.run_at(T0, &["list", "--mine", "--holder", "x"])
        .code(2);
}

#[test]
fn colour_follows_gits_convention() {
    let repo = TestRepo::new();
    let painted = |run: &crate::env::Run| run.stdout.contains("\u{1b}[");
    // Not a terminal: no colour by default.
    let run = repo.run_at(T0, &["acquire", "1", "--holder", "a"]);
    assert!(!painted(&run), "{run}");
    let run = repo.run_at(T0, &["--color=always", "check", "1", "--token", "1"]);
    assert!(painted(&run), "{run}");
    assert!(
        run.stdout.contains("\u{1b}[32mok:\u{1b}[m token 1"),
        "{run}"
    );
    let run = repo.run_at(T0, &["acquire", "1", "--holder", "b", "--color=always"]);
    assert!(run.stdout.starts_with("\u{1b}[31mheld:"), "{run}");
    repo.git(&["config", "color.ui", "always"]);
    assert!(painted(&repo.run_at(T0, &["show", "1"])));
    assert!(!painted(&repo.run_at(T0, &["show", "1", "--color=never"])));
    // NO_COLOR wins over color.ui, and --color over NO_COLOR; JSON is never painted.
    let no_color = |args: &[&str]| repo.lease().now(T0).env("NO_COLOR", "1").args(args).run();
    assert!(!painted(&no_color(&["show", "1"])));
    assert!(painted(&no_color(&["show", "1", "--color=always"])));
    assert!(!painted(&no_color(&[
        "--json",
        "show",
        "1",
        "--color=always"
    ])));
}

#[test]
fn a_bad_config_value_is_bad_usage_naming_the_key_and_the_value() {
    for (key, value) in [
        ("lease.lockTimeout", "soon"),
        ("lease.pushAttempts", "0"),
        ("lease.ttl", "0s"),
        ("lease.fsync", "maybe"),
        ("gc.auto", "lots"),
        ("advice.leaseLocal", "perhaps"),
    ] {
        let repo = TestRepo::new();
        repo.git(&["remote", "add", "origin", "/nonexistent"]);
        repo.git(&["config", key, value]);
        let args: &[&str] = if key == "lease.pushAttempts" {
            &["acquire", "1", "--holder", "a", "--remote", "origin"]
        } else {
            &["acquire", "1", "--holder", "a"]
        };
        repo.run_at(T0, args)
            .code(2)
            .stderr_has(key)
            .stderr_has(&format!("{value:?}"));
        assert_eq!(repo.lease_refs(), "", "{key}: nothing written");
    }
}
