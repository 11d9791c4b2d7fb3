//! git's own conventions: settings read as git reads them (`git -c` included, run through git
//! itself), `--json` whose stderr holds JSON only, hints given only when they apply, one name
//! for a timeout, the plain words of a newcomer's first mistakes, and a house one can read: the
//! size of src files and functions, and pure rules and model apart from everything doing I/O.

use serde_json::Value;

use crate::env::{at_min, Cmd, Run, TestRepo, BIN, T0};
use crate::server::Server;

/// `git <args>` in `repo`, with the binary under test's directory first on `PATH`, so that git
/// runs it as `git lease`, with `GIT_LEASE_NOW` at T0.
fn git_lease(repo: &TestRepo, args: &[&str]) -> Cmd {
    let bin_dir = std::path::Path::new(BIN)
        .parent()
        .expect("the binary's directory");
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    repo.git_cmd().env("PATH", &path).now(T0).args(args)
}

/// The JSON objects of `text`, one a line.
fn objects(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

/// The one JSON object that is the whole of `run`'s stderr.
#[track_caller]
fn stderr_object(run: &Run) -> Value {
    let all = objects(&run.stderr);
    assert_eq!(all.len(), 1, "stderr should be one JSON object\n{run}");
    all.into_iter().next().expect("one object")
}

// ---------------------------------------------------------------------------------------------
// Settings, as git reads them

#[test]
fn git_c_settings_win_over_git_config_count_and_the_repositorys_own() {
    let repo = TestRepo::new();
    repo.git(&["config", "lease.holder", "alice"]);
    repo.git(&["config", "lease.ttl", "2h"]);
    let expiry = |cmd: Cmd| cmd.run().ok().json()["expires_at"].clone();
    // The repository's own.
    let own = git_lease(&repo, &["lease", "--json", "acquire", "1"]);
    assert_eq!(expiry(own), at_min(120));
    // GIT_CONFIG_COUNT over it.
    let count = |cmd: Cmd| {
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "lease.ttl")
            .env("GIT_CONFIG_VALUE_0", "30m")
    };
    let by_env = count(git_lease(&repo, &["lease", "--json", "acquire", "2"]));
    assert_eq!(expiry(by_env), at_min(30));
    // git -c over both; the last -c wins.
    let by_c = count(git_lease(
        &repo,
        &[
            "-c",
            "lease.ttl=1m",
            "-c",
            "lease.TTL=5m",
            "lease",
            "--json",
            "acquire",
            "3",
        ],
    ));
    assert_eq!(expiry(by_c), at_min(5));
    // What the ledger recorded, as plain git sees it.
    let stored: Value =
        serde_json::from_str(&repo.git(&["show", "refs/leases/3:lease.json"])).expect("JSON");
    assert_eq!(stored["expires_at"], at_min(5));
}

#[test]
fn git_c_user_email_is_the_holder() {
    let repo = TestRepo::new();
    repo.git(&["config", "user.email", "alice@example.com"]);
    let run = git_lease(
        &repo,
        &["-c", "user.email=bob@example.com", "lease", "acquire", "1"],
    )
    .run();
    run.ok().stdout_has("for bob@example.com");
    assert_eq!(repo.lease_json("1")["holder"], "bob@example.com");
}

#[test]
fn a_git_c_value_reaches_it_exactly_as_git_has_it() {
    let repo = TestRepo::new();
    // git keeps the white space of a -c value; so does git-lease, which refuses such a holder.
    let spaced = ["-c", "lease.holder=alice "];
    let git_says = git_lease(&repo, &[&spaced[..], &["config", "lease.holder"]].concat()).run();
    assert_eq!(git_says.ok().stdout, "alice \n");
    git_lease(&repo, &[&spaced[..], &["lease", "acquire", "1"]].concat())
        .run()
        .code(2)
        .stderr_has("invalid holder \"alice \"");
    // The other settings of the same command line still count.
    let run = git_lease(
        &repo,
        &[
            "-c",
            "gc.auto= 0",
            "-c",
            "lease.ttl=5m",
            "lease",
            "--json",
            "acquire",
            "2",
            "--holder",
            "alice",
        ],
    )
    .run();
    assert_eq!(run.ok().json()["expires_at"], at_min(5));
}

