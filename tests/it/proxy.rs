//! A fault-injecting TCP proxy on 127.0.0.1 between git clients and a git server: `git
//! daemon` ([`Proxy::start`]), or a web server running `git http-backend`
//! ([`Proxy::start_http`]).
//!
//! Each accepted connection's first words name the service: `git daemon`'s first pkt-line
//! (`git-upload-pack /leases.git\0host=…`), or an HTTP request's head (`GET
//! /leases.git/info/refs?service=git-receive-pack`, `POST /leases.git/git-receive-pack`). Over
//! HTTP each request is a connection of its own: the proxy asks the server to close it after
//! its response (`Connection: close`), so a push is its `GET` of the refs then its `POST` of
//! the pack, each faulted on its own, and a request without credentials (the first one, which
//! the server answers `401`) passes untouched. The proxy then asks its plan what to do with
//! the connection and connects to the server:
//!
//! - [`Fault::Pass`]: forwards both ways;
//! - [`Fault::Delay`]: forwards both ways, waiting before every chunk it forwards;
//! - [`Fault::Cut`]: forwards until that many bytes went one way, then closes both sides
//!   (the client sees the connection cut mid-stream; a receive-pack cut while reading the
//!   push ends without updating anything, as one killed mid-push does);
//! - [`Fault::DropReply`]: forwards the server's advertisement (over HTTP: nothing, the `POST`'s
//!   response is all answer) and all of the client's request, then keeps everything the server
//!   answers until the server has closed the connection (receive-pack has run its hooks and
//!   updated the refs, or refused), and closes the client's side without forwarding it: the
//!   server acted, the client cannot know how;
//! - [`Fault::Hold`]: reads the request line, says so on [`Proxy::held`], and connects to the
//!   server only once released ([`Proxy::release`]): a client paused before its push reaches
//!   the server;
//! - [`Fault::Kill`]: the server's receive-pack for this connection is killed (`kill -9`) at a
//!   point of the push ([`Phase`]): once a number of the request's bytes went through to it
//!   (the process is found in `/proc` by the `REMOTE_PORT` its server gave it, the proxy's
//!   own port towards the server), or from inside, by a `reference-transaction` hook
//!   ([`killer_hook`]) chained before the lease hook, which kills the receive-pack that runs it
//!   in the state the proxy wrote for its port (`<kills>/<port>`): with its ref locks taken
//!   (`prepared`) or once the refs are updated, before it reports (`committed`).
//!
//! The plan is a closure the test seeds; every connection's reads are bounded
//! ([`IO_TIMEOUT`]), so no fault leaves a thread behind forever. Dropping the proxy stops
//! accepting.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long any read or write of a proxied connection may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Which git service a connection asked for (over HTTP: which request it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    UploadPack,
    ReceivePack,
    /// HTTP's `GET …/info/refs`: the refs advertised before a fetch or a push.
    Refs,
    Other,
}

/// Where in a push its receive-pack is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Once this many bytes of the client's request went through (0: before the pack; over
    /// `git daemon`, the commands and the pack come after the advertisement; over HTTP, the
    /// `POST`'s body).
    Reading(usize),
    /// In the ref transaction's `prepared` state: the hook ran and approved, the refs' locks
    /// are taken, nothing is updated yet. The locks stay behind.
    Prepared,
    /// In its `committed` state: the refs are updated, the report is not sent.
    Committed,
}

impl Phase {
    /// The `reference-transaction` state the killer hook acts in.
    fn state(self) -> Option<&'static str> {
        match self {
            Phase::Reading(_) => None,
            Phase::Prepared => Some("prepared"),
            Phase::Committed => Some("committed"),
        }
    }
}

/// Which way bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    ToServer,
    ToClient,
}

/// What the proxy does with one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Pass,
    Delay(Duration),
    Cut { way: Way, after: usize },
    DropReply,
    Hold,
    Kill(Phase),
}

/// Decides each connection's fault from its service.
pub type Plan = Box<dyn FnMut(Service) -> Fault + Send>;

