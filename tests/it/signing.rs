//! Signed ledger commits: with `gpg.format=ssh` and `user.signingKey`, ledger commits are
//! signed when `commit.gpgSign` says so (as git signs any commit), `lease.sign` overriding it,
//! in git's own format, so that plain git verifies them: `git verify-commit` and `git log
//! --show-signature` with an allowed signers file, and `ssh-keygen -Y verify` on the signature
//! taken out of the commit object. Keys are made by `ssh-keygen` in each test's temporary
//! directory; keys held only by an agent are in an `ssh-agent` the test starts and ends.
//! A key that cannot sign (missing, protected by a passphrase with no agent, not in the agent)
//! is bad usage, exit 2, and nothing is written.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::env::{self, at_min, Run, TestRepo};
use crate::server::{self, Server};

/// The principal every test key is allowed to sign as.
const SIGNER: &str = "signer@example.com";

/// Returns whether `program` runs here; if not, fails under `CI=true` (`.ci/run` installs
/// openssh-client) and otherwise records the skip.
fn have(program: &str) -> bool {
    let found = Command::new(program)
        .arg("-?")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    found
        || env::unavailable::<()>(
            env::Skip::Host,
            "",
            &format!("{program} is missing (openssh-client, which .ci/run installs)"),
        )
        .is_some()
}

/// Whether the OpenSSH tools these tests need are here.
fn openssh() -> bool {
    ["ssh-keygen", "ssh-agent", "ssh-add"]
        .iter()
        .all(|p| have(p))
}

/// An SSH key pair made by `ssh-keygen -t <kind>` in the test's directory.
struct Key {
    private: PathBuf,
    public: String,
}

impl Key {
    fn public_path(&self) -> PathBuf {
        self.private.with_extension("pub")
    }
}

/// Makes a key pair `<root>/keys/<name>` of `kind` (`ed25519`, `rsa`, `ecdsa`) with
/// `passphrase` (empty: none).
fn keygen(repo: &TestRepo, name: &str, kind: &str, passphrase: &str) -> Key {
    let dir = repo.scratch("keys");
    let private = dir.join(name);
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", kind, "-N", passphrase, "-C", name, "-f"])
        .arg(&private);
    if kind == "rsa" {
        cmd.args(["-b", "2048"]);
    }
    let run = Run::capture(cmd, format!("ssh-keygen -t {kind}"));
    run.ok();
    let public = std::fs::read_to_string(private.with_extension("pub"))
        .expect("ssh-keygen writes the public key")
        .trim()
        .to_owned();
    Key { private, public }
}

/// Writes an allowed signers file (`gpg.ssh.allowedSignersFile`) letting [`SIGNER`] sign with
/// each of `keys`.
fn allowed_signers(repo: &TestRepo, keys: &[&Key]) -> PathBuf {
    let path = repo.scratch("keys").join("allowed_signers");
    let text: String = keys
        .iter()
        .map(|k| format!("{SIGNER} {}\n", k.public))
        .collect();
    std::fs::write(&path, text).expect("write the allowed signers file");
    path
}

