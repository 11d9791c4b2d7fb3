//! Shell completion through the binary: the script a shell loads calls `git-lease` back with
//! `COMPLETE=<shell>` and the words typed, and the binary answers with candidates, the ids of
//! the repository's lease refs among them. Asked here as the script asks (the protocol's
//! variables), and once through a real bash with git's own completion loaded.

use std::path::{Path, PathBuf};

use crate::env::{self, TestRepo, BIN, T0};

/// Ids whose byte order is not their natural order.
const IDS: [&str; 5] = ["12", "2", "10", "issue-10", "issue-2"];

/// A repository with a lease on each of [`IDS`].
fn leased() -> TestRepo {
    let repo = TestRepo::new();
    let mut claim = vec!["acquire", "--holder", "alice", "--ttl", "1h"];
    claim.extend(IDS);
    repo.json_at(T0, 0, &claim);
    repo
}

/// Asks `git-lease` for the candidates of the last of `words` (the words after the program
/// name), in `dir`, as bash's script does; returns them one a line.
fn candidates(repo: &TestRepo, dir: &Path, words: &[&str]) -> Vec<String> {
    let run = repo
        .lease()
        .cwd(dir)
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", words.len().to_string())
        .env("_CLAP_IFS", "\n")
        .args(["--", "git-lease"])
        .args(words)
        .run();
    run.ok();
    assert!(run.stderr.is_empty(), "{run}");
    run.stdout.lines().map(str::to_owned).collect()
}

/// The candidates that are no option.
fn values(candidates: &[String]) -> Vec<&str> {
    candidates
        .iter()
        .map(String::as_str)
        .filter(|c| !c.starts_with('-'))
        .collect()
}

