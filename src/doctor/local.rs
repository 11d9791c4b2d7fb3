//! Doctor's look at this clone: its git, its ref storage, `lease.remote`, and the settings of
//! its remotes that work against the ledgers (refspecs that move them unverified or prune them,
//! mirrors).

use super::{Check, Status};
use crate::store::Store;

/// The namespaces git-lease keeps in a clone: the ledgers, and what each remote was seen to
/// hold (verified, and just fetched).
const NAMESPACES: [&str; 3] = [
    crate::issue::REF_PREFIX,
    crate::remote::TRACKING_PREFIX,
    crate::remote::INCOMING_PREFIX,
];

/// Returns the checks of this clone, for the remote `remote` (if any).
pub(super) fn checks(store: &Store, remote: Option<&str>) -> Vec<Check> {
    let mut checks = vec![
        git_version(store),
        ref_storage(store),
        lease_remote(store, remote),
    ];
    let mut found = Vec::new();
    for name in store.remote_names() {
        let settings = RemoteSettings::read(store, &name);
        found.extend(interfering(&name, &settings));
    }
    if found.is_empty() {
        checks.push(Check::ok(
            "refspecs",
            "no configured refspec or mirror moves or prunes the lease refs",
        ));
    }
    checks.extend(found.into_iter().map(|i| Check {
        name: "refspecs",
        status: Status::Warn,
        message: i.why,
        fix: Some(i.fix),
    }));
    checks
}

fn git_version(store: &Store) -> Check {
    let out = crate::git::command(store.git_dir())
        .arg("version")
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            Check::ok("git", &format!("{version} here"))
        }
        Ok(out) => Check::fail(
            "git",
            &format!("git version failed ({})", out.status),
            "install git 2.30 or newer",
        ),
        Err(e) => Check::fail(
            "git",
            &format!("cannot run git: {e}"),
            "install git 2.30 or newer",
        ),
    }
}

fn ref_storage(store: &Store) -> Check {
    Check::ok(
        "ref_storage",
        &format!("this clone stores its refs as {}", store.ref_format()),
    )
}

fn lease_remote(store: &Store, remote: Option<&str>) -> Check {
    let first = store.remote_names().into_iter().next();
    match (
        store.config_string("lease.remote"),
        remote.or(first.as_deref()),
    ) {
        (Some(set), _) => Check::ok(
            "lease_remote",
            &format!("lease.remote is {set}: claims go through it"),
        ),
        (None, Some(remote)) => Check {
            name: "lease_remote",
            status: Status::Warn,
            message: format!(
                "lease.remote is not set: claims stay in this clone unless given --remote, and \
                 whoever shares {remote} cannot see them"
            ),
            fix: Some(format!("git config lease.remote {remote}")),
        },
        (None, None) => Check::ok(
            "lease_remote",
            "no remote: claims are local to this repository and its worktrees",
        ),
    }
}

/// What doctor reads of one configured remote.
#[derive(Clone, Debug, Default)]
pub struct RemoteSettings {
    /// `remote.<name>.fetch`, every value.
    pub fetch: Vec<String>,
    /// `remote.<name>.push`, every value.
    pub push: Vec<String>,
    /// Whether fetches prune (`remote.<name>.prune`, else `fetch.prune`).
    pub prune: bool,
    /// `remote.<name>.mirror`.
    pub mirror: bool,
}

impl RemoteSettings {
    fn read(store: &Store, name: &str) -> RemoteSettings {
        let flag = |key: &str| {
            store
                .config_string(key)
                .and_then(|v| crate::config::boolean(key, Some(&v)).ok().flatten())
        };
        RemoteSettings {
            fetch: store.config_strings(&format!("remote.{name}.fetch")),
            push: store.config_strings(&format!("remote.{name}.push")),
            prune: flag(&format!("remote.{name}.prune"))
                .or_else(|| flag("fetch.prune"))
                .unwrap_or(false),
            mirror: flag(&format!("remote.{name}.mirror")).unwrap_or(false),
        }
    }
}

/// A setting that works against the ledgers: why, and what to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interference {
    /// What it does to the ledgers.
    pub why: String,
    /// The command that removes it.
    pub fix: String,
}

