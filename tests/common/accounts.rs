//! The account the tests run as (root or not), the accounts a server serves as, and the modes
//! of the files they share.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Whether the tests run as root (the uid of a file they create).
pub fn is_root() -> bool {
    current_account().uid == 0
}

/// The account this test runs as (the owner of a file it creates).
pub fn current_account() -> Account {
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::NamedTempFile::new().expect("a temporary file");
    let meta = probe.as_file().metadata().expect("its metadata");
    Account {
        name: String::from_utf8_lossy(
            &Command::new("id")
                .arg("-un")
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default(),
        )
        .trim()
        .to_owned(),
        uid: meta.uid(),
        gid: meta.gid(),
    }
}

/// A system account: name, uid, gid.
#[derive(Clone, Debug)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// Sets the permission bits of `path` to `mode`.
pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `path` as text: every temporary path here is UTF-8.
pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}