/// Configures SSH signing with `key` as `user.signingKey` (signing itself is asked for by
/// the test: `commit.gpgSign` or `lease.sign`).
fn use_key(repo: &TestRepo, key: &str) {
    repo.git(&["config", "gpg.format", "ssh"]);
    repo.git(&["config", "user.signingKey", key]);
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

/// The ledger's commits, newest first, as plain git lists them.
fn ledger(repo: &TestRepo, issue: &str) -> Vec<String> {
    repo.git(&["rev-list", &format!("refs/leases/{issue}")])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Splits a commit object into its signature (the `gpgsig` or `gpgsig-sha256` header,
/// unfolded) and the payload git verifies: the object without that header.
fn split_signature(object: &str) -> Option<(String, String)> {
    let (headers, message) = object.split_once("\n\n")?;
    let mut signature = String::new();
    let mut payload = String::new();
    let mut inside = false;
    for line in headers.lines() {
        if let Some(rest) = line
            .strip_prefix("gpgsig ")
            .or_else(|| line.strip_prefix("gpgsig-sha256 "))
        {
            inside = true;
            signature.push_str(rest);
            signature.push('\n');
        } else if inside && line.starts_with(' ') {
            signature.push_str(&line[1..]);
            signature.push('\n');
        } else {
            inside = false;
            payload.push_str(line);
            payload.push('\n');
        }
    }
    payload.push('\n');
    payload.push_str(message);
    (!signature.is_empty()).then_some((signature, payload))
}

/// Asserts that every commit of the ledger of `issue` in `repo` is signed by one of the keys
/// of `allowed` in git's format: `git verify-commit` passes, `git log --show-signature` says
/// "Good" for each, and `ssh-keygen -Y verify` agrees on the signature taken out of the
/// object.
#[track_caller]
fn assert_signed(repo: &TestRepo, issue: &str, allowed: &Path) {
    let commits = ledger(repo, issue);
    assert!(!commits.is_empty(), "no ledger for {issue}");
    let allowed_setting = format!("gpg.ssh.allowedSignersFile={}", path_str(allowed));
    for commit in &commits {
        let run = repo.git_run(&["-c", &allowed_setting, "verify-commit", "-v", commit]);
        run.ok().stderr_has("Good \"git\" signature");
        let object = repo.git(&["cat-file", "commit", commit]);
        let (signature, payload) = split_signature(&format!("{object}\n"))
            .unwrap_or_else(|| panic!("{commit} has no gpgsig header:\n{object}"));
        assert!(
            signature.starts_with("-----BEGIN SSH SIGNATURE-----\n")
                && signature.ends_with("-----END SSH SIGNATURE-----\n"),
            "not an armored SSH signature:\n{signature}"
        );
        // The signature header follows the committer, as git places it.
        let headers: Vec<&str> = object
            .lines()
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.starts_with(' '))
            .map(|l| l.split(' ').next().unwrap_or_default())
            .collect();
        assert_eq!(
            headers.last().copied(),
            Some(
                if repo.git(&["rev-parse", "--show-object-format"]) == "sha256" {
                    "gpgsig-sha256"
                } else {
                    "gpgsig"
                }
            ),
            "{object}"
        );
        assert_eq!(headers[headers.len() - 2], "committer", "{object}");
        let dir = repo.scratch("sig");
        let sig_file = dir.join(format!("{commit}.sig"));
        std::fs::write(&sig_file, &signature).expect("write the signature");
        let mut cmd = Command::new("ssh-keygen");
        cmd.args(["-Y", "verify", "-n", "git", "-I", SIGNER, "-f"])
            .arg(allowed)
            .arg("-s")
            .arg(&sig_file);
        let run = run_with_stdin(cmd, payload.as_bytes());
        run.ok().stdout_has("Good \"git\" signature");
    }
    let run = repo.git_run(&[
        "-c",
        &allowed_setting,
        "log",
        "--show-signature",
        &format!("refs/leases/{issue}"),
    ]);
    run.ok();
    let good = run.stdout.matches("Good \"git\" signature for").count();
    assert_eq!(good, commits.len(), "{run}");
}

/// Asserts that no commit of the ledger of `issue` carries a signature.
#[track_caller]
fn assert_unsigned(repo: &TestRepo, issue: &str) {
    let commits = ledger(repo, issue);
    assert!(!commits.is_empty(), "no ledger for {issue}");
    for commit in &commits {
        let object = repo.git(&["cat-file", "commit", commit]);
        assert!(
            !object.contains("\ngpgsig"),
            "{commit} is signed:\n{object}"
        );
        repo.git_run(&["verify-commit", commit]).code(1);
    }
}

fn run_with_stdin(mut cmd: Command, input: &[u8]) -> Run {
    use std::io::Write as _;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("start the command");
    child
        .stdin
        .take()
        .expect("a stdin")
        .write_all(input)
        .expect("write stdin");
    Run::from_output(what, child.wait_with_output().expect("wait"))
}

/// An `ssh-agent` of the test's own, in the foreground (`-D`) on a socket in the test's
/// directory; killed when dropped.
struct Agent {
    child: Child,
    socket: PathBuf,
}

impl Agent {
    /// Starts it, ready once it has printed where it listens (it binds its socket first).
    fn start(repo: &TestRepo) -> Agent {
        let socket = repo.scratch("agent").join("sock");
        let mut child = Command::new("ssh-agent")
            .args(["-D", "-s", "-a"])
            .arg(&socket)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ssh-agent");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("read ssh-agent's first line");
        assert!(line.contains("SSH_AUTH_SOCK"), "ssh-agent said {line:?}");
        Agent { child, socket }
    }

    /// `ssh-add`s `key` (with no passphrase asked: the key has none, or `SSH_ASKPASS` gives it).
    fn add(&self, key: &Key, passphrase: &str) {
        let mut cmd = Command::new("ssh-add");
        cmd.arg(&key.private)
            .env_clear()
            .env("SSH_AUTH_SOCK", &self.socket)
            .stdin(Stdio::null());
        if !passphrase.is_empty() {
            let askpass = self.socket.with_file_name("askpass");
            crate::env::write_program(
                &askpass,
                &format!("#!/bin/sh\necho '{passphrase}'\n"),
                0o700,
            );
            cmd.env("SSH_ASKPASS", &askpass)
                .env("SSH_ASKPASS_REQUIRE", "force")
                .env("DISPLAY", ":0");
        }
        Run::capture(cmd, "ssh-add").ok();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `git lease <args>` at `min` minutes after T0 with `SSH_AUTH_SOCK` set to `agent`'s.
fn lease_with_agent(repo: &TestRepo, agent: &Agent, min: i64, args: &[&str]) -> Run {
    repo.lease()
        .now(&at_min(min))
        .env("SSH_AUTH_SOCK", &agent.socket)
        .args(args)
        .run()
}

/// Every kind of event, on one issue and three at once.
const EVERY_EVENT: &[(i64, &str)] = &[
    (0, "acquire 42 --holder alice --ttl 1h"),
    (10, "renew 42 --holder alice --ttl 1h"),
    (20, "release 42 --holder alice"),
    (30, "acquire 42 --holder bob --ttl 1h"),
    (40, "complete 42 --holder bob"),
    (50, "acquire 42 --holder carol --ttl 1h"),
    (60, "revoke 42 --holder admin --reason stuck"),
    (70, "acquire 42 --holder dave --ttl 1h"),
    (80, "abandon 42 --holder dave"),
    (90, "acquire 1 2 3 --holder erin --ttl 1h"),
];

#[test]
fn every_event_is_a_commit_git_verifies_when_commit_gpgsign_is_on() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "commit.gpgSign", "true"]);
    repo.steps(EVERY_EVENT);
    assert_eq!(ledger(&repo, "42").len(), 9);
    let allowed = allowed_signers(&repo, &[&key]);
    for issue in ["42", "1", "2", "3"] {
        assert_signed(&repo, issue, &allowed);
    }
    // Readers and the audit take signed commits as any other.
    repo.run(&["verify"]).ok().stdout_has("ok");
    repo.run_at(&at_min(95), &["show", "1"])
        .ok()
        .stdout_has("erin");
    repo.assert_fsck();
}

#[test]
fn run_signs_the_claim_and_its_end() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "lease.sign", "true"]);
    repo.run_at(
        &at_min(0),
        &["run", "9", "--holder", "alice", "--ttl", "1h", "--", "true"],
    )
    .ok();
    assert_eq!(ledger(&repo, "9").len(), 2);
    assert_signed(&repo, "9", &allowed_signers(&repo, &[&key]));
}

