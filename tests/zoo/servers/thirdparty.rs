//! Third-party git servers as the engine: servers this project did not write, each serving one
//! bare repository on a free port of 127.0.0.1, started per test and stopped when dropped.
//!
//! ```ignore
//! use crate::servers::thirdparty::{Engine, ThirdParty};
//!
//! let Some(server) = ThirdParty::start(Engine::DulwichHttp) else {
//!     return; // not installed here: `SKIPPED: …` was said on stderr (a failure with CI=true)
//! };
//! let alice = server.client("alice");          // a fresh client, `origin` = server.url()
//! lease(&alice, 0, &["acquire", "7", "--remote", "origin"]).ok();
//! assert!(server.ls_remote().contains("refs/leases/7"));
//! assert_eq!(server.tip("7"), alice.tip("7")); // read in the served repository itself
//! ```
//!
//! - [`Engine`]: which server. [`Engine::JGitDaemon`] is `jgit daemon` (Debian's `jgit-cli`,
//!   JGit 4.11, the engine under Gerrit); [`Engine::DulwichDaemon`] and [`Engine::DulwichHttp`]
//!   are dulwich's git:// daemon (`python -m dulwich.server`) and its HTTP server (`python -m
//!   dulwich.web`), version [`DULWICH`]; [`Engine::DulwichDaemonWithoutAtomic`] is the git://
//!   daemon of dulwich [`DULWICH_WITHOUT_ATOMIC`], the last release whose receive-pack does not
//!   advertise the `atomic` capability. What each one does with a push is told by
//!   [`Engine::atomic`], [`Engine::honours_old_value`] and [`Engine::runs_hooks`].
//! - [`ThirdParty::start`] sets up `<tmp>/repos/leases.git` (bare, no hooks, files refs even in
//!   the reftable run: neither JGit 4.11 nor dulwich reads git's reftable) and starts the
//!   server; `None` when the server is not installed here, after saying `SKIPPED: …` on
//!   stderr, and a panic instead with `CI=true` (see [`super::unavailable`]).
//! - [`ThirdParty::url`]: what clients push to; [`ThirdParty::client`]: a fresh client
//!   repository (a [`TestRepo`], reftable in the reftable run) with `origin` at that URL and
//!   `lease.holder` set.
//! - What the server holds: [`ThirdParty::ls_remote`] (what it advertises, as any client sees
//!   it), [`ThirdParty::tip`] and [`ThirdParty::chain`] (plain git in the served repository),
//!   [`ThirdParty::repo`] for anything else; [`ThirdParty::log`] for failure messages.
//! - [`ThirdParty::stale_update`]: one ref update sent straight to the server's receive-pack
//!   with an old value of the caller's choosing, which git itself never sends (it refuses a
//!   stale lease before it connects): what the server reports of a compare-and-swap it should
//!   refuse (`ok <ref>`, or `ng <ref> <why>`).
//!
//! Where the servers come from: `.ci/run` installs `jgit-cli` from Debian's packages and each
//! dulwich version into a virtual environment of its own, `<tools>/dulwich-<version>`, where
//! `<tools>` is `$GIT_LEASE_TEST_TOOLS`, by default [`DEFAULT_TOOLS`]. Debian's `jgit` script
//! leaves jars out of its class path that `jgit daemon` needs; the harness adds them
//! (`JGIT_CLASSPATH`).
//!
//! A server is ready once its log says it listens and the port accepts a connection (in
//! bounded polls); one that exits first (the port was taken between our probe and its bind)
//! is started again on another port. Each runs in its own process group, ended on drop.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::env::{self, TestRepo};
use crate::server::{free_port, log_says, served_repository, stop, wait_until_ready, Start};

/// The dulwich release the git:// daemon and the HTTP server run (pinned in `.ci/run`).
pub const DULWICH: &str = "1.2.21";
/// The last dulwich release whose receive-pack lacks the `atomic` capability (1.2.0 added it).
pub const DULWICH_WITHOUT_ATOMIC: &str = "1.1.0";
/// Where `.ci/run` puts the dulwich environments unless `GIT_LEASE_TEST_TOOLS` says otherwise.
pub const DEFAULT_TOOLS: &str = "/opt/git-lease-test";

