#!/usr/bin/env bash
# A fresh clone's first claim against a hooked server over `git daemon`, by default settings,
# beside one plain push of a fresh clone to the same server.
#
#   benches/fresh-claim.sh [--sizes "1000 100000"] [--rounds N] [--tmp DIR] [--no-build]
#
# For each size, builds a bare server of that many ledgers (1% live, tips in random time
# order: benches/scalegen.py --random-times), folds the closed ones (`git lease archive
# --quiet-for 1d`), packs it with `git lease gc`, installs the hook (`git lease install-hook`)
# and serves it with `git daemon` on a free port of 127.0.0.1. Then, rounds alternated:
# - plain: an empty new repository pushes one new commit to a new branch;
# - claim: an empty new clone (`git init`, `git remote add`, nothing configured), by a user
#   of its own (a new XDG_STATE_HOME), claims a new issue (`acquire --remote origin`): the first write
#   probes the server once, whose hook vouches for its archive, and the claim goes blind;
# - second: the same clone claims another issue.
# Prints each run's wall time, then the medians and the first claim's ratio to the plain push.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SIZES="1000 100000"
ROUNDS=5
TMP=/var/tmp
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --sizes) SIZES=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --tmp) TMP=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "fresh-claim.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$BUILD" = 1 ]; then
    cargo build --release --quiet --locked --manifest-path "$ROOT/Cargo.toml"
fi
BIN="$ROOT/target/release/git-lease"
W=$(mktemp -d "$TMP/git-lease-fresh-claim.XXXXXX")
PID_FILE="$W/daemon.pid"
cleanup() {
    [ -f "$PID_FILE" ] && kill "$(cat "$PID_FILE")" 2> /dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
NOW=$(date +%s)
RUN=$(date +%s%N)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
git daemon --reuseaddr --base-path="$W" --export-all --enable=receive-pack \
    --listen=127.0.0.1 --port="$PORT" --detach --pid-file="$PID_FILE" "$W"
python3 - "$PORT" << 'PY'
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("git daemon did not start")
PY

seconds() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

for n in $SIZES; do
    live=$((n / 100)); [ "$live" -ge 10 ] || live=10
    server="$W/server-$n.git"
    python3 "$HERE/scalegen.py" "$server" "$n" "$live" "$NOW" --random-times > /dev/null
    (cd "$server" && GIT_LEASE_NOW=$(date -u -d "@$NOW" +%Y-%m-%dT%H:%M:%SZ) "$BIN" archive --quiet-for 1d > /dev/null \
        && "$BIN" gc > /dev/null && "$BIN" install-hook > /dev/null)
    url="git://127.0.0.1:$PORT/server-$n.git"
    echo "$n ledgers ($((n - live)) archived, random tip times), git-lease $(git -C "$ROOT" rev-parse --short HEAD), over git daemon"
    : > "$W/plain" ; : > "$W/first" ; : > "$W/second"
    for round in $(seq "$ROUNDS"); do
        plain="$W/plain-$n-$round"
        git init -q "$plain"
        git -C "$plain" commit -q --allow-empty -m "round $round"
        a=$(seconds)
        git -C "$plain" push -q "$url" "HEAD:refs/heads/bench-$RUN-$round"
        b=$(seconds)
        rm -rf "$plain"
        clone="$W/clone-$n-$round"
        git init -q "$clone"
        git -C "$clone" remote add origin "$url"
        # A user of its own (a state folder), as a fresh sandbox is: nothing judged the server for it before.
        home="$W/home-$n-$round"
        mkdir -p "$home"
        c=$(seconds)
        XDG_STATE_HOME=$home "$BIN" -C "$clone" acquire --remote origin "new-$RUN-$round" --holder bench > /dev/null
        d=$(seconds)
        XDG_STATE_HOME=$home "$BIN" -C "$clone" acquire --remote origin "new-$RUN-$round-b" --holder bench > /dev/null
        e=$(seconds)
        trusted=$(grep -l "archive: every fold" "$home"/git-lease/servers/* 2> /dev/null | wc -l)
        rm -rf "$clone" "$home"
        python3 -c "import sys; a, b, c, d, e = map(float, sys.argv[1:6]); print(f'  round {sys.argv[6]}: plain push {(b - a) * 1000:7.1f} ms, first claim {(d - c) * 1000:7.1f} ms, second {(e - d) * 1000:7.1f} ms, archive vouched: {sys.argv[7]}'); open(sys.argv[8], 'a').write(f'{b - a}\n'); open(sys.argv[9], 'a').write(f'{d - c}\n'); open(sys.argv[10], 'a').write(f'{e - d}\n')" \
            "$a" "$b" "$c" "$d" "$e" "$round" "$trusted" "$W/plain" "$W/first" "$W/second"
    done
    p=$(median < "$W/plain"); f=$(median < "$W/first"); s=$(median < "$W/second")
    python3 -c "import sys; p, f, s = map(float, sys.argv[1:4]); print(f'  median: plain push {p * 1000:.1f} ms, first claim {f * 1000:.1f} ms ({f / p:.2f}x), second claim {s * 1000:.1f} ms ({s / p:.2f}x)')" "$p" "$f" "$s"
done
