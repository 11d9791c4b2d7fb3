#!/usr/bin/env python3
"""Remote operations by number of ledgers on the server, against a plain push at the same size.

    benches/scale.py [--sizes 1000,100000] [--live 1000] [--rounds 3] [--runs 5]
                     [--bin NAME=PATH ...] [--ops acquire,any,renew,list,sync,revive,fleet,fresh-fleet]
                     [--ops-for N=op,op ...] [--archive] [--filter] [--hook] [--random-times]
                     [--agents 16] [--tmp /var/tmp] [--out FILE]

For each size N: a bare server repository of N ledgers, LIVE of them live, written by
benches/scalegen.py (git fast-import, the real format; `git lease verify` must pass on it
before anything is measured), served by `git daemon` on 127.0.0.1 on a free port. Then, with
hyperfine, each operation side by side with one plain `git push` of one new ref to the same
server (one lease commit: blob, tree and commit, as an acquire sends):

  acquire   `git-lease acquire s-new<k> --remote URL`: a new issue (one push, no fetch)
  any       `git-lease acquire --any <16 new issues> --remote URL`: one claimer, no race (a
            fetch of the candidates' ledgers, then a push)
  renew     `git-lease renew <a live lease> --remote URL` by its holder (a fetch of one
            ledger, then a push)
  list      `git-lease list --remote URL` (a fetch of every ledger; the client synced once
            before, so only what moved comes)
  sync      `git lease sync URL` after one ledger changed on the server (the change is made
            by hyperfine's --prepare, outside the measured time)
  revive    `git-lease acquire s<k> --remote URL` of a closed ledger (with --archive, one the
            server folded into its archive: the claim revives it with the next token)
  fleet     --agents (16) agents, each in its own clone that has claimed once before (that
            first claim, which fetches the archive, is timed and reported apart), start
            `acquire --any` of the same 16 new issues at once; against as many concurrent
            plain pushes of distinct refs
  fresh-fleet  the same, each agent in a new empty clone every run (made outside the measured
            time), with `lease.trustArchive` set: a fleet of fresh sandboxes

--archive folds the closed ledgers on the server (`git lease archive --quiet-for 1d`, timed)
before anything is measured, so the server advertises its live ledgers and one archive ref.
--hook installs the server hook (`git lease install-hook`) after the fold, as a served
repository has it; --random-times writes the ledgers' tips in random time order, as real
ledgers' are (scalegen.py --random-times).
--filter sets `uploadpack.allowFilter` on the servers: trusting clones (fresh-fleet) then fetch
the archive's root tree and the trees on their claims' paths, not the whole fold tree.

Every command of a pair runs in the same hyperfine invocation, and the rounds rotate their
order, so a loaded machine slows both alike. `--bin NAME=PATH` (repeatable) measures several
git-lease binaries side by side (a baseline copy and a new build); each gets its own clients.
The report (markdown) gives medians over all runs and the median of same-round ratios to the
plain push. Network traffic: only to 127.0.0.1. Scratch space under --tmp (on the disk).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fmt(seconds):
    ms = seconds * 1000.0
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.1f} ms"
    return f"{seconds:.2f} s"


def counter(path):
    """A shell prefix that sets $n to the next value of the counter file `path`."""
    with open(path, "w") as f:
        f.write("0\n")
    return f"read n < {path}; echo $((n+1)) > {path}; "


def hyperfine(commands, runs, warmup, export, prepare=None):
    args = ["hyperfine", "--shell=bash", "--style", "none",
            "--runs", str(runs), "--warmup", str(warmup), "--export-json", export]
    for name, cmd in commands:
        if prepare:
            args += ["--prepare", prepare]
        args += ["-n", name, cmd]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(export) as f:
        return {r["command"]: r["times"] for r in json.load(f)["results"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1000,100000")
    p.add_argument("--live", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--bin", action="append", default=[])
    p.add_argument("--ops", default="acquire,any,renew,list,sync")
    p.add_argument("--ops-for", action="append", default=[],
                   help="N=op,op: the operations measured at size N instead of --ops (repeatable)")
    p.add_argument("--archive", action="store_true",
                   help="fold the closed ledgers into the server's archive before measuring")
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--filter", action="store_true",
                   help="let the servers filter (uploadpack.allowFilter): a trusting clone fetches"
                        " the archive trees on its claims' paths alone")
    p.add_argument("--hook", action="store_true",
                   help="install the server hook (git lease install-hook) after the fold")
    p.add_argument("--random-times", action="store_true",
                   help="ledgers' tips in random time order (scalegen.py --random-times)")
    p.add_argument("--tmp", default="/var/tmp")
    p.add_argument("--out", default=os.path.join(HERE, "target", "bench-results", "scale.md"))
    a = p.parse_args()
    bins = [b.split("=", 1) for b in a.bin] or [["git-lease", os.path.join(ROOT, "target/release/git-lease")]]
    sizes = [int(s) for s in a.sizes.split(",")]
    all_ops = a.ops.split(",")
    ops_for = {int(k): v.split(",") for k, v in (x.split("=", 1) for x in a.ops_for)}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    w = tempfile.mkdtemp(prefix="git-lease-scale.", dir=a.tmp)
    now = int(time.time())
    env = dict(os.environ, GIT_LEASE_NOW=str(now))
    os.environ.update(GIT_LEASE_NOW=str(now))
    report = [f"# Scale: remote operations by ledgers on the server ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
              f"{a.rounds} rounds x {a.runs} runs per command, order rotated each round; {a.live} live ledgers at each size;"
              f" git daemon on 127.0.0.1{' (uploadpack.allowFilter)' if a.filter else ''}; binaries: {', '.join(f'{n} = {p}' for n, p in bins)}; load average at start:"
              f" {os.getloadavg()[0]:.2f}", ""]
    results = {}  # (size, op) -> {name: [times]}, ratios
    daemon = None
    try:
        for n in sizes:
            ops = ops_for.get(n, all_ops)
            d = os.path.join(w, str(n))
            base = os.path.join(d, "base")
            srv = os.path.join(base, "leases.git")
            os.makedirs(base)
            t0 = time.time()
            sh(sys.executable, os.path.join(HERE, "scalegen.py"), srv, str(n), str(min(a.live, n)), str(now),
               *(["--random-times"] if a.random_times else []), stdout=subprocess.DEVNULL)
            gen = time.time() - t0
            t0 = time.time()
            sh(bins[0][1], "-C", srv, "verify", env=env, stdout=subprocess.DEVNULL)
            ver = time.time() - t0
            size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(srv) for f in fs)
            report.append(f"- {n} ledgers: generated in {gen:.1f} s ({size / 1e6:.0f} MB, tips in"
                          f" {'random' if a.random_times else 'rising'} time order), `git lease verify` ok in {ver:.1f} s")
            if a.archive:
                # The closed ledgers were released long before NOW: a day's quiet folds them all.
                t0 = time.time()
                sh(bins[0][1], "-C", srv, "archive", "--quiet-for", "1d", env=env, stdout=subprocess.DEVNULL)
                fold = time.time() - t0
                left = int(subprocess.run(["git", "-C", srv, "for-each-ref", "--count=100000000", "--format=x",
                                           "refs/leases/"], capture_output=True, text=True, check=True)
                           .stdout.count("x"))
                t0 = time.time()
                sh(bins[0][1], "-C", srv, "verify", env=env, stdout=subprocess.DEVNULL)
                ver = time.time() - t0
                report.append(f"- {n} ledgers: `git lease archive --quiet-for 1d` folded {n - left} in {fold:.1f} s,"
                              f" {left} lease refs left; `git lease verify` (archive audited) ok in {ver:.1f} s")
            if a.hook:
                sh(bins[0][1], "-C", srv, "install-hook", env=env, stdout=subprocess.DEVNULL)
                report.append(f"- {n} ledgers: server hook installed (`git lease install-hook`)")
            if a.filter:
                sh("git", "-C", srv, "config", "uploadpack.allowFilter", "true")
            port = free_port()
            daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                                       f"--base-path={base}", "--export-all", "--enable=receive-pack", base],
                                      stderr=open(os.path.join(d, "daemon.log"), "w"))
            url = f"git://127.0.0.1:{port}/leases.git"
            for _ in range(100):
                if subprocess.run(["git", "ls-remote", url, "HEAD"], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            pusher = os.path.join(d, "pusher")
            sh("git", "init", "-q", pusher)
            # One new lease commit per plain push: written ahead with fast-import (parentless
            # commits of one lease.json each), so the push sends what an acquire sends.
            npush = (a.rounds * (a.runs + 1) * 2 + 4) * (len(ops) + 1) * (a.agents if "fleet" in ops or "fresh-fleet" in ops else 1)
            sh(sys.executable, os.path.join(HERE, "scalegen.py"), os.path.join(d, "pushsrc.git"), str(npush),
               str(npush), str(now), stdout=subprocess.DEVNULL)
            sh("git", "-C", pusher, "fetch", "-q", os.path.join(d, "pushsrc.git"), "refs/leases/*:refs/leases/*")
            plain = counter(os.path.join(d, "ctr.push")) + f"exec git -C {pusher} push -q {url} refs/leases/s$n:refs/pushed/s$n"
            # The fleet's floor: as many concurrent plain pushes as agents, each from its own
            # repository (a lease commit of its own, as each claim pushes).
            fleet_floor = None
            if "fleet" in ops or "fresh-fleet" in ops:
                pushers = []
                for k in range(a.agents):
                    pk = os.path.join(d, f"fpusher{k}")
                    sh("git", "init", "-q", pk)
                    sh("git", "-C", pk, "fetch", "-q", os.path.join(d, "pushsrc.git"),
                       "refs/leases/*:refs/leases/*")
                    pushers.append(pk)
                fleet_floor = counter(os.path.join(d, "ctr.fpush")) + " ".join(
                    f"git -C {pk} push -q {url} refs/leases/s$((n * {a.agents} + {k})):refs/fleet/{k}-$n &"
                    for k, pk in enumerate(pushers)
                ) + " wait"
            clients = {}
            agents = {}
            for name, path in bins:
                if "fleet" in ops:
                    agents[name] = []
                    firsts = []
                    for k in range(a.agents):
                        ak = os.path.join(d, f"agent-{name}-{k}")
                        sh("git", "init", "-q", ak)
                        sh("git", "-C", ak, "config", "lease.holder", f"agent{k}@example.com")
                        # Each agent has claimed once before (the steady state of a fleet):
                        # its clone's first claim fetches and verifies the archive, once.
                        t0 = time.time()
                        sh(path, "-C", ak, "acquire", f"warm-{name}-{k}", "--ttl", "1h", "--remote", url,
                           env=env, stdout=subprocess.DEVNULL)
                        firsts.append(time.time() - t0)
                        agents[name].append(ak)
                    report.append(f"- {n} ledgers: first claim of each agent's new clone by {name} (one at a"
                                  f" time, before the fleet): median {statistics.median(firsts):.2f} s")
                c = os.path.join(d, "client-" + name)
                sh("git", "init", "-q", c)
                sh("git", "-C", c, "config", "lease.holder", "h0@example.com")
                t0 = time.time()
                if "list" in ops or "sync" in ops:
                    sh(path, "-C", c, "sync", url, env=env, stdout=subprocess.DEVNULL)
                first = time.time() - t0
                clients[name] = c
                if "list" in ops or "sync" in ops:
                    report.append(f"- {n} ledgers: first `sync` of a new clone by {name}: {first:.1f} s")
            # A live lease of h0 (s<n-live+k> with k % 50 == 0 is h0's): renewed by each binary.
            live0 = n - min(a.live, n)
            first_h0 = live0 + ((50 - live0 % 50) % 50)
            for op in ops:
                if op == "revive" and live0 == 0:
                    report.append(f"- {n} ledgers: no closed ledger to revive (all {n} live)")
                    continue
                cmds = []
                prepare = None
                for bi, (name, path) in enumerate(bins):
                    c = clients[name]
                    if op == "acquire":
                        cmd = counter(os.path.join(d, f"ctr.acq.{name}")) + \
                            f"exec {path} -C {c} acquire new-{name}-$n --ttl 1h --remote {url}"
                    elif op == "any":
                        cands = " ".join(f"any-{name}-$n-{k}" for k in range(16))
                        cmd = counter(os.path.join(d, f"ctr.any.{name}")) + \
                            f"exec {path} -C {c} acquire --any {cands} --ttl 1h --remote {url}"
                    elif op == "revive":
                        # A closed ledger (archived with --archive): one per run, never the same.
                        cmd = counter(os.path.join(d, f"ctr.rev.{name}")) + \
                            f"exec {path} -C {c} acquire s$((n * {len(bins)} + {bi})) --ttl 1h --remote {url}"
                    elif op == "fleet":
                        cands = " ".join(f"fleet-{name}-$n-{k}" for k in range(a.agents))
                        cmd = counter(os.path.join(d, f"ctr.fleet.{name}")) + " ".join(
                            f"{path} -C {ak} acquire --any {cands} --ttl 1h --remote {url} >/dev/null &"
                            for ak in agents[name]) + " wait"
                    elif op == "fresh-fleet":
                        # As the fleet, but every agent in a new empty clone each run (an
                        # agent's own sandbox), trusting the archive on first sight
                        # (`lease.trustArchive`); the clones are made before each run.
                        fresh = [os.path.join(d, f"fresh-{name}-{k}") for k in range(a.agents)]
                        cands = " ".join(f"fresh-{name}-$n-{k}" for k in range(a.agents))
                        cmd = counter(os.path.join(d, f"ctr.fresh.{name}")) + " ".join(
                            f"{path} -C {ak} acquire --any {cands} --ttl 1h --remote {url} >/dev/null &"
                            for ak in fresh) + " wait"
                        prepare = " && ".join(
                            f"rm -rf {ak} && git init -q {ak} && git -C {ak} config lease.holder agent{k}@example.com"
                            f" && git -C {ak} config lease.trustArchive true"
                            for k, ak in enumerate(fresh))
                    elif op == "renew":
                        issue = f"s{first_h0 + 50 * bi}"
                        cmd = f"exec {path} -C {c} renew {issue} --ttl 1h --remote {url}"
                    elif op == "list":
                        cmd = f"exec {path} -C {c} list --remote {url}"
                    elif op == "sync":
                        cmd = f"exec {path} -C {c} sync {url}"
                        # One ledger moves on the server before each run: a renew there.
                        prepare = f"{bins[0][1]} -C {srv} renew s{first_h0 + 50 * len(bins)} --holder h0@example.com --ttl 1h >/dev/null"
                    cmds.append((f"git-lease {op} ({name})" if len(bins) > 1 else f"git-lease {op}", cmd))
                cmds.append(("git push (one ref)", fleet_floor if op in ("fleet", "fresh-fleet") else plain))
                rounds = []
                for r in range(a.rounds):
                    k = r % len(cmds)
                    order = cmds[k:] + cmds[:k]
                    rounds.append(hyperfine(order, a.runs, 1, os.path.join(d, f"{op}.{r}.json"), prepare))
                results[(n, op)] = rounds
            daemon.terminate()
            daemon.wait()
            daemon = None
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait()
    report.append("")
    report.append("| ledgers | operation | command | median | p25–p75 | ratio to the plain push (range over rounds) |")
    report.append("|---:|---|---|---:|---|---|")
    for (n, op), rounds in results.items():
        names = list(rounds[0].keys())
        names = [x for x in names if x != "git push (one ref)"] + ["git push (one ref)"]
        for name in names:
            times = [t for r in rounds for t in r[name]]
            q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
            if name == "git push (one ref)":
                ratio = ""
            else:
                rs = [statistics.median(r[name]) / statistics.median(r["git push (one ref)"]) for r in rounds]
                ratio = f"{statistics.median(rs):.2f}x ({min(rs):.2f}–{max(rs):.2f})"
            report.append(f"| {n} | {op} | {name} | {fmt(statistics.median(times))} | {fmt(q[0])}–{fmt(q[2])} | {ratio} |")
    text = "\n".join(report) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(text)
    if not os.environ.get("SCALE_KEEP"):
        shutil.rmtree(w, ignore_errors=True)
    else:
        print(f"kept {w}", file=sys.stderr)


if __name__ == "__main__":
    main()