#[test]
fn lease_sign_false_writes_unsigned_commits_even_with_commit_gpgsign_on() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "commit.gpgSign", "true"]);
    repo.git(&["config", "lease.sign", "false"]);
    repo.steps(&[
        (0, "acquire 42 --holder alice --ttl 1h"),
        (5, "release 42 --holder alice"),
    ]);
    assert_unsigned(&repo, "42");
}

#[test]
fn lease_sign_true_signs_with_commit_gpgsign_unset_also_from_the_command_line() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "lease.sign", "true"]);
    repo.steps(&[(0, "acquire 42 --holder alice --ttl 1h")]);
    let allowed = allowed_signers(&repo, &[&key]);
    assert_signed(&repo, "42", &allowed);

    // `git -c lease.sign=true lease …` passes it down as git does.
    repo.git(&["config", "--unset", "lease.sign"]);
    repo.run_at(&at_min(1), &["acquire", "7", "--holder", "alice"])
        .ok();
    assert_unsigned(&repo, "7");
    repo.lease()
        .now(&at_min(2))
        .env("GIT_CONFIG_PARAMETERS", "'lease.sign'='true'")
        .args(["release", "7", "--holder", "alice"])
        .run()
        .ok();
    let commits = ledger(&repo, "7");
    let allowed_setting = format!("gpg.ssh.allowedSignersFile={}", path_str(&allowed));
    repo.git_run(&["-c", &allowed_setting, "verify-commit", &commits[0]])
        .ok();
    repo.git_run(&["-c", &allowed_setting, "verify-commit", &commits[1]])
        .code(1);
}

