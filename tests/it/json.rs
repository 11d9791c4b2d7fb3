//! docs/JSON.md is the contract of `--json`: every command's output, run for real, has only
//! the fields its documented shape lists, every documented shape is produced by some command,
//! and every top-level object carries the schema version.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::env::{at, Run, TestRepo, T0};
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
    record(&mut seen, "verify", &j(&["verify"]));
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
