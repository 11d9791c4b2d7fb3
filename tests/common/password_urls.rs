//! A remote URL with a password, for the tests that it never shows: the password, a check of
//! a run's output, and an http server whose ledger was rewound behind a client that used it.

use crate::env::{Run, TestRepo};
use crate::server::{lease, Server};

/// The password of the URLs below (`Server::url_as("alice")`'s), and the user it goes with.
pub const PASSWORD: &str = "alicepw";

/// Asserts that nothing `run` printed holds the password; returns `run`.
#[track_caller]
pub fn clean(run: Run) -> Run {
    assert!(
        !run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD),
        "the password shows in `{}`:\n{run}",
        run.command
    );
    run
}

/// A hookless http server where alice took issues 9 and 10 through a URL with her password,
/// then her clone listed them (verifying token 2 of 9), then someone rewound 9 on the server.
pub fn rewound_over_http() -> (Server, TestRepo, String) {
    let mut server = Server::http_unhooked(&["alice"]);
    server.start();
    let url = server.url_as("alice");
    let alice = server.client("alice");
    let remote = ["--remote", url.as_str()];
    clean(lease(&alice, 0, &[&["acquire", "9"][..], &remote].concat())).ok();
    clean(lease(&alice, 1, &[&["release", "9"][..], &remote].concat())).ok();
    clean(lease(&alice, 2, &[&["acquire", "9"][..], &remote].concat())).ok();
    clean(lease(
        &alice,
        3,
        &[&["acquire", "10"][..], &remote].concat(),
    ))
    .ok();
    clean(lease(&alice, 4, &[&["list"][..], &remote].concat())).ok();
    let first = server.chain("9")[0].0.clone();
    server.git(&["update-ref", "refs/leases/9", &first]);
    (server, alice, url)
}
