#!/usr/bin/env python3
"""`git lease watch` by number of ledgers: start-up time and peak memory, and the latency from
a claim to its event line.

    benches/watch.py [--sizes 1000,100000] [--live 1000] [--starts 3] [--samples 10]
                     [--bin NAME=PATH ...] [--ref-format files|reftable] [--tmp /var/tmp]
                     [--out FILE]

For each size N: a bare repository of N ledgers, LIVE of them live, written by
benches/scalegen.py (git fast-import, the real format; every ref in `packed-refs`), with
`gc.auto=0` so that no claim starts a `git gc` under the watch; with `--ref-format reftable`,
migrated to reftable (`git refs migrate`, git 2.46 or newer) before anything is measured. `git lease list` runs once
first with the last binary, so the list cache is there for a binary that reads it. Then, for
each binary in turn (`--bin NAME=PATH`, repeatable: a baseline copy and a new build), the
order rotated each round:

  start     `git-lease watch` whose standard output is a pipe already closed: it reads every
            ledger, finds its output gone and ends (exit 0). Wall time and peak RSS (wait4).
            One more start of the last binary with the list cache removed (`cold`).
  latency   `git-lease watch --json --since T` running (T: the instant of a claim made just
            before, whose replayed line says the watch has read the ledgers), then SAMPLES
            times `git-lease acquire <new issue>` (by the last binary, for every watch alike)
            and the time from that process's start, and from its exit, to the watch's line of
            the claim, read by a thread that stamps each line as it arrives (the line can come
            before the claim's process has finished exiting: a negative time).

The report (markdown) gives medians and the range. Scratch space under --tmp (on the disk);
SCALE_KEEP=1 keeps it.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def fmt(seconds):
    ms = seconds * 1000.0
    if abs(ms) < 10:
        return f"{ms:.2f} ms"
    if abs(ms) < 1000:
        return f"{ms:.1f} ms"
    return f"{seconds:.2f} s"


def start_once(path, repo, env):
    """Runs `watch` with its stdout a closed pipe; returns (seconds, peak RSS in MB)."""
    r, w = os.pipe()
    os.close(r)
    t0 = time.monotonic()
    p = subprocess.Popen([path, "-C", repo, "watch"], stdout=w, stderr=subprocess.PIPE, env=env)
    os.close(w)
    _, status, usage = os.wait4(p.pid, 0)
    took = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"{path} watch ended with {p.returncode}: {err}")
    return took, usage.ru_maxrss / 1024.0


class Lines:
    """A watch's stdout, each line stamped (monotonic) as it arrives."""

    def __init__(self, proc):
        self.cv = threading.Condition()
        self.lines = []
        self.proc = proc
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            with self.cv:
                self.lines.append((t, json.loads(line)))
                self.cv.notify_all()
        with self.cv:
            self.lines.append((time.monotonic(), None))
            self.cv.notify_all()

    def wait(self, issue, timeout=900):
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for t, v in self.lines:
                    if v is None:
                        sys.exit(f"the watch ended before {issue}")
                    if v.get("issue") == issue:
                        return t
                left = deadline - time.monotonic()
                if left <= 0:
                    sys.exit(f"no event of {issue} within {timeout} s")
                self.cv.wait(left)


