//! The server hook against real pushes: forged and invalid ledger commits, built with plain git
//! plumbing (`hash-object`, `mktree`, `commit-tree`) in a client clone and pushed for real to
//! a bare repository served by `git daemon` with `git lease install-hook`, must each be refused
//! with the rule's name while the server's refs stay as they were; legitimate transitions
//! pushed by the tool itself are accepted; the `update` hook mode refuses too.
//!
//! The server's clock is fixed: every server here is started with `GIT_LEASE_NOW` in its
//! environment, which reaches `receive-pack` and so the hook. [`LeaseServer`] (also used by the
//! fencing and http tests) can be restarted at another instant on the same repository, and can
//! serve it through lighttpd and `git http-backend` with basic auth instead of `git daemon`
//! ([`LeaseServer::http`], configured by `fixtures/lighttpd-git.conf`).
//!
//! Instants are seconds after [`crate::env::T0`], the server's clock unless a test says
//! otherwise; the default `lease.maxClockSkew` is 5 minutes.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::env::{self, at, Run, TestRepo, BIN};

// ---------------------------------------------------------------------------------------------
// A served repository with a fixed clock
// ---------------------------------------------------------------------------------------------

/// How many ports to try before giving up, and how long to wait for each start.
const START_ATTEMPTS: usize = 8;
const READY_POLLS: usize = 400;
const READY_POLL_INTERVAL: Duration = Duration::from_millis(25);

/// The web server configuration of [`LeaseServer::http`], with `@NAME@` placeholders.
const LIGHTTPD_CONF: &str = include_str!("../../fixtures/lighttpd-git.conf");

/// How the repository is served.
enum Transport {
    /// `git daemon`: nobody is authenticated.
    Daemon,
    /// lighttpd running `git http-backend` as CGI, basic auth from a plain user file; each
    /// user's password is `<user>pw`. The backend and hooks see `REMOTE_USER`.
    Http { users: Vec<String> },
}

/// A bare repository (`<tmp>/repos/leases.git`) served on 127.0.0.1 with pushes enabled, by
/// `git daemon` or (see [`LeaseServer::http`]) by lighttpd and `git http-backend`, whose hooks
/// see `GIT_LEASE_NOW` = the instant given to [`LeaseServer::start_at`].
///
/// The server runs hermetically (its own `HOME`, no global or system git config) in its own
/// process group; stopping it (or dropping the `LeaseServer`) ends the group, and with it
/// every `receive-pack` and CGI it started. The repository survives a restart.
pub struct LeaseServer {
    root: PathBuf,
    home: PathBuf,
    bare: PathBuf,
    transport: Transport,
    port: Option<u16>,
    log: PathBuf,
    child: Option<Child>,
    // Dropped last: the directory goes away after the server is stopped.
    _tmp: TempDir,
}

impl LeaseServer {
    /// A bare repository with the hook installed by `git lease install-hook`, to be served by
    /// `git daemon`; not started yet.
    pub fn new() -> LeaseServer {
        let server = LeaseServer::without_hook();
        server.install_hook();
        server
    }

    /// A bare repository with the hook installed, to be served over http by lighttpd and
    /// `git http-backend` with basic auth for `users` (password `<user>pw`); not started yet.
    pub fn http(users: &[&str]) -> LeaseServer {
        let mut server = LeaseServer::without_hook();
        server.transport = Transport::Http {
            users: users.iter().map(|u| (*u).to_owned()).collect(),
        };
        server.config("http.receivepack", "true");
        server.install_hook();
        server
    }

    fn install_hook(&self) {
        let run = self.lease(&["install-hook", "--repo", path_str(&self.bare)]);
        run.ok().stdout_has("installed");
        assert_eq!(
            self.git(&["config", "receive.advertisePushOptions"]),
            "true",
            "install-hook should enable push options"
        );
        let hook = std::fs::read_to_string(self.bare.join("hooks/pre-receive"))
            .expect("install-hook writes hooks/pre-receive");
        assert!(
            hook.contains(BIN) && hook.contains("hook pre-receive"),
            "the installed hook should run this binary's `hook pre-receive`:\n{hook}"
        );
    }

