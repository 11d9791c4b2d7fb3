//! Shell completion through the binary itself: the script a shell loads (`git lease
//! completions <shell>`, or `COMPLETE=<shell> git-lease`) hands each completion back to
//! `git-lease`, which answers from the same clap definitions that parse the command line,
//! and completes issue ids from the lease refs of the repository at hand.
//!
//! The protocol is clap_complete's (`CompleteEnv`): with `COMPLETE=<shell>` set and no
//! words after `--`, the binary prints the shell's registration script; with the words of the
//! command line being typed after `--`, it prints their candidates. In bash the script also
//! defines `_git_lease`, which git's own bash completion calls for `git lease …`.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::Path;

use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use clap_complete::env::{Bash, CompleteEnv, Elvish, EnvCompleter, Fish, Powershell, Shells, Zsh};

use super::{exit, Failure};

/// The variable of the protocol.
const VAR: &str = "COMPLETE";
/// The binary's name: what the scripts register their completion for.
const BIN: &str = "git-lease";

/// The subcommands whose issue arguments are completed with the ids of the lease refs.
const TAKE_IDS: &[(&str, &str)] = &[
    ("acquire", "issues"),
    ("renew", "issue"),
    ("release", "issue"),
    ("complete", "issue"),
    ("abandon", "issue"),
    ("show", "issue"),
    ("log", "issue"),
    ("check", "issue"),
    ("verify", "issues"),
    ("revoke", "issue"),
    ("run", "issues"),
    ("wait", "issue"),
    ("sync", "adopt"),
];

/// The shells of the protocol: clap_complete's, with git's subcommand added to bash's.
const SHELLS: Shells<'static> = Shells(&[&GitBash, &Zsh, &Fish, &Elvish, &Powershell]);

/// Answers a completion request (`COMPLETE` set in the environment), or returns `None` when
/// this is no such request.
pub(crate) fn from_env(args: &[OsString]) -> Option<u8> {
    // Only a shell's name (or path, as `$SHELL` gives it) asks: a `COMPLETE` set for
    // something else leaves every command as it is.
    let asked = std::env::var_os(VAR)?;
    let shell = Path::new(&asked).file_stem()?.to_str()?;
    SHELLS.completer(shell)?;
    follow_dirs(args);
    let cwd = std::env::current_dir().ok();
    let done = CompleteEnv::with_factory(command)
        .var(VAR)
        .bin(BIN)
        .completer(completer())
        .shells(SHELLS)
        .try_complete(args.iter().cloned(), cwd.as_deref());
    Some(match done {
        Ok(_) => exit::OK,
        Err(e) => {
            let _ = e.print();
            exit::USAGE
        }
    })
}

