//! The version gates of `git::version`: a git older than a command needs is refused before it
//! runs (exit 2, naming the version needed and the one found), and work done in-process (files
//! refs, reftable reads) never asks git's version at all. The distribution's older git itself
//! is run beside the newer one in the `zoo` test binary (`oldgit`).

use crate::env::{at_min, TestRepo};
use crate::gits::{fake_git, lease};

// No git older than 2.29 can be installed here, so the gate is shown with a stand-in that
// says it is 2.28.0 when asked for its version and runs the real git for everything else:
// what is refused is refused for the version alone, before any command of the remote runs
// (the stand-in logs every other command it is given).

#[test]
fn a_git_older_than_2_29_is_refused_for_remote_work_before_anything_runs() {
    let repo = TestRepo::init(&["--ref-format=files"]);
    let origin = repo.add_bare_origin(&["--ref-format=files"]);
    let (git, log) = fake_git(&repo.scratch("bin"), "git version 2.28.0");
    let said = "this needs git 2.29 or newer for --remote and sync (found 2.28.0)";
    for args in [
        &["acquire", "42", "--holder", "alice", "--remote", "origin"][..],
        &[
            "acquire", "--any", "1", "2", "--holder", "alice", "--remote", "origin",
        ],
        &["list", "--remote", "origin"],
        &["sync", "origin"],
    ] {
        let run = repo.lease().path_first(&git).args(args).run();
        run.code(2).stderr_has(said);
    }
    let run = lease(&repo, Some(&git), 0, &["show", "42", "--remote", "origin"]);
    run.code(2);
    assert!(run.stderr.contains(r#""kind":"usage""#), "{run}");
    assert_eq!(
        std::fs::read_to_string(&log).expect("the log"),
        "",
        "no git command ran"
    );
    assert!(origin.lease_refs().is_empty(), "nothing was pushed");
    assert!(repo.lease_refs().is_empty(), "nothing was written");
}

#[test]
fn local_files_work_and_reftable_reads_ask_git_nothing_and_reftable_writes_need_2_45() {
    // The files backend is worked in-process: no git runs, so none is refused.
    let repo = TestRepo::init(&["--ref-format=files"]);
    let (git, log) = fake_git(&repo.scratch("bin"), "git version 2.28.0");
    let v = lease(
        &repo,
        Some(&git),
        0,
        &["acquire", "42", "--holder", "alice"],
    );
    v.outcome(0, "acquired");
    lease(&repo, Some(&git), 1, &["list"]).ok();
    lease(
        &repo,
        Some(&git),
        1,
        &["release", "42", "--holder", "alice"],
    )
    .ok();
    assert_eq!(
        std::fs::read_to_string(&log).expect("the log"),
        "",
        "no git command ran"
    );

    // A reftable repository is read in-process: no git runs for a read.
    let repo = TestRepo::init(&["--ref-format=reftable"]);
    let _origin = repo.add_bare_origin(&["--ref-format=files"]);
    repo.json_at(
        &at_min(0),
        0,
        &["acquire", "41", "--holder", "alice", "--local"],
    );
    let (git, log) = fake_git(&repo.scratch("bin"), "git version 2.28.0");
    lease(&repo, Some(&git), 1, &["show", "41", "--local"]).ok();
    assert_eq!(
        std::fs::read_to_string(&log).expect("the log"),
        "",
        "no git command ran"
    );
    // Its writes and remote work are git's: 2.28 falls short of both gates, and the message
    // names the one that does for both.
    for args in [
        &["acquire", "42", "--holder", "alice", "--local"][..],
        &["acquire", "43", "--holder", "alice", "--remote", "origin"],
    ] {
        let run = repo.lease().path_first(&git).args(args).run();
        run.code(2)
            .stderr_has("this needs git 2.45 or newer for a reftable repository (found 2.28.0)");
    }
    assert!(repo.tip("42").is_none(), "no ref moved");
}

#[test]
fn a_git_version_that_cannot_be_read_is_no_reason_to_refuse() {
    let repo = TestRepo::init(&["--ref-format=files"]);
    let origin = repo.add_bare_origin(&["--ref-format=files"]);
    for (i, says) in ["git version unknown", "", "git version 2.47.3.windows.1"]
        .into_iter()
        .enumerate()
    {
        let (git, log) = fake_git(&repo.scratch(&format!("bin-{i}")), says);
        let issue = format!("{}", 40 + i);
        let v = lease(
            &repo,
            Some(&git),
            0,
            &["acquire", &issue, "--holder", "alice", "--remote", "origin"],
        );
        v.outcome(0, "acquired");
        assert!(
            std::fs::read_to_string(&log)
                .expect("the log")
                .contains("push"),
            "the push ran through the stand-in of {says:?}"
        );
        assert_eq!(origin.tip(&issue).as_deref(), v.json()["commit"].as_str());
    }
}
