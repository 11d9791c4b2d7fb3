//! A remote URL with a password never shows it: through every output of a remote that works
//! (a real http server, with a ledger rewound so that the rewound-ledger message is said),
//! of one that cannot be reached. Through MCP (its answers and its stderr) is `mcp::passwords`,
//! in the `zoo` test binary.

use crate::env::TestRepo;
use crate::password_urls::{clean, rewound_over_http, PASSWORD};
use crate::server::{free_port, lease};

#[test]
fn a_url_with_a_password_never_shows_it_in_any_output() {
    let (_server, alice, url) = rewound_over_http();
    let page = alice.scratch("out").join("page.html");
    let page_arg = page.to_str().expect("utf-8").to_owned();
    let remote = ["--remote", url.as_str()];
    let with = |args: &[&'static str]| -> Vec<String> {
        args.iter().chain(&remote).map(|a| a.to_string()).collect()
    };
    for (args, code, says) in [
        (
            with(&["list"]),
            1,
            "remote ledger rewound: refs/leases/9 on http://127.0.0.1",
        ),
        (with(&["--json", "list"]), 1, "remote ledger rewound"),
        (
            [with(&["timeline"]), vec![format!("--output={page_arg}")]].concat(),
            1,
            "remote ledger rewound",
        ),
        (with(&["--json", "timeline"]), 1, "remote ledger rewound"),
        (with(&["show", "9"]), 1, "remote ledger rewound"),
        (
            with(&["--json", "acquire", "9"]),
            1,
            "remote ledger rewound",
        ),
        (with(&["verify"]), 1, "9"),
        (vec!["sync".into(), url.clone()], 1, "remote ledger rewound"),
        (
            vec!["--json".into(), "sync".into(), url.clone()],
            1,
            "remote ledger rewound",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = clean(lease(&alice, 5, &args));
        run.code(code);
        assert!(
            run.stdout.contains(says) || run.stderr.contains(says),
            "`{}` does not say {says:?}:\n{run}",
            run.command
        );
    }
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(!html.contains(PASSWORD), "the page shows the password");
    assert!(
        html.contains("from http://127.0.0.1:"),
        "the page names the remote"
    );
    // What git itself writes (reflogs, config, remote-tracking refs) is git's business; what
    // git-lease writes beside them (its memory of the remote) never holds the password.
    let common = alice.git_dir();
    let dirs = [
        common.join("lease-memory"),
        crate::doctor_checks::verdict_dir(&alice),
    ];
    for dir in dirs {
        for file in walk(&dir) {
            let text = String::from_utf8_lossy(&std::fs::read(&file).expect("a file")).into_owned();
            assert!(!text.contains(PASSWORD), "{} holds it", file.display());
        }
    }
}

/// Every file under `dir` (none when it is missing).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk(&e.path()),
            _ => vec![e.path()],
        })
        .collect()
}

#[test]
fn an_unreachable_url_with_a_password_never_shows_it() {
    let repo = TestRepo::new();
    let url = format!("http://alice:{PASSWORD}@127.0.0.1:{}/r.git", free_port());
    for args in [
        vec!["list", "--remote", &url],
        vec!["--json", "list", "--remote", &url],
        vec!["acquire", "1", "--holder", "a", "--remote", &url],
        vec!["--json", "timeline", "--remote", &url],
        vec!["sync", &url],
        vec!["doctor", "--remote", &url],
        vec!["--json", "doctor", "--remote", &url],
    ] {
        let run = clean(lease(&repo, 0, &args));
        assert_ne!(run.code, 0, "{run}");
        assert!(
            run.stderr.contains("127.0.0.1") || run.stdout.contains("127.0.0.1"),
            "{run}"
        );
    }
}
