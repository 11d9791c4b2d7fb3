//! What plain git sees of a ledger: the stored `lease.json` agrees with the tool, one commit
//! per event in a linear chain, `git fsck --strict` stays clean, holder names are stored
//! verbatim, and git runs the binary as its `lease` subcommand.

use crate::env::{at_min, busy_42, TestRepo, T0};

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
