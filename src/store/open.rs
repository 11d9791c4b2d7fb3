//! Opening a repository as git would: found as git finds it, with git's `-c` settings, its
//! objects read as they are (no replacements) through a delta-base cache.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::bstr::ByteSlice;

use super::{nofollow, shared, GitRefs, RefDb, Store, CONFIG};
use crate::error::{Error, Result};

/// Returns `repo` seeing every object as it is: gix honours replacement refs
/// (`refs/replace/*`) on every read unless told not to, and anyone who can push a ref could
/// then make every reader, the server's hook included, see another holder in a ledger.
fn without_replacements(mut repo: gix::Repository) -> gix::Repository {
    repo.objects.ignore_replacements = true;
    repo
}

/// How much decoded object data one reader keeps to resolve delta chains in packs, unless
/// `core.deltaBaseCacheLimit` says otherwise (git's own default is 96 MiB).
pub const DELTA_BASE_CACHE: usize = 1 << 20;

/// Returns `repo` reading packed objects with a delta-base cache, as git does: without one,
/// gix inflates every base of a delta chain again for each object, and the bases of ledger
/// objects (similar `lease.json` blobs and commits) are shared by thousands of them. Its size
/// is `core.deltaBaseCacheLimit` where set (0 or less: no cache), else [`DELTA_BASE_CACHE`];
/// the cache holds what it caps, so a listing's memory stays bounded at any number of ledgers.
fn with_delta_base_cache(mut repo: gix::Repository) -> gix::Repository {
    let limit = repo.config_snapshot().integer("core.deltaBaseCacheLimit");
    give_delta_base_cache(&mut repo.objects, limit);
    repo
}

/// Gives `handle`'s readers the delta-base cache of [`with_delta_base_cache`], of the size
/// `core.deltaBaseCacheLimit` (`limit`, where set) says.
pub(super) fn give_delta_base_cache(handle: &mut gix::odb::Handle, limit: Option<i64>) {
    let bytes = limit.map_or(Some(DELTA_BASE_CACHE), |n| {
        usize::try_from(n).ok().filter(|n| *n > 0)
    });
    match bytes {
        Some(bytes) => handle.set_pack_cache(move || {
            Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(bytes))
        }),
        None => handle.unset_pack_cache(),
    }
}

/// Gives `repo`'s readers the delta-base cache of [`Store::per_ledger`]'s threads,
/// [`super::many_entries::HISTORY_DELTA_BASE_CACHE`], unless `core.deltaBaseCacheLimit` sets
/// one.
pub(super) fn widen_delta_base_cache(repo: &mut gix::Repository) {
    if repo
        .config_snapshot()
        .integer("core.deltaBaseCacheLimit")
        .is_none()
    {
        let bytes = i64::try_from(super::many_entries::HISTORY_DELTA_BASE_CACHE).ok();
        give_delta_base_cache(&mut repo.objects, bytes);
    }
}

/// How long to wait for a ref lock held by another process before reporting it.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(3);

impl Store {
    /// Opens the repository containing `dir` the way git finds it (searching upwards and
    /// honouring `GIT_DIR`).
    ///
    /// Returns [`Error::NotARepository`] when there is none, and [`Error::RefStorage`] for a
    /// repository whose ref storage is neither files nor reftable.
    pub fn discover(dir: &Path) -> Result<Store> {
        use gix::sec::trust::DefaultForLevel;
        let settings = CommandLine::read()?;
        let options = |level| settings.apply(gix::open::Options::default_for_level(level));
        let trust = gix::sec::trust::Mapping {
            full: options(gix::sec::Trust::Full),
            reduced: options(gix::sec::Trust::Reduced),
        };
        let repo = gix::ThreadSafeRepository::discover_with_environment_overrides_opts(
            dir,
            Default::default(),
            trust,
        )
        .map_err(|e| not_a_repository(dir, &e))?
        .to_thread_local();
        Store::from_repo(settings.after_open(repo)?)
    }

    /// Opens exactly the repository at `path` (a work tree or a git dir), without searching.
    pub fn open(path: &Path) -> Result<Store> {
        let settings = CommandLine::read()?;
        let repo = gix::open_opts(path, settings.apply(gix::open::Options::default()))
            .map_err(|e| not_a_repository(path, &e))?;
        Store::from_repo(settings.after_open(repo)?)
    }

    /// Opens the repository as [`Store::open`] (`exact`) or [`Store::discover`] does, after
    /// checking, without following a link, that its git dir is no link and its configuration
    /// file a regular file of its own ([`nofollow::Dir::read`]): for a command that may run as
    /// root in a repository someone else owns (`install-hook`), so that git's configuration is
    /// not read from a file the owner pointed `config` at.
    pub fn open_unfollowed(path: &Path, exact: bool) -> Result<Store> {
        let git_dir = if exact {
            [path.to_owned(), path.join(".git")]
                .into_iter()
                .find(|dir| gix::discover::is_git(dir).is_ok())
        } else if let Some(dir) = std::env::var_os("GIT_DIR") {
            Some(PathBuf::from(dir))
        } else {
            gix::discover::upwards(path)
                .ok()
                .map(|(found, _)| found.into_repository_and_work_tree_directories().0)
        };
        // Where none is found, opening reports it.
        if let Some(git_dir) = git_dir {
            nofollow::Dir::open(&git_dir)?.read(CONFIG)?;
        }
        if exact {
            Store::open(path)
        } else {
            Store::discover(path)
        }
    }