/// How the proxy speaks to its server.
#[derive(Clone, Debug, Default)]
struct Setup {
    /// Over HTTP (a web server running `git http-backend`), else `git daemon`'s protocol.
    http: bool,
    /// Where [`Fault::Kill`] writes the state a push's receive-pack is killed in, for the
    /// [`killer_hook`] of the served repository.
    kills: Option<PathBuf>,
}

/// A running proxy; see the module documentation.
pub struct Proxy {
    port: u16,
    http: bool,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    held: Receiver<Sender<()>>,
    held_tx: Sender<Sender<()>>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (a port of 127.0.0.1 where `git daemon` listens) on a free
    /// port.
    pub fn start(upstream: u16, plan: Plan) -> Proxy {
        Proxy::started(upstream, Setup::default(), plan)
    }

    /// Starts a proxy to `upstream` (over HTTP if `http`) whose [`Fault::Kill`]s in a ref
    /// transaction are told to the [`killer_hook`] of the served repository through `kills`.
    pub fn start_killing(upstream: u16, http: bool, kills: &Path, plan: Plan) -> Proxy {
        Proxy::started(
            upstream,
            Setup {
                http,
                kills: Some(kills.to_owned()),
            },
            plan,
        )
    }

    fn started(upstream: u16, setup: Setup, plan: Plan) -> Proxy {
        let http = setup.http;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let (held_tx, held) = mpsc::channel();
        let plan = Arc::new(Mutex::new(plan));
        let stopping = Arc::clone(&stop);
        let held_tx_accept = held_tx.clone();
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = conn else { continue };
                let plan = Arc::clone(&plan);
                let held_tx = held_tx_accept.clone();
                let setup = setup.clone();
                std::thread::spawn(move || serve(client, upstream, &setup, &plan, &held_tx));
            }
        });
        Proxy {
            port,
            http,
            stop,
            accept: Some(accept),
            held,
            held_tx,
        }
    }

    /// The URL of the served repository through this proxy (over HTTP, see [`Proxy::url_as`]).
    pub fn url(&self) -> String {
        format!("git://127.0.0.1:{}/leases.git", self.port)
    }

    /// The URL of the served repository through this proxy for `user`: over HTTP with the
    /// user's credentials (password `<user>pw`, as [`crate::server::Server::http`] serves),
    /// else [`Proxy::url`].
    pub fn url_as(&self, user: &str) -> String {
        if self.http {
            format!("http://{user}:{user}pw@127.0.0.1:{}/leases.git", self.port)
        } else {
            self.url()
        }
    }

    /// Waits (bounded) for a connection the plan held, or for what [`Proxy::notifier`] sent;
    /// returns what releases it.
    pub fn held(&self) -> Option<Sender<()>> {
        self.held.recv_timeout(IO_TIMEOUT).ok()
    }

    /// What wakes [`Proxy::held`] without a held connection: a client that ended without
    /// connecting sends on it, so that no one waits for a hold that never comes.
    pub fn notifier(&self) -> Sender<Sender<()>> {
        self.held_tx.clone()
    }

    /// Forgets every notification left unread.
    pub fn drain(&self) {
        while self.held.try_recv().is_ok() {}
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Releases a held connection.
pub fn release(held: &Sender<()>) {
    let _ = held.send(());
}

/// Reads one pkt-line (length prefix included) from `stream`.
fn read_pkt_line(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let n = usize::from_str_radix(std::str::from_utf8(&len).ok()?, 16).ok()?;
    let mut line = len.to_vec();
    if n > 4 {
        let mut rest = vec![0u8; n - 4];
        stream.read_exact(&mut rest).ok()?;
        line.extend(rest);
    }
    Some(line)
}

/// Reads an HTTP request's head (up to and including its blank line) from `stream`.
fn read_http_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(head)
}

