//! One served bare repository per test: [`Server`] serves `<tmp>/repos/leases.git` on a free
//! port of 127.0.0.1 with pushes enabled, by `git daemon` (nobody is authenticated) or by
//! `git http-backend` as CGI with basic auth ([`Server::http`]) behind lighttpd where it is
//! installed (configured by `fixtures/lighttpd-git.conf`), else behind the harness's own front
//! ([`crate::cgi`], also [`Server::http_builtin`]), with the system clock ([`Server::start`])
//! or a fixed one ([`Server::start_at`]: the served repository's `lease.hookNow`, which the
//! hook reads from its own configuration file and no pusher can set), with the `git lease`
//! hook installed ([`Server::with_hook`]) or not, by the git first on the harness's `PATH` or
//! by another ([`Server::served_by`]: `git daemon`, and every git it starts, is then that one).
//!
//! The bare repository is a [`TestRepo`] of [`crate::env`], so the server and every git it runs
//! are hermetic (its own `HOME`, no global or system config). A server process runs in its own
//! process group: stopping it (or dropping the [`Server`]) ends the group, and with it every
//! `upload-pack`, `receive-pack` and CGI it started; the harness's own front stops accepting
//! instead. The repository survives a restart.
//!
//! A server process's readiness is decided by the server itself (its log says so once it
//! listens: `Ready to rumble`, `server started`) and then confirmed with a TCP connection, in
//! bounded polls; if it exits instead (another process took the port between our probe and its
//! bind), it is started again on another port. The harness's own front is ready once it has
//! bound its port, and tries another port if it cannot.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::env::{self, Run, TestRepo, BIN};

/// `git lease <args>` in the client `client` at client time `secs` (seconds after T0), never
/// prompting for credentials.
pub fn lease(client: &TestRepo, secs: i64, args: &[&str]) -> Run {
    client
        .lease()
        .now(&env::at(secs))
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(args)
        .run()
}

/// Plain git in the client `client`, never prompting for credentials.
pub fn git(client: &TestRepo, args: &[&str]) -> Run {
    client
        .git_cmd()
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(args)
        .run()
}

/// How many ports to try before giving up.
const START_ATTEMPTS: usize = 8;
/// How many times to poll for readiness per port, and how long to wait in between.
const READY_POLLS: usize = 400;
const READY_POLL_INTERVAL: Duration = Duration::from_millis(25);

/// What `git daemon --verbose` logs once it listens.
pub const DAEMON_READY: &str = "Ready to rumble";
/// What lighttpd writes to its error log once it listens.
const LIGHTTPD_READY: &str = "server started";

/// The web server configuration of [`Server::http`], with `@NAME@` placeholders.
const LIGHTTPD_CONF: &str = include_str!("../../fixtures/lighttpd-git.conf");

/// How the repository is served.
enum Transport {
    /// `git daemon`: nobody is authenticated.
    Daemon,
    /// `git http-backend` as CGI with basic auth; each user's password is `<user>pw`. The
    /// backend and hooks see `REMOTE_USER`. Served by lighttpd where it is installed (CI
    /// installs it), else, or when `builtin`, by the harness's own front ([`crate::cgi`]), so
    /// the http tests run on a machine with only git and Rust.
    Http { users: Vec<String>, builtin: bool },
}

/// A bare repository (`<tmp>/repos/leases.git`) served on 127.0.0.1; see the module
/// documentation.
pub struct Server {
    repo: TestRepo,
    transport: Transport,
    port: Option<u16>,
    log: PathBuf,
    child: Option<Child>,
    /// The harness's own web front, when it serves instead of a child process.
    front: Option<crate::cgi::Front>,
}

impl Server {
    /// A bare repository without any hook, to be served by `git daemon`; not started yet.
    pub fn without_hook() -> Server {
        Server::without_hook_made_with(&[])
    }

    /// A bare repository made with `git init --bare <extra>` (`--ref-format=files`), without
    /// any hook, to be served by `git daemon`; not started yet.
    pub fn without_hook_made_with(extra: &[&str]) -> Server {
        let repo = served_repository(extra);
        Server {
            log: repo.root().join("server.log"),
            repo,
            transport: Transport::Daemon,
            port: None,
            child: None,
            front: None,
        }
    }