    /// A bare repository without any hook, to be served by `git daemon`; not started yet.
    pub fn without_hook() -> LeaseServer {
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-hook.")
            .tempdir()
            .expect("create a temporary directory");
        let root = tmp
            .path()
            .canonicalize()
            .expect("canonicalize the temporary directory");
        let home = root.join("home");
        std::fs::create_dir(&home).expect("create HOME");
        let bare = root.join("repos").join("leases.git");
        let server = LeaseServer {
            log: root.join("server.log"),
            root,
            home,
            bare,
            transport: Transport::Daemon,
            port: None,
            child: None,
            _tmp: tmp,
        };
        let init = server.git_at(
            &server.root,
            &["init", "-q", "--bare", path_str(&server.bare)],
        );
        init.ok();
        // Sample hooks of the git installation must not interfere.
        for entry in std::fs::read_dir(server.bare.join("hooks")).expect("hooks/") {
            let path = entry.expect("a hooks/ entry").path();
            if path.extension().is_some_and(|e| e == "sample") {
                std::fs::remove_file(path).expect("remove a sample hook");
            }
        }
        server
    }

    /// (Re)starts the server with its clock at `now` (RFC 3339); tries the previous port
    /// first, so that clients keep working, then others (see [`LeaseServer::attach`]).
    pub fn start_at(&mut self, now: &str) {
        self.stop();
        let mut failures = Vec::new();
        for attempt in 0..START_ATTEMPTS {
            let port = match (attempt, self.port) {
                (0, Some(p)) => p,
                _ => free_port(),
            };
            let (mut cmd, log, ready) = match &self.transport {
                Transport::Daemon => self.daemon_command(now, port, attempt),
                Transport::Http { users } => self.lighttpd_command(users, now, port, attempt),
            };
            let mut child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
            match wait_ready(&mut child, port, &ready.0, ready.1) {
                Ok(()) => {
                    self.child = Some(child);
                    self.port = Some(port);
                    self.log = log;
                    return;
                }
                Err(why) => {
                    stop_group(&mut child);
                    failures.push(format!(
                        "port {port}: {why}: {}",
                        std::fs::read_to_string(&ready.0).unwrap_or_default().trim()
                    ));
                }
            }
        }
        panic!("cannot start the server:\n{}", failures.join("\n"));
    }

    /// `git daemon` serving `<root>/repos`; its log; the file and text that say it is ready.
    fn daemon_command(
        &self,
        now: &str,
        port: u16,
        attempt: usize,
    ) -> (Command, PathBuf, (PathBuf, &'static str)) {
        let log = self.root.join(format!("daemon-{attempt}-{port}.log"));
        let mut cmd = Command::new("git");
        env::hermetic(&mut cmd, &self.home, &self.root);
        cmd.env("GIT_LEASE_NOW", now)
            .arg("daemon")
            .arg("--verbose")
            .arg("--reuseaddr")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", self.root.join("repos").display()))
            .arg("--export-all")
            .arg("--enable=receive-pack")
            .arg("--informative-errors")
            .arg(self.root.join("repos"))
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("create the daemon log"))
            .process_group(0);
        (cmd, log.clone(), (log, "Ready to rumble"))
    }

