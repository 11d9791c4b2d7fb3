//! `git lease doctor`: a remote checked as the engine it will be, and this clone beside it.
//!
//! Each check is one line: `ok`, `warn` or `fail`, what was found, and what to do. This clone
//! ([`local`]): its git, its ref storage, `lease.remote`, and settings that work against the
//! ledgers. The remote ([`engine`]): reached (its transport, protocol and `agent=`); its
//! capabilities; whether it refuses a push whose expected old value is stale (the
//! compare-and-swap every claim relies on), which is remembered for the remote's writes
//! ([`crate::remote::VERDICT_DIR`]); its hook, as it reports itself to a probe push
//! ([`crate::probe`]): version, policy, who it takes you to be, beside your holder name, and
//! its clock, beside yours.

mod engine;
pub(crate) mod judge;
pub mod local;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::holder::Holder;
use crate::ledger::Ledger;
use crate::probe::ProbeReport;
use crate::remote::HookVerdict;
use crate::remote::Remote;
use engine::{Cas, Refused};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// It works, with a danger or a limit worth fixing.
    Warn,
    /// It does not work as the engine of claims.
    Fail,
}

impl Status {
    /// `ok`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check: its stable name, how it came out, what was found, and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check's stable name (`compare_and_swap`, `identity`, ...).
    pub name: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub message: String,
    /// What to do about it (a command to run), when something is to be done.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, message: &str) -> Check {
        Check {
            name,
            status: Status::Ok,
            message: message.to_owned(),
            fix: None,
        }
    }

    fn warn(name: &'static str, message: &str, fix: &str) -> Check {
        Check {
            name,
            status: Status::Warn,
            message: message.to_owned(),
            fix: Some(fix.to_owned()),
        }
    }

    fn fail(name: &'static str, message: &str, fix: &str) -> Check {
        Check {
            name,
            status: Status::Fail,
            message: message.to_owned(),
            fix: Some(fix.to_owned()),
        }
    }
}

/// What the remote showed of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Server {
    /// How it is reached: `git://`, `http://`, `https://`, `ssh`, `file`, or a remote helper.
    pub transport: String,
    /// The protocol version it answered a fetch with (0, 1 or 2), when seen.
    pub protocol: Option<u8>,
    /// Its `agent=` capability (`git/2.47.3`), when seen.
    pub agent: Option<String>,
    /// What its receive-pack advertised, when seen.
    pub capabilities: Option<Vec<String>>,
}

/// Everything doctor found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The remote checked (a URL without its credentials), if any.
    pub remote: Option<String>,
    /// True iff no check failed.
    pub ok: bool,
    /// Every check, in order.
    pub checks: Vec<Check>,
    /// What the remote showed of itself, when it was reached.
    pub server: Option<Server>,
    /// `honoured`, `ignored` or `unknown`: what the remote did with a stale expected old
    /// value; `None` when it was not probed.
    pub compare_and_swap: Option<&'static str>,
    /// What its hook reported to the probe, when one answered.
    pub hook: Option<ProbeReport>,
}

/// Checks this clone, and `remote` when given, for `holder` (the name claims are made in, if
/// one is configured), at `now`. A remote found to ignore expected old values is recorded, so
/// that writes through it are refused; one found to honour them is cleared.
pub fn examine(
    ledger: &Ledger,
    remote: Option<&Remote>,
    holder: Option<&Holder>,
    now: DateTime<Utc>,
) -> crate::Result<Report> {
    let store = ledger.store();
    let mut checks = local::checks(store, remote.map(Remote::name));
    let mut report = Report {
        remote: remote.map(|r| r.name().to_owned()),
        ok: true,
        checks: Vec::new(),
        server: None,
        compare_and_swap: None,
        hook: None,
    };
    if let Some(remote) = remote {
        examine_remote(ledger, remote, holder, now, &mut checks, &mut report)?;
    }
    report.ok = checks.iter().all(|c| c.status != Status::Fail);
    report.checks = checks;
    Ok(report)
}

