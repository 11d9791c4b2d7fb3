//! `list` and `log`: which leases are listed, in which order and through which filters, and
//! a ledger's history, newest first.

use serde_json::Value;

use crate::env::{at_min, busy_42, issues, jrun, TestRepo, T0};
use crate::session::{acquire, ALICE, BOB};

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

/// Ids in byte order and in natural order: numbers by value, `issue-2` before `issue-10`.
const SHUFFLED: [&str; 8] = ["12", "issue-10", "1", "2", "11", "issue-2", "10", "9"];
const NATURAL: [&str; 8] = ["1", "2", "9", "10", "11", "12", "issue-2", "issue-10"];

/// The first column of a table's rows, below its header.
fn first_column(run: &crate::env::Run) -> Vec<String> {
    run.ok();
    run.stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn every_listing_shows_ids_in_natural_order() {
    let repo = TestRepo::new();
    // One claim of all of them: one tenure start, so only the ids order them.
    let mut claim = vec!["acquire", "--holder", "alice", "--ttl", "1h"];
    claim.extend(SHUFFLED);
    repo.json_at(T0, 0, &claim);
    let v = repo.json_at(&at_min(1), 0, &["list"]);
    assert_eq!(issues(&v), NATURAL);
    assert_eq!(first_column(&repo.run_at(&at_min(1), &["list"])), NATURAL);
    // Free ones too, in list --all.
    for issue in ["10", "2"] {
        repo.json_at(&at_min(1), 0, &["release", issue, "--holder", "alice"]);
    }
    let v = repo.json_at(&at_min(2), 0, &["list", "--all", "--state", "free"]);
    assert_eq!(issues(&v), ["2", "10"]);
    let v = repo.json_at(&at_min(2), 0, &["list", "--all"]);
    assert_eq!(
        issues(&v),
        ["1", "9", "11", "12", "issue-2", "issue-10", "2", "10"]
    );
    // Through a remote, the same.
    let server = TestRepo::bare();
    let url = format!("file://{}", server.path().display());
    repo.git(&["push", "-q", &url, "refs/leases/*:refs/leases/*"]);
    let other = TestRepo::new();
    let v = other.json_at(&at_min(2), 0, &["list", "--all", "--remote", &url]);
    assert_eq!(
        issues(&v),
        ["1", "9", "11", "12", "issue-2", "issue-10", "2", "10"]
    );
    // An ambiguous prefix names its candidates in that order.
    repo.run_at(&at_min(2), &["show", "issue-"])
        .code(4)
        .stderr_has("issue-2, issue-10");
}

#[test]
fn list_and_log_show_each_claims_task_and_note_within_80_columns() {
    let repo = TestRepo::new();
    let long = "move the parser onto the list cache so that a cold listing reads each ledger once";
    let claim = |issue: &str, extra: &[&str]| {
        let mut args = vec![
            "acquire",
            issue,
            "--holder",
            "alice@example.com",
            "--ttl",
            "15m",
        ];
        args.extend_from_slice(extra);
        repo.json_at(T0, 0, &args);
    };
    claim("1", &[]);
    // Without a task or a note anywhere, no column for them.
    let plain = repo.run_at(&at_min(1), &["list"]);
    plain.ok();
    assert!(plain.stdout.starts_with("ISSUE  HOLDER  "), "{plain}");
    assert!(
        !plain.stdout.contains("NOTE") && !plain.stdout.contains("TASK"),
        "{plain}"
    );

    claim("2", &["--task", "JOB-7", "--note", "flaky test"]);
    claim("3", &["--note", long]);
    let run = repo.run_at(&at_min(1), &["list"]);
    run.ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].ends_with("EXPIRES            TASK   NOTE"),
        "{run}"
    );
    assert!(lines[1].ends_with("  -      -"), "{run}");
    assert!(lines[2].ends_with("  JOB-7  flaky test"), "{run}");
    // A long note is cut where the line reaches 80 columns, the cut marked.
    let (_, shown) = lines[3]
        .rsplit_once("  -      ")
        .expect("no task, then the note");
    let kept = shown.strip_suffix('…').expect("the long note is cut");
    assert!(long.starts_with(kept), "{run}");
    assert_eq!(lines[3].chars().count(), 80, "{run}");
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{run}");
    // show and --json keep it whole.
    repo.run_at(&at_min(1), &["show", "3"])
        .ok()
        .stdout_has(long);

    // log shows them under each event that carries them.
    let log = repo.run_at(&at_min(1), &["log", "2"]);
    log.ok();
    let lines: Vec<&str> = log.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].contains(" acquire "), "{log}");
    assert_eq!(
        lines[1].trim_start(),
        "task: JOB-7  note: flaky test",
        "{log}"
    );
    assert_eq!(
        lines[1].find('t'),
        Some(11),
        "under the event's time\n{log}"
    );
    let log = repo.run_at(&at_min(1), &["log", "1"]);
    assert_eq!(log.stdout.lines().count(), 1, "{log}");
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

