//! Every common git server, set up on 127.0.0.1 the way docs/SERVER.md says, with the
//! configuration files of `fixtures/` filled in: `git daemon`, sshd with per-key forced
//! commands, gitolite (its pre-receive hook by `install-hook` and repo-specific hooks, or the
//! VREF), and `git http-backend` behind nginx (fcgiwrap) and apache with basic auth (lighttpd
//! is [`crate::server::Server::http`]).
//!
//! A [`Served`] repository is owned by the account the server runs git as (`gitlease` for
//! sshd and gitolite, `www-data` for the web servers), never root, so what `install-hook` warns
//! about is what a real installation meets. The `git-lease` binary the hooks run is linked into
//! `<tmp>/bin`, which that account can reach. Each server runs in its own process group and is
//! stopped when the [`Served`] is dropped.
//!
//! A server that cannot be started here (not root, a program missing) fails the test when
//! `CI=true`, and otherwise skips it with a message on stderr: see [`unavailable`].
//!
//! [`checks`] runs the same story through each server; [`traps`] the installation traps and
//! the exit codes of a push on every transport; [`docs`] ties docs/SERVER.md to the fixtures.
//! [`thirdparty`] starts servers this project did not write (JGit's daemon, dulwich's daemon
//! and HTTP server); [`engines`] runs claims and races through them.

mod checks;
mod docs;
mod engines;
mod host;
mod launch;
pub mod thirdparty;
mod traps;

use host::*;

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::accounts::{current_account, is_root, path_str, set_mode, Account};
use crate::env::{self, Run, TestRepo, BIN};
use crate::server::{free_port, stop, wait_until_ready, Start};

pub const SSHD_CONF: &str = include_str!("../../../fixtures/sshd-git.conf");
pub const AUTHORIZED_KEY: &str = include_str!("../../../fixtures/ssh-authorized-key.line");
pub const GITOLITE_RC_SED: &str = include_str!("../../../fixtures/gitolite-rc.sed");
pub const GITOLITE_VREF: &str = include_str!("../../../fixtures/gitolite-VREF-LEASE");
pub const GITOLITE_HOOK: &str = include_str!("../../../fixtures/gitolite-hook-git-lease");
pub const GITOLITE_PRE_RECEIVE_CONF: &str =
    include_str!("../../../fixtures/gitolite-pre-receive.conf");
pub const GITOLITE_VREF_CONF: &str = include_str!("../../../fixtures/gitolite-vref.conf");
pub const NGINX_CONF: &str = include_str!("../../../fixtures/nginx-git.conf");
pub const APACHE_CONF: &str = include_str!("../../../fixtures/apache-git.conf");

/// The account sshd and gitolite serve as.
const SSH_ACCOUNT: &str = "gitlease";
/// The account the web servers run git http-backend as.
const WEB_ACCOUNT: &str = "www-data";
/// How many ports to try, and how long to wait for one server to listen (in polls of 25 ms).
const START_ATTEMPTS: usize = 6;
const READY_POLLS: usize = 800;

/// The users every server knows; over http each one's password is `<user>pw`.
pub const USERS: [&str; 3] = ["alice", "bob", "admin"];

/// The servers of docs/SERVER.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `git daemon`: nobody is authenticated.
    Daemon,
    /// sshd: each key's forced command sets `LEASE_USER`; `git-shell` runs git.
    Sshd,
    /// gitolite over sshd, the hook as pre-receive (`install-hook`, repo-specific hooks).
    GitolitePreReceive,
    /// gitolite over sshd, the hook as the VREF `LEASE` (update-hook checks).
    GitoliteVref,
    /// nginx, fcgiwrap and git http-backend.
    Nginx,
    /// apache2 and git http-backend as CGI.
    Apache,
}

impl Kind {
    fn is_ssh(self) -> bool {
        matches!(
            self,
            Kind::Sshd | Kind::GitolitePreReceive | Kind::GitoliteVref
        )
    }

    fn is_gitolite(self) -> bool {
        matches!(self, Kind::GitolitePreReceive | Kind::GitoliteVref)
    }

