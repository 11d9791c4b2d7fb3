#!/usr/bin/env bash
# Reftable against files at scale: acquire of a new issue, renew and show of a live lease, and a
# warm list, each in a repository of N ledgers (benches/scalegen.py, 80% live, refs packed) and
# in a copy of it migrated with `git refs migrate --ref-format=reftable`.
#
#   benches/reftable.sh [--sizes "1000 100000"] [--rounds N] [--before PATH] [--out DIR] [--tmp DIR]
#
# Needs python3, git 2.46 or newer (refs migrate) and a release build (cargo build --release).
# --before PATH adds the same reftable rows for another build of git-lease (its own issues and
# live lease, in the same rounds). Every size runs R rounds over all of its commands, rotating
# their order each round (benches/cputime.py, no shell): medians of wall time and of CPU time
# (user + system, git's children included) over all runs, and medians of same-round ratios;
# CPU time is the figure a machine shared with other work inflates least.
# Results: DIR/reftable.md (default benches/target/bench-results/).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SIZES="1000 100000"
ROUNDS=6
BEFORE=""
OUT="$HERE/target/bench-results"
TMPBASE="${GIT_LEASE_BENCH_TMP:-/var/tmp}"
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) SIZES="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --before) BEFORE="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --tmp) TMPBASE="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "reftable.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
GL="$ROOT/target/release/git-lease"
for b in "$GL" ${BEFORE:+"$BEFORE"}; do [ -x "$b" ] || { echo "reftable.sh: missing $b" >&2; exit 1; }; done
mkdir -p "$OUT"
REPORT="$OUT/reftable.md"
W=$(mktemp -d "$TMPBASE/git-lease-reftable.XXXXXX")
trap 'rm -rf "$W"' EXIT
NOW=$(date +%s)
{
    echo "# Reftable against files at scale"
    echo
    echo "- commit $(git -C "$ROOT" rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(git --version), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    [ -n "$BEFORE" ] && echo "- before: $BEFORE"
    echo
} > "$REPORT"

for n in $SIZES; do
    F="$W/$n-files.git"; T="$W/$n-reftable.git"
    echo "== $n ledgers" >&2
    python3 "$HERE/scalegen.py" "$F" "$n" $((n * 8 / 10)) "$NOW" >&2
    cp -a "$F" "$T"
    git -C "$T" refs migrate --ref-format=reftable
    for r in "$F" "$T"; do git -C "$r" config advice.leaseLocal false; done
    # Two live leases (the last ledgers are live): one renewed by this build, one by --before.
    HOT="s$((n - 1))"; HOT_B="s$((n - 2))"
    holder() { "$GL" -C "$1" --json show "$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["holder"])'; }
    H=$(holder "$F" "$HOT"); H_B=$(holder "$T" "$HOT_B")
    [ "$H" = "$(holder "$T" "$HOT")" ] || { echo "reftable.sh: the copies differ" >&2; exit 1; }
    specs=()
    for side in files reftable; do
        R=$F; [ "$side" = reftable ] && R=$T
        specs+=("acquire, $side=$GL -C $R acquire g{n} --holder alice@example.com --ttl 1h")
        # A renew writes only when the expiry moves: 61, 62, ... 69, 610, ... minutes.
        specs+=("renew, $side=$GL -C $R renew $HOT --holder $H --ttl 6{n}m")
        specs+=("show, $side=$GL -C $R show $HOT")
        specs+=("list, $side=$GL -C $R list")
    done
    if [ -n "$BEFORE" ]; then
        specs+=("acquire, reftable, before=$BEFORE -C $T acquire b{n} --holder alice@example.com --ttl 1h")
        specs+=("renew, reftable, before=$BEFORE -C $T renew $HOT_B --holder $H_B --ttl 6{n}m")
        specs+=("show, reftable, before=$BEFORE -C $T show $HOT")
        specs+=("list, reftable, before=$BEFORE -C $T list")
    fi
    if [ "$n" -ge 100000 ]; then runs=5; warm=2; else runs=10; warm=3; fi
    ratios=()
    for op in acquire renew show list; do
        ratios+=(--ratio "$op, reftable:$op, files")
        [ -n "$BEFORE" ] && ratios+=(--ratio "$op, reftable, before:$op, files")
    done
    echo "### $n ledgers (80% live): files vs reftable" >> "$REPORT"
    echo >> "$REPORT"
    python3 "$HERE/cputime.py" --rounds "$ROUNDS" --runs "$runs" --warmup "$warm" "${ratios[@]}" "${specs[@]}" >> "$REPORT"
    echo "- verify: files $("$GL" -C "$F" verify | head -1); reftable $("$GL" -C "$T" verify | head -1)" >> "$REPORT"
    echo >> "$REPORT"
done
cat "$REPORT"