fn examine_remote(
    ledger: &Ledger,
    remote: &Remote,
    holder: Option<&Holder>,
    now: DateTime<Utc>,
    checks: &mut Vec<Check>,
    report: &mut Report,
) -> crate::Result<()> {
    let store = ledger.store();
    let (scratch, nonce, probe) = engine::scratch("git-lease-doctor-")?;
    let shown = remote.name();
    let url = store
        .config_string(&format!("remote.{}.url", remote.target()))
        .unwrap_or_else(|| remote.target().to_owned());
    let mut server = Server {
        transport: transport(&url).to_owned(),
        ..Server::default()
    };
    let reached = match engine::reach(remote, &probe, scratch.path()) {
        Ok(reached) => reached,
        Err(why) => {
            checks.push(Check::fail(
                "reachable",
                &format!("cannot reach {shown}: {}", one_line(&why)),
                &format!(
                    "check the remote's URL (git remote -v) and that `git ls-remote {shown}` works"
                ),
            ));
            report.server = Some(server);
            return Ok(());
        }
    };
    server.protocol = reached.protocol;
    server.agent = reached.agent;
    let commits = store.write_probe(&nonce, now)?;
    let probed = engine::probe(remote, &probe, commits, scratch.path());
    if let Some(caps) = &probed.capabilities {
        server.agent = engine::agent_of(caps).or(server.agent.take());
    }
    server.capabilities = probed.capabilities.clone();
    checks.push(Check::ok(
        "reachable",
        &format!(
            "{shown} over {}, protocol {}, {}",
            server.transport,
            server
                .protocol
                .map_or_else(|| "unknown".to_owned(), |v| format!("v{v}")),
            server.agent.as_deref().map_or_else(
                || "server agent not advertised".to_owned(),
                |a| format!("server {a}")
            )
        ),
    ));
    checks.push(capabilities_check(server.capabilities.as_deref()));
    checks.push(cas_check(remote, &probe, &probed)?);
    report.compare_and_swap = Some(match &probed.cas {
        Cas::Honoured => "honoured",
        Cas::Ignored(_) => "ignored",
        Cas::Unknown(_) | Cas::OneAtATime(_) => "unknown",
    });
    hook_checks(&probed, &probe, holder, now, checks);
    report.hook = probed.report;
    report.server = Some(server);
    Ok(())
}

/// The checks of the server's hook, from what answered the probe of `probe` (`probed`): its
/// report, its policy, `holder`'s identity and its clock at `now`; or why none answered.
fn hook_checks(
    probed: &engine::Probed,
    probe: &str,
    holder: Option<&Holder>,
    now: DateTime<Utc>,
    checks: &mut Vec<Check>,
) {
    match (&probed.report, &probed.refused) {
        (Some(hook), _) => {
            checks.push(hook_check(hook));
            checks.push(policy_check(hook));
            if let Some(check) = identity_check(hook, holder) {
                checks.push(check);
            }
            checks.push(clock_check(hook, now));
        }
        (None, Some(Refused::Hook(verdict))) => checks.push(Check::fail(
            "hook",
            &format!(
                "the server's hooks declined the probe ref {probe}: {}",
                match verdict {
                    HookVerdict::Refused(m) | HookVerdict::Failed(m) => m,
                }
            ),
            "let refs/lease-probe/* pass on the server (git lease install-hook installs a hook that does; see docs/SERVER.md)",
        )),
        (None, Some(Refused::Push(_))) => checks.push(Check::warn(
            "hook",
            "cannot tell whether a git-lease hook runs there: the probe ref could not be pushed",
            "fix what stopped the probe (above) and run git lease doctor again",
        )),
        (None, None) => checks.push(Check::warn(
            "hook",
            "no git-lease hook answered the probe: the server checks no lease rule (anyone who can push can rewrite a ledger, reuse a token or take a live lease), or runs a hook older than the probe",
            "on the server: git lease install-hook --repo <the bare repository> (docs/SERVER.md)",
        )),
    }
}

fn capabilities_check(caps: Option<&[String]>) -> Check {
    let Some(caps) = caps else {
        return Check::warn(
            "capabilities",
            "the server's receive-pack capabilities were not seen",
            "run git with GIT_TRACE_PACKET=1 to see them",
        );
    };
    let has = |name: &str| caps.iter().any(|c| c == name);
    let mut missing = Vec::new();
    let mut fixes = Vec::new();
    if !has("atomic") {
        missing.push("no atomic push (a claim of several issues at once is refused there; one issue per claim works)");
        fixes.push(
            "serve it with a server that has atomic (git 2.4 or newer, JGit, dulwich 1.2 or newer)",
        );
    }
    if !has("push-options") {
        missing.push("no push options (git lease push cannot carry the fencing token)");
        fixes.push(
            "on the server: git config receive.advertisePushOptions true (install-hook sets it)",
        );
    }
    if !has("report-status") && !has("report-status-v2") {
        missing.push("no report-status (a push's outcome per ref is not told)");
        fixes.push("serve it with a server that reports the status of each ref");
    }
    if missing.is_empty() {
        Check::ok(
            "capabilities",
            "receive-pack offers atomic, push-options and report-status",
        )
    } else {
        Check::warn("capabilities", &missing.join("; "), &fixes.join("; "))
    }
}

