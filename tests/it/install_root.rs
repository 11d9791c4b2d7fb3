//! `install-hook` run as root, as docs/SERVER.md tells administrators to, in a repository that
//! belongs to another account (uid and gid 65534, `nobody`) which planted links in it: the
//! temporary files' names pointing outside, the chained hook's name a link, the hooks directory
//! a link, `config` a link (and a hard link) to a file only root may read, `core.hooksPath`
//! leading outside. Each is refused, exit 2, with a message naming the problem, and nothing at
//! all changes, inside the repository or out (contents, owners and modes compared); a
//! `core.hooksPath` outside is used only with `--allow-hooks-path`. A clean install then gives
//! the owner the files it wrote, and the hook judges a push made as the owner (the account a
//! server runs git as).
//!
//! Skipped, saying why, when the tests do not run as root (with `CI=true` that is a failure, as
//! for the server tests).

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::accounts::{is_root, path_str, set_mode};
use crate::env::{self, at, Run, BIN};

/// The account that owns the repository: `nobody`.
const OWNER: (u32, u32) = (65534, 65534);

/// A root-only file holding valid git configuration, so that a reader that follows `config`
/// to it would take it for the repository's and copy it.
const SECRET: &str =
    "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[secret]\n\ttoken = s3cr3t\n";

/// What the victim file outside the repository holds.
const VICTIM: &str = "root's own file, outside the repository\n";

/// A temporary directory (readable by the owner) with the hostile repository in
/// `repos/leases.git`, root's files in `outside/`, the binary in `bin/`, the owner's home and
/// clone.
struct Hostile {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Hostile {
    fn new() -> Hostile {
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-root.")
            .tempdir()
            .expect("a temporary directory");
        let root = tmp.path().canonicalize().expect("canonicalize");
        set_mode(&root, 0o755);
        let hostile = Hostile { _tmp: tmp, root };
        for dir in ["home", "bin", "outside/elsewhere", "owner-home"] {
            std::fs::create_dir_all(hostile.root.join(dir)).expect("mkdir");
        }
        // Root's files: one anyone may read, one only root may, an empty directory.
        std::fs::write(hostile.outside("victim"), VICTIM).expect("write");
        std::fs::write(hostile.outside("secret"), SECRET).expect("write");
        set_mode(&hostile.outside("secret"), 0o600);
        // The binary where the owner can run it.
        let bin = hostile.root.join("bin/git-lease");
        if std::fs::hard_link(BIN, &bin).is_err() {
            crate::env::install_program(Path::new(BIN), &bin, 0o755);
        }
        set_mode(&bin, 0o755);
        let run = hostile.git(&["init", "-q", "--bare", path_str(&hostile.bare())]);
        assert_eq!(run.code, 0, "{run}");
        for sample in std::fs::read_dir(hostile.bare().join("hooks")).expect("hooks/") {
            let path = sample.expect("an entry").path();
            if path.extension().is_some_and(|e| e == "sample") {
                std::fs::remove_file(path).expect("remove a sample hook");
            }
        }
        hostile.chown_r(&hostile.bare());
        hostile.chown_r(&hostile.root.join("owner-home"));
        // The server's clock, set as the owner would.
        hostile.owner_config("lease.hookNow", Some(&at(0)));
        hostile
    }

    fn bare(&self) -> PathBuf {
        self.root.join("repos/leases.git")
    }

    fn outside(&self, name: &str) -> PathBuf {
        self.root.join("outside").join(name)
    }

    fn chown_r(&self, path: &Path) {
        // -h: a planted link is changed itself, never what it points to.
        let status = Command::new("chown")
            .args(["-R", "-h"])
            .arg(format!("{}:{}", OWNER.0, OWNER.1))
            .arg(path)
            .status()
            .expect("chown");
        assert!(status.success(), "chown -R {}", path.display());
    }

    /// Plain git as root (outside any repository).
    fn git(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new("git");
        env::hermetic(&mut cmd, &self.root.join("home"), &self.root);
        cmd.args(args).current_dir(&self.root).stdin(Stdio::null());
        Run::capture(cmd, format!("git {args:?}"))
    }