#[test]
fn a_bad_git_c_value_is_refused_naming_the_key_and_the_value() {
    let repo = TestRepo::new();
    for (setting, key, value) in [
        ("lease.ttl=soon", "lease.ttl", "\"soon\""),
        ("lease.ttl=-5m", "lease.ttl", "\"-5m\""),
        (
            "lease.maxClockSkew=perhaps",
            "lease.maxClockSkew",
            "\"perhaps\"",
        ),
    ] {
        git_lease(
            &repo,
            &["-c", setting, "lease", "acquire", "1", "--holder", "a"],
        )
        .run()
        .code(2)
        .stderr_has(key)
        .stderr_has(value);
    }
    assert_eq!(repo.lease_refs(), "", "nothing written");
}

#[test]
fn a_boolean_setting_means_what_git_reads_it_as() {
    let repo = TestRepo::new();
    let key = "lease.requireSignatures";
    // True, it asks for an allowed signers list, which this repository lacks: exit 2.
    for setting in [
        "lease.requireSignatures=",
        "lease.requireSignatures",
        "lease.requireSignatures=2",
        "lease.requireSignatures=0",
        "lease.requireSignatures=1k",
        "lease.requireSignatures=Off",
        "lease.requireSignatures=yes",
    ] {
        let git_says = git_lease(&repo, &["-c", setting, "config", "--type=bool", key]).run();
        let required = git_says.ok().stdout == "true\n";
        let run = git_lease(&repo, &["-c", setting, "lease", "list"]).run();
        assert_eq!(run.code == 2, required, "{setting}\n{run}");
        assert_eq!(
            run.stderr.contains("lease.allowedSigners"),
            required,
            "{run}"
        );
    }
    // What git refuses is refused.
    let setting = "lease.requireSignatures=maybe";
    let git_says = git_lease(&repo, &["-c", setting, "config", "--type=bool", key]).run();
    assert_ne!(git_says.code, 0, "{git_says}");
    git_lease(&repo, &["-c", setting, "lease", "list"])
        .run()
        .code(2)
        .stderr_has("\"maybe\" for lease.requireSignatures");
}

#[test]
fn command_line_settings_git_could_not_read_are_bad_usage() {
    let repo = TestRepo::new();
    for (parameters, says) in [
        ("'lease.ttl", "bogus format in GIT_CONFIG_PARAMETERS"),
        ("'lease.ttl'='5m'x", "bogus format in GIT_CONFIG_PARAMETERS"),
        ("'ttl=5m'", "key does not contain a section: ttl"),
        ("'lease.t_t_l=5m'", "invalid key: lease.t_t_l"),
    ] {
        repo.lease()
            .now(T0)
            .env("GIT_CONFIG_PARAMETERS", parameters)
            .args(["acquire", "1", "--holder", "a"])
            .run()
            .code(2)
            .stderr_has("unable to parse command-line config")
            .stderr_has(says);
    }
    assert_eq!(repo.lease_refs(), "", "nothing written");
}

#[test]
fn git_c_color_ui_always_colours_and_a_value_git_refuses_is_refused() {
    let repo = TestRepo::new();
    git_lease(&repo, &["lease", "acquire", "1", "--holder", "a"])
        .run()
        .ok();
    let plain = git_lease(&repo, &["lease", "show", "1"]).run();
    assert!(!plain.ok().stdout.contains('\x1b'), "{plain}");
    let always = git_lease(&repo, &["-c", "color.ui=always", "lease", "show", "1"]).run();
    always.ok().stdout_has("\x1b[32mheld\x1b[m");
    // `true` is `auto` as in git: no colour through a pipe.
    let auto = git_lease(&repo, &["-c", "color.ui=true", "lease", "show", "1"]).run();
    assert!(!auto.ok().stdout.contains('\x1b'), "{auto}");
    // git refuses `sometimes`; so does git-lease, naming the key and the value.
    let git_refuses = repo
        .git_cmd()
        .args(["-c", "color.ui=sometimes", "log", "-1"])
        .run();
    assert_ne!(git_refuses.code, 0, "{git_refuses}");
    assert!(git_refuses.stderr.contains("color.ui"), "{git_refuses}");
    git_lease(&repo, &["-c", "color.ui=sometimes", "lease", "show", "1"])
        .run()
        .code(2)
        .stderr_has("color.ui")
        .stderr_has("\"sometimes\"");
}

