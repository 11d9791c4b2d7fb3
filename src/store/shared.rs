//! Files and directories made as git makes them in a shared repository.
//!
//! git adjusts every file and directory it creates to `core.sharedRepository` (git's
//! `adjust_shared_perm` in `path.c`): `group` (or `true`) adds group write, `all` (`world`,
//! `everybody`) also read for others, `umask` (or `false`, the default) leaves the umask's
//! mode, an octal mode sets exactly that; directories also get search where they get read,
//! and the setgid bit, so that what is made in them keeps the repository's group. gix parses
//! the setting and applies the rule (`gix::fs::set_shared_repository_permissions`) but does
//! not call it when it writes objects or refs, so every writer of git-lease calls
//! [`SharedPerm::adjust`] on what it made, right after making it, as git does.

use std::path::Path;

use gix::bstr::ByteSlice;

use crate::error::{Error, Result};

/// A repository's `core.sharedRepository`, in git's encoding (0: the umask alone; above 0:
/// bits added; below 0: the exact mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedPerm(i32);

impl SharedPerm {
    /// The umask alone: git's default.
    pub const UMASK: SharedPerm = SharedPerm(0);

    /// Reads `core.sharedRepository` from `repo`'s configuration, as git reads it.
    ///
    /// Returns [`Error::Config`] for a value git refuses too.
    pub fn from_repo(repo: &gix::Repository) -> Result<SharedPerm> {
        let config = repo.config_snapshot();
        let Some(value) = config.plumbing().string_implicit("core.sharedRepository") else {
            return Ok(SharedPerm::UMASK);
        };
        let shown = value
            .as_ref()
            .map_or_else(String::new, |v| v.to_str_lossy().into_owned());
        gix::config::tree::Core::SHARED_REPOSITORY
            .try_into_shared_repository(value.as_ref().map(|v| v.as_bstr()))
            .map(SharedPerm)
            .map_err(|_| Error::Config {
                key: "core.sharedRepository".into(),
                value: shown,
                expected: "umask, group, all, world, everybody, a boolean or an octal mode",
            })
    }

    /// git's encoding of the setting, as gix's lock files take it.
    pub fn value(self) -> i32 {
        self.0
    }

    /// Gives `path`, a file or directory just made, the mode git would give it.
    pub fn adjust(self, path: &Path) -> Result<()> {
        gix::fs::set_shared_repository_permissions(path, self.0).map_err(|source| Error::Io {
            context: format!(
                "cannot share {} as core.sharedRepository says",
                path.display()
            ),
            source,
        })
    }

    /// Adjusts `path` and each directory above it up to `root` (not `root` itself): what a
    /// write made on its way to `path`. Directories made by someone else are adjusted too, as
    /// git would have made them; one this process cannot change is left as it is.
    pub fn adjust_up_to(self, path: &Path, root: &Path) -> Result<()> {
        if self == SharedPerm::UMASK {
            return Ok(());
        }
        self.adjust(path)?;
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(root) && *d != root) {
            let _ = self.adjust(d);
            dir = d.parent();
        }
        Ok(())
    }
}

impl super::Store {
    /// Gives the loose ref files `names` (full names) and the directories made for them below
    /// `refs/` the modes `core.sharedRepository` asks for, after a gix-ref transaction made
    /// them (it creates both with the umask's modes).
    pub(super) fn share_refs(&self, names: &[&str]) -> Result<()> {
        let common = self.repo.common_dir();
        for name in names {
            let path = common.join(name);
            if path.is_file() {
                self.shared.adjust_up_to(&path, &common.join("refs"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
    }

    #[test]
    fn group_all_and_octal_modes_are_gits() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cases = [
            ("group", 0o444, 0o444, 0o2775),
            ("all", 0o644, 0o664, 0o2775),
            ("0640", 0o644, 0o640, 0o2750),
            ("umask", 0o644, 0o644, 0o755),
        ];
        for (setting, made, file_mode, dir_mode) in cases {
            let repo = dir.path().join(setting);
            let status = std::process::Command::new("git")
                .args(["init", "-q", "--bare"])
                .arg(format!("--shared={setting}"))
                .arg(&repo)
                .status()
                .expect("git init");
            assert!(status.success());
            let shared = SharedPerm::from_repo(&gix::open(&repo).expect("open")).expect("read");
            let sub = repo.join("a").join("b");
            std::fs::create_dir_all(&sub).expect("mkdir");
            for d in [repo.join("a"), sub.clone()] {
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("");
            }
            let file = sub.join("f");
            std::fs::write(&file, b"x").expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(made)).expect("");
            shared.adjust_up_to(&file, &repo).expect("adjust");
            assert_eq!(mode(&file), file_mode, "{setting}: file");
            assert_eq!(mode(&sub), dir_mode, "{setting}: directory");
            assert_eq!(mode(&repo.join("a")), dir_mode, "{setting}: its parent");
        }
    }
}