    /// Whether the server tells the hook who pushed.
    pub fn has_identity(self) -> bool {
        self != Kind::Daemon
    }

    /// Whether the hook sees push options (pre-receive), so fences check tokens.
    pub fn sees_push_options(self) -> bool {
        self != Kind::GitoliteVref
    }
}

/// Reports a server that cannot run here: fails the test in CI (`CI=true`), otherwise says so
/// on stderr (not captured by the test harness) and returns `None` so that the test returns
/// early.
pub fn unavailable<T>(kind: impl std::fmt::Debug, why: &str) -> Option<T> {
    env::unavailable(
        env::Skip::Server,
        "",
        &format!("the {kind:?} server: {why}"),
    )
}

/// A repository served on 127.0.0.1 by one of [`Kind`]; see the module documentation.
pub struct Served {
    pub kind: Kind,
    // Held for its Drop: the temporary directory.
    _tmp: tempfile::TempDir,
    root: PathBuf,
    /// The served bare repository.
    bare: PathBuf,
    /// The account that owns it and runs its hooks.
    owner: Account,
    port: u16,
    children: Vec<Child>,
    /// Where the server's logs are, for failure messages.
    logs: Vec<PathBuf>,
}

impl Served {
    /// Sets up `kind` with the hook, identity configured as the docs say, its clock at
    /// `now` (`lease.hookNow`), and starts it; `None` if it cannot run here (see
    /// [`unavailable`]).
    pub fn start(kind: Kind, now: &str) -> Option<Served> {
        Served::start_with(kind, now, true)
    }

    /// As [`Served::start`]; without the hook if `hook` is false (only for
    /// [`Kind::Daemon`], [`Kind::Sshd`], [`Kind::Nginx`], [`Kind::Apache`]).
    pub fn start_with(kind: Kind, now: &str, hook: bool) -> Option<Served> {
        let root_uid = is_root();
        if kind != Kind::Daemon && !root_uid {
            return unavailable(kind, "needs root, to serve as an account of its own");
        }
        let needs: &[&str] = match kind {
            Kind::Daemon => &[],
            Kind::Sshd => &["sshd", "ssh", "ssh-keygen", "git-shell"],
            Kind::GitolitePreReceive | Kind::GitoliteVref => {
                &["sshd", "ssh", "ssh-keygen", "gitolite"]
            }
            Kind::Nginx => &["nginx", "fcgiwrap"],
            Kind::Apache => &["apache2", "htpasswd"],
        };
        for program in needs {
            if find_program(program).is_none() {
                return unavailable(
                    kind,
                    &format!("{program} is not installed (.ci/run installs it)"),
                );
            }
        }
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-srv.")
            .tempdir()
            .expect("create a temporary directory");
        let root = tmp.path().canonicalize().expect("canonicalize");
        // The serving account must reach the repositories and the binary.
        set_mode(&root, 0o755);
        for dir in ["home", "bin", "repos", "tmp", "run", "home-server"] {
            std::fs::create_dir_all(root.join(dir)).expect("create a directory");
        }
        let bin = root.join("bin/git-lease");
        if std::fs::hard_link(BIN, &bin).is_err() {
            crate::env::install_program(Path::new(BIN), &bin, 0o755);
        }
        set_mode(&bin, 0o755);
        let owner = match kind {
            Kind::Daemon => current_account(),
            Kind::Sshd | Kind::GitolitePreReceive | Kind::GitoliteVref => {
                ensure_account(SSH_ACCOUNT)
            }
            Kind::Nginx | Kind::Apache => ensure_account(WEB_ACCOUNT),
        };
        let bare = if kind.is_gitolite() {
            root.join("home-server/repositories/leases.git")
        } else {
            root.join("repos/leases.git")
        };
        let mut served = Served {
            kind,
            _tmp: tmp,
            root,
            bare,
            owner,
            port: 0,
            children: Vec::new(),
            logs: Vec::new(),
        };
        if kind.is_ssh() {
            served.make_keys();
        }
        if kind.is_gitolite() {
            served.setup_gitolite();
        } else {
            served.setup_repo(hook);
        }
        // The reftable run serves reftable repositories too, gitolite's own included.
        if env::reftable() {
            let run = served.host_git(&[
                "-C",
                path_str(&served.bare),
                "rev-parse",
                "--show-ref-format",
            ]);
            assert_eq!(
                run.stdout.trim(),
                "reftable",
                "{kind:?} serves files refs\n{run}"
            );
        }
        served.config("lease.hookNow", now);
        served.launch();
        Some(served)
    }

