//! Directories opened without following symbolic links, and the files made, read, renamed
//! and given away relative to them.
//!
//! `install-hook` may run as root in a repository that belongs to someone else, whose owner can
//! plant a link at any name inside it, or swap a directory for a link while it runs. So every
//! name it reads or writes there is reached from a directory descriptor, one component at a
//! time with `O_NOFOLLOW`: a link in the way is refused, never followed ([`Error::UnsafePath`]);
//! a directory swapped for a link after it was opened cannot redirect what is done through its
//! descriptor; files are created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`); what is read must be
//! a regular file with no other name (not a hard link to a file elsewhere); and modes and owners
//! are set on the descriptors of what was just created (`fchmod`, `fchown`), never by path.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Gid, Mode, OFlags, Uid};

use crate::error::{Error, Result};

/// How each directory on the way to the one opened is opened: only to be searched (`O_PATH`,
/// which needs no read permission) where the system has it.
#[cfg(any(target_os = "linux", target_os = "android"))]
const SEARCH: OFlags = OFlags::PATH;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const SEARCH: OFlags = OFlags::RDONLY;

/// The most a file read here may hold (a configuration file or a hook script).
const MAX_READ: u64 = 16 << 20;

/// A user and group, as files record them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

/// What is at a name in a directory, the name itself (a link is not followed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing.
    Missing,
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link, and where it points.
    Link(PathBuf),
    /// Anything else (a FIFO, a socket, a device).
    Other,
}

/// A file read through [`Dir::read`]: its contents and mode bits.
#[derive(Clone, Debug)]
pub struct Contents {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The permission bits.
    pub mode: u32,
}

/// A directory opened without following any link: see the module documentation.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// Where a path lands, seen from a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Inside it: the components below it (none: the directory itself).
    Inside(Vec<OsString>),
    /// Outside it: the longest part of the path that exists, resolved (its links followed), and
    /// the components below that which do not exist yet.
    Outside {
        /// The part that exists, resolved.
        base: PathBuf,
        /// The components that do not exist yet.
        rest: Vec<OsString>,
    },
}

impl Placement {
    /// The path, resolved as far as it exists, when `dir` is where it was placed from.
    pub fn path(&self, dir: &Dir) -> PathBuf {
        match self {
            Placement::Inside(rest) => rest.iter().fold(dir.path.clone(), |p, c| p.join(c)),
            Placement::Outside { base, rest } => rest.iter().fold(base.clone(), |p, c| p.join(c)),
        }
    }
}

fn io_error(context: String) -> impl FnOnce(rustix::io::Errno) -> Error {
    move |e| Error::Io {
        context,
        source: e.into(),
    }
}

impl Dir {
    /// Opens the directory `path`. Links in its parent are resolved once (they are the
    /// administrator's: `/srv` may lead elsewhere); then every component, from `/`, is opened
    /// with `O_NOFOLLOW`, so that `path` itself being a link is refused, and so is any part of
    /// the way that was swapped for a link meanwhile.
    pub fn open(path: &Path) -> Result<Dir> {
        let absolute = std::path::absolute(path).map_err(|e| Error::Io {
            context: format!("cannot resolve {}", path.display()),
            source: e,
        })?;
        let canonical = |p: &Path| {
            std::fs::canonicalize(p).map_err(|e| Error::Io {
                context: format!("cannot open {}", p.display()),
                source: e,
            })
        };
        let resolved = match (absolute.parent(), absolute.file_name()) {
            (Some(parent), Some(name)) => canonical(parent)?.join(name),
            _ => canonical(&absolute)?,
        };
        let names: Vec<&OsStr> = resolved
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        // `/` only to be searched, unless it is the directory asked for.
        let access = if names.is_empty() {
            OFlags::RDONLY
        } else {
            SEARCH
        };
        let root = rfs::openat(
            rfs::CWD,
            "/",
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | access,
            Mode::empty(),
        )
        .map_err(io_error("cannot open /".into()))?;
        let mut dir = Dir {
            fd: root,
            path: PathBuf::from("/"),
        };
        for (i, name) in names.iter().enumerate() {
            dir = dir.open_child(name, i + 1 == names.len())?;
        }
        Ok(dir)
    }

    /// The path this directory was opened at (resolved; it may have moved since).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who owns the directory.
    pub fn owner(&self) -> Result<Owner> {
        let stat = rfs::fstat(&self.fd)
            .map_err(io_error(format!("cannot read {}", self.path.display())))?;
        Ok(Owner {
            uid: stat.st_uid,
            gid: stat.st_gid,
        })
    }

