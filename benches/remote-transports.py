#!/usr/bin/env python3
"""`git-lease acquire --remote` against one plain `git push`, over ssh and over http.

Usage (as root, after `cargo build --release`):  python3 benches/remote-transports.py [ROUNDS] [RUNS]

Two real servers on 127.0.0.1, set up as docs/SERVER.md says with the project's fixtures:
sshd with a forced command per key (fixtures/sshd-git.conf, fixtures/ssh-authorized-key.line;
repositories owned by the account `gitlease`) and nginx + fcgiwrap + git http-backend with
basic auth (fixtures/nginx-git.conf; repositories owned by www-data). Both repositories have
the git-lease hook (`install-hook`, identity from LEASE_USER / REMOTE_USER), as a real server
would, so the plain push pays the hook's start too.

Four commands, side by side in one run: on each transport, `git-lease acquire --remote` of a
fresh issue (one push, no fetch) and a plain `git push` of one new lease commit (blob, tree,
commit, as the acquire sends) to `refs/pushed/<n>`. Each round runs every command RUNS times,
the four in a rotating order; one warm-up run each first. Prints the median and p25-p75 of each
and the median of same-round ratios acquire / push per transport, as Markdown for
BENCHMARKS.md. Traffic: only 127.0.0.1.
"""
import os
import pwd
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from netutil import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "git-lease")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
USERS = ["alice"]


def sh(*args, **kw):
    out = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {out.stderr}")
    return out.stdout.strip()


def fixture(name, **values):
    with open(os.path.join(ROOT, "fixtures", name)) as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    return text