    /// `git init --bare`, the hook by `install-hook`, identity as the docs say.
    fn setup_repo(&mut self, hook: bool) {
        let run = self.host_git(&["init", "-q", "--bare", path_str(&self.bare)]);
        assert_eq!(run.code, 0, "git init\n{run}");
        for sample in std::fs::read_dir(self.bare.join("hooks")).expect("hooks/") {
            let path = sample.expect("a hooks/ entry").path();
            if path.extension().is_some_and(|e| e == "sample") {
                std::fs::remove_file(path).expect("remove a sample hook");
            }
        }
        if matches!(self.kind, Kind::Nginx | Kind::Apache) {
            self.config("http.receivepack", "true");
        }
        chown_r(&self.root.join("repos"), &self.owner);
        chown_r(&self.root.join("home-server"), &self.owner);
        if !hook {
            self.config("receive.advertisePushOptions", "true");
            return;
        }
        match self.kind {
            Kind::Sshd => self.config("lease.pusherEnv", "LEASE_USER"),
            Kind::Nginx | Kind::Apache => self.config("lease.pusherEnv", "REMOTE_USER"),
            _ => {}
        }
        let run = self.install_hook(&[]);
        run.ok().stdout_has("installed");
    }

    /// `git lease install-hook --repo <bare> --binary <tmp>/bin/git-lease <extra>`, as root.
    pub fn install_hook(&self, extra: &[&str]) -> Run {
        let bin = self.root.join("bin/git-lease");
        self.host_lease(
            &[
                "install-hook",
                "--repo",
                path_str(&self.bare),
                "--binary",
                path_str(&bin),
            ],
            extra,
        )
    }

    /// Runs the binary under test here as root (outside any repository).
    pub fn host_lease(&self, args: &[&str], extra: &[&str]) -> Run {
        let mut cmd = Command::new(BIN);
        env::hermetic(&mut cmd, &self.root.join("home"), &self.root);
        cmd.args(args).args(extra).current_dir(&self.root);
        output(cmd, &format!("git-lease {args:?} {extra:?}"))
    }

    /// Plain git here as root, trusting repositories owned by the serving account.
    pub fn host_git(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new("git");
        env::hermetic(&mut cmd, &self.root.join("home"), &self.root);
        cmd.args(["-c", "safe.directory=*"])
            .args(args)
            .current_dir(&self.root);
        output(cmd, &format!("git {args:?}"))
    }

    /// Runs `program args` as the serving account with `HOME=home`.
    fn as_owner(&self, program: &str, args: &[&str], home: &Path) -> Run {
        let mut cmd = Command::new(program);
        env::hermetic(&mut cmd, home, &self.root);
        cmd.env("PATH", self.server_path())
            .args(args)
            .current_dir(home)
            .uid(self.owner.uid)
            .gid(self.owner.gid);
        output(cmd, &format!("{program} {args:?} as {}", self.owner.name))
    }

    /// The PATH the server's git and hooks run with: git-lease first.
    fn server_path(&self) -> String {
        format!(
            "{}:{}",
            self.root.join("bin").display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
        )
    }

