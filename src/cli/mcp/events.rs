//! Lease events for the client: `git lease watch --json` run in a thread of its own, each
//! event a notice for the connection to send as a logging notification.

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::{open, Notice, State};
use crate::cli::Failure;

/// Writes the watch's output as notices, one JSON event a line; its first flush (after the
/// ledgers it starts from are read) says that the watch has started.
pub(super) struct Sink {
    line: Vec<u8>,
    notices: mpsc::UnboundedSender<Notice>,
    started: watch::Sender<bool>,
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                let _ = self.notices.send(Notice::Event(event));
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.started.send_replace(true);
        Ok(())
    }
}

/// Follows the ledgers in a thread of its own, as `git lease watch --json` does, until a
/// signal or the end of the connection.
pub(super) fn start_watch(
    dir: PathBuf,
    (remote, unshared): (Option<String>, Option<git_lease::backend::Unshared>),
    notices: mpsc::UnboundedSender<Notice>,
    started: watch::Sender<bool>,
) {
    std::thread::spawn(move || {
        let state = State {
            dir,
            remote: remote.clone(),
            unshared,
            secrets: Mutex::default(),
            bound: super::bound::Bound::new(notices.clone()),
            watching: started.subscribe(),
        };
        let result = open(&state, remote).map_err(Failure::from).and_then(|ctx| {
            let mut sink = Sink {
                line: Vec::new(),
                notices: notices.clone(),
                started: started.clone(),
            };
            let args = crate::cli::watch::WatchArgs {
                since: None,
                interval: None,
                prefix: None,
                holder: None,
            };
            crate::cli::watch::watch(&ctx, args, &mut sink)
        });
        if let Err(e) = result {
            let message = match e {
                Failure::Lib(e) => e.chain(),
                Failure::Io(e) => e.to_string(),
            };
            let _ = notices.send(Notice::Warning(format!(
                "lease events will not be notified: {}",
                git_lease::redact::urls(&message)
            )));
        }
        // Tool calls no longer wait for it.
        started.send_replace(true);
    });
}