#[test]
fn list_filters_combine_over_completed_expired_and_namespaced_leases() {
    let repo = TestRepo::new();
    acquire(&repo, 0, "gh/1", ALICE, "1h").ok();
    acquire(&repo, 0, "gh/2", ALICE, "10m").ok();
    acquire(&repo, 0, "gh/3", BOB, "1h").ok();
    acquire(&repo, 0, "jira/9", ALICE, "1h").ok();
    jrun(&repo, 1, &["complete", "jira/9", "--holder", ALICE]).ok();
    acquire(&repo, 1, "jira/10", BOB, "1h").ok();
    // At +20m: gh/1 held (alice), gh/2 expired (alice), gh/3 held (bob), jira/9 free (was
    // alice), jira/10 held (bob).
    let list = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list"];
        all.extend_from_slice(args);
        let mut got = issues(&repo.json_at(&at_min(20), 0, &all));
        got.sort();
        got
    };
    assert_eq!(list(&[]), ["gh/1", "gh/3", "jira/10"]);
    assert_eq!(
        list(&["--all"]),
        ["gh/1", "gh/2", "gh/3", "jira/10", "jira/9"]
    );
    assert_eq!(list(&["--holder", ALICE]), ["gh/1"]);
    assert_eq!(list(&["--holder", BOB]), ["gh/3", "jira/10"]);
    assert_eq!(
        list(&["--holder", ALICE, "--all"]),
        ["gh/1", "gh/2", "jira/9"]
    );
    assert_eq!(list(&["--state", "held"]), ["gh/1", "gh/3", "jira/10"]);
    assert_eq!(list(&["--state", "expired"]), ["gh/2"]);
    assert_eq!(list(&["--state", "free"]), ["jira/9"]);
    assert_eq!(list(&["gh/"]), ["gh/1", "gh/3"]);
    assert_eq!(list(&["gh/", "--all"]), ["gh/1", "gh/2", "gh/3"]);
    assert_eq!(list(&["jira/", "--state", "free"]), ["jira/9"]);
    assert_eq!(list(&["--holder", BOB, "--state", "held", "gh"]), ["gh/3"]);
    assert_eq!(list(&["--holder", ALICE, "--state", "expired"]), ["gh/2"]);
    assert!(list(&["--holder", "carol@example.com", "--all"]).is_empty());
    assert!(list(&["nothing/"]).is_empty());

    // The human table agrees.
    let human = repo.run_at(&at_min(20), &["list", "--state", "expired"]);
    human.ok();
    let rows: Vec<&str> = human.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{human}");
    assert!(
        rows[0].starts_with("gh/2") && rows[0].contains("expired"),
        "{human}"
    );
    let bad = repo.run_at(&at_min(20), &["list", "--state", "sleeping"]);
    bad.code(2);
}

