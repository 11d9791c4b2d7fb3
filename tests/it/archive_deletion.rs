//! The deletion of a lease ref, as a pusher meets it at a hooked server: allowed only when the
//! archive records that ref's own tip, so that a ledger revived and moved on since its fold
//! keeps its token count.

use crate::archive::{on_server, seven_free_and_eight_held};
use crate::env::at;
use crate::pushes::push;
use crate::server::lease;

/// Issue 7 folded at token 1, revived by Alice to token 2 and released: the archive records
/// the token-1 tip, the ref the token-2 one. Her `git push origin :refs/leases/7` is refused,
/// and a fresh clone's claim goes on to token 3. Catches the mutant of
/// `rules::archive::judge_deletion` that allows the deletion whenever the archive records any
/// tip for the issue (`Some(_)` for `Some(tip) if tip == old`): the deletion landed, after
/// which a fresh clone revives the ledger from the archived token-1 tip, issuing token 2 again.
#[test]
fn a_revived_ledger_whose_newer_tip_the_archive_lacks_cannot_be_deleted() {
    let (server, alice) = seven_free_and_eight_held();
    server.config("lease.hookNow", &at(200));
    on_server(&server, &at(200), &["archive", "--quiet-for", "1m"]);
    assert_eq!(server.tip("7"), None, "the fold removed the ref");
    let archive = server.rev("refs/lease-archive");

    lease(&alice, 210, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 2)");
    lease(&alice, 211, &["release", "7", "--remote", "origin"]).ok();
    let revived = server.tip("7").expect("the revival created the ref again");

    let run = push(&alice, false, &[":refs/leases/7"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease: refused")
        .stderr_has("not ")
        .stderr_has(&revived);
    assert_eq!(server.tip("7").as_deref(), Some(revived.as_str()));
    assert_eq!(
        server.rev("refs/lease-archive"),
        archive,
        "the archive moved"
    );

    let carol = server.client("carol");
    lease(&carol, 220, &["acquire", "7", "--remote", "origin"])
        .ok()
        .stdout_has("(token 3)");
    on_server(&server, &at(230), &["verify"]);
}
