//! The hermetic test harness shared by every module of the `it` test binary.
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

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::Value;
use tempfile::TempDir;

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

/// Where every skip of a run is recorded, one a line: `<kind>\t<test>\t<why>` (see
/// [`skipped`]). `.ci/run` empties it before each `cargo test`, prints it after (`N skipped:
/// …`), and fails on a kind it does not expect.
pub const SKIPS_FILE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/skipped-tests");

/// Why a test (or a part of one) did not run as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// A test of what only git's files backend has, in the reftable run.
    Reftable,
    /// A server the test needs cannot be started here (not root, a program missing).
    Server,
    /// This machine lacks what the test needs (PID namespaces, a cgroup, `man`).
    Host,
    /// It ran, but behind a stand-in for a missing program (the harness's own web front for
    /// lighttpd).
    StandIn,
}

impl Skip {
    /// The kind's name in [`SKIPS_FILE`] (what `.ci/run` expects or refuses).
    pub fn name(self) -> &'static str {
        match self {
            Skip::Reftable => "reftable",
            Skip::Server => "server",
            Skip::Host => "host",
            Skip::StandIn => "stand-in",
        }
    }
}

/// `test`, or the harness's thread name (the running test's) when it is empty.
fn test_named(test: &str) -> String {
    match test {
        "" => std::thread::current().name().unwrap_or("?").to_owned(),
        named => named.to_owned(),
    }
}

