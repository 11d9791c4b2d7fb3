//! The in-process reftable reader (`src/store/reftable.rs`) against git's own view of the same
//! repository: tables that git wrote (one transaction of thousands of refs in small blocks,
//! with a ref index of several levels; stacks of many small tables left uncompacted; stacks
//! compacted by `git pack-refs`; deletions shadowing older tables; symbolic refs; annotated
//! tags, whose records hold a peeled id; SHA-1 and SHA-256), every ref and value compared with
//! `git for-each-ref` and `git symbolic-ref`, each ref also looked up alone; random sequences
//! of updates, deletions and compactions (proptest); and readers that list while git replaces
//! `tables.list` underneath them.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use git_lease::{Error, Store};
use proptest::prelude::*;

use crate::env::TestRepo;

/// A reftable repository with `commits` commits on `main`; returns them, oldest first.
fn repository(object_format: &str, commits: usize) -> (TestRepo, Vec<String>) {
    let repo = TestRepo::init(&[
        "--ref-format=reftable",
        &format!("--object-format={object_format}"),
        "--initial-branch=main",
    ]);
    let mut ids = Vec::new();
    for i in 0..commits {
        repo.git(&["commit", "-q", "--allow-empty", "-m", &format!("c{i}")]);
        ids.push(repo.git(&["rev-parse", "HEAD"]));
    }
    (repo, ids)
}

/// Every direct ref as git lists it, `name → object id`, and every symbolic ref under
/// `refs/`, `name → target`.
fn git_view(repo: &TestRepo) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut direct = BTreeMap::new();
    let mut symbolic = BTreeMap::new();
    let out = repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname) %(symref)",
    ]);
    for line in out.lines() {
        let mut fields = line.split(' ');
        let (Some(name), Some(id), Some(to)) = (fields.next(), fields.next(), fields.next()) else {
            panic!("unexpected line {line:?}");
        };
        if to.is_empty() {
            direct.insert(name.to_owned(), id.to_owned());
        } else {
            symbolic.insert(name.to_owned(), to.to_owned());
        }
    }
    (direct, symbolic)
}

/// Checks that the reader sees what git sees: the same direct refs under `refs/` (a listing,
/// and a lookup of each), the same symbolic refs (each refused as a lease ref naming its
/// target), the same `HEAD`, and nothing at each name of `absent`.
fn same_as_git(repo: &TestRepo, absent: &[String]) {
    let (direct, symbolic) = git_view(repo);
    let store = Store::open(repo.path()).expect("open the store");
    let listed: BTreeMap<String, String> = store
        .refs_under("refs/")
        .expect("list refs/")
        .into_iter()
        .map(|(name, id)| (format!("refs/{name}"), id.to_string()))
        .collect();
    assert_eq!(listed, direct, "the listing of refs/");
    for (name, id) in &direct {
        let found = store.tip_of(name).expect("read one ref");
        assert_eq!(found.map(|f| f.to_string()).as_ref(), Some(id), "{name}");
    }
    for (name, to) in &symbolic {
        match store.tip_of(name) {
            Err(Error::Corrupt { commit, .. }) => {
                assert_eq!(commit, format!("(symbolic ref to {to})"), "{name}")
            }
            other => panic!("{name} is a symbolic ref to {to}, read as {other:?}"),
        }
    }
    for name in absent {
        if !direct.contains_key(name) && !symbolic.contains_key(name) {
            assert_eq!(store.tip_of(name).expect("read one ref"), None, "{name}");
        }
    }
    let head = repo.git_cmd().args(["symbolic-ref", "-q", "HEAD"]).run();
    let head = (head.code == 0).then(|| head.stdout.trim().to_owned());
    assert_eq!(store.head_name().expect("read HEAD"), head, "HEAD");
}

/// The number of tables in the repository's stack.
fn tables(repo: &TestRepo) -> usize {
    std::fs::read_to_string(repo.git_dir().join("reftable/tables.list"))
        .expect("tables.list")
        .lines()
        .count()
}

/// git's own switch for its compaction after each write (the git here has no setting for it).
const NO_COMPACTION: &str = "GIT_TEST_REFTABLE_AUTOCOMPACTION";

