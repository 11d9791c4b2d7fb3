#!/usr/bin/env bash
# What signing ledger commits costs: one acquire per process (of a freed issue, its release as
# hyperfine's --prepare), unsigned against signed (lease.sign=true, gpg.format=ssh) with an
# ed25519 key file, an ed25519 key held by ssh-agent (a literal user.signingKey), an RSA 3072
# key file and the same RSA key held by ssh-agent; then `acquire --remote` through a hooked
# `git daemon` on 127.0.0.1, unsigned against signed with the ed25519 key file. Each round is
# one hyperfine invocation over every variant of a group, the order rotated each round; the
# report gives medians over all runs, the median of same-round ratios to the unsigned acquire,
# and the CPU time (user + system) of git-lease itself, median of the rounds' means, which a
# loaded machine disturbs less than wall time.
#
#   bash benches/signing.sh              # needs hyperfine, ssh-keygen, ssh-agent, ssh-add
#   env: GIT_LEASE_BENCH_TMP=/var/tmp, ROUNDS=6, RUNS=20, PORT=9813, BIN=target/release/git-lease
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/target/release/git-lease}
ROUNDS=${ROUNDS:-6}
RUNS=${RUNS:-20}
PORT=${PORT:-9813}
for tool in hyperfine ssh-keygen ssh-agent ssh-add git; do
  command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done
[ -x "$BIN" ] || cargo build --release --locked
W=$(mktemp -d "${GIT_LEASE_BENCH_TMP:-/var/tmp}/signing-bench.XXXXXX")
daemon=""
agent=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null
  [ -n "$agent" ] && kill "$agent" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N '' -C bench -f "$W/ed25519"
ssh-keygen -q -t rsa -b 3072 -N '' -C bench -f "$W/rsa"
ssh-agent -D -s -a "$W/agent.sock" > "$W/agent.out" &
agent=$!
export SSH_AUTH_SOCK=$W/agent.sock
until [ -S "$SSH_AUTH_SOCK" ]; do sleep 0.05; done
ssh-add -q "$W/ed25519" "$W/rsa" 2>/dev/null

init() { # <dir> [signing key]
  git init -q "$1"
  git -C "$1" config lease.holder alice
  git -C "$1" config lease.gcAuto 0
  git -C "$1" config advice.leaseLocal false
  if [ $# -gt 1 ]; then
    git -C "$1" config lease.sign true
    git -C "$1" config gpg.format ssh
    git -C "$1" config user.signingKey "$2"
  fi
}
init "$W/unsigned"
init "$W/ed25519-file" "$W/ed25519"
init "$W/ed25519-agent" "key::$(cat "$W/ed25519.pub")"
init "$W/rsa-file" "$W/rsa"
init "$W/rsa-agent" "key::$(cat "$W/rsa.pub")"
local_variants=(unsigned ed25519-file ed25519-agent rsa-file rsa-agent)
for v in "${local_variants[@]}"; do "$BIN" -C "$W/$v" acquire i >/dev/null; done

git init -q --bare "$W/srv/leases.git"
"$BIN" install-hook --repo "$W/srv/leases.git" >/dev/null 2>&1
git daemon --reuseaddr --base-path="$W/srv" --export-all --enable=receive-pack \
  --port="$PORT" --listen=127.0.0.1 "$W/srv" >/dev/null 2>&1 &
daemon=$!
until git ls-remote "git://127.0.0.1:$PORT/leases.git" >/dev/null 2>&1; do sleep 0.05; done
init "$W/remote-unsigned"
init "$W/remote-signed" "$W/ed25519"
remote_variants=(remote-unsigned remote-signed)
for v in "${remote_variants[@]}"; do
  git -C "$W/$v" remote add origin "git://127.0.0.1:$PORT/leases.git"
  git -C "$W/$v" config lease.remote origin
  "$BIN" -C "$W/$v" acquire "$v" >/dev/null
done

run_group() { # <group> <variants...>
  local group=$1; shift
  local variants=("$@") n=$# round i args
  for round in $(seq "$ROUNDS"); do
    args=()
    for i in $(seq 0 $((n - 1))); do
      local v=${variants[$(((i + round) % n))]}
      local issue=i
      case "$v" in remote-*) issue=$v ;; esac
      args+=(--prepare "$BIN -C $W/$v release $issue" --command-name "$v" "$BIN -C $W/$v acquire $issue")
    done
    hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$W/$group-$round.json" "${args[@]}" >/dev/null
  done
}
run_group local "${local_variants[@]}"
run_group remote "${remote_variants[@]}"

# Every signed ledger commit verifies with plain git.
echo "bench $(cat "$W/ed25519.pub")" > "$W/allowed"
echo "bench $(cat "$W/rsa.pub")" >> "$W/allowed"
for v in ed25519-file ed25519-agent rsa-file rsa-agent; do
  git -C "$W/$v" -c gpg.ssh.allowedSignersFile="$W/allowed" verify-commit refs/leases/i 2>/dev/null
done
git -C "$W/srv/leases.git" -c gpg.ssh.allowedSignersFile="$W/allowed" verify-commit refs/leases/remote-signed 2>/dev/null

python3 - "$W" "$ROUNDS" "$RUNS" <<'PY'
import glob, json, statistics as st, sys
w, rounds, runs = sys.argv[1], sys.argv[2], sys.argv[3]
for group, base in (("local", "unsigned"), ("remote", "remote-unsigned")):
    times, ratios, cpu = {}, {}, {}
    for f in sorted(glob.glob(f"{w}/{group}-*.json")):
        medians = {r["command"]: r["median"] for r in json.load(open(f))["results"]}
        for r in json.load(open(f))["results"]:
            times.setdefault(r["command"], []).extend(r["times"])
            cpu.setdefault(r["command"], []).append(r["user"] + r["system"])
        for name, m in medians.items():
            ratios.setdefault(name, []).append(m / medians[base])
    print(f"{group} ({rounds} rounds x {runs} runs):")
    for name in times:
        t = sorted(times[name])
        q = lambda p: t[int(p * (len(t) - 1))] * 1000
        print(f"  {name:16} median {st.median(t)*1000:6.2f} ms (p25 {q(.25):.2f}, p75 {q(.75):.2f})"
              f"  same-round ratio {st.median(ratios[name]):.3f} (range {min(ratios[name]):.3f}-{max(ratios[name]):.3f})"
              f"  cpu {st.median(cpu[name])*1000:.2f} ms ({st.median(cpu[name]) / st.median(cpu[base]):.2f}x)")
PY