    /// A bare repository with the hook installed by `git lease install-hook`, to be served by
    /// `git daemon`; not started yet.
    pub fn with_hook() -> Server {
        let server = Server::without_hook();
        server.install_lease_hook();
        server
    }

    /// As [`Server::with_hook`], the repository made with `git init --bare <extra>`.
    pub fn with_hook_made_with(extra: &[&str]) -> Server {
        let server = Server::without_hook_made_with(extra);
        server.install_lease_hook();
        server
    }

    /// Serves the repository with the `git` in `dir` (put first on the `PATH` of `git daemon`,
    /// and so of every git it starts and of the hooks they run), and runs plain git and the
    /// binary in the repository with it too; takes effect at the next start.
    pub fn served_by(mut self, dir: &Path) -> Server {
        self.repo.set_path_first(dir);
        self
    }

    /// A bare repository with the hook installed, to be served over http by `git http-backend`
    /// with basic auth for `users` (password `<user>pw`), behind lighttpd where it is installed,
    /// else behind the harness's own front, which is then reported as a stand-in
    /// ([`env::skipped`]); not started yet.
    /// It needs a fixed clock: start it with [`Server::start_at`].
    pub fn http(users: &[&str]) -> Server {
        let server = Server::http_unhooked(users);
        server.install_lease_hook();
        server
    }

    /// As [`Server::http`], without the hook (a test installs it as a document says); not
    /// started yet.
    pub fn http_unhooked(users: &[&str]) -> Server {
        let builtin = match lighttpd() {
            Ok(_) => false,
            Err(why) => {
                env::skipped(
                    env::Skip::StandIn,
                    "",
                    &format!(
                        "{why}: http is served by the harness's own web front (tests/common/cgi.rs)"
                    ),
                );
                true
            }
        };
        Server::http_served(users, builtin)
    }

    /// As [`Server::http`], served by the harness's own web front ([`crate::cgi`]) whatever
    /// is installed.
    pub fn http_builtin(users: &[&str]) -> Server {
        let server = Server::http_served(users, true);
        server.install_lease_hook();
        server
    }

    fn http_served(users: &[&str], builtin: bool) -> Server {
        let mut server = Server::without_hook();
        server.transport = Transport::Http {
            users: users.iter().map(|u| (*u).to_owned()).collect(),
            builtin,
        };
        server.config("http.receivepack", "true");
        server
    }

    /// A bare repository without any hook, served by `git daemon` with the system clock.
    pub fn daemon() -> Server {
        let mut server = Server::without_hook();
        server.start();
        server
    }

    fn install_lease_hook(&self) {
        let run = self.lease(&["install-hook", "--repo", path_str(self.bare())]);
        run.ok().stdout_has("installed");
        assert_eq!(
            self.git(&["config", "receive.advertisePushOptions"]),
            "true",
            "install-hook should enable push options"
        );
        let hook = std::fs::read_to_string(self.bare().join("hooks/pre-receive"))
            .expect("install-hook writes hooks/pre-receive");
        assert!(
            hook.contains(BIN) && hook.contains("hook pre-receive"),
            "the installed hook should run this binary's `hook pre-receive`:\n{hook}"
        );
    }

    /// (Re)starts the server with the system clock; see [`Server::start_at`].
    pub fn start(&mut self) {
        self.launch(None);
    }

    /// (Re)starts the server with its clock at `now` (RFC 3339); tries the previous port
    /// first, so that clients keep working, then others (see [`Server::attach`]).
    pub fn start_at(&mut self, now: &str) {
        self.launch(Some(now));
    }