#[test]
fn the_git_commands_it_starts_see_git_c_too() {
    let server = Server::daemon();
    let client = server.client("alice");
    // The configured URL leads nowhere; a -c rewrites it into the server's, which only the
    // git fetch and push that git-lease starts read.
    client.git(&["remote", "set-url", "origin", "/nonexistent/repo.git"]);
    let url = format!("url.{}.insteadOf=/nonexistent/repo.git", server.url());
    git_lease(
        &client,
        &["-c", &url, "lease", "acquire", "1", "--remote", "origin"],
    )
    .run()
    .ok();
    assert!(server.tip("1").is_some(), "the claim reached the server");
}

// ---------------------------------------------------------------------------------------------
// --json: stderr holds JSON only

/// A repository with a remote (claims there are local, and hinted so) and `lease.holder`.
fn clone_with_a_remote() -> TestRepo {
    let repo = TestRepo::new();
    repo.git(&["remote", "add", "origin", "/nonexistent/repo.git"]);
    repo.git(&["config", "lease.holder", "alice"]);
    repo
}

#[test]
fn a_json_error_is_alone_on_stderr_in_a_clone_with_a_remote() {
    let repo = clone_with_a_remote();
    let run = repo.lease().now(T0).args(["acquire", "", "--json"]).run();
    run.code(2);
    assert!(run.stdout.is_empty(), "{run}");
    let error = stderr_object(&run);
    assert_eq!(error["schema_version"], 1);
    assert_eq!(error["error"]["exit_code"], 2);
    assert_eq!(error["hints"], serde_json::json!([]), "nothing was written");
}

#[test]
fn a_local_claim_in_a_clone_is_asked_for_and_then_says_nothing_more() {
    let repo = clone_with_a_remote();
    // Nothing says whether claims are shared (the remote cannot be asked): refused, exit 2.
    let run = repo.lease().now(T0).args(["--json", "acquire", "7"]).run();
    run.code(2);
    let error = stderr_object(&run);
    assert_eq!(error["error"]["kind"], "usage", "{run}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("git config lease.remote .")),
        "{run}"
    );
    // Asked for, a local claim says nothing beside its answer.
    repo.git(&["config", "lease.remote", "."]);
    let run = repo.lease().now(T0).args(["acquire", "7"]).run();
    run.ok().stdout_has("token 1");
    assert_eq!(run.stderr, "", "{run}");
    let run = repo.lease().now(T0).args(["--json", "acquire", "8"]).run();
    assert_eq!(run.ok().json()["issue"], "8");
    assert_eq!(run.stderr, "", "{run}");
}

#[test]
fn commands_without_a_json_form_refuse_json() {
    let repo = TestRepo::new();
    for args in [
        &["completions", "bash"][..],
        &["man"],
        &["hook", "pre-receive"],
    ] {
        let run = repo.lease().arg_json().args(args).run();
        run.code(2);
        assert!(run.stdout.is_empty(), "{run}");
        let error = stderr_object(&run);
        assert_eq!(error["error"]["kind"], "usage", "{run}");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("no JSON form")),
            "{run}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// One name for a timeout

#[test]
fn run_wait_with_a_separate_duration_asks_whether_the_timeout_was_meant() {
    let repo = TestRepo::new();
    let marker = repo.scratch("ran").join("marker");
    let touch = ["--", "touch", marker.to_str().expect("UTF-8")];
    repo.lease()
        .now(T0)
        .args([&["run", "42", "--wait", "20s", "--holder", "a"][..], &touch].concat())
        .run()
        .code(2)
        .stderr_has("did you mean --wait --timeout 20s (or --wait=20s)?");
    // --timeout is for waiting: alone, it is bad usage.
    repo.lease()
        .now(T0)
        .args(
            [
                &["run", "42", "--timeout", "20s", "--holder", "a"][..],
                &touch,
            ]
            .concat(),
        )
        .run()
        .code(2)
        .stderr_has("--wait");
    assert!(!marker.exists(), "nothing ran");
    assert_eq!(repo.lease_refs(), "", "nothing written");
}

#[test]
fn run_and_wait_give_up_after_their_timeout_under_one_name() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["acquire", "42", "--holder", "bob"]).ok();
    let marker = repo.scratch("ran").join("marker");
    let touch = ["--", "touch", marker.to_str().expect("UTF-8")];
    for wait in [&["--wait", "--timeout", "0s"][..], &["--wait=0s"]] {
        repo.lease()
            .now(T0)
            .args([&["run", "42", "--holder", "alice"][..], wait, &touch].concat())
            .run()
            .code(3)
            .stderr_has("held by bob");
    }
    repo.run_at(T0, &["wait", "42", "--timeout", "0s"]).code(3);
    assert!(!marker.exists(), "nothing ran");
    repo.lease()
        .now(T0)
        .args(
            [
                &["run", "42", "--wait=1s", "--timeout", "1s", "--holder", "a"][..],
                &touch,
            ]
            .concat(),
        )
        .run()
        .code(2)
        .stderr_has("give the timeout once");
}