/// The one way a test says it did not run as written: a line on the process's stderr (past
/// the harness's capture, so a plain `cargo test` shows it) and a record in [`SKIPS_FILE`],
/// so that no skip passes for a pass silently. `test` names the test (the harness's thread
/// name when empty); `why` says what did not run and why.
pub fn skipped(kind: Skip, test: &str, why: &str) {
    use std::io::Write as _;
    let test = test_named(test);
    let line = match kind {
        Skip::Reftable => format!("SKIPPED under {REF_FORMAT_ENV}=reftable: {test}: {why}"),
        Skip::StandIn => format!("STAND-IN: {test}: {why}"),
        Skip::Server | Skip::Host => format!("SKIPPED: {test}: {why}"),
    };
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    let record = format!(
        "{}\t{test}\t{}\n",
        kind.name(),
        why.replace(['\t', '\n'], " ")
    );
    // One write of one short line in append mode: parallel tests never interleave.
    let _ = std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR"));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(SKIPS_FILE)
        .and_then(|mut f| f.write_all(record.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record the skip in {SKIPS_FILE}: {e}");
    }
}

/// Whether this is CI's run (`CI=true`), where everything the suite needs is installed.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Says that what a test needs is missing here (a server, a program, root): with `CI=true`,
/// where `.ci/run` provides it, a failure; otherwise a skip of `kind` ([`skipped`], `test`
/// naming the test as there). Returns `None`, for the test to return early.
pub fn unavailable<T>(kind: Skip, test: &str, why: &str) -> Option<T> {
    if in_ci() {
        panic!("{}: {why} (CI=true: it must run here)", test_named(test));
    }
    skipped(kind, test, &format!("{why} (CI=true makes this a failure)"));
    None
}

/// Returns true, after recording the skip ([`skipped`]), when this run is the reftable one:
/// for the tests of the files backend's own files (loose refs, `packed-refs`, `.lock` files)
/// that have no meaning in a reftable repository. `why` says what is skipped.
pub fn skip_under_reftable(test: &str, why: &str) -> bool {
    if !reftable() {
        return false;
    }
    skipped(Skip::Reftable, test, why);
    true
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

/// What one process did.
#[derive(Clone, Debug)]
pub struct Run {
    /// The command as typed, for failure messages.
    pub command: String,
    /// The exit code (-1 if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The run of a finished process, named `command` in failure messages.
    pub fn from_output(command: impl Into<String>, out: std::process::Output) -> Run {
        Run {
            command: command.into(),
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `cmd` to completion, capturing its output, and names the run `what`; panics if
    /// it cannot start.
    pub fn capture(mut cmd: Command, what: impl Into<String>) -> Run {
        let what = what.into();
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        Run::from_output(what, out)
    }

    /// Parses stdout as JSON, panicking with the whole run on failure.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim_end())
            .unwrap_or_else(|e| panic!("stdout of `{}` is not JSON ({e}):\n{self}", self.command))
    }

    /// Asserts the exit code, showing the whole run on failure; returns `self` for chaining.
    #[track_caller]
    pub fn code(&self, want: i32) -> &Run {
        assert_eq!(
            self.code, want,
            "`{}` exited {} instead of {want}\n{self}",
            self.command, self.code
        );
        self
    }

    /// Asserts exit code 0.
    #[track_caller]
    pub fn ok(&self) -> &Run {
        self.code(0)
    }

    /// Asserts that stderr contains `needle`.
    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Run {
        self.stream_has("stderr", &self.stderr, needle)
    }

    /// Asserts that stdout contains `needle`.
    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Run {
        self.stream_has("stdout", &self.stdout, needle)
    }

    #[track_caller]
    fn stream_has(&self, name: &str, text: &str, needle: &str) -> &Run {
        assert!(
            text.contains(needle),
            "{name} of `{}` should mention {needle:?}\n{self}",
            self.command
        );
        self
    }

    /// Asserts the exit code and the `outcome` of the JSON answer; returns the answer.
    #[track_caller]
    pub fn outcome(&self, code: i32, want: &str) -> Value {
        self.code(code);
        let v = self.json();
        assert_eq!(v["outcome"], serde_json::json!(want), "{self}");
        v
    }

    /// Asserts that the JSON answer has every `(field, value)` of `fields`; returns the answer.
    #[track_caller]
    pub fn json_has(&self, fields: &[(&str, Value)]) -> Value {
        let v = self.json();
        for (field, want) in fields {
            assert_eq!(&v[*field], want, "{field} of `{}`\n{self}", self.command);
        }
        v
    }
}

/// Returns the `issue` of every entry of the JSON array `list` (`list --json`), in order.
pub fn issues(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("expected a JSON array: {list}"))
        .iter()
        .map(|v| v["issue"].as_str().expect("an issue").to_owned())
        .collect()
}

/// Splits command-line arguments written as one string at white space.
fn words(args: &str) -> Vec<&str> {
    args.split_whitespace().collect()
}

/// Asserts that the JSON object `value` has every `(field, value)` of `fields`.
#[track_caller]
pub fn assert_fields(value: &Value, fields: &[(&str, Value)]) {
    for (field, want) in fields {
        assert_eq!(&value[*field], want, "{field} of {value}");
    }
}

/// Returns the keys that appear more than once in one JSON object of `text` (at any depth),
/// as `path.key`; empty when every object's keys are unique.
///
/// `serde_json::Value` keeps only the last of repeated keys, so a repeated key silently hides
/// a value; this finds them. Panics if `text` is not JSON.
pub fn duplicate_keys(text: &str) -> Vec<String> {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};

    struct Walk<'a>(&'a mut Vec<String>, String);

    impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_none<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let Walk(found, path) = self;
            let mut i = 0;
            while seq
                .next_element_seed(Walk(found, format!("{path}[{i}]")))?
                .is_some()
            {
                i += 1;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let Walk(found, path) = self;
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let here = format!("{path}.{key}");
                if !seen.insert(key) {
                    found.push(here.clone());
                }
                map.next_value_seed(Walk(found, here))?;
            }
            Ok(())
        }
    }

    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text.trim_end());
    serde::de::DeserializeSeed::deserialize(Walk(&mut found, String::new()), &mut de)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    found
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--- exit {}\n--- stdout\n{}--- stderr\n{}---",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A command being prepared: the binary (or git) with the hermetic environment.
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    removes: Vec<OsString>,
    cwd: PathBuf,
    home: PathBuf,
    ceiling: PathBuf,
    stdin: Option<Vec<u8>>,
    /// A directory put first on `PATH` (see [`TestRepo::path_first`]).
    path_first: Option<PathBuf>,
}