/// The head of an HTTP request as it is forwarded: asking the server to close the connection
/// after its response, so that every request is a connection of its own.
fn closing(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case("connection") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// Which service a request asks for: `git daemon`'s request line, or an HTTP request's head.
fn service_of(request: &[u8], http: bool) -> Service {
    let text = String::from_utf8_lossy(request);
    let first = text.lines().next().unwrap_or("");
    if http {
        return if first.starts_with("POST ") && first.contains("/git-receive-pack") {
            Service::ReceivePack
        } else if first.starts_with("POST ") && first.contains("/git-upload-pack") {
            Service::UploadPack
        } else if first.starts_with("GET ") && first.contains("/info/refs") {
            Service::Refs
        } else {
            Service::Other
        };
    }
    if text.contains("git-receive-pack") {
        Service::ReceivePack
    } else if text.contains("git-upload-pack") {
        Service::UploadPack
    } else {
        Service::Other
    }
}

fn serve(
    mut client: TcpStream,
    upstream: u16,
    setup: &Setup,
    plan: &Mutex<Plan>,
    held: &Sender<Sender<()>>,
) {
    let _ = client.set_read_timeout(Some(IO_TIMEOUT));
    let _ = client.set_write_timeout(Some(IO_TIMEOUT));
    let request = if setup.http {
        read_http_head(&mut client)
    } else {
        read_pkt_line(&mut client)
    };
    let Some(request) = request else {
        return;
    };
    let service = service_of(&request, setup.http);
    // Over HTTP, the request without credentials that the server answers 401 passes as is.
    let anonymous = setup.http
        && !String::from_utf8_lossy(&request)
            .to_ascii_lowercase()
            .contains("\r\nauthorization:");
    let fault = match plan.lock() {
        Ok(mut plan) if !anonymous => (plan)(service),
        _ => Fault::Pass,
    };
    if fault == Fault::Hold {
        let (tx, rx) = mpsc::channel();
        if held.send(tx).is_err() || rx.recv_timeout(IO_TIMEOUT * 4).is_err() {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    }
    let Ok(mut server) = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)) else {
        return;
    };
    let _ = server.set_read_timeout(Some(IO_TIMEOUT));
    let _ = server.set_write_timeout(Some(IO_TIMEOUT));
    // The port the server sees this connection come from: its receive-pack's REMOTE_PORT.
    let port = server.local_addr().map(|a| a.port()).unwrap_or(0);
    // A kill in the ref transaction is the killer hook's, told through a file for this port,
    // removed once the connection is over whatever became of it (ports are used again).
    let told = match (fault, &setup.kills) {
        (Fault::Kill(phase), Some(dir)) => phase.state().and_then(|state| {
            let file = dir.join(port.to_string());
            std::fs::write(&file, state).ok().map(|_| file)
        }),
        _ => None,
    };
    let head = if setup.http {
        closing(&request)
    } else {
        request
    };
    if server.write_all(&head).is_ok() {
        if let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) {
            // Set once the client has sent anything after its request line: what the server
            // sends from then on is its answer to the request. Over HTTP, all it sends is.
            let requested = Arc::new(AtomicBool::new(setup.http));
            let requested2 = Arc::clone(&requested);
            let kills = setup.kills.clone();
            let http = setup.http;
            let up = std::thread::spawn(move || {
                let kills = kills.as_deref();
                let to_server = (port, kills, http);
                pump(
                    client2,
                    server2,
                    Way::ToServer,
                    fault,
                    &requested2,
                    to_server,
                );
            });
            pump(
                server,
                client,
                Way::ToClient,
                fault,
                &requested,
                (port, None, http),
            );
            let _ = up.join();
        }
    }
    if let Some(file) = told {
        let _ = std::fs::remove_file(file);
    }
}

