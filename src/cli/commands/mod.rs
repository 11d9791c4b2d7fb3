//! One module per command, each with its arguments (`Args`) and its `run(ctx, args, out)`;
//! `cli::dispatch` only routes to them.

pub(crate) mod acquire;
pub(crate) mod check;
pub(crate) mod end;
pub(crate) mod list;
pub(crate) mod log;
pub(crate) mod renew;
pub(crate) mod revoke;
pub(crate) mod show;
pub(crate) mod verify;
