//! `git lease doctor` against servers this project did not write: one that ignores a push's
//! expected old value (dulwich's HTTP server: reported, remembered, and writes through it
//! refused until the danger is accepted by name or the server is found fixed), and one that
//! serves one connection at a time (dulwich's git:// daemon: told apart, not condemned).

use crate::doctor_checks::{allowed, assert_check, assert_no_probe_ref, doctor, verdicts};
use crate::env::at;
use crate::server::{lease, Server};
use crate::servers::thirdparty::{Engine, ThirdParty};

#[test]
fn a_server_that_ignores_expected_old_values_is_remembered_and_writes_through_it_are_refused() {
    let Some(dulwich) = ThirdParty::start(Engine::DulwichHttp) else {
        return;
    };
    let alice = dulwich.client("alice");

    let run = doctor(&alice, 0, &[]);
    run.code(1);
    assert_check(
        &run,
        "compare_and_swap",
        "fail",
        "origin does not honour a push's expected old value",
    );
    assert_check(
        &run,
        "compare_and_swap",
        "fail",
        "writes through it are refused from now on",
    );
    assert_check(
        &run,
        "compare_and_swap",
        "fail",
        "git config remote.origin.leaseUnsafeCas true",
    );
    assert_check(&run, "hook", "warn", "no git-lease hook answered the probe");
    let remembered = verdicts(&alice);
    assert_eq!(remembered.len(), 1, "{run}");
    assert!(
        remembered[0].contains("without making it"),
        "{remembered:?}"
    );
    assert_no_probe_ref(&dulwich.repo().git(&["for-each-ref"]));

    // A claim through it is refused with the reason, exit 1, and nothing is pushed.
    let claim = lease(&alice, 0, &["--remote", "origin", "acquire", "7"]);
    claim
        .code(1)
        .stderr_has("refusing to write through origin")
        .stderr_has("does not honour a push's expected old value")
        .stderr_has("git config remote.origin.leaseUnsafeCas true");
    assert_eq!(dulwich.tip("7"), None);
    // Reads still work.
    lease(&alice, 0, &["--remote", "origin", "list", "--all"]).ok();

    // Accepted by name, the danger lets writes through.
    alice.git(&["config", "remote.origin.leaseUnsafeCas", "true"]);
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"]).ok();
    assert!(dulwich.tip("7").is_some());
    alice.git(&["config", "--unset", "remote.origin.leaseUnsafeCas"]);
    lease(&alice, 60, &["--remote", "origin", "renew", "7"])
        .code(1)
        .stderr_has("refusing to write through origin");

    // The same URL answered by a server that honours old values (git daemon, through
    // url.<base>.insteadOf): doctor finds it fixed and forgets the verdict.
    let mut fixed = Server::with_hook();
    fixed.start_at(&at(0));
    alice.git(&[
        "config",
        &format!("url.{}.insteadOf", fixed.url()),
        &dulwich.url(),
    ]);
    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(
        &run,
        "compare_and_swap",
        "ok",
        "refused a push whose expected old value was stale",
    );
    assert!(verdicts(&alice).is_empty(), "{run}");
    assert_eq!(allowed(&alice).len(), 1, "{run}");
    lease(&alice, 0, &["--remote", "origin", "acquire", "8"]).ok();
    assert!(fixed.tip("8").is_some());
}

#[test]
fn a_server_that_serves_one_connection_at_a_time_is_told_apart_from_one_that_ignores_old_values() {
    let Some(dulwich) = ThirdParty::start(Engine::DulwichDaemon) else {
        return;
    };
    let alice = dulwich.client("alice");

    // Its git:// daemon answers one connection after the other: the probe's own push holds
    // it, so the push that would move the ref behind it is never answered, and the probe
    // gives up at its limit.
    let run = doctor(&alice, 0, &[]);
    run.ok();
    assert_check(
        &run,
        "compare_and_swap",
        "warn",
        "it took no second connection while the probe's push held one open",
    );
    assert!(verdicts(&alice).is_empty(), "{run}");
    assert_no_probe_ref(&dulwich.repo().git(&["for-each-ref"]));
    lease(&alice, 0, &["--remote", "origin", "acquire", "7"]).ok();
}