/// Copies `from` to `to` under `fault` until either side ends, then closes both; `port` is the
/// proxy's side of its connection to the server.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    way: Way,
    fault: Fault,
    requested: &AtomicBool,
    (port, kills, http): (u16, Option<&Path>, bool),
) {
    let mut buf = [0u8; 16 * 1024];
    let mut sent = 0usize;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        match (fault, way) {
            (Fault::Delay(d), _) => std::thread::sleep(d),
            (Fault::Cut { way: w, after }, _) if w == way && sent + n >= after => {
                let _ = to.write_all(&buf[..after.saturating_sub(sent)]);
                break;
            }
            (Fault::Kill(Phase::Reading(at)), Way::ToServer) if sent + n >= at => {
                // Over HTTP the web server starts the backend once the body begins: the first
                // byte goes through (the commands come before the pack).
                let after = if http { at.max(1) } else { at };
                let _ = to.write_all(&buf[..after.saturating_sub(sent)]);
                // The kill is noted before it is done: once the receive-pack is dead, the
                // client may see the connection end, and the test read the notes, before
                // `kill` has even been waited for.
                let found = receive_packs_of(port, kills.and_then(Path::parent));
                if let (false, Some(dir)) = (found.is_empty(), kills) {
                    let what = if at == 0 { "before-pack" } else { "reading" };
                    note_kill(dir, what);
                }
                kill_all(&found);
                break;
            }
            (Fault::DropReply, Way::ToServer) => requested.store(true, Ordering::SeqCst),
            (Fault::DropReply, Way::ToClient) if requested.load(Ordering::SeqCst) => {
                // The server's answer: keep reading it to its end, forward nothing.
                while matches!(from.read(&mut buf), Ok(n) if n > 0) {}
                break;
            }
            _ => {}
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        sent += n;
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Notes in `<kills>/killed` that a receive-pack was killed, and where (`what`): one line a
/// kill, as the [`killer_hook`] writes its own.
fn note_kill(kills: &Path, what: &str) {
    if let Ok(mut log) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(kills.join("killed"))
    {
        let _ = writeln!(log, "{what}");
    }
}

/// The kills done so far through `kills`, by where: `before-pack`, `reading`, `prepared`,
/// `committed`.
pub fn kills_done(kills: &Path) -> Vec<String> {
    std::fs::read_to_string(kills.join("killed"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Whether the process `pid` is a `git receive-pack` started for a connection from `port` (its
/// server set `REMOTE_PORT`, as `git daemon` and CGI servers do), working under `root` when
/// given (another server's connection may come from the same port number).
fn is_receive_pack_of(pid: &str, port: u16, root: Option<&Path>) -> bool {
    let read = |what: &str| std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
    let cmdline = read("cmdline");
    let receive_pack = cmdline
        .split(|&b| b == 0)
        .any(|arg| arg == b"receive-pack" || arg.ends_with(b"git-receive-pack"));
    let wanted = format!("REMOTE_PORT={port}");
    let under_root = root.is_none_or(|root| {
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(root))
    });
    receive_pack
        && under_root
        && read("environ")
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_bytes())
}

/// The pids of the receive-pack serving the connection from `port` to the server whose files
/// are under `root` (when given), found in `/proc`; over HTTP the web server may start it only
/// as the request's body comes, so it is looked for a bounded number of times. Empty when none
/// was found.
fn receive_packs_of(port: u16, root: Option<&Path>) -> Vec<String> {
    let root = root.map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.to_owned()));
    for _ in 0..400 {
        let found: Vec<String> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
            .filter(|pid| is_receive_pack_of(pid, port, root.as_deref()))
            .collect();
        if !found.is_empty() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Vec::new()
}

/// Kills (`kill -9`) each of `pids`.
fn kill_all(pids: &[String]) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", pid])
            .status();
    }
}

/// Whether a `git receive-pack` works in the repository `bare` (its working directory).
pub fn receive_pack_running(bare: &Path) -> bool {
    let bare = std::fs::canonicalize(bare).unwrap_or_else(|_| bare.to_owned());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .any(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cwd.is_some_and(|c| c == bare)
                && cmdline
                    .split(|&b| b == 0)
                    .any(|arg| arg == b"receive-pack" || arg.ends_with(b"git-receive-pack"))
        })
}

/// Installs the [`killer_hook`] in `server`'s repository, chained before the lease hook
/// (installed already), with its directory `<root>/kills`; returns that directory, for
/// [`Proxy::start_killing`] and [`kills_done`].
pub fn install_killer(server: &crate::server::Server) -> PathBuf {
    let kills = server.root().join("kills");
    std::fs::create_dir_all(&kills).expect("create the kills directory");
    let hook = server
        .bare()
        .join("hooks/reference-transaction.before-git-lease");
    crate::env::write_program(&hook, &killer_hook(&kills), 0o755);
    kills
}

