#!/usr/bin/env bash
# Whole-process benchmarks of git-lease against the SQLite CLI peer and git plumbing.
#
#   benches/run.sh [--quick] [--sizes "1000 10000 100000"] [--rounds N] [--groups "..."]
#                  [--out DIR] [--tmp DIR] [--journaled] [--keep] [--no-build]
#
# Groups (default: all, in this order):
#   acquire     one acquire per process, fresh issue per run: git-lease (default, and with
#               lease.fsync=true), sqlite-lease (NORMAL, FULL), one `git update-ref`, the
#               plumbing pipeline (hash-object -w --stdin, mktree, commit-tree, update-ref with
#               the old value); then the same commands but the pipeline, alternating run by run
#               (100 runs of each per round, benches/cputime.py, no shell between), the
#               figure a disk whose cost comes in bursts moves least
#   list        `git-lease list` (warm, and cold: its list cache emptied first) vs
#               `sqlite-lease list` vs `git for-each-ref | git cat-file --batch` at each size
#               (80% live), after `git gc`; peak RSS with /usr/bin/time -v
#   scale       one git-lease acquire per process with each size of existing leases
#   contention  2, 4 and 8 processes looping acquire/release on one issue (lease-contend),
#               git-lease vs SQLite NORMAL; tokens checked for repeats, for git by `git log`
#   remote      `git-lease acquire --remote git://127.0.0.1:PORT/...` vs one plain `git push`
#               of one ref, against a `git daemon` on 127.0.0.1 started and stopped here
#   reftable    the same on a reftable repository (refs through git's own commands) side by
#               side with the files backend: acquire of a new issue and renew of a live lease
#               (files, reftable, reftable with lease.fsync=true), with one `git update-ref`
#               and one single-ref `git for-each-ref` on reftable (the processes a claim adds)
#               and SQLite NORMAL; then warm and cold list at each size, on the populated
#               repository and on a copy migrated with `git refs migrate --ref-format=reftable`
#   gc          `git lease gc` vs `git gc --quiet` on 2000 leases written loose by git-lease
#               (a fresh copy before each run), and a cold list before and after packing;
#               last, because it deletes thousands of files
#
# Every comparison alternates: each group runs hyperfine R times ("rounds") over all of its
# commands, rotating their order each round; the report gives medians over all runs and the
# median of same-round ratios. --quick: sizes 1000 and 10000, fewer rounds.
# Results: DIR/run.md (default benches/target/bench-results/), raw JSON beside it.
# Scratch repositories: under --tmp (default /var/tmp, on the disk; /tmp may be a tmpfs).
# --journaled (root, mkfs.ext4 and a loop device): under a journaled ext4 made for the run in
# an image file under --tmp, mounted on a loop device, its inode tables and journal written
# before the run starts; unmounted and removed at the end (--keep: left mounted).
# Network traffic: only to 127.0.0.1.
# This machine's ext4 has no journal: for 1-5 minutes after many files are deleted, creating
# files near them is several times slower (see BENCHMARKS.md). Do not delete big trees right
# before a run, or use --journaled; this script removes its own scratch directory only at the
# end (--keep: never).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SIZES="1000 10000 100000"
ROUNDS=""
GROUPS_WANTED="acquire list scale contention remote reftable gc"
OUT="$HERE/target/bench-results"
TMPBASE="${GIT_LEASE_BENCH_TMP:-/var/tmp}"
KEEP=0
JOURNALED=0
BUILD=1
QUICK=0
CONTEND_OPS=150
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; SIZES="1000 10000"; shift ;;
        --sizes) SIZES="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --groups) GROUPS_WANTED="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --tmp) TMPBASE="$2"; shift 2 ;;
        --contend-ops) CONTEND_OPS="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --journaled) JOURNALED=1; shift ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -z "$ROUNDS" ]; then
    if [ "$QUICK" = 1 ]; then ROUNDS=4; else ROUNDS=6; fi
