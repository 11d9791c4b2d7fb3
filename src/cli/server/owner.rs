//! Who owns a served repository, and whether that user could run the hook's binary.

use std::path::Path;

/// The owner of a repository: the user its hooks run as.
#[derive(Clone, Copy, Debug)]
pub(super) struct Owner {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

impl Owner {
    /// `name (uid N)`, or `uid N` when the user database does not name it.
    pub(super) fn name(&self) -> String {
        match passwd_entry(|fields| fields.get(2) == Some(&self.uid.to_string().as_str())) {
            Some(fields) => format!("{} (uid {})", fields[0], self.uid),
            None => format!("uid {}", self.uid),
        }
    }

    /// Every group the owner is in: its own, and those `/etc/group` lists it in.
    fn groups(&self) -> Vec<u32> {
        let mut groups = vec![self.gid];
        let Some(user) = passwd_entry(|f| f.get(2) == Some(&self.uid.to_string().as_str()))
            .map(|f| f[0].clone())
        else {
            return groups;
        };
        if let Ok(text) = std::fs::read_to_string("/etc/group") {
            for line in text.lines() {
                let fields: Vec<&str> = line.split(':').collect();
                if let [_, _, gid, members] = fields.as_slice() {
                    if members.split(',').any(|m| m == user) {
                        if let Ok(gid) = gid.parse() {
                            groups.push(gid);
                        }
                    }
                }
            }
        }
        groups
    }
}

/// The first `/etc/passwd` entry whose fields satisfy `pick`.
fn passwd_entry(pick: impl Fn(&[&str]) -> bool) -> Option<Vec<String>> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines()
        .map(|l| l.split(':').collect::<Vec<&str>>())
        .find(|f| f.len() >= 3 && pick(f))
        .map(|f| f.into_iter().map(str::to_owned).collect())
}

/// Checks, from permission bits, that `owner` could execute `exe`: every directory on the
/// way searchable, the file itself executable (not whether a script is readable too). ACLs and
/// mount options are not seen; this catches the usual trap, a binary in a private home.
pub(super) fn runnable_by(exe: &Path, owner: Owner) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", exe.display()));
    }
    let groups = owner.groups();
    // rwx bits that apply to the owner, as the kernel picks them (root: any x bit will do).
    let bits = |m: &std::fs::Metadata| -> u32 {
        let mode = m.mode();
        if owner.uid == 0 {
            7
        } else if m.uid() == owner.uid {
            (mode >> 6) & 7
        } else if groups.contains(&m.gid()) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    };
    if owner.uid == 0 {
        return if meta.mode() & 0o111 != 0 {
            Ok(())
        } else {
            Err(format!("{} is not executable", exe.display()))
        };
    }
    let mut paths = vec![exe.to_owned()];
    if let Ok(real) = std::fs::canonicalize(exe) {
        if real != exe {
            paths.push(real);
        }
    }
    for path in &paths {
        for dir in path.ancestors().skip(1) {
            let Ok(m) = std::fs::metadata(dir) else {
                continue;
            };
            if bits(&m) & 1 == 0 {
                return Err(format!(
                    "the directory {} is not searchable by that user",
                    dir.display()
                ));
            }
        }
    }
    let file_bits = bits(&meta);
    if file_bits & 1 == 0 {
        return Err(format!("{} is not executable by that user", exe.display()));
    }
    Ok(())
}
