//! Third-party servers as the engine ([`super::thirdparty`]): the harness itself, then claims
//! and races through JGit's daemon and dulwich's daemon and HTTP server.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use super::thirdparty::{Engine, ThirdParty};
use crate::server::git;

/// Each engine takes a push and serves a fetch of it, and is gone once dropped.
#[test]
fn each_third_party_server_serves_pushes_and_stops_when_dropped() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        let client = server.client("alice");
        let blob = client.git_stdin(&["hash-object", "-w", "--stdin"], b"hello\n");
        let tree = client.git_stdin(
            &["mktree"],
            format!("100644 blob {blob}\thello\n").as_bytes(),
        );
        let commit = client.git(&["commit-tree", &tree, "-m", "hello"]);
        let push = git(
            &client,
            &["push", "origin", &format!("{commit}:refs/leases/t")],
        );
        assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
        assert_eq!(
            server.tip("t").as_deref(),
            Some(commit.as_str()),
            "{engine:?}"
        );
        assert!(
            server
                .ls_remote()
                .contains(&format!("{commit}\trefs/leases/t")),
            "{engine:?}"
        );
        let port = server.port();
        drop(server);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
            "{engine:?}: port {port} still accepts connections after the server was dropped"
        );
    }
}

/// Each engine advertises `atomic` as [`Engine::atomic`] says: git refuses an atomic push to
/// one that does not, before it sends anything.
#[test]
fn third_party_servers_advertise_atomic_as_the_harness_says() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        assert_eq!(server.engine(), engine);
        let client = server.client("alice");
        let commit = client.git(&["commit-tree", EMPTY_TREE, "-m", "x"]);
        let push = git(
            &client,
            &[
                "push",
                "--atomic",
                "origin",
                &format!("{commit}:refs/leases/a"),
            ],
        );
        if engine.atomic() {
            assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
        } else {
            assert_ne!(push.code, 0, "{engine:?}\n{push}");
            push.stderr_has("does not support --atomic push");
            assert_eq!(server.ls_remote(), "", "{engine:?}: nothing landed");
        }
    }
}

/// The served repository's hooks run on a push where [`Engine::runs_hooks`] says so: a
/// pre-receive hook that declines everything declines it there; JGit's daemon runs none.
#[test]
fn third_party_servers_run_hooks_as_the_harness_says() {
    for engine in Engine::ALL {
        let Some(server) = ThirdParty::start(engine) else {
            continue;
        };
        let hook = server.bare().join("hooks/pre-receive");
        std::fs::write(&hook, "#!/bin/sh\necho 'no pushes here' >&2\nexit 1\n").expect("hook");
        crate::servers::set_mode(&hook, 0o755);
        let client = server.client("alice");
        let commit = client.git(&["commit-tree", EMPTY_TREE, "-m", "x"]);
        let push = git(
            &client,
            &["push", "origin", &format!("{commit}:refs/leases/h")],
        );
        if engine.runs_hooks() {
            assert_ne!(push.code, 0, "{engine:?}: the hook did not run\n{push}");
            assert_eq!(server.tip("h"), None, "{engine:?}");
            assert!(server.chain("h").is_empty());
        } else {
            assert_eq!(push.code, 0, "{engine:?}\n{push}\n{}", server.log());
            assert_eq!(server.tip("h").as_deref(), Some(commit.as_str()));
            assert_eq!(server.repo().git(&["cat-file", "-t", &commit]), "commit");
        }
    }
}

/// git's empty tree, which every repository knows.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