// ---------------------------------------------------------------------------------------------
// A newcomer's first mistakes

#[test]
fn a_negative_ttl_or_duration_is_refused_as_negative() {
    let repo = TestRepo::new();
    let run = repo.run_at(T0, &["acquire", "1", "--holder", "a", "--ttl", "-5m"]);
    run.code(2)
        .stderr_has("invalid TTL \"-5m\": cannot be negative");
    assert!(!run.stderr.contains("-- -5m"), "{run}");
    repo.run_at(T0, &["wait", "1", "--timeout", "-1s"])
        .code(2)
        .stderr_has("cannot be negative");
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn outside_a_repository_it_says_so_once() {
    let repo = TestRepo::new();
    let elsewhere = repo.scratch("elsewhere");
    let run = repo.lease().cwd(&elsewhere).args(["list"]).run();
    run.code(2);
    assert_eq!(
        run.stderr,
        format!(
            "error: not a git repository (or any of the parent directories): {}\n",
            elsewhere.display()
        ),
        "{run}"
    );
}

#[test]
fn releasing_anothers_live_lease_says_what_to_do_instead() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["acquire", "42", "--holder", "bob"]).ok();
    let run = repo.run_at(&at_min(1), &["release", "42", "--holder", "alice"]);
    run.code(3)
        .stdout_has("not holder: 42 is held by bob")
        .stderr_has("git lease wait 42")
        .stderr_has("git lease revoke 42");
    // Once it expired, anyone may release it: nothing to suggest.
    let run = repo.run_at(&at_min(61), &["release", "42", "--holder", "alice"]);
    assert!(!run.ok().stderr.contains("hint:"), "{run}");
}

#[test]
fn install_hook_says_each_warning_once() {
    let served = TestRepo::bare();
    let path = served.path().to_str().expect("UTF-8");
    let run = served.run(&["install-hook", "--repo", path]);
    run.ok().stderr_has("warning: no identity is configured");
    assert!(!run.stdout.contains("warning"), "{run}");
    assert_eq!(run.stderr.matches("no identity").count(), 1, "{run}");
    // With --json, in the answer only.
    let run = served.run(&["--json", "install-hook", "--repo", path]);
    let warnings = run.ok().json()["warnings"].clone();
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.starts_with("no identity")),
        "{run}"
    );
    assert_eq!(run.stderr, "", "{run}");
}

// ---------------------------------------------------------------------------------------------
// A house one can read: the size of src files and functions

/// The most lines a file of `src` may have.
const MAX_FILE_LINES: usize = 600;
/// The most lines a function of `src` may span, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 80;

/// The files of `src` allowed past [`MAX_FILE_LINES`], each with why (also in ARCHITECTURE.md).
const LONG_FILES: &[(&str, &str)] = &[];

