//! docs/JSON.md is the contract of `--json`: every command's output, run for real, has only
//! the fields its documented shape lists, every documented shape is produced by some command,
//! and every top-level object carries the schema version.
//!
//! And the flag itself: it may stand before or after the subcommand, answers carry the fields
//! their readers rely on (`show`'s `held`, and a holder of null once a lease is over), and no
//! object repeats a key.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::env::{at, at_min, Run, TestRepo, T0};
use crate::server::Server;

/// The shapes of docs/JSON.md: name -> (commands, fields, including those of the shapes it
/// includes).
fn documented_shapes() -> BTreeMap<String, (Vec<String>, BTreeSet<String>)> {
    /// A shape as written: its commands, the shapes it includes, its own fields.
    struct Written {
        commands: Vec<String>,
        includes: Vec<String>,
        fields: BTreeSet<String>,
    }
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/JSON.md"))
        .expect("docs/JSON.md is readable");
    let mut own: BTreeMap<String, Written> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        if let Some(spec) = line
            .strip_prefix("<!-- shape: ")
            .and_then(|l| l.strip_suffix(" -->"))
        {
            let mut parts = spec.split("; ");
            let name = parts.next().expect("a shape name").to_owned();
            let mut commands = Vec::new();
            let mut includes = Vec::new();
            for part in parts {
                if let Some(list) = part.strip_prefix("commands: ") {
                    commands = list.split(' ').map(str::to_owned).collect();
                } else if let Some(list) = part.strip_prefix("includes: ") {
                    includes = list.split(' ').map(str::to_owned).collect();
                }
            }
            own.insert(
                name.clone(),
                Written {
                    commands,
                    includes,
                    fields: BTreeSet::new(),
                },
            );
            current = Some(name);
        } else if line.starts_with("## ") {
            current = None;
        } else if let (Some(name), Some(row)) = (&current, line.strip_prefix("| `")) {
            // The first cell: one or more `field` names.
            let cell = row.split(" |").next().unwrap_or_default();
            let fields = own.get_mut(name).map(|s| &mut s.fields).expect("the shape");
            for field in cell.split(", ") {
                fields.insert(field.trim_matches('`').to_owned());
            }
        }
    }
    own.iter()
        .map(|(name, shape)| {
            let mut all = shape.fields.clone();
            for inc in &shape.includes {
                all.extend(own[inc].fields.iter().cloned());
            }
            (name.clone(), (shape.commands.clone(), all))
        })
        .collect()
}