    /// lighttpd with `fixtures/lighttpd-git.conf` filled in; its error log (which says when
    /// it is ready).
    fn lighttpd_command(
        &self,
        users: &[String],
        now: &str,
        port: u16,
        attempt: usize,
    ) -> (Command, PathBuf, (PathBuf, &'static str)) {
        let lighttpd = find_program("lighttpd", &["/usr/sbin", "/usr/local/sbin", "/sbin"])
            .unwrap_or_else(|| {
                panic!(
                    "lighttpd is not installed: the http tests need it \
                     (.ci/run installs it: apt-get install lighttpd)"
                )
            });
        let exec_path = self.git_at(&self.root, &["--exec-path"]);
        exec_path.ok();
        let exec_path = exec_path.stdout.trim();
        assert!(
            Path::new(exec_path).join("git-http-backend").exists(),
            "git http-backend is missing from {exec_path}"
        );
        for dir in ["www", "tmp"] {
            std::fs::create_dir_all(self.root.join(dir)).expect("create a server directory");
        }
        let passwords: String = users.iter().map(|u| format!("{u}:{u}pw\n")).collect();
        std::fs::write(self.root.join("users"), passwords).expect("write the user file");
        let errorlog = self.root.join("lighttpd-error.log");
        // A fresh error log per start: readiness is read from it.
        let _ = std::fs::remove_file(&errorlog);
        let conf = LIGHTTPD_CONF
            .replace("@ROOT@", path_str(&self.root))
            .replace("@PORT@", &port.to_string())
            .replace("@EXEC_PATH@", exec_path)
            .replace("@NOW@", now);
        assert!(!conf.contains('@'), "an unfilled placeholder in:\n{conf}");
        let conf_path = self.root.join("lighttpd.conf");
        std::fs::write(&conf_path, conf).expect("write lighttpd.conf");
        let log = self.root.join(format!("lighttpd-{attempt}-{port}.log"));
        let out = File::create(&log).expect("create the lighttpd log");
        let mut cmd = Command::new(lighttpd);
        env::hermetic(&mut cmd, &self.home, &self.root);
        cmd.arg("-D")
            .arg("-f")
            .arg(&conf_path)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone the lighttpd log"))
            .stderr(out)
            .process_group(0);
        (cmd, errorlog.clone(), (errorlog, "server started"))
    }

    /// Stops the server (and every process it started), if it runs.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop_group(&mut child);
        }
    }

    /// The URL of the served repository (over http: as the first user).
    pub fn url(&self) -> String {
        match &self.transport {
            Transport::Daemon => {
                let port = self.port.expect("the server was started");
                format!("git://127.0.0.1:{port}/leases.git")
            }
            Transport::Http { users } => self.url_as(&users[0]),
        }
    }

    /// The http URL of the served repository with `user`'s credentials.
    pub fn url_as(&self, user: &str) -> String {
        let port = self.port.expect("the server was started");
        format!("http://{user}:{user}pw@127.0.0.1:{port}/leases.git")
    }

    /// The bare repository.
    pub fn bare(&self) -> &Path {
        &self.bare
    }

    /// What the server logged (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A fresh client repository with `origin` at this server (over http: authenticated as
    /// `holder`) and `lease.holder` = `holder`.
    pub fn client(&self, holder: &str) -> TestRepo {
        let repo = TestRepo::new();
        repo.git(&["config", "lease.holder", holder]);
        repo.git(&["remote", "add", "origin", &self.url_for(holder)]);
        repo
    }

    fn url_for(&self, holder: &str) -> String {
        match self.transport {
            Transport::Daemon => self.url(),
            Transport::Http { .. } => self.url_as(holder),
        }
    }

    /// Points `client`'s `origin` at this server again (after a restart on another port).
    pub fn attach(&self, client: &TestRepo) {
        let holder = client.git(&["config", "lease.holder"]);
        client.git(&["remote", "set-url", "origin", &self.url_for(&holder)]);
    }

    fn git_at(&self, cwd: &Path, args: &[&str]) -> Run {
        let mut cmd = Command::new("git");
        env::hermetic(&mut cmd, &self.home, &self.root);
        cmd.args(args).current_dir(cwd);
        output(cmd, format!("git {}", args.join(" ")))
    }

    /// Plain git in the bare repository; the whole run.
    pub fn git_run(&self, args: &[&str]) -> Run {
        self.git_at(&self.bare, args)
    }

    /// Plain git in the bare repository; stdout without final newlines, panics if git fails.
    #[track_caller]
    pub fn git(&self, args: &[&str]) -> String {
        let run = self.git_run(args);
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Sets a config key of the served repository.
    pub fn config(&self, key: &str, value: &str) {
        self.git(&["config", key, value]);
    }

    /// What the server's `refname` points at (`git rev-parse`), if it exists.
    pub fn rev(&self, refname: &str) -> Option<String> {
        let run = self.git_run(&["rev-parse", "--verify", "--quiet", refname]);
        (run.code == 0).then(|| run.stdout.trim().to_owned())
    }

    /// What the server's `refs/leases/<issue>` points at, if it exists.
    pub fn tip(&self, issue: &str) -> Option<String> {
        self.rev(&format!("refs/leases/{issue}"))
    }

    /// Every ref of the server with its value.
    pub fn refs(&self) -> String {
        self.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
    }

    /// The server's ledger of `issue`: `lease.json` of each commit, oldest first.
    pub fn chain(&self, issue: &str) -> Vec<Value> {
        if self.tip(issue).is_none() {
            return Vec::new();
        }
        self.git(&["rev-list", "--reverse", &format!("refs/leases/{issue}")])
            .lines()
            .map(|c| {
                let text = self.git(&["show", &format!("{c}:lease.json")]);
                serde_json::from_str(&text).expect("lease.json on the server is JSON")
            })
            .collect()
    }

    /// Runs the binary under test on the bare repository (`git lease -C <bare> <args>`),
    /// without `GIT_LEASE_NOW`.
    pub fn lease(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(BIN);
        env::hermetic(&mut cmd, &self.home, &self.root);
        cmd.arg("-C")
            .arg(&self.bare)
            .args(args)
            .current_dir(&self.root);
        output(cmd, format!("git-lease -C <bare> {}", args.join(" ")))
    }

    /// Writes `hooks/<name>` of the bare repository as an executable script.
    pub fn write_hook(&self, name: &str, script: &str) {
        let path = self.bare.join("hooks").join(name);
        std::fs::write(&path, script).expect("write the hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make the hook executable");
    }
}