def latency(name, path, claimer, repo, env, samples, now):
    marker = f"mark-{name}-{time.monotonic_ns()}"
    sh(claimer, "-C", repo, "acquire", marker, "--holder", "bench@example.com", "--ttl", "1h",
       env=env, stdout=subprocess.DEVNULL)
    p = subprocess.Popen([path, "-C", repo, "--json", "watch", "--since", str(now)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    lines = Lines(p)
    t0 = time.monotonic()
    lines.wait(marker)
    ready = time.monotonic() - t0
    out = []
    try:
        for k in range(samples):
            issue = f"lat-{name}-{time.monotonic_ns()}-{k}"
            began = time.monotonic()
            sh(claimer, "-C", repo, "acquire", issue, "--holder", "bench@example.com", "--ttl", "1h",
               env=env, stdout=subprocess.DEVNULL)
            done = time.monotonic()
            line = lines.wait(issue)
            out.append((line - began, line - done, done - began))
    finally:
        p.terminate()
        p.wait()
    return out, ready


def summary(values, unit=fmt):
    return f"{unit(statistics.median(values))} ({unit(min(values))}–{unit(max(values))})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1000,100000")
    p.add_argument("--live", type=int, default=1000)
    p.add_argument("--starts", type=int, default=3)
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--bin", action="append", default=[])
    p.add_argument("--ref-format", default="files", choices=["files", "reftable"])
    p.add_argument("--tmp", default="/var/tmp")
    p.add_argument("--out", default=os.path.join(HERE, "target", "bench-results", "watch.md"))
    a = p.parse_args()
    bins = [b.split("=", 1) for b in a.bin] or [["git-lease", os.path.join(ROOT, "target/release/git-lease")]]
    claimer = bins[-1][1]
    sizes = [int(s) for s in a.sizes.split(",")]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    w = tempfile.mkdtemp(prefix="git-lease-watch.", dir=a.tmp)
    now = int(time.time())
    env = dict(os.environ, GIT_LEASE_NOW=str(now))
    report = [f"# watch by ledgers ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
              f"{a.starts} starts and {a.samples} claims per binary and size; {a.live} live ledgers at each size;"
              f" ref format {a.ref_format};"
              f" binaries: {', '.join(f'{n} = {p}' for n, p in bins)}; load average at start:"
              f" {os.getloadavg()[0]:.2f}", ""]
    rows = []
    try:
        for n in sizes:
            repo = os.path.join(w, str(n), "leases.git")
            os.makedirs(os.path.dirname(repo))
            t0 = time.time()
            sh(sys.executable, os.path.join(HERE, "scalegen.py"), repo, str(n), str(min(a.live, n)), str(now),
               stdout=subprocess.DEVNULL)
            gen = time.time() - t0
            sh("git", "-C", repo, "config", "gc.auto", "0")
            if a.ref_format == "reftable":
                sh("git", "-C", repo, "refs", "migrate", "--ref-format=reftable")
            t0 = time.time()
            sh(claimer, "-C", repo, "list", env=env, stdout=subprocess.DEVNULL)
            report.append(f"- {n} ledgers: generated in {gen:.1f} s; first `list` (writes the list cache)"
                          f" {time.time() - t0:.1f} s")
            starts = {name: [] for name, _ in bins}
            for r in range(a.starts):
                k = r % len(bins)
                for name, path in bins[k:] + bins[:k]:
                    starts[name].append(start_once(path, repo, env))
            cache = os.path.join(repo, "git-lease", "list-cache")
            saved = cache + ".saved"
            shutil.copyfile(cache, saved)
            os.remove(cache)
            cold = start_once(claimer, repo, env)
            os.replace(saved, cache)
            for name, path in bins:
                lat, ready = latency(name, path, claimer, repo, env, a.samples, now)
                t = [s[0] for s in starts[name]]
                m = [s[1] for s in starts[name]]
                rows.append(f"| {n} | {name} | {summary(t)} | {summary(m, lambda x: f'{x:.0f} MB')} |"
                            f" {summary([x[0] for x in lat])} | {summary([x[1] for x in lat])} |"
                            f" {fmt(statistics.median([x[2] for x in lat]))} | {fmt(ready)} |")
            rows.append(f"| {n} | {bins[-1][0]}, cold (no list cache) | {fmt(cold[0])} | {cold[1]:.0f} MB | | | | |")
            if not os.environ.get("SCALE_KEEP"):
                shutil.rmtree(os.path.dirname(repo), ignore_errors=True)
    except BaseException:
        print("\n".join(report + rows), file=sys.stderr)
        raise
    report.append("")
    report.append("| ledgers | binary | start-up (range) | peak RSS (range) | claim's start → event line (range) |"
                  " claim's exit → event line (range) | the claim itself | `--since` replay ready |")
    report.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    report.extend(rows)
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
