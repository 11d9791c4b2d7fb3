#!/usr/bin/env bash
# The long campaign of histories under faults (tests/it/histories/): real git-lease clients
# through fault-injecting proxies before git daemon (even seeds) or git http-backend behind a
# web server (odd seeds), whose receive-pack is killed at seeded points of pushes, each history
# checked for linearizability and fencing.
#
#   benches/faults.sh [--histories N] [--seed S] [--jobs J] [--chunk C] [--out FILE]
#
# Runs N histories (default 1000) from seed S (default 1), J test processes at a time
# (default 2), each of C consecutive seeds (default 50); every chunk appends one JSON line of
# figures (histories, of which over HTTP, operations, unknown outcomes, operations left out as
# known not to have happened, faults by kind, violations) to FILE (default benches/target/faults.jsonl), and
# the totals are printed at the end. A violation fails its chunk, which prints the seed of
# the failing history; rerun it alone with
#   GIT_LEASE_FAULTS_SEED=<seed> GIT_LEASE_FAULTS_HISTORIES=1 \
#     cargo test --test it histories:: -- --nocapture
# Network traffic: only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

histories=1000 seed=1 jobs=2 chunk=50 out=benches/target/faults.jsonl
while [ $# -gt 0 ]; do
  case "$1" in
    --histories) histories=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --chunk) chunk=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
: >"$out"

# Build once, then run a copy of the test binary, so that the run does not depend on later
# builds of the tree.
bin=$(cargo test --test it --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="it" and m.get("executable"):
        print(m["executable"])')
copy=$(mktemp -d)/it
cp "$bin" "$copy"

started=$(date +%s)
failed=0
run_chunk() {
  GIT_LEASE_FAULTS_SEED=$1 GIT_LEASE_FAULTS_HISTORIES=$2 GIT_LEASE_FAULTS_FIGURES=$out \
    "$copy" --exact histories::seeded_histories_under_faults_are_linearizable_and_keep_fencing \
    --nocapture >"$out.$1.log" 2>&1 || { echo "chunk from seed $1 FAILED: see $out.$1.log" >&2; return 1; }
  rm -f "$out.$1.log"
}
s=$seed end=$((seed + histories))
while [ "$s" -lt "$end" ]; do
  n=$chunk; [ $((s + n)) -gt "$end" ] && n=$((end - s))
  run_chunk "$s" "$n" &
  s=$((s + n))
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || failed=1; done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done
elapsed=$(($(date +%s) - started))

python3 - "$out" "$elapsed" "$failed" <<'PY'
import json, sys
path, elapsed, failed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tot = {"histories": 0, "http": 0, "operations": 0, "unknown": 0, "left_out": 0, "faults": {}}
for line in open(path):
    m = json.loads(line.replace("'", '"'))
    for k in ("histories", "http", "operations", "unknown", "left_out"):
        tot[k] += m.get(k, 0)
    for k, v in m["faults"].items():
        tot["faults"][k] = tot["faults"].get(k, 0) + v
tot["violations"] = failed
tot["seconds"] = elapsed
print(json.dumps(tot))
PY
exit "$failed"