    /// `git lease install-hook --repo <bare> --binary <bin> <extra>` as root.
    fn install(&self, extra: &[&str]) -> Run {
        let mut cmd = Command::new(BIN);
        env::hermetic(&mut cmd, &self.root.join("home"), &self.root);
        let bin = self.root.join("bin/git-lease");
        cmd.args(["install-hook", "--repo", path_str(&self.bare())])
            .args(["--binary", path_str(&bin)])
            .args(extra)
            .current_dir(&self.root)
            .stdin(Stdio::null());
        Run::capture(cmd, format!("git lease install-hook {extra:?}"))
    }

    /// `program args` as the owner, in its home, with the binary first on the PATH.
    fn as_owner(&self, program: &str, args: &[&str]) -> Command {
        let home = self.root.join("owner-home");
        let mut cmd = Command::new(program);
        env::hermetic(&mut cmd, &home, &self.root);
        cmd.env(
            "PATH",
            format!(
                "{}:{}",
                self.root.join("bin").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .args(args)
        .current_dir(&home)
        .uid(OWNER.0)
        .gid(OWNER.1)
        .stdin(Stdio::null());
        cmd
    }

    /// Sets (or with `None` unsets) a setting of the repository, as its owner.
    fn owner_config(&self, key: &str, value: Option<&str>) {
        let git_dir = path_str(&self.bare()).to_owned();
        let mut args = vec!["--git-dir", &git_dir, "config"];
        match value {
            Some(v) => args.extend([key, v]),
            None => args.extend(["--unset", key]),
        }
        let run = Run::capture(self.as_owner("git", &args), format!("git {args:?}"));
        assert_eq!(run.code, 0, "{run}");
    }

    /// Runs install-hook with `extra`, and asserts that it is refused (exit 2) with a message
    /// holding each of `names`, and that nothing changed anywhere in the temporary directory,
    /// the repository included.
    #[track_caller]
    fn refused(&self, case: &str, extra: &[&str], names: &[&str]) {
        let before = state(&self.root, None);
        let run = self.install(extra);
        assert_eq!(
            run.code, 2,
            "{case}: install-hook should refuse (exit 2)\n{run}"
        );
        for name in names {
            assert!(
                run.stderr.contains(name),
                "{case}: the refusal should name {name:?}\n{run}"
            );
        }
        assert!(!run.stderr.contains("panicked"), "{case}\n{run}");
        assert_eq!(
            diff(&before, &state(&self.root, None)),
            Vec::<String>::new(),
            "{case}: install-hook changed files although it refused\n{run}"
        );
    }
}

/// Files larger than this are compared by size and time of change, not contents.
const BIG: u64 = 1 << 20;

/// Everything under `root` (but `skip`), by path: kind, owner, mode, and the contents of files
/// or targets of links, never following a link.
fn state(root: &Path, skip: Option<&Path>) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(path) = todo.pop() {
        if Some(path.as_path()) == skip {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).expect("lstat");
        let owner = format!(
            "{}:{} {:o}",
            meta.uid(),
            meta.gid(),
            meta.permissions().mode()
        );
        let what = if meta.file_type().is_symlink() {
            format!(
                "link {owner} -> {}",
                std::fs::read_link(&path).expect("readlink").display()
            )
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).expect("readdir") {
                todo.push(entry.expect("an entry").path());
            }
            format!("dir {owner}")
        } else if meta.len() > BIG {
            // The binary: its size and time of change stand for its contents.
            format!(
                "file {owner} links={} {} bytes, changed {}.{}",
                meta.nlink(),
                meta.len(),
                meta.ctime(),
                meta.ctime_nsec()
            )
        } else {
            let bytes = std::fs::read(&path).expect("read");
            format!(
                "file {owner} links={} {:?}",
                meta.nlink(),
                String::from_utf8_lossy(&bytes)
            )
        };
        out.insert(path, what);
    }
    out
}

/// What differs between two [`state`]s, one line per path.
fn diff(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, was) in before {
        match after.get(path) {
            None => lines.push(format!("{}: removed (was {was})", path.display())),
            Some(now) if now != was => {
                lines.push(format!("{}: {was}\n  became {now}", path.display()))
            }
            Some(_) => {}
        }
    }
    for (path, now) in after {
        if !before.contains_key(path) {
            lines.push(format!("{}: created: {now}", path.display()));
        }
    }
    lines
}

/// Says why the test does not run (and fails under `CI=true`, where it must run).
fn skip(why: &str) {
    crate::env::unavailable::<()>(crate::env::Skip::Server, "", why);
}