/// The jars of Debian's `/usr/share/java` that `jgit daemon` loads and the `jgit` script
/// leaves out (JGit's LFS and http support, their libraries).
const JGIT_JARS: [&str; 8] = [
    "org.eclipse.jgit.lfs.jar",
    "org.eclipse.jgit.http.apache.jar",
    "httpclient.jar",
    "httpcore.jar",
    "gson.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
    "jsch.jar",
];

/// How many ports to try, and how long to wait for one server to listen (in polls of 25 ms:
/// a JVM on a busy machine takes its time).
const START_ATTEMPTS: usize = 6;
const READY_POLLS: usize = 2400;

/// A third-party server; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `jgit daemon`: git://, JGit's receive-pack (Gerrit's engine).
    JGitDaemon,
    /// dulwich's git:// daemon ([`DULWICH`]).
    DulwichDaemon,
    /// dulwich's HTTP server ([`DULWICH`]), smart http at `http://127.0.0.1:PORT/`.
    DulwichHttp,
    /// dulwich's git:// daemon of [`DULWICH_WITHOUT_ATOMIC`]: no `atomic` capability.
    DulwichDaemonWithoutAtomic,
}

impl Engine {
    /// Every engine, for tests that run through each.
    pub const ALL: [Engine; 4] = [
        Engine::JGitDaemon,
        Engine::DulwichDaemon,
        Engine::DulwichHttp,
        Engine::DulwichDaemonWithoutAtomic,
    ];

    /// Whether its receive-pack advertises `atomic` (all-or-none pushes of several refs).
    pub fn atomic(self) -> bool {
        self != Engine::DulwichDaemonWithoutAtomic
    }

    /// Whether a push whose expected old value is no longer the ref's is refused (the
    /// compare-and-swap holds). dulwich's receive-pack reports such an update "ok" without
    /// writing it; its git:// daemon serves one connection at a time, advertisement and
    /// update in one, so nothing moves in between there; over http they are two requests.
    pub fn honours_old_value(self) -> bool {
        self != Engine::DulwichHttp
    }

    /// Whether it reports `ok` for an update whose old value is not the ref's (and leaves the
    /// ref as it is): dulwich's receive-pack does, over either transport
    /// ([`ThirdParty::stale_update`]).
    pub fn reports_stale_updates_ok(self) -> bool {
        self != Engine::JGitDaemon
    }

    /// Whether the served repository's hooks run on a push (JGit's daemon runs none).
    pub fn runs_hooks(self) -> bool {
        self != Engine::JGitDaemon
    }

    /// The dulwich release it runs, if it is dulwich.
    fn dulwich(self) -> Option<&'static str> {
        match self {
            Engine::JGitDaemon => None,
            Engine::DulwichDaemon | Engine::DulwichHttp => Some(DULWICH),
            Engine::DulwichDaemonWithoutAtomic => Some(DULWICH_WITHOUT_ATOMIC),
        }
    }
}

/// A bare repository served by an [`Engine`]; see the module documentation.
pub struct ThirdParty {
    engine: Engine,
    repo: TestRepo,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl ThirdParty {
    /// Sets up the served repository and starts `engine` on it; `None` (after `SKIPPED: …` on
    /// stderr; a panic with `CI=true`) if `engine` is not installed here.
    pub fn start(engine: Engine) -> Option<ThirdParty> {
        let program = match program(engine) {
            Ok(program) => program,
            Err(why) => return super::unavailable(engine, &why),
        };
        let format: &[&str] = if env::reftable() {
            &["--ref-format=files"]
        } else {
            &[]
        };
        let repo = served_repository(format);
        let mut server = ThirdParty {
            engine,
            log: repo.root().join("server.log"),
            repo,
            port: 0,
            child: None,
        };
        server.launch(&program);
        Some(server)
    }

    fn launch(&mut self, program: &Path) {
        let mut failures = Vec::new();
        for attempt in 0..START_ATTEMPTS {
            let port = free_port();
            let log = self.root().join(format!("server-{attempt}-{port}.log"));
            let mut cmd = self.command(program, port);
            let out = File::create(&log).expect("create the server log");
            cmd.current_dir(self.root())
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("clone the log handle"))
                .stderr(out)
                .process_group(0);
            let mut child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
            match wait_listening(&mut child, port, &log) {
                Ok(()) => {
                    self.child = Some(child);
                    self.port = port;
                    self.log = log;
                    return;
                }
                Err(why) => {
                    stop(&mut child);
                    failures.push(format!(
                        "port {port}: {why}: {}",
                        std::fs::read_to_string(&log).unwrap_or_default().trim()
                    ));
                }
            }
        }
        panic!("cannot start {:?}:\n{}", self.engine, failures.join("\n"));
    }

