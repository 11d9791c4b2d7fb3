//! Forged folds against the server hook (docs/FORMAT.md, "The archive"): a generator of pushes
//! to `refs/lease-archive`, each the honest next fold with one or more mutations, pushed with
//! plain git through a real `git daemon` with the hook installed, must each be refused by the
//! hook (`pre-receive hook declined`, the rule `archive`) while every ref of the server stays
//! as it was.
//!
//! The archive keeps the token count of every ledger it folds: a fold the hook lets through
//! that forgets an entry, moves one back, records a live lease or a tip its ref is not at, or
//! that readers would read otherwise than the hook judged it, lets a revival start over and
//! issue a token twice. So the attacker here builds folds byte by byte (`git hash-object
//! --literally`, which writes any tree and any commit git would store), starting from the fold
//! `git lease archive` would make next, and mutates:
//!
//! - the entries: one the previous fold records dropped; one moved to an older commit of its
//!   own ledger or to another ledger's tip; the live ledger recorded; a ledger recorded at a tip
//!   its ref is not at (an archived ledger moved on with no ref, a ledger never pushed); an
//!   entry at a wrong fan-out path, with mode `100644`, `100755`, `120000` or `040000` instead
//!   of a gitlink, or a gitlink to a tree, a blob, a tag or a missing object; an issue recorded
//!   twice in one tree, readers taking the first entry and the hook perhaps the last; an empty
//!   tree, or a `lease.json`, beside the fan-out; nothing recorded at all;
//! - the parents, after the entries (the attacker lists the tips its tree records, reading a
//!   doubled entry first-wins or last-wins): one missing, one extra (a duplicate included), two
//!   swapped, a first parent that is a ledger commit rather than the previous fold, none;
//! - the time: a committer time just or far outside `lease.maxClockSkew` (the honest time
//!   itself jitters within it);
//! - the object: an annotated tag of the fold, its tree, a blob, or a ledger commit pushed as
//!   the archive.
//!
//! The server is set up once for all cases (a start costs more than a push): ledgers `a` and
//! `b` released long ago and folded by `git lease archive` on the server, `a` revived and
//! released since, `d` (its lease expired) and `gh/7` quiet and not folded yet, `l` live. Every
//! mutation of the catalogue is tried alone on every run, then proptest draws combinations.
//!
//! Last, the honest fold the generator starts from is pushed, and the hook takes it: each
//! refusal was the mutation's. git's `receive-pack` then refuses the update itself, as it
//! refuses any of a ref one level under `refs/` ("funny refname"), whatever the hook said; so
//! the hook's verdict is also run on the server once the fold's objects are there, the
//! archive moved to the fold, and the server's own `git lease archive` finds every quiet
//! ledger recorded.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `GIT_LEASE_FORGED_FOLD_CASES` | 48 | generated cases, beside the catalogue |
//! | `GIT_LEASE_FORGED_FOLD_SEED` | 20261130 | proptest's seed |

mod folds;
mod generator;
mod scene;

use folds::*;
use generator::*;
use scene::*;

use std::collections::HashSet;

use git_lease::store::entry_path;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use crate::adversary::env_number;
use crate::archive::on_server;
use crate::env::{at, t0, Run, TestRepo};
use crate::forge::{acquired, freed};
use crate::pushes::{chain_on, push, push_accepted};
use crate::server::Server;

/// The server's clock while the forged folds arrive, in seconds after [`crate::env::T0`].
const NOW: i64 = 900;

/// What the hook says of each fold it refuses (`remote:` on the pusher's stderr).
const REFUSED: &str = "git-lease: refused refs/lease-archive at ";

/// The issues the honest next fold has an entry for: `a` and `b` carried or changed from the
/// previous fold, `d` and `gh/7` new.
const ENTRIES: [&str; 4] = ["a", "b", "d", "gh/7"];

/// The mode of a tree entry that is a tree, as git writes it.
const TREE: &str = "40000";

/// The mode of a gitlink.
const GITLINK: &str = "160000";

// ---------------------------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------------------------

/// Pushes `forgery` as the archive; it must be refused by the hook, every ref of the server as
/// it was.
fn refused(scene: &Scene, forgery: &Forgery) -> Result<(), String> {
    let pushed = scene.forge(forgery);
    let run = push(
        &scene.client,
        true,
        &[&format!("{pushed}:refs/lease-archive")],
    );
    let refs = scene.server.refs();
    let by_hook = run.stderr.contains(REFUSED)
        && run.stderr.contains(": archive: ")
        && run.stderr.contains("pre-receive hook declined");
    if run.code == 0 || !by_hook {
        return Err(format!(
            "the hook should refuse {forgery:?} (pushed as {pushed})\n{run}"
        ));
    }
    if refs != scene.refs {
        return Err(format!(
            "{forgery:?} was refused, yet the server's refs moved:\n{refs}\nwere:\n{}",
            scene.refs
        ));
    }
    Ok(())
}

