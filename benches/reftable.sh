#!/usr/bin/env bash
# Reftable against files at scale: acquire of a new issue, renew and show of a live lease, and a
# warm list, each in a repository of N ledgers (benches/scalegen.py, 80% live, refs packed) and
# in a copy of it migrated with `git refs migrate --ref-format=reftable`.
#
#   benches/reftable.sh [--sizes "1000 100000"] [--rounds N] [--before PATH] [--out DIR] [--tmp DIR]
#
# Needs python3, git 2.46 or newer (refs migrate) and hyperfine, and a release build
# (cargo build --release). --before PATH adds the same reftable rows for another build of
# git-lease (its own issues and live lease, in the same rounds). Every size runs hyperfine R
# times over all of its commands, rotating their order each round; the report gives medians
# over all runs and the median of same-round ratios (benches/report.py).
# Results: DIR/reftable.md (default benches/target/bench-results/), raw JSON beside it.
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
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "reftable.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
GL="$ROOT/target/release/git-lease"
for b in "$GL" ${BEFORE:+"$BEFORE"}; do [ -x "$b" ] || { echo "reftable.sh: missing $b" >&2; exit 1; }; done
command -v hyperfine >/dev/null || { echo "reftable.sh: needs hyperfine" >&2; exit 1; }
mkdir -p "$OUT/raw"
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
    ctr() { echo 0 > "$W/ctr.$1"; echo "read n < $W/ctr.$1; echo \$((n+1)) > $W/ctr.$1"; }
    names=(); cmds=()
    add() { names+=("$1"); cmds+=("$2"); }
    for side in files reftable; do
        R=$F; [ "$side" = reftable ] && R=$T
        add "acquire, $side" "$(ctr "a$side"); exec $GL -C $R acquire g\$n --holder alice@example.com --ttl 1h"
        add "renew, $side" "$(ctr "r$side"); exec $GL -C $R renew $HOT --holder $H --ttl \$((n + 60))m"
        add "show, $side" "exec $GL -C $R show $HOT"
        add "list, $side" "exec $GL -C $R list"
    done
    if [ -n "$BEFORE" ]; then
        add "acquire, reftable, before" "$(ctr ab); exec $BEFORE -C $T acquire b\$n --holder alice@example.com --ttl 1h"
        add "renew, reftable, before" "$(ctr rb); exec $BEFORE -C $T renew $HOT_B --holder $H_B --ttl \$((n + 60))m"
        add "show, reftable, before" "exec $BEFORE -C $T show $HOT"
        add "list, reftable, before" "exec $BEFORE -C $T list"
    fi
    k=${#names[@]}
    if [ "$n" -ge 100000 ]; then runs=5; warm=2; else runs=10; warm=3; fi
    rm -f "$OUT/raw/reftable-$n".*.json
    for ((round = 0; round < ROUNDS; round++)); do
        args=()
        for ((j = 0; j < k; j++)); do
            v=$(((round + j) % k))
            args+=(-n "${names[v]}" "${cmds[v]}")
        done
        hyperfine --style basic --runs "$runs" --warmup "$warm" \
            --export-json "$OUT/raw/reftable-$n.$round.json" "${args[@]}" > "$OUT/raw/reftable-$n.$round.txt"
    done
    ratios=()
    for op in acquire renew show list; do
        ratios+=(--ratio "$op, reftable:$op, files")
        [ -n "$BEFORE" ] && ratios+=(--ratio "$op, reftable, before:$op, files")
    done
    python3 "$HERE/report.py" hyperfine --title "$n ledgers (80% live): files vs reftable" "${ratios[@]}" \
        "$OUT"/raw/reftable-"$n".*.json >> "$REPORT"
    echo "- verify: files $("$GL" -C "$F" verify | head -1); reftable $("$GL" -C "$T" verify | head -1)" >> "$REPORT"
    echo >> "$REPORT"
done
cat "$REPORT"
