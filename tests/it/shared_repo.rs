//! A group-shared repository (`git init --shared=group`): two accounts of one group, each
//! claiming with git-lease and pushing with plain git after the other, in one repository
//! and then through its server hook,
//! every directory git-lease made left writable by the group (and setgid) as git leaves its
//! own. Runs as root (the accounts are made once, idempotently); skipped, saying why, when it
//! does not (with `CI=true` that is a failure).

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::accounts::{is_root, path_str, set_mode};
use crate::env::{self, at_min, Run, Skip, BIN};

const GROUP: &str = "gitlease-team";
const MEMBERS: [&str; 2] = ["gitlease-alice", "gitlease-bob"];

/// `id <flag> <name>` as a number, if the account or group exists.
fn id_of(args: &[&str]) -> Option<u32> {
    let out = Command::new(args[0]).args(&args[1..]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = if args[0] == "getent" {
        text.split(':').nth(2)?.trim().to_owned()
    } else {
        text.trim().to_owned()
    };
    field.parse().ok()
}

/// The group's id and each member's uid, made once if missing.
fn team() -> (u32, [u32; 2]) {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    if id_of(&["getent", "group", GROUP]).is_none() {
        let status = Command::new("groupadd").args(["-f", "-r", GROUP]).status();
        assert!(status.is_ok_and(|s| s.success()), "groupadd {GROUP}");
    }
    let gid = id_of(&["getent", "group", GROUP]).expect("the group's id");
    let uids = MEMBERS.map(|name| {
        if id_of(&["id", "-u", name]).is_none() {
            let status = Command::new("useradd")
                .args([
                    "-r",
                    "-M",
                    "-d",
                    "/nonexistent",
                    "-s",
                    "/bin/sh",
                    "-g",
                    GROUP,
                ])
                .arg(name)
                .status();
            assert!(
                status.is_ok_and(|s| s.success()) || id_of(&["id", "-u", name]).is_some(),
                "useradd {name}"
            );
        }
        id_of(&["id", "-u", name]).expect("the member's uid")
    });
    (gid, uids)
}

/// The shared repository and the members' homes, under a directory anyone may enter.
struct Shared {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    gid: u32,
    uids: [u32; 2],
}

impl Shared {
    fn new() -> Shared {
        let (gid, uids) = team();
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-shared.")
            .tempdir()
            .expect("a temporary directory");
        let root = tmp.path().canonicalize().expect("canonicalize");
        set_mode(&root, 0o755);
        let shared = Shared {
            _tmp: tmp,
            root,
            gid,
            uids,
        };
        for (i, member) in MEMBERS.iter().enumerate() {
            let home = shared.root.join(member);
            std::fs::create_dir(&home).expect("mkdir home");
            std::os::unix::fs::chown(&home, Some(uids[i]), Some(gid)).expect("chown home");
        }
        std::fs::write(shared.root.join("gitconfig"), "[safe]\n\tdirectory = *\n")
            .expect("write gitconfig");
        let repos = shared.root.join("repos");
        std::fs::create_dir(&repos).expect("mkdir repos");
        std::os::unix::fs::chown(&repos, None, Some(gid)).expect("chgrp repos");
        set_mode(&repos, 0o2775);
        shared
            .as_member(
                0,
                "git",
                &["init", "-q", "--bare", "--shared=group", "repos/shared.git"],
            )
            .ok();
        shared
    }

    fn repo(&self) -> PathBuf {
        self.root.join("repos/shared.git")
    }

    /// `program args` as member `who` (primary group: the team), umask 022, in the root.
    fn as_member(&self, who: usize, program: &str, args: &[&str]) -> Run {
        let home = self.root.join(MEMBERS[who]);
        let mut cmd = Command::new("sh");
        env::hermetic(&mut cmd, &home, &self.root);
        cmd.args(["-c", "umask 022 && exec \"$0\" \"$@\"", program])
            .args(args)
            // Each member's repository belongs to the other as well: git's ownership check
            // (a global setting, which git's own upload-pack reads too).
            .env("GIT_CONFIG_GLOBAL", self.root.join("gitconfig"))
            .env("GIT_LEASE_NOW", at_min(who as i64))
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .uid(self.uids[who])
            .gid(self.gid);
        Run::capture(cmd, format!("{} as {}: {args:?}", program, MEMBERS[who]))
    }

    /// `git lease -C <repo> args` as member `who`.
    fn lease(&self, who: usize, args: &[&str]) -> Run {
        let repo = self.repo();
        let mut all = vec!["-C", path_str(&repo)];
        all.extend_from_slice(args);
        self.as_member(who, BIN, &all)
    }

    /// `member`'s clone with one commit of `files` new files on `branch`, pushed with plain git.
    fn push(&self, who: usize, branch: &str, files: usize) {
        let clone = format!("{}/work-{branch}", MEMBERS[who]);
        self.as_member(who, "git", &["clone", "-q", path_str(&self.repo()), &clone])
            .ok();
        let work = self.root.join(&clone);
        for i in 0..files {
            std::fs::write(work.join(format!("f{i}")), format!("{branch} {i}\n")).expect("write");
        }
        let git = |args: &[&str]| {
            let mut all = vec![
                "-C",
                clone.as_str(),
                "-c",
                "user.name=m",
                "-c",
                "user.email=m@x",
            ];
            all.extend_from_slice(args);
            self.as_member(who, "git", &all).ok();
        };
        // The files were written by root: the member takes them over.
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uids[who], self.gid))
            .arg(&work)
            .status();
        assert!(status.is_ok_and(|s| s.success()));
        git(&["add", "."]);
        git(&["commit", "-q", "-m", branch]);
        git(&["push", "-q", "origin", &format!("HEAD:refs/heads/{branch}")]);
    }

    /// Every directory under `objects/` and `refs/` that is not writable by the group or not
    /// setgid, as git would never leave one in a shared repository.
    fn unshared_directories(&self) -> Vec<String> {
        let mut out = Vec::new();
        for top in ["objects", "refs", "git-lease"] {
            walk(&self.repo().join(top), &mut |path, meta| {
                if meta.is_dir() && (meta.mode() & 0o2070) != 0o2070 {
                    out.push(format!("{} {:o}", path.display(), meta.mode() & 0o7777));
                }
            });
        }
        out
    }
}

