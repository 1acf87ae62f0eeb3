#!/usr/bin/env bash
# bench-catchup.sh RECORDS [MESSAGES PARTITIONS]: three nodes; produce
# RECORDS random 1 KB records (and push MESSAGES random 64-byte messages
# over PARTITIONS partitions of one queue, 1,000 partitions a push), stop a
# follower, delete its data directory, start it again and time how long it
# takes to apply everything the leader has committed (a snapshot with the
# segment files, then the log after it). Each node serves /debug/pprof on
# 127.0.0.1:1606N. Examples (2 GB; 1 GB and 3 M messages on a million
# partitions):
#   scripts/bench-catchup.sh 2000000
#   scripts/bench-catchup.sh 1000000 3000000 1000000
set -euo pipefail
records=${1:?records}
messages=${2:-0}
partitions=${3:-1}
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/waggle-catchup.XXXXXX)
bin=$work/waggle
go build -o "$bin" ./cmd/waggle
peers="1=127.0.0.1:17401,2=127.0.0.1:17402,3=127.0.0.1:17403"
declare -A pid
start() {
  "$bin" serve --data-dir "$work/n$1" --node-id "$1" --http-addr "127.0.0.1:1663$1" --kafka-addr "127.0.0.1:1909$1" \
    --raft-addr "127.0.0.1:1740$1" --pprof-addr "127.0.0.1:1606$1" --peers "$peers" >>"$work/n$1.log" 2>&1 &
  pid[$1]=$!
}
trap 'kill ${pid[@]} 2>/dev/null; wait; rm -rf "$work"' EXIT
# raft N FIELD prints node N's raft FIELD from /health, or nothing.
raft() { curl -s "http://127.0.0.1:1663$1/health" | python3 -c "import json,sys; print(json.load(sys.stdin)['raft']['$2'])" 2>/dev/null || true; }

for i in 1 2 3; do start $i; done
for _ in $(seq 200); do [ "$(raft 1 role)" = leader ] || [ "$(raft 2 role)" = leader ] || [ "$(raft 3 role)" = leader ] && break; sleep 0.1; done
"$bin" bench kafka --brokers 127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093 --produce --records "$records" --size 1024 2>"$work/bench.err" || { tail -5 "$work/bench.err" >&2; exit 1; }
if [ "$messages" -gt 0 ]; then
  "$bin" bench http --server http://127.0.0.1:16631 --push --messages "$messages" --partitions "$partitions" \
    --batch 1000 --clients 4 --size 64 --keep 2>"$work/bench.err" || { grep -v '^\s*[0-9]' "$work/bench.err" | sort | uniq -c | sort -rn | head -5 >&2; exit 1; }
fi
leader= follower=
for i in 1 2 3; do
  if [ "$(raft $i role)" = leader ]; then leader=$i; elif [ -z "$follower" ]; then follower=$i; fi
done
[ -n "$leader" ] && [ -n "$follower" ] || { echo "no leader" >&2; exit 1; }
echo "leader $leader; wiping follower $follower"
du -sm "$work/n$leader/state/segments" "$work/n$leader/raft"
kill "${pid[$follower]}"; wait "${pid[$follower]}" 2>/dev/null || true
rm -rf "$work/n$follower"
commit=$(raft "$leader" commit)
t=$(date +%s.%N)
start "$follower"
for _ in $(seq 6000); do
  applied=$(raft "$follower" applied)
  [ -n "$applied" ] && [ "$applied" -ge "$commit" ] && break
  sleep 0.1
done
echo "caught up to commit $commit in $(echo "$(date +%s.%N) - $t" | bc) s"
du -sm "$work/n$follower"
# How it caught up: a snapshot installed (then the log after it), or the log alone.
grep -i -E 'installed remote snapshot|copied to local snapshot' "$work/n$follower.log" || echo "no snapshot installed: the log alone"