impl Cmd {
    /// Adds arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Cmd {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable (on top of the hermetic ones).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Removes an environment variable, hermetic ones included.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cmd {
        self.removes.push(key.as_ref().to_owned());
        self
    }

    /// Puts `dir` first on `PATH`, so that the `git` in it is the one the process runs.
    pub fn path_first(mut self, dir: &Path) -> Cmd {
        self.path_first = Some(dir.to_owned());
        self
    }

    /// Runs the command under `program` (`strace`, for one): `program prefix… command args…`.
    pub fn under<S: AsRef<OsStr>>(mut self, program: &str, prefix: &[S]) -> Cmd {
        let mut args: Vec<OsString> = prefix.iter().map(|a| a.as_ref().to_owned()).collect();
        args.push(std::mem::replace(&mut self.program, program.into()));
        args.append(&mut self.args);
        self.args = args;
        self
    }

    /// Sets `GIT_LEASE_NOW`.
    pub fn now(self, now: &str) -> Cmd {
        self.env("GIT_LEASE_NOW", now)
    }

    /// Runs in `dir` instead of the repository.
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cwd = dir.as_ref().to_owned();
        self
    }

    /// Feeds `input` on stdin.
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Cmd {
        self.stdin = Some(input.into());
        self
    }

    /// Returns the `std::process::Command`, for spawning without waiting.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        hermetic(&mut cmd, &self.home, &self.ceiling);
        if let Some(dir) = &self.path_first {
            cmd.env("PATH", path_with_first(dir));
        }
        cmd.args(&self.args).current_dir(&self.cwd);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        for k in &self.removes {
            cmd.env_remove(k);
        }
        cmd
    }

    fn describe(&self) -> String {
        let name = Path::new(&self.program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut text = name;
        for a in &self.args {
            text.push(' ');
            text += &format!("{:?}", a.to_string_lossy());
        }
        for (k, v) in &self.envs {
            text += &format!(" [{}={}]", k.to_string_lossy(), v.to_string_lossy());
        }
        text
    }

    /// Runs to completion.
    pub fn run(self) -> Run {
        let mut cmd = self.command();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", self.describe()));
        if let Some(input) = &self.stdin {
            let mut pipe = child.stdin.take().expect("stdin is piped");
            pipe.write_all(input).expect("write stdin");
        }
        let out = child.wait_with_output().expect("wait for the child");
        Run::from_output(self.describe(), out)
    }
}

/// A repository in its own temporary directory.
pub struct TestRepo {
    tmp: TempDir,
    root: PathBuf,
    path: PathBuf,
    home: PathBuf,
    bare: bool,
    /// A directory put first on `PATH` of every process started here.
    path_first: Option<PathBuf>,
}

impl TestRepo {
    /// A fresh non-bare repository (`git init`).
    pub fn new() -> TestRepo {
        TestRepo::init(&[])
    }

    /// A fresh bare repository (`git init --bare`).
    pub fn bare() -> TestRepo {
        TestRepo::init(&["--bare"])
    }

    /// A fresh repository made with `git init <extra>` (`--bare`, `--object-format=sha256`,
    /// `--ref-format=reftable`, ...).
    pub fn init(extra: &[&str]) -> TestRepo {
        let bare = extra.contains(&"--bare");
        TestRepo::init_at(if bare { "repo.git" } else { "repo" }, extra)
    }

    /// A fresh repository (`git init <extra>`) acting as `holder` (`lease.holder`), with
    /// `origin` at `url`: a client of a server.
    pub fn client_made_with(extra: &[&str], url: &str, holder: &str) -> TestRepo {
        let repo = TestRepo::mirror_made_with(extra, url);
        repo.git(&["config", "lease.holder", holder]);
        repo
    }

    /// [`TestRepo::client_made_with`] a plain `git init`.
    pub fn client_of(url: &str, holder: &str) -> TestRepo {
        TestRepo::client_made_with(&[], url, holder)
    }

    /// A fresh repository (`git init <extra>`) with only `origin` set, at `url`: a mirror.
    pub fn mirror_made_with(extra: &[&str], url: &str) -> TestRepo {
        let repo = TestRepo::init(extra);
        repo.git(&["remote", "add", "origin", url]);
        repo
    }

    /// Makes a bare repository (`git init --bare <extra>`) and adds it as this one's `origin`,
    /// by its path; returns it (dropping it removes it).
    pub fn add_bare_origin(&self, extra: &[&str]) -> TestRepo {
        let origin = TestRepo::init(&[&["--bare"], extra].concat());
        let path = origin.path().to_str().expect("a UTF-8 temporary path");
        self.git(&["remote", "add", "origin", path]);
        origin
    }