impl Drop for LeaseServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Finds `name` on `PATH`, then in `extra` directories.
fn find_program(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Ends a process group led by `child` and reaps `child`.
pub fn stop_group(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
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

/// A port of 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0 to find a free port")
        .port()
}

/// Waits until the server says in `log` that it is ready (`marker`) and the port accepts a
/// connection; fails if it exits first or takes too long.
fn wait_ready(child: &mut Child, port: u16, log: &Path, marker: &str) -> Result<(), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    for _ in 0..READY_POLLS {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the server exited ({status})"));
        }
        let said_ready = std::fs::read_to_string(log)
            .map(|text| text.contains(marker))
            .unwrap_or(false);
        if said_ready && TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(READY_POLL_INTERVAL);
    }
    Err("not ready in time".into())
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

fn output(mut cmd: Command, command: String) -> Run {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
    Run {
        command,
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Forging ledger commits with plain git plumbing in a client
// ---------------------------------------------------------------------------------------------

/// Writes `bytes` as a blob (`git hash-object -w --stdin`); returns its id.
pub fn blob(repo: &TestRepo, bytes: &[u8]) -> String {
    repo.git_stdin(&["hash-object", "-w", "--stdin"], bytes)
}

/// Writes a tree (`git mktree`) of `(mode, name, object)` entries; returns its id.
pub fn tree(repo: &TestRepo, entries: &[(&str, &str, &str)]) -> String {
    let mut text = String::new();
    for (mode, name, oid) in entries {
        let kind = if *mode == "040000" { "tree" } else { "blob" };
        text += &format!("{mode} {kind} {oid}\t{name}\n");
    }
    repo.git_stdin(&["mktree"], text.as_bytes())
}

/// Writes a commit (`git commit-tree [-p ...]`) of `tree` dated `when` (RFC 3339), with the
/// committer the tool uses.
pub fn commit(repo: &TestRepo, tree: &str, parents: &[&str], when: &str) -> String {
    let secs = chrono::DateTime::parse_from_rfc3339(when)
        .unwrap_or_else(|e| panic!("{when:?} is not RFC 3339: {e}"))
        .timestamp();
    let date = format!("{secs} +0000");
    let mut args = vec!["commit-tree", tree];
    for p in parents {
        args.extend(["-p", p]);
    }
    args.extend(["-m", "forged ledger commit"]);
    let run = repo
        .git_cmd()
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .env("GIT_COMMITTER_NAME", "git-lease")
        .env("GIT_COMMITTER_EMAIL", "git-lease@localhost")
        .args(&args)
        .run();
    run.ok();
    run.stdout.trim().to_owned()
}

/// The bytes the tool stores for `value`: pretty JSON and a final newline.
pub fn lease_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("JSON serializes");
    bytes.push(b'\n');
    bytes
}

fn date_of(value: &Value) -> String {
    value["at"]
        .as_str()
        .filter(|s| chrono::DateTime::parse_from_rfc3339(s).is_ok())
        .unwrap_or(env::T0)
        .to_owned()
}

/// A ledger commit whose tree holds exactly `lease.json` = `value`, on top of `parents`.
pub fn lease_commit(repo: &TestRepo, value: &Value, parents: &[&str]) -> String {
    let b = blob(repo, &lease_bytes(value));
    let t = tree(repo, &[("100644", "lease.json", &b)]);
    commit(repo, &t, parents, &date_of(value))
}

/// A chain of ledger commits on top of `base` (a root if `None`); ids oldest first.
pub fn chain_on(repo: &TestRepo, base: Option<&str>, values: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut parent = base.map(str::to_owned);
    for value in values {
        let parents: Vec<&str> = parent.iter().map(String::as_str).collect();
        let c = lease_commit(repo, value, &parents);
        parent = Some(c.clone());
        out.push(c);
    }
    out
}

/// `lease.json` of an acquire at `at_s` (seconds after T0) lasting `ttl_s` (`None`: never).
pub fn acquired(issue: &str, holder: &str, token: u64, at_s: i64, ttl_s: Option<i64>) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": "acquire",
        "holder": holder,
        "token": token,
        "acquired_at": at(at_s),
        "expires_at": ttl_s.map(|t| at(at_s + t)),
        "at": at(at_s),
    })
}

