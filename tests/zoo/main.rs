//! Integration tests of `git-lease` through software others wrote: the second test binary
//! (`cargo test --test zoo`), beside `it`, which needs only git and Rust. `.ci/run` installs
//! all of it; where a piece is missing its tests say so (`SKIPPED: …`, a line of the skips
//! file) and, with `CI=true`, fail. Both binaries share one harness, `tests/common/`.
//!
//! - [`servers`]: every common git server set up as docs/SERVER.md says (sshd, gitolite, nginx,
//!   apache, and JGit's and dulwich's servers), its traps, and the doc itself.
//! - [`doctor_thirdparty`]: `doctor` against dulwich's servers, which ignore an expected old
//!   value or serve one connection at a time.
//! - [`mcp`], [`mcp_session`]: `git lease mcp` driven by the Python MCP SDK, its session-bound
//!   leases included.
//! - [`oldgit`]: the distribution's older git (2.39) as client and server beside the newer one.
//! - [`timeline_browser`]: `timeline`'s page read back from headless Chromium.
//! - [`git_help`]: the installed manual through man (`git help lease`).

#[path = "../common/mod.rs"]
#[allow(dead_code)]
mod common;
pub use common::{
    accounts, cgi, doctor_checks, env, forge, gits, password_urls, pushes, server, timeline_story,
};

mod doctor_thirdparty;
mod git_help;
mod mcp;
mod mcp_session;
mod oldgit;
mod servers;
mod timeline_browser;
