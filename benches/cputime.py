#!/usr/bin/env python3
"""Interleaved runs of commands, timed by wall clock and by CPU (user + system of the process
and of every child it waited for, from the kernel's rusage), for benches/reftable.sh and the
run-by-run table of benches/run.sh's acquire group.

    cputime.py --rounds R --runs K [--warmup W] [--ratio A:B ...] NAME=COMMAND ...

Each COMMAND is split as a shell would split words (no shell runs; leading VAR=value words set
environment variables, as in a shell); `{n}` in it becomes a count of that command's runs (from
1, warm-up included), so that every run can name a new issue. With --runs 1 and no warm-up,
every round is one run of each command: the commands alternate run by run.
Every round runs each command K times after W warm-up runs, the commands in an order rotated
by one each round. Prints a markdown table: per command the median wall and CPU time over all
runs, and per ratio A:B the median over the rounds of (median of A in that round) / (median of B
in that round), for both, with its spread (the whole range over fewer than 20 rounds, else the
middle half), and the ratio of the two commands' medians of wall time over all runs. CPU time
is what a loaded machine inflates least: waiting for a core is not counted, only the work done.
"""
import os
import resource
import shlex
import statistics
import sys
import time


def run_once(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # posix_spawn starts the child without copying this interpreter's page tables (fork
    # would, and bill the copy to the child: about 2 ms of CPU, more than a whole claim).
    pid = os.posix_spawnp(
        argv[0],
        argv,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        ],
    )
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"cputime.py: {shlex.join(argv)} failed ({status})")
    return wall, cpu


def parse(command, n):
    """The argv and environment of one run: leading VAR=value words set variables."""
    words = shlex.split(command.replace("{n}", str(n)))
    env = dict(os.environ)
    while words and "=" in words[0] and not words[0].startswith("="):
        var, _, value = words.pop(0).partition("=")
        env[var] = value
    return words, env


def fmt(seconds):
    ms = seconds * 1000.0
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def main(args):
    rounds, runs, warmup, ratios, commands = 6, 10, 2, [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--rounds", "--runs", "--warmup", "--ratio"):
            v = args[i + 1]
            i += 2
            if a == "--rounds":
                rounds = int(v)
            elif a == "--runs":
                runs = int(v)
            elif a == "--warmup":
                warmup = int(v)
            else:
                ratios.append(tuple(v.split(":", 1)))
        else:
            name, _, command = a.partition("=")
            commands.append((name, command))
            i += 1
    counts = {name: 0 for name, _ in commands}
    # per command, per round: [(wall, cpu)]
    results = {name: [[] for _ in range(rounds)] for name, _ in commands}
    for r in range(rounds):
        order = commands[r % len(commands):] + commands[: r % len(commands)]
        for name, command in order:
            for k in range(warmup + runs):
                counts[name] += 1
                measured = run_once(*parse(command, counts[name]))
                if k >= warmup:
                    results[name][r].append(measured)
    print(f"{rounds} alternating rounds, {runs} runs of each command a round ({warmup} warm-up)\n")
    print("| command | wall, median | wall, p25–p75 | CPU (user + sys), median | CPU, p25–p75 |")
    print("|---|---:|---|---:|---|")
    q = lambda v, f: v[round((len(v) - 1) * f)]
    for name, _ in commands:
        walls = sorted(w for rr in results[name] for w, _ in rr)
        cpus = sorted(c for rr in results[name] for _, c in rr)
        print(
            f"| {name} | {fmt(statistics.median(walls))} | {fmt(q(walls, .25))}–{fmt(q(walls, .75))} "
            f"| {fmt(statistics.median(cpus))} | {fmt(q(cpus, .25))}–{fmt(q(cpus, .75))} |"
        )
    if ratios:
        # Over a few rounds the whole range of per-round ratios says how far they agree; over
        # hundreds of single runs, the middle half does.
        many = rounds >= 20
        spread = "p25–p75" if many else "range"
        print(
            f"\n| ratio | wall: median of per-round ratios ({spread}) "
            f"| CPU: median of per-round ratios ({spread}) | wall: ratio of medians |"
        )
        print("|---|---:|---:|---:|")
        for a, b in ratios:
            cols = []
            for j in (0, 1):
                per = sorted(
                    statistics.median(m[j] for m in results[a][r])
                    / max(statistics.median(m[j] for m in results[b][r]), 1e-9)
                    for r in range(rounds)
                )
                lo, hi = (q(per, 0.25), q(per, 0.75)) if many else (per[0], per[-1])
                cols.append(f"{statistics.median(per):.2f}x ({lo:.2f}–{hi:.2f})")
            wall = lambda name: statistics.median(w for rr in results[name] for w, _ in rr)
            cols.append(f"{wall(a) / max(wall(b), 1e-9):.2f}x")
            print(f"| {a} ÷ {b} | {cols[0]} | {cols[1]} | {cols[2]} |")


if __name__ == "__main__":
    main(sys.argv[1:])