    fn launch(&mut self, now: Option<&str>) {
        self.stop();
        // The hook's clock is a setting of the served repository, which no pusher can set.
        match now {
            Some(now) => self.config("lease.hookNow", now),
            None => {
                let _ = self.git_run(&["config", "--unset", "lease.hookNow"]);
            }
        }
        let mut failures = Vec::new();
        for attempt in 0..START_ATTEMPTS {
            let port = match (attempt, self.port) {
                (0, Some(p)) => p,
                _ => free_port(),
            };
            let (mut cmd, log, marker) = match &self.transport {
                Transport::Daemon => self.daemon_command(port, attempt),
                Transport::Http {
                    users,
                    builtin: true,
                } => {
                    let log = self.root().join(format!("front-{attempt}-{port}.log"));
                    let repos = self.root().join("repos");
                    match crate::cgi::Front::start(&repos, self.repo.home(), users, port, &log) {
                        Ok(front) => {
                            self.front = Some(front);
                            self.port = Some(port);
                            self.log = log;
                            return;
                        }
                        Err(e) => {
                            failures.push(format!("port {port}: {e}"));
                            continue;
                        }
                    }
                }
                Transport::Http { users, .. } => self.lighttpd_command(users, port, attempt),
            };
            let mut child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
            match wait_ready(&mut child, port, &log, marker) {
                Start::Ready => {
                    self.child = Some(child);
                    self.port = Some(port);
                    self.log = log;
                    return;
                }
                verdict => {
                    stop(&mut child);
                    failures.push(format!(
                        "port {port}: {verdict}: {}",
                        std::fs::read_to_string(&log).unwrap_or_default().trim()
                    ));
                }
            }
        }
        panic!("cannot start the server:\n{}", failures.join("\n"));
    }

    /// `git daemon` serving `<root>/repos`; its log and the text that says it is ready.
    fn daemon_command(&self, port: u16, attempt: usize) -> (Command, PathBuf, &'static str) {
        let log = self.root().join(format!("daemon-{attempt}-{port}.log"));
        let repos = self.root().join("repos");
        let mut cmd = daemon_command(self.repo.home(), self.root(), &repos, port, &log);
        if let Some(dir) = self.repo.first_on_path() {
            // Also where `Command` looks `git` up.
            cmd.env("PATH", env::path_with_first(dir));
        }
        (cmd, log, DAEMON_READY)
    }

    /// lighttpd with `fixtures/lighttpd-git.conf` filled in; its error log (which says when
    /// it is ready) and the text that says so.
    fn lighttpd_command(
        &self,
        users: &[String],
        port: u16,
        attempt: usize,
    ) -> (Command, PathBuf, &'static str) {
        let lighttpd = lighttpd().expect("lighttpd is installed: Server::http checked");
        let root = self.root();
        let exec_path = self.git(&["--exec-path"]);
        assert!(
            Path::new(&exec_path).join("git-http-backend").exists(),
            "git http-backend is missing from {exec_path}"
        );
        for dir in ["www", "tmp"] {
            std::fs::create_dir_all(root.join(dir)).expect("create a server directory");
        }
        let passwords: String = users.iter().map(|u| format!("{u}:{u}pw\n")).collect();
        std::fs::write(root.join("users"), passwords).expect("write the user file");
        let errorlog = root.join("lighttpd-error.log");
        // A fresh error log per start: readiness is read from it.
        let _ = std::fs::remove_file(&errorlog);
        let conf = LIGHTTPD_CONF
            .replace("@ROOT@", path_str(root))
            .replace("@PORT@", &port.to_string())
            .replace("@EXEC_PATH@", &exec_path);
        assert!(!conf.contains('@'), "an unfilled placeholder in:\n{conf}");
        let conf_path = root.join("lighttpd.conf");
        std::fs::write(&conf_path, conf).expect("write lighttpd.conf");
        let log = root.join(format!("lighttpd-{attempt}-{port}.log"));
        let out = File::create(&log).expect("create the lighttpd log");
        let mut cmd = Command::new(lighttpd);
        env::hermetic(&mut cmd, self.repo.home(), root);
        cmd.arg("-D")
            .arg("-f")
            .arg(&conf_path)
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone the lighttpd log"))
            .stderr(out)
            .process_group(0);
        (cmd, errorlog, LIGHTTPD_READY)
    }