    /// Wraps an open repository, with the ref database its `extensions.refStorage` names:
    /// files (the default) in-process, reftable through git.
    pub fn from_repo(repo: gix::Repository) -> Result<Store> {
        let repo = with_delta_base_cache(without_replacements(repo));
        let config = repo.config_snapshot();
        let setting = |key: &str| config.string(key).map(|s| s.to_str_lossy().into_owned());
        let lock_wait =
            crate::config::duration("lease.lockTimeout", setting("lease.lockTimeout").as_deref())?
                .unwrap_or(DEFAULT_LOCK_WAIT);
        let storage = setting("extensions.refStorage").map(|s| s.to_ascii_lowercase());
        let refdb = match storage.as_deref() {
            None | Some("files") => RefDb::Files,
            Some("reftable") => RefDb::Git(GitRefs::new(
                repo.git_dir(),
                repo.common_dir(),
                repo.refs
                    .namespace
                    .as_ref()
                    .map(|ns| ns.as_bstr().to_str_lossy().into_owned()),
                lock_wait,
                repo.object_hash(),
            )),
            Some(other) => {
                return Err(Error::RefStorage {
                    path: repo.git_dir().to_owned(),
                    format: other.to_owned(),
                })
            }
        };
        Ok(Store {
            refdb,
            fsync: crate::durability::Fsync::from_repo(&repo)?,
            shared: shared::SharedPerm::from_repo(&repo)?,
            auto_gc: crate::autogc::AutoGc::from_settings(setting)?,
            repo,
            lock_wait,
            quarantine: None,
            packed_refs_seen: std::cell::Cell::new(None),
            signer: std::cell::OnceCell::new(),
            small_objects: std::cell::OnceCell::new(),
        })
    }

    /// Also reads objects from `GIT_QUARANTINE_PATH`, where git keeps a push's objects while
    /// its pre-receive and update hooks run. Returns the store unchanged outside a hook.
    pub fn with_push_quarantine(mut self) -> Result<Store> {
        if let Some(dir) = std::env::var_os("GIT_QUARANTINE_PATH") {
            let odb = gix::odb::at(std::path::PathBuf::from(dir), self.repo.object_hash())
                .map_err(|e| Error::Io {
                    context: "cannot open the push quarantine".into(),
                    source: e,
                })?;
            self.quarantine = Some(odb);
        }
        Ok(self)
    }
}

/// The `-c` settings of the git that started this process ([`crate::config::command_line`]),
/// as the repository is opened with them: as gix's command-line overrides, which come after
/// every configuration file and `GIT_CONFIG_COUNT`, as in git, and count while the repository
/// is being opened; or, when one of them cannot be carried that way (gix reads an override as
/// `key=value`, split at the first `=` and trimmed, so a subsection holding `=` or a value
/// with white space at either end would change), all of them appended in order once it is
/// open.
struct CommandLine {
    settings: Vec<crate::config::Parameter>,
    as_overrides: Option<Vec<gix::bstr::BString>>,
}

impl CommandLine {
    fn read() -> Result<CommandLine> {
        let settings = crate::config::command_line()?;
        let as_overrides = settings
            .iter()
            .map(|p| {
                let mut text = gix::bstr::BString::from(p.key.clone());
                if let Some(value) = &p.value {
                    if p.key.contains(&b'=') || value.trim() != value.as_slice() {
                        return None;
                    }
                    text.push(b'=');
                    text.extend_from_slice(value);
                }
                Some(text)
            })
            .collect();
        Ok(CommandLine {
            settings,
            as_overrides,
        })
    }

    fn apply(&self, options: gix::open::Options) -> gix::open::Options {
        match &self.as_overrides {
            Some(overrides) if !overrides.is_empty() => options.cli_overrides(overrides.clone()),
            _ => options,
        }
    }

    fn after_open(&self, mut repo: gix::Repository) -> Result<gix::Repository> {
        if self.as_overrides.is_some() {
            return Ok(repo);
        }
        let refuse =
            |e: &dyn std::fmt::Display| Error::CommandLineConfig(first_line(&format!("{e}")));
        let mut file =
            gix::config::File::new(gix::config::file::Metadata::from(gix::config::Source::Cli));
        for setting in &self.settings {
            let key = gix::config::KeyRef::parse_unvalidated(setting.key.as_bstr())
                .ok_or_else(|| refuse(&format!("invalid key: {}", setting.key.as_bstr())))?;
            file.section_mut_or_create_new(key.section_name, key.subsection_name)
                .map_err(|e| refuse(&e))?
                .push(
                    key.value_name,
                    setting.value.as_deref().map(ByteSlice::as_bstr),
                )
                .map_err(|e| refuse(&e))?;
        }
        let mut config = repo.config_snapshot_mut();
        config.append(file).map_err(|e| refuse(&e))?;
        config.commit().map_err(|e| refuse(&e))?;
        Ok(repo)
    }
}

/// The error of a repository that cannot be opened from `path`: none found there or above
/// it, as git says it, or the reason it cannot be opened.
fn not_a_repository(path: &Path, e: &dyn std::fmt::Display) -> Error {
    let message = first_line(&format!("{e}"));
    Error::NotARepository {
        path: path.to_owned(),
        // gix's "Could not find a git repository in <path> or in any of its parents" says
        // what the error's own words say.
        message: if message.starts_with("Could not find a git repository") {
            String::new()
        } else {
            message
        },
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
