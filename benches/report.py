#!/usr/bin/env python3
"""Summarises alternating hyperfine rounds for benches/run.sh.

    report.py hyperfine --title T [--ratio A:B ...] ROUND.json ...

Each ROUND.json is one hyperfine run (--export-json) of the same commands (named with -n) in a
rotated order. Prints a markdown table: per command the median over all runs of all rounds,
and per ratio A:B the median over the rounds of (median of A in that round) / (median of B in
that round), with its spread across rounds.

    report.py contention FILE.tsv     (rows: kind procs rep seconds transitions ok)
"""
import json
import statistics
import sys


def fmt(seconds):
    ms = seconds * 1000.0
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.1f} ms"
    return f"{seconds:.2f} s"


def quantile(values, q):
    v = sorted(values)
    return v[round((len(v) - 1) * q)]


def hyperfine(args):
    title, ratios, files = None, [], []
    i = 0
    while i < len(args):
        if args[i] == "--title":
            title = args[i + 1]
            i += 2
        elif args[i] == "--ratio":
            ratios.append(tuple(args[i + 1].split(":", 1)))
            i += 2
        else:
            files.append(args[i])
            i += 1
    pooled = {}
    per_round = []
    order = []
    for f in files:
        with open(f) as fh:
            data = json.load(fh)
        medians = {}
        for r in data["results"]:
            name = r["command"]
            if name not in pooled:
                pooled[name] = []
                order.append(name)
            pooled[name].extend(r["times"])
            medians[name] = statistics.median(r["times"])
        per_round.append(medians)
    if title:
        print(f"### {title}\n")
    print(f"{len(files)} alternating rounds; {', '.join(f'{len(pooled[n])} runs of {n}' for n in order[:1])} (same for each command)\n")
    print("| command | median | min | p25–p75 | runs |")
    print("|---|---:|---:|---|---:|")
    for n in order:
        t = pooled[n]
        print(
            f"| {n} | {fmt(statistics.median(t))} | {fmt(min(t))} | "
            f"{fmt(quantile(t, 0.25))}–{fmt(quantile(t, 0.75))} | {len(t)} |"
        )
    if ratios:
        print("\n| ratio | median of per-round ratios | range over rounds |")
        print("|---|---:|---|")
        for a, b in ratios:
            rs = [m[a] / m[b] for m in per_round if a in m and b in m]
            print(f"| {a} ÷ {b} | {statistics.median(rs):.2f}x | {min(rs):.2f}–{max(rs):.2f} |")
    print()


def contention(args):
    rows = []
    with open(args[0]) as fh:
        for line in fh:
            kind, procs, rep, secs, trans, ok = line.split()
            rows.append((kind, int(procs), int(rep), float(secs), int(trans), ok))
    print("| peer | processes | repetitions | transitions per rep | median transitions/s | range | tokens unique |")
    print("|---|---:|---:|---:|---:|---|---|")
    keys = sorted({(r[0], r[1]) for r in rows}, key=lambda k: (k[1], k[0]))
    for kind, procs in keys:
        rs = [r for r in rows if r[0] == kind and r[1] == procs]
        rates = [r[4] / r[3] for r in rs]
        trans = sorted({r[4] for r in rs})
        ok = "yes" if all(r[5] == "ok" for r in rs) else "NO"
        print(
            f"| {kind} | {procs} | {len(rs)} | {'/'.join(map(str, trans))} | "
            f"{statistics.median(rates):.0f} | {min(rates):.0f}–{max(rates):.0f} | {ok} |"
        )
    print()
    for kind in sorted({r[0] for r in rows}):
        if kind == "git-lease":
            continue
        for procs in sorted({r[1] for r in rows}):
            g = [r for r in rows if r[0] == "git-lease" and r[1] == procs]
            s = [r for r in rows if r[0] == kind and r[1] == procs]
            if g and s:
                pairs = [(a[4] / a[3]) / (b[4] / b[3]) for a, b in zip(g, s)]
                print(f"- {procs} processes: git-lease ÷ {kind} throughput, median of paired reps: "
                      f"{statistics.median(pairs):.2f}x")
    print()


if __name__ == "__main__":
    {"hyperfine": hyperfine, "contention": contention}[sys.argv[1]](sys.argv[2:])
