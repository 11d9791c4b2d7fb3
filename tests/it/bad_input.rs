//! Bad input is bad usage (exit 2) and writes nothing: invalid issue ids (and the unusual ones
//! that are valid), TTLs, clocks, holders, configuration values, a missing repository, and
//! unknown commands or flags.

use crate::env::{at, at_min, TestRepo, T0};

// ---------------------------------------------------------------------------------------------
// Issue ids

/// Each rule of the ids git refuses as ref names, by the words its refusal must use, with the
/// ids it refuses.
const INVALID_IDS: &[(&str, &[&str])] = &[
    ("empty", &[""]),
    ("'..'", &["..", "a..b"]),
    ("spaces", &["a b"]),
    ("control", &["a\tb", "a\u{1}b", "a\u{7f}b"]),
    ("~", &["a~1"]),
    ("^", &["a^"]),
    (":", &["a:b"]),
    ("?", &["a?"]),
    ("*", &["a*"]),
    ("[", &["a["]),
    ("\\", &["a\\b"]),
    ("start with '-'", &["-x", "--holder"]),
    ("start with '.'", &[".x", "a/.x"]),
    (".lock", &["x.lock", "x.lock/y"]),
    ("'/'", &["x/", "/x"]),
    ("'//'", &["a//b"]),
    ("'@{'", &["a@{1}"]),
    ("end with '.'", &["x."]),
];

#[test]
fn every_invalid_issue_id_is_refused_by_its_rule() {
    let repo = TestRepo::new();
    for (rule, ids) in INVALID_IDS {
        for id in *ids {
            // `--` ends the options, so ids starting with '-' reach the id rule.
            let run = repo.run_at(T0, &["acquire", "--holder", "a", "--", id]);
            run.code(2).stderr_has("invalid issue id").stderr_has(rule);
        }
    }
    assert_eq!(repo.lease_refs(), "", "nothing was created");
}

#[test]
fn invalid_ids_are_refused_by_the_writers_that_take_prefixes_too() {
    let repo = TestRepo::new();
    repo.json_at(T0, 0, &["acquire", "42", "--holder", "a"]);
    for (id, rule) in [
        ("a b", "spaces"),
        ("-x", "'-'"),
        ("x.lock", ".lock"),
        ("a..b", "'..'"),
    ] {
        for cmd in ["release", "renew", "complete", "abandon"] {
            repo.run_at(T0, &[cmd, "--holder", "a", "--", id])
                .code(2)
                .stderr_has(rule);
        }
        repo.run_at(T0, &["check", "--token", "1", "--", id])
            .code(2)
            .stderr_has(rule);
    }
    assert_eq!(repo.lease_refs().lines().count(), 1);
}

#[test]
fn double_dash_ends_options_so_a_dash_id_is_not_a_flag() {
    let repo = TestRepo::new();
    // Without `--`, clap sees an unknown flag; with it, the id rule refuses it.
    repo.run_at(T0, &["acquire", "--holder", "a", "--", "-x"])
        .code(2)
        .stderr_has("must not start with '-'");
    repo.run_at(T0, &["acquire", "--holder", "a", "--", "--ttl"])
        .code(2)
        .stderr_has("must not start with '-'");
    // And show does not parse it as a flag either.
    let run = repo.run_at(T0, &["show", "--", "--json"]);
    assert_ne!(run.code, 0, "{run}");
    assert!(
        run.stdout.is_empty(),
        "`show -- --json` printed JSON: {run}"
    );
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn namespaced_and_unusual_but_valid_ids_work() {
    let repo = TestRepo::new();
    for id in ["gh/123", "PROJ-7", "a.b", "feature_x", "a/b/c", "é", "x@y"] {
        let v = repo.json_at(T0, 0, &["acquire", id, "--holder", "a"]);
        assert_eq!(v["issue"], *id);
        assert_eq!(repo.lease_json(id)["issue"], *id);
        let v = repo.json_at(T0, 0, &["show", id]);
        assert_eq!(v["issue"], *id);
    }
    assert!(repo.tip("gh/123").is_some());
    repo.assert_fsck();
}

// ---------------------------------------------------------------------------------------------
// Durations, clocks, holders and configuration

#[test]
fn a_bad_ttl_is_bad_usage() {
    let repo = TestRepo::new();
    for ttl in [
        "0",
        "0s",
        "abc",
        "-5m",
        "1.5s",
        "500ms",
        "",
        "forever",
        "99999999d",
    ] {
        // `--ttl=<value>` so that "-5m" reaches the TTL parser rather than clap.
        repo.run_at(
            T0,
            &["acquire", "1", "--holder", "a", &format!("--ttl={ttl}")],
        )
        .code(2)
        .stderr_has("TTL");
    }
    repo.json_at(T0, 0, &["acquire", "1", "--holder", "a"]);
    repo.run_at(T0, &["renew", "1", "--holder", "a", "--ttl", "soon"])
        .code(2)
        .stderr_has("TTL");
    assert_eq!(repo.commit_count("1"), 1);
    // A bad configured TTL is bad usage too, and names the key.
    repo.git(&["config", "lease.ttl", "whenever"]);
    repo.run_at(T0, &["acquire", "2", "--holder", "a"])
        .code(2)
        .stderr_has("lease.ttl");
}

/// `--ttl 15` (a number without a unit) is refused with suggestions, and each TTL it suggests
/// is then accepted: a newcomer who copies one from the message gets a claim.
#[test]
fn every_ttl_a_refusal_suggests_is_accepted() {
    let repo = TestRepo::new();
    let refused = repo.run_at(T0, &["acquire", "7", "--holder", "a", "--ttl", "15"]);
    refused.code(2).stderr_has("15s, 15m, 15h or 15d");
    assert_eq!(repo.commit_count("7"), 0);
    // What is quoted is the input given back, not a suggestion.
    let unquoted: String = refused.stderr.split('"').step_by(2).collect();
    let suggested: Vec<&str> = unquoted
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()) || *w == "never")
        .filter(|w| w.ends_with(|c: char| c.is_ascii_alphabetic()))
        .collect();
    assert!(suggested.len() >= 5, "{}", refused.stderr);
    assert!(!suggested.contains(&"15ms"), "{}", refused.stderr);
    for ttl in suggested {
        repo.run_at(T0, &["acquire", "7", "--holder", "a", "--ttl", ttl])
            .ok();
    }
}