#[test]
fn a_key_path_may_start_with_a_tilde_for_home() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    let ssh = repo.home().join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir ~/.ssh");
    std::fs::copy(&key.private, ssh.join("id_ed25519")).expect("copy the key");
    use_key(&repo, "~/.ssh/id_ed25519");
    repo.git(&["config", "lease.sign", "true"]);
    repo.steps(&[(0, "acquire 42 --holder alice --ttl 1h")]);
    assert_signed(&repo, "42", &allowed_signers(&repo, &[&key]));
}

#[test]
fn rsa_and_ecdsa_keys_sign_too() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let rsa = keygen(&repo, "id_rsa", "rsa", "");
    let ecdsa = keygen(&repo, "id_ecdsa", "ecdsa", "");
    repo.git(&["config", "lease.sign", "true"]);
    use_key(&repo, path_str(&rsa.private));
    repo.steps(&[(0, "acquire 1 --holder alice --ttl 1h")]);
    use_key(&repo, path_str(&ecdsa.private));
    repo.steps(&[(0, "acquire 2 --holder alice --ttl 1h")]);
    let allowed = allowed_signers(&repo, &[&rsa, &ecdsa]);
    assert_signed(&repo, "1", &allowed);
    assert_signed(&repo, "2", &allowed);

    // Through the agent, each asked to sign as ssh-keygen asks (RSA with SHA-512).
    let agent = Agent::start(&repo);
    for (issue, key) in [("3", &rsa), ("4", &ecdsa)] {
        agent.add(key, "");
        use_key(&repo, &format!("key::{}", key.public));
        lease_with_agent(&repo, &agent, 1, &["acquire", issue, "--holder", "alice"]).ok();
        assert_signed(&repo, issue, &allowed);
    }
}

#[test]
fn a_sha256_repository_signs_in_gpgsig_sha256() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::init(&["--object-format=sha256"]);
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "lease.sign", "true"]);
    repo.steps(&[
        (0, "acquire 42 --holder alice --ttl 1h"),
        (5, "release 42 --holder alice"),
    ]);
    assert_signed(&repo, "42", &allowed_signers(&repo, &[&key]));
}

#[test]
fn a_public_key_whose_private_half_is_in_ssh_agent_signs_through_it() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    let agent = Agent::start(&repo);
    agent.add(&key, "");
    // The private key is gone: only the agent holds it.
    std::fs::remove_file(&key.private).expect("remove the private key");
    repo.git(&["config", "lease.sign", "true"]);
    let allowed = allowed_signers(&repo, &[&key]);

    // A literal key, with git's `key::` prefix and in its older form without it.
    use_key(&repo, &format!("key::{}", key.public));
    lease_with_agent(&repo, &agent, 0, &["acquire", "1", "--holder", "alice"]).ok();
    use_key(&repo, &key.public);
    lease_with_agent(&repo, &agent, 1, &["release", "1", "--holder", "alice"]).ok();
    assert_signed(&repo, "1", &allowed);

    // A public key file; several commits of one command, on one connection to the agent.
    use_key(&repo, path_str(&key.public_path()));
    lease_with_agent(
        &repo,
        &agent,
        2,
        &["acquire", "2", "3", "--holder", "alice"],
    )
    .ok();
    for issue in ["2", "3"] {
        assert_signed(&repo, issue, &allowed);
    }
}