/// Returns what in the settings of the remote `name` works against the lease refs: a forced
/// fetch refspec that writes into them (a plain `git fetch` then replaces ledgers with whatever
/// the remote holds, unverified), a fetch refspec into them with pruning on (a plain
/// `git fetch` deletes the ones the remote lacks: claims made here), a forced push refspec
/// from them, and a push mirror (every ref pushed, forced, and deleted where this clone has
/// none).
pub fn interfering(name: &str, settings: &RemoteSettings) -> Vec<Interference> {
    let mut found = Vec::new();
    let unset = |key: &str, value: &str| {
        format!(
            "git config --fixed-value --unset remote.{name}.{key} {}",
            shell_quote(value)
        )
    };
    for spec in &settings.fetch {
        let Some((forced, _, dst)) = split_refspec(spec) else {
            continue;
        };
        let Some(namespace) = NAMESPACES.iter().find(|n| covers(dst, n)) else {
            continue;
        };
        if forced {
            found.push(Interference {
                why: format!(
                    "remote.{name}.fetch {spec} makes a plain `git fetch {name}` replace {namespace}* \
                     with whatever {name} holds, unverified, a rewound ledger too (git lease sync \
                     {name} copies them verified)"
                ),
                fix: unset("fetch", spec),
            });
        } else if settings.prune {
            found.push(Interference {
                why: format!(
                    "remote.{name}.fetch {spec} with pruning on makes a plain `git fetch {name}` \
                     delete the refs under {namespace} that {name} lacks (claims made here among them)"
                ),
                fix: format!("git config remote.{name}.prune false"),
            });
        }
    }
    for spec in &settings.push {
        let Some((forced, src, _)) = split_refspec(spec) else {
            continue;
        };
        if forced && NAMESPACES.iter().any(|n| covers(src, n)) {
            found.push(Interference {
                why: format!(
                    "remote.{name}.push {spec} makes a plain `git push {name}` force the lease \
                     refs over {name}'s, rewinding its ledgers where it has no hook"
                ),
                fix: unset("push", spec),
            });
        }
    }
    if settings.mirror {
        found.push(Interference {
            why: format!(
                "remote.{name}.mirror is true: a plain `git push {name}` forces every ref of this \
                 clone over {name}'s (its ledgers and this clone's tracking refs among them) and \
                 deletes those this clone lacks"
            ),
            fix: format!("git config --unset remote.{name}.mirror"),
        });
    }
    found
}

/// Splits a refspec into (forced, source, destination); `None` for a negative refspec or one
/// without a destination (which moves no ref of this clone).
fn split_refspec(spec: &str) -> Option<(bool, &str, &str)> {
    let spec = spec.trim();
    if spec.starts_with('^') {
        return None;
    }
    let (forced, rest) = match spec.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let (src, dst) = rest.split_once(':')?;
    Some((forced, src, dst))
}

/// Returns whether the ref pattern `side` (a name, or a glob with one `*`) can match a ref
/// under `namespace` (`refs/leases/`).
fn covers(side: &str, namespace: &str) -> bool {
    match side.split_once('*') {
        Some((head, _)) => head.starts_with(namespace) || namespace.starts_with(head),
        None => side.starts_with(namespace),
    }
}

/// Quotes `text` for a POSIX shell, when it needs it.
fn shell_quote(text: &str) -> String {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./:@=".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(fetch: &[&str], prune: bool) -> RemoteSettings {
        RemoteSettings {
            fetch: fetch.iter().map(|s| (*s).to_owned()).collect(),
            prune,
            ..Default::default()
        }
    }

    #[test]
    fn a_forced_fetch_into_the_ledgers_interferes_and_a_plain_one_does_not() {
        let found = interfering(
            "origin",
            &settings(&["+refs/leases/*:refs/leases/*"], false),
        );
        assert_eq!(found.len(), 1);
        assert!(found[0].why.contains("unverified"), "{found:?}");
        assert_eq!(
            found[0].fix,
            "git config --fixed-value --unset remote.origin.fetch '+refs/leases/*:refs/leases/*'"
        );
        assert!(
            interfering("origin", &settings(&["refs/leases/*:refs/leases/*"], false)).is_empty()
        );
        // The usual refspec touches no lease ref, pruning or not.
        assert!(interfering(
            "origin",
            &settings(&["+refs/heads/*:refs/remotes/origin/*"], true)
        )
        .is_empty());
        assert!(interfering("origin", &settings(&["^refs/leases/*"], true)).is_empty());
    }

    #[test]
    fn a_fetch_of_everything_interferes_forced_or_pruning() {
        let forced = interfering("up", &settings(&["+refs/*:refs/*"], false));
        assert_eq!(forced.len(), 1, "{forced:?}");
        let pruned = interfering("up", &settings(&["refs/*:refs/*"], true));
        assert_eq!(pruned.len(), 1, "{pruned:?}");
        assert_eq!(pruned[0].fix, "git config remote.up.prune false");
        assert!(interfering("up", &settings(&["refs/*:refs/*"], false)).is_empty());
        // Into the tracking refs is as bad.
        assert_eq!(
            interfering(
                "up",
                &settings(&["+refs/leases/*:refs/lease-remotes/up/*"], false)
            )
            .len(),
            1
        );
    }

    #[test]
    fn a_mirror_and_a_forced_push_of_the_ledgers_interfere() {
        let mirror = RemoteSettings {
            mirror: true,
            push: vec!["+refs/leases/*:refs/leases/*".into(), "refs/heads/*".into()],
            ..Default::default()
        };
        let found = interfering("m", &mirror);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[1].fix, "git config --unset remote.m.mirror");
    }
}
