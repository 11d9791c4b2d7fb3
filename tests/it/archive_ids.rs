//! Ids nested under an archived one (docs/FORMAT.md, "The archive"): refs clash only while
//! both exist, so an id archived as `a` does not stop a new `a/b`; `a` is then refused (exit
//! 2, writing nothing) until `a/b` is folded too, and revives with its next token.

use crate::env::{at, Run, TestRepo};

fn lease(repo: &TestRepo, secs: i64, args: &[&str]) -> Run {
    repo.run_at(&at(secs), args)
}

#[test]
fn an_archived_id_does_not_stop_one_under_it_and_revives_once_that_is_folded() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", "alice"]);
    lease(&repo, 0, &["acquire", "a", "--ttl", "1m"]).ok();
    lease(&repo, 1, &["release", "a"]).ok();
    lease(&repo, 300, &["archive", "--quiet-for", "1m", "-v"])
        .ok()
        .stdout_has("folded a (token 1)");
    assert_eq!(repo.tip("a"), None, "the fold removed refs/leases/a");

    // a/b starts its own ledger; a cannot come back beside it.
    lease(&repo, 301, &["acquire", "a/b"])
        .ok()
        .stdout_has("(token 1)");
    let before = repo.snapshot();
    lease(&repo, 302, &["acquire", "a"])
        .code(2)
        .stderr_has("refs/leases/a clashes with the existing ref refs/leases/a/b");
    assert_eq!(repo.snapshot(), before, "the refused claim wrote nothing");
    lease(&repo, 303, &["release", "a/b"]).ok();
    lease(&repo, 304, &["acquire", "a"]).code(2);

    // Once a/b is folded, a revives with the token after its archived one.
    lease(&repo, 600, &["archive", "--quiet-for", "1m", "-v"])
        .ok()
        .stdout_has("folded a/b (token 1)");
    lease(&repo, 601, &["acquire", "a"])
        .ok()
        .stdout_has("(token 2)");
    lease(&repo, 602, &["show", "a/b"]).ok().stdout_has("free");
    lease(&repo, 603, &["verify"]).ok();
}
