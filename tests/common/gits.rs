//! Other gits than the one first on the harness's `PATH`: a stand-in that answers `--version`
//! as told and runs a real git for everything else, logging what it ran; and the binary run
//! with such a git first on its `PATH`.

use std::path::{Path, PathBuf};

use crate::env::{self, at_min, Run, TestRepo};

/// The git the harness's `PATH` finds first, as an absolute path.
pub fn harness_git() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git is on PATH")
}

/// A stand-in `git` in `<scratch>/fake-git/`: it answers `--version` with `says` and runs the
/// harness's own git for everything else, writing each such command's arguments, one line
/// each, to `<scratch>/fake-git.log`. Returns its directory and the log.
pub fn fake_git(scratch: &Path, says: &str) -> (PathBuf, PathBuf) {
    stand_in(scratch, says, &harness_git())
}

/// A stand-in as [`fake_git`] makes, running `real` for everything but `--version`.
pub fn stand_in(scratch: &Path, says: &str, real: &Path) -> (PathBuf, PathBuf) {
    let dir = scratch.join("fake-git");
    std::fs::create_dir_all(&dir).expect("create the stand-in's directory");
    let log = scratch.join("fake-git.log");
    std::fs::write(&log, "").expect("create the log");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{says}'; exit 0; fi\n\
         echo \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real.display()
    );
    let path = dir.join("git");
    env::write_program(&path, &script, 0o755);
    (dir, log)
}

/// `git lease --json <args>` in `repo` at `min` minutes after T0, with `git` from `dir` if
/// given.
pub fn lease(repo: &TestRepo, dir: Option<&Path>, min: i64, args: &[&str]) -> Run {
    let mut cmd = repo.lease().now(&at_min(min)).arg_json();
    if let Some(dir) = dir {
        cmd = cmd.path_first(dir);
    }
    cmd.args(args).run()
}
