#!/usr/bin/env python3
"""`list` of SSH-signed ledgers with signatures required and not, warm and cold.

    python3 benches/signed.py [--sizes 1000,100000] [--rounds 15] [--bin PATH]

For each size, a repository of signed ledgers from benches/signedgen.py (80% live), then
rounds of four variants in rotated order: `list` without `lease.requireSignatures`, and with
it, each warm (the list cache as the same variant left it: the variant is run once, untimed,
just before) and cold (the cache file removed first). Medians per variant, and the median of
same-round ratios of the signed variant to the unsigned one. Results in
benches/target/bench-results/signed.md.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1000,100000")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--bin", default=os.path.join(HERE, "..", "target", "release", "git-lease"))
    p.add_argument("--tmp", default="/var/tmp")
    args = p.parse_args()
    now = int(time.time())
    out = [
        "| ledgers (80% live) | warm | warm, signatures required | ratio | cold | cold, signatures required | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n in [int(s) for s in args.sizes.split(",")]:
        scratch = tempfile.mkdtemp(prefix=f"signed-{n}-", dir=args.tmp)
        repo = os.path.join(scratch, "repo")
        subprocess.run([sys.executable, os.path.join(HERE, "signedgen.py"), repo, str(n), str(n * 4 // 5),
                        str(now)], check=True)
        env = dict(os.environ, GIT_LEASE_NOW=str(now))
        signed = dict(env, GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="lease.requireSignatures",
                      GIT_CONFIG_VALUE_0="true")
        check = subprocess.run([args.bin, "verify"], cwd=repo, env=signed, capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(f"verify with signatures required fails on the generated ledgers:\n{check.stdout[-2000:]}")
        cache = os.path.join(repo, ".git", "git-lease", "list-cache")
        variants = {
            "warm": (env, False),
            "warm-signed": (signed, False),
            "cold": (env, True),
            "cold-signed": (signed, True),
        }
        names = list(variants)
        times = {k: [] for k in names}
        for r in range(args.rounds):
            order = names[r % 4:] + names[:r % 4]
            for name in order:
                e, cold = variants[name]
                if cold:
                    if os.path.exists(cache):
                        os.remove(cache)
                else:
                    subprocess.run([args.bin, "list"], cwd=repo, env=e, stdout=subprocess.DEVNULL, check=True)
                t = time.perf_counter()
                subprocess.run([args.bin, "list"], cwd=repo, env=e, stdout=subprocess.DEVNULL, check=True)
                times[name].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))  # noqa: E731
        row = (f"| {n} ({args.rounds} rounds) | {med['warm']:.1f} ms | {med['warm-signed']:.1f} ms | "
               f"{ratio('warm-signed', 'warm'):.2f}x | {med['cold']:.1f} ms | {med['cold-signed']:.1f} ms | "
               f"{ratio('cold-signed', 'cold'):.2f}x |")
        print(row, flush=True)
        out.append(row)
        subprocess.run(["rm", "-rf", scratch], check=True)
    dest = os.path.join(HERE, "target", "bench-results")
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "signed.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
