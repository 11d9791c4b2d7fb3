//! The server harness itself ([`crate::server`]): a real `git daemon` on 127.0.0.1 per test
//! serves pushes and fetches, gets a port of its own, is noticed when it cannot bind, and is gone
//! once dropped; the harness's own web front ([`crate::cgi`]) reads basic auth credentials.

use std::net::{Ipv4Addr, TcpListener};

use crate::cgi::base64_decode;
use crate::forge::hello_commit;
use crate::server::{
    assert_port_closed, daemon_command, stop, wait_ready, Server, Start, DAEMON_READY,
};

#[test]
fn the_daemon_serves_pushes_and_stops_when_dropped() {
    let daemon = Server::daemon();
    assert!(daemon.url().starts_with("git://127.0.0.1:"));
    let repo = daemon.client("alice@example.com");
    assert_eq!(repo.git(&["config", "lease.holder"]), "alice@example.com");
    // A push and a fetch through the daemon.
    let commit = hello_commit(&repo);
    repo.git(&["push", "-q", "origin", &format!("{commit}:refs/heads/main")]);
    assert_eq!(daemon.git(&["rev-parse", "refs/heads/main"]), commit);
    let other = daemon.mirror();
    assert!(other
        .git(&["ls-remote", "origin"])
        .contains(&format!("{commit}\trefs/heads/main")));
    // Dropping it closes the port: nothing accepts connections there any more.
    let port = daemon.port();
    drop(daemon);
    assert_port_closed(port, "the daemon");
}

#[test]
fn two_daemons_get_different_ports() {
    let a = Server::daemon();
    let b = Server::daemon();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.bare(), b.bare());
    assert!(a.bare().ends_with("leases.git"));
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
    let mut child = daemon_command(&home, &root, &root, port, &log)
        .spawn()
        .expect("start git daemon");
    let verdict = wait_ready(&mut child, port, &log, DAEMON_READY);
    stop(&mut child);
    assert!(
        matches!(verdict, Start::Exited(_)),
        "a daemon that could not bind port {port} was not seen to exit: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[test]
fn base64_of_credentials_decodes() {
    assert_eq!(
        base64_decode("YWxpY2U6YWxpY2Vwdw==").as_deref(),
        Some("alice:alicepw")
    );
    assert_eq!(base64_decode("Ym9iOmJvYnB3").as_deref(), Some("bob:bobpw"));
    assert_eq!(base64_decode("!!"), None);
}
