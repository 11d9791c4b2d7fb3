//! The command line parsed, as the whole interface ([`super::command`]) parses it, at the cost
//! of the one subcommand that runs.
//!
//! When clap builds the top level, it copies every global option (`-C`, `--json`, `--remote`,
//! `--local`, `--color`) into every subcommand: 27 subcommands' copies of five options, for
//! the one subcommand a command line runs (a tenth of a claim's instructions, and 30 of its
//! page faults). So the arguments are parsed first by an interface whose top level keeps its
//! global options to itself and gives copies to the subcommand the arguments name, and to it
//! alone: the same options, in the same place among its own, global beneath it, as clap would
//! have copied them. Any other outcome (an error, help, a version, a subcommand other than the
//! one named) is the whole interface's to give, and the arguments are parsed again by it, so
//! that every message is its own. A subcommand with options of its own named as global ones
//! is parsed by the whole interface at once, built only once. A successful parse is the same
//! either way (the property test below compares the two over generated command lines).

use std::ffi::OsString;

use clap::FromArgMatches;

use super::Cli;

/// Parses `args` (the program's name first) as [`super::command`] does.
pub(super) fn parse(args: &[OsString]) -> Result<Cli, clap::Error> {
    let command = super::command();
    match for_one(&command, args) {
        Some(name) => match parse_for_named(command, &name, args) {
            Some(cli) => Ok(cli),
            None => parse_whole(super::command(), args),
        },
        None => parse_whole(command, args),
    }
}

/// Parses `args` with `command`, the whole interface.
fn parse_whole(mut command: clap::Command, args: &[OsString]) -> Result<Cli, clap::Error> {
    command
        .try_get_matches_from_mut(args)
        .and_then(|mut matches| {
            Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut super::command()))
        })
}

/// The subcommand that `args` name, if the global options can be copied into it alone: not
/// one with options of its own named as global ones (the hidden where-options of `gc`,
/// `install-hook` and `hook`), whose values clap hands to the top level because the top
/// level's options of that name are global.
fn for_one(command: &clap::Command, args: &[OsString]) -> Option<String> {
    let name = named_subcommand(command, args)?;
    let global = |id: &clap::Id| {
        command
            .get_arguments()
            .any(|arg| arg.is_global_set() && arg.get_id() == id)
    };
    let shadows = command
        .find_subcommand(&name)?
        .get_arguments()
        .any(|own| global(own.get_id()));
    (!shadows).then_some(name)
}

/// Parses `args` with `command`'s global options copied only into its subcommand `name`;
/// `None` unless the parse ends in that subcommand's arguments.
fn parse_for_named(mut command: clap::Command, name: &str, args: &[OsString]) -> Option<Cli> {
    let globals: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .cloned()
        .collect();
    for arg in &globals {
        command = command.mut_arg(arg.get_id(), |arg| arg.global(false));
    }
    command = command.mut_subcommand(name, |mut sub| {
        for arg in &globals {
            sub = sub.arg(arg.clone());
        }
        sub
    });
    let mut matches = command.try_get_matches_from_mut(args).ok()?;
    if matches.subcommand_name() != Some(name) {
        return None;
    }
    Cli::from_arg_matches_mut(&mut matches).ok()
}

