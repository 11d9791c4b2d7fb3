//! A one-line progress counter on stderr for the long commands (`verify`, `sync`), drawn only
//! when stderr is a terminal.
//!
//! Hand-written rather than a progress-bar crate: indicatif, used before, links libm for its
//! rate estimate, and loading that one more shared library cost every `git-lease` process
//! about 60 µs (3% of a whole `acquire`, measured with `perf stat`) for a counter that two
//! commands draw.

use std::cell::Cell;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the line is redrawn at most.
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// `<what> <done>/<total> ledgers`, redrawn in place.
pub(crate) struct Progress {
    what: &'static str,
    enabled: bool,
    total: Cell<u64>,
    drawn: Cell<Option<Instant>>,
}

impl Progress {
    /// A counter of `total` ledgers (0 while unknown), drawn only on a terminal.
    pub(crate) fn new(total: u64, what: &'static str) -> Progress {
        Progress {
            what,
            enabled: std::io::stderr().is_terminal(),
            total: Cell::new(total),
            drawn: Cell::new(None),
        }
    }

    pub(crate) fn set_length(&self, total: u64) {
        self.total.set(total);
    }

    /// Redraws with `done` ledgers done, unless it was drawn less than 100 ms ago.
    pub(crate) fn set_position(&self, done: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self
            .drawn
            .get()
            .is_some_and(|t| now.duration_since(t) < REDRAW_EVERY)
        {
            return;
        }
        self.drawn.set(Some(now));
        let mut err = std::io::stderr().lock();
        // Progress is best effort: a closed stderr must not fail the command.
        let _ = write!(
            err,
            "\r\x1b[2K{} {done}/{} ledgers",
            self.what,
            self.total.get()
        );
        let _ = err.flush();
    }

    /// Erases the line, if anything was drawn.
    pub(crate) fn finish_and_clear(&self) {
        if self.drawn.get().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
