#!/usr/bin/env bash
# A new clone's first claim on an archived server, with and without `lease.trustArchive`.
#
#   benches/first-claim.sh [--sizes "1000 100000"] [--rounds N] [--live N] [--servers DIR] [--tmp DIR]
#                          [--keep] [--no-build]
#
# For each size, builds a bare server of that many ledgers (--live N of them live; default 1%,
# at least 10) with benches/scalegen.py, folds the closed ones with `git lease archive
# --quiet-for 1d` and packs it with `git gc`; then, in alternated rounds, an empty new clone (`git init` and a remote
# over file://) claims a new issue (`acquire --remote`), then another; once with the setting
# off (the clone fetches and judges the whole archive), once on (the newest fold alone, into
# the archive index), and on against the same server with `uploadpack.allowFilter` (the fold's
# root tree, then the trees on a claimed path alone). Prints one line per run: the first and
# second claim's wall time, the objects left in the clone and the size of its archive index.
# --servers DIR reuses the servers a --keep run left there (server-N.git). Scratch: under
# --tmp (default /var/tmp), removed unless --keep.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SIZES="1000 100000"
ROUNDS=3
TMP=/var/tmp
KEEP=0
BUILD=1
SERVERS=""
LIVE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) SIZES=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --tmp) TMP=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --servers) SERVERS=$2; shift 2 ;;
        --live) LIVE=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "first-claim.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$BUILD" = 1 ]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
fi
BIN="$ROOT/target/release/git-lease"
W=$(mktemp -d "$TMP/git-lease-first-claim.XXXXXX")
[ "$KEEP" = 1 ] || trap 'rm -rf "$W"' EXIT
NOW=$(date +%s)
if [ -n "$SERVERS" ] && [ -f "$SERVERS/now" ]; then NOW=$(cat "$SERVERS/now"); fi
STAMP=$(date -u -d "@$NOW" +%Y-%m-%dT%H:%M:%SZ)
export GIT_LEASE_NOW=$STAMP
# Every run claims issues no run claimed before, also on reused servers.
RUN=$(date +%s%N)

seconds() { date +%s.%N; }

for n in $SIZES; do
    live=$((n / 100)); [ "$live" -ge 10 ] || live=10
    [ -z "$LIVE" ] || live=$LIVE
    if [ -n "$SERVERS" ] && [ -d "$SERVERS/server-$n.git" ]; then
        server="$SERVERS/server-$n.git"
    else
        server="$W/server-$n.git"
        python3 "$HERE/scalegen.py" "$server" "$n" "$live" "$NOW" > /dev/null
        (cd "$server" && "$BIN" archive --quiet-for 1d > /dev/null && git gc --quiet)
        echo "$NOW" > "$W/now"
    fi
    echo "$n ledgers ($((n - live)) archived), git-lease $(git -C "$ROOT" rev-parse --short HEAD)"
    for round in $(seq "$ROUNDS"); do
        for mode in off on on+filter; do
            trust=true; filter=false
            case $mode in off) trust=false ;; on+filter) filter=true ;; esac
            git -C "$server" config uploadpack.allowFilter "$filter"
            clone="$W/clone-$n-$round-$mode"
            git init -q "$clone"
            git -C "$clone" remote add origin "file://$server"
            git -C "$clone" config lease.trustArchive "$trust"
            a=$(seconds)
            "$BIN" -C "$clone" acquire --remote origin "new-$RUN-$round-$mode" --holder bench > /dev/null
            b=$(seconds)
            "$BIN" -C "$clone" acquire --remote origin "new-$RUN-$round-$mode-b" --holder bench > /dev/null
            c=$(seconds)
            objects=$(git -C "$clone" count-objects -v | awk '/^count|^in-pack/ {s += $2} END {print s}')
            index=$({ du -sk "$clone/.git/lease-archive-index" 2> /dev/null || true; } | cut -f1)
            python3 -c "import sys; a, b, c = map(float, sys.argv[1:4]); print(f'  round {sys.argv[4]} {sys.argv[5]:9}: first claim {b - a:7.3f} s, second {(c - b) * 1000:6.1f} ms, {sys.argv[6]} objects in the clone, archive index {sys.argv[7] or 0} KiB')" \
                "$a" "$b" "$c" "$round" "$mode" "$objects" "$index"
            rm -rf "$clone"
        done
    done
    git -C "$server" config --unset uploadpack.allowFilter || true
done
