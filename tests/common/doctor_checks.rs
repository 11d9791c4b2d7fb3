//! `git lease doctor` run in a client, and its answer read back: each check's status and
//! message, the verdicts it keeps in the client's git dir, and no probe ref left behind.

use serde_json::Value;

use crate::env::{Run, TestRepo};
use crate::server::lease;

/// `git lease doctor <extra>` in `client` at client time `secs`.
pub fn doctor(client: &TestRepo, secs: i64, extra: &[&str]) -> Run {
    let mut args = vec!["doctor"];
    args.extend_from_slice(extra);
    lease(client, secs, &args)
}

/// The line of check `name` in doctor's human output, without its status word; and that word.
#[track_caller]
pub fn check<'a>(run: &'a Run, name: &str) -> (&'a str, &'a str) {
    run.stdout
        .lines()
        .find_map(|l| {
            let (word, rest) = l.split_once(' ')?;
            let rest = rest.trim_start().strip_prefix(&format!("{name}: "))?;
            Some((word, rest))
        })
        .unwrap_or_else(|| panic!("no {name} line\n{run}"))
}

#[track_caller]
pub fn assert_check(run: &Run, name: &str, status: &str, needle: &str) {
    let (word, text) = check(run, name);
    assert_eq!(word, status, "{name}\n{run}");
    assert!(text.contains(needle), "{name} should say {needle:?}\n{run}");
}

/// The checks of doctor's JSON answer by name: (status, message, fix).
pub fn checks(answer: &Value) -> Vec<(String, String, String, Option<String>)> {
    answer["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().expect("name").to_owned(),
                c["status"].as_str().expect("status").to_owned(),
                c["message"].as_str().expect("message").to_owned(),
                c["fix"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// Where `client`'s user keeps what doctor's probe found of servers (docs/SERVER.md).
pub fn verdict_dir(client: &TestRepo) -> std::path::PathBuf {
    client.home().join(".local/state/git-lease/servers")
}

/// The verdicts that a server ignores expected old values, kept for `client`'s user.
pub fn verdicts(client: &TestRepo) -> Vec<String> {
    records(client, false)
}

/// The records of servers found safe to write through, kept for `client`'s user.
pub fn allowed(client: &TestRepo) -> Vec<String> {
    records(client, true)
}

pub fn records(client: &TestRepo, allowed: bool) -> Vec<String> {
    match std::fs::read_dir(verdict_dir(client)) {
        Ok(entries) => entries
            .map(|e| e.expect("an entry").path())
            .filter(|path| path.extension().is_some_and(|x| x == "allowed") == allowed)
            .map(|path| std::fs::read_to_string(path).expect("a verdict"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[track_caller]
pub fn assert_no_probe_ref(refs: &str) {
    assert!(
        !refs.contains("refs/lease-probe/"),
        "a probe ref was left behind:\n{refs}"
    );
}