/// The `reference-transaction` hook that kills the receive-pack running it (`kill -9`) in the
/// state a [`Proxy::start_killing`] wrote for its connection's port into `kills`, noting it in
/// `<kills>/killed`; installed as the hook chained before the lease hook
/// (`reference-transaction.before-git-lease`), whose script runs it: the receive-pack is the
/// first of its ancestors that is one.
pub fn killer_hook(kills: &Path) -> String {
    let dir = kills.display().to_string().replace('\'', r"'\''");
    format!(
        "#!/bin/sh\n\
         # Kills this push's receive-pack in the state the test's proxy chose for it.\n\
         k='{dir}'/\"$REMOTE_PORT\"\n\
         if [ -n \"$REMOTE_PORT\" ] && [ \"$(cat \"$k\" 2>/dev/null)\" = \"$1\" ] && rm \"$k\" 2>/dev/null; then\n\
         \tp=$PPID\n\
         \twhile [ \"$p\" -gt 1 ] && ! tr '\\000' '\\n' < /proc/$p/cmdline | grep -qx -e receive-pack -e '.*git-receive-pack'; do\n\
         \t\tread -r _ _ _ p _ < /proc/$p/stat || p=1\n\
         \tdone\n\
         \tif [ \"$p\" -gt 1 ]; then\n\
         \t\techo \"$1\" >> '{dir}'/killed\n\
         \t\tkill -KILL \"$p\"\n\
         \tfi\n\
         \texit 1\n\
         fi\n\
         cat >/dev/null\n"
    )
}

#[cfg(test)]
mod tests {
    //! The proxy's own rules, through a real daemon and plain git.
    use super::*;
    use crate::server::{git, Server};

    fn commit(repo: &crate::env::TestRepo) -> String {
        let tree = repo.git_stdin(&["mktree"], b"");
        repo.git(&["commit-tree", &tree, "-m", "x"])
    }

    fn client_through(server: &Server, plan: Plan) -> (Proxy, crate::env::TestRepo) {
        let proxy = Proxy::start(server.port(), plan);
        let repo = server.client("alice");
        repo.git(&["remote", "set-url", "origin", &proxy.url()]);
        (proxy, repo)
    }

    #[test]
    fn a_passing_proxy_carries_pushes_and_fetches() {
        let server = Server::daemon();
        let (_proxy, repo) = client_through(&server, Box::new(|_| Fault::Pass));
        let c = commit(&repo);
        git(
            &repo,
            &["push", "-q", "origin", &format!("{c}:refs/heads/main")],
        )
        .ok();
        assert_eq!(server.rev("refs/heads/main").as_deref(), Some(c.as_str()));
        git(&repo, &["ls-remote", "origin"]).ok().stdout_has(&c);
    }

    #[test]
    fn a_dropped_reply_fails_the_push_though_the_server_took_it() {
        let server = Server::daemon();
        let (_proxy, repo) = client_through(
            &server,
            Box::new(|s| match s {
                Service::ReceivePack => Fault::DropReply,
                _ => Fault::Pass,
            }),
        );
        let c = commit(&repo);
        let push = git(&repo, &["push", "origin", &format!("{c}:refs/heads/main")]);
        assert_ne!(push.code, 0, "{push}");
        assert_eq!(server.rev("refs/heads/main").as_deref(), Some(c.as_str()));
    }

    #[test]
    fn a_push_cut_before_its_pack_arrives_changes_nothing() {
        let server = Server::daemon();
        let (_proxy, repo) = client_through(
            &server,
            Box::new(|s| match s {
                Service::ReceivePack => Fault::Cut {
                    way: Way::ToServer,
                    after: 0,
                },
                _ => Fault::Pass,
            }),
        );
        let c = commit(&repo);
        let push = git(&repo, &["push", "origin", &format!("{c}:refs/heads/main")]);
        assert_ne!(push.code, 0, "{push}");
        assert_eq!(server.rev("refs/heads/main"), None);
    }

    /// A hooked server (over HTTP for alice, or `git daemon`) whose receive-pack the killer hook
    /// can kill, and a client of it through a proxy faulting every push with `fault`.
    fn killing(http: bool, fault: Fault) -> (Server, Proxy, crate::env::TestRepo, PathBuf) {
        let mut server = if http {
            Server::http(&["alice"])
        } else {
            Server::with_hook()
        };
        let kills = install_killer(&server);
        server.start_at(&crate::env::at(0));
        let proxy = Proxy::start_killing(
            server.port(),
            http,
            &kills,
            Box::new(move |s| match s {
                Service::ReceivePack => fault,
                _ => Fault::Pass,
            }),
        );
        let repo = server.client("alice");
        repo.git(&["remote", "set-url", "origin", &proxy.url_as("alice")]);
        (server, proxy, repo, kills)
    }