#[test]
fn packed_ledgers_read_the_same_with_the_delta_base_cache_or_without_it() {
    let repo = TestRepo::new();
    // Forty ledgers of several steps each, packed with deep delta chains, as a server's are.
    for i in 0..40 {
        let issue = format!("p{i}");
        repo.json_at(
            T0,
            0,
            &["acquire", &issue, "--holder", "alice", "--ttl", "1h"],
        );
        repo.json_at(
            &at_min(1),
            0,
            &["renew", &issue, "--holder", "alice", "--ttl", "2h"],
        );
        if i % 2 == 0 {
            repo.json_at(&at_min(2), 0, &["release", &issue, "--holder", "alice"]);
        }
    }
    repo.git(&["repack", "-adf", "--depth=50", "--window=250"]);
    repo.git(&["prune-packed"]);
    let cache = repo.git_dir().join("git-lease").join("list-cache");
    let listed = |limit: Option<&str>| {
        if let Some(limit) = limit {
            repo.git(&["config", "core.deltaBaseCacheLimit", limit]);
        }
        // A cold listing: every tip decoded from the pack.
        let _ = std::fs::remove_file(&cache);
        let all = repo.json_at(&at_min(3), 0, &["list", "--all"]);
        repo.lease().now(&at_min(3)).args(["verify"]).run().ok();
        all
    };
    let default = listed(None);
    assert_eq!(issues(&default).len(), 40, "{default}");
    assert_eq!(listed(Some("0")), default, "without a cache");
    assert_eq!(listed(Some("1")), default, "with a cache of one byte");
    assert_eq!(listed(Some("96m")), default, "with git's default");
}

// ---------------------------------------------------------------------------------------------
// git's commit-graph, which a listing without its cache reads each tip's tree and parent from

/// The listing of every lease at T0+3m, read cold: the list cache removed first.
fn cold_list_all(repo: &TestRepo) -> Value {
    let _ = std::fs::remove_file(repo.git_dir().join("git-lease").join("list-cache"));
    repo.json_at(&at_min(3), 0, &["list", "--all"])
}

/// git's commit-graph file of `repo`.
fn commit_graph(repo: &TestRepo) -> std::path::PathBuf {
    repo.git_dir()
        .join("objects")
        .join("info")
        .join("commit-graph")
}

#[test]
fn gc_writes_the_commit_graph_and_a_cold_listing_reads_the_same_through_it() {
    let repo = TestRepo::new();
    // Ledgers of one, two and three steps: tips with and without a parent.
    for i in 0..12 {
        let issue = format!("g{i}");
        repo.json_at(T0, 0, &["acquire", &issue, "--holder", "alice"]);
        if i % 3 > 0 {
            repo.json_at(&at_min(1), 0, &["renew", &issue, "--holder", "alice"]);
        }
        if i % 3 > 1 {
            repo.json_at(&at_min(2), 0, &["release", &issue, "--holder", "alice"]);
        }
    }
    let objects = cold_list_all(&repo);
    assert!(!commit_graph(&repo).exists());
    repo.json_at(&at_min(3), 0, &["gc"]);
    assert!(commit_graph(&repo).is_file(), "gc wrote no commit-graph");
    repo.git(&["commit-graph", "verify"]);
    assert_eq!(cold_list_all(&repo), objects);
    for i in 0..12 {
        let issue = format!("g{i}");
        assert_eq!(
            repo.json_at(&at_min(3), 0, &["log", &issue])
                .as_array()
                .map(Vec::len),
            Some(i % 3 + 1),
        );
    }
    // Turned off as git's own `git gc` is, gc writes none.
    std::fs::remove_file(commit_graph(&repo)).expect("remove the commit-graph");
    repo.git(&["config", "gc.writeCommitGraph", "false"]);
    repo.json_at(&at_min(3), 0, &["gc"]);
    assert!(!commit_graph(&repo).exists());
}

/// The commit records of a commit-graph file, as [`damage_commit_graph`] hands them over.
struct Records<'a> {
    /// The `CDAT` chunk: one record per commit, in the order of their ids.
    data: &'a mut [u8],
    /// The commit ids, in order (the `OIDL` chunk), in hex.
    ids: Vec<String>,
    hash_len: usize,
}

