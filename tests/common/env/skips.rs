//! Every skip said and recorded: a test that did not run as written prints why on stderr and
//! adds a line to [`SKIPS_FILE`], which `.ci/run` reports.

use super::{reftable, REF_FORMAT_ENV};

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
