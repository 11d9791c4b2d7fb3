//! The file-system floor of one acquire.
//!
//! Whatever the code, git's storage format makes one acquire of a new issue create these
//! files: three loose objects (blob `lease.json`, tree, commit), each written to a temporary
//! file and renamed into its fan-out directory `objects/xx/`, and the ref, written as
//! `refs/leases/<issue>.lock` (created exclusively) and renamed over `refs/leases/<issue>`.
//! [`Floor::acquire`] does exactly that with plain `std::fs` calls and nothing else: no
//! hashing, no compression, no reading. [`Floor::acquire_durable`] adds the fsyncs a durable
//! write would need (each file, each directory it was renamed in), which git-lease does only
//! when `core.fsync` or `lease.fsync` asks for it (docs/DURABILITY.md).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// An `objects/` directory and a refs directory to create files in.
///
/// Put them in the repository whose acquires are compared with the floor (its own `objects/`
/// and, say, `refs/floor/`): on this machine's journal-less ext4 the cost of creating a file
/// depends several times over on where its directory sits on the disk (see BENCHMARKS.md), so
/// a floor measured in another directory is not a floor.
pub struct Floor {
    objects: PathBuf,
    refs: PathBuf,
    state: u64,
    /// Bytes of each object file: a compressed lease.json, tree and commit are about this big.
    sizes: [usize; 3],
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Floor {
    /// Uses `objects` (a git `objects/` directory, or any) and `refs` (created if needed).
    pub fn new(objects: &Path, refs: &Path) -> std::io::Result<Floor> {
        let objects = objects.to_owned();
        let refs = refs.to_owned();
        fs::create_dir_all(&objects)?;
        fs::create_dir_all(&refs)?;
        Ok(Floor {
            objects,
            refs,
            state: 0x5eed,
            sizes: [190, 50, 170],
        })
    }

    fn hex_id(&mut self) -> String {
        let a = splitmix(&mut self.state);
        let b = splitmix(&mut self.state);
        let c = splitmix(&mut self.state);
        format!("{a:016x}{b:016x}{:08x}", c as u32)
    }

    fn object(&mut self, size: usize, durable: bool) -> std::io::Result<String> {
        let id = self.hex_id();
        let fan = self.objects.join(&id[..2]);
        let tmp = self.objects.join(format!("tmp_obj_{}", &id[..12]));
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(&vec![0x78; size])?;
        if durable {
            f.sync_all()?;
        }
        drop(f);
        // As gix does: try to make the fan-out directory every time, then rename.
        match fs::create_dir(&fan) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        fs::rename(&tmp, fan.join(&id[2..]))?;
        if durable {
            File::open(&fan)?.sync_all()?;
        }
        Ok(id)
    }

    /// Creates the files of one acquire of a new issue named `issue`.
    pub fn acquire(&mut self, issue: &str) -> std::io::Result<()> {
        self.write(issue, false)
    }

    /// The same, with each file and each directory renamed into fsynced.
    pub fn acquire_durable(&mut self, issue: &str) -> std::io::Result<()> {
        self.write(issue, true)
    }

    fn write(&mut self, issue: &str, durable: bool) -> std::io::Result<()> {
        let sizes = self.sizes;
        let mut commit = String::new();
        for size in sizes {
            commit = self.object(size, durable)?;
        }
        let lock = self.refs.join(format!("{issue}.lock"));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)?;
        f.write_all(commit.as_bytes())?;
        f.write_all(b"\n")?;
        if durable {
            f.sync_all()?;
        }
        drop(f);
        fs::rename(&lock, self.refs.join(issue))?;
        if durable {
            File::open(&self.refs)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_acquire_creates_three_objects_and_a_ref() {
        let dir = tempfile::tempdir().unwrap();
        let mut floor =
            Floor::new(&dir.path().join("objects"), &dir.path().join("refs/leases")).unwrap();
        floor.acquire("1").unwrap();
        floor.acquire_durable("2").unwrap();
        let objects: usize = fs::read_dir(dir.path().join("objects"))
            .unwrap()
            .map(|d| fs::read_dir(d.unwrap().path()).unwrap().count())
            .sum();
        assert_eq!(objects, 6);
        assert!(dir.path().join("refs/leases/1").is_file());
        assert!(!dir.path().join("refs/leases/1.lock").exists());
    }
}
