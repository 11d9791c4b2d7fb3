//! Doctor's look at a remote: reaching it (what it shows of itself), and the probe pushes to a
//! scratch ref of its own, `refs/lease-probe/<random>` ([`crate::probe`]), that show whether
//! it refuses a push whose expected old value is stale, and what its hook says.
//!
//! The compare-and-swap probe must make the server, not the client, judge a stale old value:
//! git's `--force-with-lease` compares the expected value with the remote's ref advertisement
//! before it sends anything, so a value that is stale already in the advertisement never
//! reaches the server. git runs the `pre-push` hook after it read the advertisement and before
//! it sends its update commands; the probe's push runs with a `pre-push` hook of its own
//! (`core.hooksPath` set to a temporary directory for that one command) that moves the scratch
//! ref with another push. The outer push then sends an old value that was true when it was
//! advertised and is stale at the server when the update arrives, on every transport (over
//! http the advertisement and the update are separate requests anyway). A server that honours
//! old values refuses it and keeps the ref where the inner push moved it; one that does not
//! takes it (or answers "ok" without taking it). A server that serves one connection at a
//! time never answers the inner push while the outer one holds the connection: the probe
//! gives up after [`MOVE_LIMIT`] and says so (over that URL nothing can move between a push's
//! advertisement and its update anyway).
//!
//! What the server shows of itself (its `agent=`, the protocol it speaks, its capabilities)
//! git shows only in its packet trace (`GIT_TRACE_PACKET`), which these commands write to a
//! temporary file: it is read for information, never to decide a check but the capabilities.

use std::path::Path;
use std::process::Command;

use gix::ObjectId;

use crate::probe::{ProbeReport, PROBE_PREFIX, REPORT_ONLY_OPTION};
use crate::remote::refusal::lock_in_the_way;
use crate::remote::{backoff, hook_verdict, HookVerdict, Remote};

/// What reaching a remote showed.
#[derive(Clone, Debug, Default)]
pub(super) struct Reached {
    /// The protocol version the remote answered a fetch's first request with (`0`, `1`, `2`).
    pub protocol: Option<u8>,
    /// Its `agent=` capability (upload-pack's).
    pub agent: Option<String>,
}

/// What the probe pushes showed.
#[derive(Clone, Debug)]
pub(super) struct Probed {
    /// receive-pack's capabilities as advertised to the first push, when the trace showed them.
    pub capabilities: Option<Vec<String>>,
    /// The hook's report of itself, when one answered.
    pub report: Option<ProbeReport>,
    /// Why the scratch ref could not be made: a hook declined it, or the push failed.
    pub refused: Option<Refused>,
    /// Whether the server honoured a stale expected old value.
    pub cas: Cas,
    /// Why the scratch ref could not be removed, when it could not.
    pub left_behind: Option<String>,
}

/// How the first probe push failed.
#[derive(Clone, Debug)]
pub(super) enum Refused {
    /// A hook declined it.
    Hook(HookVerdict),
    /// Anything else: what git said.
    Push(String),
}

/// What the server did with a push whose expected old value was stale at its arrival.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Cas {
    /// It refused it and kept the ref.
    Honoured,
    /// It took it, or said it did: what it did.
    Ignored(String),
    /// The probe could not tell: why.
    Unknown(String),
    /// The server took no second connection while the probe's push held one: it serves one
    /// at a time (within this many seconds).
    OneAtATime(u64),
}

/// The `pre-push` hook of the compare-and-swap probe: it moves the scratch ref with a push of
/// its own (hooks off) and leaves a mark that it did; failing, it stops the outer push.
const PRE_PUSH: &str = "#!/bin/sh\n\
# git lease doctor: moves the probe ref after this push read the remote's refs and before it\n\
# sends its update, so that the old value it sends is stale when it arrives.\n\
cat >/dev/null\n\
GIT_TRACE_PACKET=\"$GIT_LEASE_DOCTOR_TRACE\" git push --porcelain --no-verify \"$1\" \"$GIT_LEASE_DOCTOR_MOVE\" >\"$GIT_LEASE_DOCTOR_LOG\" 2>&1 || exit 1\n\
: >\"$GIT_LEASE_DOCTOR_MOVED\"\n";

