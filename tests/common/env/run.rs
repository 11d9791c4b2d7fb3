//! What one process did ([`Run`]), and a command being prepared with the hermetic environment
//! ([`Cmd`]); [`race`] runs several at once.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};

use serde_json::Value;

use super::{at_min, hermetic, path_with_first, TestRepo};

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
    pub(super) program: OsString,
    pub(super) args: Vec<OsString>,
    pub(super) envs: Vec<(OsString, OsString)>,
    pub(super) removes: Vec<OsString>,
    pub(super) cwd: PathBuf,
    pub(super) home: PathBuf,
    pub(super) ceiling: PathBuf,
    pub(super) stdin: Option<Vec<u8>>,
    /// A directory put first on `PATH` (see [`TestRepo::path_first`]).
    pub(super) path_first: Option<PathBuf>,
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

/// Runs every command of `cmds` at once (each on its own thread, released together by a
/// barrier) and returns their runs in the same order.
pub fn race(cmds: Vec<Cmd>) -> Vec<Run> {
    let barrier = Arc::new(Barrier::new(cmds.len()));
    let handles: Vec<_> = cmds
        .into_iter()
        .enumerate()
        .map(|(i, cmd)| {
            let barrier = Arc::clone(&barrier);
            let mut command = cmd.command();
            command.stdin(Stdio::null());
            std::thread::spawn(move || {
                barrier.wait();
                Run::capture(command, format!("racer {i}"))
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a racer thread panicked"))
        .collect()
}
