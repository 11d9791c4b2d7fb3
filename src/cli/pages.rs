// What the manual pages teach beyond the parser's definitions: each command's examples, the
// exit statuses and the environment. Data only, with no `use` and no crate path, so that the
// tests read these very tables (`include!`): they run every example as written, and hold the
// exit statuses to README.md's "Exit codes" table, which opens each meaning with its words.
//
// Text is markdown's inline subset: `code` is set in bold on the pages.

/// One example of a manual page: a shell command line, what it shows, and the exit status it
/// ends with where it is run after the examples before it on its page (shown when not 0).
pub struct Example {
    /// The command line, as typed in a shell.
    pub line: &'static str,
    /// What it does or shows.
    pub says: &'static str,
    /// Its exit status.
    pub exit: u8,
}

/// The examples of each page, by subcommand (`""`: the `git lease` page itself). Each page's
/// examples run in order in a fresh repository whose user.email is alice@example.com, with
/// a bare repository `../origin.git` as its remote `origin`, and `lease.remote .` (claims stay
/// in the repository until an example says otherwise).
pub const EXAMPLES: &[(&str, &[Example])] = &[
    (
        "",
        &[
            Example {
                line: "git lease acquire 42 --ttl 15m",
                says: "Claim issue 42 for 15 minutes, as user.email: token 1.",
                exit: 0,
            },
            Example {
                line: "git lease list",
                says: "The live leases: who holds what, and until when.",
                exit: 0,
            },
            Example {
                line: "git lease check 42 --token 1",
                says: "The fencing check: exit 0 while token 1 is the live tenure of 42.",
                exit: 0,
            },
            Example {
                line: "git lease release 42",
                says: "Free it; the token is kept, and the next tenure takes token 2.",
                exit: 0,
            },
            Example {
                line: "git lease log 42",
                says: "Its ledger, newest first: one line per commit.",
                exit: 0,
            },
            Example {
                line: "git config lease.remote origin",
                says: "Share claims through origin from now on: it decides every claim.",
                exit: 0,
            },
            Example {
                line: "git lease acquire 43 --ttl 1h",
                says: "Claim 43 on origin: the push with an expected old value is the compare-and-swap.",
                exit: 0,
            },
        ],
    ),
    (
        "acquire",
        &[
            Example {
                line: "git lease acquire 42 --ttl 15m --note 'flaky parser test' --task JOB-7",
                says: "Claim 42 with a note and a task, which show, list and log display.",
                exit: 0,
            },
            Example {
                line: "git lease acquire 42 --holder bob@example.com",
                says: "Someone else's live lease: refused.",
                exit: 3,
            },
            Example {
                line: "git lease acquire 7 8 9",
                says: "Several issues, all or none.",
                exit: 0,
            },
            Example {
                line: "printf '%s\\n' 8 10 11 | git lease acquire --any -",
                says: "Exactly one free candidate (here 10 or 11), read from stdin; prints the one it got.",
                exit: 0,
            },
            Example {
                line: "git lease acquire 50 --remote origin",
                says: "Claim on the remote: it decides, and the claim is pushed there.",
                exit: 0,
            },
        ],
    ),
    (
        "renew",
        &[
            Example {
                line: "git lease acquire 42 --ttl 15m",
                says: "Claim 42 for 15 minutes.",
                exit: 0,
            },
            Example {
                line: "git lease renew 42 --ttl 30m",
                says: "Extend it to 30 minutes from now; the token stays 1.",
                exit: 0,
            },
        ],
    ),
    (
        "release",
        &[
            Example {
                line: "git lease acquire 42",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease release 42",
                says: "Free it, keeping its token.",
                exit: 0,
            },
            Example {
                line: "git lease release 42",
                says: "Nothing held: it says so, writes nothing, and exits 0.",
                exit: 0,
            },
        ],
    ),
    (
        "complete",
        &[
            Example {
                line: "git lease acquire 42",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease complete 42",
                says: "Free it, recording that the work is done.",
                exit: 0,
            },
        ],
    ),
    (
        "abandon",
        &[
            Example {
                line: "git lease acquire 42",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease abandon 42",
                says: "Free it, recording that the work was given up.",
                exit: 0,
            },
        ],
    ),
    (
        "show",
        &[
            Example {
                line: "git lease acquire 42 --note 'halfway through'",
                says: "Claim 42 with a note.",
                exit: 0,
            },
            Example {
                line: "git lease show 42",
                says: "The lease now: state, holder, token, times, note, commit.",
                exit: 0,
            },
            Example {
                line: "git lease --json show 42",
                says: "The same as one JSON object.",
                exit: 0,
            },
        ],
    ),
    (
        "list",
        &[
            Example {
                line: "git lease acquire 2 10 gh/1 --ttl 1h",
                says: "Claim three issues.",
                exit: 0,
            },
            Example {
                line: "git lease list",
                says: "The live leases, oldest tenure first, then by issue: 2 before 10.",
                exit: 0,
            },
            Example {
                line: "git lease list --mine gh/",
                says: "Only your own, and only those whose id starts with gh/.",
                exit: 0,
            },
            Example {
                line: "git lease list --all --state free",
                says: "Free ones with their last token (none here).",
                exit: 0,
            },
            Example {
                line: "git lease --json list",
                says: "A JSON array, for scripts.",
                exit: 0,
            },
        ],
    ),
    (
        "log",
        &[
            Example {
                line: "git lease acquire 42 --task JOB-7",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease release 42",
                says: "Free it.",
                exit: 0,
            },
            Example {
                line: "git lease log 42",
                says: "Both events, newest first, each with its commit, time and token.",
                exit: 0,
            },
        ],
    ),
    (
        "check",
        &[
            Example {
                line: "git lease acquire 42",
                says: "Claim 42: token 1.",
                exit: 0,
            },
            Example {
                line: "git lease check 42 --token 1 --holder alice@example.com",
                says: "Token 1 is the live tenure, held by alice: exit 0.",
                exit: 0,
            },
            Example {
                line: "git lease check 42 --token 2",
                says: "Not the live tenure's token: refused.",
                exit: 3,
            },
        ],
    ),
    (
        "sync",
        &[
            Example {
                line: "git lease acquire 42 --remote origin",
                says: "A claim on origin (kept here too).",
                exit: 0,
            },
            Example {
                line: "git lease sync origin -v",
                says: "Copy every ledger of origin here, verified, with a line per ledger.",
                exit: 0,
            },
        ],
    ),
    (
        "verify",
        &[
            Example {
                line: "git lease acquire 42",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease verify",
                says: "Check every step of every ledger from its root.",
                exit: 0,
            },
            Example {
                line: "git lease verify 42",
                says: "Only 42's.",
                exit: 0,
            },
        ],
    ),
    (
        "revoke",
        &[
            Example {
                line: "git lease acquire 42 --holder bob@example.com",
                says: "Bob claims 42.",
                exit: 0,
            },
            Example {
                line: "git lease revoke 42 --reason 'stalled since Monday'",
                says: "Free it as an administrator: the token is kept, who and why recorded.",
                exit: 0,
            },
        ],
    ),
    (
        "push",
        &[
            Example {
                line: "git lease install-hook --repo ../origin.git",
                says: "On the server: the hook, and push options enabled.",
                exit: 0,
            },
            Example {
                line: "git lease acquire 42 --remote origin",
                says: "Claim 42 on origin.",
                exit: 0,
            },
            Example {
                line: "git checkout -q -b issue/42 && git commit -q --allow-empty -m 'Fix 42'",
                says: "Work on the issue's branch.",
                exit: 0,
            },
            Example {
                line: "git lease push origin",
                says: "Push it with your live token as `-o lease-token=1`.",
                exit: 0,
            },
        ],
    ),
    (
        "run",
        &[
            Example {
                line: "git lease run 42 --ttl 15m -- sh -c 'echo \"$GIT_LEASE_ISSUE, token $GIT_LEASE_TOKEN\"'",
                says: "Hold 42 while the command runs, renewing it, then complete it.",
                exit: 0,
            },
            Example {
                line: "git lease run 42 -- false",
                says: "A command that fails: the lease is released, and its exit status passed on.",
                exit: 1,
            },
            Example {
                line: "git lease run --any 7 8 9 -- sh -c 'echo \"working on $GIT_LEASE_ISSUE\"'",
                says: "The same for whichever candidate is free.",
                exit: 0,
            },
        ],
    ),
    (
        "wait",
        &[Example {
            line: "git lease wait 42 --acquire --timeout 10m",
            says: "Wait until 42 is free (it is), then claim it.",
            exit: 0,
        }],
    ),
    (
        "watch",
        &[
            Example {
                line: "git lease acquire 42",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease watch --json --since 1h | head -n 1",
                says: "Replay the last hour, then follow; ends once its reader has gone.",
                exit: 0,
            },
        ],
    ),
    (
        "mcp",
        &[Example {
            line: "git lease mcp < /dev/null",
            says: "Serve the tools over stdio, as an agent host starts it; it ends with its input.",
            exit: 0,
        }],
    ),
    (
        "timeline",
        &[
            Example {
                line: "git lease acquire 42 --ttl 1h --note 'flaky parser test'",
                says: "Claim 42.",
                exit: 0,
            },
            Example {
                line: "git lease timeline",
                says: "Draw every ledger into lease-timeline.html, one page to open in a browser: who held what, when, and how each tenure ended.",
                exit: 0,
            },
            Example {
                line: "git lease timeline gh/ --since 7d --order recent -o week.html",
                says: "Only the issues under gh/, the last week, the most recently active first.",
                exit: 0,
            },
            Example {
                line: "git lease --json timeline --mine",
                says: "Your own tenures as one JSON document, for another dashboard.",
                exit: 0,
            },
        ],
    ),
    (
        "install-hook",
        &[
            Example {
                line: "git lease install-hook --repo ../origin.git",
                says: "Make the server refuse illegitimate lease pushes.",
                exit: 0,
            },
            Example {
                line: "git -C ../origin.git config lease.fence 'refs/heads/issue/*'",
                says: "And fence the issue branches against stale holders.",
                exit: 0,
            },
        ],
    ),
    (
        "doctor",
        &[
            Example {
                line: "git lease doctor --local",
                says: "Check this clone alone: its git, its ref storage, lease.remote, refspecs that would move the lease refs.",
                exit: 0,
            },
            Example {
                line: "git lease doctor --remote origin",
                says: "Check origin as the engine of claims: reached, a stale push refused, its hook, who it says you are, its clock.",
                exit: 0,
            },
        ],
    ),
    (
        "archive",
        &[Example {
            line: "git lease archive --quiet-for 30d --dry-run",
            says: "Say which free ledgers, quiet for 30 days, a fold into refs/lease-archive would take (tokens kept); write nothing.",
            exit: 0,
        }],
    ),
    (
        "gc",
        &[Example {
            line: "git lease gc",
            says: "Pack refs and loose objects, the ledgers' among them.",
            exit: 0,
        }],
    ),
    (
        "man",
        &[Example {
            line: "git lease man --install \"$HOME/.local/share/man\"",
            says: "Write every page where man finds them.",
            exit: 0,
        }],
    ),
    (
        "completions",
        &[
            Example {
                line: "eval \"$(git lease completions bash)\"",
                says: "Complete git-lease, and git lease through git's own completion, issue ids included.",
                exit: 0,
            },
            Example {
                line: "COMPLETE=bash git-lease",
                says: "The same script, by the completion protocol.",
                exit: 0,
            },
        ],
    ),
];

