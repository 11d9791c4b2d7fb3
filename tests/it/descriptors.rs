//! Standard descriptors: a claim started with them closed writes only the ledger, and output
//! cut short by a closed pipe ends quietly with success.

use crate::env::{at_min, TestRepo, T0};

/// Runs `git-lease args…` through `sh -c script`, where the script refers to the command as
/// `"$0" "$@"`, with the test's environment and directory.
fn through_shell(repo: &TestRepo, script: &str, args: &[&str]) -> std::process::Output {
    let lease = repo.lease().now(&at_min(1)).args(args).command();
    let mut sh = std::process::Command::new("bash");
    sh.arg("-c")
        .arg(script)
        .arg(lease.get_program())
        .args(lease.get_args());
    for (key, value) in lease.get_envs() {
        match value {
            Some(value) => sh.env(key, value),
            None => sh.env_remove(key),
        };
    }
    if let Some(dir) = lease.get_current_dir() {
        sh.current_dir(dir);
    }
    sh.output().expect("run bash")
}

#[test]
fn a_claim_started_with_its_standard_descriptors_closed_writes_only_the_ledger() {
    let repo = TestRepo::new();
    // The exit status goes to a file: no standard descriptor is left to print it on.
    let out = through_shell(
        &repo,
        r#"exec 0<&- 1>&- 2>&-; "$0" "$@"; echo $? > status"#,
        &["acquire", "closed", "--holder", "alice"],
    );
    assert!(out.status.success(), "{out:?}");
    let status = std::fs::read_to_string(repo.path().join("status")).expect("status file");
    assert_eq!(status.trim(), "0");
    assert_eq!(repo.lease_json("closed")["holder"], "alice");
    // The ref holds exactly a commit id, whatever descriptors its files were opened on.
    let tip = repo.tip("closed").expect("the ref exists");
    if !crate::env::skip_under_reftable(
        "a_claim_started_with_its_standard_descriptors_closed_writes_only_the_ledger",
        "the loose ref file's content (git writes the table, with descriptors of its own)",
    ) {
        let raw = std::fs::read_to_string(repo.git_dir().join("refs/leases/closed")).expect("ref");
        assert_eq!(raw, format!("{tip}\n"));
    }
    repo.assert_fsck();
}

#[test]
fn output_cut_short_by_a_closed_pipe_ends_quietly_with_success() {
    let repo = TestRepo::new();
    let issues: Vec<String> = (0..2000).map(|i| format!("pipe{i}")).collect();
    let mut args = vec!["acquire"];
    args.extend(issues.iter().map(String::as_str));
    args.extend(["--holder", "alice"]);
    repo.run_at(T0, &args).ok();
    // 2000 lines are more than a pipe holds, so git-lease writes after `head` has gone.
    let out = through_shell(
        &repo,
        r#"set -o pipefail; "$0" "$@" | head -n 1"#,
        &["list"],
    );
    assert!(
        out.status.success(),
        "exit {:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