/// The functions of `src` allowed past [`MAX_FN_LINES`] as `(file, function, why)`, each also
/// named in ARCHITECTURE.md.
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[
    (
        "src/ledger/one_of_many.rs",
        "acquire_any",
        "the remote backend is being rewritten (issue 49); split with it",
    ),
    (
        "src/ledger/remote/mod.rs",
        "apply",
        "the remote backend is being rewritten (issue 49); split with it",
    ),
];

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// `source` with its comments, strings and character literals blanked (new lines kept), so that
/// every brace left is one of the code's.
fn code_only(source: &str) -> String {
    let text: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |out: &mut String, from: &[char]| {
        out.extend(from.iter().map(|c| if *c == '\n' { '\n' } else { ' ' }))
    };
    let ident = |at: Option<usize>| at.is_some_and(|p| text[p].is_alphanumeric() || text[p] == '_');
    // An `r` that is no identifier's middle (a `b` before it makes `br"..."`).
    let raw_may_start = |at: usize| match at.checked_sub(1) {
        Some(p) if text[p] == 'b' => !ident(p.checked_sub(1)),
        before => !ident(before),
    };
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let end = if rest.starts_with(&['/', '/']) {
            rest.iter().position(|c| *c == '\n').unwrap_or(rest.len())
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if rest[0] == 'r' && raw_may_start(i) {
            let hashes = rest[1..].iter().take_while(|c| **c == '#').count();
            if rest.get(1 + hashes) == Some(&'"') {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body = 2 + hashes;
                (body..rest.len())
                    .find(|j| rest[*j..].starts_with(&close))
                    .map_or(rest.len(), |j| j + close.len())
            } else {
                0
            }
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == '\'' && rest.get(1) == Some(&'\\') {
            2 + rest[2..]
                .iter()
                .position(|c| *c == '\'')
                .map_or(0, |p| p + 1)
        } else if rest[0] == '\'' && rest.get(2) == Some(&'\'') {
            3
        } else {
            0
        };
        let end = end.min(rest.len());
        if end == 0 {
            out.push(rest[0]);
            i += 1;
        } else {
            blank(&mut out, &rest[..end]);
            i += end;
        }
    }
    out
}

/// Each function with a body in `code` (from [`code_only`]) as `(name, its fn line from 1, its
/// lines from that line to its closing brace)`.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for (at, _) in code.match_indices("fn ") {
        if at > 0 && is_ident(bytes[at - 1]) {
            continue;
        }
        let name: String = code[at + 3..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body's opening brace, unless a `;` ends a declaration first.
        let mut depth = 0i32;
        let mut open = None;
        for (j, b) in bytes.iter().enumerate().skip(at) {
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let close = matching_brace(bytes, open);
        found.push((name, line_of(at), line_of(close) - line_of(at) + 1));
    }
    found
}

/// What in `src` passes the size rules, as `file:line name (lines)`, each with whether it is
/// a listed exception.
fn oversized(root: &std::path::Path) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    for path in rust_files(&root.join("src")) {
        let file = path.strip_prefix(root).expect("under the root");
        let file = file.to_str().expect("a UTF-8 path").to_owned();
        let source = std::fs::read_to_string(&path).expect("a readable source file");
        let lines = source.lines().count();
        if lines > MAX_FILE_LINES {
            let allowed = LONG_FILES.iter().any(|(f, _)| *f == file);
            found.push((format!("{file} ({lines} lines)"), allowed));
        }
        for (name, line, length) in functions(&code_only(&source)) {
            if length > MAX_FN_LINES {
                let allowed = LONG_FUNCTIONS
                    .iter()
                    .any(|(f, n, _)| *f == file && *n == name);
                found.push((format!("{file}:{line} fn {name} ({length} lines)"), allowed));
            }
        }
    }
    found
}

#[test]
fn no_src_file_passes_600_lines_and_no_function_80_but_the_exceptions_named() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = oversized(root);
    let offenders: Vec<&str> = found
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(o, _)| o.as_str())
        .collect();
    assert!(
        offenders.is_empty(),
        "over {MAX_FILE_LINES} lines a file or {MAX_FN_LINES} a function; split by concept:\n{}",
        offenders.join("\n")
    );
    // Every exception is still one, and ARCHITECTURE.md names it.
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let files = LONG_FILES.iter().map(|(file, _)| (*file, None));
    let functions = LONG_FUNCTIONS
        .iter()
        .map(|(file, name, _)| (*file, Some(*name)));
    for (file, name) in files.chain(functions) {
        let still = found.iter().any(|(o, _)| match name {
            None => o.starts_with(&format!("{file} (")),
            Some(name) => {
                o.starts_with(&format!("{file}:")) && o.contains(&format!(" fn {name} ("))
            }
        });
        assert!(
            still,
            "{file} {name:?} is within the limits now: remove its exception"
        );
        let named = architecture.contains(&format!("`{}`", file.trim_start_matches("src/")))
            && name.is_none_or(|name| architecture.contains(&format!("`{name}`")));
        assert!(
            named,
            "ARCHITECTURE.md does not name the exception {file} {name:?}"
        );
    }
}