    /// The server's command line for `port`, hermetic like every process of the suite.
    fn command(&self, program: &Path, port: u16) -> Command {
        let mut cmd = Command::new(program);
        env::hermetic(&mut cmd, self.repo.home(), self.root());
        let port = port.to_string();
        let repos = self.root().join("repos");
        match self.engine {
            Engine::JGitDaemon => {
                cmd.env("JGIT_CLASSPATH", jgit_classpath())
                    .args(["daemon", "--listen", "127.0.0.1", "--port", &port])
                    .args(["--enable", "receive-pack", "--export-all"])
                    .arg(&repos);
            }
            Engine::DulwichDaemon | Engine::DulwichDaemonWithoutAtomic => {
                // It serves the paths below its root, as the URL names them: absolute.
                cmd.args(["-m", "dulwich.server", "-l", "127.0.0.1", "-p", &port])
                    .arg(&repos);
            }
            Engine::DulwichHttp => {
                cmd.args(["-m", "dulwich.web", "-l", "127.0.0.1", "-p", &port])
                    .arg(self.bare());
            }
        }
        cmd
    }

    /// Which server this is.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The URL clients push to.
    pub fn url(&self) -> String {
        let port = self.port;
        match self.engine {
            Engine::JGitDaemon => format!("git://127.0.0.1:{port}/leases.git"),
            Engine::DulwichDaemon | Engine::DulwichDaemonWithoutAtomic => {
                format!("git://127.0.0.1:{port}{}", self.bare().display())
            }
            Engine::DulwichHttp => format!("http://127.0.0.1:{port}/"),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A fresh client repository with `origin` at [`ThirdParty::url`] and `lease.holder` =
    /// `holder`.
    pub fn client(&self, holder: &str) -> TestRepo {
        TestRepo::client_of(&self.url(), holder)
    }

    /// `git ls-remote <url> refs/leases/*`: the lease refs the server advertises, one
    /// `<commit>\t<ref>` a line.
    pub fn ls_remote(&self) -> String {
        self.repo.git(&["ls-remote", &self.url(), "refs/leases/*"])
    }

    /// The served bare repository.
    pub fn bare(&self) -> &Path {
        self.repo.path()
    }

    /// The served bare repository as a [`TestRepo`] (plain git in it).
    pub fn repo(&self) -> &TestRepo {
        &self.repo
    }

    /// The temporary directory of the repository, its `HOME` and the server's logs.
    pub fn root(&self) -> &Path {
        self.repo.root()
    }

    /// The served repository's `refs/leases/<issue>`, if it exists.
    pub fn tip(&self, issue: &str) -> Option<String> {
        self.repo.tip(issue)
    }

    /// The served ledger of `issue`: `(commit, lease.json)`, oldest first.
    pub fn chain(&self, issue: &str) -> Vec<(String, Value)> {
        if self.tip(issue).is_none() {
            return Vec::new();
        }
        self.repo.chain(issue)
    }

    /// What the server logged so far, for failure messages.
    pub fn log(&self) -> String {
        format!(
            "--- {:?} log {}\n{}",
            self.engine,
            self.log.display(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }

    /// Sends `<old> <new> <refname>` to the server's receive-pack as one request, with an empty
    /// pack (`new` must be in the served repository already), and returns its report-status
    /// lines: `unpack ok`, then `ok <refname>` or `ng <refname> <why>`. git's client never
    /// sends an old value other than the one the server advertised, so this is how a test
    /// sees what the server does with a stale one.
    pub fn stale_update(&self, refname: &str, old: &str, new: &str) -> Vec<String> {
        let mut body = pkt(&format!("{old} {new} {refname}\0report-status\n"));
        body.extend_from_slice(b"0000");
        body.extend_from_slice(&EMPTY_PACK);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect(addr).expect("connect to the server");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("a read timeout");
        let mut answer = Vec::new();
        match self.engine {
            Engine::DulwichHttp => {
                let head = format!(
                    "POST /git-receive-pack HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\
                     Content-Type: application/x-git-receive-pack-request\r\n\
                     Accept: application/x-git-receive-pack-result\r\n\
                     Content-Length: {}\r\n\r\n",
                    self.port,
                    body.len()
                );
                stream.write_all(head.as_bytes()).expect("send the request");
                stream.write_all(&body).expect("send the request");
                stream.read_to_end(&mut answer).expect("read the answer");
                let at = answer
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}\n{}", self.log()));
                answer.drain(..at + 4);
            }
            _ => {
                let path = match self.engine {
                    Engine::JGitDaemon => "/leases.git".to_owned(),
                    _ => self.bare().display().to_string(),
                };
                let request = format!("git-receive-pack {path}\0host=127.0.0.1:{}\0", self.port);
                stream.write_all(&pkt(&request)).expect("send the request");
                // The advertisement, up to its flush.
                while read_pkt(&mut stream).is_some() {}
                stream.write_all(&body).expect("send the update");
                while let Some(line) = read_pkt(&mut stream) {
                    answer.extend_from_slice(&pkt(&line));
                }
            }
        }
        let mut lines = Vec::new();
        let mut rest = answer.as_slice();
        while rest.len() >= 4 {
            let len = usize::from_str_radix(std::str::from_utf8(&rest[..4]).unwrap_or("0"), 16)
                .unwrap_or(0);
            if len < 4 {
                break;
            }
            lines.push(String::from_utf8_lossy(&rest[4..len]).trim_end().to_owned());
            rest = &rest[len..];
        }
        lines
    }

    /// Stops the server (its whole process group).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
    }
}

impl Drop for ThirdParty {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The program that runs `engine`: `jgit` (with `java`), or the python of the dulwich
/// environment; why not, if it is missing.
fn program(engine: Engine) -> Result<PathBuf, String> {
    match engine.dulwich() {
        None => {
            for needed in ["java", "jgit"] {
                if super::find_program(needed).is_none() {
                    return Err(format!(
                        "{needed} is not installed (.ci/run installs jgit-cli)"
                    ));
                }
            }
            Ok(super::find_program("jgit").expect("just found"))
        }
        Some(version) => {
            let tools = std::env::var_os("GIT_LEASE_TEST_TOOLS")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_TOOLS));
            let python = tools.join(format!("dulwich-{version}/bin/python3"));
            if python.is_file() {
                Ok(python)
            } else {
                Err(format!(
                    "dulwich {version} is not installed at {} (.ci/run installs it)",
                    python.display()
                ))
            }
        }
    }
}

/// The jars of [`JGIT_JARS`] that are installed, as a class path.
fn jgit_classpath() -> String {
    JGIT_JARS
        .iter()
        .map(|jar| Path::new("/usr/share/java").join(jar))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Waits until the log says the server listens and `port` accepts a connection, while
/// `child` runs, in bounded polls.
fn wait_listening(child: &mut Child, port: u16, log: &Path) -> Result<(), String> {
    match wait_until_ready(child, port, READY_POLLS, || log_says(log, "Listening")) {
        Start::Ready => Ok(()),
        verdict => Err(verdict.to_string()),
    }
}

/// A pack of no objects: `PACK`, version 2, 0 objects, and the SHA-1 of those 12 bytes.
const EMPTY_PACK: [u8; 32] = [
    b'P', b'A', b'C', b'K', 0, 0, 0, 2, 0, 0, 0, 0, 0x02, 0x9d, 0x08, 0x82, 0x3b, 0xd8, 0xa8, 0xea,
    0xb5, 0x10, 0xad, 0x6a, 0xc7, 0x5c, 0x82, 0x3c, 0xfd, 0x3e, 0xd3, 0x1e,
];

/// `text` as one pkt-line.
fn pkt(text: &str) -> Vec<u8> {
    let mut line = format!("{:04x}", text.len() + 4).into_bytes();
    line.extend_from_slice(text.as_bytes());
    line
}

/// Reads one pkt-line from `stream`: its text, or `None` at a flush (or the end).
fn read_pkt(stream: &mut TcpStream) -> Option<String> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let len = usize::from_str_radix(std::str::from_utf8(&len).ok()?, 16).ok()?;
    if len < 4 {
        return None;
    }
    let mut data = vec![0u8; len - 4];
    stream.read_exact(&mut data).ok()?;
    Some(String::from_utf8_lossy(&data).into_owned())
}
