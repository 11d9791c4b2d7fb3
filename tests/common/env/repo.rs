//! A repository in its own temporary directory ([`TestRepo`]): plain git and the binary run in
//! it, and what git sees of it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use super::{at_min, reftable, Cmd, Run, BIN, REF_FORMAT_ENV};

/// A repository in its own temporary directory.
pub struct TestRepo {
    tmp: TempDir,
    root: PathBuf,
    path: PathBuf,
    home: PathBuf,
    bare: bool,
    /// A directory put first on `PATH` of every process started here.
    path_first: Option<PathBuf>,
}

impl TestRepo {
    /// A fresh non-bare repository (`git init`).
    pub fn new() -> TestRepo {
        TestRepo::init(&[])
    }

    /// A fresh bare repository (`git init --bare`).
    pub fn bare() -> TestRepo {
        TestRepo::init(&["--bare"])
    }

    /// A fresh repository made with `git init <extra>` (`--bare`, `--object-format=sha256`,
    /// `--ref-format=reftable`, ...).
    pub fn init(extra: &[&str]) -> TestRepo {
        let bare = extra.contains(&"--bare");
        TestRepo::init_at(if bare { "repo.git" } else { "repo" }, extra)
    }

    /// A fresh repository (`git init <extra>`) acting as `holder` (`lease.holder`), with
    /// `origin` at `url`: a client of a server.
    pub fn client_made_with(extra: &[&str], url: &str, holder: &str) -> TestRepo {
        let repo = TestRepo::mirror_made_with(extra, url);
        repo.git(&["config", "lease.holder", holder]);
        repo
    }

    /// [`TestRepo::client_made_with`] a plain `git init`.
    pub fn client_of(url: &str, holder: &str) -> TestRepo {
        TestRepo::client_made_with(&[], url, holder)
    }

    /// A fresh repository (`git init <extra>`) with only `origin` set, at `url`: a mirror.
    pub fn mirror_made_with(extra: &[&str], url: &str) -> TestRepo {
        let repo = TestRepo::init(extra);
        repo.git(&["remote", "add", "origin", url]);
        repo
    }

    /// Makes a bare repository (`git init --bare <extra>`) and adds it as this one's `origin`,
    /// by its path; returns it (dropping it removes it).
    pub fn add_bare_origin(&self, extra: &[&str]) -> TestRepo {
        let origin = TestRepo::init(&[&["--bare"], extra].concat());
        let path = origin.path().to_str().expect("a UTF-8 temporary path");
        self.git(&["remote", "add", "origin", path]);
        origin
    }

    /// A fresh repository made with `git init <extra>` at `<tmp>/<name>` (`name` may have
    /// several components: git creates the leading directories).
    pub fn init_at(name: &str, extra: &[&str]) -> TestRepo {
        let tmp = tempfile::Builder::new()
            .prefix("git-lease-it.")
            .tempdir()
            .expect("create a temporary directory");
        let root = tmp
            .path()
            .canonicalize()
            .expect("canonicalize the temporary directory");
        let home = root.join("home");
        std::fs::create_dir(&home).expect("create HOME");
        let bare = extra.contains(&"--bare");
        let path = root.join(name);
        let repo = TestRepo {
            tmp,
            root: root.clone(),
            path: path.clone(),
            home,
            bare,
            path_first: None,
        };
        let mut args = vec!["init", "-q"];
        args.extend_from_slice(extra);
        let path_str = path.to_str().expect("a UTF-8 temporary path");
        args.push(path_str);
        repo.git_in(&root, &args);
        // The reftable run must make reftable repositories: git must have read the variable.
        if reftable() && !extra.iter().any(|a| a.starts_with("--ref-format")) {
            assert_eq!(
                repo.ref_format(),
                "reftable",
                "{REF_FORMAT_ENV} was not honoured"
            );
        }
        repo
    }

    /// Puts `dir` first on the `PATH` of every process started here from now on (the binary
    /// and plain git), so that the `git` in it is the one they run.
    pub fn path_first(mut self, dir: &Path) -> TestRepo {
        self.set_path_first(dir);
        self
    }

    /// As [`TestRepo::path_first`], in place.
    pub fn set_path_first(&mut self, dir: &Path) {
        self.path_first = Some(dir.to_owned());
    }

    /// The directory first on `PATH` here, if [`TestRepo::path_first`] set one.
    pub fn first_on_path(&self) -> Option<&Path> {
        self.path_first.as_deref()
    }