#[test]
fn a_function_is_counted_from_fn_to_its_closing_brace_past_strings_and_comments() {
    let source = "fn short() {}\n\
        /* fn hidden() { */\n\
        pub fn long(x: [u8; 2]) -> char {\n\
            let s = \"}}\"; // }\n\
            let r = r#\"{\"#;\n\
            let c = '}';\n\
            fn inner<'a>(t: &'a str) -> &'a str { t }\n\
            c\n\
        }\n\
        trait T { fn declared(&self); }\n";
    let found = functions(&code_only(source));
    let names: Vec<(&str, usize, usize)> = found
        .iter()
        .map(|(n, at, len)| (n.as_str(), *at, *len))
        .collect();
    assert_eq!(names, [("short", 1, 1), ("long", 3, 7), ("inner", 7, 1)]);
}

// ---------------------------------------------------------------------------------------------
// A house one can read: the pure rules and model, apart from everything that does I/O

/// The module trees that decide without I/O: they take what was read (the clock, `/proc`,
/// random bytes, the repository) as values, from `src/os.rs`, the store and the command line.
const PURE_TREES: &[&str] = &[
    "src/rules",
    "src/model",
    "src/text.rs",
    "src/redact.rs",
    "src/error.rs",
];

/// The crates a pure module may use besides the standard library: none reads or writes
/// anything (gix-hash and gix-validate are gix's pure parts, without its repository).
const PURE_CRATES: &[&str] = &[
    "chrono",
    "serde",
    "serde_json",
    "thiserror",
    "humantime",
    "unicode_normalization",
    "ssh_key",
    "gix_hash",
    "gix_validate",
    "proptest",
];

/// What a pure module may name at this crate's root: the pure trees, and what the root
/// re-exports of them.
const PURE_ROOT_NAMES: &[&str] = &[
    "rules",
    "model",
    "text",
    "redact",
    "error",
    "step",
    "holder",
    "issue",
    "lease",
    "liveness",
    "remark",
    "session",
    "time",
    "Error",
    "ErrorKind",
    "Result",
    "Holder",
    "IssueId",
    "Lease",
    "Event",
    "FORMAT_VERSION",
    "Remark",
    "RemarkKind",
    "is_live",
    "Claim",
    "Credentials",
    "Ending",
    "FenceFailure",
    "Outcome",
    "Ttl",
];

/// The parts of the standard library that reach the machine.
const IMPURE_STD: &[&str] = &["fs", "process", "net", "env", "os", "thread"];

/// The names of `Cargo.toml`'s dependencies, as code names them (`-` read as `_`).
fn dependency_names(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = matches!(line, "[dependencies]" | "[dev-dependencies]");
        } else if let Some((key, _)) = line.split_once('=').filter(|_| in_dependencies) {
            names.push(key.trim().replace('-', "_"));
        }
    }
    names
}

/// The segments of the path or `use` tree that starts at `text`, each `{...}` group read as
/// one path per item: `std::{fs, io::Read}` gives `std::fs` and `std::io::Read`.
fn path_segments(text: &str) -> Vec<Vec<String>> {
    let ident_len = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let len = ident_len(rest);
        if len == 0 {
            break;
        }
        segments.push(rest[..len].to_owned());
        match rest[len..].trim_start().strip_prefix("::") {
            Some(next) => rest = next.trim_start(),
            None => return vec![segments],
        }
    }
    let Some(group) = rest.strip_prefix('{') else {
        return vec![segments];
    };
    let (mut depth, mut items, mut start) = (0, Vec::new(), 0);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..at]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    let items = items.into_iter().map(str::trim).filter(|i| !i.is_empty());
    items
        .flat_map(path_segments)
        .map(|tail| [segments.clone(), tail].concat())
        .collect()
}

/// The spans of the inline `mod name { ... }` blocks of `code` (from [`code_only`]).
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut spans = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let after = code[at + 4..].trim_start();
        let name = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        let Some(body) = name.map(|n| after[n..].trim_start()) else {
            continue;
        };
        if !body.starts_with('{') {
            continue;
        }
        let open = code.len() - body.len();
        spans.push((open, matching_brace(bytes, open)));
    }
    spans
}

