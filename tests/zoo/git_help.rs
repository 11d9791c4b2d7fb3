//! The manual through man: after the README's `git lease man --install`, `git help lease` and
//! `git lease --help` show the page, as git shows its own. Without man the test is skipped,
//! and fails with `CI=true` (`.ci/run` installs man-db).

use std::path::Path;
use std::process::Command;

use crate::env::{self, TestRepo, BIN};

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
    let home = scratch.scratch("home");
    // What `cargo install` leaves: the binary in <prefix>/bin, on PATH.
    let bin = scratch.scratch("prefix").join("bin");
    std::fs::create_dir_all(&bin).expect("create bin");
    env::install_program(Path::new(BIN), &bin.join("git-lease"), 0o755);
    let path = env::path_with_first(&bin);
    let sh = |script: &str| {
        let mut cmd = Command::new("bash");
        env::hermetic(&mut cmd, &home, &home);
        let out = cmd
            .env("PATH", &path)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "80")
            .arg("-c")
            .arg(script)
            .current_dir(&home)
            .output()
            .expect("run bash");
        let text = format!(
            "{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
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
