//! `git-lease`: the `git lease` subcommand. All the rules live in the library.

mod cli;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::main())
}
