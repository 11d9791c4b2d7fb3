//! The harness both integration test binaries share, `it` (git and Rust only) and `zoo` (the
//! software of others): each includes this directory as its module `common` and re-exports its
//! modules at its root, so every test names them `crate::env`, `crate::server`, ….
//!
//! - [`env`]: hermetic temporary repositories, the binary, plain git, and every skip said.
//! - [`server`]: a served bare repository per test (`git daemon`, or `git http-backend` behind
//!   lighttpd where it is installed, else the harness's own front, [`cgi`]).
//! - [`forge`]: ledger history built by hand with plain git plumbing, and `lease.json` values.
//! - [`pushes`]: forged ledger commits pushed for real, and the hook's refusals.
//! - [`gits`]: stand-in gits that say another version.
//! - [`accounts`]: the account the tests run as, and the modes of files.
//! - [`doctor_checks`], [`password_urls`], [`timeline_story`]: what the tests of `doctor`,
//!   of passwords in URLs and of `timeline` read or build in both binaries.

pub mod accounts;
pub mod cgi;
pub mod doctor_checks;
pub mod env;
pub mod forge;
pub mod gits;
pub mod password_urls;
pub mod pushes;
pub mod server;
pub mod timeline_story;
