//! The hermetic test harness shared by every module of both test binaries, `it` and `zoo`.
//!
//! Each [`TestRepo`] lives in its own temporary directory (tests run in parallel) laid out as
//!
//! ```text
//! <tmp>/home/        HOME for every process started here
//! <tmp>/repo/        the work tree (or <tmp>/repo.git for a bare repository)
//! ```
//!
//! Every process, the `git-lease` binary and plain `git` alike, starts from an empty
//! environment with only `PATH`, `HOME=<tmp>/home`, `GIT_CONFIG_GLOBAL=/dev/null`,
//! `GIT_CONFIG_NOSYSTEM=1`, `LANG=C`, `LC_ALL=C`, `TZ=UTC`, `GIT_CEILING_DIRECTORIES=<tmp>`
//! (so discovery never wanders out of the temporary directory), `GIT_DEFAULT_REF_FORMAT` when
//! the suite runs with it (the reftable run: every repository the tests make is then
//! reftable), `LLVM_PROFILE_FILE` under a coverage run and, when asked for, `GIT_LEASE_NOW`.
//! Nothing the developer has configured (a global `lease.holder`, `user.email`,
//! `lease.remote`) can leak in. A repository made to run another git (the distribution's older
//! one, a stand-in that answers `--version` otherwise: [`TestRepo::path_first`]) has that
//! git's directory first on `PATH`, for the binary and plain git alike.
//!
//! Instants are given as minutes or seconds after [`T0`] (`2026-11-30T12:00:00Z`) with
//! [`at_min`] and [`at`], which return the RFC 3339 text the tool writes, so JSON fields can be
//! compared as strings.
//!
//! Long-running commands (`watch`) run as a [`Watch`]: a child whose output a thread reads line
//! by line, every wait bounded by [`BOUND`].
#![allow(dead_code)]

mod repo;
mod run;
mod skips;
mod watch;

pub use repo::*;
pub use run::*;
pub use skips::*;
pub use watch::*;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::{DateTime, Duration, TimeZone, Utc};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_git-lease");

/// The base instant of every scenario: 2026-11-30T12:00:00Z.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

/// `T0` as RFC 3339.
pub const T0: &str = "2026-11-30T12:00:00Z";

/// Returns the instant `secs` seconds after [`T0`], as the tool writes it.
pub fn at(secs: i64) -> String {
    rfc3339(t0() + Duration::seconds(secs))
}

/// Returns the instant `min` minutes after [`T0`], as the tool writes it.
pub fn at_min(min: i64) -> String {
    at(min * 60)
}

/// Formats an instant the way `lease.json` and `--json` output do.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The variable git reads the ref storage format of new repositories from (`files` or
/// `reftable`); the suite runs once without it and once with `reftable` (`.ci/run`).
pub const REF_FORMAT_ENV: &str = "GIT_DEFAULT_REF_FORMAT";

/// Returns true when this run makes every repository reftable ([`REF_FORMAT_ENV`]).
pub fn reftable() -> bool {
    std::env::var(REF_FORMAT_ENV).is_ok_and(|f| f == "reftable")
}

/// Sets up `cmd` with the hermetic environment described in the module documentation.
pub fn hermetic(cmd: &mut Command, home: &Path, ceiling: &Path) {
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    // Coverage runs (cargo llvm-cov) need their profile file to reach the child.
    if let Some(profile) = std::env::var_os("LLVM_PROFILE_FILE") {
        cmd.env("LLVM_PROFILE_FILE", profile);
    }
    // The suite's second run makes every repository reftable: each `git init` and `git
    // clone` of the tests (client, server, mirror) reads it.
    if let Some(format) = std::env::var_os(REF_FORMAT_ENV) {
        cmd.env(REF_FORMAT_ENV, format);
    }
    cmd.env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .env("TZ", "UTC");
}

/// Returns the harness's `PATH` with `dir` first.
pub fn path_with_first(dir: &Path) -> OsString {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir.to_owned()).chain(std::env::split_paths(&rest)))
        .expect("a PATH made of joinable directories")
}

/// Writes `text` to `path` as a program with permission bits `mode`.
///
/// Tests run on threads, and a child that another test forks inherits every descriptor this
/// process has open until it execs. A program written here through a descriptor of its own
/// could then fail to start, "Text file busy", while such a child still holds that descriptor.
/// So the text goes to a file beside it, and `install(1)`, a process of its own, writes the
/// program: no descriptor open for writing it ever exists in this process.
pub fn write_program(path: &Path, text: &str, mode: u32) {
    let mut name = path.file_name().expect("a program's file name").to_owned();
    name.push(".text");
    let source = path.with_file_name(name);
    std::fs::write(&source, text).expect("write a program's text");
    install_program(&source, path, mode);
    std::fs::remove_file(&source).expect("remove a program's text");
}

/// Copies the program `from` to `to` with permission bits `mode`, in a process of its own
/// (see [`write_program`]).
pub fn install_program(from: &Path, to: &Path, mode: u32) {
    let out = Command::new("install")
        .arg("-m")
        .arg(format!("{mode:o}"))
        .arg(from)
        .arg(to)
        .output()
        .expect("run install(1)");
    assert!(
        out.status.success(),
        "install {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The holders of the tests of claims by programs and of the MCP server.
pub const ALICE: &str = "alice@example.com";
pub const BOB: &str = "bob@example.com";

/// `PATH` with the directory of the binary under test first: `git lease` finds `git-lease`
/// there, as after `cargo install`.
pub fn path_with_binary(extra: &[&Path]) -> String {
    let bin_dir = Path::new(BIN).parent().expect("the binary has a directory");
    let mut dirs: Vec<PathBuf> = extra.iter().map(|d| d.to_path_buf()).collect();
    dirs.push(bin_dir.to_owned());
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs)
        .expect("a PATH")
        .to_string_lossy()
        .into_owned()
}

/// The seed of every generated test's default run (`GIT_LEASE_ADVERSARY_SEED` replaces it),
/// so that a run in CI meets the same cases as the last one.
pub const DEFAULT_SEED: u64 = 20261130;

/// The number the environment variable `name` holds, or `default` when it is unset.
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
        Err(_) => default,
    }
}

/// A bash as a user has it after `cargo install --root <prefix>`: the binary under test
/// installed in `<prefix>/bin`, first on `PATH`, `HOME` at `home`, pagers that print. Returns
/// a runner of scripts, each answering whether it succeeded and its stdout and stderr.
pub fn installed_shell(prefix: &Path, home: &Path) -> impl Fn(&str) -> (bool, String) {
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).expect("create bin");
    install_program(Path::new(BIN), &bin.join("git-lease"), 0o755);
    let path = path_with_first(&bin);
    let home = home.to_owned();
    move |script: &str| {
        let mut cmd = std::process::Command::new("bash");
        hermetic(&mut cmd, &home, &home);
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
    }
}