fi
want() { case " $GROUPS_WANTED " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
log() { printf '\n== %s\n' "$*" >&2; }

# --- tools -----------------------------------------------------------------------------------
need_apt=()
command -v hyperfine >/dev/null || need_apt+=(hyperfine)
[ -x /usr/bin/time ] || need_apt+=(time)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        log "installing ${need_apt[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "run.sh: please install ${need_apt[*]} (apt-get install -y ${need_apt[*]})" >&2
        exit 1
    fi
fi
command -v python3 >/dev/null || { echo "run.sh: python3 is needed for the report" >&2; exit 1; }

if [ "$BUILD" = 1 ]; then
    log "building (release)"
    (cd "$ROOT" && cargo build --release --quiet)
    (cd "$ROOT" && cargo build --release --quiet --manifest-path benches/Cargo.toml --bins)
fi
GL="$ROOT/target/release/git-lease"
BIN="${CARGO_TARGET_DIR:-$HERE/target}/release"
SL="$BIN/sqlite-lease"
POP="$BIN/git-lease-populate"
CONTEND="$BIN/lease-contend"
for b in "$GL" "$SL" "$POP" "$CONTEND"; do [ -x "$b" ] || { echo "run.sh: missing $b" >&2; exit 1; }; done

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
IMAGE=""; MOUNT=""
unmount() {
    if [ -n "$MOUNT" ]; then
        if mountpoint -q "$MOUNT"; then umount "$MOUNT"; fi
        rmdir "$MOUNT"
    fi
    if [ -n "$IMAGE" ]; then rm -f "$IMAGE"; fi
}
if [ "$JOURNALED" = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "run.sh: --journaled mounts a file system: run as root" >&2; exit 1; }
    command -v mkfs.ext4 >/dev/null || { echo "run.sh: --journaled needs mkfs.ext4" >&2; exit 1; }
    IMAGE=$(mktemp "$TMPBASE/git-lease-run.XXXXXX.img")
    MOUNT=$(mktemp -d "$TMPBASE/git-lease-run.XXXXXX.mnt")
    trap unmount EXIT
    truncate -s 16G "$IMAGE"
    # Inode tables and journal written now, not by a kernel thread during the run.
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$IMAGE"
    mount -o loop "$IMAGE" "$MOUNT"
    TMPBASE=$MOUNT
fi
W=$(mktemp -d "$TMPBASE/git-lease-run.XXXXXX")
DAEMON_PID=""
cleanup() {
    if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
    if [ "$KEEP" = 0 ]; then
        rm -rf "$W"
        unmount
    else
        echo "kept $W${MOUNT:+ (mounted from $IMAGE)}" >&2
    fi
}
trap cleanup EXIT

export GIT_LEASE_NOW=1800000000   # the benchmarks' fixed clock (2027-01-15T08:00:00Z)
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
export GIT_CONFIG_NOSYSTEM=1
ZERO=0000000000000000000000000000000000000000
REPORT="$OUT/run.md"

# --- machine ---------------------------------------------------------------------------------
{
    echo "# Whole-process benchmarks ($(date -u +%Y-%m-%dT%H:%MZ))"
    echo
    echo "- machine: $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB memory, $(uname -sr)"
    echo "- scratch: $W on $(df --output=fstype "$W" | tail -1) ($(df --output=source "$W" | tail -1); rotational=$(cat /sys/block/"$(basename "$(df --output=source "$W" | tail -1)")"/queue/rotational 2>/dev/null || echo '?'))"
    echo "- $(git --version), $(rustc --version 2>/dev/null || echo 'rustc ?'), $(hyperfine --version)"
    echo "- git-lease $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo ' (dirty)')"
    echo "- command: benches/run.sh --sizes \"$SIZES\" --rounds $ROUNDS --groups \"$GROUPS_WANTED\"${MOUNT:+ --journaled}"
    echo "- every group: hyperfine in $ROUNDS rounds, the commands' order rotated each round; GIT_LEASE_NOW=$GIT_LEASE_NOW"
    echo
} > "$REPORT"

# Runs hyperfine ROUNDS times over name=command pairs, rotating the order; writes round JSONs
# to $OUT/raw/GROUP.N.json. Usage: alternate GROUP RUNS WARMUP name1 cmd1 name2 cmd2 ...
alternate() {
    local group=$1 runs=$2 warmup=$3; shift 3
    local names=() cmds=()
    while [ $# -gt 0 ]; do names+=("$1"); cmds+=("$2"); shift 2; done
    local k=${#names[@]}
    mkdir -p "$OUT/raw"
    rm -f "$OUT/raw/$group".*.json
    {
        echo '```sh'
        for ((j = 0; j < k; j++)); do echo "# ${names[j]}"; echo "${cmds[j]}"; done
        echo '```'
        echo
    } >> "$REPORT"
    for ((r = 0; r < ROUNDS; r++)); do
        local args=()
        for ((j = 0; j < k; j++)); do
            local v=$(((r + j) % k))
            args+=(-n "${names[v]}" "${cmds[v]}")
        done
        hyperfine --style basic --runs "$runs" --warmup "$warmup" ${PREPARE:+--prepare "$PREPARE"} \
            --export-json "$OUT/raw/$group.$r.json" "${args[@]}" > "$OUT/raw/$group.$r.txt"
    done
}

summarise() { # GROUP TITLE RATIO...
    local group=$1 title=$2; shift 2
    local ratios=()
    for r in "$@"; do ratios+=(--ratio "$r"); done
    python3 "$HERE/report.py" hyperfine --title "$title" "${ratios[@]}" "$OUT"/raw/"$group".*.json >> "$REPORT"
}

counter() { echo 0 > "$W/ctr.$1"; echo "read n < $W/ctr.$1; echo \$((n+1)) > $W/ctr.$1"; }

# --- acquire ---------------------------------------------------------------------------------
if want acquire; then
    log "acquire: one operation per process"
    A="$W/acquire"; mkdir -p "$A"
    git init -q "$A/gl"; git init -q "$A/gf"; git init -q "$A/ur"; git init -q "$A/pl"
    git -C "$A/gf" config lease.fsync true
    C=$(git -C "$A/ur" commit-tree "$(git -C "$A/ur" mktree </dev/null)" -m seed)
    JSON='{\n  "version": 1,\n  "issue": "p%s",\n  "event": "acquire",\n  "holder": "alice@example.com",\n  "token": 1,\n  "acquired_at": "2027-01-15T08:00:00Z",\n  "expires_at": "2027-01-15T09:00:00Z",\n  "at": "2027-01-15T08:00:00Z"\n}\n'
    alternate acquire 15 3 \
        "git-lease acquire" "$(counter gl); exec $GL -C $A/gl acquire g\$n --holder alice@example.com --ttl 1h" \
        "git-lease acquire (lease.fsync=true)" "$(counter gf); exec $GL -C $A/gf acquire f\$n --holder alice@example.com --ttl 1h" \
        "sqlite-lease acquire (NORMAL)" "$(counter sn); export SQLITE_LEASE_SYNC=normal; exec $SL $A/normal.db acquire s\$n alice@example.com 3600" \
        "sqlite-lease acquire (FULL)" "$(counter sf); export SQLITE_LEASE_SYNC=full; exec $SL $A/full.db acquire s\$n alice@example.com 3600" \
        "git update-ref" "$(counter ur); exec git -C $A/ur update-ref refs/leases/u\$n $C $ZERO" \
        "git plumbing pipeline" "$(counter pl); cd $A/pl; b=\$(printf '$JSON' \$n | git hash-object -w --stdin); t=\$(printf '100644 blob %s\\tlease.json\\n' \$b | git mktree); c=\$(git commit-tree \$t -m \"acquire p\$n\"); exec git update-ref refs/leases/p\$n \$c $ZERO"
    summarise acquire "Whole-process acquire of a new issue" \
        "git-lease acquire:sqlite-lease acquire (NORMAL)" \
        "git-lease acquire:sqlite-lease acquire (FULL)" \
        "git-lease acquire:git update-ref" \
        "git-lease acquire:git plumbing pipeline" \
        "git-lease acquire (lease.fsync=true):sqlite-lease acquire (FULL)" \
        "git-lease acquire (lease.fsync=true):git-lease acquire"
    # Blocks of runs of one command each meet the disk in one state; alternated run by run,
    # every command meets each state of it alike.
    log "acquire: alternating run by run"
    {
        echo "### Whole-process acquire of a new issue, alternating run by run"
        echo
        python3 "$HERE/cputime.py" --rounds $((ROUNDS * 100)) --runs 1 --warmup 0 \
            --ratio "git-lease acquire:git update-ref" \
            --ratio "git-lease acquire:sqlite-lease acquire (NORMAL)" \
            --ratio "git-lease acquire:sqlite-lease acquire (FULL)" \
            --ratio "git-lease acquire (lease.fsync true):sqlite-lease acquire (FULL)" \
            "git-lease acquire=$GL -C $A/gl acquire h{n} --holder alice@example.com --ttl 1h" \
            "git-lease acquire (lease.fsync true)=$GL -C $A/gf acquire h{n} --holder alice@example.com --ttl 1h" \
            "sqlite-lease acquire (NORMAL)=SQLITE_LEASE_SYNC=normal $SL $A/normal.db acquire t{n} alice@example.com 3600" \
            "sqlite-lease acquire (FULL)=SQLITE_LEASE_SYNC=full $SL $A/full.db acquire t{n} alice@example.com 3600" \
            "git update-ref=git -C $A/ur update-ref refs/leases/v{n} $C $ZERO"
        echo
    } >> "$REPORT"
    # Sanity: every run made a lease.
    "$GL" -C "$A/gl" list --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)), "git-lease leases written")' >&2