/// Prints the registration script of `shell` (`git lease completions <shell>`): what
/// `COMPLETE=<shell> git-lease` prints.
pub(crate) fn script(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<u8, Failure> {
    let name = shell.to_string();
    let Some(registration) = SHELLS.completer(&name) else {
        return Err(git_lease::Error::InvalidInput(format!(
            "no completion for {name}; completions knows {}",
            SHELLS.names().collect::<Vec<_>>().join(", ")
        ))
        .into());
    };
    let mut script = Vec::new();
    registration.write_registration(VAR, BIN, BIN, &completer(), &mut script)?;
    out.write_all(&script)?;
    Ok(exit::OK)
}

/// Returns the command line as completion sees it: the parser's, named as the binary (the
/// help's `git lease` is no command name), with issue ids offered where issues are taken.
fn command() -> clap::Command {
    let mut command = super::command().bin_name(BIN);
    // Every subcommand's arguments, which the parser builds only for the one it runs.
    command.build();
    for (sub, arg) in TAKE_IDS {
        // In place (`mut_arg` would move the argument last, after `run`'s command).
        command = command.mut_subcommand(sub, |s| {
            s.mut_args(|a| match a.get_id() == arg {
                true => a.add(ArgValueCandidates::new(issue_ids)),
                false => a,
            })
        });
    }
    command
}

/// Returns the ids of the lease refs of the repository here, in natural order; none outside
/// a repository.
fn issue_ids() -> Vec<CompletionCandidate> {
    let Ok(cwd) = std::env::current_dir() else {
        return Vec::new();
    };
    git_lease::Store::discover(&cwd)
        .and_then(|store| git_lease::listing::ids(&store))
        .unwrap_or_default()
        .into_iter()
        .map(CompletionCandidate::new)
        .collect()
}

/// Moves to where the `-C <path>` options before the word being completed lead (each after
/// the last, as git does), so that ids come from that repository. A path that leads nowhere
/// is passed over.
fn follow_dirs(args: &[OsString]) {
    // The words after `--`, the binary's name first; the one being completed is at the index
    // the shell gives (bash, zsh, elvish), else the last.
    let words: Vec<&OsStr> = args
        .iter()
        .map(OsString::as_os_str)
        .skip_while(|a| *a != "--")
        .skip(1)
        .collect();
    let at = std::env::var("_CLAP_COMPLETE_INDEX")
        .ok()
        .and_then(|i| i.parse().ok())
        .unwrap_or(words.len().saturating_sub(1));
    let before = words.get(1..at.min(words.len())).unwrap_or_default();
    let mut words = before.iter().copied().take_while(|a| *a != "--");
    while let Some(word) = words.next() {
        let dir: Option<&OsStr> = if word == "-C" {
            words.next()
        } else {
            word.to_str()
                .and_then(|w| w.strip_prefix("-C"))
                .filter(|d| !d.is_empty())
                .map(OsStr::new)
        };
        if let Some(dir) = dir {
            let _ = std::env::set_current_dir(Path::new(dir));
        }
    }
}

/// Returns how the scripts call the binary back: this binary's own path (so that completion
/// needs no `PATH` entry and never runs another `git-lease`), else its name.
fn completer() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned))
        .unwrap_or_else(|| BIN.to_owned())
}

/// bash, as clap_complete writes it, with `_git_lease` for git's own completion.
struct GitBash;

impl EnvCompleter for GitBash {
    fn name(&self) -> &'static str {
        Bash.name()
    }

    fn is(&self, name: &str) -> bool {
        Bash.is(name)
    }

    fn write_registration(
        &self,
        var: &str,
        name: &str,
        bin: &str,
        completer: &str,
        buf: &mut dyn Write,
    ) -> std::io::Result<()> {
        Bash.write_registration(var, name, bin, completer, buf)?;
        buf.write_all(BASH_GIT_SUBCOMMAND.as_bytes())
    }

    fn write_complete(
        &self,
        cmd: &mut clap::Command,
        args: Vec<OsString>,
        current_dir: Option<&Path>,
        buf: &mut dyn Write,
    ) -> std::io::Result<()> {
        Bash.write_complete(cmd, args, current_dir, buf)
    }
}

/// Completes `git lease …` with the function above, by presenting git's words (after git's
/// own options, whose `-C`s are kept) as `git-lease …`. git's completion
/// (`git-completion.bash`) calls `_git_lease` for the `lease` subcommand, with `words`,
/// `cword`, `__git_cmd_idx` (where `lease` is) and `__git_C_args` set; called alone, it reads
/// `COMP_WORDS` and takes `lease` as the second word.
const BASH_GIT_SUBCOMMAND: &str = r#"
# `git lease <TAB>`: git's own bash completion calls _git_lease for the lease subcommand.
_git_lease() {
    local at=${__git_cmd_idx:-1}
    local -a typed=("${COMP_WORDS[@]}")
    local typed_at=$COMP_CWORD
    if [[ -n ${cword-} && ${#words[@]} -gt 0 ]]; then
        typed=("${words[@]}")
        typed_at=$cword
    fi
    local -a dirs=("${__git_C_args[@]}")
    local COMP_WORDS=(git-lease "${dirs[@]}" "${typed[@]:at+1}")
    local COMP_CWORD=$((typed_at - at + ${#dirs[@]}))
    _clap_complete_git_lease git-lease "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
}
"#;