/// The name of the subcommand that `args` name, as clap finds it: the first word after the
/// program's name that is neither an option of the top level nor the value of one, if it is
/// a subcommand's name.
fn named_subcommand(command: &clap::Command, args: &[OsString]) -> Option<String> {
    let takes_value = |arg: Option<&clap::Arg>| arg.is_some_and(|a| a.get_action().takes_values());
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        let word = word.to_str()?;
        if word == "--" {
            return None;
        }
        if let Some(long) = word.strip_prefix("--") {
            let option = command.get_arguments().find(|a| a.get_long() == Some(long));
            if takes_value(option) {
                words.next();
            }
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // In a cluster of short options, the first that takes a value takes the rest of
            // the word, or the next word when it is the last.
            for (at, short) in shorts.char_indices() {
                if takes_value(
                    command
                        .get_arguments()
                        .find(|a| a.get_short() == Some(short)),
                ) {
                    if at + short.len_utf8() == shorts.len() {
                        words.next();
                    }
                    break;
                }
            }
        } else {
            return command
                .find_subcommand(word)
                .map(|sub| sub.get_name().to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Command;
    use proptest::prelude::*;

    /// What a parse gave, to compare: the parsed command line, or the error's kind and text.
    fn outcome(parsed: Result<Cli, clap::Error>) -> String {
        match parsed {
            Ok(cli) => format!("{cli:?}"),
            Err(e) => format!("{:?}: {}", e.kind(), e.render()),
        }
    }

    /// The parse with global options copied into the named subcommand alone, if it is taken.
    fn fast(args: &[OsString]) -> Option<Cli> {
        let command = super::super::command();
        for_one(&command, args).and_then(|name| parse_for_named(command, &name, args))
    }

    fn whole(args: &[OsString]) -> Result<Cli, clap::Error> {
        parse_whole(super::super::command(), args)
    }

    fn args(words: &[&str]) -> Vec<OsString> {
        std::iter::once("git-lease")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn the_named_subcommand_is_the_first_word_no_top_level_option_takes() {
        let command = super::super::command();
        let named = |words: &[&str]| named_subcommand(&command, &args(words));
        assert_eq!(named(&["acquire", "7"]).as_deref(), Some("acquire"));
        assert_eq!(named(&["-C", "show", "list"]).as_deref(), Some("list"));
        assert_eq!(named(&["-Cshow", "list"]).as_deref(), Some("list"));
        assert_eq!(named(&["--remote", "log", "show"]).as_deref(), Some("show"));
        assert_eq!(named(&["--remote=log", "show"]).as_deref(), Some("show"));
        assert_eq!(named(&["--json", "--local", "gc"]).as_deref(), Some("gc"));
        assert_eq!(
            named(&["--color", "never", "install-hook"]).as_deref(),
            Some("install-hook")
        );
        assert_eq!(named(&["--", "acquire"]), None);
        assert_eq!(named(&["acquirex"]), None);
        assert_eq!(named(&["-C"]), None);
    }

    #[test]
    fn global_options_go_where_clap_puts_them() {
        for words in [
            &[
                "-C", "a", "acquire", "7", "-C", "b", "--json", "--holder", "h",
            ][..],
            &["acquire", "--remote", "origin", "7", "--color", "never"],
            &["--remote=origin", "list", "--all"],
            &["show", "7", "--local", "-C", "x"],
            &["release", "--json", "7", "-C", "x", "-C", "y"],
        ] {
            let args = args(words);
            let named = fast(&args).map(|cli| format!("{cli:?}"));
            assert_eq!(
                named,
                whole(&args).ok().map(|cli| format!("{cli:?}")),
                "{words:?}"
            );
            assert!(named.is_some(), "{words:?} parses");
        }
        for words in [
            &["gc", "--json"][..],
            &["install-hook", "--local"],
            &["hook", "update", "refs/leases/7", "0", "1", "--json"],
        ] {
            let args = args(words);
            assert!(whole(&args).is_ok(), "{words:?} parses");
            assert!(fast(&args).is_none(), "{words:?}: where-options of its own");
        }
    }

    /// Pieces of command lines: the global options (with values), and options, values and
    /// words of the subcommands'.
    const GLOBAL: &[&[&str]] = &[
        &["-C", "dir"],
        &["-Cdir"],
        &["--json"],
        &["--remote", "origin"],
        &["--remote=origin"],
        &["--local"],
        &["--color", "never"],
        &["--color=always"],
    ];
    const OTHER: &[&[&str]] = &[
        &["7"],
        &["a/b"],
        &["--holder", "alice"],
        &["--ttl", "1h"],
        &["--any"],
        &["--ordered"],
        &["--all"],
        &["--token", "3"],
        &["--secret", "s"],
        &["--reason", "r"],
        &["update"],
        &["pre-receive"],
        &["reference-transaction"],
        &["pre-commit"],
        &["refs/leases/7"],
        &["0"],
        &["--"],
        &["-"],
        &["-h"],
        &["--help"],
        &["-V"],
        &["help"],
        &["-C"],
        &["--remote"],
        &["--bogus"],
        &["acquire"],
    ];

    /// A command line: global options, a subcommand (or another word), then a mix of global
    /// options and the subcommands' pieces.
    fn command_line() -> impl Strategy<Value = Vec<String>> {
        let names: Vec<String> = super::super::command()
            .get_subcommands()
            .map(|sub| sub.get_name().to_owned())
            .chain(["help", "-h", "bogus"].map(str::to_owned))
            .collect();
        let global = prop::sample::select(GLOBAL);
        let any_piece = prop::sample::select([GLOBAL, OTHER].concat());
        (
            prop::collection::vec(global, 0..3),
            prop::sample::select(names),
            prop::collection::vec(any_piece, 0..6),
        )
            .prop_map(|(before, name, after)| {
                let mut words: Vec<String> =
                    before.concat().iter().map(|w| w.to_string()).collect();
                words.push(name);
                words.extend(after.concat().iter().map(|w| w.to_string()));
                words
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Whatever the words, a command line the whole interface accepts is parsed with the
        /// global options given only to the subcommand named, to the same result (unless that
        /// subcommand has where-options of its own); one it refuses is refused by both, and
        /// answered by the whole interface.
        #[test]
        fn every_command_line_parses_as_the_whole_interface_parses_it(words in command_line()) {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let args = args(&words);
            let by_whole = whole(&args);
            match (&by_whole, fast(&args)) {
                (Ok(cli), Some(named)) => prop_assert_eq!(format!("{named:?}"), format!("{cli:?}")),
                (Ok(cli), None) => prop_assert!(
                    matches!(cli.command, Command::Gc(_) | Command::InstallHook(_) | Command::Hook(_)),
                    "{:?} was parsed by the whole interface alone", cli
                ),
                (Err(_), named) => prop_assert!(named.is_none()),
            }
            prop_assert_eq!(outcome(parse(&args)), outcome(by_whole));
        }
    }
}