    /// Stops the server (and every process it started), if it runs.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
        self.front = None;
    }

    /// The URL of the served repository: `git://127.0.0.1:PORT/leases.git`, or over http
    /// that of the first user.
    pub fn url(&self) -> String {
        match &self.transport {
            Transport::Daemon => format!("git://127.0.0.1:{}/leases.git", self.port()),
            Transport::Http { users, .. } => self.url_as(&users[0]),
        }
    }

    /// The http URL of the served repository with `user`'s credentials.
    pub fn url_as(&self, user: &str) -> String {
        format!(
            "http://{user}:{user}pw@127.0.0.1:{}/leases.git",
            self.port()
        )
    }

    /// The URL `holder` reaches the repository at: over http, authenticated as `holder`.
    fn url_for(&self, holder: &str) -> String {
        match self.transport {
            Transport::Daemon => self.url(),
            Transport::Http { .. } => self.url_as(holder),
        }
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port.expect("the server was started")
    }

    /// The bare repository.
    pub fn bare(&self) -> &Path {
        self.repo.path()
    }

    /// The bare repository as a [`TestRepo`] (plain git in it, forging with
    /// [`crate::forge`]).
    pub fn repo(&self) -> &TestRepo {
        &self.repo
    }

    /// The temporary directory holding the bare repository, HOME and the server's logs.
    pub fn root(&self) -> &Path {
        self.repo.root()
    }

    /// What the server logged so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A fresh client repository with `origin` at this server (over http: authenticated as
    /// `holder`) and `lease.holder` = `holder`.
    pub fn client(&self, holder: &str) -> TestRepo {
        TestRepo::client_of(&self.url_for(holder), holder)
    }

    /// A fresh repository with only `origin` set to this server (a mirror).
    pub fn mirror(&self) -> TestRepo {
        TestRepo::mirror_made_with(&[], &self.url())
    }

    /// Points `client`'s `origin` at this server again (after a restart on another port).
    pub fn attach(&self, client: &TestRepo) {
        let holder = client.git(&["config", "lease.holder"]);
        client.git(&["remote", "set-url", "origin", &self.url_for(&holder)]);
    }

    /// Asserts that `client`'s forced push of its own ledger of `issue` (one written elsewhere
    /// than here) is refused by the hook, and that none of the served lease refs moved.
    #[track_caller]
    pub fn assert_refuses_a_forced_ledger(&self, client: &TestRepo, issue: &str) {
        let before = self.lease_refs();
        let refspec = format!("refs/leases/{issue}:refs/leases/{issue}");
        let push = client.git_run(&["push", "--force", "origin", &refspec]);
        assert_ne!(push.code, 0, "{push}");
        assert!(push.stderr.contains("git-lease: refused"), "{push}");
        assert_eq!(self.lease_refs(), before, "the server's refs did not move");
    }

    /// Plain git in the bare repository; the whole run.
    pub fn git_run(&self, args: &[&str]) -> Run {
        self.repo.git_run(args)
    }

    /// Plain git in the bare repository; stdout without final newlines, panics if git fails.
    #[track_caller]
    pub fn git(&self, args: &[&str]) -> String {
        self.repo.git(args)
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

    /// The commit the server's `refs/leases/<issue>` points at, if any.
    pub fn tip(&self, issue: &str) -> Option<String> {
        self.repo.tip(issue)
    }

    /// `for-each-ref` of the server's `refs/leases/`.
    pub fn lease_refs(&self) -> String {
        self.repo.lease_refs()
    }

    /// Every ref of the server with its value.
    pub fn refs(&self) -> String {
        self.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
    }

    /// The server's ledger of `issue` as plain git sees it: `(commit, lease.json)`, oldest
    /// first.
    pub fn chain(&self, issue: &str) -> Vec<(String, Value)> {
        self.repo.chain(issue)
    }

    /// The server's ledger of `issue`: `lease.json` of each commit, oldest first.
    pub fn leases(&self, issue: &str) -> Vec<Value> {
        self.chain(issue).into_iter().map(|(_, v)| v).collect()
    }

    /// Runs the binary under test on the bare repository (`git lease -C <bare> <args>`),
    /// without `GIT_LEASE_NOW`.
    pub fn lease(&self, args: &[&str]) -> Run {
        self.repo
            .lease()
            .cwd(self.root())
            .args(["-C", path_str(self.bare())])
            .args(args)
            .run()
    }

    /// Writes `hooks/<name>` of the bare repository as an executable script.
    pub fn write_hook(&self, name: &str, script: &str) {
        let dir = self.bare().join("hooks");
        std::fs::create_dir_all(&dir).expect("create hooks/");
        let path = dir.join(name);
        crate::env::write_program(&path, script, 0o755);
    }

    /// Installs `hooks/<name>` of the bare repository as an executable shell script running
    /// `body`.
    pub fn install_hook(&self, name: &str, body: &str) {
        self.write_hook(name, &format!("#!/bin/sh\n{body}\n"));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a start went; see [`wait_ready`].
pub enum Start {
    /// It said it is ready and the port accepts connections.
    Ready,
    /// It exited first (with this status).
    Exited(String),
    /// Neither, in time.
    TimedOut,
}

impl std::fmt::Display for Start {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Start::Ready => f.write_str("ready"),
            Start::Exited(status) => write!(f, "the server exited ({status})"),
            Start::TimedOut => f.write_str("not ready in time"),
        }
    }
}

