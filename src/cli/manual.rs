//! `git lease man`: the manual, generated from the same clap definitions that parse the
//! command line, so it never drifts from it.
//!
//! `man --install` writes the pages where `man` finds them from `PATH`: next to the binary's
//! `bin/`, in `../share/man/man1`. After `cargo install`, that makes `git help lease` and
//! `git lease --help` (which git turns into `man git-lease`) work with no `MANPATH` change.

use std::io::Write;
use std::path::{Path, PathBuf};

use git_lease::Error;
use roff::{bold, italic, roman, Inline, Roff};

use super::output::json::json_line;
use super::{exit, pages, Failure};

/// Prints the manual page of `git lease` (roff), or, with `install`, writes every page into
/// `<dir>/man1`.
pub(crate) fn man(
    install: Option<Option<PathBuf>>,
    json: bool,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let Some(dir) = install else {
        let mut command = super::command().disable_help_subcommand(true);
        command.build();
        page(&command, "", out)?;
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
    write_pages(super::command(), "", &man1, &mut written).map_err(io(format!(
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

/// Writes the page of `command` and of each of its visible subcommands, recursively; `key`
/// names the page in [`pages`]' tables (`""` for `git lease`, else the subcommand path).
fn write_pages(
    command: clap::Command,
    key: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let mut command = command.disable_help_subcommand(true);
    command.build();
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_key = match key {
            "" => sub.get_name().to_owned(),
            _ => format!("{key} {}", sub.get_name()),
        };
        write_pages(sub.clone(), &sub_key, dir, written)?;
    }
    let path = dir.join(clap_mangen::Man::new(command.clone()).get_filename());
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    page(&command, key, &mut file)?;
    file.flush()?;
    written.push(path);
    Ok(())
}

/// Writes the manual page of `command` (built), `key` naming it in [`pages`]' tables: clap's
/// sections, with a synopsis that names every value, then EXIT STATUS, ENVIRONMENT and
/// EXAMPLES, in the order of man-pages(7).
fn page(command: &clap::Command, key: &str, out: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    let mut roff = Roff::new();
    synopsis(&mut roff, command);
    roff.to_writer(out)?;
    man.render_description_section(out)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if command.has_subcommands() {
        man.render_subcommands_section(out)?;
    }
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in pages::EXIT_STATUS {
        roff.control("TP", []);
        roff.text([bold(code.to_string())]);
        roff.text(marked(meaning));
    }
    for note in pages::EXIT_STATUS_NOTES {
        roff.control("PP", []);
        roff.text(marked(note));
    }
    let variables: Vec<&pages::Variable> = pages::ENVIRONMENT
        .iter()
        .filter(|v| key.is_empty() || v.pages.iter().any(|p| key.split(' ').next() == Some(*p)))
        .collect();
    if !variables.is_empty() {
        roff.control("SH", ["ENVIRONMENT"]);
        for v in variables {
            roff.control("TP", []);
            roff.text([bold(v.name)]);
            roff.text(marked(v.text));
        }
    }
    if let Some((_, examples)) = pages::EXAMPLES.iter().find(|(page, _)| *page == key) {
        roff.control("SH", ["EXAMPLES"]);
        for example in *examples {
            roff.control("TP", []);
            roff.text([bold(example.line)]);
            let mut says = marked(example.says);
            if example.exit != exit::OK {
                says.push(roman(format!(" (exit {})", example.exit)));
            }
            roff.text(says);
        }
    }
    roff.to_writer(out)?;
    if command.get_version().is_some() {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// Sets the SYNOPSIS of `command`: its name, each visible option with its value named
/// (`[-C <path>]`, `[--remote <name|url>]`), its arguments, and `<command>` where it has
/// subcommands.
fn synopsis(roff: &mut Roff, command: &clap::Command) {
    roff.control("SH", ["SYNOPSIS"]);
    let name = command.get_bin_name().unwrap_or_else(|| command.get_name());
    let mut line = vec![bold(name)];
    // `<path>`; a value of a few possible values names them all: `<complete|release>`.
    let value = |arg: &clap::Arg| -> String {
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect();
        let names = match arg.get_value_names() {
            _ if (1..=5).contains(&possible.len()) => vec![possible.join("|")],
            Some(n) => n.iter().map(|n| n.to_lowercase()).collect::<Vec<_>>(),
            None => vec![arg.get_id().as_str().to_lowercase()],
        };
        names
            .iter()
            .map(|n| format!("<{n}>"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let shown =
        |a: &&clap::Arg| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version";
    // The command's own options first, then those of every command (`-C`, `--json`, …):
    // a subcommand's are built after the shared ones reach it.
    let mut options: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(shown)
        .filter(|a| !a.is_positional())
        .collect();
    options.sort_by_key(|a| a.is_global_set());
    for arg in options {
        let flag = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => continue,
        };
        let takes = arg.get_num_args().is_some_and(|n| n.takes_values());
        let optional_value = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
        let repeated = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let open = if arg.is_required_set() { "" } else { "[" };
        line.push(roman(format!(" {open}")));
        line.push(bold(flag));
        if takes {
            let v = value(arg);
            line.push(roman(" "));
            match optional_value {
                true => line.push(italic(format!("[{v}]"))),
                false => line.push(italic(v)),
            }
            if repeated {
                line.push(roman("..."));
            }
        }
        if !arg.is_required_set() {
            line.push(roman("]"));
        }
    }
    for arg in command.get_positionals().filter(shown) {
        let repeated = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let dots = if repeated { "..." } else { "" };
        if arg.is_last_set() {
            line.push(roman(" -- "));
        } else {
            line.push(roman(" "));
        }
        match arg.is_required_set() {
            true => line.push(italic(format!("{}{dots}", value(arg)))),
            false => line.push(italic(format!("[{}{dots}]", value(arg)))),
        }
    }
    if command.has_subcommands() {
        line.push(roman(" "));
        line.push(italic("<command> [<args>]"));
    }
    roff.text(line);
}

/// Returns `text` for a page: its `code` spans in bold, the rest roman.
fn marked(text: &str) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| match i % 2 {
            1 => bold(part),
            _ => roman(part),
        })
        .collect()
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
