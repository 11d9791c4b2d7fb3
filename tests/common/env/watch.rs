//! Long-running commands (`watch`) as a [`Watch`]: a child whose output a thread reads line
//! by line, every wait bounded by [`BOUND`].

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::Value;

use super::{Cmd, TestRepo};

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