/// How long the compare-and-swap probe's push may take, its hook's push included: a server
/// that serves one connection at a time never answers the hook's push while the probe's own
/// holds the connection.
const MOVE_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Reaches `remote` with `git ls-remote` of `pattern` (a ref that does not exist, so that
/// little is listed), traced into `scratch`; what git said when it could not.
pub(super) fn reach(remote: &Remote, pattern: &str, scratch: &Path) -> Result<Reached, String> {
    let trace = scratch.join("ls-remote.trace");
    let mut cmd = remote.git().map_err(|e| e.to_string())?;
    cmd.env("LC_ALL", "C")
        .env("GIT_TRACE_PACKET", &trace)
        .args(["ls-remote", "--"])
        .arg(remote.target())
        .arg(pattern);
    let out = run(remote, cmd, "git ls-remote")?;
    if !out.0 {
        return Err(out.2);
    }
    let trace = std::fs::read_to_string(&trace).unwrap_or_default();
    let received: Vec<&str> = trace.lines().filter_map(received).collect();
    // A server that says no version speaks version 0 (git's own, or an empty repository's
    // answer of nothing but a flush).
    let first = received
        .iter()
        .find(|p| !p.starts_with("# service=") && !matches!(**p, "0000" | "0001" | "0002"));
    let protocol = (!received.is_empty()).then(|| match first.copied() {
        Some("version 2") => 2,
        Some("version 1") => 1,
        _ => 0,
    });
    let agent = match protocol {
        Some(2) => received
            .iter()
            .find_map(|p| p.strip_prefix("agent="))
            .map(str::to_owned),
        _ => capabilities(&received).and_then(|caps| agent_of(&caps)),
    };
    Ok(Reached { protocol, agent })
}

/// Asks the hook of `remote` for its report with one push that writes nothing: `root` to the
/// scratch ref `probe`, with [`REPORT_ONLY_OPTION`]. `None` when no report came (no hook, a
/// server without push options, a push that failed); a scratch ref an older hook let through
/// is removed.
pub(super) fn report_only(
    remote: &Remote,
    probe: &str,
    root: ObjectId,
    scratch: &Path,
) -> Option<ProbeReport> {
    let mut cmd = push_command(remote, &scratch.join("hooks")).ok()?;
    cmd.args(["-o", REPORT_ONLY_OPTION, "--no-verify", "--"])
        .arg(remote.target())
        .arg(format!("{root}:{probe}"));
    let (written, _, stderr) = run(remote, cmd, "git push").ok()?;
    if written {
        let mut cmd = push_command(remote, &scratch.join("hooks")).ok()?;
        cmd.args(["--no-verify", "--"])
            .arg(remote.target())
            .arg(format!(":{probe}"));
        let _ = run(remote, cmd, "git push");
    }
    ProbeReport::find(&stderr)
}

/// Runs the probe pushes against `remote` on the scratch ref `probe` with the commits
/// `[root, moved, stale]`, in `scratch` (a private temporary directory).
pub(super) fn probe(
    remote: &Remote,
    probe: &str,
    [root, moved, stale]: [ObjectId; 3],
    scratch: &Path,
) -> Probed {
    let hooks = scratch.join("hooks");
    let trace = scratch.join("push.trace");
    let mut probed = Probed {
        capabilities: None,
        report: None,
        refused: None,
        cas: Cas::Unknown("the probe ref could not be made".into()),
        left_behind: None,
    };
    // Make the scratch ref; the hook (if any) answers this push with its report.
    let made = push_past_locks(remote, || {
        let mut cmd = push_command(remote, &hooks)?;
        cmd.env("GIT_TRACE_PACKET", &trace)
            .args(["--no-verify", "--"])
            .arg(remote.target())
            .arg(format!("{root}:{probe}"));
        Ok(cmd)
    });
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let received: Vec<&str> = text.lines().filter_map(received).collect();
    probed.capabilities = capabilities(&received);
    let (ok, stdout, stderr) = match made {
        Ok(out) => out,
        Err(message) => {
            probed.refused = Some(Refused::Push(message));
            return probed;
        }
    };
    probed.report = ProbeReport::find(&stderr);
    if !ok {
        probed.refused = Some(if stdout.contains("hook declined") {
            Refused::Hook(hook_verdict(&stderr))
        } else {
            Refused::Push(failed_push_message(&stdout, &stderr))
        });
        return probed;
    }
    probed.cas = compare_and_swap(remote, probe, [root, moved, stale], scratch);
    // Then, whatever the server did, remove it.
    let removed = push_past_locks(remote, || {
        let mut cmd = push_command(remote, &hooks)?;
        cmd.args(["--no-verify", "--"])
            .arg(remote.target())
            .arg(format!(":{probe}"));
        Ok(cmd)
    });
    match removed {
        Ok((true, _, _)) => {}
        Ok((false, stdout, stderr)) => {
            probed.left_behind = Some(failed_push_message(&stdout, &stderr))
        }
        Err(message) => probed.left_behind = Some(message),
    }
    probed
}

/// The second step of the probe: pushes `stale` over `root` while a `pre-push` hook moves the
/// ref to `moved` first, then reads where the ref is. A step that a lock of the server got in
/// the way of tells nothing: the ref is put back at `root` and the step made again, at most
/// [`LOCKED_TRIES`] times.
fn compare_and_swap(remote: &Remote, probe: &str, commits: [ObjectId; 3], scratch: &Path) -> Cas {
    let mut attempt = 0;
    loop {
        let why = match swap_once(remote, probe, commits, scratch) {
            Ok(cas) => return cas,
            Err(locked) => locked,
        };
        attempt += 1;
        if attempt >= LOCKED_TRIES {
            return Cas::Unknown(why);
        }
        backoff(attempt - 1);
        if let Err(why) = put_back(remote, probe, commits[0], scratch) {
            return Cas::Unknown(why);
        }
    }
}

/// Puts the probe ref `probe` back at `root` after a step that told nothing.
fn put_back(remote: &Remote, probe: &str, root: ObjectId, scratch: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(scratch.join("moved"));
    let pushed = push_past_locks(remote, || {
        let mut cmd = push_command(remote, &scratch.join("no-hooks"))?;
        cmd.args(["--force", "--no-verify", "--"])
            .arg(remote.target())
            .arg(format!("{root}:{probe}"));
        Ok(cmd)
    })?;
    match pushed {
        (true, _, _) => Ok(()),
        (false, stdout, stderr) => Err(failed_push_message(&stdout, &stderr)),
    }
}

/// One compare-and-swap step of the probe ([`compare_and_swap`]): what the server did, or what
/// it said when a lock of its own was in the way, which tells nothing.
fn swap_once(
    remote: &Remote,
    probe: &str,
    [root, moved, stale]: [ObjectId; 3],
    scratch: &Path,
) -> Result<Cas, String> {
    let hooks = scratch.join("hooks");
    let mark = scratch.join("moved");
    let log = scratch.join("moved.log");
    if let Err(e) = write_pre_push(&hooks) {
        return Ok(Cas::Unknown(format!(
            "cannot write the probe's pre-push hook: {e}"
        )));
    }
    let inner_trace = scratch.join("moved.trace");
    let mut cmd = match push_command(remote, &hooks) {
        Ok(cmd) => cmd,
        Err(message) => return Ok(Cas::Unknown(message)),
    };
    cmd.env("GIT_LEASE_DOCTOR_TRACE", &inner_trace)
        .env("GIT_LEASE_DOCTOR_MOVE", format!("{moved}:{probe}"))
        .env("GIT_LEASE_DOCTOR_MOVED", &mark)
        .env("GIT_LEASE_DOCTOR_LOG", &log)
        .arg(format!("--force-with-lease={probe}:{root}"))
        .arg("--")
        .arg(remote.target())
        .arg(format!("{stale}:{probe}"));
    let shown = format!("git push {}", remote.name());
    let (reported_ok, stdout, stderr) = match remote.run_git_within(cmd, &shown, MOVE_LIMIT) {
        Ok(out) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        // The hook's push never heard from the server: it serves one connection at a time.
        Err(_) if !mark.exists() && !heard(&inner_trace) => {
            return Ok(Cas::OneAtATime(MOVE_LIMIT.as_secs()));
        }
        Err(e) => return Ok(Cas::Unknown(e.to_string())),
    };
    if !mark.exists() {
        let inner = std::fs::read_to_string(&log).unwrap_or_default();
        let said = one_line(&crate::remote::redact_urls(&format!("{inner}\n{stderr}")));
        let why = format!("the probe could not move its ref behind its own push: {said}");
        return match lock_in_the_way(&inner) {
            Some(_) => Err(why),
            None => Ok(Cas::Unknown(why)),
        };
    }
    weigh(
        remote,
        probe,
        [moved, stale],
        (reported_ok, &stdout, &stderr),
    )
}

/// Judges the probe's stale push, which git reported as `pushed` (its success, stdout and
/// stderr), by where the probe ref `probe` is now: at `moved` (kept) or at `stale` (taken).
fn weigh(
    remote: &Remote,
    probe: &str,
    [moved, stale]: [ObjectId; 2],
    (reported_ok, stdout, stderr): (bool, &str, &str),
) -> Result<Cas, String> {
    let refused = stdout
        .lines()
        .any(|l| l.starts_with('!') && l.contains(probe));
    // Refused for a lock, the push was never weighed against its expected old value.
    let locked = lock_in_the_way(stderr).filter(|_| !reported_ok);
    let now_at = match probe_ref_at(remote, probe) {
        Ok(at) => at,
        Err(message) => return Ok(Cas::Unknown(message)),
    };
    let (moved, stale) = (moved.to_string(), stale.to_string());
    if let (Some(lock), Some(at)) = (locked, &now_at) {
        if *at == moved {
            return Err(format!("the probe's stale push met a lock: {lock}"));
        }
    }
    Ok(match now_at {
        Some(at) if at == stale => Cas::Ignored(format!(
            "it {} a push whose expected old value was stale",
            if reported_ok {
                "accepted"
            } else {
                "refused, yet applied,"
            }
        )),
        Some(at) if at == moved && reported_ok => Cas::Ignored(
            "it answered ok to a push whose expected old value was stale, without making it (a \
             claimer that lost the race is told it won)"
                .into(),
        ),
        Some(at) if at == moved && refused => Cas::Honoured,
        Some(at) if at == moved => Cas::Unknown(format!(
            "the push failed without refusing the update: {}",
            failed_push_message(stdout, stderr)
        )),
        other => Cas::Unknown(format!(
            "the probe ref is at {} afterwards, neither value pushed",
            other.as_deref().unwrap_or("nothing")
        )),
    })
}

/// Writes the probe's `pre-push` hook into `hooks`.
fn write_pre_push(hooks: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(hooks)?;
    let hook = hooks.join("pre-push");
    std::fs::write(&hook, PRE_PUSH)?;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o700))
}

