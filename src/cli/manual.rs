//! `git lease man`: the manual, generated from the same clap definitions that parse the
//! command line, so it never drifts from it.
//!
//! `man --install` writes the pages where `man` finds them from `PATH`: next to the binary's
//! `bin/`, in `../share/man/man1`. After `cargo install`, that makes `git help lease` and
//! `git lease --help` (which git turns into `man git-lease`) work with no `MANPATH` change.

use std::io::Write;
use std::path::{Path, PathBuf};

use git_lease::Error;

use super::output::json::json_line;
use super::{exit, Failure};

/// Prints the manual page of `git lease` (roff), or, with `install`, writes every page into
/// `<dir>/man1`.
pub(crate) fn man(
    install: Option<Option<PathBuf>>,
    json: bool,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let Some(dir) = install else {
        clap_mangen::Man::new(super::command()).render(out)?;
        return Ok(exit::OK);
    };
    let root = match dir {
        Some(dir) => dir,
        None => default_man_dir()?,
    };
    let man1 = root.join("man1");
    let io = |context: String| move |source| Error::Io { context, source };
    std::fs::create_dir_all(&man1).map_err(io(format!("cannot create {}", man1.display())))?;
    let mut written = Vec::new();
    write_pages(super::command(), &man1, &mut written).map_err(io(format!(
        "cannot write the manual into {}",
        man1.display()
    )))?;
    if json {
        #[derive(serde::Serialize)]
        struct Installed<'a> {
            dir: &'a Path,
            pages: &'a [PathBuf],
        }
        json_line(
            out,
            &Installed {
                dir: &man1,
                pages: &written,
            },
        )?;
    } else {
        writeln!(
            out,
            "installed {} manual pages into {} (git help lease, git lease --help, man git-lease)",
            written.len(),
            man1.display()
        )?;
    }
    Ok(exit::OK)
}

/// Writes the page of `command` and of each of its visible subcommands, recursively.
fn write_pages(
    command: clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let mut command = command.disable_help_subcommand(true);
    command.build();
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir, written)?;
    }
    written.push(clap_mangen::Man::new(command).generate_to(dir)?);
    Ok(())
}

/// Returns `<the binary's directory>/../share/man`, which `man` searches for every `bin`
/// directory on `PATH`.
fn default_man_dir() -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        context: "cannot locate the git-lease binary".into(),
        source,
    })?;
    let bin = exe.parent().ok_or_else(|| {
        Error::InvalidInput(format!(
            "cannot tell the directory of {}; give man --install a directory",
            exe.display()
        ))
    })?;
    let prefix = bin.parent().unwrap_or(bin);
    Ok(prefix.join("share").join("man"))
}