#[test]
fn a_bad_clock_is_bad_usage() {
    let repo = TestRepo::new();
    for now in [
        "garbage",
        "2026-13-01T00:00:00Z",
        "12:00",
        "2026-11-30",
        "-5",
        "1e9",
    ] {
        repo.run_at(now, &["acquire", "1", "--holder", "a"])
            .code(2)
            .stderr_has(now);
        repo.run_at(now, &["list"]).code(2);
    }
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn a_clock_or_ttl_past_what_a_ledger_records_is_bad_usage_and_writes_nothing() {
    let repo = TestRepo::new();
    for now in ["8210266876799", "253402300800", "1969-12-31T23:59:59Z"] {
        repo.run_at(now, &["acquire", "1", "--holder", "a"])
            .code(2)
            .stderr_has(now);
    }
    // 2,920,000 days is a valid duration, but from 2026 it ends after year 9999.
    for ttl in ["2920000d", "3000000d", "100000y"] {
        repo.run_at(&at(0), &["acquire", "x", "--holder", "a", "--ttl", ttl])
            .code(2)
            .stderr_has("TTL");
    }
    repo.git(&["config", "lease.ttl", "2920000d"]);
    repo.run_at(&at(0), &["acquire", "x", "--holder", "a"])
        .code(2);
    assert_eq!(repo.lease_refs(), "");
    // The last instant a ledger records is one every reader parses back.
    repo.git(&["config", "--unset", "lease.ttl"]);
    repo.run_at(
        "9999-12-31T23:00:00Z",
        &["acquire", "x", "--holder", "a", "--ttl", "30m"],
    )
    .ok();
    repo.run_at("9999-12-31T23:00:00Z", &["list"])
        .ok()
        .stdout_has("x");
    repo.run_at("9999-12-31T23:00:00Z", &["verify"]).ok();
    // Durations far past any clock never overflow one.
    let forever = "18446744073709551615s";
    repo.run_at(&at(0), &["wait", "free", "--timeout", forever])
        .ok();
    repo.run_at(
        &at(0),
        &[
            "run", "r", "--holder", "a", "--grace", forever, "--", "true",
        ],
    )
    .ok();
}

#[test]
fn a_bad_holder_is_bad_usage() {
    let repo = TestRepo::new();
    let long = "h".repeat(257);
    for holder in ["", " a", "a ", "a\nb", "a\u{1}b", long.as_str()] {
        repo.run_at(T0, &["acquire", "1", "--holder", holder])
            .code(2)
            .stderr_has("holder");
    }
    assert_eq!(repo.lease_refs(), "");
}

#[test]
fn a_bad_config_value_is_bad_usage_naming_the_key_and_the_value() {
    for (key, value) in [
        ("lease.lockTimeout", "soon"),
        ("lease.pushAttempts", "0"),
        ("lease.ttl", "0s"),
        ("lease.fsync", "maybe"),
        ("gc.auto", "lots"),
        ("lease.trustArchive", "perhaps"),
    ] {
        let repo = TestRepo::new();
        repo.git(&["remote", "add", "origin", "/nonexistent"]);
        repo.git(&["config", key, value]);
        let args: &[&str] = if ["lease.pushAttempts", "lease.trustArchive"].contains(&key) {
            &["acquire", "1", "--holder", "a", "--remote", "origin"]
        } else {
            &["acquire", "1", "--holder", "a", "--local"]
        };
        repo.run_at(T0, args)
            .code(2)
            .stderr_has(key)
            .stderr_has(&format!("{value:?}"));
        assert_eq!(repo.lease_refs(), "", "{key}: nothing written");
    }
}

// ---------------------------------------------------------------------------------------------
// Repositories and usage

#[test]
fn dash_c_to_a_missing_directory_is_bad_usage_like_any_missing_repository() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["-C", "no/such/dir", "list"])
        .code(2)
        .stderr_has("no/such/dir");
}