/// The exit statuses, each with every case: `(status, meaning)`. README.md's "Exit codes" table
/// gives each meaning's opening words.
pub const EXIT_STATUS: &[(u8, &str)] = &[
    (0, "done, including \"not held\" (release of nothing)"),
    (1, "failure: I/O, git, a corrupt ledger, a transport error; a push to a remote whose answer was lost (`the outcome is unknown`: the connection broke or timed out after the push was sent, so the claim, or the branch of `push`, may or may not have landed; run the same command again: it converges, a holder's re-acquire keeping its token, a release again finding nothing held, a `push` again finding the branch up to date or pushing it; `push` first asks the server where the branch is, and one at the commit pushed is `pushed`); a write through a remote interrupted by Ctrl-C, SIGTERM or SIGHUP (`interrupted by SIGINT (Ctrl-C) while writing through origin: the outcome is unknown`, with the same advice; a second signal ends it at once, exit 130); a push refused, attempt after attempt, for a lock file in the way on the server (`a lock file on the server is in the way`: a killed or crashed git there left it behind; nothing changed; the server's administrator removes it, see docs/RELIABILITY.md, \"A lock left behind\"); the server's hook failed (it could not run, or another hook or the server's access rules declined: no `git-lease: refused` line); a claim of several issues at once on a server without the `atomic` capability (nothing pushed); `verify` found a broken rule; `sync` refused a ledger; with `lease.requireSignatures`, a local ledger with a step not signed as it must be (or breaking another rule); `doctor` found a check failing; a write through a remote that `doctor` found to ignore a push's expected old value"),
    (2, "bad usage or invalid input (issue id, TTL, `GIT_LEASE_NOW`, ref clash, not a repository, unsupported repository, a bad setting, a git older than the command needs: 2.29 for a remote, 2.45 for remote work, `gc` or a write git makes in a reftable repository); a write whose ledger commits are to be signed but cannot be (a format other than SSH, no `user.signingKey`, a key file missing or protected by a passphrase no ssh-agent holds, no agent, a key the agent lacks; nothing written); `install-hook`: a link where it would read or write, a `core.hooksPath` outside the repository"),
    (3, "refused: held by someone else, not the holder, fencing check failed, refused by the lease rules of the remote's hook (`remote: git-lease: refused …`)"),
    (4, "no such lease (`show`, `log`), or an ambiguous prefix"),
    (5, "lost the compare-and-swap race repeatedly (in any server's words: git's, JGit's and Gerrit's, dulwich's, libgit2's; see docs/SERVER.md, \"Third-party servers\"); nothing changed, safe to retry"),
    (6, "`run`: the lease was lost while the command ran (its tenure revoked, taken over, or revoked and taken again); the command was stopped, or had already ended"),
];