    /// The work tree, or the git dir of a bare repository.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary directory holding everything (HOME, the repository, scratch space).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `HOME` of every process started here.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The git dir.
    pub fn git_dir(&self) -> PathBuf {
        if self.bare {
            self.path.clone()
        } else {
            self.path.join(".git")
        }
    }

    /// Whether the repository is bare.
    pub fn is_bare(&self) -> bool {
        self.bare
    }

    /// Creates (if need be) and returns a scratch directory `<tmp>/<name>` outside the
    /// repository.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        dir
    }

    fn base(&self, program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            removes: Vec::new(),
            cwd: self.path.clone(),
            home: self.home.clone(),
            ceiling: self.root.clone(),
            stdin: None,
            path_first: self.path_first.clone(),
        }
    }

    /// The binary under test, in the repository, without `GIT_LEASE_NOW`.
    pub fn lease(&self) -> Cmd {
        self.base(BIN)
    }

    /// Runs the binary with `args` in the repository (system clock).
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.lease().args(args).run()
    }

    /// Runs the binary with `args` in the repository with `GIT_LEASE_NOW=now`.
    pub fn run_at<S: AsRef<OsStr>>(&self, now: &str, args: &[S]) -> Run {
        self.lease().now(now).args(args).run()
    }

    /// Runs the binary with `--json` and `GIT_LEASE_NOW=now`, asserting the exit code, and
    /// returns the parsed output.
    #[track_caller]
    pub fn json_at<S: AsRef<OsStr>>(&self, now: &str, code: i32, args: &[S]) -> Value {
        let run = self.lease().now(now).arg_json().args(args).run();
        run.code(code);
        run.json()
    }

    /// Runs the binary with `--json` for each `(minutes after T0, exit code, arguments)` of
    /// `steps`, in order, the arguments split at white space, asserting each exit code and
    /// that each answer is JSON.
    #[track_caller]
    pub fn json_steps(&self, steps: &[(i64, i32, &str)]) {
        for (min, code, args) in steps {
            self.json_at(&at_min(*min), *code, &words(args));
        }
    }

    /// Runs the binary (human output) for each `(minutes after T0, arguments)` of `steps`, in
    /// order, the arguments split at white space, asserting each exits 0.
    #[track_caller]
    pub fn steps(&self, steps: &[(i64, &str)]) {
        for (min, args) in steps {
            self.run_at(&at_min(*min), &words(args)).ok();
        }
    }

    /// Plain git, hermetic, in the repository; not run yet.
    pub fn git_cmd(&self) -> Cmd {
        self.base("git")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("GIT_AUTHOR_DATE", "1796040000 +0000")
            .env("GIT_COMMITTER_DATE", "1796040000 +0000")
    }

    /// Runs plain git in the repository and returns its stdout without the final newlines;
    /// panics with stderr if git fails.
    #[track_caller]
    pub fn git<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let run = self.git_cmd().args(args).run();
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Runs plain git in `dir`; see [`TestRepo::git`].
    #[track_caller]
    pub fn git_in<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> String {
        let run = self.git_cmd().cwd(dir).args(args).run();
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Runs plain git with `input` on stdin; see [`TestRepo::git`].
    #[track_caller]
    pub fn git_stdin<S: AsRef<OsStr>>(&self, args: &[S], input: &[u8]) -> String {
        let run = self.git_cmd().args(args).stdin(input).run();
        assert_eq!(run.code, 0, "`{}` failed\n{run}", run.command);
        run.stdout.trim_end_matches('\n').to_owned()
    }

    /// Runs plain git and returns the whole run, failing or not.
    pub fn git_run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.git_cmd().args(args).run()
    }

    /// Returns the commit `refs/leases/<issue>` points at, if the ref exists.
    pub fn tip(&self, issue: &str) -> Option<String> {
        let run = self.git_run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/leases/{issue}^{{commit}}"),
        ]);
        (run.code == 0).then(|| run.stdout.trim().to_owned())
    }

    /// Returns the repository's ref storage format (`files` or `reftable`), as git says.
    pub fn ref_format(&self) -> String {
        self.git(&["rev-parse", "--show-ref-format"])
    }

    /// Returns the lock file git takes to move `refs/leases/<issue>`: the ref's own
    /// `.lock` with the files backend, `reftable/tables.list.lock` (one for every ref) with
    /// reftable.
    pub fn ref_lock(&self, issue: &str) -> PathBuf {
        if self.ref_format() == "reftable" {
            self.git_dir().join("reftable/tables.list.lock")
        } else {
            self.git_dir().join(format!("refs/leases/{issue}.lock"))
        }
    }

    /// Returns the number of commits in the ledger of `issue` (0 if it has none).
    pub fn commit_count(&self, issue: &str) -> usize {
        if self.tip(issue).is_none() {
            return 0;
        }
        self.git(&["rev-list", "--count", &format!("refs/leases/{issue}")])
            .parse()
            .expect("rev-list --count prints a number")
    }

    /// Returns `git for-each-ref` output for everything under `refs/leases/`.
    pub fn lease_refs(&self) -> String {
        self.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/leases/",
        ])
    }

    /// Returns the number of objects in the repository, loose and packed.
    pub fn object_count(&self) -> u64 {
        let [loose, packed] = self.count_objects(["count", "in-pack"]);
        loose + packed
    }

    /// Returns the numbers `git count-objects -v` prints for each of `names` (`count`,
    /// `in-pack`, `packs`, ...), from one run.
    pub fn count_objects<const N: usize>(&self, names: [&str; N]) -> [u64; N] {
        let text = self.git(&["count-objects", "-v"]);
        names.map(|name| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("count-objects -v has no {name}: {text}"))
                .trim()
                .parse()
                .expect("a number")
        })
    }

    /// Everything a write could change: every ref (with reflogs' existence) and the object
    /// count. Equal snapshots before and after a command mean it wrote nothing.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            refs: self.git(&["for-each-ref", "--format=%(refname) %(objectname)"]),
            objects: self.object_count(),
        }
    }

    /// Returns the ledger of `issue` as plain git sees it: `(commit, lease.json)` oldest first.
    pub fn chain(&self, issue: &str) -> Vec<(String, Value)> {
        if self.tip(issue).is_none() {
            return Vec::new();
        }
        let list = self.git(&["rev-list", "--reverse", &format!("refs/leases/{issue}")]);
        list.lines()
            .map(|commit| {
                let text = self.git(&["show", &format!("{commit}:lease.json")]);
                let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                    panic!("lease.json of {commit} is not JSON ({e}):\n{text}")
                });
                (commit.to_owned(), value)
            })
            .collect()
    }

    /// Returns the tip's `lease.json` as plain git sees it.
    pub fn lease_json(&self, issue: &str) -> Value {
        let text = self.git(&["show", &format!("refs/leases/{issue}:lease.json")]);
        serde_json::from_str(&text).expect("lease.json is JSON")
    }

    /// Returns the `lease.json` of commit (or any revision) `rev` as plain git sees it.
    pub fn lease_json_at(&self, rev: &str) -> Value {
        let text = self.git(&["show", &format!("{rev}:lease.json")]);
        serde_json::from_str(&text).expect("lease.json is JSON")
    }

    /// Asserts `git fsck --strict` finds nothing wrong.
    #[track_caller]
    pub fn assert_fsck(&self) {
        let run = self.git_run(&["fsck", "--strict", "--no-dangling"]);
        assert_eq!(run.code, 0, "git fsck --strict failed\n{run}");
        let complaints: Vec<&str> = run
            .stderr
            .lines()
            .chain(run.stdout.lines())
            .filter(|l| !l.starts_with("notice:") && !l.starts_with("Checking"))
            .collect();
        assert!(
            complaints.is_empty(),
            "git fsck --strict complained:\n{run}"
        );
    }
}

impl Default for TestRepo {
    fn default() -> Self {
        TestRepo::new()
    }
}

/// Refs and object count at one moment; see [`TestRepo::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// `for-each-ref` of every ref.
    pub refs: String,
    /// Loose plus packed objects.
    pub objects: u64,
}

/// Runs a busy history on 42: acquire, re-acquire, renew, release, release again (nothing),
/// acquire by bob. Returns the events that must be recorded, oldest first.
pub fn busy_42(repo: &TestRepo) -> Vec<&'static str> {
    repo.json_steps(&[
        (0, 0, "acquire 42 --holder alice --ttl 10m"),
        (1, 0, "acquire 42 --holder alice --ttl 10m"),
        (2, 0, "renew 42 --holder alice --ttl 30m"),
        (3, 3, "acquire 42 --holder bob"),
        (4, 0, "release 42 --holder alice"),
        (5, 0, "release 42 --holder alice"),
        (6, 0, "acquire 42 --holder bob --ttl never"),
    ]);
    vec!["acquire", "reacquire", "renew", "release", "acquire"]
}

/// Splits command-line arguments written as one string at white space.
fn words(args: &str) -> Vec<&str> {
    args.split_whitespace().collect()
}