    /// A fresh repository made with `git init <extra>` at `<tmp>/<name>` (`name` may have
    /// several components: git creates the leading directories).
    pub fn init_at(name: &str, extra: &[&str]) -> TestRepo {
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-it.")
            .tempdir()
            .expect("create a temporary directory");
        let root = tmp
            .path()
            .canonicalize()
            .expect("canonicalize the temporary directory");
        let home = root.join("home");
        std::fs::create_dir(&home).expect("create HOME");
        let bare = extra.contains(&"--bare");
        let path = root.join(name);
        let repo = TestRepo {
            tmp,
            root: root.clone(),
            path: path.clone(),
            home,
            bare,
            path_first: None,
        };
        let mut args = vec!["init", "-q"];
        args.extend_from_slice(extra);
        let path_str = path.to_str().expect("a UTF-8 temporary path");
        args.push(path_str);
        repo.git_in(&root, &args);
        // The reftable run must make reftable repositories: git must have read the variable.
        if reftable() && !extra.iter().any(|a| a.starts_with("--ref-format")) {
            assert_eq!(
                repo.ref_format(),
                "reftable",
                "{REF_FORMAT_ENV} was not honoured"
            );
        }
        repo
    }

    /// Puts `dir` first on the `PATH` of every process started here from now on (the binary
    /// and plain git), so that the `git` in it is the one they run.
    pub fn path_first(mut self, dir: &Path) -> TestRepo {
        self.set_path_first(dir);
        self
    }

    /// As [`TestRepo::path_first`], in place.
    pub fn set_path_first(&mut self, dir: &Path) {
        self.path_first = Some(dir.to_owned());
    }

    /// The directory first on `PATH` here, if [`TestRepo::path_first`] set one.
    pub fn first_on_path(&self) -> Option<&Path> {
        self.path_first.as_deref()
    }

    /// The work tree, or the git dir of a bare repository.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary directory holding everything (HOME, the repository, scratch space).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `HOME` of every process started here.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The git dir.
    pub fn git_dir(&self) -> PathBuf {
        if self.bare {
            self.path.clone()
        } else {
            self.path.join(".git")
        }
    }

    /// Whether the repository is bare.
    pub fn is_bare(&self) -> bool {
        self.bare
    }