/// What the commands printed: (shape, the JSON object).
type Seen = Vec<(&'static str, Value)>;

fn objects(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{') || l.starts_with('['))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn record(seen: &mut Seen, shape: &'static str, run: &Run) {
    for v in objects(&run.stdout) {
        match v {
            Value::Array(items) => {
                for item in items {
                    assert!(item.get("schema_version").is_none(), "{item}");
                    seen.push((shape, item));
                }
            }
            object => {
                assert_eq!(object["schema_version"], 1, "{}: {object}", run.command);
                seen.push((shape, object));
            }
        }
    }
}

#[test]
fn every_commands_json_is_the_documented_shape() {
    let shapes = documented_shapes();
    let repo = TestRepo::new();
    let mut seen: Seen = Vec::new();
    let j = |args: &[&str]| repo.lease().now(T0).arg_json().args(args).run();
    let op = |seen: &mut Seen, args: &[&str]| {
        let run = j(args);
        assert!(run.code == 0 || run.code == 3, "{run}");
        record(seen, "operation", &run);
    };
    op(
        &mut seen,
        &[
            "acquire",
            "a",
            "--holder",
            "al",
            "--session",
            "--note",
            "n",
            "--task",
            "t",
        ],
    );
    op(&mut seen, &["acquire", "b", "c", "--holder", "al"]);
    op(&mut seen, &["acquire", "b", "--holder", "bo"]);
    op(&mut seen, &["renew", "b", "--holder", "al"]);
    op(&mut seen, &["release", "b", "--holder", "al"]);
    op(&mut seen, &["release", "b", "--holder", "al"]);
    op(&mut seen, &["complete", "c", "--holder", "al"]);
    op(&mut seen, &["acquire", "d", "--holder", "al"]);
    op(&mut seen, &["abandon", "d", "--holder", "al"]);
    op(
        &mut seen,
        &["revoke", "a", "--reason", "r", "--holder", "ops"],
    );
    op(&mut seen, &["wait", "free-one"]);
    op(&mut seen, &["wait", "w", "--acquire", "--holder", "al"]);
    record(
        &mut seen,
        "any",
        &j(&["acquire", "--any", "a", "free-any", "--holder", "al"]),
    );
    record(
        &mut seen,
        "any",
        &j(&["acquire", "--any", "a", "free-any", "--holder", "zz"]),
    );
    // watch: the history replayed, then ended by a closed pipe once read.
    let mut watched = repo
        .lease()
        .now(T0)
        .arg_json()
        .args(["watch", "--since", "2026-01-01T00:00:00Z"])
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start watch");
    let mut first = String::new();
    let stdout = watched.stdout.take().expect("piped");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first)
        .expect("read a watch event");
    // Its reader is gone: it ends by itself.
    assert_eq!(watched.wait().expect("wait for watch").code(), Some(0));
    for v in objects(&first) {
        assert_eq!(v["schema_version"], 1, "{v}");
        seen.push(("watch", v));
    }
    record(&mut seen, "lease", &j(&["show", "a"]));
    record(&mut seen, "lease", &j(&["list", "--all"]));
    record(&mut seen, "check", &j(&["check", "w", "--token", "1"]));
    record(&mut seen, "check", &j(&["check", "w", "--token", "7"]));
    record(&mut seen, "log", &j(&["log", "a"]));
    record(&mut seen, "timeline", &j(&["timeline"]));
    record(&mut seen, "verify", &j(&["verify"]));
    record(&mut seen, "archive", &j(&["archive", "--dry-run"]));
    record(&mut seen, "gc", &j(&["gc"]));
    let served = TestRepo::bare();
    record(
        &mut seen,
        "install_hook",
        &j(&[
            "install-hook",
            "--repo",
            served.path().to_str().expect("a UTF-8 path"),
        ]),
    );
    record(
        &mut seen,
        "install_hook_client",
        &j(&["install-hook", "--client"]),
    );
    let man = repo.scratch("man");
    record(
        &mut seen,
        "man",
        &j(&["man", "--install", man.to_str().expect("a UTF-8 path")]),
    );

    // Errors: on stderr, stdout empty.
    for args in [
        &["show", "nope"][..],
        &["acquire"],
        &["check", "", "--token", "1"],
    ] {
        let run = j(args);
        assert!(run.stdout.is_empty(), "{run}");
        let errors = objects(&run.stderr);
        assert_eq!(errors.len(), 1, "{run}");
        assert_eq!(errors[0]["error"]["exit_code"], run.code, "{run}");
        seen.push(("error", errors[0].clone()));
    }

    // run: stdout is the child's; the reports are on stderr.
    let run = repo
        .lease()
        .now(T0)
        .arg_json()
        .args(["run", "r", "--holder", "al", "--", "sh", "-c", "echo child"])
        .run();
    assert_eq!(run.stdout, "child\n", "{run}");
    let told = objects(&run.stderr);
    assert_eq!(told.len(), 2, "{run}");
    assert_eq!(told[1]["exit_code"], 0);
    seen.extend(told.into_iter().map(|v| ("run", v)));
    seen.push(("run_lost", lost_report(&repo)));

    // sync and push, through a remote that takes push options.
    let mut server = Server::without_hook();
    server.config("receive.advertisePushOptions", "true");
    server.start();
    let client = server.client("al");
    client
        .run_at(&at(0), &["--remote", "origin", "acquire", "s"])
        .ok();
    client.git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    client.git(&["switch", "-q", "-c", "issue/s"]);
    let push = |seen: &mut Seen| {
        let run = client.lease().now(T0).arg_json().args(["push"]).run();
        assert!(run.code == 0 || run.code == 3, "{run}");
        record(seen, "push", &run);
    };
    push(&mut seen);
    client
        .run_at(&at(0), &["--remote", "origin", "release", "s"])
        .ok();
    push(&mut seen);
    record(
        &mut seen,
        "doctor",
        &client.lease().now(T0).arg_json().args(["doctor"]).run(),
    );
    let mirror = server.mirror();
    record(
        &mut seen,
        "sync",
        &mirror.lease().now(T0).arg_json().args(["sync"]).run(),
    );

    let mut produced = BTreeSet::new();
    let mut undocumented = Vec::new();
    for (shape, value) in &seen {
        produced.insert(*shape);
        let (_, fields) = shapes
            .get(*shape)
            .unwrap_or_else(|| panic!("no shape {shape} in docs/JSON.md"));
        let Value::Object(map) = value else {
            panic!("{shape}: not an object: {value}");
        };
        for key in map.keys() {
            if !fields.contains(key) {
                undocumented.push(format!("{shape}: `{key}` in {value}"));
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "fields missing from docs/JSON.md:\n{}",
        undocumented.join("\n")
    );
    let documented: BTreeSet<&str> = shapes.keys().map(String::as_str).collect();
    let unproduced: Vec<&&str> = documented.difference(&produced).collect();
    assert!(
        unproduced.is_empty(),
        "shapes no command produced: {unproduced:?}"
    );
}

/// Runs a child under `run --json` with a short TTL, revokes its lease once it runs, and
/// returns the last report `run` wrote: the lease was lost.
fn lost_report(repo: &TestRepo) -> Value {
    let marker = repo.scratch("lost").join("child-started");
    let mut child = repo
        .lease()
        .arg_json()
        .args([
            "run", "lost", "--holder", "al", "--ttl", "30s", "--every", "1s", "--grace", "1s",
        ])
        .args([
            "--".to_owned(),
            "sh".to_owned(),
            "-c".to_owned(),
            format!("touch '{}'; sleep 60", marker.display()),
        ])
        .command();
    let child = child
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start run");
    for _ in 0..400 {
        if marker.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(marker.exists(), "the child never started");
    repo.lease()
        .args(["revoke", "lost", "--reason", "test", "--holder", "ops"])
        .run()
        .ok();
    let out = child.wait_with_output().expect("wait for run");
    assert_eq!(out.status.code(), Some(6));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = objects(&stderr).pop().expect("a report");
    assert_eq!(last["outcome"], "lease_lost", "{stderr}");
    last
}

// ---------------------------------------------------------------------------------------------
// The --json flag and the fields of its answers

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
