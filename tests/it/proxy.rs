//! A fault-injecting TCP proxy on 127.0.0.1 between git clients and `git daemon`.
//!
//! Each accepted connection's first pkt-line (`git-upload-pack /leases.git\0host=…`) names the
//! service; the proxy then asks its plan what to do with the connection and connects to the
//! server:
//!
//! - [`Fault::Pass`]: forwards both ways;
//! - [`Fault::Delay`]: forwards both ways, waiting before every chunk it forwards;
//! - [`Fault::Cut`]: forwards until that many bytes went one way, then closes both sides
//!   (the client sees the connection cut mid-stream; a receive-pack cut while reading the
//!   push ends without updating anything, as one killed mid-push does);
//! - [`Fault::DropReply`]: forwards the server's advertisement and all of the client's request,
//!   then keeps everything the server answers until the server has closed the connection
//!   (receive-pack has run its hooks and updated the refs, or refused), and closes the client's
//!   side without forwarding it: the server acted, the client cannot know how;
//! - [`Fault::Hold`]: reads the request line, says so on [`Proxy::held`], and connects to the
//!   server only once released ([`Proxy::release`]): a client paused before its push reaches
//!   the server.
//!
//! The plan is a closure the test seeds; every connection's reads are bounded
//! ([`IO_TIMEOUT`]), so no fault leaves a thread behind forever. Dropping the proxy stops
//! accepting.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long any read or write of a proxied connection may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Which git service a connection asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    UploadPack,
    ReceivePack,
    Other,
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
}

/// Decides each connection's fault from its service.
pub type Plan = Box<dyn FnMut(Service) -> Fault + Send>;

/// A running proxy; see the module documentation.
pub struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    held: Receiver<Sender<()>>,
    held_tx: Sender<Sender<()>>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (a port of 127.0.0.1) on a free port.
    pub fn start(upstream: u16, plan: Plan) -> Proxy {
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
                std::thread::spawn(move || serve(client, upstream, &plan, &held_tx));
            }
        });
        Proxy {
            port,
            stop,
            accept: Some(accept),
            held,
            held_tx,
        }
    }

    /// The URL of the served repository through this proxy.
    pub fn url(&self) -> String {
        format!("git://127.0.0.1:{}/leases.git", self.port)
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

fn serve(mut client: TcpStream, upstream: u16, plan: &Mutex<Plan>, held: &Sender<Sender<()>>) {
    let _ = client.set_read_timeout(Some(IO_TIMEOUT));
    let _ = client.set_write_timeout(Some(IO_TIMEOUT));
    let Some(request) = read_pkt_line(&mut client) else {
        return;
    };
    let text = String::from_utf8_lossy(&request);
    let service = if text.contains("git-receive-pack") {
        Service::ReceivePack
    } else if text.contains("git-upload-pack") {
        Service::UploadPack
    } else {
        Service::Other
    };
    let fault = match plan.lock() {
        Ok(mut plan) => (plan)(service),
        Err(_) => Fault::Pass,
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
    if server.write_all(&request).is_err() {
        return;
    }
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    // Set once the client has sent anything after its request line: what the server sends
    // from then on is its answer to the request.
    let requested = Arc::new(AtomicBool::new(false));
    let requested2 = Arc::clone(&requested);
    let up = std::thread::spawn(move || {
        pump(client2, server2, Way::ToServer, fault, &requested2);
    });
    pump(server, client, Way::ToClient, fault, &requested);
    let _ = up.join();
}

/// Copies `from` to `to` under `fault` until either side ends, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream, way: Way, fault: Fault, requested: &AtomicBool) {
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