impl Records<'_> {
    /// The record of commit `id` (hex): its tree's id, its two parent positions, its date.
    fn of(&mut self, id: &str) -> &mut [u8] {
        let at = self
            .ids
            .iter()
            .position(|i| i == id)
            .expect("a commit of the graph");
        let len = self.hash_len + 16;
        &mut self.data[at * len..(at + 1) * len]
    }

    /// Swaps the trees the records of commits `a` and `b` name.
    fn swap_trees(&mut self, a: &str, b: &str) {
        let hash = self.hash_len;
        let tree_of_a = self.of(a)[..hash].to_vec();
        let tree_of_b = self.of(b)[..hash].to_vec();
        self.of(a)[..hash].copy_from_slice(&tree_of_b);
        self.of(b)[..hash].copy_from_slice(&tree_of_a);
    }
}

/// Rewrites `repo`'s commit-graph with `damage` done to its commit records, its trailing
/// checksum made whole again when `reseal`: a graph that is wrong but looks whole.
fn damage_commit_graph(repo: &TestRepo, reseal: bool, damage: impl FnOnce(&mut Records<'_>)) {
    damage_graph_file(&commit_graph(repo), reseal, damage);
}

/// [`damage_commit_graph`] of the commit-graph file at `path`.
fn damage_graph_file(path: &std::path::Path, reseal: bool, damage: impl FnOnce(&mut Records<'_>)) {
    let mut data = std::fs::read(path).expect("read the commit-graph");
    assert_eq!(&data[..4], b"CGPH");
    let (kind, hash_len) = match data[5] {
        1 => (gix::hash::Kind::Sha1, 20),
        2 => (gix::hash::Kind::Sha256, 32),
        other => panic!("unknown hash version {other}"),
    };
    let chunk = |name: &[u8]| {
        (0..usize::from(data[6]))
            .map(|i| &data[8 + 12 * i..8 + 12 * (i + 1)])
            .find(|entry| &entry[..4] == name)
            .map(|entry| {
                let at: [u8; 8] = entry[4..].try_into().expect("eight bytes");
                usize::try_from(u64::from_be_bytes(at)).expect("an offset")
            })
            .expect("the chunk")
    };
    let (ids_at, records_at) = (chunk(b"OIDL"), chunk(b"CDAT"));
    let end = data.len() - hash_len;
    let ids = data[ids_at..records_at]
        .chunks(hash_len)
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    damage(&mut Records {
        data: &mut data[records_at..end],
        ids,
        hash_len,
    });
    if reseal {
        let mut hasher = gix::hash::hasher(kind);
        hasher.update(&data[..end]);
        let sum = hasher.try_finalize().expect("a checksum");
        data[end..].copy_from_slice(sum.as_bytes());
    }
    // git writes the file read-only.
    std::fs::remove_file(path).expect("remove the commit-graph");
    std::fs::write(path, data).expect("write the commit-graph");
}

/// Ledgers `<prefix>0` to `<prefix><count - 1>`, each of one claim at T0, but the first,
/// renewed at T0+1m: its tip's record and its first step's differ only in the expiry.
fn one_step_ledgers_but_the_first(repo: &TestRepo, prefix: &str, count: usize) {
    for i in 0..count {
        let issue = format!("{prefix}{i}");
        repo.json_at(T0, 0, &["acquire", &issue, "--holder", "alice"]);
    }
    let first = format!("{prefix}0");
    repo.json_at(&at_min(1), 0, &["renew", &first, "--holder", "alice"]);
}

#[test]
fn a_damaged_commit_graph_changes_nothing_a_listing_says() {
    let repo = TestRepo::new();
    one_step_ledgers_but_the_first(&repo, "d", 8);
    let objects = cold_list_all(&repo);
    assert_eq!(issues(&objects).len(), 8);
    repo.json_at(&at_min(3), 0, &["gc"]);
    let whole = std::fs::read(commit_graph(&repo)).expect("read the commit-graph");
    let restore = || {
        let path = commit_graph(&repo);
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, &whole).expect("write the commit-graph");
    };
    let tip = |issue: &str| repo.git(&["rev-parse", &format!("refs/leases/{issue}")]);
    let (d0, d0_first) = (tip("d0"), tip("d0~1"));
    let (d1, d2) = (tip("d1"), tip("d2"));
    // Two records' trees swapped: each names a tree of another issue.
    damage_commit_graph(&repo, true, |records| records.swap_trees(&d1, &d2));
    assert_eq!(cold_list_all(&repo), objects, "trees swapped");
    restore();
    // A record's tree that no object has.
    damage_commit_graph(&repo, true, |records| records.of(&d1)[0] ^= 0xff);
    assert_eq!(cold_list_all(&repo), objects, "a tree that is not there");
    restore();
    // A record given a second parent.
    damage_commit_graph(&repo, true, |records| {
        let hash = records.hash_len;
        records.of(&d1)[hash + 4..hash + 8].copy_from_slice(&1u32.to_be_bytes());
    });
    assert_eq!(cold_list_all(&repo), objects, "a parent that is not there");
    restore();
    // A ledger's tip given its first step's tree, the checksum left as it was: the file is
    // not read at all. (Resealed, such a record would be believed, as git believes it.)
    damage_commit_graph(&repo, false, |records| records.swap_trees(&d0, &d0_first));
    assert_eq!(cold_list_all(&repo), objects, "checksum broken");
    restore();
    assert_eq!(cold_list_all(&repo), objects, "whole again");
}

#[test]
fn a_split_commit_graph_is_read_with_each_file_named_by_its_checksum() {
    let repo = TestRepo::new();
    one_step_ledgers_but_the_first(&repo, "s", 6);
    let objects = cold_list_all(&repo);
    // A chain of files, as `git maintenance` and `fetch.writeCommitGraph` leave it.
    repo.git(&["commit-graph", "write", "--reachable", "--split"]);
    let dir = repo
        .git_dir()
        .join("objects")
        .join("info")
        .join("commit-graphs");
    let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).expect("a chain");
    let file = dir.join(format!("graph-{}.graph", chain.trim()));
    assert!(file.is_file() && !commit_graph(&repo).exists());
    assert_eq!(cold_list_all(&repo), objects, "through the chain");
    // The tip of s0 given its first step's tree, the checksum made whole but the file keeping
    // its old name: the chain is not read.
    let tip = |spec: &str| repo.git(&["rev-parse", spec]);
    let (s0, s0_first) = (tip("refs/leases/s0"), tip("refs/leases/s0~1"));
    damage_graph_file(&file, true, |records| records.swap_trees(&s0, &s0_first));
    assert_eq!(
        cold_list_all(&repo),
        objects,
        "a file not named by its checksum"
    );
    repo.git(&["commit-graph", "write", "--reachable"]);
    assert_eq!(cold_list_all(&repo), objects, "rewritten whole");
}