    /// Pushes a new commit to `refs/heads/main` with plain git; the push and the commit.
    fn push_main(repo: &crate::env::TestRepo) -> (crate::env::Run, String) {
        let c = commit(repo);
        (
            git(repo, &["push", "origin", &format!("{c}:refs/heads/main")]),
            c,
        )
    }

    #[test]
    fn over_http_a_passing_proxy_carries_pushes_and_fetches() {
        let (server, _proxy, repo, _) = killing(true, Fault::Pass);
        let (push, c) = push_main(&repo);
        push.ok();
        assert_eq!(server.rev("refs/heads/main").as_deref(), Some(c.as_str()));
        git(&repo, &["ls-remote", "origin"]).ok().stdout_has(&c);
    }

    #[test]
    fn over_http_a_dropped_reply_to_the_post_fails_the_push_though_the_server_took_it() {
        let (server, _proxy, repo, _) = killing(true, Fault::DropReply);
        let (push, c) = push_main(&repo);
        assert_ne!(push.code, 0, "{push}");
        assert_eq!(server.rev("refs/heads/main").as_deref(), Some(c.as_str()));
    }

    #[test]
    fn a_receive_pack_killed_before_or_while_it_reads_the_pack_changes_nothing() {
        for http in [false, true] {
            for after in [0, 40] {
                let (server, _proxy, repo, kills) =
                    killing(http, Fault::Kill(Phase::Reading(after)));
                let (push, _) = push_main(&repo);
                assert_ne!(push.code, 0, "{push}");
                assert_eq!(server.rev("refs/heads/main"), None);
                assert_eq!(
                    kills_done(&kills).len(),
                    1,
                    "http {http}, after {after}: {push}"
                );
                server.git(&["fsck", "--no-progress"]);
            }
        }
    }

    #[test]
    fn a_receive_pack_killed_with_its_ref_locks_taken_leaves_the_lock_behind() {
        for http in [false, true] {
            let (server, _proxy, repo, kills) = killing(http, Fault::Kill(Phase::Prepared));
            let (push, _) = push_main(&repo);
            assert_ne!(push.code, 0, "{push}");
            assert_eq!(server.rev("refs/heads/main"), None);
            assert_eq!(kills_done(&kills), ["prepared"], "{push}");
            let lock = if crate::env::reftable() {
                server.bare().join("reftable/tables.list.lock")
            } else {
                server.bare().join("refs/heads/main.lock")
            };
            assert!(lock.exists(), "no lock left behind at {}", lock.display());
        }
    }

    #[test]
    fn a_receive_pack_killed_before_its_report_has_updated_the_ref() {
        for http in [false, true] {
            let (server, _proxy, repo, kills) = killing(http, Fault::Kill(Phase::Committed));
            let (push, c) = push_main(&repo);
            assert_ne!(push.code, 0, "{push}");
            assert_eq!(server.rev("refs/heads/main").as_deref(), Some(c.as_str()));
            assert_eq!(kills_done(&kills), ["committed"], "{push}");
        }
    }

    #[test]
    fn a_held_push_reaches_the_server_only_once_released() {
        let server = Server::daemon();
        let (proxy, repo) = client_through(
            &server,
            Box::new(|s| match s {
                Service::ReceivePack => Fault::Hold,
                _ => Fault::Pass,
            }),
        );
        let c = commit(&repo);
        let mut cmd = repo
            .git_cmd()
            .args(["push", "-q", "origin", &format!("{c}:refs/heads/main")])
            .command();
        let mut child = cmd.spawn().expect("start git push");
        let held = proxy.held().expect("the push is held");
        assert_eq!(server.rev("refs/heads/main"), None);
        release(&held);
        assert!(child.wait().expect("wait for git push").success());
        assert_eq!(server.rev("refs/heads/main").as_deref(), Some(c.as_str()));
    }
}
