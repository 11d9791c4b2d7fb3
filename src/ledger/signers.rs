//! Where a repository's allowed signers list comes from, when `lease.requireSignatures` asks
//! every reader (and the server hook) to check who signed each ledger step
//! ([`crate::rules::signers`]).
//!
//! `lease.allowedSigners`, a path (`~/` is the home directory; a relative path is relative to
//! the working tree's top, or the git directory of a bare repository), or, when it is unset,
//! the file `.git-lease/allowed_signers` of the commit `HEAD` names in the repository being
//! read: a clone's own `HEAD`, the served repository's for the hook. Read from the object
//! database, never from a working tree. The list's version is its blob id.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::rules::signers::{AllowedSigners, DEFAULT_PATH};
use crate::store::Store;

/// The key that turns signature checks on.
pub const REQUIRE_KEY: &str = "lease.requireSignatures";
/// The key that names the list's file.
pub const LIST_KEY: &str = "lease.allowedSigners";

/// Returns the allowed signers list every step must be signed by, or `None` when
/// `lease.requireSignatures` is not true. A list required but absent, unreadable or malformed
/// is an error naming the file (and line).
pub fn required(store: &Store) -> Result<Option<AllowedSigners>> {
    let required = crate::config::boolean(REQUIRE_KEY, store.config_flag(REQUIRE_KEY).as_deref())?
        .unwrap_or(false);
    if !required {
        return Ok(None);
    }
    let (source, data) = match store.config_string(LIST_KEY) {
        Some(path) if !path.is_empty() => {
            let file = resolve(store, &path);
            let data = std::fs::read(&file).map_err(|e| Error::Io {
                context: format!("cannot read {LIST_KEY} {}", file.display()),
                source: e,
            })?;
            (file.display().to_string(), data)
        }
        _ => match store.head_file(DEFAULT_PATH)? {
            Some((_, data)) => (format!("HEAD:{DEFAULT_PATH}"), data),
            None => {
                return Err(Error::ConfigMissing {
                    key: LIST_KEY.into(),
                    needed: "lease.requireSignatures is true and HEAD's commit has no \
                             .git-lease/allowed_signers: name the allowed signers file",
                })
            }
        },
    };
    let version = store.blob_id(&data)?.to_string();
    AllowedSigners::parse(&source, &version, &data)
        .map(Some)
        .map_err(|e| Error::AllowedSigners {
            file: source,
            line: e.line,
            reason: e.reason,
        })
}

fn resolve(store: &Store, path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let path = PathBuf::from(path);
    if path.is_absolute() {
        return path;
    }
    let base = store
        .repo()
        .workdir()
        .map_or_else(|| store.git_dir().to_owned(), |w| w.to_owned());
    base.join(path)
}