    /// Creates (if need be) and returns a scratch directory `<tmp>/<name>` outside the
    /// repository.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        dir
    }

    fn base(&self, program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            removes: Vec::new(),
            cwd: self.path.clone(),
            home: self.home.clone(),
            ceiling: self.root.clone(),
            stdin: None,
            path_first: self.path_first.clone(),
        }
    }

    /// The binary under test, in the repository, without `GIT_LEASE_NOW`.
    pub fn lease(&self) -> Cmd {
        self.base(BIN)
    }

    /// Runs the binary with `args` in the repository (system clock).
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.lease().args(args).run()
    }

    /// Runs the binary with `args` in the repository with `GIT_LEASE_NOW=now`.
    pub fn run_at<S: AsRef<OsStr>>(&self, now: &str, args: &[S]) -> Run {
        self.lease().now(now).args(args).run()
    }

    /// Runs the binary with `--json` and `GIT_LEASE_NOW=now`, asserting the exit code, and
    /// returns the parsed output.
    #[track_caller]
    pub fn json_at<S: AsRef<OsStr>>(&self, now: &str, code: i32, args: &[S]) -> Value {
        let run = self.lease().now(now).arg_json().args(args).run();
        run.code(code);
        run.json()
    }

    /// Runs the binary with `--json` for each `(minutes after T0, exit code, arguments)` of
    /// `steps`, in order, the arguments split at white space, asserting each exit code and
    /// that each answer is JSON.
    #[track_caller]
    pub fn json_steps(&self, steps: &[(i64, i32, &str)]) {
        for (min, code, args) in steps {
            self.json_at(&at_min(*min), *code, &words(args));
        }
    }

    /// Runs the binary (human output) for each `(minutes after T0, arguments)` of `steps`, in
    /// order, the arguments split at white space, asserting each exits 0.
    #[track_caller]
    pub fn steps(&self, steps: &[(i64, &str)]) {
        for (min, args) in steps {
            self.run_at(&at_min(*min), &words(args)).ok();
        }
    }

    /// Plain git, hermetic, in the repository; not run yet.
    pub fn git_cmd(&self) -> Cmd {
        self.base("git")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("GIT_AUTHOR_DATE", "1796040000 +0000")
            .env("GIT_COMMITTER_DATE", "1796040000 +0000")
    }

    /// Runs plain git in the repository and returns its stdout without the final newlines;
    /// panics with stderr if git fails.
    #[track_caller]
    pub fn git<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let run = self.git_cmd().args(args).run();
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Runs plain git in `dir`; see [`TestRepo::git`].
    #[track_caller]
    pub fn git_in<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> String {
        let run = self.git_cmd().cwd(dir).args(args).run();
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Runs plain git with `input` on stdin; see [`TestRepo::git`].
    #[track_caller]
    pub fn git_stdin<S: AsRef<OsStr>>(&self, args: &[S], input: &[u8]) -> String {
        let run = self.git_cmd().args(args).stdin(input).run();
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Runs plain git and returns the whole run, failing or not.
    pub fn git_run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.git_cmd().args(args).run()
    }

    /// Returns the commit `refs/leases/<issue>` points at, if the ref exists.
    pub fn tip(&self, issue: &str) -> Option<String> {
        let run = self.git_run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/leases/{issue}^{{commit}}"),
        ]);
        (run.code == 0).then(|| run.stdout.trim().to_owned())
    }

    /// Returns the repository's ref storage format (`files` or `reftable`), as git says.
    pub fn ref_format(&self) -> String {
        self.git(&["rev-parse", "--show-ref-format"])
    }

    /// Returns the lock file git takes to move `refs/leases/<issue>`: the ref's own
    /// `.lock` with the files backend, `reftable/tables.list.lock` (one for every ref) with
    /// reftable.
    pub fn ref_lock(&self, issue: &str) -> PathBuf {
        if self.ref_format() == "reftable" {
            self.git_dir().join("reftable/tables.list.lock")
        } else {
            self.git_dir().join(format!("refs/leases/{issue}.lock"))
        }
    }

    /// Returns the number of commits in the ledger of `issue` (0 if it has none).
    pub fn commit_count(&self, issue: &str) -> usize {
        if self.tip(issue).is_none() {
            return 0;
        }
        self.git(&["rev-list", "--count", &format!("refs/leases/{issue}")])
            .parse()
            .expect("rev-list --count prints a number")
    }

    /// Returns `git for-each-ref` output for everything under `refs/leases/`.
    pub fn lease_refs(&self) -> String {
        self.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/leases/",
        ])
    }

    /// Returns the number of objects in the repository, loose and packed.
    pub fn object_count(&self) -> u64 {
        let [loose, packed] = self.count_objects(["count", "in-pack"]);
        loose + packed
    }

    /// Returns the numbers `git count-objects -v` prints for each of `names` (`count`,
    /// `in-pack`, `packs`, ...), from one run.
    pub fn count_objects<const N: usize>(&self, names: [&str; N]) -> [u64; N] {
        let text = self.git(&["count-objects", "-v"]);
        names.map(|name| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("count-objects -v has no {name}: {text}"))
                .trim()
                .parse()
                .expect("a number")
        })
    }

    /// Everything a write could change: every ref (with reflogs' existence) and the object
    /// count. Equal snapshots before and after a command mean it wrote nothing.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            refs: self.git(&["for-each-ref", "--format=%(refname) %(objectname)"]),
            objects: self.object_count(),
        }
    }

    /// Returns the ledger of `issue` as plain git sees it: `(commit, lease.json)` oldest first.
    pub fn chain(&self, issue: &str) -> Vec<(String, Value)> {
        if self.tip(issue).is_none() {
            return Vec::new();
        }
        let list = self.git(&["rev-list", "--reverse", &format!("refs/leases/{issue}")]);
        list.lines()
            .map(|commit| {
                let text = self.git(&["show", &format!("{commit}:lease.json")]);
                let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                    panic!("lease.json of {commit} is not JSON ({e}):\n{text}")
                });
                (commit.to_owned(), value)
            })
            .collect()
    }

    /// Returns the tip's `lease.json` as plain git sees it.
    pub fn lease_json(&self, issue: &str) -> Value {
        let text = self.git(&["show", &format!("refs/leases/{issue}:lease.json")]);
        serde_json::from_str(&text).expect("lease.json is JSON")
    }

    /// Returns the `lease.json` of commit (or any revision) `rev` as plain git sees it.
    pub fn lease_json_at(&self, rev: &str) -> Value {
        let text = self.git(&["show", &format!("{rev}:lease.json")]);
        serde_json::from_str(&text).expect("lease.json is JSON")
    }

    /// Asserts `git fsck --strict` finds nothing wrong.
    #[track_caller]
    pub fn assert_fsck(&self) {
        let run = self.git_run(&["fsck", "--strict", "--no-dangling"]);
        assert_eq!(run.code, 0, "git fsck --strict failed\n{run}");
        let complaints: Vec<&str> = run
            .stderr
            .lines()
            .chain(run.stdout.lines())
            .filter(|l| !l.starts_with("notice:") && !l.starts_with("Checking"))
            .collect();
        assert!(
            complaints.is_empty(),
            "git fsck --strict complained:\n{run}"
        );
    }
}