fn cas_check(remote: &Remote, probe: &str, probed: &engine::Probed) -> crate::Result<Check> {
    let shown = remote.name();
    let left = probed.left_behind.as_ref().map(|why| {
        format!(" (the probe ref could not be removed: {why}; remove it with git push {shown} :{probe})")
    });
    let left = left.as_deref().unwrap_or("");
    Ok(match &probed.cas {
        Cas::Honoured => {
            remote.record_cas(
                None,
                probed
                    .report
                    .as_ref()
                    .is_some_and(crate::probe::ProbeReport::judges_archive),
            )?;
            Check::ok(
                "compare_and_swap",
                &format!("{shown} refused a push whose expected old value was stale{left}"),
            )
        }
        Cas::Ignored(what) => {
            remote.record_cas(Some(what), false)?;
            let key = remote.unsafe_cas_key();
            let now = if remote.unsafe_cas_allowed()? {
                format!("writes go through it anyway: {key} is true")
            } else {
                "writes through it are refused from now on (exit 1)".to_owned()
            };
            Check::fail(
                "compare_and_swap",
                &format!(
                    "{shown} does not honour a push's expected old value: {what}, so two claimers can both win; {now}{left}"
                ),
                &format!(
                    "serve the repository with a server that does (docs/SERVER.md) and run git lease doctor again; or accept the danger: git config {key} true"
                ),
            )
        }
        Cas::OneAtATime(secs) => {
            // Claims through it hold, as the first write's probe finds and records too.
            remote.record_one_at_a_time(*secs)?;
            Check::warn(
            "compare_and_swap",
            &format!(
                "cannot tell whether {shown} honours a push's expected old value: it took no second connection while the probe's push held one open (within {secs}s), so it seems to serve one connection at a time, which keeps a push's advertisement and its update together over this URL (claims through it hold), whether or not it checks old values{left}"
            ),
            "nothing over this URL; if the repository is also served at another URL (http), check that one: git lease doctor --remote <url>",
        )
        }
        Cas::Unknown(why) => {
            let why = match &probed.refused {
                Some(Refused::Hook(_)) => "the server's hooks declined the probe ref".to_owned(),
                Some(Refused::Push(message)) => {
                    format!("the probe ref could not be made: {message}")
                }
                None => why.clone(),
            };
            Check::warn(
                "compare_and_swap",
                &format!(
                    "cannot tell whether {shown} honours a push's expected old value: {why}{left}"
                ),
                "fix what stopped the probe and run git lease doctor again",
            )
        }
    })
}

fn hook_check(hook: &ProbeReport) -> Check {
    let ours = env!("CARGO_PKG_VERSION");
    let refs = hook
        .refs
        .as_deref()
        .map(|r| format!(", refs stored as {r}"))
        .unwrap_or_default();
    if hook.version == ours {
        Check::ok(
            "hook",
            &format!("git-lease {} answered the probe{refs}", hook.version),
        )
    } else {
        Check::warn(
            "hook",
            &format!(
                "git-lease {} answered the probe, this client is {ours}{refs}",
                hook.version
            ),
            "install the same git-lease on the server and run install-hook again (or update this client)",
        )
    }
}

fn policy_check(hook: &ProbeReport) -> Check {
    let identity = match (hook.identity.as_str(), &hook.pusher_env) {
        ("env", Some(var)) => format!("identity from {var}"),
        ("push-cert", _) => "identity from signed pushes".to_owned(),
        _ => "no identity".to_owned(),
    };
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items
                .iter()
                .map(|i| crate::text::printable(i))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let message = format!(
        "{identity}; fences: {}; requireToken: {}; admins: {}",
        list(&hook.fences),
        hook.require_token,
        list(&hook.admins)
    );
    if hook.identity == "none" {
        Check::warn(
            "policy",
            &format!("{message}: the hook cannot tell who pushes, so anyone can act as anyone"),
            "on the server: git config lease.pusherEnv REMOTE_USER (the variable your server sets; docs/SERVER.md)",
        )
    } else {
        Check::ok("policy", &message)
    }
}