/// Where the probe ref `probe` is on `remote` now (`None`: nowhere), by `git ls-remote`; or
/// what went wrong.
fn probe_ref_at(remote: &Remote, probe: &str) -> Result<Option<String>, String> {
    let mut cmd = remote.git().map_err(|e| e.to_string())?;
    cmd.env("LC_ALL", "C")
        .args(["ls-remote", "--"])
        .arg(remote.target())
        .arg(probe);
    match run(remote, cmd, "git ls-remote")? {
        (true, listed, _) => Ok(listed
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .find(|(_, name)| *name == probe)
            .map(|(id, _)| id.to_owned())),
        (false, stdout, stderr) => Err(failed_push_message(&stdout, &stderr)),
    }
}

/// `git -c core.hooksPath=<hooks> push --porcelain`, in the C locale.
fn push_command(remote: &Remote, hooks: &Path) -> Result<Command, String> {
    let mut cmd = remote.git().map_err(|e| e.to_string())?;
    cmd.env("LC_ALL", "C")
        .arg("-c")
        .arg(format!("core.hooksPath={}", hooks.display()))
        .args(["push", "--porcelain"]);
    Ok(cmd)
}

/// Runs a git command of the remote within its time limit: (succeeded, stdout, stderr), or
/// the message of a command that could not run or was stopped.
fn run(remote: &Remote, cmd: Command, shown: &str) -> Result<(bool, String, String), String> {
    match remote.run_git(cmd, &format!("{shown} {}", remote.name())) {
        Ok(out) => Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// How many times a push of the probe is made while the server finds a lock in its way: a
/// concurrent writer holds it for a moment (with reftable, the lock of every ref), and git's
/// receive-pack then gives up at once.
const LOCKED_TRIES: u32 = 5;

/// Runs the push that `command` makes, and again after a backoff while the server found a lock
/// in its way ([`lock_in_the_way`]), at most [`LOCKED_TRIES`] times; returns the last one's
/// success, stdout and stderr.
fn push_past_locks(
    remote: &Remote,
    command: impl Fn() -> Result<Command, String>,
) -> Result<(bool, String, String), String> {
    let mut attempt = 0;
    loop {
        let pushed = run(remote, command()?, "git push")?;
        let (ok, _, stderr) = &pushed;
        if *ok || attempt + 1 >= LOCKED_TRIES || lock_in_the_way(stderr).is_none() {
            return Ok(pushed);
        }
        backoff(attempt);
        attempt += 1;
    }
}

/// What a failed push said: its rejections and git's messages, on one line.
fn failed_push_message(stdout: &str, stderr: &str) -> String {
    let rejections: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
    one_line(&format!("{}\n{stderr}", rejections.join("\n")))
}

/// `text`'s non-empty lines, trimmed, joined with `; `.
fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "error: failed to push some refs to")
        .collect();
    if lines.is_empty() {
        "it said nothing".to_owned()
    } else {
        lines.join("; ")
    }
}

