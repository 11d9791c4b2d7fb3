#!/usr/bin/env python3
"""Fleet scale benchmark: N agents each claim one of M candidates with
`git-lease acquire --any --remote`, through one `git daemon` on 127.0.0.1, against the floor
of N concurrent plain `git push`es of distinct refs to the same server, in the same run.

Run by benches/fleet.sh (which builds the release binary); see BENCHMARKS.md.

Every round measures, in a rotated order: the floor (N plain pushes, each of one new commit:
blob, tree and commit, as a claim pushes), the fleet with M = N and the fleet with M = 2N. All
N processes of a measurement are started at once and the wall time is from the first start
to the last exit. Pushes are counted on the server: the daemon's `Request receive-pack` log
lines (every push connection, including one the client gives up after reading the ref
advertisement) and the lines a pre-receive hook appends (pushes that proposed an update).

--fresh: every fleet runs in N new empty clones (`git init`, `git remote add`, a holder, no
other setting), made before the measured time, as a fleet of fresh sandboxes starts. They
share one user, who judged the server before (doctor's verdict is kept per user);
--own-users gives each its own state folder, so that each probes the server first.
--ledgers L: the server first holds L ledgers, 1% live, tips in random time order
(scalegen.py --random-times), the closed ones folded (`git lease archive --quiet-for 1d`) and
packed (`git lease gc`). --hook: the server runs `git lease install-hook`'s hook (its
pre-receive, called by the counting one). --kinds: which of N, 2N, ordered, ordered2N run beside the floor.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from netutil import free_port


# A TCP listener on 127.0.0.1:PORT with a backlog of 512 that serves each connection with the
# command in argv[2:] (git daemon --inetd), on a thread, the socket as its stdin and stdout.
LISTENER = r"""
import socket, subprocess, sys, threading
port, cmd = int(sys.argv[1]), sys.argv[2:]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(512)
def serve(conn):
    with conn:
        subprocess.run(cmd, stdin=conn.fileno(), stdout=conn.fileno())
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def sh(*args, cwd=None, env=None, stdin=None):
    return subprocess.run(
        args, cwd=cwd, env=env, input=stdin, check=True, capture_output=True, text=True
    ).stdout.strip()


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def quartiles(xs):
    if len(xs) < 2:
        return (xs[0], xs[0]) if xs else (float("nan"),) * 2
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