impl Default for TestRepo {
    fn default() -> Self {
        TestRepo::new()
    }
}

/// Refs and object count at one moment; see [`TestRepo::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// `for-each-ref` of every ref.
    pub refs: String,
    /// Loose plus packed objects.
    pub objects: u64,
}

impl Cmd {
    /// Adds the global `--json` flag first.
    pub fn arg_json(self) -> Cmd {
        self.args(["--json"])
    }
}

/// Runs `git lease --json <args>` in `repo` at `min` minutes after T0.
pub fn jrun(repo: &TestRepo, min: i64, args: &[&str]) -> Run {
    repo.lease().now(&at_min(min)).arg_json().args(args).run()
}

/// Runs a busy history on 42: acquire, re-acquire, renew, release, release again (nothing),
/// acquire by bob. Returns the events that must be recorded, oldest first.
pub fn busy_42(repo: &TestRepo) -> Vec<&'static str> {
    repo.json_steps(&[
        (0, 0, "acquire 42 --holder alice --ttl 10m"),
        (1, 0, "acquire 42 --holder alice --ttl 10m"),
        (2, 0, "renew 42 --holder alice --ttl 30m"),
        (3, 3, "acquire 42 --holder bob"),
        (4, 0, "release 42 --holder alice"),
        (5, 0, "release 42 --holder alice"),
        (6, 0, "acquire 42 --holder bob --ttl never"),
    ]);
    vec!["acquire", "reacquire", "renew", "release", "acquire"]
}

/// The bound on every wait for a line of `watch` or for a process to end: it only keeps a
/// broken build from hanging the suite, never decides an outcome.
pub const BOUND: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads `stdout` line by line on a thread of its own; the lines arrive on the receiver
/// until the pipe closes (or the receiver is dropped).
pub fn line_reader(stdout: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// The lines `watch` prints, read by a thread as they come.
pub struct Watch {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<Value>,
    stderr: std::path::PathBuf,
}

impl Watch {
    /// Starts `cmd` (a `watch --json`) with its stdout piped to a reading thread and its
    /// stderr in a file of `repo`'s scratch space.
    pub fn spawn(repo: &TestRepo, cmd: Cmd) -> Watch {
        let stderr = repo.scratch("watch").join(format!(
            "watch-{}.err",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut command = cmd.command();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("create the stderr file"));
        let mut child = command.spawn().expect("start git-lease watch");
        let lines = line_reader(child.stdout.take().expect("piped stdout"));
        Watch {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits (at most [`BOUND`]) for the next event that `matches`, keeping every event read
    /// on the way; returns it.
    #[track_caller]
    pub fn wait_for(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.seen.iter().find(|v| matches(v)) {
            return v.clone();
        }
        let deadline = Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let v: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                    self.seen.push(v.clone());
                    if matches(&v) {
                        return v;
                    }
                }
                Err(_) => panic!(
                    "watch never printed {what} within {BOUND:?}; it printed:\n{:#?}\nstderr:\n{}",
                    self.seen,
                    self.stderr()
                ),
            }
        }
    }

    /// Waits (at most [`BOUND`]) for the next line it prints, as text (for its human form).
    #[track_caller]
    pub fn next_line(&mut self) -> String {
        self.lines.recv_timeout(BOUND).unwrap_or_else(|_| {
            panic!(
                "watch printed no line within {BOUND:?}\nstderr:\n{}",
                self.stderr()
            )
        })
    }

    /// Waits for the event `event` of `issue`.
    #[track_caller]
    pub fn wait_event(&mut self, issue: &str, event: &str) -> Value {
        self.wait_for(&format!("{event} of {issue}"), |v| {
            v["issue"] == issue && v["event"] == event
        })
    }

    /// Sends `signal` (`TERM`, `INT`) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits (at most [`BOUND`]) for it to end.
    #[track_caller]
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + BOUND;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "watch did not end within {BOUND:?}\nstderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Reads what is left on its stdout after it ended, into `seen`.
    pub fn drain(&mut self) {
        let deadline = Instant::now() + BOUND;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen
                .push(serde_json::from_str(&line).expect("a JSON line"));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
