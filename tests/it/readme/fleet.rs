//! The fleet recipe (docs/FLEET.md, "The recipe"), run as written: its worker script, its
//! `./work-on-issue.sh` (the test's work in place of `# ... work, commit ...`) and its server
//! settings, with workers racing through a real server with the hook: `git daemon` (the
//! settings' identity line left out, see [`super::NOT_RUN`]) and http with each worker its
//! own account.
//!
//! Around the recipe the test sets up what a user would: a served repository whose `main`
//! holds one commit, a clone per worker, a tracker (`./open-issues`: every issue until its
//! lease is completed, or abandoned [`GIVE_UP`] times), and a `sleep` on `PATH` that records
//! what the worker asked for and returns at once, so the back-off is checked by what was
//! asked, never by waiting. Each worker's log holds, in order, `claim <issue> <token>` and
//! `done <issue> <code>` around each run of the work, and `sleep <seconds>`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde_json::Value;

use super::{run_block, sh_block_in, SERVER_PATH};
use crate::env::{self, Run, TestRepo};
use crate::server::Server;

/// Where the recipe is.
const FLEET: &str = "docs/FLEET.md";

/// The workers, each in its own clone (and, over http, its own account).
const WORKERS: [&str; 2] = ["worker-1", "worker-2"];
/// The issues whose work succeeds.
const GOOD: [&str; 3] = ["7", "8", "9"];
/// The issue whose work always fails.
const FAILING: &str = "13";
/// How many abandons of an issue the tracker takes before it closes the issue.
const GIVE_UP: usize = 3;
/// How many times a worker may sleep before the test's `sleep` stops it (a bound, never
/// reached by a worker that ends as the recipe says: one that finds nothing free while the
/// other works asks again at once here, as the test's `sleep` returns at once).
const MAX_SLEEPS: usize = 300;

/// The worker: the block of the recipe that runs `git lease run --any`.
pub fn worker_script() -> String {
    sh_block_in(FLEET, "The recipe", "git lease run --any")
}

/// `./work-on-issue.sh`: the block that makes the issue's branch.
pub fn work_script() -> String {
    sh_block_in(FLEET, "The recipe", "git switch")
}

/// The server settings of the fleet.
pub fn server_settings() -> String {
    sh_block_in(FLEET, "The recipe", SERVER_PATH)
}

/// What the test does in place of `# ... work, commit ...`: fail for [`FAILING`], else commit
/// `work/<issue>`.
const WORK: &str = r#"if [ "$GIT_LEASE_ISSUE" = "$FLEET_FAILING" ]; then echo "the work on $GIT_LEASE_ISSUE fails" >&2; exit 1; fi
mkdir -p work && echo "$GIT_LEASE_ISSUE" >"work/$GIT_LEASE_ISSUE" && git add work && git commit -q -m "work on $GIT_LEASE_ISSUE""#;

/// The test's `./work-on-issue.sh`: docs/FLEET.md's (`./readme-work-on-issue.sh`), logged around.
const WORK_WRAPPER: &str = r#"#!/bin/sh
echo "claim $GIT_LEASE_ISSUE $GIT_LEASE_TOKEN" >>"$FLEET_LOG"
sh ./readme-work-on-issue.sh
code=$?
echo "done $GIT_LEASE_ISSUE $code" >>"$FLEET_LOG"
exit $code
"#;

/// The tracker: every issue of `$FLEET_ISSUES` until the server's ledger has its `complete`,
/// or `$FLEET_GIVE_UP` abandons.
const TRACKER: &str = r#"#!/bin/sh
while read -r id; do
  events=$(GIT_CEILING_DIRECTORIES=$FLEET_SERVER_ROOT git lease -C "$FLEET_SERVER" log "$id" --json)
  case $events in *'"event":"complete"'*) continue ;; esac
  abandons=$(printf '%s' "$events" | grep -o '"event":"abandon"' | wc -l)
  [ "$abandons" -ge "$FLEET_GIVE_UP" ] && continue
  echo "$id"
done <"$FLEET_ISSUES"
"#;