#[test]
fn the_hook_refuses_every_forged_fold_and_takes_the_honest_one_they_came_from() {
    let cases: u32 = env_number("GIT_LEASE_FORGED_FOLD_CASES", 48);
    let seed: u64 = env_number("GIT_LEASE_FORGED_FOLD_SEED", 20_261_130);
    let started = std::time::Instant::now();
    let scene = Scene::new();
    let set_up = started.elapsed();

    let catalogue = catalogue();
    let failures: Vec<String> = catalogue
        .iter()
        .filter_map(|forgery| refused(&scene, forgery).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} forged folds of the catalogue got through:\n\n{}",
        failures.len(),
        catalogue.len(),
        failures.join("\n\n")
    );

    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        max_shrink_iters: 256,
        ..Config::default()
    });
    let result = runner.run(&forgery(), |forgery| {
        refused(&scene, &forgery).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => panic!(
            "a forged fold got through.\n\n{reason}\n\nThe minimal case (rerun with \
             GIT_LEASE_FORGED_FOLD_SEED={seed}):\n{minimal:#?}"
        ),
        Err(TestError::Abort(why)) => panic!("the generator aborted: {why}"),
    }

    // The fold every forgery came from is what plain git writes ...
    let honest = scene.honest_draft();
    let fold = write_fold(&scene.client, &honest);
    let leaves: Vec<Link> = honest
        .leaves
        .iter()
        .map(|l| (l.path.split('/').collect(), l.oid.as_str()))
        .collect();
    let tree = mktree(&scene.client, &leaves);
    let date = format!("{} +0000", secs(NOW));
    let commit_tree = |tree: &str, parents: &[&str], message: &str| {
        let mut args = vec!["commit-tree", tree];
        for parent in parents {
            args.extend(["-p", parent]);
        }
        args.extend(["-m", message]);
        let run = scene
            .client
            .git_cmd()
            .env("GIT_AUTHOR_NAME", "git-lease")
            .env("GIT_AUTHOR_EMAIL", "git-lease@localhost")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_NAME", "git-lease")
            .env("GIT_COMMITTER_EMAIL", "git-lease@localhost")
            .env("GIT_COMMITTER_DATE", &date)
            .args(&args)
            .run();
        assert_eq!(run.code, 0, "{run}");
        run.stdout.trim().to_owned()
    };
    let empty = scene
        .client
        .git(&["hash-object", "-t", "tree", "-w", "/dev/null"]);
    let tips: Vec<&str> = honest.parents[1..].iter().map(String::as_str).collect();
    let carrier = commit_tree(&empty, &tips, &carry_message(tips.len()));
    let plain = commit_tree(
        &tree,
        &[honest.parents[0].as_str(), &carrier],
        "git-lease: fold 3 ledgers",
    );
    assert_eq!(plain, fold);
    // ... and a legitimate one: the hook takes it. git's receive-pack then refuses to update
    // a ref one level under `refs/` ("funny refname"), whatever its hooks said, so no plain
    // push moves the archive: the server's own folder does.
    let run = push(
        &scene.client,
        true,
        &[&format!("{fold}:refs/lease-archive")],
    );
    assert!(
        run.code != 0 && !run.stderr.contains("git-lease: refused"),
        "the hook refused the honest fold\n{run}"
    );
    run.stderr_has("funny refname");
    assert_eq!(scene.server.refs(), scene.refs);
    // Its objects on the server under another name, the hook's verdict on the archive's move
    // there is the same; the archive moved to it, the server's folder finds every quiet ledger
    // recorded, and only removes their refs.
    let verdict = scene.judged_as_the_archive(&fold, "next-fold");
    assert_eq!(
        verdict.code, 0,
        "the hook refused the honest fold\n{verdict}"
    );
    scene
        .server
        .git(&["update-ref", "refs/lease-archive", &fold, &scene.previous]);
    let out = on_server(
        &scene.server,
        &at(NOW),
        &["--json", "archive", "--quiet-for", "1m"],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["folded"], serde_json::json!([]), "{report}");
    assert_eq!(report["removed"], 3, "{report}");
    on_server(&scene.server, &at(NOW), &["verify"]);
    eprintln!(
        "forged folds: {} of the catalogue and {cases} generated (seed {seed}) refused, the \
         honest one accepted; set up in {set_up:.1?}, {:.1?} in all",
        catalogue.len(),
        started.elapsed()
    );
}

#[test]
fn the_hook_takes_carriers_nested_four_deep_and_refuses_deeper_mixed_or_repeated_ones() {
    let scene = Scene::new();
    let honest = scene.honest_draft();
    for (n, carried) in [(2, Carried::Nested(2)), (4, Carried::Nested(4))] {
        let fold = write_fold_carried(&scene.client, &honest, carried);
        let verdict = scene.judged_as_the_archive(&fold, &format!("nested-{n}"));
        assert_eq!(verdict.code, 0, "{carried:?}: the hook refused\n{verdict}");
    }
    for (carried, why) in [
        (Carried::Nested(5), "nests carriers deeper than 4"),
        (Carried::Mixed, "is not a carrier"),
        (Carried::Twice, "each once"),
    ] {
        let fold = write_fold_carried(&scene.client, &honest, carried);
        let run = push(
            &scene.client,
            true,
            &[&format!("{fold}:refs/lease-archive")],
        );
        assert!(
            run.code != 0 && run.stderr.contains(REFUSED),
            "{carried:?}: the hook should refuse it\n{run}"
        );
        run.stderr_has(why);
        let refs = scene.server.refs();
        let unmoved = |r: &&str| !r.contains("refs/heads/nested-");
        let refs: Vec<&str> = refs.lines().filter(unmoved).collect();
        let before: Vec<&str> = scene.refs.lines().filter(unmoved).collect();
        assert_eq!(refs, before, "{carried:?}");
    }
}
