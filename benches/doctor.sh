#!/usr/bin/env bash
# What `git lease doctor` costs against a hooked git daemon on 127.0.0.1, and the claim path
# beside it: `acquire --remote` of this build against BASE (another build's binary, e.g. one
# made from the commit before doctor), in alternating rounds.
#
#   bash benches/doctor.sh [BASE]        # needs hyperfine; NEW is target/release/git-lease
#   env: GIT_LEASE_BENCH_TMP=/var/tmp, ROUNDS=5, PORT=9811
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=$PWD/target/release/git-lease
BASE=${1:-$NEW}
ROUNDS=${ROUNDS:-5}
PORT=${PORT:-9811}
command -v hyperfine >/dev/null || { echo "hyperfine is needed" >&2; exit 1; }
[ -x "$NEW" ] || cargo build --release --locked
W=$(mktemp -d "${GIT_LEASE_BENCH_TMP:-/var/tmp}/doctor-bench.XXXXXX")
git init -q --bare "$W/srv/leases.git"
"$NEW" install-hook --repo "$W/srv/leases.git" >/dev/null 2>&1
git daemon --reuseaddr --base-path="$W/srv" --export-all --enable=receive-pack \
  --port="$PORT" --listen=127.0.0.1 "$W/srv" >/dev/null 2>&1 &
daemon=$!
trap 'kill $daemon; rm -rf "$W"' EXIT
sleep 1
for c in new base; do
  git init -q "$W/$c"
  git -C "$W/$c" config lease.holder alice
  git -C "$W/$c" remote add origin "git://127.0.0.1:$PORT/leases.git"
  git -C "$W/$c" config lease.remote origin
done
hyperfine -N --warmup 3 --runs 30 --export-json "$W/doctor.json" \
  "$NEW -C $W/new doctor" "$NEW -C $W/new --local doctor" >/dev/null
for round in $(seq "$ROUNDS"); do
  new=("--prepare" "$NEW -C $W/new release n" "$NEW -C $W/new acquire n")
  base=("--prepare" "$BASE -C $W/base release b" "$BASE -C $W/base acquire b")
  hyperfine -N --warmup 2 --runs 20 --export-json "$W/claim-$round-a.json" "${new[@]}" "${base[@]}" >/dev/null
  hyperfine -N --warmup 2 --runs 20 --export-json "$W/claim-$round-b.json" "${base[@]}" "${new[@]}" >/dev/null
done
python3 - "$W" <<'PY'
import glob, json, statistics as st, sys
w = sys.argv[1]
for r in json.load(open(f"{w}/doctor.json"))["results"]:
    what = "doctor --local" if "--local" in r["command"] else "doctor"
    print(f"{what}: median {r['median']*1000:.1f} ms (min {r['min']*1000:.1f}, max {r['max']*1000:.1f})")
new, base, ratios = [], [], []
for f in sorted(glob.glob(f"{w}/claim-*.json")):
    m = {("base" if " -C " + w + "/base " in r["command"] else "new"): r["median"]
         for r in json.load(open(f))["results"]}
    new.append(m["new"]); base.append(m["base"]); ratios.append(m["new"] / m["base"])
print(f"acquire --remote: this build {st.median(new)*1000:.1f} ms, base {st.median(base)*1000:.1f} ms, "
      f"same-round ratio {st.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} runs of 20)")
PY