/// The test's `sleep`: records what was asked and returns at once; stops its worker after
/// `$FLEET_MAX_SLEEPS`.
const SLEEP: &str = r#"#!/bin/sh
echo "sleep $*" >>"$FLEET_LOG"
if [ "$(grep -c '^sleep' "$FLEET_LOG")" -gt "$FLEET_MAX_SLEEPS" ]; then
  echo "stopped: slept $FLEET_MAX_SLEEPS times" >>"$FLEET_LOG"; kill "$PPID"
fi
"#;

/// How the fleet reaches the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `git daemon`, which authenticates nobody: the token is the fence.
    Daemon,
    /// http with basic auth, each worker its own account (`REMOTE_USER`).
    Http,
}

fn write_script(path: &Path, text: &str) {
    crate::env::write_program(path, text, 0o755);
}

/// The served repository's `main`: one commit with `base`.
fn seed_main(server: &Server) -> String {
    let repo = server.repo();
    let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], b"base\n");
    let tree = repo.git_stdin(
        &["mktree"],
        format!("100644 blob {blob}\tbase\n").as_bytes(),
    );
    let commit = repo.git(&["commit-tree", &tree, "-m", "base"]);
    repo.git(&["update-ref", "refs/heads/main", &commit]);
    repo.git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
    commit
}

/// A worker's clone, set up as the recipe expects: its scripts (excluded from git), its
/// holder name and committer.
struct Worker {
    name: &'static str,
    dir: PathBuf,
    log: PathBuf,
    /// Its HOME, and where repository discovery stops.
    home: PathBuf,
    root: PathBuf,
}

