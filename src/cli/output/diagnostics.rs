//! What a command says on stderr beside its answer: hints (`hint:` lines, as git's advice),
//! warnings (`warning: …`) and errors a command goes on after (`error: …`): the prefixes of
//! git, and of the error that ends a command.
//!
//! In human output each is printed as it is said. With `--json`, stderr holds JSON only: what
//! is said is kept, and goes into the one object that ends the command's stderr, as its
//! `hints` (docs/JSON.md): the error's, or after a success `{"schema_version", "hints"}` when
//! anything was said. A command that reports as it goes (`run`, whose stderr is a stream of JSON
//! lines, and `watch`, which runs until stopped) says each at once instead, as such an object
//! of its own ([`stream`]). An MCP tool call keeps what it says for its answer ([`captured`]).
//! Every URL's credentials are removed from what is said ([`git_lease::redact::urls`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static JSON: AtomicBool = AtomicBool::new(false);
static STREAM: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Decides, once, whether what is said is kept for a JSON object.
pub(crate) fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

/// From now on, with `--json`, says each thing at once, as `{"schema_version", "hints"}`
/// on a line of its own: for a command whose stderr is a stream of JSON lines.
pub(crate) fn stream() {
    STREAM.store(true, Ordering::Relaxed);
}

thread_local! {
    /// What is said on this thread while [`captured`] runs a body, instead of stderr.
    static CAPTURED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `body`, keeping what it says on this thread (as `--json` keeps it) instead of saying
/// it: an MCP tool's answer carries it to its client, and the server's stderr never sees it.
pub(crate) fn captured<T>(body: impl FnOnce() -> T) -> (T, Vec<String>) {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let answer = body();
    let said = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (answer, said)
}

/// Keeps `text` for [`captured`] if it runs on this thread; gives it back otherwise.
fn capture(text: String) -> Option<String> {
    CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(kept) => {
            kept.push(text);
            None
        }
        None => Some(text),
    })
}

fn keep(text: String) {
    if STREAM.load(Ordering::Relaxed) {
        let value = serde_json::json!({ "hints": [text] });
        eprintln!("{}", super::json::json_text(&value).unwrap_or_default());
        return;
    }
    KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(text);
}

/// Says a hint: each line of `text` as a `hint: ` line, or with `--json` the lines joined
/// into one string.
pub(crate) fn hint(text: &str) {
    let text = &git_lease::redact::urls(text);
    let Some(_) = capture(text.lines().map(str::trim).collect::<Vec<_>>().join(" ")) else {
        return;
    };
    if JSON.load(Ordering::Relaxed) {
        keep(text.lines().map(str::trim).collect::<Vec<_>>().join(" "));
    } else {
        for line in text.lines() {
            eprintln!("hint: {line}");
        }
    }
}

/// Says a warning: `warning: <text>`, in human output and with `--json` alike.
pub(crate) fn warning(text: &str) {
    let text = &git_lease::redact::urls(text);
    let Some(_) = capture(format!("warning: {text}")) else {
        return;
    };
    if JSON.load(Ordering::Relaxed) {
        keep(format!("warning: {text}"));
    } else {
        eprintln!("warning: {text}");
    }
}

/// Says a diagnostic line as it is, `prefix` before it in human output only (`error` for an
/// error the command goes on after, `warning`, or `git lease run` for run's reports).
pub(crate) fn line(prefix: &str, text: &str) {
    let text = &git_lease::redact::urls(text);
    let Some(_) = capture(text.clone()) else {
        return;
    };
    if JSON.load(Ordering::Relaxed) {
        keep(text.to_owned());
    } else {
        eprintln!("{prefix}: {text}");
    }
}

/// Returns (and forgets) what was kept for the JSON object.
pub(crate) fn take() -> Vec<String> {
    std::mem::take(&mut KEPT.lock().unwrap_or_else(|e| e.into_inner()))
}