#[test]
fn a_chain_of_commit_graph_files_is_read_only_in_its_own_order() {
    let repo = TestRepo::new();
    one_step_ledgers_but_the_first(&repo, "s", 12);
    repo.git(&["commit-graph", "write", "--reachable", "--split"]);
    // Two claims more, in a second file on top of the first.
    repo.json_at(&at_min(2), 0, &["acquire", "t0", "--holder", "bob"]);
    repo.json_at(&at_min(2), 0, &["renew", "s1", "--holder", "alice"]);
    repo.git(&["commit-graph", "write", "--reachable", "--split"]);
    let chain = repo
        .git_dir()
        .join("objects")
        .join("info")
        .join("commit-graphs")
        .join("commit-graph-chain");
    let layers = std::fs::read_to_string(&chain).expect("a chain");
    assert_eq!(layers.lines().count(), 2, "{layers}");
    let objects = {
        repo.git(&["config", "core.commitGraph", "false"]);
        let listed = cold_list_all(&repo);
        repo.git(&["config", "--unset", "core.commitGraph"]);
        listed
    };
    assert_eq!(issues(&objects).len(), 13);
    assert_eq!(cold_list_all(&repo), objects, "through both files");
    // The files listed the other way round: each still whole and named by its checksum, but
    // not naming the one below it.
    let reversed: Vec<&str> = layers.lines().rev().collect();
    // git writes the file read-only.
    std::fs::remove_file(&chain).expect("remove the chain");
    std::fs::write(&chain, reversed.join("\n") + "\n").expect("write the chain");
    assert_eq!(cold_list_all(&repo), objects, "out of order");
}