    fn make_keys(&self) {
        let _ = std::fs::remove_file(self.root.join("hostkey"));
        keygen(&self.root.join("hostkey"), "host");
        for user in USERS {
            let key = self.root.join(format!("key-{user}"));
            keygen(&key, user);
            let wrapper = self.root.join(format!("ssh-{user}"));
            crate::env::write_program(
                &wrapper,
                &format!(
                    "#!/bin/sh\nexec ssh -F /dev/null -i '{}' -o IdentitiesOnly=yes -o BatchMode=yes \
                     -o UserKnownHostsFile='{}' -o StrictHostKeyChecking=yes \"$@\"\n",
                    key.display(),
                    self.root.join("known_hosts").display()
                ),
                0o755,
            );
        }
        if self.kind == Kind::Sshd {
            let lines: String = USERS
                .iter()
                .map(|user| {
                    let key = std::fs::read_to_string(self.root.join(format!("key-{user}.pub")))
                        .expect("read a public key");
                    fill(AUTHORIZED_KEY, &[("USER", user), ("KEY", key.trim())])
                })
                .collect();
            std::fs::write(self.root.join("authorized_keys"), lines)
                .expect("write authorized_keys");
        }
    }

    /// gitolite as docs/SERVER.md sets it up: `gitolite setup -pk admin.pub`, the rc edits of
    /// `fixtures/gitolite-rc.sed`, the hook program, the users' keys and `gitolite.conf`, then
    /// `gitolite setup` again (what a push to gitolite-admin does); with the pre-receive hook,
    /// `git lease install-hook` on `leases`.
    fn setup_gitolite(&mut self) {
        let home = self.root.join("home-server");
        std::fs::copy(self.root.join("key-admin.pub"), home.join("admin.pub")).expect("copy");
        chown_r(&home, &self.owner);
        self.as_owner("gitolite", &["setup", "-pk", "admin.pub"], &home)
            .ok();
        let sed = self.root.join("gitolite-rc.sed");
        std::fs::write(&sed, GITOLITE_RC_SED).expect("write the sed script");
        let rc = home.join(".gitolite.rc");
        let mut cmd = Command::new("sed");
        cmd.arg("-i").arg("-f").arg(&sed).arg(&rc);
        output(cmd, "sed -i -f gitolite-rc.sed .gitolite.rc").ok();
        let rc_text = std::fs::read_to_string(&rc).expect("read .gitolite.rc");
        // The lines docs/SERVER.md shows, uncommented.
        for wanted in [
            r"GIT_CONFIG_KEYS => 'lease\..* receive\.advertisePushOptions',",
            r#"LOCAL_CODE => "$ENV{HOME}/local","#,
            "'repo-specific-hooks',",
        ] {
            assert!(
                rc_text.lines().any(|l| l.trim() == wanted),
                "gitolite-rc.sed did not set {wanted:?}:\n{rc_text}"
            );
        }
        let (program, path, conf) = match self.kind {
            Kind::GitoliteVref => (GITOLITE_VREF, "local/VREF/LEASE", GITOLITE_VREF_CONF),
            _ => (
                GITOLITE_HOOK,
                "local/hooks/repo-specific/git-lease",
                GITOLITE_PRE_RECEIVE_CONF,
            ),
        };
        for dir in ["local/VREF", "local/hooks/repo-specific"] {
            std::fs::create_dir_all(home.join(dir)).expect("mkdir");
        }
        let program_path = home.join(path);
        crate::env::write_program(&program_path, program, 0o755);
        for user in ["alice", "bob"] {
            std::fs::copy(
                self.root.join(format!("key-{user}.pub")),
                home.join(format!(".gitolite/keydir/{user}.pub")),
            )
            .expect("copy a key");
        }
        std::fs::write(home.join(".gitolite/conf/gitolite.conf"), conf).expect("write conf");
        chown_r(&home, &self.owner);
        self.as_owner("gitolite", &["setup"], &home).ok();
        if self.kind == Kind::GitolitePreReceive {
            let run = self.install_hook(&[]);
            run.ok().stdout_has("installed");
        }
        // gitolite.conf set the identity and the fence.
        assert_eq!(
            self.host_git(&[
                "--git-dir",
                path_str(&self.bare),
                "config",
                "lease.pusherEnv"
            ])
            .stdout
            .trim(),
            "GL_USER"
        );
    }

    /// Stops every process the server started.
    pub fn stop(&mut self) {
        for mut child in self.children.drain(..).rev() {
            stop(&mut child);
        }
    }

