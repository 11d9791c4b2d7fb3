#!/usr/bin/env python3
"""How long `git lease timeline` takes on many ledgers, and how big its page is.

Usage: benches/timeline.py [LEDGERS] [TENURES] [RUNS]   (after `cargo build --release`;
defaults 100000 5 3)

Writes LEDGERS ledgers of TENURES tenures each with one `git fast-import` (every commit the
shape git-lease writes: one `lease.json` of the record's version 1, one parent), the tips
straight into packed-refs (see benches/src/populate.rs for why never as loose files), spread
over 30 days before a fixed now: each tenure an acquire, one renew on every other, and an end
taken in turn from complete, release, abandon, revoke, an expiry cleared by someone else and a
takeover after an expiry; the last tenure of every fifth ledger is live. Then times, RUNS times
each (median, and the peak RSS from GNU time): the page as drawn by default (2000 rows), the
page of every row (`--limit 0`), `--json`, and a page of one prefix (1% of the ledgers), and
gives each output's size. Figures go to BENCHMARKS.md ("Other figures").
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "git-lease")
LEDGERS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
TENURES = int(sys.argv[2]) if len(sys.argv) > 2 else 5
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
NOW = 1_796_212_800  # 2026-12-02T12:00:00Z
SPAN = 30 * 86_400
HOLDERS = [f"agent-{n}@example.com" for n in range(40)]
ENDINGS = ["complete", "release", "abandon", "revoke", "cleared", "takeover"]


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def record(issue, event, holder, token, acquired, expires, at, **extra):
    lease = {
        "version": 1,
        "issue": issue,
        "event": event,
        "holder": holder,
        "token": token,
        "acquired_at": stamp(acquired) if acquired is not None else None,
        "expires_at": stamp(expires) if expires is not None else None,
        "at": stamp(at),
    }
    lease.update({k: v for k, v in extra.items() if v is not None})
    return json.dumps(lease, indent=2).encode() + b"\n"


def ledger(i):
    """The (at, actor, lease.json) of each commit of ledger `i`, oldest first."""
    issue = f"i{i}"
    step = SPAN // (TENURES + 1)
    t = NOW - SPAN + (i * 7919) % step
    out = []
    previous = None  # the holder a takeover or a clearing names
    for k in range(TENURES):
        token = k + 1
        holder = HOLDERS[(i + k * 7) % len(HOLDERS)]
        ttl = 3600 + (i + k) % 4 * 1800
        live = k == TENURES - 1 and i % 5 == 0
        ending = ENDINGS[(i + k) % len(ENDINGS)] if not live else None
        if k == TENURES - 1 and ending == "takeover":
            ending = "complete"
        start = NOW - 600 if live else t
        extra = {"note": f"work on {issue}"} if k % 2 == 0 else {}
        if previous is not None:
            extra["previous_holder"] = previous
            extra["takeover"] = "expired"
        out.append((start, holder, record(issue, "acquire", holder, token, start,
                                          start + ttl, start, **extra)))
        expires = start + ttl
        previous = None
        if k % 2 == 0:
            at = start + ttl // 2
            expires = at + ttl
            out.append((at, holder, record(issue, "renew", holder, token, start, expires, at,
                                           note=extra.get("note"))))
        if ending in ("complete", "release", "abandon"):
            at = expires - 600
            out.append((at, holder, record(issue, ending, None, token, None, None, at,
                                           previous_holder=holder)))
        elif ending == "revoke":
            at = expires - 900
            out.append((at, "ops@example.com",
                        record(issue, "revoke", None, token, None, None, at,
                               previous_holder=holder, by="ops@example.com",
                               reason="reassigned")))
        elif ending == "cleared":
            at = expires + 300
            out.append((at, "ops@example.com",
                        record(issue, "release", None, token, None, None, at,
                               previous_holder=holder, by="ops@example.com",
                               takeover="expired")))
        elif ending == "takeover":
            previous = holder
        t = max(t + step, expires + 600)
    return issue, out


def populate(repo):
    subprocess.run(["git", "init", "-q", "--bare", repo], check=True)
    marks = os.path.join(repo, "marks")
    fi = subprocess.Popen(["git", "-C", repo, "fast-import", "--quiet", "--done",
                           f"--export-marks={marks}"], stdin=subprocess.PIPE)
    w = fi.stdin
    mark = 0
    tips = []
    for i in range(LEDGERS):
        issue, commits = ledger(i)
        parent = None
        for at, actor, blob in commits:
            mark += 1
            w.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(blob)) + blob + b"\n")
            blob_mark = mark
            mark += 1
            event = json.loads(blob)["event"]
            msg = f"git-lease: {event}\n".encode()
            who = f"{actor} <{actor}>".encode()
            if parent is None:
                w.write(b"reset refs/bench/scratch\n")
            w.write(b"commit refs/bench/scratch\nmark :%d\n" % mark)
            w.write(b"author %s %d +0000\ncommitter git-lease <git-lease> %d +0000\n"
                    % (who, at, at))
            w.write(b"data %d\n%s" % (len(msg), msg))
            if parent is not None:
                w.write(b"from :%d\n" % parent)
            w.write(b"M 100644 :%d lease.json\n\n" % blob_mark)
            parent = mark
        tips.append((issue, parent))
    w.write(b"done\n")
    w.close()
    if fi.wait() != 0:
        sys.exit("git fast-import failed")
    by_mark = {}
    with open(marks) as f:
        for line in f:
            m, sha = line.split()
            by_mark[int(m[1:])] = sha
    refs = sorted((f"refs/leases/{issue}", by_mark[m]) for issue, m in tips)
    with open(os.path.join(repo, "packed-refs"), "w") as f:
        f.write("# pack-refs with: peeled fully-peeled sorted \n")
        for name, sha in refs:
            f.write(f"{sha} {name}\n")
    subprocess.run(["git", "-C", repo, "update-ref", "-d", "refs/bench/scratch"], check=True)
    os.remove(marks)
    return mark // 2


def timed(args, repo, out):
    """Runs `args` RUNS times; returns (median ms, peak RSS MiB, size of `out` in bytes)."""
    env = dict(os.environ, GIT_LEASE_NOW=str(NOW), GIT_CONFIG_GLOBAL="/dev/null",
               GIT_CONFIG_NOSYSTEM="1")
    times, rss = [], []
    for _ in range(RUNS):
        if os.path.exists(out):
            os.remove(out)
        start = time.perf_counter()
        run = subprocess.run(["/usr/bin/time", "-f", "%M", BIN, "-C", repo, *args, "-o", out],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        times.append((time.perf_counter() - start) * 1000.0)
        if run.returncode != 0:
            sys.exit(f"{args} failed: {run.stderr}")
        rss.append(int(run.stderr.strip().splitlines()[-1]) / 1024.0)
    return statistics.median(times), max(rss), os.path.getsize(out)


def main():
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    tmp = tempfile.mkdtemp(prefix="git-lease-timeline-bench.", dir="/var/tmp")
    try:
        repo = os.path.join(tmp, "repo.git")
        start = time.perf_counter()
        commits = populate(repo)
        made = time.perf_counter() - start
        print(f"{LEDGERS} ledgers x {TENURES} tenures: {commits} commits written in {made:.1f} s")
        # The first read, untimed: the pack's index and the page cache are warm for every run.
        timed(["--json", "timeline"], repo, os.path.join(tmp, "warm.json"))
        prefixed = sum(1 for i in range(LEDGERS) if str(i).startswith("1"))
        rows = [
            ("page, default (2000 rows drawn)", ["timeline"], "t.html"),
            ("page, every row (--limit 0)", ["timeline", "--limit", "0"], "all.html"),
            ("--json, every row", ["--json", "timeline"], "t.json"),
            (f"page of one prefix (i1: {prefixed} ledgers)", ["timeline", "i1"], "p.html"),
        ]
        print(f"| output | median of {RUNS} | peak RSS | size |")
        print("|---|---|---|---|")
        for what, args, name in rows:
            ms, rss, size = timed(args, repo, os.path.join(tmp, name))
            print(f"| {what} | {ms / 1000.0:.2f} s | {rss:.0f} MiB | {size / 1e6:.1f} MB |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
