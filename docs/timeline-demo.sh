#!/bin/sh
# Draws docs/timeline.png, the README's picture: a small history of a few agents made with
# git-lease itself at pinned instants (GIT_LEASE_NOW), drawn by `git lease timeline` and
# photographed by headless Chromium with one tenure's details shown (`#<issue>:<token>`). Run from the repository's root, with git-lease on PATH:
#   cargo build --release && PATH=$PWD/target/release:$PATH sh docs/timeline-demo.sh
set -eu
out=$(pwd)/docs/timeline.png
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git init -q "$work/repo"
cd "$work/repo"
at() { day=2026-12-02T; t=$1; shift; GIT_LEASE_NOW="$day$t:00Z" git lease "$@" >/dev/null || true; }
at 08:00 acquire gh/101 --holder agent-ada --ttl 1h --note 'flaky parser test' --task CI-4411
at 08:40 renew gh/101 --holder agent-ada --ttl 1h
at 09:30 renew gh/101 --holder agent-ada --ttl 1h
at 10:05 complete gh/101 --holder agent-ada
at 08:10 acquire gh/102 --holder agent-bo --ttl 45m --task CI-4412
at 09:20 acquire gh/102 --holder agent-cy --ttl 2h --note 'took over: bo went quiet'
at 10:10 renew gh/102 --holder agent-cy --ttl 2h
at 11:05 abandon gh/102 --holder agent-cy
at 11:20 acquire gh/102 --holder agent-ada --ttl 3h --note 'second attempt'
at 08:20 acquire gh/103 --holder agent-dee --ttl 30m
at 08:45 release gh/103 --holder agent-dee
at 09:00 acquire gh/103 --holder agent-eli --ttl 2h
at 10:30 revoke gh/103 --holder ops@example.com --reason 'wrong branch'
at 10:45 acquire gh/103 --holder agent-dee --ttl 1h
at 11:35 complete gh/103 --holder agent-dee
at 09:10 acquire gh/104 --holder agent-bo --ttl 1h
at 10:15 release gh/104 --holder agent-fay
at 10:30 acquire gh/104 --holder agent-fay --ttl 2h
at 11:15 renew gh/104 --holder agent-fay --ttl 2h
at 08:30 acquire gh/105 --holder agent-eli --ttl 40m
at 09:05 complete gh/105 --holder agent-eli
at 09:15 acquire gh/105 --holder agent-bo --ttl 30m
at 10:50 acquire gh/110 --holder agent-cy --ttl 1h
at 11:40 renew gh/110 --holder agent-cy --ttl 1h
GIT_LEASE_NOW=2026-12-02T12:00:00Z git lease timeline -o "$work/timeline.html" >/dev/null
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$work/profile" --window-size=1100,550 \
  --screenshot="$out" "file://$work/timeline.html#gh/102:2" 2>/dev/null
echo "wrote $out"