    /// What is at `name`, without following a link.
    pub fn what_is_at(&self, name: impl AsRef<OsStr>) -> Result<Found> {
        let name = name.as_ref();
        let path = self.path.join(name);
        let stat = match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => return Ok(Found::Missing),
            Err(e) => return Err(io_error(format!("cannot read {}", path.display()))(e)),
        };
        Ok(match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Found::File,
            FileType::Directory => Found::Dir,
            FileType::Symlink => {
                let target = rfs::readlinkat(&self.fd, name, Vec::new())
                    .map_err(io_error(format!("cannot read the link {}", path.display())))?;
                Found::Link(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
            }
            _ => Found::Other,
        })
    }

    /// The error for a link (or anything else unexpected) at `name`, where `wanted` was
    /// expected.
    fn refuse(&self, name: &OsStr, found: &Found, wanted: &str) -> Error {
        let path = self.path.join(name);
        let reason = match found {
            Found::Link(target) => format!(
                "is a symbolic link (to {}); install-hook follows no link in a repository: \
                 remove it, or replace it with the {wanted} itself, and run install-hook again",
                target.display()
            ),
            Found::Missing => format!("is missing (a {wanted} was expected)"),
            _ => format!("is not a {wanted}; remove it and run install-hook again"),
        };
        Error::UnsafePath { path, reason }
    }

    /// Opens the directory `name` in this one without following a link; `readable` opens it
    /// to be read and changed (`fchown`), not only searched.
    fn open_child(&self, name: &OsStr, readable: bool) -> Result<Dir> {
        let path = self.path.join(name);
        let access = if readable { OFlags::RDONLY } else { SEARCH };
        match rfs::openat(
            &self.fd,
            name,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | access,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Dir { fd, path }),
            Err(e) => {
                let found = self.what_is_at(name)?;
                match found {
                    Found::Link(_) | Found::File | Found::Other => {
                        Err(self.refuse(name, &found, "directory"))
                    }
                    _ => Err(io_error(format!("cannot open {}", path.display()))(e)),
                }
            }
        }
    }

    /// Opens the directory at `components` below this one, each without following a link,
    /// creating those that are missing (mode 0755 less the umask); returns it and the
    /// directories created, outermost first.
    pub fn descend(&self, components: &[OsString]) -> Result<(Dir, Vec<Dir>)> {
        let mut created = Vec::new();
        let mut current: Option<Dir> = None;
        for name in components {
            let here = current.as_ref().unwrap_or(self);
            let made = match rfs::mkdirat(&here.fd, name.as_os_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) => true,
                Err(rustix::io::Errno::EXIST) => false,
                Err(e) => {
                    return Err(io_error(format!(
                        "cannot create {}",
                        here.path.join(name).display()
                    ))(e))
                }
            };
            let next = here.open_child(name, true)?;
            if made {
                created.push(next.try_clone()?);
            }
            current = Some(next);
        }
        match current {
            Some(dir) => Ok((dir, created)),
            None => Ok((self.try_clone()?, created)),
        }
    }

    fn try_clone(&self) -> Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone().map_err(|e| Error::Io {
                context: format!("cannot open {}", self.path.display()),
                source: e,
            })?,
            path: self.path.clone(),
        })
    }

    /// Where `path` lands from here: relative paths are taken from this directory; links on
    /// the way are followed to find out (only to resolve the path, never to read or write).
    pub fn place(&self, path: &Path) -> Result<Placement> {
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            self.path.join(path)
        };
        // The longest part that exists, resolved; what follows it must be plain names.
        let mut rest = Vec::new();
        let mut existing = absolute.as_path();
        let base = loop {
            match std::fs::canonicalize(existing) {
                Ok(base) => break base,
                Err(_) => {
                    let (Some(parent), Some(name)) = (existing.parent(), existing.file_name())
                    else {
                        return Err(Error::InvalidInput(format!(
                            "cannot resolve {}",
                            path.display()
                        )));
                    };
                    rest.push(name.to_owned());
                    existing = parent;
                }
            }
        };
        rest.reverse();
        if rest.iter().any(|c| c == "..") {
            return Err(Error::InvalidInput(format!(
                "cannot resolve {}: it climbs (..) out of a directory that does not exist",
                path.display()
            )));
        }
        Ok(match base.strip_prefix(&self.path) {
            Ok(below) => Placement::Inside(
                below
                    .components()
                    .map(|c| c.as_os_str().to_owned())
                    .chain(rest)
                    .collect(),
            ),
            Err(_) => Placement::Outside { base, rest },
        })
    }

    /// Reads the file `name`, which must be a regular file with no other name (`Ok(None)`
    /// when there is nothing there); a link is refused, not followed.
    pub fn read(&self, name: &str) -> Result<Option<Contents>> {
        self.read_file(name, true)
    }

    /// As [`Dir::read`], for a file whose contents go nowhere but to the caller (a hook
    /// script looked at for a mark), which may have other names (hooks are hard-linked
    /// between repositories).
    pub fn read_linked(&self, name: &str) -> Result<Option<Contents>> {
        self.read_file(name, false)
    }

    fn read_file(&self, name: &str, sole: bool) -> Result<Option<Contents>> {
        let path = self.path.join(name);
        let fd = match rfs::openat(
            &self.fd,
            name,
            // Never blocks on a FIFO planted there; has no effect on a regular file.
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => {
                let found = self.what_is_at(name)?;
                return Err(match found {
                    Found::Link(_) | Found::Dir | Found::Other => {
                        self.refuse(OsStr::new(name), &found, "file")
                    }
                    _ => io_error(format!("cannot read {}", path.display()))(e),
                });
            }
        };
        let stat = rfs::fstat(&fd).map_err(io_error(format!("cannot read {}", path.display())))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            let found = self.what_is_at(name)?;
            return Err(self.refuse(OsStr::new(name), &found, "file"));
        }
        if sole && stat.st_nlink > 1 {
            return Err(Error::UnsafePath {
                path,
                reason: format!(
                    "has {} names (hard links): it may be a file from elsewhere; install-hook \
                     reads only a file of the repository's own: replace it with a copy",
                    stat.st_nlink
                ),
            });
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(MAX_READ)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::Io {
                context: format!("cannot read {}", path.display()),
                source: e,
            })?;
        Ok(Some(Contents {
            bytes,
            mode: Mode::from_raw_mode(stat.st_mode).bits(),
        }))
    }

    /// Checks that `name` is a regular file or nothing, as [`Dir::read`] would; reads nothing.
    pub fn expect_file_or_nothing(&self, name: &str) -> Result<()> {
        match self.what_is_at(name)? {
            Found::Missing | Found::File => Ok(()),
            found => Err(self.refuse(OsStr::new(name), &found, "file")),
        }
    }

    /// Creates the file `name` exclusively (it must not exist, not even as a link), writes
    /// `bytes` to it and sets its mode to `mode` exactly (not less the umask), and gives it to
    /// `owner` when one is given; all through its own descriptor. A regular file left there
    /// (by a run that stopped half-way) is removed first; anything else is refused.
    pub fn create(&self, name: &str, bytes: &[u8], mode: u32, owner: Option<Owner>) -> Result<()> {
        let path = self.path.join(name);
        match self.what_is_at(name)? {
            Found::Missing => {}
            Found::File => rfs::unlinkat(&self.fd, name, AtFlags::empty())
                .map_err(io_error(format!("cannot remove {}", path.display())))?,
            found => return Err(self.refuse(OsStr::new(name), &found, "file")),
        }
        let fd = rfs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(io_error(format!("cannot create {}", path.display())))?;
        if let Some(owner) = owner {
            give(&fd, owner, &path)?;
        }
        rfs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(io_error(format!(
            "cannot set the mode of {}",
            path.display()
        )))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::Io {
                context: format!("cannot write {}", path.display()),
                source: e,
            })
    }

    /// Renames `from` to `to`, both in this directory (`to` replaced if it exists: a link
    /// there is replaced, not followed).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        rfs::renameat(&self.fd, from, &self.fd, to).map_err(io_error(format!(
            "cannot rename {} to {}",
            self.path.join(from).display(),
            self.path.join(to).display()
        )))
    }

    /// Gives this directory to `owner`, through its descriptor.
    pub fn give(&self, owner: Owner) -> Result<()> {
        give(&self.fd, owner, &self.path)
    }
}

/// `fchown` of `fd` to `owner`.
fn give(fd: impl AsFd, owner: Owner, path: &Path) -> Result<()> {
    rfs::fchown(
        fd,
        Some(Uid::from_raw(owner.uid)),
        Some(Gid::from_raw(owner.gid)),
    )
    .map_err(io_error(format!(
        "cannot give {} to uid {}",
        path.display(),
        owner.uid
    )))
}

/// Returns who we are, as the file system sees it (the effective user).
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}
