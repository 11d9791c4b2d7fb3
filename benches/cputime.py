#!/usr/bin/env python3
"""Interleaved runs of commands, timed by wall clock and by CPU (user + system of the process
and of every child it waited for, from the kernel's rusage), for benches/reftable.sh.

    cputime.py --rounds R --runs K [--warmup W] [--ratio A:B ...] NAME=COMMAND ...

Each COMMAND is split as a shell would split words (no shell runs); `{n}` in it becomes a
count of that command's runs (from 1, warm-up included), so that every run can name a new issue.
Every round runs each command K times after W warm-up runs, the commands in an order rotated
by one each round. Prints a markdown table: per command the median wall and CPU time over all
runs, and per ratio A:B the median over the rounds of (median of A in that round) / (median of B
in that round), for both. CPU time is what a loaded machine inflates least: waiting for a
core is not counted, only the work done.
"""
import os
import resource
import shlex
import statistics
import sys
import time


def run_once(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(os.devnull, os.O_RDWR)
            os.dup2(fd, 0)
            os.dup2(fd, 1)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"cputime.py: {shlex.join(argv)} failed ({status})")
    return wall, cpu


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
                argv = shlex.split(command.replace("{n}", str(counts[name])))
                measured = run_once(argv)
                if k >= warmup:
                    results[name][r].append(measured)
    print(f"{rounds} alternating rounds, {runs} runs of each command a round ({warmup} warm-up)\n")
    print("| command | wall, median | wall, p25–p75 | CPU (user + sys), median | CPU, p25–p75 |")
    print("|---|---:|---|---:|---|")
    for name, _ in commands:
        walls = sorted(w for rr in results[name] for w, _ in rr)
        cpus = sorted(c for rr in results[name] for _, c in rr)
        q = lambda v, f: v[round((len(v) - 1) * f)]
        print(
            f"| {name} | {fmt(statistics.median(walls))} | {fmt(q(walls, .25))}–{fmt(q(walls, .75))} "
            f"| {fmt(statistics.median(cpus))} | {fmt(q(cpus, .25))}–{fmt(q(cpus, .75))} |"
        )
    if ratios:
        print("\n| ratio | wall: median of per-round ratios (range) | CPU: median of per-round ratios (range) |")
        print("|---|---:|---:|")
        for a, b in ratios:
            cols = []
            for j in (0, 1):
                per = [
                    statistics.median(m[j] for m in results[a][r])
                    / max(statistics.median(m[j] for m in results[b][r]), 1e-9)
                    for r in range(rounds)
                ]
                cols.append(f"{statistics.median(per):.2f}x ({min(per):.2f}–{max(per):.2f})")
            print(f"| {a} ÷ {b} | {cols[0]} | {cols[1]} |")


if __name__ == "__main__":
    main(sys.argv[1:])