fn identity_check(hook: &ProbeReport, holder: Option<&Holder>) -> Option<Check> {
    if hook.identity == "none" {
        return None;
    }
    let mine = holder.map(Holder::as_str);
    Some(match (&hook.pusher, &hook.unauthenticated, mine) {
        (Some(pusher), _, Some(mine)) if pusher == mine => Check::ok(
            "identity",
            &format!(
                "the server knows you as {}, your holder name",
                crate::text::printable(pusher)
            ),
        ),
        (Some(pusher), _, mine) => Check::fail(
            "identity",
            &format!(
                "the server knows you as {}, but your holder name is {}: the hook refuses every claim you push (identity)",
                crate::text::printable(pusher),
                mine.map_or_else(|| "not set".into(), crate::text::printable)
            ),
            &format!("git config lease.holder {}", shell_word(pusher)),
        ),
        (None, Some(why), _) if hook.identity == "push-cert" => Check::warn(
            "identity",
            &format!(
                "the server knows pushers by signed pushes, and the probe was not one ({}): claims must be pushed signed, by the holder's own key",
                crate::text::printable(why)
            ),
            "git config push.gpgSign true, with a key the server allows, and run git lease doctor again",
        ),
        (None, why, _) => Check::fail(
            "identity",
            &format!(
                "the server could not tell who you are ({}): the hook refuses every claim you push",
                why.as_deref().map_or_else(|| "it did not say why".into(), crate::text::printable)
            ),
            "fix the server's authentication (docs/SERVER.md, Identity)",
        ),
    })
}

fn clock_check(hook: &ProbeReport, now: DateTime<Utc>) -> Check {
    let skew = hook.now - now;
    let secs = skew.num_seconds();
    let max = hook.max_skew_secs.max(0);
    let said = match secs {
        0 => "the server's clock agrees with yours".to_owned(),
        s if s > 0 => format!(
            "the server's clock is {} ahead of yours",
            crate::time::short_duration(skew)
        ),
        _ => format!(
            "the server's clock is {} behind yours",
            crate::time::short_duration(-skew)
        ),
    };
    let allowed = format!(
        "lease.maxClockSkew {} on the server",
        crate::time::short_duration(chrono::Duration::seconds(max))
    );
    let fix = "set both clocks by NTP (timedatectl set-ntp true)";
    if secs.abs() > max {
        Check::fail(
            "clock",
            &format!(
                "{said}, more than {allowed}: the hook refuses every claim you push (clock-skew)"
            ),
            fix,
        )
    } else if secs.abs() * 2 > max {
        Check::warn("clock", &format!("{said}, over half of {allowed}"), fix)
    } else {
        Check::ok("clock", &format!("{said} ({allowed})"))
    }
}

/// How `url` is reached: its scheme, `ssh` for git's `host:path`, `file` for a path.
fn transport(url: &str) -> &'static str {
    if let Some((scheme, _)) = url.split_once("::") {
        if !scheme.contains('/') && !scheme.contains(':') {
            return "a remote helper";
        }
    }
    match url.split_once("://") {
        Some(("git", _)) => "git://",
        Some(("http", _)) => "http://",
        Some(("https", _)) => "https://",
        Some(("ssh" | "git+ssh" | "ssh+git", _)) => "ssh",
        Some(("file", _)) => "file",
        Some(_) => "a remote helper",
        None => {
            let colon = url.find(':');
            let slash = url.find('/');
            match (colon, slash) {
                (Some(c), Some(s)) if c < s => "ssh",
                (Some(_), None) => "ssh",
                _ => "file",
            }
        }
    }
}

/// `text`'s lines joined with `; `.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Quotes a holder name for a shell command line, when it needs it.
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@+:/".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_are_named_by_their_urls() {
        assert_eq!(transport("git://127.0.0.1:9418/r.git"), "git://");
        assert_eq!(transport("http://alice:pw@127.0.0.1/r.git"), "http://");
        assert_eq!(transport("git@github.com:o/r.git"), "ssh");
        assert_eq!(transport("ssh://git@host/r"), "ssh");
        assert_eq!(transport("/srv/git/r.git"), "file");
        assert_eq!(transport("../r.git"), "file");
        assert_eq!(transport("file:///srv/r.git"), "file");
        assert_eq!(transport("ext::ssh host git-%s"), "a remote helper");
    }
}
