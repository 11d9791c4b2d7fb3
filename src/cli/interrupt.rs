//! Ctrl-C (SIGINT), SIGTERM or SIGHUP during a write through a remote. git's push may or may
//! not have reached the server, so the command must not die without a word: the first signal
//! stops the git commands running (and any started after), and the command then fails with
//! [`Error::Interrupted`], which says that the outcome is unknown and that running the same
//! command again converges. A second signal ends the process at once (exit 130).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use git_lease::remote::redact_url;
use git_lease::Error;

use super::{Context, Failure};

/// How long git's commands get to end on SIGTERM before SIGKILL.
const GIT_GRACE: Duration = Duration::from_secs(1);

/// The signals of an interrupt.
const WATCHED: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The exit code of a second signal, as a shell reports a process SIGINT ended.
const SECOND_SIGNAL_EXIT: i32 = 130;

/// Watches for the signals of an interrupt while a write goes through a remote.
pub(crate) struct Interrupt {
    /// The signal received, 0 while none.
    received: Arc<AtomicUsize>,
}

impl Interrupt {
    /// Starts watching; from now on the signals no longer end the process by themselves.
    ///
    /// The signal is recorded by the handler itself, not by the thread that stops git. A
    /// signal sent to the process goes to its main thread, which blocks none, and the handler
    /// runs before that thread goes on, so [`Interrupt::explain`] (called there once git ended
    /// of the same signal) never misses it.
    pub(crate) fn watch() -> Result<Interrupt, Error> {
        let cannot_install = |e| Error::Io {
            context: "cannot install signal handlers".into(),
            source: e,
        };
        let received = Arc::new(AtomicUsize::new(0));
        for signal in WATCHED {
            let value = usize::try_from(signal).unwrap_or_default();
            signal_hook::flag::register_usize(signal, received.clone(), value)
                .map_err(cannot_install)?;
        }
        let mut signals = signal_hook::iterator::Signals::new(WATCHED).map_err(cannot_install)?;
        std::thread::spawn(move || {
            for (count, _) in signals.forever().enumerate() {
                if count > 0 {
                    std::process::exit(SECOND_SIGNAL_EXIT);
                }
                git_lease::git::stop_commands(GIT_GRACE);
            }
        });
        Ok(Interrupt { received })
    }

    /// Returns the error that replaces `error` when a signal interrupted the write through
    /// `remote`: the outcome is unknown. Without a signal, `error` itself.
    pub(crate) fn explain(&self, error: Error, remote: &str) -> Error {
        let signal = self.received.load(Ordering::SeqCst);
        if signal == 0 {
            return error;
        }
        let name = match i32::try_from(signal) {
            Ok(SIGINT) => "SIGINT (Ctrl-C)",
            Ok(SIGTERM) => "SIGTERM",
            _ => "SIGHUP",
        };
        // An unknown outcome already says what this error says: only git's words are kept.
        let cause = match error {
            Error::OutcomeUnknown { message, .. } => message,
            other => other.chain(),
        };
        Error::Interrupted {
            signal: name.into(),
            remote: remote.into(),
            cause: if cause.is_empty() {
                cause
            } else {
                format!(" ({cause})")
            },
        }
    }
}

/// Runs `body`, a command that writes leases when `writes`, watching for an interrupt when it
/// writes through a remote.
pub(crate) fn guarded(
    ctx: &Context,
    writes: bool,
    body: impl FnOnce() -> Result<u8, Failure>,
) -> Result<u8, Failure> {
    let Some(remote) = ctx.remote.as_deref().filter(|_| writes) else {
        return body();
    };
    let interrupt = Interrupt::watch()?;
    match body() {
        Err(Failure::Lib(e)) => Err(Failure::Lib(interrupt.explain(e, &redact_url(remote)))),
        other => other,
    }
}
