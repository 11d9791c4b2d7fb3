//! The traps of a server installation, each met for real: a binary the serving account cannot
//! run (warned about by `install-hook`, and the failed pushes reported as the server's
//! failure, exit 1, not as a refusal), files left owned by root, no identity configured; and
//! the exit codes of `git lease push` and `acquire --remote`, the same on every transport: 0
//! done, 3 refused by the lease rules, 1 for everything else (another hook's refusal, push
//! options disabled, the server gone). No message shows a URL's password.

use std::os::unix::fs::MetadataExt;

use crate::env::{at, Run};

use crate::server::{git, lease};

use super::checks::{assert_refused_as_someone_else, expect};
use super::{path_str, set_mode, Kind, Served};

#[test]
fn a_binary_the_serving_account_cannot_run_is_warned_about_and_reported_as_a_server_failure() {
    let Some(server) = Served::start_with(Kind::Sshd, &at(0), false) else {
        return;
    };
    server.config("lease.fence", "refs/heads/issue/*");
    // A binary in a directory only root can enter, as under /root/.cargo/bin.
    let private = server.root().join("private");
    std::fs::create_dir(&private).expect("mkdir");
    set_mode(&private, 0o700);
    let hidden = private.join("git-lease");
    crate::env::install_program(&server.root().join("bin/git-lease"), &hidden, 0o755);

    // Before identity is configured, as root, for a repository gitlease owns.
    let run = server.host_lease(
        &[
            "install-hook",
            "--repo",
            path_str(server.bare()),
            "--binary",
            path_str(&hidden),
        ],
        &[],
    );
    run.ok();
    let owner = server.owner().name.clone();
    // Each warning said once, on stderr.
    assert!(!run.stdout.contains("warning"), "{run}");
    {
        let text = &run.stderr;
        assert!(
            text.contains(&format!("{} cannot be run by {owner}", hidden.display()))
                && text.contains("is not searchable by that user")
                && text.contains("--binary PATH"),
            "install-hook should warn that {owner} cannot run the binary\n{run}"
        );
        assert!(
            text.contains("anyone can act as anyone"),
            "install-hook should warn that no identity is configured\n{run}"
        );
    }
    run.stderr_has("warning: ");
    // What root wrote stays the repository owner's.
    for file in ["hooks/pre-receive", "config"] {
        let meta = std::fs::metadata(server.bare().join(file)).expect("stat");
        assert_eq!(
            (meta.uid(), meta.gid()),
            (server.owner().uid, server.owner().gid),
            "{file} should belong to {owner}\n{run}"
        );
    }
    run.stdout_has(&format!("given to {owner}"));

    // Every push fails, and the client says it is the server's failure, not a refusal.
    server.config("lease.pusherEnv", "LEASE_USER");
    let alice = server.client("alice");
    let run = lease(&alice, 0, &["--remote", "origin", "acquire", "5"]);
    expect(&server, &run, 1);
    run.stderr_has("the server's hook failed")
        .stderr_has("cannot run")
        .stderr_has(path_str(&hidden));
    assert_eq!(server.tip("5"), None);

    // Installed again with a binary gitlease can run, and with identity: no warnings.
    let run = server.install_hook(&["--json"]);
    run.ok();
    let answer = run.json();
    assert_eq!(answer["warnings"], serde_json::json!([]), "{run}");
    assert_eq!(answer["push_options"], true);
    assert_eq!(answer["chained"], serde_json::Value::Null, "{run}");
    assert_eq!(
        answer["owner"],
        format!("{owner} (uid {})", server.owner().uid)
    );
    assert!(run.stderr.is_empty(), "{run}");
    let run = lease(&alice, 0, &["--remote", "origin", "acquire", "5"]);
    expect(&server, &run, 0);

    // The unrunnable binary again: `git lease push` of alice's work reports the server's
    // failure too, not a refusal.
    server
        .host_lease(
            &[
                "install-hook",
                "--repo",
                path_str(server.bare()),
                "--binary",
                path_str(&hidden),
            ],
            &[],
        )
        .ok()
        .stderr_has("cannot be run by");
    alice.git(&["switch", "-q", "-c", "issue/5"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    let run = lease(&alice, 0, &["push"]);
    expect(&server, &run, 1);
    run.stderr_has("the server's hook failed")
        .stderr_has("cannot run");
    assert_eq!(server.rev("refs/heads/issue/5"), None);
}

/// One row of [`exit_codes`]: what was run and how it ended.
fn row(case: &str, run: &Run) -> String {
    format!("{case}: exit {}", run.code)
}

/// `git lease push` and `acquire --remote` through `kind`, in every way they can end.
fn exit_codes(kind: Kind) {
    let Some(mut server) = Served::start(kind, &at(0)) else {
        return;
    };
    server.config("lease.fence", "refs/heads/issue/*");
    let alice = server.client("alice");
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    let mut record = |case: &str, run: Run| {
        rows.push(row(case, &run));
        runs.push(run);
    };

    record(
        "acquire --remote",
        lease(
            &alice,
            0,
            &["--remote", "origin", "acquire", "3", "--ttl", "2m"],
        ),
    );
    alice.git(&["switch", "-q", "-c", "issue/3"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    record("push", lease(&alice, 0, &["push"]));

    // Refused by the lease rules: by the server's clock the lease has expired.
    server.config("lease.hookNow", &at(200));
    alice.git(&["commit", "-q", "--allow-empty", "-m", "late"]);
    record("push refused by the rules", lease(&alice, 60, &["push"]));
    server.config("lease.hookNow", &at(0));

    // Refused by another hook, chained before git-lease's.
    server.write_hook(
        "pre-receive.before-git-lease",
        "#!/bin/sh\necho 'policy: the repository is frozen' >&2\nexit 1\n",
    );
    record("push refused by another hook", lease(&alice, 0, &["push"]));
    record(
        "acquire refused by another hook",
        lease(&alice, 0, &["--remote", "origin", "acquire", "4"]),
    );
    std::fs::remove_file(server.bare().join("hooks/pre-receive.before-git-lease"))
        .expect("remove the hook");

    // Push options disabled on the server: `git lease push` goes without `-o`, and the hook
    // judges the push without a token (where it knows nobody, it needs one).
    server.config("receive.advertisePushOptions", "false");
    alice.git(&["commit", "-q", "--allow-empty", "-m", "no options"]);
    record("push without push options", lease(&alice, 0, &["push"]));
    server.config("receive.advertisePushOptions", "true");

    // A wrong password (over http), then the server gone.
    if matches!(kind, Kind::Nginx | Kind::Apache) {
        let wrong = server.url("alice").replace("alicepw", "wrongpw");
        record(
            "push with a wrong password",
            lease(&alice, 0, &["push", &wrong]),
        );
        record(
            "acquire with a wrong password",
            lease(&alice, 0, &["--remote", &wrong, "acquire", "6"]),
        );
    }
    server.stop();
    record("push to a stopped server", lease(&alice, 0, &["push"]));
    record(
        "acquire from a stopped server",
        lease(&alice, 0, &["--remote", "origin", "acquire", "6"]),
    );

    let mut want = vec![
        "acquire --remote: exit 0",
        "push: exit 0",
        "push refused by the rules: exit 3",
        "push refused by another hook: exit 1",
        "acquire refused by another hook: exit 1",
    ];
    want.push(if kind.has_identity() {
        "push without push options: exit 0"
    } else {
        "push without push options: exit 3"
    });
    if matches!(kind, Kind::Nginx | Kind::Apache) {
        want.push("push with a wrong password: exit 1");
        want.push("acquire with a wrong password: exit 1");
    }
    want.push("push to a stopped server: exit 1");
    want.push("acquire from a stopped server: exit 1");
    let all = runs
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(rows, want, "{kind:?}\n{all}\n{}", server.log());

    // What each said.
    runs[2].stderr_has("remote: git-lease: refused refs/heads/issue/3");
    for run in &runs[3..5] {
        run.stderr_has("the server's hook failed")
            .stderr_has("policy: the repository is frozen");
        assert!(!run.stderr.contains("git-lease: refused"), "{run}");
    }
    runs[5].stderr_has("takes no push options");
    if !kind.has_identity() {
        runs[5].stderr_has("lease.requireToken");
    }
    for run in &runs {
        for secret in ["alicepw", "wrongpw"] {
            assert!(
                !run.stderr.contains(secret) && !run.stdout.contains(secret),
                "{kind:?}: a message shows the password {secret:?}\n{run}"
            );
        }
    }
}

#[test]
fn exit_codes_over_git_daemon() {
    exit_codes(Kind::Daemon);
}

#[test]
fn exit_codes_over_sshd() {
    exit_codes(Kind::Sshd);
}

#[test]
fn exit_codes_over_nginx() {
    exit_codes(Kind::Nginx);
}

#[test]
fn exit_codes_over_apache() {
    exit_codes(Kind::Apache);
}

#[test]
fn install_hook_shows_no_credentials_and_git_lease_push_redacts_urls() {
    let Some(server) = Served::start(Kind::Nginx, &at(0)) else {
        return;
    };
    server.config("lease.fence", "refs/heads/issue/*");
    let alice = server.client("alice");
    let url = server.url("alice");
    // The served repository knows a remote with credentials (a mirror's upstream, say):
    // install-hook never shows it.
    let run = server.host_git(&[
        "--git-dir",
        path_str(server.bare()),
        "remote",
        "add",
        "upstream",
        &url,
    ]);
    assert_eq!(run.code, 0, "{run}");
    let install = server.install_hook(&[]);
    install.ok();
    let json = server.install_hook(&["--json"]);
    json.ok();
    expect(
        &server,
        &lease(&alice, 0, &["--remote", &url, "acquire", "2"]),
        0,
    );
    alice.git(&["switch", "-q", "-c", "issue/2"]);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "work"]);
    let pushed = lease(&alice, 0, &["push", &url]);
    expect(&server, &pushed, 0);
    alice.git(&["commit", "-q", "--allow-empty", "-m", "more"]);
    let refused = git(&alice, &["push", "-o", "lease-token=9", &url, "issue/2"]);
    assert_ne!(refused.code, 0, "{refused}");
    refused.stderr_has("token 9 is stale");
    for run in [&install, &json, &pushed] {
        assert!(
            !run.stderr.contains("alicepw") && !run.stdout.contains("alicepw"),
            "a message shows the password\n{run}"
        );
    }
}

#[test]
fn a_vref_that_passes_all_of_gitolites_arguments_fails_every_push() {
    let Some(server) = Served::start(Kind::GitoliteVref, &at(0)) else {
        return;
    };
    let alice = server.client("alice");
    // The wrapper the docs warn against: gitolite's seven arguments reach git-lease.
    let vref = server.root().join("home-server/local/VREF/LEASE");
    crate::env::write_program(
        &vref,
        "#!/bin/sh\nexec git-lease hook update \"$@\"\n",
        0o755,
    );
    let run = lease(&alice, 0, &["--remote", "origin", "acquire", "1"]);
    expect(&server, &run, 1);
    run.stderr_has("the server's hook failed");
    assert_eq!(server.tip("1"), None);
    // The docs' wrapper: the same claim lands.
    crate::env::write_program(&vref, super::GITOLITE_VREF, 0o755);
    expect(
        &server,
        &lease(&alice, 0, &["--remote", "origin", "acquire", "1"]),
        0,
    );
}

#[test]
fn over_ssh_a_pusher_cannot_name_itself() {
    let Some(server) = Served::start(Kind::Sshd, &at(0)) else {
        return;
    };
    let bob = server.client("bob");
    // bob's ssh asks the server to set LEASE_USER=alice: the forced command decides.
    let wrapper = server.root().join("ssh-bob");
    bob.git(&[
        "config",
        "core.sshCommand",
        &format!("{} -o SetEnv=LEASE_USER=alice", wrapper.display()),
    ]);
    let run = lease(
        &bob,
        0,
        &["--remote", "origin", "acquire", "8", "--holder", "alice"],
    );
    assert_refused_as_someone_else(&server, &run, "8");
}