/// What in `source` (the file `file` of `src`, as `rules/step.rs`) reaches past the pure
/// modules, as `line: what (why)`.
fn impure_uses(file: &str, source: &str, dependencies: &[String]) -> Vec<String> {
    let code = code_only(source);
    let bytes = code.as_bytes();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    // How deep the file's module is below the crate's root (`text.rs` 1, `rules/step.rs` 2).
    let file_depth = file.split('/').count() - usize::from(file.ends_with("mod.rs"));
    let modules = inline_modules(&code);
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    for at in 0..bytes.len() {
        let before = at.checked_sub(1).map(|b| bytes[b]);
        let starts = is_ident(bytes[at]) && !before.is_some_and(|b| is_ident(b) || b == b':');
        let absolute = at >= 2
            && code[..at].ends_with("::")
            && !(at >= 3 && {
                let b = bytes[at - 3];
                is_ident(b) || b == b'>' || b == b')'
            });
        if !(starts || absolute) {
            continue;
        }
        let depth = file_depth + modules.iter().filter(|(o, c)| *o < at && at < *c).count();
        for path in path_segments(&code[at..])
            .into_iter()
            .filter(|p| p.len() > 1)
        {
            if let Some(why) = impure_path(&path, depth, dependencies) {
                found.push(format!("{}: {} ({why})", line_of(at), path.join("::")));
            }
        }
    }
    for (at, _) in code.match_indices("::now(") {
        found.push(format!("{}: ::now( (reads the clock)", line_of(at)));
    }
    found
}

/// Why `path`, met in a module `depth` below the crate's root, reaches past the pure
/// modules, if it does.
fn impure_path(path: &[String], depth: usize, dependencies: &[String]) -> Option<&'static str> {
    let first = path[0].as_str();
    let supers = path.iter().take_while(|s| *s == "super").count();
    let at_root = (first == "crate" || (supers > 0 && supers >= depth))
        .then(|| path.get(supers.max(1)).map(String::as_str))
        .flatten();
    if let Some(name) = at_root {
        return (!PURE_ROOT_NAMES.contains(&name)).then_some("a module that does I/O");
    }
    if matches!(first, "std" | "core" | "alloc") {
        return IMPURE_STD
            .contains(&path[1].as_str())
            .then_some("the standard library's I/O");
    }
    let crate_io = dependencies.iter().any(|d| d == first) && !PURE_CRATES.contains(&first);
    crate_io.then_some("a crate outside the pure list")
}

#[test]
fn the_rules_and_the_model_import_nothing_that_does_io() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let dependencies = dependency_names(&manifest);
    assert!(dependencies.iter().any(|d| d == "gix"), "{dependencies:?}");
    let mut offenders = Vec::new();
    for tree in PURE_TREES {
        let tree = root.join(tree);
        let files = match tree.is_dir() {
            true => rust_files(&tree),
            false => vec![tree],
        };
        for path in files {
            let source = std::fs::read_to_string(&path).expect("a readable source file");
            let file = path.strip_prefix(root.join("src")).expect("under src");
            let file = file.to_str().expect("a UTF-8 path");
            for found in impure_uses(file, &source, &dependencies) {
                offenders.push(format!("src/{file}:{found}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "the pure modules take what was read as values; move the I/O out (src/os.rs, \
         the store, the command line):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_boundary_scan_follows_use_groups_super_and_absolute_paths() {
    let dependencies = ["gix".to_owned(), "chrono".to_owned()];
    let source = "use std::{fmt, fs::File};\n\
        use crate::{issue::IssueId, store::Store};\n\
        // gix::ObjectId in a comment, \"std::process\" in a string\n\
        fn f() { let _ = ::gix::open(\".\"); chrono::Utc::now(); }\n\
        use super::super::ledger::Ledger;\n\
        mod tests { use super::super::time::Ttl; use super::super::super::git::run; }\n\
        use crate::Error; use core::fmt::Write; use gix_hash::ObjectId;\n";
    let found = impure_uses("model/issue.rs", source, &dependencies);
    assert_eq!(
        found,
        [
            "1: std::fs::File (the standard library's I/O)",
            "2: crate::store::Store (a module that does I/O)",
            "4: gix::open (a crate outside the pure list)",
            "5: super::super::ledger::Ledger (a module that does I/O)",
            "6: super::super::super::git::run (a module that does I/O)",
            "4: ::now( (reads the clock)",
        ]
    );
}

/// The index in `bytes` of the brace that closes the one at `open`.
fn matching_brace(bytes: &[u8], open: usize) -> usize {
    let mut braces = 0i32;
    let close = bytes[open..].iter().position(|b| {
        braces += match b {
            b'{' => 1,
            b'}' => -1,
            _ => 0,
        };
        braces == 0
    });
    open + close.expect("every brace closed")
}