/// What README.md says below the table, also on every page.
pub const EXIT_STATUS_NOTES: &[&str] = &[
    "`run` otherwise exits with its command's exit code (128 + the signal number if a signal ended it; 127 if the command is not found, 126 if it cannot be run, as the shell does).",
    "Outcomes that refuse (`held`, `not_holder`, `wrong_secret`, and `skipped` for the other issues of a refused all-or-none claim) exit 3.",
];

/// One environment variable: its name, the pages it is on besides the `git lease` page (by
/// subcommand), and what it does.
pub struct Variable {
    /// The variable.
    pub name: &'static str,
    /// The subcommands whose pages name it too.
    pub pages: &'static [&'static str],
    /// What it does.
    pub text: &'static str,
}

/// The environment git-lease reads, and what `run` gives its command.
pub const ENVIRONMENT: &[Variable] = &[
    Variable {
        name: "GIT_LEASE_HOLDER",
        pages: &["acquire", "renew", "release", "complete", "abandon", "check", "list", "run", "wait", "revoke", "mcp", "timeline"],
        text: "Who you are as a holder, as `--holder` says (else `lease.holder`, then `user.email`). `run` sets it for its command: the holder of the lease it holds.",
    },
    Variable {
        name: "GIT_LEASE_SECRET",
        pages: &["acquire", "renew", "release", "complete", "abandon", "run"],
        text: "The session secret of a tenure taken with `acquire --session`, as `--secret` says. `run` sets it for its command: the secret of its own session.",
    },
    Variable {
        name: "GIT_LEASE_ISSUE",
        pages: &["run"],
        text: "Set by `run` for its command: the issue it holds (with `--any`, the one it claimed).",
    },
    Variable {
        name: "GIT_LEASE_TOKEN",
        pages: &["run", "push"],
        text: "Set by `run` for its command: the fencing token of its tenure, for `git lease push` or `git lease check`.",
    },
    Variable {
        name: "GIT_LEASE_PUSH_TOKEN",
        pages: &["push", "install-hook"],
        text: "Set by `git lease push` for the `git push` it runs: the token it passes as `-o lease-token=N`, which the guard of `install-hook --client` (its pre-push hook) checks. The guard also reads GIT_LEASE_TOKEN and GIT_LEASE_HOLDER, which `run` sets, in its pre-commit hook.",
    },
    Variable {
        name: "GIT_LEASE_NOW",
        pages: &["acquire", "renew", "release", "show", "list", "check", "run", "wait", "watch", "mcp", "timeline"],
        text: "The instant every rule is judged at, instead of the system clock: unix seconds or RFC 3339, between 1970 and 9999 (tests, replays, scripts). Read once per command; `run`, `wait` and `watch` count on from it with the monotonic clock. Never read by the server hook (the client's guard hooks read it).",
    },
    Variable {
        name: "GIT_LEASE_RUN_CGROUP",
        pages: &["run"],
        text: "`0`: `run` makes no cgroup for its command (a cgroup tree someone else manages).",
    },
    Variable {
        name: "GIT_LEASE_GC_SYNC",
        pages: &["gc"],
        text: "`1`: the automatic `git gc --auto` after a write runs in the foreground, waited for.",
    },
    Variable {
        name: "SSH_AUTH_SOCK",
        pages: &["acquire", "renew", "release", "complete", "abandon", "revoke", "run"],
        text: "ssh-agent's socket, through which ledger commits are signed when `user.signingKey` is a public key, or a key file protected by a passphrase (`lease.sign`, `commit.gpgSign` with `gpg.format=ssh`).",
    },
    Variable {
        name: "NO_COLOR",
        pages: &[],
        text: "Set and not empty: no colour, unless `--color` says otherwise; it wins over `color.ui`.",
    },
    Variable {
        name: "COMPLETE",
        pages: &["completions"],
        text: "`bash`, `zsh`, `fish`, `elvish` or `powershell`: print that shell's completion script, or with the words typed after `--`, their completions (the protocol the scripts use).",
    },
];