#[test]
fn a_passphrase_protected_key_signs_through_the_agent_that_holds_it() {
    if !openssh() {
        return;
    }
    let repo = TestRepo::new();
    let key = keygen(&repo, "id_ed25519", "ed25519", "correct horse");
    let agent = Agent::start(&repo);
    agent.add(&key, "correct horse");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "lease.sign", "true"]);
    lease_with_agent(&repo, &agent, 0, &["acquire", "1", "--holder", "alice"]).ok();
    assert_signed(&repo, "1", &allowed_signers(&repo, &[&key]));
}

/// Runs `args` at `min`, which must fail as bad usage (exit 2) with `says` in its message,
/// having written nothing: refs and objects as they were.
#[track_caller]
fn refused_writing_nothing(repo: &TestRepo, run: impl FnOnce() -> Run, says: &[&str]) {
    let before = repo.snapshot();
    let ledger_before = repo.git(&["for-each-ref", "refs/leases"]);
    let run = run();
    run.code(2);
    for needle in says {
        run.stderr_has(needle);
    }
    run.stderr_has("nothing was written");
    assert_eq!(repo.snapshot(), before, "{run}");
    assert_eq!(repo.git(&["for-each-ref", "refs/leases"]), ledger_before);
}

/// A repository holding an unsigned ledger of 42 (alice's live lease) and 7 (free).
fn repo_with_ledgers() -> TestRepo {
    let repo = TestRepo::new();
    repo.steps(&[
        (0, "acquire 42 --holder alice --ttl 1h"),
        (0, "acquire 7 --holder alice --ttl 1h"),
        (1, "release 7 --holder alice"),
    ]);
    repo
}

#[test]
fn a_passphrase_protected_key_without_an_agent_is_refused_and_nothing_is_written() {
    if !openssh() {
        return;
    }
    let repo = repo_with_ledgers();
    let key = keygen(&repo, "id_ed25519", "ed25519", "secret");
    use_key(&repo, path_str(&key.private));
    repo.git(&["config", "lease.sign", "true"]);
    for args in [
        &["renew", "42", "--holder", "alice"][..],
        &["acquire", "7", "--holder", "bob"],
        &["acquire", "8", "9", "--holder", "bob"],
    ] {
        refused_writing_nothing(
            &repo,
            || repo.run_at(&at_min(2), args),
            &["passphrase", "ssh-add"],
        );
    }
    // A command that writes nothing needs no key.
    repo.run_at(&at_min(2), &["acquire", "42", "--holder", "bob"])
        .code(3);
    repo.run_at(&at_min(2), &["list"]).ok();
}

#[test]
fn a_missing_key_file_is_refused_and_nothing_is_written() {
    if !openssh() {
        return;
    }
    let repo = repo_with_ledgers();
    let missing = repo.root().join("keys/nowhere");
    use_key(&repo, path_str(&missing));
    repo.git(&["config", "commit.gpgSign", "true"]);
    refused_writing_nothing(
        &repo,
        || repo.run_at(&at_min(2), &["release", "42", "--holder", "alice"]),
        &["no such key file", path_str(&missing)],
    );
    // JSON says it too, as bad usage.
    let run = repo
        .lease()
        .now(&at_min(2))
        .arg_json()
        .args(["acquire", "7", "--holder", "bob"])
        .run();
    run.code(2);
    let err: serde_json::Value =
        serde_json::from_str(run.stderr.trim()).expect("a JSON error on stderr");
    assert_eq!(err["error"]["kind"], "usage", "{run}");
}

#[test]
fn a_key_the_agent_lacks_or_no_agent_is_refused_and_nothing_is_written() {
    if !openssh() {
        return;
    }
    let repo = repo_with_ledgers();
    let key = keygen(&repo, "id_ed25519", "ed25519", "");
    repo.git(&["config", "lease.sign", "true"]);
    use_key(&repo, &format!("key::{}", key.public));
    let agent = Agent::start(&repo);
    refused_writing_nothing(
        &repo,
        || lease_with_agent(&repo, &agent, 2, &["renew", "42", "--holder", "alice"]),
        &["does not hold"],
    );
    refused_writing_nothing(
        &repo,
        || repo.run_at(&at_min(2), &["renew", "42", "--holder", "alice"]),
        &["SSH_AUTH_SOCK"],
    );
    drop(agent);
    let gone = repo.root().join("agent/sock");
    refused_writing_nothing(
        &repo,
        || {
            repo.lease()
                .now(&at_min(2))
                .env("SSH_AUTH_SOCK", &gone)
                .args(["renew", "42", "--holder", "alice"])
                .run()
        },
        &["cannot reach ssh-agent"],
    );
}

