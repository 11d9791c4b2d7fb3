//! `git lease gc`: pack the repository's loose objects and refs (see [`git_lease::gc`]).

use std::io::Write;

use super::output::json::json_line;
use super::{exit, Context, Failure};

/// Runs the packing and reports what changed.
pub(crate) fn gc(ctx: &Context, full: bool, out: &mut dyn Write) -> Result<u8, Failure> {
    let report = git_lease::gc::gc(ctx.ledger.store(), full)?;
    if ctx.json {
        json_line(out, &report)?;
    } else {
        writeln!(
            out,
            "packed: loose objects {} -> {}, loose lease refs {} -> {}, {} pack(s), {} stale temporary file(s) removed ({})",
            report.loose_objects_before,
            report.loose_objects_after,
            report.loose_lease_refs_before,
            report.loose_lease_refs_after,
            report.packs_after,
            report.temporary_files_removed,
            report.commands.join("; ")
        )?;
    }
    Ok(exit::OK)
}
