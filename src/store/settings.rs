//! The repository's configuration: its values as git reads them, and the one setting a command
//! writes into the repository's own file.

use gix::bstr::ByteSlice;

use super::{nofollow, Store};
use crate::error::{Error, Result};

/// The repository's own configuration file, in its git dir.
pub(super) const CONFIG: &str = "config";
/// The temporary file [`Store::set_repository_config`] writes before renaming it over
/// [`CONFIG`].
pub(super) const CONFIG_TMP: &str = "config.git-lease-tmp";

impl Store {
    /// Returns a string value of the repository's configuration (all scopes).
    pub fn config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .string(key)
            .map(|s| s.to_str_lossy().into_owned())
    }

    /// Returns the value of a boolean setting for [`crate::config::boolean`]: its string, or
    /// `true` for a key given without a value (`[lease] requireToken`), which git reads as true
    /// (and an empty value, `requireToken =`, as false).
    pub fn config_flag(&self, key: &str) -> Option<String> {
        flag(&self.repo.config_snapshot(), key)
    }

    /// Returns a string value from the repository's own configuration file (`$GIT_DIR/config`)
    /// alone, ignoring the system, global and environment scopes: for settings that whoever
    /// runs a command must not be able to override, such as the server hook's test clock.
    pub fn repository_config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .plumbing()
            .string_filter(key, |meta| meta.source == gix::config::Source::Local)
            .map(|s| s.to_str_lossy().into_owned())
    }

    /// Opens this repository's git dir without following a link ([`nofollow::Dir::open`]): the
    /// directory that [`Store::set_repository_config`] and `install-hook` work in.
    pub fn open_git_dir(&self) -> Result<nofollow::Dir> {
        nofollow::Dir::open(self.git_dir())
    }

    /// Checks, reading it as [`Store::set_repository_config`] does, that the repository's own
    /// configuration file in `git_dir` can be replaced: a regular file of its own, and nothing
    /// but a file left by a stopped run at the name of its temporary file.
    pub fn check_repository_config(&self, git_dir: &nofollow::Dir) -> Result<()> {
        git_dir.read(CONFIG)?;
        git_dir.expect_file_or_nothing(CONFIG_TMP)
    }

    /// Sets `section.key` to `value` in the repository's own configuration file, `config` in
    /// `git_dir` (this repository's git dir, from [`Store::open_git_dir`]), replacing the file
    /// whole, every step relative to the directory's descriptor: the file is read without
    /// following a link (a link there, or a file with other names, is refused:
    /// [`Error::UnsafePath`]), and the new one, with the old one's permission bits, is created
    /// exclusively
    /// as `config.git-lease-tmp`, given to `owner` when one is given (through its descriptor),
    /// and renamed over it.
    pub fn set_repository_config(
        &self,
        git_dir: &nofollow::Dir,
        section: &str,
        key: &str,
        value: &str,
        owner: Option<nofollow::Owner>,
    ) -> Result<()> {
        let path = git_dir.path().join(CONFIG);
        let old = git_dir.read(CONFIG)?.ok_or_else(|| Error::UnsafePath {
            path: path.clone(),
            reason: "is missing: the repository has no configuration file".into(),
        })?;
        let mut file = gix::config::File::from_bytes_no_includes(
            &old.bytes,
            gix::config::file::Metadata::from(gix::config::Source::Local).at(&path),
            Default::default(),
        )
        .map_err(|e| Error::git(format!("cannot read {}", path.display()), e))?;
        file.set_raw_value_by(section, None, key, value)
            .map_err(|e| Error::git(format!("cannot set {section}.{key}"), e))?;
        git_dir.create(CONFIG_TMP, &file.to_bstring(), old.mode & 0o777, owner)?;
        git_dir.rename(CONFIG_TMP, CONFIG)
    }

    /// Returns the names of the configured remotes (those with a `remote.<name>.url`).
    pub fn remote_names(&self) -> Vec<String> {
        self.repo
            .remote_names()
            .into_iter()
            .map(|name| name.to_str_lossy().into_owned())
            .filter(|name| self.config_string(&format!("remote.{name}.url")).is_some())
            .collect()
    }

    /// Returns every value of a multi-valued configuration key, in order.
    pub fn config_strings(&self, key: &str) -> Vec<String> {
        self.repo
            .config_snapshot()
            .strings(key)
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.to_str_lossy().into_owned())
            .collect()
    }
}

/// Returns a boolean setting's value as [`Store::config_flag`] does.
pub(crate) fn flag(config: &gix::config::Snapshot<'_>, key: &str) -> Option<String> {
    config
        .plumbing()
        .string_implicit(key)
        .map(|value| value.map_or_else(|| "true".to_owned(), |v| v.to_str_lossy().into_owned()))
}
