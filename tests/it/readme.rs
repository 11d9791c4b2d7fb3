//! The README's tour, run exactly as written, in a fresh directory: a new user's first
//! minutes must work.

use std::path::Path;

use crate::env::{self, TestRepo, BIN};

/// Returns the first ```sh block of the README after the heading `heading`.
fn sh_block(heading: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md is readable");
    let after = readme
        .split_once(heading)
        .unwrap_or_else(|| panic!("README has a section {heading:?}"))
        .1;
    let block = after
        .split_once("```sh\n")
        .unwrap_or_else(|| panic!("{heading:?} has a sh block"))
        .1;
    block
        .split_once("```")
        .expect("the block ends")
        .0
        .to_owned()
}

/// Returns the first ```sh block after the `## Tour` heading.
fn tour() -> String {
    sh_block("## Tour")
}

#[test]
fn the_readme_tour_works_as_written() {
    let scratch = TestRepo::new();
    let dir = scratch.scratch("tour");
    // `git lease` finds `git-lease` on PATH, as after `cargo install --path .`.
    let bin_dir = Path::new(BIN).parent().expect("the binary has a directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = std::process::Command::new("sh");
    env::hermetic(&mut cmd, &dir, &dir);
    let out = cmd
        .env("PATH", path)
        .env("GIT_LEASE_NOW", "2026-11-30T14:00:00Z")
        .arg("-c")
        .arg(tour())
        .current_dir(&dir)
        .output()
        .expect("run the tour");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all = format!("{stdout}\n--- stderr\n{stderr}");
    for expected in [
        "acquired 42 for alice@example.com (token 1) until 14:15 UTC, in 15m",
        "held: 42 is held by alice@example.com (token 1)",
        "ok: token 1 is the live tenure of 42",
        "released 42 held by alice@example.com (token 1 kept)",
        "not held: nobody holds 42 (last token 1); nothing to release",
        "acquired 42 for bob@example.com (token 2)",
        "\"holder\": \"bob@example.com\"",
        "acquire 42: bob@example.com token 2",
    ] {
        assert!(
            all.contains(expected),
            "the tour should print {expected:?}:\n{all}"
        );
    }
    assert!(
        !stderr.contains("error") && !stderr.contains("fatal"),
        "the tour printed errors:\n{all}"
    );
    let repo = dir.join("demo");
    let count = std::process::Command::new("git")
        .args(["rev-list", "--count", "refs/leases/42"])
        .current_dir(&repo)
        .output()
        .expect("git rev-list");
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "3");
}

/// Returns the lines of the ```sh block after the `## Install` heading.
fn install_lines() -> Vec<String> {
    sh_block("## Install").lines().map(str::to_owned).collect()
}

#[test]
fn after_install_the_manual_and_completions_work_as_the_readme_says() {
    let scratch = TestRepo::new();
    let home = scratch.scratch("home");
    // What `cargo install` leaves: the binary in <prefix>/bin, on PATH.
    let prefix = scratch.scratch("prefix");
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).expect("create bin");
    std::fs::copy(BIN, bin.join("git-lease")).expect("install the binary");
    let lines = install_lines();
    assert!(
        lines[0].starts_with("cargo install --locked --path ."),
        "{lines:?}"
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sh = |script: &str| {
        let mut cmd = std::process::Command::new("bash");
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
        (
            out.status.success(),
            format!(
                "{}\n--- stderr\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    // The README's follow-up line, as written.
    let (ok, out) = sh(&lines[1]);
    assert!(ok, "{}: {out}", lines[1]);
    assert!(prefix.join("share/man/man1/git-lease.1").exists(), "{out}");
    assert!(prefix.join("share/man/man1/git-lease-acquire.1").exists());
    // `git help` needs man; a machine with only git and Rust may not have it (CI installs it).
    let has_man = std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if has_man {
        for help in ["git help lease", "git lease --help"] {
            let (ok, out) = sh(help);
            assert!(
                ok && out.contains("git-lease") && out.contains("acquire"),
                "{help}: {out}"
            );
        }
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must install man (.ci/run does)"
        );
        eprintln!("SKIPPED: git help lease (man is not installed here)");
    }
    // A new shell completes `git lease` and `git-lease`.
    let (ok, out) = sh(
        "source ~/.bashrc; COMP_WORDS=(git lease ac); COMP_CWORD=2; _git_lease; \
         echo \"[${COMPREPLY[*]}]\"; COMP_WORDS=(git-lease list --al); COMP_CWORD=2; \
         _clap_complete_git_lease git-lease --al list; echo \"[${COMPREPLY[*]}]\"",
    );
    assert!(
        ok && out.contains("[acquire]") && out.contains("[--all]"),
        "{out}"
    );
    // The other shells' scripts, and the page itself.
    for shell in ["zsh", "fish"] {
        let (ok, out) = sh(&format!("git lease completions {shell}"));
        assert!(ok && out.contains("git-lease"), "{shell}: {out}");
    }
    let (ok, out) = sh("git lease man");
    assert!(ok && out.contains(".TH"), "{out}");
}

/// Every test docs/SECURITY.md names as the proof of a guarantee exists under that name, so
/// the threat model never cites a test that was renamed or moved away.
#[test]
fn every_test_the_security_doc_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/SECURITY.md")).expect("SECURITY.md");
    let is_test_path = |s: &str| {
        s.contains("::")
            && s.split("::").all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            })
    };
    // Code spans are the odd pieces between backticks.
    let cited: Vec<&str> = doc
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| is_test_path(s))
        .collect();
    assert!(cited.len() >= 5, "SECURITY.md names its tests: {cited:?}");
    for cited in cited {
        let (module, test) = cited.rsplit_once("::").expect("a path");
        let dir = root.join("tests/it").join(module.replace("::", "/"));
        let file = [dir.with_extension("rs"), dir.join("mod.rs")]
            .into_iter()
            .find(|f| f.is_file())
            .unwrap_or_else(|| panic!("SECURITY.md cites `{cited}`: no such test module"));
        let source = std::fs::read_to_string(&file).expect("the test module");
        assert!(
            source.contains(&format!("fn {test}(")),
            "SECURITY.md cites `{cited}`, which {} does not define",
            file.display()
        );
    }
}