fn walk(dir: &Path, visit: &mut dyn FnMut(&Path, &std::fs::Metadata)) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    visit(dir, &meta);
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
            walk(&entry.path(), visit);
        }
    }
}

#[test]
fn two_members_of_a_group_claim_and_push_after_each_other() {
    if !is_root() {
        return env::unavailable(Skip::Host, "", "needs root to make two accounts of a group")
            .unwrap_or(());
    }
    let shared = Shared::new();
    // Many issues at once: their objects go into most fan-out directories, which the next
    // member's writes then have to share.
    let first: Vec<String> = (0..100).map(|i| format!("a{i}")).collect();
    let mut args = vec!["acquire"];
    args.extend(first.iter().map(String::as_str));
    args.extend(["--holder", "alice"]);
    shared.lease(0, &args).ok();
    shared.push(1, "bob", 40);
    shared
        .lease(1, &["acquire", "b1", "gh/2", "--holder", "bob"])
        .ok();
    shared.push(0, "alice", 40);
    shared
        .lease(0, &["release", "a7", "--holder", "alice"])
        .ok();
    shared.lease(1, &["acquire", "a7", "--holder", "bob"]).ok();
    // The list cache, written by one member and rewritten by the other.
    shared.lease(0, &["list"]).ok();
    shared
        .lease(1, &["acquire", "gh/3", "--holder", "bob"])
        .ok();
    shared.lease(1, &["list"]).ok();

    // The same through the server's hook: each member's claims and plain pushes reach the
    // shared repository through receive-pack, which runs the hook as that member.
    let repo = shared.repo();
    let hook = ["install-hook", "--repo", path_str(&repo), "--binary", BIN];
    shared.as_member(0, BIN, &hook).ok();
    let now = at_min(0);
    let config = [
        "-C",
        path_str(&repo),
        "config",
        "lease.hookNow",
        now.as_str(),
    ];
    shared.as_member(0, "git", &config).ok();
    for (who, issue) in [(0, "r1"), (1, "r2"), (0, "r3"), (1, "r1")] {
        let clone = format!("{}/work-{}", MEMBERS[who], MEMBERS[who]);
        if !shared.root.join(&clone).exists() {
            let url = path_str(&repo);
            shared
                .as_member(who, "git", &["clone", "-q", url, &clone])
                .ok();
        }
        let holder = MEMBERS[who];
        let args = [
            "-C", &clone, "acquire", issue, "--remote", "origin", "--holder", holder,
        ];
        let run = shared.as_member(who, BIN, &args);
        run.code(if issue == "r1" && who == 1 { 3 } else { 0 });
    }
    shared.push(1, "bob-after-hook", 40);
    shared.push(0, "alice-after-hook", 40);
    assert_eq!(shared.unshared_directories(), Vec::<String>::new());
    let fsck = shared.as_member(1, "git", &["-C", "repos/shared.git", "fsck", "--strict"]);
    fsck.ok();
}