def wait_port(port, proc, what):
    for _ in range(400):
        if proc.poll() is not None:
            sys.exit(f"{what} exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.025)
    sys.exit(f"{what} is not listening")


def account(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        sh("useradd", "-r", "-M", "-d", "/nonexistent", "-s", "/bin/sh", name)
    sh("usermod", "-p", "*", name)
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def bare_repo(path, owner, env_var, gl):
    sh("git", "init", "-q", "--bare", path)
    sh("git", "-C", path, "config", "http.receivepack", "true")
    sh("git", "-C", path, "config", "lease.pusherEnv", env_var)
    sh("chown", "-R", f"{owner[0]}:{owner[1]}", os.path.dirname(path))
    sh(BIN, "install-hook", "--repo", path, "--binary", gl)


def lease_commits(repo, count):
    """`count` distinct lease commits at refs/leases/i<n>, as an acquire would write."""
    sh("git", "init", "-q", repo)
    for n in range(1, count + 1):
        body = (
            '{\n  "version": 1,\n  "issue": "i%d",\n  "event": "acquire",\n'
            '  "holder": "alice",\n  "token": 1,\n  "acquired_at": "2027-01-15T08:00:00Z",\n'
            '  "expires_at": "2027-01-15T09:00:00Z",\n  "at": "2027-01-15T08:00:00Z"\n}\n' % n
        )
        blob = subprocess.run(["git", "-C", repo, "hash-object", "-w", "--stdin"], input=body,
                              capture_output=True, text=True, check=True).stdout.strip()
        tree = subprocess.run(["git", "-C", repo, "mktree"], input=f"100644 blob {blob}\tlease.json\n",
                              capture_output=True, text=True, check=True).stdout.strip()
        commit = sh("git", "-C", repo, "commit-tree", tree, "-m", f"acquire i{n}")
        sh("git", "-C", repo, "update-ref", f"refs/leases/i{n}", commit)


def main():
    if os.geteuid() != 0:
        sys.exit("run as root: the servers serve as accounts of their own")
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} is missing: cargo build --release")
    w = tempfile.mkdtemp(prefix="git-lease-transports.")
    os.chmod(w, 0o755)
    procs = []
    try:
        for d in ["bin", "ssh/repos", "ssh/home", "http/repos", "http/run", "http/tmp", "http/home-server"]:
            os.makedirs(os.path.join(w, d))
        gl = os.path.join(w, "bin", "git-lease")
        shutil.copy(BIN, gl)
        os.chmod(gl, 0o755)
        path = f"{w}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}"
        gitlease = account("gitlease")
        www = account("www-data")
        count = ROUNDS * RUNS + 1

        # sshd with a forced command per key.
        s = f"{w}/ssh"
        bare_repo(f"{s}/repos/leases.git", gitlease, "LEASE_USER", gl)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{s}/hostkey")
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", f"{s}/key-alice")
        with open(f"{s}/key-alice.pub") as f:
            key = f.read().strip()
        with open(f"{s}/authorized_keys", "w") as f:
            f.write(fixture("ssh-authorized-key.line", USER="alice", KEY=key))
        ssh_port = free_port()
        with open(f"{s}/hostkey.pub") as f:
            host = f.read().strip()
        with open(f"{s}/known_hosts", "w") as f:
            f.write(f"[127.0.0.1]:{ssh_port} {host}\n")
        with open(f"{s}/sshd_config", "w") as f:
            f.write(fixture("sshd-git.conf", PORT=ssh_port, ROOT=s, AUTHORIZED_KEYS=f"{s}/authorized_keys",
                            USER="gitlease", HOME=f"{s}/home", PATH=path))
        os.makedirs("/run/sshd", exist_ok=True)
        sshd = subprocess.Popen([shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", f"{s}/sshd_config"],
                                stdout=subprocess.DEVNULL, stderr=open(f"{s}/sshd.log", "w"),
                                start_new_session=True)
        procs.append(sshd)
        wait_port(ssh_port, sshd, "sshd")
        ssh_cmd = (f"ssh -F /dev/null -i {s}/key-alice -o IdentitiesOnly=yes -o BatchMode=yes "
                   f"-o UserKnownHostsFile={s}/known_hosts -o StrictHostKeyChecking=yes")
        ssh_url = f"ssh://gitlease@127.0.0.1:{ssh_port}{s}/repos/leases.git"

        # nginx, fcgiwrap, git http-backend.
        h = f"{w}/http"
        bare_repo(f"{h}/repos/leases.git", www, "REMOTE_USER", gl)
        with open(f"{h}/htpasswd", "w") as f:
            f.write("alice:{PLAIN}alicepw\n")
        sh("chown", "-R", f"{www[0]}:{www[1]}", f"{h}/run")
        fcgi = subprocess.Popen(["fcgiwrap", "-c", "4", "-s", f"unix:{h}/run/fcgiwrap.sock"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                user=www[0], group=www[1], start_new_session=True,
                                env={"PATH": path, "HOME": f"{h}/home-server"})
        procs.append(fcgi)
        for _ in range(400):
            if os.path.exists(f"{h}/run/fcgiwrap.sock"):
                break
            time.sleep(0.025)
        http_port = free_port()
        exec_path = sh("git", "--exec-path")
        with open(f"{h}/nginx.conf", "w") as f:
            f.write(fixture("nginx-git.conf", PORT=http_port, ROOT=h, USER="www-data",
                            EXEC_PATH=exec_path, PATH=path))
        nginx = subprocess.Popen(["nginx", "-p", h, "-c", f"{h}/nginx.conf"], stdout=subprocess.DEVNULL,
                                 stderr=open(f"{h}/nginx.log", "w"), start_new_session=True)
        procs.append(nginx)
        wait_port(http_port, nginx, "nginx")
        http_url = f"http://alice:alicepw@127.0.0.1:{http_port}/leases.git"

        # Clients: one claiming repository and one pushing repository per transport.
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
        commands = []
        for name, url in [("ssh", ssh_url), ("http", http_url)]:
            local = f"{w}/{name}-local"
            sh("git", "init", "-q", local)
            sh("git", "-C", local, "config", "lease.holder", "alice")
            pusher = f"{w}/{name}-pusher"
            lease_commits(pusher, count)
            for repo in [local, pusher]:
                sh("git", "-C", repo, "config", "core.sshCommand", ssh_cmd)
            commands.append((f"{name}: git-lease acquire --remote",
                             lambda n, local=local, url=url: [BIN, "-C", local, "acquire", f"r{n}", "--ttl", "1h",
                                                              "--remote", url]))
            commands.append((f"{name}: git push (one ref)",
                             lambda n, pusher=pusher, url=url: ["git", "-C", pusher, "push", "-q", url,
                                                                f"refs/leases/i{n}:refs/pushed/i{n}"]))

        counters = [0] * len(commands)
        times = [[] for _ in commands]  # per command: (round, ms)

        def once(j, rnd):
            counters[j] += 1
            args = commands[j][1](counters[j])
            start = time.perf_counter()
            out = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            ms = (time.perf_counter() - start) * 1000.0
            if out.returncode != 0:
                sys.exit(f"{' '.join(args)} failed: {out.stderr}")
            if rnd is not None:
                times[j].append((rnd, ms))

        for j in range(len(commands)):
            once(j, None)
        for rnd in range(ROUNDS):
            order = [(rnd + j) % len(commands) for j in range(len(commands))]
            for _ in range(RUNS):
                for j in order:
                    once(j, rnd)

        def q(values, p):
            values = sorted(values)
            return values[min(len(values) - 1, int(p * (len(values) - 1) + 0.5))]

        print(f"{ROUNDS} rounds x {RUNS} runs, one warm-up each; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print()
        print("| transport | git-lease acquire --remote | git push (one ref) | ratio (same-round medians) |")
        print("|---|---:|---:|---|")
        for t in range(0, len(commands), 2):
            a = [ms for _, ms in times[t]]
            b = [ms for _, ms in times[t + 1]]
            ratios = []
            for rnd in range(ROUNDS):
                ra = statistics.median(ms for r, ms in times[t] if r == rnd)
                rb = statistics.median(ms for r, ms in times[t + 1] if r == rnd)
                ratios.append(ra / rb)
            name = commands[t][0].split(":")[0]
            print(f"| {name} | {statistics.median(a):.1f} ms ({q(a, .25):.1f}–{q(a, .75):.1f}) "
                  f"| {statistics.median(b):.1f} ms ({q(b, .25):.1f}–{q(b, .75):.1f}) "
                  f"| **{statistics.median(ratios):.2f}x** ({min(ratios):.2f}–{max(ratios):.2f}) |")
        for name, url in [("ssh", ssh_url), ("http", http_url)]:
            refs = subprocess.run(["git", "ls-remote", url], env=dict(env, GIT_SSH_COMMAND=ssh_cmd),
                                  capture_output=True, text=True).stdout
            print(f"\n{name}: {refs.count('refs/leases/')} leases and {refs.count('refs/pushed/')} plain pushes on the server",
                  end="")
        print()
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
