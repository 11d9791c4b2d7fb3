//! The manual through man: after the README's `git lease man --install`, `git help lease` and
//! `git lease --help` show the page, as git shows its own. Without man the test is skipped,
//! and fails with `CI=true` (`.ci/run` installs man-db).

use std::process::Command;

use crate::env::{self, TestRepo};

#[test]
fn after_man_install_git_help_lease_and_git_lease_help_show_the_manual() {
    let has_man = Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_man {
        return env::unavailable(
            env::Skip::Host,
            "",
            "git help lease and git lease --help: man is not installed here (.ci/run installs it)",
        )
        .unwrap_or(());
    }
    let scratch = TestRepo::new();
    // What `cargo install` leaves: the binary in <prefix>/bin, on PATH.
    let sh = env::installed_shell(&scratch.scratch("prefix"), &scratch.scratch("home"));
    let (ok, out) = sh("git lease man --install");
    assert!(ok, "{out}");
    for help in ["git help lease", "git lease --help"] {
        let (ok, out) = sh(help);
        assert!(
            ok && out.contains("git-lease") && out.contains("acquire"),
            "{help}: {out}"
        );
    }
}