/// Every file under `dir` with its size and modification time: what a write would change.
fn files(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read a directory") {
            let entry = entry.expect("a directory entry");
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                todo.push(entry.path());
            } else {
                let modified = meta.modified().expect("a modification time");
                out.push((entry.path(), meta.len(), modified));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn completion_offers_the_ids_of_the_lease_refs_in_natural_order_and_writes_nothing() {
    let repo = leased();
    let before = files(&repo.git_dir());
    let natural = ["2", "10", "12", "issue-2", "issue-10"];
    for sub in [
        "release", "show", "log", "renew", "check", "revoke", "wait", "run", "complete", "abandon",
        "verify", "acquire",
    ] {
        let got = candidates(&repo, repo.path(), &[sub, ""]);
        assert_eq!(values(&got), natural, "{sub}: {got:?}");
    }
    // What is typed narrows them.
    let got = candidates(&repo, repo.path(), &["release", "1"]);
    assert_eq!(got, ["10", "12"]);
    let got = candidates(&repo, repo.path(), &["show", "issue-"]);
    assert_eq!(got, ["issue-2", "issue-10"]);
    // After another id too, where a command takes several.
    let got = candidates(&repo, repo.path(), &["verify", "2", "is"]);
    assert_eq!(got, ["issue-2", "issue-10"]);
    // Subcommands and options still come from the parser.
    assert_eq!(candidates(&repo, repo.path(), &["rel"]), ["release"]);
    assert_eq!(candidates(&repo, repo.path(), &["list", "--al"]), ["--all"]);
    assert_eq!(
        files(&repo.git_dir()),
        before,
        "completion wrote in the git dir"
    );
}

#[test]
fn completion_reads_the_repository_a_c_option_names_and_offers_no_id_outside_one() {
    let repo = leased();
    let outside = repo.scratch("elsewhere");
    let path = repo.path().to_str().expect("a UTF-8 path");
    let got = candidates(&repo, &outside, &["-C", path, "release", "issue-"]);
    assert_eq!(got, ["issue-2", "issue-10"]);
    let joined = format!("-C{path}");
    let got = candidates(&repo, &outside, &[&joined, "log", "1"]);
    assert_eq!(got, ["10", "12"]);
    // No repository: options only, and no error.
    let got = candidates(&repo, &outside, &["release", ""]);
    assert!(values(&got).is_empty(), "{got:?}");
    assert!(got.iter().any(|c| c == "--holder"), "{got:?}");
}

#[test]
fn a_complete_variable_that_names_no_shell_changes_nothing() {
    let repo = leased();
    for value in ["1", "yes", ""] {
        let run = repo
            .lease()
            .now(T0)
            .env("COMPLETE", value)
            .args(["--json", "list"])
            .run();
        run.ok();
        assert_eq!(crate::env::issues(&run.json()).len(), IDS.len(), "{run}");
    }
}

#[test]
fn the_completions_command_prints_what_the_protocol_registers() {
    let repo = TestRepo::new();
    let registered = repo.lease().env("COMPLETE", "bash").run();
    registered.ok();
    let printed = repo.run(&["completions", "bash"]);
    printed.ok();
    assert_eq!(printed.stdout, registered.stdout);
    // The script calls this binary back, for git-lease and (through git's completion) for
    // `git lease`.
    printed
        .stdout_has(&format!("\"{BIN}\" -- "))
        .stdout_has("-F _clap_complete_git_lease git-lease")
        .stdout_has("_git_lease() {");
    for shell in ["zsh", "fish"] {
        repo.run(&["completions", shell]).ok().stdout_has(BIN);
    }
}

/// Where git's bash completion (`git-completion.bash`) is installed: Debian's git package
/// ships it where bash-completion loads it.
const GIT_COMPLETION: &[&str] = &[
    "/usr/share/bash-completion/completions/git",
    "/usr/share/git/completion/git-completion.bash",
    "/usr/local/share/bash-completion/completions/git",
];

#[test]
fn a_real_bash_completes_ids_for_git_lease_and_through_gits_completion_for_git_lease() {
    let Some(git_completion) = GIT_COMPLETION.iter().find(|p| Path::new(p).exists()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI needs git's bash completion (Debian's git package ships it)"
        );
        eprintln!("SKIPPED: git's bash completion is not installed here");
        return;
    };
    let repo = leased();
    let bin_dir = Path::new(BIN).parent().expect("the binary has a directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Completes the line as bash would on a TAB at its end: the words split as readline
    // splits them here (at spaces), the completion function registered for the first word
    // called as `complete -F` calls it.
    let script = format!(
        r#"
source {git_completion}
eval "$(git lease completions bash)"
tab() {{
    COMP_LINE="$1"; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9
    read -ra COMP_WORDS <<<"$COMP_LINE"
    [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
    local spec; spec=$(complete -p "${{COMP_WORDS[0]}}")
    local fn=${{spec##*-F }}; fn=${{fn%% *}}
    COMPREPLY=()
    "$fn" "${{COMP_WORDS[0]}}" "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD - 1]}}"
    echo "$1=[${{COMPREPLY[*]}}]"
}}
tab 'git lease rel'
tab 'git lease release 1'
tab 'git lease show issue-'
tab 'git-lease release 1'
tab 'git-lease wait issue-'
cd /
tab 'git -C {repo} lease log 1'
"#,
        repo = repo.path().display()
    );
    let mut cmd = std::process::Command::new("bash");
    env::hermetic(&mut cmd, repo.home(), repo.root());
    let out = cmd
        .env("PATH", &path)
        .args(["--norc", "--noprofile", "-c", &script])
        .current_dir(repo.path())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!(
        "{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    for want in [
        "git lease rel=[release]",
        "git lease release 1=[10 12]",
        "git lease show issue-=[issue-2 issue-10]",
        "git-lease release 1=[10 12]",
        "git-lease wait issue-=[issue-2 issue-10]",
        &format!("git -C {} lease log 1=[10 12]", repo.path().display()),
    ] {
        assert!(
            stdout.lines().any(|l| l == want),
            "no {want:?} in\n{report}"
        );
    }
}