#[test]
fn signing_in_another_format_than_ssh_or_without_a_key_is_refused() {
    let repo = repo_with_ledgers();
    repo.git(&["config", "commit.gpgSign", "true"]);
    repo.git(&["config", "user.signingKey", "ABCDEF0123456789"]);
    // gpg.format unset is OpenPGP, git's default.
    refused_writing_nothing(
        &repo,
        || repo.run_at(&at_min(2), &["renew", "42", "--holder", "alice"]),
        &["gpg.format=openpgp", "lease.sign=false"],
    );
    repo.git(&["config", "gpg.format", "x509"]);
    refused_writing_nothing(
        &repo,
        || repo.run_at(&at_min(2), &["renew", "42", "--holder", "alice"]),
        &["gpg.format=x509"],
    );
    repo.git(&["config", "gpg.format", "ssh"]);
    repo.git(&["config", "--unset", "user.signingKey"]);
    let before = repo.snapshot();
    repo.run_at(&at_min(2), &["renew", "42", "--holder", "alice"])
        .code(2)
        .stderr_has("user.signingKey");
    assert_eq!(repo.snapshot(), before);
    // lease.sign=false writes unsigned whatever the rest says.
    repo.git(&["config", "gpg.format", "openpgp"]);
    repo.git(&["config", "lease.sign", "false"]);
    repo.run_at(&at_min(2), &["renew", "42", "--holder", "alice"])
        .ok();
    assert_unsigned(&repo, "42");
}

#[test]
fn a_bad_lease_sign_is_bad_usage_naming_key_and_value() {
    let repo = repo_with_ledgers();
    repo.git(&["config", "lease.sign", "maybe"]);
    let before = repo.snapshot();
    repo.run_at(&at_min(2), &["renew", "42", "--holder", "alice"])
        .code(2)
        .stderr_has("lease.sign")
        .stderr_has("maybe");
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn a_remote_claim_pushes_signed_commits_the_server_verifies() {
    if !openssh() {
        return;
    }
    let mut server = Server::with_hook();
    server.start_at(&env::at(0));
    let client = server.client("alice");
    let key = keygen(&client, "id_ed25519", "ed25519", "");
    use_key(&client, path_str(&key.private));
    client.git(&["config", "commit.gpgSign", "true"]);
    for (secs, args) in [
        (
            0,
            &["--remote", "origin", "acquire", "42", "--ttl", "10m"][..],
        ),
        (60, &["--remote", "origin", "renew", "42", "--ttl", "10m"]),
        (
            120,
            &["--remote", "origin", "acquire", "1", "2", "--ttl", "10m"],
        ),
        (180, &["--remote", "origin", "release", "42"]),
    ] {
        server::lease(&client, secs, args).ok();
    }
    let allowed = allowed_signers(&client, &[&key]);
    for issue in ["42", "1", "2"] {
        // The hook took them, and plain git on the server verifies every one.
        assert_signed(server.repo(), issue, &allowed);
        assert_eq!(server.repo().tip(issue), client.tip(issue));
    }
    server.repo().run(&["verify"]).ok().stdout_has("ok");

    // A file:// remote too, with no hook.
    let bare = TestRepo::bare();
    let url = format!("file://{}", path_str(bare.path()));
    server::lease(
        &client,
        200,
        &["--remote", &url, "acquire", "5", "--ttl", "10m"],
    )
    .ok();
    assert_signed(&bare, "5", &allowed);

    // A key that cannot sign pushes nothing.
    client.git(&["config", "user.signingKey", "/nonexistent/key"]);
    let before = server.lease_refs();
    server::lease(
        &client,
        240,
        &["--remote", "origin", "acquire", "42", "--ttl", "10m"],
    )
    .code(2)
    .stderr_has("no such key file");
    assert_eq!(server.lease_refs(), before);
}