    /// The URL `user` pushes to: credentials in it over http.
    pub fn url(&self, user: &str) -> String {
        let port = self.port;
        match self.kind {
            Kind::Daemon => format!("git://127.0.0.1:{port}/leases.git"),
            Kind::Sshd => format!(
                "ssh://{}@127.0.0.1:{port}{}",
                self.owner.name,
                self.bare.display()
            ),
            Kind::GitolitePreReceive | Kind::GitoliteVref => {
                format!("ssh://{}@127.0.0.1:{port}/leases", self.owner.name)
            }
            Kind::Nginx | Kind::Apache => {
                format!("http://{user}:{user}pw@127.0.0.1:{port}/leases.git")
            }
        }
    }

    /// A fresh clone-to-be of `user`: `origin` at this server as `user`, `lease.holder`.
    pub fn client(&self, user: &str) -> TestRepo {
        let repo = TestRepo::client_of(&self.url(user), user);
        repo.git(&["config", "lease.fence", "refs/heads/issue/*"]);
        if self.kind.is_ssh() {
            let wrapper = self.root.join(format!("ssh-{user}"));
            repo.git(&["config", "core.sshCommand", path_str(&wrapper)]);
        }
        repo
    }

    /// The served bare repository.
    pub fn bare(&self) -> &Path {
        &self.bare
    }

    /// The account that owns it.
    pub fn owner(&self) -> &Account {
        &self.owner
    }

    /// The temporary directory of everything.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Sets a key in the served repository's own config file; the file stays the owner's.
    pub fn config(&self, key: &str, value: &str) {
        let config = self.bare.join("config");
        let run = self.host_git(&["config", "--file", path_str(&config), key, value]);
        assert_eq!(run.code, 0, "git config {key}\n{run}");
        chown(&config, &self.owner);
    }

    /// Writes `hooks/<name>` of the served repository (owned by its owner, executable).
    pub fn write_hook(&self, name: &str, script: &str) {
        let path = self.bare.join("hooks").join(name);
        crate::env::write_program(&path, script, 0o755);
        chown(&path, &self.owner);
    }

    /// What the server's `refname` points at, if it exists.
    pub fn rev(&self, refname: &str) -> Option<String> {
        let run = self.host_git(&[
            "--git-dir",
            path_str(&self.bare),
            "rev-parse",
            "--verify",
            "--quiet",
            refname,
        ]);
        (run.code == 0).then(|| run.stdout.trim().to_owned())
    }

    /// The tip of the server's `refs/leases/<issue>`.
    pub fn tip(&self, issue: &str) -> Option<String> {
        self.rev(&format!("refs/leases/{issue}"))
    }

    /// The server's ledger of `issue`: `lease.json` of each commit, oldest first.
    pub fn leases(&self, issue: &str) -> Vec<Value> {
        if self.tip(issue).is_none() {
            return Vec::new();
        }
        let dir = path_str(&self.bare);
        let list = self.host_git(&[
            "--git-dir",
            dir,
            "rev-list",
            "--reverse",
            &format!("refs/leases/{issue}"),
        ]);
        list.stdout
            .lines()
            .map(|c| {
                let run = self.host_git(&["--git-dir", dir, "show", &format!("{c}:lease.json")]);
                serde_json::from_str(&run.stdout).expect("lease.json is JSON")
            })
            .collect()
    }

    /// Every log the server wrote, for failure messages.
    pub fn log(&self) -> String {
        self.logs
            .iter()
            .map(|p| format!("--- {}\n{}", p.display(), read(p)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Fills `@NAME@` placeholders; panics if one is left.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut text = template.to_owned();
    for (name, value) in values {
        text = text.replace(&format!("@{name}@"), value);
    }
    // What is left between two `@` that looks like a placeholder: capitals and underscores.
    let mut left = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find('@') {
        rest = &rest[i + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].starts_with('@') {
            left.push(name);
        }
    }
    assert!(
        left.is_empty(),
        "unfilled placeholders {left:?} in:\n{text}"
    );
    text
}
