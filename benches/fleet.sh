#!/usr/bin/env bash
# Fleet scale benchmark: N agents (8, 16, 32) each claim one of M candidates (M = N and 2N,
# and an ordered queue of M = N: acquire --any --ordered, its priority violations counted)
# with `git-lease acquire --any --remote` through git daemon on 127.0.0.1, side by side with
# the floor: N concurrent plain `git push`es of distinct refs to the same server.
#
#   benches/fleet.sh [--ns "8 16 32"] [--rounds N] [--listener backlog|daemon]
#                    [--out FILE] [--tmp DIR] [--keep] [--no-build]
#                    [--fresh] [--own-users] [--ledgers L] [--hook] [--kinds N,2N,ordered,ordered2N]
#
# Every round runs the floor and both fleets in a rotated order; the report gives medians, the
# median of same-round ratios, and pushes per claim counted on the server (the daemon's
# "Request receive-pack" log lines, and a pre-receive hook's lines). By default each connection
# is served by `git daemon --inetd` behind a listener with a backlog of 512: git daemon's own
# listener uses listen(2) with a backlog of 5, so with 16 or more simultaneous connections the
# kernel drops SYNs and the clients retry after 1 s (--listener daemon shows it).
# Results: FILE (default benches/target/bench-results/fleet.md). Network traffic: only to
# 127.0.0.1. Scratch: under --tmp (default /var/tmp).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=1
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) BUILD=0; shift ;;
        --ns|--rounds|--listener|--out|--tmp|--ledgers|--kinds) ARGS+=("$1" "$2"); shift 2 ;;
        --keep|--fresh|--hook|--own-users) ARGS+=("$1"); shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "fleet.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
command -v python3 >/dev/null || { echo "fleet.sh: python3 is needed" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi
echo "# fleet: git-lease $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $(git --version), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)" >&2
exec python3 "$HERE/fleet.py" --bin "$ROOT/target/release/git-lease" ${ARGS[@]+"${ARGS[@]}"}