#[test]
fn install_hook_as_root_follows_no_link_the_owner_planted_and_gives_only_what_it_made() {
    if !is_root() {
        return skip("install-hook's run as root needs root");
    }
    let h = Hostile::new();
    let repo = h.bare();
    let hooks = repo.join("hooks");
    let victim = h.outside("victim");
    let secret = h.outside("secret");
    let elsewhere = h.outside("elsewhere");
    // A hook of the owner's own, which a clean install keeps and chains.
    let foreign = "#!/bin/sh\nexit 0\n";
    crate::env::write_program(&hooks.join("pre-receive"), foreign, 0o755);
    h.chown_r(&repo);

    // The temporary files' names, pointing outside.
    for tmp in ["hooks/pre-receive.git-lease-tmp", "config.git-lease-tmp"] {
        let link = repo.join(tmp);
        symlink(&victim, &link).expect("symlink");
        h.refused(tmp, &[], &[tmp, "symbolic link"]);
        std::fs::remove_file(&link).expect("rm");
    }

    // The name the owner's hook is kept under, a link.
    let chained = hooks.join("pre-receive.before-git-lease");
    symlink(&victim, &chained).expect("symlink");
    h.refused(
        "the chained hook a link",
        &[],
        &["hooks/pre-receive.before-git-lease", "symbolic link"],
    );
    std::fs::remove_file(&chained).expect("rm");

    // The hooks directory itself a link to a directory outside.
    std::fs::rename(&hooks, repo.join("hooks.real")).expect("mv");
    symlink(&elsewhere, &hooks).expect("symlink");
    h.refused(
        "the hooks directory a link",
        &[],
        &[&format!("{}: is a symbolic link", hooks.display())],
    );
    std::fs::remove_file(&hooks).expect("rm");
    std::fs::rename(repo.join("hooks.real"), &hooks).expect("mv");

    // config a link, then a hard link, to the file only root may read.
    let config = repo.join("config");
    std::fs::rename(&config, repo.join("config.real")).expect("mv");
    symlink(&secret, &config).expect("symlink");
    h.refused(
        "config a link",
        &[],
        &[&format!("{}: is a symbolic link", config.display())],
    );
    std::fs::remove_file(&config).expect("rm");
    std::fs::hard_link(&secret, &config).expect("ln");
    h.refused(
        "config a hard link",
        &[],
        &[&format!("{}: has 2 names", config.display())],
    );
    std::fs::remove_file(&config).expect("rm");
    std::fs::rename(repo.join("config.real"), &config).expect("mv");

    // core.hooksPath leading outside: absolute, relative, and through a link inside.
    symlink(&elsewhere, repo.join("hooks-link")).expect("symlink");
    h.chown_r(&repo);
    for setting in [
        path_str(&elsewhere).to_owned(),
        "../../outside/elsewhere".to_owned(),
        "hooks-link".to_owned(),
    ] {
        h.owner_config("core.hooksPath", Some(&setting));
        h.refused(
            &format!("core.hooksPath={setting}"),
            &[],
            &[
                &format!("core.hooksPath ({setting}) leads outside the repository"),
                "--allow-hooks-path",
            ],
        );
    }
    // Told explicitly, it installs there, and gives that hook to nobody.
    h.owner_config("core.hooksPath", Some(path_str(&elsewhere)));
    let before = state(&h.root, Some(&repo));
    let run = h.install(&["--allow-hooks-path"]);
    run.ok().stdout_has("which stays root's");
    for name in ["pre-receive", "reference-transaction"] {
        let hook = elsewhere.join(name);
        let meta = std::fs::symlink_metadata(&hook).expect("the hook outside");
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (0, 0, 0o755)
        );
        std::fs::remove_file(&hook).expect("rm");
    }
    assert_eq!(
        diff(&before, &state(&h.root, Some(&repo))),
        Vec::<String>::new(),
        "--allow-hooks-path changed more outside the repository than its hooks\n{run}"
    );
    h.owner_config("core.hooksPath", None);
    std::fs::remove_file(repo.join("hooks-link")).expect("rm");

    // A core.hooksPath inside the repository that does not exist yet: made, and given.
    h.owner_config("core.hooksPath", Some("custom/hooks"));
    let before = state(&h.root, Some(&repo));
    let run = h.install(&[]);
    run.ok().stdout_has("given to nobody (uid 65534)");
    for path in ["custom", "custom/hooks", "custom/hooks/pre-receive"] {
        let meta = std::fs::symlink_metadata(repo.join(path)).expect("stat");
        assert_eq!(
            (meta.uid(), meta.gid()),
            OWNER,
            "{path} belongs to the owner\n{run}"
        );
    }
    let meta = std::fs::metadata(repo.join("custom/hooks/pre-receive")).expect("stat");
    assert_eq!(meta.mode() & 0o7777, 0o755, "the hook is executable");
    assert_eq!(
        diff(&before, &state(&h.root, Some(&repo))),
        Vec::<String>::new(),
        "install-hook changed files outside the repository\n{run}"
    );
    std::fs::remove_dir_all(repo.join("custom")).expect("rm -r");
    h.owner_config("core.hooksPath", None);

    // A hook configuration that would refuse every push.
    h.owner_config("lease.fence", Some("refs/heads/issue"));
    h.refused("a bad lease.fence", &[], &["lease.fence"]);
    h.owner_config("lease.fence", None);

    // lease.identity=env without the variable's name: a hook that would refuse every push.
    h.owner_config("lease.identity", Some("env"));
    h.refused("lease.identity=env", &[], &["lease.pusherEnv is not set"]);
    h.owner_config("lease.identity", None);

    // A clean install: nothing outside the repository changes; what it wrote is the owner's,
    // the configuration file with the mode it had.
    let config_mode = std::fs::metadata(&config).expect("stat").mode() & 0o7777;
    let before = state(&h.root, Some(&repo));
    let run = h.install(&[]);
    run.ok()
        .stdout_has("given to nobody (uid 65534)")
        .stdout_has("the existing hook runs first");
    assert_eq!(
        diff(&before, &state(&h.root, Some(&repo))),
        Vec::<String>::new(),
        "install-hook changed files outside the repository\n{run}"
    );
    for (file, mode) in [
        ("hooks/pre-receive", 0o755),
        ("hooks/pre-receive.before-git-lease", 0o755),
        ("config", config_mode),
    ] {
        let meta = std::fs::symlink_metadata(repo.join(file)).expect("stat");
        assert!(meta.is_file(), "{file} is a file");
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (OWNER.0, OWNER.1, mode),
            "{file} belongs to the owner\n{run}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&chained).expect("the chained hook"),
        foreign
    );
    for tmp in ["hooks/pre-receive.git-lease-tmp", "config.git-lease-tmp"] {
        assert!(!repo.join(tmp).exists(), "{tmp} is left behind");
    }
    // What plain git sees.
    let run = h.git(&[
        "--git-dir",
        path_str(&repo),
        "config",
        "receive.advertisePushOptions",
    ]);
    assert_eq!(run.stdout.trim(), "true", "{run}");

    // The owner's pushes go through the hook: a claim lands, a deletion is refused.
    let clone = h.root.join("owner-home/clone");
    let clone_s = path_str(&clone).to_owned();
    let owner_git = |args: &[&str]| {
        let mut cmd = h.as_owner("git", &["-C", &clone_s]);
        cmd.args(args);
        Run::capture(cmd, format!("git {args:?} as the owner"))
    };
    let run = Run::capture(
        h.as_owner("git", &["init", "-q", &clone_s]),
        "git init as the owner",
    );
    assert_eq!(run.code, 0, "{run}");
    owner_git(&["config", "lease.holder", "alice"]);
    owner_git(&["remote", "add", "origin", path_str(&repo)]);
    let mut acquire = h.as_owner(BIN, &["-C", &clone_s, "--remote", "origin", "acquire", "5"]);
    acquire.env("GIT_LEASE_NOW", at(0));
    let run = Run::capture(acquire, "git lease acquire 5 as the owner");
    run.ok();
    let tip = h.git(&[
        "--git-dir",
        path_str(&repo),
        "rev-parse",
        "--verify",
        "refs/leases/5",
    ]);
    assert_eq!(tip.code, 0, "the claim landed\n{run}\n{tip}");
    let run = owner_git(&["push", "origin", ":refs/leases/5"]);
    assert_ne!(run.code, 0, "{run}");
    run.stderr_has("git-lease: refused issue 5")
        .stderr_has("deletion");
    let after = h.git(&[
        "--git-dir",
        path_str(&repo),
        "rev-parse",
        "--verify",
        "refs/leases/5",
    ]);
    assert_eq!(
        after.stdout, tip.stdout,
        "the refused deletion left the ledger"
    );
}
