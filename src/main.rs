//! `git-lease`: the `git lease` subcommand. All the rules live in the library; this binary
//! parses the command line and turns outcomes and errors into output and exit codes.
//!
//! std's start-up does what a command that writes refs needs before anything else: closed
//! standard descriptors are reopened on `/dev/null` (so no ref lock can become stdout), and
//! SIGPIPE is ignored (so `git lease list | head` ends with a write error the command handles).

mod cli;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(cli::main(std::env::args_os().collect()))
}