/// Returns lighttpd's path, if it is installed and not set aside with
/// `GIT_LEASE_TEST_HTTP=builtin` (which runs every http test behind [`crate::cgi`], as on a
/// machine without it); otherwise says which.
fn lighttpd() -> Result<PathBuf, &'static str> {
    if std::env::var("GIT_LEASE_TEST_HTTP").as_deref() == Ok("builtin") {
        return Err("GIT_LEASE_TEST_HTTP=builtin");
    }
    find_program("lighttpd", &["/usr/sbin", "/usr/local/sbin", "/sbin"])
        .ok_or("lighttpd is not installed")
}

/// `git daemon` serving every repository under `base` on 127.0.0.1:`port`, hermetic (`HOME` =
/// `home`, discovery stops at `ceiling`), in its own process group, logging to `log`; not
/// started yet.
pub fn daemon_command(home: &Path, ceiling: &Path, base: &Path, port: u16, log: &Path) -> Command {
    let mut cmd = Command::new("git");
    env::hermetic(&mut cmd, home, ceiling);
    cmd.arg("daemon")
        .arg("--verbose")
        .arg("--reuseaddr")
        .arg("--listen=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", base.display()))
        .arg("--export-all")
        .arg("--enable=receive-pack")
        .arg("--informative-errors")
        .arg(base)
        .current_dir(ceiling)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).expect("create the daemon log"))
        .process_group(0);
    cmd
}

/// Ends the process group led by `child` (started with `process_group(0)`) and reaps `child`.
pub fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // The group id is the leader's pid.
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

/// The bare repository a server serves, `<tmp>/repos/leases.git`, made with `git init --bare
/// <extra>`, without the sample hooks of the git installation (which must not interfere).
pub fn served_repository(extra: &[&str]) -> TestRepo {
    let repo = TestRepo::init_at("repos/leases.git", &[&["--bare"], extra].concat());
    for entry in std::fs::read_dir(repo.path().join("hooks")).expect("hooks/") {
        let path = entry.expect("a hooks/ entry").path();
        if path.extension().is_some_and(|e| e == "sample") {
            std::fs::remove_file(path).expect("remove a sample hook");
        }
    }
    repo
}

/// Waits until the server says in `log` that it is ready (`marker`) and the port accepts a
/// connection, or it exits, or it takes too long.
pub fn wait_ready(child: &mut Child, port: u16, log: &Path, marker: &str) -> Start {
    wait_until_ready(child, port, READY_POLLS, || log_says(log, marker))
}

/// Whether the log at `log` says `marker` yet.
pub fn log_says(log: &Path, marker: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|text| text.contains(marker))
}

/// Waits, in at most `polls` polls [`READY_POLL_INTERVAL`] apart, until `said_ready` (what the
/// server says of itself) and `port` accepts a connection, or `child` exits first. Every
/// server of the harnesses is waited for so.
pub fn wait_until_ready(
    child: &mut Child,
    port: u16,
    polls: usize,
    said_ready: impl Fn() -> bool,
) -> Start {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    for _ in 0..polls {
        if let Ok(Some(status)) = child.try_wait() {
            return Start::Exited(status.to_string());
        }
        if said_ready() && TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Start::Ready;
        }
        std::thread::sleep(READY_POLL_INTERVAL);
    }
    Start::TimedOut
}

/// Asserts that nothing accepts connections on `port` any more (`what` was stopped).
#[track_caller]
pub fn assert_port_closed(port: u16, what: &str) {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "port {port} still accepts connections after {what} was dropped"
    );
}

/// Finds `name` on `PATH`, then in `extra` directories.
fn find_program(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}