class Bench:
    def __init__(self, args):
        self.gl = args.bin
        self.ns = [int(n) for n in args.ns.split()]
        self.rounds = args.rounds
        self.w = tempfile.mkdtemp(prefix="git-lease-fleet.", dir=args.tmp)
        self.keep = args.keep
        self.listener = args.listener
        self.fresh = args.fresh
        self.ledgers = args.ledgers
        self.hook = args.hook
        self.own_users = args.own_users
        self.kinds = args.kinds.split(",")
        self.fresh_count = 0
        self.env = dict(os.environ)
        home = os.path.join(self.w, "home")
        os.makedirs(home)
        self.env.update(
            HOME=home,
            XDG_STATE_HOME=os.path.join(home, ".local", "state"),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL="/dev/null",
            GIT_LEASE_NOW="1800000000",
            GIT_AUTHOR_NAME="bench",
            GIT_AUTHOR_EMAIL="bench@localhost",
            GIT_COMMITTER_NAME="bench",
            GIT_COMMITTER_EMAIL="bench@localhost",
            LC_ALL="C",
        )
        if self.hook:
            # The hook judges an event's time by the server's clock: the claims' clock is the
            # real one then.
            self.env["GIT_LEASE_NOW"] = str(int(time.time()))
        self.daemon = None

    def git(self, *args, cwd=None, stdin=None):
        return sh("git", *args, cwd=cwd, env=self.env, stdin=stdin)

    def setup(self):
        base = os.path.join(self.w, "base")
        self.bare = os.path.join(base, "leases.git")
        self.git("init", "-q", "--bare", self.bare)
        if self.ledgers:
            self.seed()
        self.pushlog = os.path.join(self.w, "pre-receive.log")
        hook = os.path.join(self.bare, "hooks", "pre-receive")
        lease_hook = ""
        if self.hook:
            sh(self.gl, "-C", self.bare, "install-hook", env=self.env)
            os.rename(hook, hook + ".lease")
            lease_hook = 'exec "$(dirname "$0")/pre-receive.lease" "$@"\n'
        with open(hook, "w") as f:
            f.write("#!/bin/sh\necho push >> %s\n%s" % (self.pushlog, lease_hook))
        os.chmod(hook, 0o755)
        open(self.pushlog, "w").close()
        port = free_port()
        self.daemon_log = os.path.join(self.w, "daemon.log")
        served = ["--verbose", "--base-path=" + base, "--export-all", "--enable=receive-pack"]
        if self.listener == "daemon":
            # git daemon's own listener: listen(2) with a backlog of 5.
            cmd = ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", "--port=%d" % port]
            cmd += served + [base]
        else:
            # The same git daemon, one per connection (--inetd), behind a listener with a
            # backlog of 512.
            cmd = [sys.executable, "-c", LISTENER, str(port), "git", "daemon", "--inetd",
                   "--log-destination=stderr"] + served + [base]
        self.daemon = subprocess.Popen(
            cmd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.daemon_log, "w"),
            start_new_session=True,
        )
        self.url = "git://127.0.0.1:%d/leases.git" % port
        for _ in range(100):
            if subprocess.run(["git", "ls-remote", self.url], env=self.env,
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            raise SystemExit("fleet.py: git daemon did not start")
        top = max(self.ns)
        self.agents = []
        self.pushers = []
        for i in range(1, top + 1):
            agent = os.path.join(self.w, "agent%d" % i)
            self.git("init", "-q", agent)
            self.git("remote", "add", "origin", self.url, cwd=agent)
            self.git("config", "lease.holder", "agent-%d@fleet" % i, cwd=agent)
            # The first write through a URL no doctor has judged probes the server once per
            # clone: done here, so that the rounds count only the claims' own pushes.
            sh(self.gl, "-C", agent, "acquire", "--remote", "origin", "--ttl", "1h",
               "warm-up-%d" % i, env=self.env)
            self.agents.append(agent)
            pusher = os.path.join(self.w, "pusher%d" % i)
            self.git("init", "-q", pusher)
            self.pushers.append(pusher)

    def seed(self):
        """L ledgers, 1% live, random tip times; the closed ones folded, then packed."""
        here = os.path.dirname(os.path.abspath(__file__))
        live = max(10, self.ledgers // 100)
        t0 = time.time()
        sh(sys.executable, os.path.join(here, "scalegen.py"), self.bare, str(self.ledgers),
           str(live), self.env["GIT_LEASE_NOW"], "--random-times", env=self.env)
        sh(self.gl, "-C", self.bare, "archive", "--quiet-for", "1d", env=self.env)
        sh(self.gl, "-C", self.bare, "gc", env=self.env)
        print("server: %d ledgers, %d live, archived and packed in %.0f s"
              % (self.ledgers, live, time.time() - t0), file=sys.stderr)

    def fresh_agents(self, n):
        """N new empty clones with nothing but a remote and a holder, made before a fleet."""
        self.fresh_count += 1
        agents = []
        for i in range(1, n + 1):
            agent = os.path.join(self.w, "fresh%d-%d" % (self.fresh_count, i))
            self.git("init", "-q", agent)
            self.git("remote", "add", "origin", self.url, cwd=agent)
            self.git("config", "lease.holder", "agent-%d@fleet" % i, cwd=agent)
            agents.append(agent)
        return agents

    def agent_env(self, i):
        """The environment of fresh agent I: with --own-users, a state folder of its own, so
        that no verdict of the server is known to it (a user of its own, as in a sandbox)."""
        if not (self.fresh and self.own_users):
            return self.env
        state = os.path.join(self.w, "state%d-%d" % (self.fresh_count, i))
        os.makedirs(state, exist_ok=True)
        return dict(self.env, XDG_STATE_HOME=state)

    def counts(self):
        with open(self.daemon_log) as f:
            text = f.read()
        with open(self.pushlog) as f:
            hooked = sum(1 for _ in f)
        return {
            "receive": text.count("Request receive-pack"),
            "upload": text.count("Request upload-pack"),
            "hooked": hooked,
        }

    def launch(self, cmds, envs=None):
        """Starts every command at once; returns (wall seconds, [(code, stdout, stderr)])."""
        envs = envs or [self.env] * len(cmds)
        before = self.counts()
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(c, env=e, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for c, e in zip(cmds, envs)
        ]
        outs = [p.communicate() for p in procs]
        wall = time.perf_counter() - t0
        after = self.counts()
        delta = {k: after[k] - before[k] for k in after}
        return wall, [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)], delta

    def floor(self, n, tag):
        cmds = []
        for i in range(n):
            pusher = self.pushers[i]
            blob = self.git("hash-object", "-w", "--stdin", cwd=pusher,
                            stdin='{"floor": "%s", "pusher": %d}\n' % (tag, i))
            tree = self.git("mktree", cwd=pusher, stdin="100644 blob %s\tlease.json\n" % blob)
            commit = self.git("commit-tree", tree, "-m", "floor %s %d" % (tag, i), cwd=pusher)
            cmds.append(["git", "-C", pusher, "push", "-q", self.url,
                         "%s:refs/pushed/%s/%d" % (commit, tag, i)])
        wall, runs, delta = self.launch(cmds)
        bad = [r for r in runs if r[0] != 0]
        if bad:
            raise SystemExit("fleet.py: a plain push failed: %r" % (bad[:2],))
        return {"wall": wall, **delta, "claims": n}

    def fleet(self, n, m, tag, ordered=False):
        candidates = ["%s-%d" % (tag, j) for j in range(1, m + 1)]
        flags = ["--ordered"] if ordered else []
        agents = self.fresh_agents(n) if self.fresh else self.agents
        cmds = [
            [self.gl, "-C", agents[i], "--json", "acquire", "--any"] + flags
            + ["--remote", "origin", "--ttl", "1h"] + candidates
            for i in range(n)
        ]
        wall, runs, delta = self.launch(cmds, [self.agent_env(i) for i in range(n)])
        if self.fresh:
            for agent in agents:
                shutil.rmtree(agent, ignore_errors=True)
        answers = []
        for code, out, err in runs:
            if code != 0:
                raise SystemExit("fleet.py: a claim failed (exit %d): %s %s" % (code, out, err))
            answers.append(json.loads(out))
        issues = [v["issue"] for v in answers]
        attempts = sum(v["attempts"] for v in answers)
        if len(set(issues)) != n:
            raise SystemExit("fleet.py: an issue was claimed twice: %r" % issues)
        res = {"wall": wall, **delta, "claims": n, "attempts": attempts}
        if ordered:
            # The guarantee: once every claimer has stopped, the claimed candidates are the
            # first N of the queue (the candidates are fresh, so nothing else took them). An
            # inversion: a candidate left free ahead of a claimed one.
            last = max(candidates.index(i) for i in issues)
            inversions = sum(1 for c in candidates[:last] if c not in set(issues))
            moved = sum(len(v["moved_from"]) for v in answers)
            res.update(inversions=inversions, moved=moved)
        return res

    def run(self):
        results = {}
        for n in self.ns:
            kinds = [("floor", n, None), ("fleet M=N", n, n), ("fleet M=2N", n, 2 * n),
                     ("ordered M=N", n, n), ("ordered M=2N", n, 2 * n)]
            wanted = {"fleet M=N": "N", "fleet M=2N": "2N", "ordered M=N": "ordered",
                      "ordered M=2N": "ordered2N"}
            kinds = [k for k in kinds if k[0] == "floor" or wanted[k[0]] in self.kinds]
            for r in range(self.rounds):
                order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
                for name, n_, m in order:
                    tag = "n%d-r%d-%s" % (n, r, "floor" if m is None else
                                          ("o%d" % m if name.startswith("ordered") else "m%d" % m))
                    if m is None:
                        res = self.floor(n_, tag)
                    else:
                        res = self.fleet(n_, m, tag, ordered=name.startswith("ordered"))
                    res["round"] = r
                    results.setdefault((n, name), []).append(res)
                    print("N=%-2d %-10s round %d: %.0f ms, %d receive-pack, %d hooked, %d upload-pack"
                          % (n, name, r, res["wall"] * 1000, res["receive"], res["hooked"],
                             res["upload"]), file=sys.stderr)
        return results

    def stop(self):
        if self.daemon:
            try:
                os.killpg(self.daemon.pid, 15)
            except ProcessLookupError:
                pass
            self.daemon.wait()
        if not self.keep:
            shutil.rmtree(self.w, ignore_errors=True)
        else:
            print("kept " + self.w, file=sys.stderr)


def report(results, ns, rounds, out):
    lines = []
    lines.append("| N | M | floor: N plain pushes | fleet: N `acquire --any --remote` | ratio (same-round) | pushes per claim (receive-pack) | pushes per claim (reached the hook) | upload-pack per claim (fetch, and ls-remote per lost push) | client attempts per claim |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for n in ns:
        floor = results[(n, "floor")]
        fw = [x["wall"] * 1000 for x in floor]
        for name, m in (("fleet M=N", n), ("fleet M=2N", 2 * n), ("ordered M=N", n),
                        ("ordered M=2N", 2 * n)):
            if (n, name) not in results:
                continue
            fl = results[(n, name)]
            w = [x["wall"] * 1000 for x in fl]
            ratios = [a["wall"] / b["wall"] for a, b in zip(fl, floor)]
            claims = sum(x["claims"] for x in fl)
            per = lambda k: sum(x[k] for x in fl) / claims
            fq, wq, rq = quartiles(fw), quartiles(w), quartiles(ratios)
            label = "%d, ordered" % m if name.startswith("ordered") else "%d" % m
            lines.append(
                "| %d | %s | %.0f ms (%.0f–%.0f) | %.0f ms (%.0f–%.0f) | **%.2fx** (%.2f–%.2f) | **%.2f** | %.2f | %.2f | %.2f |"
                % (n, label, median(fw), fq[0], fq[1], median(w), wq[0], wq[1],
                   median(ratios), rq[0], rq[1], per("receive"), per("hooked"),
                   per("upload"), per("attempts"))
            )
            key = "%d/%d%s" % (n, m, " ordered" if name.startswith("ordered") else "")
            summary[key] = {
                "floor_ms": median(fw), "fleet_ms": median(w), "ratio": median(ratios),
                "pushes_per_claim": per("receive"), "hooked_per_claim": per("hooked"),
                "fetches_per_claim": per("upload"), "attempts_per_claim": per("attempts"),
            }
            if name.startswith("ordered"):
                summary[key].update(
                    inversions=sum(x["inversions"] for x in fl),
                    moves_per_claim=per("moved"),
                )
                lines.append("|  | (ordered: %d inversions left in %d rounds; %.2f moves up per claim) |  |  |  |  |  |  |  |"
                             % (sum(x["inversions"] for x in fl), len(fl), per("moved")))
        fp = sum(x["receive"] for x in floor) / sum(x["claims"] for x in floor)
        lines.append("|  |  | (floor: %.2f pushes per push) |  |  |  |  |  |  |" % fp)
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
        f.write("\n```json\n" + json.dumps(summary, indent=1) + "\n```\n")
    print(text)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(here, "..", "target", "release", "git-lease"))
    p.add_argument("--ns", default="8 16 32")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--tmp", default=os.environ.get("GIT_LEASE_BENCH_TMP", "/var/tmp"))
    p.add_argument("--out", default=os.path.join(here, "target", "bench-results", "fleet.md"))
    p.add_argument("--keep", action="store_true")
    p.add_argument("--fresh", action="store_true",
                   help="every fleet in new empty clones, made before the measured time")
    p.add_argument("--own-users", action="store_true",
                   help="with --fresh, each agent a user of its own (its own XDG_STATE_HOME): "
                   "no verdict of the server known, so each first write probes it")
    p.add_argument("--ledgers", type=int, default=0,
                   help="ledgers on the server first (1%% live, random tip times, archived, packed)")
    p.add_argument("--hook", action="store_true",
                   help="the server runs git lease install-hook's hook")
    p.add_argument("--kinds", default="N,2N,ordered,ordered2N",
                   help="fleets run beside the floor: any of N, 2N, ordered, ordered2N "
                   "(comma-separated)")
    p.add_argument("--listener", choices=["backlog", "daemon"], default="backlog",
                   help="backlog: git daemon --inetd per connection behind a listener with a "
                   "backlog of 512 (default); daemon: git daemon's own listener (backlog 5)")
    args = p.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    bench = Bench(args)
    try:
        bench.setup()
        results = bench.run()
    finally:
        bench.stop()
    report(results, bench.ns, bench.rounds, args.out)


if __name__ == "__main__":
    main()
