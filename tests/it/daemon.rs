//! A real `git daemon` on 127.0.0.1, one per test, serving one bare repository
//! (`<tmp>/leases.git`) with pushes enabled, for remote claims and mirrors.
//!
//! The daemon runs in the hermetic environment of [`crate::env`] (its own `HOME`, no global
//! or system config), in its own process group so that dropping the [`GitDaemon`] ends it and
//! every `upload-pack`/`receive-pack` it started. Readiness is decided by the daemon itself
//! (`--verbose` prints `Ready to rumble` once it listens) and then confirmed with a TCP
//! connection; if it exits instead (another process took the port between our probe and its
//! bind), it is started again on another port.
#![allow(dead_code)]

use std::fs::File;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::env::{self, Run, TestRepo, BIN};

/// How many ports to try before giving up.
const START_ATTEMPTS: usize = 8;
/// How many times to poll for readiness per port, and how long to wait in between.
const READY_POLLS: usize = 400;
const READY_POLL_INTERVAL: Duration = Duration::from_millis(25);

/// A running `git daemon` serving `<tmp>/leases.git`.
pub struct GitDaemon {
    root: PathBuf,
    home: PathBuf,
    bare: PathBuf,
    port: u16,
    log: PathBuf,
    child: Child,
    // Dropped last: the directory goes away after the daemon is stopped.
    _tmp: TempDir,
}

enum Start {
    Ready,
    Exited(String),
    TimedOut,
}

impl GitDaemon {
    /// Creates a bare repository in a fresh temporary directory and serves it on a free port.
    pub fn start() -> GitDaemon {
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-daemon.")
            .tempdir()
            .expect("create a temporary directory");
        let root = tmp
            .path()
            .canonicalize()
            .expect("canonicalize the temporary directory");
        let home = root.join("home");
        std::fs::create_dir(&home).expect("create HOME");
        let bare = root.join("leases.git");
        let init = run_git(
            &home,
            &root,
            &root,
            &["init", "-q", "--bare", path_str(&bare)],
            &[],
            None,
        );
        assert_eq!(init.code, 0, "git init --bare failed\n{init}");

        let mut failures = Vec::new();
        for attempt in 0..START_ATTEMPTS {
            let port = free_port();
            let log = root.join(format!("daemon-{attempt}-{port}.log"));
            let mut child = spawn_daemon(&home, &root, port, &log);
            match wait_ready(&mut child, port, &log) {
                Start::Ready => {
                    return GitDaemon {
                        root,
                        home,
                        bare,
                        port,
                        log,
                        child,
                        _tmp: tmp,
                    }
                }
                Start::Exited(status) => failures.push(format!(
                    "port {port}: the daemon exited ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default().trim()
                )),
                Start::TimedOut => {
                    stop(&mut child);
                    failures.push(format!(
                        "port {port}: not ready in time: {}",
                        std::fs::read_to_string(&log).unwrap_or_default().trim()
                    ));
                }
            }
        }
        panic!("cannot start git daemon:\n{}", failures.join("\n"));
    }

    /// The URL of the served repository, `git://127.0.0.1:PORT/leases.git`.
    pub fn url(&self) -> String {
        format!("git://127.0.0.1:{}/leases.git", self.port)
    }

    /// The bare repository the daemon serves.
    pub fn bare_path(&self) -> &Path {
        &self.bare
    }

    /// The port the daemon listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory holding the bare repository, HOME and the daemon's log.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the daemon logged so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A fresh repository with `origin` set to this daemon and `lease.holder` set to `holder`.
    pub fn clone_for(&self, holder: &str) -> TestRepo {
        let repo = TestRepo::new();
        repo.git(&["remote", "add", "origin", &self.url()]);
        repo.git(&["config", "lease.holder", holder]);
        repo
    }

    /// A fresh repository with only `origin` set to this daemon (a mirror).
    pub fn mirror(&self) -> TestRepo {
        let repo = TestRepo::new();
        repo.git(&["remote", "add", "origin", &self.url()]);
        repo
    }

    /// Plain git in the bare repository, hermetic, with fixed author and committer (dates can
    /// be overridden through `envs`); returns the whole run.
    pub fn git_full(&self, args: &[&str], envs: &[(&str, String)], input: Option<&[u8]>) -> Run {
        let mut all: Vec<(&str, String)> = vec![
            ("GIT_AUTHOR_NAME", "Test".into()),
            ("GIT_AUTHOR_EMAIL", "test@example.com".into()),
            ("GIT_COMMITTER_NAME", "Test".into()),
            ("GIT_COMMITTER_EMAIL", "test@example.com".into()),
            ("GIT_AUTHOR_DATE", "1796040000 +0000".into()),
            ("GIT_COMMITTER_DATE", "1796040000 +0000".into()),
        ];
        all.extend(envs.iter().cloned());
        let mut with_dir = vec!["--git-dir", path_str(&self.bare)];
        with_dir.extend_from_slice(args);
        run_git(&self.home, &self.root, &self.root, &with_dir, &all, input)
    }

    /// Plain git in the bare repository; returns the whole run.
    pub fn git_run(&self, args: &[&str]) -> Run {
        self.git_full(args, &[], None)
    }

