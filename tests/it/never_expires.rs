//! `run --ttl never` through a remote: a lease that never expires is never renewed, so `run`
//! reads it on the server every `--every` (10 s by default), and a revoke there stops the
//! command with exit 6, saying who revoked it and why (docs/SECURITY.md, the rows on `run`).
//! In a repository's own ledger it is read as soon as a ref moves ([`crate::run`]).

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::env::Run;
use crate::server::Server;

/// The bound on waiting for the child to say it started, or for `run` to end.
const POLLS: usize = 800;
const POLL_EVERY: Duration = Duration::from_millis(25);

/// Polls `probe` until it answers, at most [`POLLS`] times; panics naming `what` otherwise.
#[track_caller]
fn poll_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..POLLS {
        if let Some(v) = probe() {
            return v;
        }
        std::thread::sleep(POLL_EVERY);
    }
    panic!("{what}: not ready after {POLLS} polls");
}

/// Waits (bounded) for `run` to end; kills it and panics if it does not.
fn ended(mut run: Child) -> Run {
    for _ in 0..POLLS {
        if run.try_wait().expect("wait for run").is_some() {
            let out = run.wait_with_output().expect("run's output");
            return Run::from_output("git lease run --ttl never", out);
        }
        std::thread::sleep(POLL_EVERY);
    }
    let _ = run.kill();
    let out = run.wait_with_output().expect("run's output");
    panic!(
        "run went on after the revoke:\n{}",
        Run::from_output("git lease run --ttl never", out)
    );
}

#[test]
fn a_run_through_a_remote_whose_lease_never_expires_stops_when_revoked_on_the_server() {
    let server = Server::daemon();
    let worker = server.client("worker");
    let ready = worker.scratch("bg").join("ready");
    let run = worker
        .lease()
        .args([
            "run", "--remote", "origin", "31", "--ttl", "never", "--every", "1s", "--grace", "1s",
            "--", "sh", "-c",
        ])
        .args(["echo started > \"$1\"; exec sleep 600", "sh"])
        .args([&ready])
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start run");
    poll_until("the command started", || std::fs::read(&ready).ok());
    let held = server.leases("31");
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["holder"], "worker");
    assert_eq!(held[0]["expires_at"], serde_json::Value::Null, "{held:?}");

    server
        .lease(&["revoke", "31", "--reason", "moved on", "--holder", "admin"])
        .ok();
    let run = ended(run);
    run.code(6)
        .stderr_has("revoked by admin")
        .stderr_has("moved on");
    // Read, never renewed: the server's ledger is the acquire and the revoke.
    let events: Vec<_> = server
        .leases("31")
        .iter()
        .map(|l| l["event"].clone())
        .collect();
    assert_eq!(events, ["acquire", "revoke"], "{events:?}");
}
