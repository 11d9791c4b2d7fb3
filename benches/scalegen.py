#!/usr/bin/env python3
"""Writes a server repository of N tenure ledgers with `git fast-import`, for benches/scale.py.

    scalegen.py REPO N LIVE NOW [--random-times]

With --random-times, the closed ledgers' times are a random permutation (seed 7) of the
seconds they would take in order, so that tip times do not follow the ledgers' names, as real
ledgers' do not (a walk from every ref in time order then meets them out of order).
REPO (a bare repository, created if missing) gets `refs/leases/s0` .. `refs/leases/s<N-1>`.
The first N - LIVE ledgers are closed: acquire (token 1) by one of 50 holders, then release, a
minute later, long before NOW. The last LIVE ledgers are live at NOW (unix seconds): acquired
ten minutes before NOW for 30 days. Every commit is what git-lease writes for that event
(docs/FORMAT.md: the tree holds only `lease.json`, pretty-printed with a final newline; the
author is the actor, the committer `git-lease <git-lease@localhost>`, both at the event's
time; the one-line message), written independently of the library, so `git lease verify`
checks this generator as much as the generator feeds the benchmark.

The refs are written straight into `packed-refs`, sorted, never as N loose files (see
benches/src/populate.rs for why that matters on this machine's disk).
"""
import os
import random
import subprocess
import sys
import time


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def lease_json(issue, event, holder, token, acquired, expires, at, previous=None):
    def s(v):
        return "null" if v is None else '"' + v + '"'

    lines = [
        '  "version": 1',
        f'  "issue": "{issue}"',
        f'  "event": "{event}"',
        f'  "holder": {s(holder)}',
        f'  "token": {token}',
        f'  "acquired_at": {s(None if acquired is None else rfc3339(acquired))}',
        f'  "expires_at": {s(None if expires is None else rfc3339(expires))}',
        f'  "at": "{rfc3339(at)}"',
    ]
    if previous is not None:
        lines.append(f'  "previous_holder": "{previous}"')
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode()


def ledgers(n, live, now, random_times=False):
    """The ledgers this generator writes, in order: `(issue, steps)`, each step
    `(lease.json bytes, actor, at, message)`, oldest first (the shape the module says)."""
    closed = n - live
    offsets = list(range(closed, 0, -1))
    if random_times:
        random.Random(7).shuffle(offsets)
    for k in range(n):
        issue = f"s{k}"
        holder = f"h{k % 50}@example.com"
        if k < closed:
            t0 = now - 86400 * 30 - offsets[k]  # every closed ledger a month old
            until = t0 + 3600
            yield issue, [
                (
                    lease_json(issue, "acquire", holder, 1, t0, until, t0),
                    holder,
                    t0,
                    f"acquire {issue}: {holder} token 1 until {rfc3339(until)}",
                ),
                (
                    lease_json(issue, "release", None, 1, None, None, t0 + 60, previous=holder),
                    holder,
                    t0 + 60,
                    f"release {issue}: {holder} token 1",
                ),
            ]
        else:
            t0 = now - 600
            until = t0 + 86400 * 30
            yield issue, [
                (
                    lease_json(issue, "acquire", holder, 1, t0, until, t0),
                    holder,
                    t0,
                    f"acquire {issue}: {holder} token 1 until {rfc3339(until)}",
                ),
            ]


def main():
    args = [a for a in sys.argv[1:] if a != "--random-times"]
    if len(args) != 4:
        sys.exit(__doc__)
    random_times = "--random-times" in sys.argv[1:]
    repo, n, live, now = args[0], int(args[1]), int(args[2]), int(args[3])
    if not 0 <= live <= n:
        sys.exit("LIVE must be between 0 and N")
    if not os.path.isdir(repo):
        subprocess.run(["git", "init", "-q", "--bare", repo], check=True)
    marks = os.path.join(os.path.abspath(repo), "scalegen.marks")
    fi = subprocess.Popen(
        ["git", "-C", repo, "fast-import", "--quiet", "--done", f"--export-marks={marks}"],
        stdin=subprocess.PIPE,
    )
    out = fi.stdin
    mark = 0
    tips = {}

    def commit(issue, data, actor, at, message, parent):
        nonlocal mark
        mark += 1
        blob = mark
        out.write(b"blob\nmark :%d\ndata %d\n" % (blob, len(data)) + data + b"\n")
        mark += 1
        out.write(b"commit refs/scalegen/tmp\nmark :%d\n" % mark)
        out.write(f"author {actor} <{actor}> {at} +0000\n".encode())
        out.write(f"committer git-lease <git-lease@localhost> {at} +0000\n".encode())
        msg = (message + "\n").encode()
        out.write(b"data %d\n" % len(msg) + msg)
        if parent is not None:
            out.write(b"from :%d\n" % parent)
        out.write(b"M 100644 :%d lease.json\n\n" % blob)
        return mark

    for issue, steps in ledgers(n, live, now, random_times):
        out.write(b"reset refs/scalegen/tmp\n\n")
        tip = None
        for data, actor, at, message in steps:
            tip = commit(issue, data, actor, at, message, tip)
        tips[issue] = tip
    out.write(b"done\n")
    out.close()
    if fi.wait() != 0:
        sys.exit("git fast-import failed")
    ids = {}
    with open(marks) as f:
        for line in f:
            m, oid = line.split()
            ids[int(m[1:])] = oid
    os.remove(marks)
    subprocess.run(["git", "-C", repo, "update-ref", "-d", "refs/scalegen/tmp"], check=True)
    refs = sorted((f"refs/leases/{i}".encode(), ids[m].encode()) for i, m in tips.items())
    packed = os.path.join(repo, "packed-refs")
    with open(packed + ".new", "wb") as f:
        f.write(b"# pack-refs with: peeled fully-peeled sorted \n")
        for name, oid in refs:
            f.write(oid + b" " + name + b"\n")
    os.rename(packed + ".new", packed)
    print(f"{repo}: {n} ledgers ({live} live at {rfc3339(now)})")


if __name__ == "__main__":
    main()