#[test]
fn outside_a_repository_the_error_says_so() {
    let repo = TestRepo::new();
    let outside = repo.scratch("not-a-repo");
    for args in [
        vec!["acquire", "1", "--holder", "a"],
        vec!["list"],
        vec!["show", "1"],
    ] {
        let run = repo.lease().now(T0).cwd(&outside).args(&args).run();
        assert_ne!(run.code, 0, "{run}");
        assert!(
            run.stderr.to_lowercase().contains("repository"),
            "stderr must say there is no repository: {run}"
        );
        assert!(run.stdout.is_empty(), "{run}");
    }
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let repo = TestRepo::new();
    repo.run_at(T0, &["frobnicate"]).code(2);
    repo.run_at(T0, &["acquire"]).code(2);
    repo.run_at(T0, &["check", "1"]).code(2);
    repo.run_at(T0, &["check", "1", "--token", "x"]).code(2);
    repo.run_at(T0, &["acquire", "-x", "--holder", "a"]).code(2);
    repo.run_at(T0, &["--help"]).ok().stdout_has("acquire");
    repo.run_at(T0, &["--version"]).ok();
}

/// A remote name that does not exist is named as such (exit 2), with the remotes there are,
/// never as a failed fetch of a refspec; nothing is written, here or on `origin`, and `doctor`
/// does not advise making it `lease.remote`.
#[test]
fn a_remote_that_does_not_exist_is_named_as_such() {
    let repo = TestRepo::new();
    let origin = repo.add_bare_origin(&[]);
    for args in [
        &["acquire", "7", "--holder", "a", "--remote", "upstream"][..],
        &["list", "--remote", "upstream"],
        &["--remote", "upstream", "show", "7"],
    ] {
        let run = repo.run_at(T0, args);
        run.code(2)
            .stderr_has("no remote named upstream")
            .stderr_has("this repository has: origin");
        assert!(!run.stderr.contains("refspec"), "{}", run.stderr);
        assert!(!run.stderr.contains("refs/"), "{}", run.stderr);
    }
    assert_eq!(repo.lease_refs(), "");
    assert_eq!(origin.lease_refs(), "");
    let doctor = repo.run_at(T0, &["doctor", "--remote", "nosuch"]);
    doctor.code(2).stderr_has("no remote named nosuch");
    assert!(!doctor.stdout.contains("lease.remote"), "{}", doctor.stdout);
    assert!(!doctor.stderr.contains("lease.remote"), "{}", doctor.stderr);
    // A bare word that is a path here is still a remote, as git takes it.
    repo.git(&["init", "--quiet", "--bare", "srv.git"]);
    repo.run_at(
        T0,
        &["acquire", "8", "--holder", "a", "--remote", "srv.git"],
    )
    .ok();
    let served = repo.git(&["--git-dir=srv.git", "for-each-ref", "refs/leases/"]);
    assert!(served.contains("refs/leases/8"), "{served}");
}

/// One error prefix everywhere, git's and clap's: a usage error clap finds, an error of the
/// library and a bad value the command line reads all start with `error: `.
#[test]
fn every_error_starts_with_the_one_error_prefix() {
    let repo = TestRepo::new();
    for (args, code) in [
        (&["acquire", "7", "--bogus"][..], 2),
        (&["show", "nope"], 4),
        (&["acquire", "7", "--holder", "a", "--ttl", "15"], 2),
        (
            &["acquire", "7", "--holder", "a", "--remote", "upstream"],
            2,
        ),
    ] {
        let run = repo.run_at(T0, args);
        run.code(code);
        assert!(run.stderr.starts_with("error: "), "{run}");
        assert!(!run.stderr.contains("git lease: "), "{run}");
    }
}

/// `archive`, `gc` and `install-hook` act on one repository's own refs: asked to act through a
/// remote, each refuses (exit 2) and changes nothing, here or there, instead of acting here.
#[test]
fn a_command_that_acts_on_local_refs_only_refuses_remote() {
    let repo = TestRepo::new();
    let origin = repo.add_bare_origin(&[]);
    repo.run_at(T0, &["acquire", "7", "--holder", "a", "--local"])
        .ok();
    let (here, there) = (repo.snapshot(), origin.snapshot());
    let url = format!("file://{}", origin.path().display());
    for args in [
        &["archive", "--remote", "origin"][..],
        &["--remote", url.as_str(), "gc"],
        &["install-hook", "--remote", "origin"],
    ] {
        let run = repo.run_at(&at_min(60 * 24 * 60), args);
        run.code(2)
            .stderr_has("own refs only")
            .stderr_has("leave out --remote");
    }
    assert_eq!(repo.snapshot(), here, "nothing changed here");
    assert_eq!(origin.snapshot(), there, "nothing changed on the remote");
}