/// The events of `issue` on the server, oldest first.
fn events(server: &Server, issue: &str) -> Vec<String> {
    server
        .leases(issue)
        .iter()
        .map(|v| v["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Checks one worker's log: a failed run of the work is followed by a sleep before anything
/// else; every sleep is twice the one before (or as long, at the cap), and the first after a
/// success is as long as the worker's first.
fn check_backoff(worker: &Worker, log: &str) {
    let mut first: Option<u64> = None;
    let mut last: Option<u64> = None;
    let mut failed = false;
    for (n, line) in log.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = format!("{} line {}: {line}\n{log}", worker.name, n + 1);
        match words.as_slice() {
            ["sleep", secs] => {
                let secs: u64 = secs.parse().unwrap_or_else(|_| panic!("{at}"));
                match (first, last) {
                    (None, _) => first = Some(secs),
                    (Some(base), None) => assert_eq!(secs, base, "a reset pause: {at}"),
                    // Twice the last, or less where that passes the cap (and the cap
                    // after).
                    (Some(base), Some(prev)) => assert!(
                        secs == 2 * prev || (secs > base && (prev..2 * prev).contains(&secs)),
                        "the pause doubles, up to its cap: {at}"
                    ),
                }
                last = Some(secs);
                failed = false;
            }
            ["claim", ..] => assert!(!failed, "claimed again without a pause: {at}"),
            ["done", _, code] => {
                failed = *code != "0";
                if !failed {
                    last = None;
                }
            }
            _ => panic!("an unexpected line: {at}"),
        }
    }
}

fn run_fleet(via: Via) {
    let mut server = match via {
        Via::Daemon => Server::with_hook(),
        Via::Http => Server::http(&WORKERS),
    };
    run_block(
        &server_settings(),
        server.root(),
        server.repo().home(),
        server.root(),
        None,
        Some(server.bare()),
        via == Via::Daemon,
    );
    let main = seed_main(&server);
    server.start();

    let space = TestRepo::new();
    let root = space.root().to_owned();
    let bin = space.scratch("fleet-bin");
    write_script(&bin.join("sleep"), SLEEP);
    let issues = root.join("issues");
    let all: Vec<&str> = GOOD.iter().copied().chain([FAILING]).collect();
    std::fs::write(&issues, all.join("\n") + "\n").expect("write the issues");
    let readme_work = work_script().replace("# ... work, commit ...", WORK);
    assert_ne!(
        readme_work,
        work_script(),
        "the work script has its placeholder"
    );

    let workers: Vec<Worker> = WORKERS
        .iter()
        .map(|name| {
            let url = match via {
                Via::Daemon => server.url(),
                Via::Http => server.url_as(name),
            };
            space.git_in(&root, &["clone", "-q", &url, name]);
            let dir = root.join(name);
            let git = |args: &[&str]| space.git_in(&dir, args);
            git(&["config", "lease.holder", name]);
            git(&["config", "user.name", name]);
            git(&["config", "user.email", &format!("{name}@example.com")]);
            write_script(&dir.join("worker"), &worker_script());
            write_script(&dir.join("open-issues"), TRACKER);
            write_script(&dir.join("work-on-issue.sh"), WORK_WRAPPER);
            write_script(&dir.join("readme-work-on-issue.sh"), &readme_work);
            std::fs::write(
                dir.join(".git/info/exclude"),
                "/worker\n/open-issues\n/work-on-issue.sh\n/readme-work-on-issue.sh\n",
            )
            .expect("exclude the scripts");
            Worker {
                name,
                log: root.join(format!("{name}.log")),
                dir,
                home: space.home().to_owned(),
                root: root.clone(),
            }
        })
        .collect();

    // Every worker at once, each until its tracker lists nothing.
    let (done, results) = mpsc::channel();
    for worker in &workers {
        let mut cmd = std::process::Command::new("sh");
        env::hermetic(&mut cmd, space.home(), &root);
        cmd.arg("./worker")
            .current_dir(&worker.dir)
            .env("PATH", super::path_with_binary(&[&bin]))
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("FLEET_LOG", &worker.log)
            .env("FLEET_ISSUES", &issues)
            .env("FLEET_SERVER", server.bare())
            .env("FLEET_SERVER_ROOT", server.root())
            .env("FLEET_GIVE_UP", GIVE_UP.to_string())
            .env("FLEET_FAILING", FAILING)
            .env("FLEET_MAX_SLEEPS", MAX_SLEEPS.to_string());
        let done = done.clone();
        let name = worker.name;
        std::thread::spawn(move || {
            let _ = done.send((name, Run::capture(cmd, format!("{name}: sh ./worker"))));
        });
    }
    drop(done);
    let mut runs = Vec::new();
    for _ in &workers {
        let (name, run) = results
            .recv_timeout(env::BOUND * 8)
            .expect("every worker ends once nothing is open");
        runs.push((name, run));
    }
    let logs: Vec<(String, String)> = workers
        .iter()
        .map(|w| {
            (
                w.name.to_owned(),
                std::fs::read_to_string(&w.log).unwrap_or_default(),
            )
        })
        .collect();
    let story = format!("{logs:#?}\n{}", server.log());
    for (name, run) in &runs {
        assert_eq!(
            run.code, 0,
            "{name} ends once nothing is open\n{run}\n{story}"
        );
    }

    // Every issue's branch on the server holds its own commit on top of main, and nothing else.
    for issue in GOOD {
        let branch = format!("refs/heads/issue/{issue}");
        assert!(
            server.rev(&branch).is_some(),
            "{branch} was pushed\n{story}"
        );
        assert_eq!(
            server.git(&["rev-list", "--count", &format!("{main}..{branch}")]),
            "1",
            "{branch} is one commit on main\n{story}"
        );
        assert_eq!(server.git(&["rev-parse", &format!("{branch}^")]), main);
        assert_eq!(
            server.git(&["diff", "--name-only", &main, &branch]),
            format!("work/{issue}"),
            "{branch} holds only its own work\n{story}"
        );
        let events = events(&server, issue);
        assert_eq!(
            events.iter().filter(|e| *e == "complete").count(),
            1,
            "{issue} was completed once: {events:?}\n{story}"
        );
    }

    // The failing issue: abandoned, never pushed, and given up by the tracker after GIVE_UP
    // (one more per other worker that listed it just before).
    let failing = events(&server, FAILING);
    let abandons = failing.iter().filter(|e| *e == "abandon").count();
    assert!(
        (GIVE_UP..GIVE_UP + WORKERS.len()).contains(&abandons)
            && failing.iter().all(|e| e == "acquire" || e == "abandon"),
        "{FAILING}: {failing:?}\n{story}"
    );
    assert_eq!(
        server.leases(FAILING).last().map(|v| v["token"].clone()),
        Some(Value::from(abandons)),
        "one tenure per claim"
    );
    assert_eq!(server.rev(&format!("refs/heads/issue/{FAILING}")), None);
    let claims = logs
        .iter()
        .map(|(_, log)| log.matches(&format!("claim {FAILING} ")).count())
        .sum::<usize>();
    assert_eq!(claims, abandons, "{story}");

    // Each worker backed off after every failure, and after finding nothing free.
    for (worker, (_, log)) in workers.iter().zip(&logs) {
        check_backoff(worker, log);
    }

    stale_pushes_are_refused(&server, &workers, via);
}

/// After the fleet: the worker that completed issue 7 is stale once the other holds it again;
/// its pushes to `issue/7` are refused, `git lease push` and plain `git push` alike (and, with
/// identity, even one carrying the live token; without, that one lands, as docs/FLEET.md says).
fn stale_pushes_are_refused(server: &Server, workers: &[Worker], via: Via) {
    let issue = GOOD[0];
    let branch = format!("refs/heads/issue/{issue}");
    let ledger = server.leases(issue);
    let done_by = ledger[0]["holder"].as_str().expect("a holder").to_owned();
    let stale = workers
        .iter()
        .find(|w| w.name == done_by)
        .expect("a worker");
    let next = workers.iter().find(|w| w.name != done_by).expect("another");
    let lease = |w: &Worker, args: &[&str]| {
        let mut cmd = std::process::Command::new(env::BIN);
        env::hermetic(&mut cmd, &w.home, &w.root);
        cmd.args(args)
            .current_dir(&w.dir)
            .env("GIT_TERMINAL_PROMPT", "0");
        Run::capture(cmd, format!("{}: git lease {}", w.name, args.join(" ")))
    };
    let git = |w: &Worker, args: &[&str]| {
        let mut cmd = std::process::Command::new("git");
        env::hermetic(&mut cmd, &w.home, &w.root);
        cmd.args(args)
            .current_dir(&w.dir)
            .env("GIT_TERMINAL_PROMPT", "0");
        Run::capture(cmd, format!("{}: git {}", w.name, args.join(" ")))
    };
    let acquired = lease(next, &["--json", "acquire", issue]);
    acquired.ok();
    let live = acquired.json()["token"].clone();
    let before = server.rev(&branch);
    git(stale, &["fetch", "-q", "origin"]).ok();
    git(
        stale,
        &[
            "switch",
            "-q",
            "--discard-changes",
            "-C",
            &format!("issue/{issue}"),
            &format!("origin/issue/{issue}"),
        ],
    )
    .ok();
    git(
        stale,
        &["commit", "-q", "--allow-empty", "-m", "stale work"],
    )
    .ok();
    lease(stale, &["push", "origin"]).code(3);
    git(stale, &["push", "origin", &format!("issue/{issue}")])
        .code(1)
        .stderr_has("git-lease: refused");
    assert_eq!(server.rev(&branch), before, "no stale push landed");
    let forged = git(
        stale,
        &[
            "push",
            "-o",
            &format!("lease-token={live}"),
            "origin",
            &format!("issue/{issue}"),
        ],
    );
    match via {
        Via::Http => {
            forged.code(1).stderr_has("git-lease: refused");
            assert_eq!(server.rev(&branch), before, "not even with the live token");
        }
        Via::Daemon => {
            forged.ok();
        }
    }
}

#[test]
fn the_readme_fleet_recipe_through_git_daemon_fences_stale_workers_by_token() {
    run_fleet(Via::Daemon);
}

#[test]
fn the_readme_fleet_recipe_over_http_fences_stale_workers_by_token_and_account() {
    run_fleet(Via::Http);
}