fi

# --- populate (list and scale) ---------------------------------------------------------------
populate() { # SIZE -> $W/list/SIZE.git (work tree repo), $W/list/SIZE.db
    local n=$1 d="$W/list"
    mkdir -p "$d"
    if [ ! -d "$d/$n" ]; then
        log "populating $n leases (80% live)"
        local t0=$(date +%s.%N)
        "$POP" "$d/$n" "$n" 80 gc >&2
        "$SL" populate "$d/$n.db" "$n" 80
        echo "- populated $n leases (git: fast-import + git gc; sqlite: one transaction) in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" >> "$REPORT"
    fi
}

# --- list ------------------------------------------------------------------------------------
if want list; then
    for n in $SIZES; do
        populate "$n"
        R="$W/list/$n"
        mkdir -p "$R/.git/git-lease"
        if [ "$n" -ge 100000 ]; then runs=3; warm=1; elif [ "$n" -ge 10000 ]; then runs=5; warm=2; else runs=10; warm=3; fi
        log "list at $n"
        alternate "list-$n" "$runs" "$warm" \
            "git-lease list" "exec $GL -C $R list" \
            "git-lease list, cold" ": > $R/.git/git-lease/list-cache; exec $GL -C $R list" \
            "sqlite-lease list" "exec $SL $R.db list" \
            "git for-each-ref + cat-file --batch" "git -C $R for-each-ref --format='%(objectname):lease.json' refs/leases | git -C $R cat-file --batch"
        summarise "list-$n" "Whole-process list, $n leases (80% live), after git gc" \
            "git-lease list:sqlite-lease list" \
            "git-lease list:git for-each-ref + cat-file --batch" \
            "git-lease list, cold:sqlite-lease list" \
            "git-lease list, cold:git for-each-ref + cat-file --batch"
        # Output sanity: the same number of live leases.
        gl_rows=$("$GL" -C "$R" list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
        sl_rows=$("$SL" "$R.db" list | wc -l)
        echo "Live leases listed: git-lease $gl_rows, sqlite-lease $sl_rows." >> "$REPORT"
        echo >> "$REPORT"
        # Peak RSS, 3 runs each, the largest.
        {
            echo "| command ($n leases) | peak RSS (max of 3 runs) |"
            echo "|---|---:|"
            for spec in "git-lease list@@$GL -C $R list" \
                        "git-lease list, cold@@: > $R/.git/git-lease/list-cache; $GL -C $R list" \
                        "sqlite-lease list@@$SL $R.db list" \
                        "git for-each-ref + cat-file --batch@@git -C $R for-each-ref --format='%(objectname):lease.json' refs/leases | git -C $R cat-file --batch"; do
                name=${spec%%@@*}; cmd=${spec#*@@}
                peak=0
                for i in 1 2 3; do
                    kb=$( { /usr/bin/time -v sh -c "$cmd" >/dev/null; } 2>&1 | awk -F: '/Maximum resident set size/{gsub(/ /,"",$2); print $2}')
                    [ "$kb" -gt "$peak" ] && peak=$kb
                done
                echo "| $name | $(python3 -c "print(f'{$peak/1024:.1f} MiB')") |"
            done
            echo
        } >> "$REPORT"
    done
fi

# --- scale -----------------------------------------------------------------------------------
if want scale; then
    scale_args=()
    first=""
    for n in $SIZES; do
        populate "$n"
        # A copy, so the list repositories stay as they were.
        if [ ! -d "$W/scale/$n" ]; then mkdir -p "$W/scale"; cp -a "$W/list/$n" "$W/scale/$n"; fi
        scale_args+=("acquire, $n existing" "$(counter "sc$n"); exec $GL -C $W/scale/$n acquire new\$n --holder alice@example.com --ttl 1h")
        [ -z "$first" ] && first=$n
    done
    log "scale: acquire with $SIZES existing leases"
    alternate scale 15 3 "${scale_args[@]}"
    ratios=()
    for n in $SIZES; do [ "$n" != "$first" ] && ratios+=("acquire, $n existing:acquire, $first existing"); done
    summarise scale "Whole-process git-lease acquire of a new issue, by number of existing leases (packed by git gc)" "${ratios[@]}"
fi

# --- contention ------------------------------------------------------------------------------
if want contention; then
    log "contention: 2, 4, 8 processes x $CONTEND_OPS attempts on one issue"
    TSV="$OUT/raw/contention.tsv"; mkdir -p "$OUT/raw"; : > "$TSV"
    check_tokens() { # FILE_OF_TOKENS WON -> ok|bad
        local dups count
        dups=$(sort -n "$1" | uniq -d | wc -l)
        count=$(wc -l < "$1")
        if [ "$dups" = 0 ] && [ "$count" = "$2" ] && [ "$(sort -n "$1" | tail -1)" = "$2" ]; then echo ok; else echo bad; fi
    }
    for rep in 1 2 3; do
        for p in 2 4 8; do
            for kind in git sqlite; do
                d="$W/contend/$kind-$p-$rep"; mkdir -p "$d"
                if [ "$kind" = git ]; then git init -q "$d/repo"; target="$d/repo"; else target="$d/leases.db"; "$SL" "$target" list >/dev/null; fi
                t0=$(date +%s%N)
                pids=()
                for ((w = 1; w <= p; w++)); do
                    "$CONTEND" "$kind" "$target" hot "w$w" "$CONTEND_OPS" > "$d/w$w.out" 2> "$d/w$w.err" &
                    pids+=($!)
                done
                for pid in "${pids[@]}"; do wait "$pid"; done
                t1=$(date +%s%N)
                secs=$(python3 -c "print(($t1 - $t0) / 1e9)")
                cat "$d"/w*.out | awk '/^token /{print $2}' > "$d/tokens"
                won=$(cat "$d"/w*.out | awk '/^summary/{split($3,a,"="); s+=a[2]} END{print s+0}')
                trans=$(cat "$d"/w*.out | awk '/^summary/{split($6,a,"="); s+=a[2]} END{print s+0}')
                errs=$(cat "$d"/w*.out | awk '/^summary/{split($5,a,"="); s+=a[2]} END{print s+0}')
                ok=$(check_tokens "$d/tokens" "$won")
                if [ "$kind" = git ]; then
                    # The chain itself: one commit per transition, acquire tokens 1..won, no repeat.
                    git -C "$target" log --format=%s refs/leases/hot | awk '$1=="acquire"{for(i=1;i<=NF;i++) if($i=="token") print $(i+1)}' > "$d/chain-tokens"
                    chain_len=$(git -C "$target" rev-list --count refs/leases/hot)
                    [ "$(check_tokens "$d/chain-tokens" "$won")" = ok ] && [ "$chain_len" = "$trans" ] || ok=bad
                    name=git-lease
                else
                    name="sqlite NORMAL"
                    name=sqlite-normal
                fi
                [ "$errs" = 0 ] || ok="$ok,errors=$errs"
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$p" "$rep" "$secs" "$trans" "$ok" >> "$TSV"
            done
        done
    done
    {
        echo "### Contention: P processes, each $CONTEND_OPS times acquire-then-release-if-won on one issue"
        echo
        echo '```sh'
        echo "lease-contend git REPO hot wI $CONTEND_OPS    # x P, started together (in-process loop per process)"
        echo "lease-contend sqlite DB hot wI $CONTEND_OPS   # SQLITE_LEASE_SYNC=normal"
        echo "git log --format=%s refs/leases/hot           # acquire tokens 1..won, each once; one commit per transition"
        echo '```'
        echo
        python3 "$HERE/report.py" contention "$TSV"
    } >> "$REPORT"
fi

# --- remote ----------------------------------------------------------------------------------
if want remote; then
    log "remote: git daemon on 127.0.0.1"
    RM="$W/remote"; mkdir -p "$RM/base"
    git init -q --bare "$RM/base/leases.git"
    git init -q "$RM/local"
    "$POP" "$RM/pusher" 400 100 refs >&2   # 400 distinct lease commits to push, one per run
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
    git daemon --reuseaddr --listen=127.0.0.1 --port="$PORT" --base-path="$RM/base" \
        --export-all --enable=receive-pack "$RM/base" 2> "$RM/daemon.log" &
    DAEMON_PID=$!
    URL="git://127.0.0.1:$PORT/leases.git"
    for _ in $(seq 50); do git ls-remote "$URL" >/dev/null 2>&1 && break; sleep 0.1; done
    git ls-remote "$URL" >/dev/null
    runs=5; [ "$QUICK" = 1 ] && runs=4
    alternate remote "$runs" 1 \
        "git-lease acquire --remote" "$(counter ra); exec $GL -C $RM/local acquire r\$n --holder alice@example.com --ttl 1h --remote $URL" \
        "git push (one ref)" "$(counter rp); exec git -C $RM/pusher push -q $URL refs/leases/i\$n:refs/pushed/i\$n"
    summarise remote "Remote acquire vs one plain push, git daemon on 127.0.0.1" \
        "git-lease acquire --remote:git push (one ref)"
    echo "Remote refs after the run: $(git ls-remote "$URL" 'refs/leases/*' | wc -l) leases, $(git ls-remote "$URL" 'refs/pushed/*' | wc -l) plain pushes." >> "$REPORT"
    echo >> "$REPORT"
    kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=""
fi

# --- reftable --------------------------------------------------------------------------------
if want reftable; then
    log "reftable: acquire, renew and list, files vs reftable"
    RT="$W/reftable"; mkdir -p "$RT"
    git init -q --ref-format=files "$RT/ff"
    git init -q --ref-format=reftable "$RT/rt"
    git init -q --ref-format=reftable "$RT/rf"
    git init -q --ref-format=reftable "$RT/ur"
    git -C "$RT/rf" config lease.fsync true
    C=$(git -C "$RT/ur" commit-tree "$(git -C "$RT/ur" mktree </dev/null)" -m seed)
    for r in ff rt; do "$GL" -C "$RT/$r" acquire hot --holder alice@example.com --ttl 1h >/dev/null; done
    # A renew writes only when the expiry moves: each run asks for a minute more.
    alternate reftable-acquire 15 3 \
        "acquire, files" "$(counter rff); exec $GL -C $RT/ff acquire g\$n --holder alice@example.com --ttl 1h" \
        "acquire, reftable" "$(counter rrt); exec $GL -C $RT/rt acquire g\$n --holder alice@example.com --ttl 1h" \
        "acquire, reftable (lease.fsync=true)" "$(counter rrf); exec $GL -C $RT/rf acquire g\$n --holder alice@example.com --ttl 1h" \
        "renew, files" "$(counter nff); exec $GL -C $RT/ff renew hot --holder alice@example.com --ttl \$((n + 60))m" \
        "renew, reftable" "$(counter nrt); exec $GL -C $RT/rt renew hot --holder alice@example.com --ttl \$((n + 60))m" \
        "git update-ref, reftable" "$(counter rur); exec git -C $RT/ur update-ref refs/leases/u\$n $C $ZERO" \
        "git for-each-ref of one ref, reftable" "exec git -C $RT/rt for-each-ref refs/leases/hot" \
        "sqlite-lease acquire (NORMAL)" "$(counter rsn); export SQLITE_LEASE_SYNC=normal; exec $SL $RT/normal.db acquire s\$n alice@example.com 3600"
    summarise reftable-acquire "Whole-process acquire and renew, files vs reftable" \
        "acquire, reftable:acquire, files" \
        "renew, reftable:renew, files" \
        "acquire, reftable:sqlite-lease acquire (NORMAL)" \
        "acquire, reftable:git update-ref, reftable" \
        "acquire, reftable (lease.fsync=true):acquire, reftable"
    for r in ff rt rf; do
        echo "- $r: $("$GL" -C "$RT/$r" list --all --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') leases, $(git -C "$RT/$r" rev-parse --show-ref-format), verify: $("$GL" -C "$RT/$r" verify | head -1)" >> "$REPORT"
    done
    echo >> "$REPORT"
    for n in $SIZES; do
        populate "$n"
        F="$RT/list-$n-files"; T="$RT/list-$n-reftable"
        if [ ! -d "$T" ]; then
            cp -a "$W/list/$n" "$F"; cp -a "$W/list/$n" "$T"
            git -C "$T" refs migrate --ref-format=reftable
            mkdir -p "$F/.git/git-lease" "$T/.git/git-lease"
        fi
        if [ "$n" -ge 100000 ]; then runs=3; warm=1; elif [ "$n" -ge 10000 ]; then runs=5; warm=2; else runs=10; warm=3; fi
        log "reftable: list at $n"
        alternate "reftable-list-$n" "$runs" "$warm" \
            "list, files" "exec $GL -C $F list" \
            "list, reftable" "exec $GL -C $T list" \
            "list, files, cold" ": > $F/.git/git-lease/list-cache; exec $GL -C $F list" \
            "list, reftable, cold" ": > $T/.git/git-lease/list-cache; exec $GL -C $T list" \
            "git for-each-ref refs/leases/, reftable" "exec git -C $T for-each-ref refs/leases/" \
            "sqlite-lease list" "exec $SL $W/list/$n.db list"
        summarise "reftable-list-$n" "Whole-process list, $n leases (80% live), files vs reftable" \
            "list, reftable:list, files" \
            "list, reftable, cold:list, files, cold" \
            "list, reftable:sqlite-lease list"
        echo "Live leases listed: files $("$GL" -C "$F" list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'), reftable $("$GL" -C "$T" list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')." >> "$REPORT"
        echo >> "$REPORT"
    done
fi

# --- gc --------------------------------------------------------------------------------------
if want gc; then
    log "gc: git lease gc on 2000 leases written loose"
    G="$W/gc"; mkdir -p "$G"
    git init -q "$G/template"
    git -C "$G/template" config lease.gcAuto 0   # keep it loose while it is made
    # One issue per command: single claims write loose objects (a multi-issue claim would
    # write one pack).
    for i in $(seq 1 2000); do
        "$GL" -C "$G/template" acquire "b$i" --holder alice@example.com --ttl 1h >/dev/null
    done
    git -C "$G/template" config --unset lease.gcAuto
    echo "- gc template: 2000 leases by \`git-lease acquire\` (one per command): $(git -C "$G/template" count-objects | cut -d, -f1) loose, $(find "$G/template/.git/refs/leases" -type f | wc -l) loose lease refs" >> "$REPORT"
    PREPARE="rm -rf $G/work && cp -a $G/template $G/work" alternate gc 3 1 \
        "git-lease gc" "exec $GL -C $G/work gc" \
        "git gc --quiet" "exec git -C $G/work gc --quiet"
    summarise gc "git lease gc vs git gc on 2000 leases written loose (fresh copy before each run)" \
        "git-lease gc:git gc --quiet"
    echo "Before each run: \`rm -rf $G/work && cp -a $G/template $G/work\` (hyperfine --prepare, not timed)." >> "$REPORT"
    echo >> "$REPORT"
    cp -a "$G/template" "$G/loose"; cp -a "$G/template" "$G/packed"
    "$GL" -C "$G/packed" gc >/dev/null
    mkdir -p "$G/loose/.git/git-lease" "$G/packed/.git/git-lease"
    alternate gc-list 10 2 \
        "git-lease list --all, cold, loose" ": > $G/loose/.git/git-lease/list-cache; exec $GL -C $G/loose list --all" \
        "git-lease list --all, cold, after git lease gc" ": > $G/packed/.git/git-lease/list-cache; exec $GL -C $G/packed list --all"
    summarise gc-list "Cold list (no list cache) of 2000 leases, loose vs packed by git lease gc" \
        "git-lease list --all, cold, loose:git-lease list --all, cold, after git lease gc"
fi

log "report: $REPORT"
cat "$REPORT"