    /// Plain git in the bare repository; returns stdout without final newlines, panics if git
    /// fails.
    #[track_caller]
    pub fn git(&self, args: &[&str]) -> String {
        let run = self.git_run(args);
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// The commit the server's `refs/leases/<issue>` points at, if any.
    pub fn tip(&self, issue: &str) -> Option<String> {
        let run = self.git_run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/leases/{issue}^{{commit}}"),
        ]);
        (run.code == 0).then(|| run.stdout.trim().to_owned())
    }

    /// `for-each-ref` of the server's `refs/leases/`.
    pub fn lease_refs(&self) -> String {
        self.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/leases/",
        ])
    }

    /// The server's ledger of `issue` as plain git sees it: `(commit, lease.json)`, oldest
    /// first.
    pub fn chain(&self, issue: &str) -> Vec<(String, Value)> {
        if self.tip(issue).is_none() {
            return Vec::new();
        }
        let list = self.git(&["rev-list", "--reverse", &format!("refs/leases/{issue}")]);
        list.lines()
            .map(|commit| {
                let text = self.git(&["show", &format!("{commit}:lease.json")]);
                let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                    panic!("lease.json of {commit} is not JSON ({e}):\n{text}")
                });
                (commit.to_owned(), value)
            })
            .collect()
    }

    /// Runs the binary under test on the bare repository (`git lease -C <bare> <args>`).
    pub fn lease(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(BIN);
        env::hermetic(&mut cmd, &self.home, &self.root);
        cmd.arg("-C")
            .arg(&self.bare)
            .args(args)
            .current_dir(&self.root);
        output(cmd, format!("git-lease -C <bare> {}", args.join(" ")), None)
    }

    /// Installs `hooks/<name>` in the bare repository as an executable shell script.
    pub fn install_hook(&self, name: &str, body: &str) {
        let dir = self.bare.join("hooks");
        std::fs::create_dir_all(&dir).expect("create hooks/");
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write the hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make the hook executable");
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Starts `git daemon` serving every repository under `root` on 127.0.0.1:`port`, in its own
/// process group, logging to `log`.
fn spawn_daemon(home: &Path, root: &Path, port: u16, log: &Path) -> Child {
    let mut cmd = Command::new("git");
    env::hermetic(&mut cmd, home, root);
    cmd.arg("daemon")
        .arg("--verbose")
        .arg("--reuseaddr")
        .arg("--listen=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", root.display()))
        .arg("--export-all")
        .arg("--enable=receive-pack")
        .arg("--informative-errors")
        .arg(root)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).expect("create the daemon log"))
        .process_group(0);
    cmd.spawn().expect("start git daemon")
}

/// Ends the daemon's whole process group and reaps the daemon.
fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // The group id is the daemon's pid (process_group(0)).
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg("--")
            .arg(format!("-{}", child.id()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.wait();
}

/// Returns a port that was free a moment ago.
fn free_port() -> u16 {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0 to find a free port");
    listener.local_addr().expect("local address").port()
}

/// Waits until the daemon says it listens and the port accepts a connection, or it exits.
fn wait_ready(child: &mut Child, port: u16, log: &Path) -> Start {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    for _ in 0..READY_POLLS {
        if let Ok(Some(status)) = child.try_wait() {
            return Start::Exited(status.to_string());
        }
        let said_ready = std::fs::read_to_string(log)
            .map(|text| text.contains("Ready to rumble"))
            .unwrap_or(false);
        if said_ready && TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Start::Ready;
        }
        std::thread::sleep(READY_POLL_INTERVAL);
    }
    Start::TimedOut
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// Runs plain git hermetically in `cwd`.
fn run_git(
    home: &Path,
    ceiling: &Path,
    cwd: &Path,
    args: &[&str],
    envs: &[(&str, String)],
    input: Option<&[u8]>,
) -> Run {
    let mut cmd = Command::new("git");
    env::hermetic(&mut cmd, home, ceiling);
    cmd.args(args).current_dir(cwd);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    output(cmd, format!("git {}", args.join(" ")), input)
}

/// Runs `cmd` to completion, feeding `input`, and returns what it did.
fn output(mut cmd: Command, command: String, input: Option<&[u8]>) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
    if let Some(bytes) = input {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(bytes).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait for the child");
    Run {
        command,
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn the_daemon_serves_pushes_and_stops_when_dropped() {
    let daemon = GitDaemon::start();
    assert!(daemon.url().starts_with("git://127.0.0.1:"));
    let repo = daemon.clone_for("alice@example.com");
    assert_eq!(repo.git(&["config", "lease.holder"]), "alice@example.com");
    // A push and a fetch through the daemon.
    let blob = repo.git_stdin(&["hash-object", "-w", "--stdin"], b"hello\n");
    let tree = repo.git_stdin(
        &["mktree"],
        format!("100644 blob {blob}\thello\n").as_bytes(),
    );
    let commit = repo.git(&["commit-tree", &tree, "-m", "hello"]);
    repo.git(&["push", "-q", "origin", &format!("{commit}:refs/heads/main")]);
    assert_eq!(daemon.git(&["rev-parse", "refs/heads/main"]), commit);
    let other = daemon.mirror();
    assert!(other
        .git(&["ls-remote", "origin"])
        .contains(&format!("{commit}\trefs/heads/main")));
    // Dropping it closes the port: nothing accepts connections there any more.
    let port = daemon.port();
    drop(daemon);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "port {port} still accepts connections after the daemon was dropped"
    );
}

#[test]
fn two_daemons_get_different_ports() {
    let a = GitDaemon::start();
    let b = GitDaemon::start();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.bare_path(), b.bare_path());
    assert!(a.bare_path().ends_with("leases.git"));
}

#[test]
fn a_daemon_that_cannot_bind_is_noticed_not_mistaken_for_ready() {
    // Hold a port, then start a daemon on it: it must be seen to exit (so start() moves on to
    // another port), even though the port accepts connections (ours).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let home = root.join("home");
    std::fs::create_dir(&home).unwrap();
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let log = root.join("daemon.log");
    let mut child = spawn_daemon(&home, &root, port, &log);
    let verdict = wait_ready(&mut child, port, &log);
    stop(&mut child);
    assert!(
        matches!(verdict, Start::Exited(_)),
        "a daemon that could not bind port {port} was not seen to exit: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}