/// Returns the payload of a packet git received, from one line of its packet trace
/// (`12:00:00.000000 pkt-line.c:86  packet:  ls-remote< version 2`).
fn received(line: &str) -> Option<&str> {
    let rest = line.split_once("packet:")?.1.trim_start();
    let (label, payload) = rest.split_once(' ')?;
    label.ends_with('<').then_some(payload)
}

/// Returns whether the packet trace at `path` shows anything received.
fn heard(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| received(l).is_some()))
}

/// Returns the capabilities of the first advertised ref among received packets (after the
/// `\0` the trace shows as the two characters `\0`).
fn capabilities(received: &[&str]) -> Option<Vec<String>> {
    received.iter().find_map(|p| {
        p.split_once("\\0")
            .map(|(_, caps)| caps.split_whitespace().map(str::to_owned).collect())
    })
}

/// Returns the `agent=` of a capability list.
pub(super) fn agent_of(capabilities: &[String]) -> Option<String> {
    capabilities
        .iter()
        .find_map(|c| c.strip_prefix("agent="))
        .map(str::to_owned)
}

/// A probe's scratch: a temporary directory (named from `prefix`) for its own hooks, a nonce,
/// and the scratch ref the nonce names under [`PROBE_PREFIX`].
pub(super) fn scratch(prefix: &str) -> crate::Result<(tempfile::TempDir, String, String)> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| crate::Error::Io {
            context: "cannot make a temporary directory for the probe".into(),
            source,
        })?;
    let nonce = format!("{:016x}{:08x}", fastrand::u64(..), std::process::id());
    let probe = format!("{PROBE_PREFIX}{nonce}");
    Ok((dir, nonce, probe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packet_trace_shows_what_the_server_advertised() {
        let trace = "00:51:41.846528 pkt-line.c:86           packet:    ls-remote> git-upload-pack /srv.git\\0host=h\\0\\0version=2\\0\n\
                     00:51:41.850468 pkt-line.c:86           packet:    ls-remote< version 2\n\
                     00:51:41.850496 pkt-line.c:86           packet:    ls-remote< agent=git/2.47.3\n\
                     00:51:41.906709 pkt-line.c:86           packet:         push< 0000000000000000000000000000000000000000 capabilities^{}\\0report-status delete-refs atomic ofs-delta agent=git/2.47.3\n\
                     00:51:41.906798 pkt-line.c:86           packet:         push> 0000 1111 refs/x\\0 report-status agent=git/2.40.0\n";
        let received: Vec<&str> = trace.lines().filter_map(received).collect();
        assert_eq!(received[0], "version 2");
        let caps = capabilities(&received).expect("capabilities");
        assert!(caps.contains(&"atomic".to_owned()));
        assert_eq!(agent_of(&caps).as_deref(), Some("git/2.47.3"));
    }
}
