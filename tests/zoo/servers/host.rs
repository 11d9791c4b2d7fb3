//! The host's side of a served repository: the system accounts servers run as, SSH keys,
//! ownership, the programs found on the machine, and the processes started and awaited.

use super::*;

/// The system account `name`, created (locked for passwords, shell /bin/sh) if missing.
pub(super) fn ensure_account(name: &str) -> Account {
    static CREATING: Mutex<()> = Mutex::new(());
    let _guard = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").arg(flag).arg(name).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id("-u").is_none() {
        let mut cmd = Command::new("useradd");
        cmd.args(["-r", "-M", "-d", "/nonexistent", "-s", "/bin/sh", name]);
        let run = output(cmd, "useradd");
        assert!(
            run.code == 0 || id("-u").is_some(),
            "cannot create the account {name}\n{run}"
        );
    }
    // sshd (without PAM) refuses locked accounts ("!"); "*" only refuses passwords.
    let mut cmd = Command::new("usermod");
    cmd.args(["-p", "*", name]);
    let run = output(cmd, "usermod");
    assert_eq!(run.code, 0, "usermod\n{run}");
    Account {
        name: name.to_owned(),
        uid: id("-u").expect("uid"),
        gid: id("-g").expect("gid"),
    }
}

pub(super) fn group_name(gid: u32) -> String {
    let out = Command::new("getent")
        .args(["group", &gid.to_string()])
        .output()
        .expect("getent group");
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .next()
        .unwrap_or_default()
        .to_owned()
}

pub(super) fn keygen(path: &Path, comment: &str) {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path);
    output(cmd, "ssh-keygen").ok();
}

pub(super) fn chown(path: &Path, owner: &Account) {
    std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid)).expect("chown");
}

pub fn chown_r(path: &Path, owner: &Account) {
    let mut cmd = Command::new("chown");
    cmd.arg("-R")
        .arg(format!("{}:{}", owner.uid, owner.gid))
        .arg(path);
    output(cmd, "chown -R").ok();
}

pub(super) fn exec_path() -> String {
    let out = Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("git --exec-path");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Finds `name` on PATH or in the system's sbin directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub(super) fn redirect(cmd: &mut Command, log: &Path) {
    let out = File::create(log).expect("create a log");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("clone a log handle"))
        .stderr(out)
        .process_group(0);
}

pub(super) fn spawn(mut cmd: Command, what: &str) -> Child {
    cmd.spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

pub(super) fn output(mut cmd: Command, what: &str) -> Run {
    cmd.stdin(Stdio::null());
    Run::capture(cmd, what)
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until `port` accepts connections while `child` runs, in bounded polls.
pub(super) fn wait_listening(child: &mut Child, port: u16) -> Result<(), String> {
    match wait_until_ready(child, port, READY_POLLS, || true) {
        Start::Ready => Ok(()),
        verdict => Err(verdict.to_string()),
    }
}