/// Feeds `commands` to one `git update-ref --stdin` transaction, with `config` (`-c`) first.
fn transaction(repo: &TestRepo, config: &[&str], commands: &str) {
    transaction_with(repo, config, commands, false)
}

/// As [`transaction`], leaving the stack uncompacted with `keep`.
fn transaction_with(repo: &TestRepo, config: &[&str], commands: &str, keep: bool) {
    let mut args: Vec<String> = Vec::new();
    for c in config {
        args.push("-c".into());
        args.push((*c).to_owned());
    }
    args.extend(["update-ref".into(), "--stdin".into()]);
    let mut cmd = repo.git_cmd().args(&args).stdin(commands);
    if keep {
        cmd = cmd.env(NO_COMPACTION, "false");
    }
    let run = cmd.run();
    assert_eq!(run.code, 0, "{run}");
}

fn many_refs_in_small_blocks_through_a_deep_index(object_format: &str) {
    let (repo, ids) = repository(object_format, 3);
    let small = ["reftable.blockSize=256", "reftable.restartInterval=4"];
    let mut create = String::new();
    for i in 0..3000 {
        create.push_str(&format!("create refs/leases/x{i:05} {}\n", ids[i % 3]));
    }
    transaction(&repo, &small, &create);
    // A few deletions and updates in a newer table shadow the big one.
    let mut change = String::new();
    for i in (0..3000).step_by(7) {
        change.push_str(&format!("delete refs/leases/x{i:05}\n"));
    }
    for i in (3..3000).step_by(11).filter(|i| i % 7 != 0) {
        change.push_str(&format!(
            "update refs/leases/x{i:05} {}\n",
            ids[(i + 1) % 3]
        ));
    }
    transaction(&repo, &small, &change);
    repo.git(&["symbolic-ref", "refs/leases/sym", "refs/heads/main"]);
    repo.git(&["tag", "-a", "-m", "annotated", "v1", &ids[0]]);
    assert!(tables(&repo) >= 2, "a stack of several tables");
    let absent: Vec<String> = [
        "refs/leases/x",
        "refs/leases/x00000",
        "refs/leases/x02999z",
        "refs/leases/zz",
        "refs/a",
        "refs/leases/",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain((0..3000).step_by(7).map(|i| format!("refs/leases/x{i:05}")))
    .collect();
    same_as_git(&repo, &absent);
    // Compacted into one table by git, with the deleted refs gone.
    repo.git(&["-c", "reftable.blockSize=256", "pack-refs", "--all"]);
    assert_eq!(tables(&repo), 1, "one table after pack-refs");
    same_as_git(&repo, &absent);
}

#[test]
fn a_table_of_thousands_of_refs_in_small_blocks_reads_as_git_lists_it_sha1() {
    many_refs_in_small_blocks_through_a_deep_index("sha1");
}

#[test]
fn a_table_of_thousands_of_refs_in_small_blocks_reads_as_git_lists_it_sha256() {
    many_refs_in_small_blocks_through_a_deep_index("sha256");
}

#[test]
fn an_uncompacted_stack_of_small_updates_reads_newest_first() {
    let (repo, ids) = repository("sha1", 4);
    for i in 0..40 {
        let name = format!("refs/heads/b{}", i % 13);
        let line = if i % 5 == 4 {
            format!("delete {name}\n")
        } else {
            format!("update {name} {}\n", ids[i % 4])
        };
        // A deletion of a ref that is not there is no transaction: skip it.
        if line.starts_with("delete")
            && repo
                .git_cmd()
                .args(["show-ref", "--verify", "-q", &name])
                .run()
                .code
                != 0
        {
            continue;
        }
        transaction_with(&repo, &[], &line, true);
    }
    let run = repo
        .git_cmd()
        .env(NO_COMPACTION, "false")
        .args(["symbolic-ref", "HEAD", "refs/heads/b3"])
        .run();
    assert_eq!(run.code, 0, "{run}");
    assert!(
        tables(&repo) >= 20,
        "an uncompacted stack: {} tables",
        tables(&repo)
    );
    let absent: Vec<String> = (0..13).map(|i| format!("refs/heads/b{i}")).collect();
    same_as_git(&repo, &absent);
    // Detached: HEAD is a direct ref.
    let run = repo
        .git_cmd()
        .env(NO_COMPACTION, "false")
        .args(["update-ref", "--no-deref", "HEAD", &ids[0]])
        .run();
    assert_eq!(run.code, 0, "{run}");
    same_as_git(&repo, &absent);
}

/// One step of a random history: a transaction of several edits, or a compaction.
#[derive(Clone, Debug)]
enum Step {
    Edits(Vec<(usize, Option<usize>)>),
    Symbolic(usize, usize),
    Pack,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec((0..24usize, prop::option::weighted(0.7, 0..3usize)), 1..6)
            .prop_map(Step::Edits),
        1 => (0..4usize, 0..24usize).prop_map(|(s, t)| Step::Symbolic(s, t)),
        1 => Just(Step::Pack),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_updates_deletions_and_compactions_read_as_git_lists_them(
        steps in prop::collection::vec(step(), 1..14),
        sha256 in any::<bool>(),
    ) {
        let (repo, ids) = repository(if sha256 { "sha256" } else { "sha1" }, 3);
        let name = |i: usize| format!("refs/leases/{}{i}", if i.is_multiple_of(2) { "e" } else { "o/" });
        let names: Vec<String> = (0..24).map(name).collect();
        let mut exists = std::collections::BTreeSet::new();
        for step in steps {
            match step {
                Step::Edits(edits) => {
                    let mut commands = String::new();
                    let mut touched = std::collections::BTreeSet::new();
                    for (n, value) in edits {
                        if !touched.insert(n) {
                            continue;
                        }
                        match value {
                            Some(v) => {
                                commands.push_str(&format!("update {} {}\n", names[n], ids[v]));
                                exists.insert(n);
                            }
                            None if exists.remove(&n) => {
                                commands.push_str(&format!("delete {}\n", names[n]));
                            }
                            None => {}
                        }
                    }
                    if !commands.is_empty() {
                        transaction(&repo, &["reftable.blockSize=256"], &commands);
                    }
                }
                Step::Symbolic(s, t) => {
                    repo.git(&["symbolic-ref", &format!("refs/heads/s{s}"), &names[t]]);
                }
                Step::Pack => {
                    repo.git(&["-c", "reftable.blockSize=256", "pack-refs", "--all"]);
                }
            }
            same_as_git(&repo, &names);
        }
    }
}

#[test]
fn a_reader_takes_a_whole_snapshot_while_git_replaces_tables_list() {
    let (repo, ids) = repository("sha1", 2);
    let mut stable = String::new();
    for i in 0..200 {
        stable.push_str(&format!("create refs/leases/stable{i:03} {}\n", ids[0]));
    }
    transaction(&repo, &[], &stable);
    // git moves other refs and compacts the stack, table after table, until it is done.
    let script = format!(
        "for i in $(seq 1 150); do git update-ref refs/leases/moving{} {} || exit 1; \
         if [ $((i % 10)) = 0 ]; then git pack-refs --all || exit 1; fi; done",
        "$((i % 7))", ids[1]
    );
    let mut writer = Command::new("bash")
        .args(["-c", &script])
        .current_dir(repo.path())
        .env("HOME", repo.home())
        .env_remove("GIT_DIR")
        .stdout(Stdio::null())
        .spawn()
        .expect("start git");
    let mut reads = 0;
    loop {
        let done = writer.try_wait().expect("wait for git").is_some();
        let store = Store::open(repo.path()).expect("open the store");
        let stable_seen = store
            .refs_under("refs/leases/")
            .expect("a listing while git writes")
            .into_iter()
            .filter(|(name, _)| name.starts_with("stable"))
            .count();
        assert_eq!(stable_seen, 200, "after {reads} reads");
        assert!(store
            .tip_of("refs/leases/stable100")
            .expect("a lookup while git writes")
            .is_some());
        reads += 1;
        if done {
            break;
        }
    }
    assert!(writer.wait().expect("git ended").success(), "git's writes");
    same_as_git(&repo, &[]);
}
