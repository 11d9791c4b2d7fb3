#!/usr/bin/env python3
"""How long a server takes to accept one lease push, with and without the git-lease hook.

Usage: benches/hook-latency.py [RUNS]   (after `cargo build --release`)

Two bare repositories, one with `git lease install-hook`, one without, are pushed to
alternately (A, B, A, B, ...) by `git-lease acquire --remote file://...` on a fresh issue
each time, so both sides pay the same client cost and the difference is the server's: the
hook process, its reads of the pushed objects and its checks. A plain `git push` of one ref
to each repository is measured the same way for reference, and the hook alone is timed by
running `git-lease hook update` directly on an already-received ref update.
Prints medians and the paired ratio; figures go to BENCHMARKS.md.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "git-lease")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 40


def sh(*args, cwd=None, env=None, check=True):
    return subprocess.run(args, cwd=cwd, env=env, check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def timed(args, cwd, env):
    start = time.perf_counter()
    out = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed: {out.stderr}")
    return elapsed * 1000.0


def main():
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    tmp = tempfile.mkdtemp(prefix="git-lease-hook-bench.", dir="/var/tmp")
    env = dict(os.environ, HOME=tmp, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    try:
        plain = os.path.join(tmp, "plain.git")
        hooked = os.path.join(tmp, "hooked.git")
        for repo in (plain, hooked):
            sh("git", "init", "-q", "--bare", repo, env=env)
        sh(BIN, "install-hook", "--repo", hooked, env=env)
        client = os.path.join(tmp, "client")
        sh("git", "init", "-q", client, env=env)
        sh("git", "-C", client, "commit", "-q", "--allow-empty", "-m", "x", env=dict(
            env, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
            GIT_COMMITTER_EMAIL="b@x"))
        results = {"lease-plain": [], "lease-hooked": [], "push-plain": [], "push-hooked": []}
        for i in range(RUNS + 3):
            for name, repo in (("plain", plain), ("hooked", hooked)):
                url = "file://" + repo
                ms = timed([BIN, "--remote", url, "acquire", f"b{i}", "--holder", "bench"],
                           client, env)
                push = timed(["git", "push", "-q", url, f"HEAD:refs/heads/b{i}"], client, env)
                if i >= 3:  # warm-up
                    results["lease-" + name].append(ms)
                    results["push-" + name].append(push)
        # The hook alone, on a real update it has already accepted once.
        tip = sh("git", "-C", hooked, "rev-parse", "refs/leases/b0", env=env).stdout.strip()
        zero = "0" * len(tip)
        hook_alone = [timed([BIN, "hook", "update", "refs/leases/b0", zero, tip],
                            hooked, dict(env, GIT_DIR=hooked)) for _ in range(RUNS)]
        med = {k: statistics.median(v) for k, v in results.items()}
        print(f"runs: {RUNS} each, alternating; medians in ms")
        print(f"acquire --remote file://, no hook:   {med['lease-plain']:.1f}")
        print(f"acquire --remote file://, with hook: {med['lease-hooked']:.1f}")
        ratios = [b / a for a, b in zip(results["lease-plain"], results["lease-hooked"])]
        print(f"paired ratio with/without hook:      {statistics.median(ratios):.2f}x")
        print(f"plain git push file://, no hook:     {med['push-plain']:.1f}")
        print(f"plain git push file://, with hook:   {med['push-hooked']:.1f}"
              "  (a branch: the hook only reads its refs/leases config)")
        print(f"git-lease hook update alone:         {statistics.median(hook_alone):.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