/// `lease.json` of a renew at `at_s` of the tenure begun at `since_s`, until `at_s + ttl_s`.
pub fn renewed(
    issue: &str,
    holder: &str,
    token: u64,
    since_s: i64,
    at_s: i64,
    ttl_s: i64,
) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": "renew",
        "holder": holder,
        "token": token,
        "acquired_at": at(since_s),
        "expires_at": at(at_s + ttl_s),
        "at": at(at_s),
    })
}

/// `lease.json` of a freeing `event` (release, revoke, ...) of `previous`'s tenure at `at_s`.
pub fn freed(issue: &str, event: &str, previous: &str, token: u64, at_s: i64) -> Value {
    json!({
        "version": 1,
        "issue": issue,
        "event": event,
        "holder": null,
        "token": token,
        "acquired_at": null,
        "expires_at": null,
        "at": at(at_s),
        "previous_holder": previous,
    })
}

/// `value` with `field` set to `to`.
pub fn with(mut value: Value, field: &str, to: Value) -> Value {
    value[field] = to;
    value
}

/// `value` without `field`.
pub fn without(mut value: Value, field: &str) -> Value {
    value.as_object_mut().expect("an object").remove(field);
    value
}

/// Plain `git push origin <refspecs>` from `client` (with `--force` if asked); the whole run.
pub fn push(client: &TestRepo, force: bool, refspecs: &[&str]) -> Run {
    let mut args = vec!["push"];
    if force {
        args.push("--force");
    }
    args.push("origin");
    args.extend_from_slice(refspecs);
    client.git_run(&args)
}

/// Asserts that `run` (a push) was refused by the hook for `issue` at `commit` with `rule`.
#[track_caller]
pub fn assert_refused(run: &Run, issue: &str, commit: &str, rule: &str) {
    if let Err(why) = check_refused(run, issue, commit, rule) {
        panic!("{why}");
    }
}

fn check_refused(run: &Run, issue: &str, commit: &str, rule: &str) -> Result<(), String> {
    let line = format!(
        "remote: git-lease: refused issue {issue} at {}: {rule}: ",
        &commit[..12]
    );
    if run.code == 0 {
        return Err(format!(
            "`{}` was accepted; expected {line:?}\n{run}",
            run.command
        ));
    }
    if !run.stderr.contains(&line) {
        return Err(format!("`{}` should say {line:?}\n{run}", run.command));
    }
    if !run.stderr.contains("hook declined") {
        return Err(format!(
            "`{}` should report `hook declined`\n{run}",
            run.command
        ));
    }
    Ok(())
}

/// Pushes `commits` (oldest first) to `refs/leases/<issue>` one tip at a time, asserting each
/// is accepted and lands.
#[track_caller]
pub fn push_accepted(server: &LeaseServer, client: &TestRepo, issue: &str, commits: &[String]) {
    let Some(tip) = commits.last() else { return };
    let run = push(client, false, &[&format!("{tip}:refs/leases/{issue}")]);
    assert_eq!(run.code, 0, "a legitimate push was refused\n{run}");
    assert_eq!(server.tip(issue).as_deref(), Some(tip.as_str()));
}

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
    let mut server = LeaseServer::new();
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
fn run_case(server: &LeaseServer, client: &TestRepo, case: &Case) -> Result<(), String> {
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
            "not-holder",
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
    let mut server = LeaseServer::new();
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
    let chain = server.chain("42");
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
    let mut server = LeaseServer::new();
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
    let mut server = LeaseServer::new();
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
    let mut server = LeaseServer::without_hook();
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
    let mut server = LeaseServer::new();
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
fn the_servers_clock_rules_hold_at_exact_instants() {
    let mut server = LeaseServer::new();
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
