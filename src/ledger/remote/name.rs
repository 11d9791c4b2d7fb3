//! What `--remote` names: a configured remote, a URL or a path. A bare word that is none of
//! them (`--remote upstream` in a clone with `origin` alone) is refused before any git command
//! runs, in the words a newcomer needs, rather than as a failed fetch of a refspec.

use std::path::Path;

use crate::store::Store;
use crate::Error;

/// Returns an error when `remote` is a bare word (no `:`, no `/`) that names no configured
/// remote and no path here: git would take it for a path, and fail on it.
pub(crate) fn check_exists(store: &Store, remote: &str, configured: bool) -> Result<(), Error> {
    let bare_word = !remote.contains(':') && !remote.contains('/');
    if configured || !bare_word || Path::new(remote).exists() {
        return Ok(());
    }
    let known = store.remote_names();
    let listed = if known.is_empty() {
        "this repository has no remote".to_owned()
    } else {
        format!("this repository has: {}", known.join(", "))
    };
    Err(Error::InvalidInput(format!(
        "no remote named {remote} ({listed}); add it with `git remote add {remote} <url>`, \
         or give a URL"
    )))
}
