#!/usr/bin/env bash
# bench-volume.sh [kafka|http] RECORDS SIZE: one node on a fresh data
# directory; produce RECORDS random records of SIZE bytes with `waggle bench
# kafka` (or push them over HTTP in batches of 100 from 16 clients with
# `waggle bench http`, dedup on, into one queue of eight partitions); both
# print the first and last minute's rates. Then report the server's peak RSS
# and Go heap and the bytes on disk, read everything back (kcat; HTTP: not
# read), take a snapshot and restart, timing each. WAGGLE_VOLUME_PPROF=ADDR
# serves the node's pprof there (e.g. 127.0.0.1:6060). Examples:
#   scripts/bench-volume.sh kafka 10000000 1024    # 10 GB of Kafka records
#   scripts/bench-volume.sh http 20000000 256      # 20 M HTTP messages held
set -euo pipefail
mode=kafka
if [ "${1:-}" = kafka ] || [ "${1:-}" = http ]; then mode=$1; shift; fi
records=${1:?records}; size=${2:?bytes per record}
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/waggle-volume.XXXXXX)
bin=$work/waggle
go build -o "$bin" ./cmd/waggle
http=127.0.0.1:16632; kafka=127.0.0.1:19092
pid=
start_node() {
  "$bin" serve --data-dir "$work/data" --node-id 1 --http-addr $http --kafka-addr $kafka --raft-addr 127.0.0.1:17400 ${WAGGLE_VOLUME_PPROF:+--pprof-addr "$WAGGLE_VOLUME_PPROF"} >>"$work/node.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do curl -sf "http://$http/health" >/dev/null && return; sleep 0.05; done
  echo "the node did not come up; see $work/node.log" >&2; exit 1
}
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; [ -n "${WAGGLE_VOLUME_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
secs() { echo "$(date +%s.%N) - $1" | bc; }

start_node
peak=$work/peak
( while kill -0 $pid 2>/dev/null; do awk '/VmRSS/{print $2}' /proc/$pid/status; sleep 0.2; done | sort -n | tail -1 >"$peak" ) &
monitor=$!
if [ $mode = kafka ]; then
  "$bin" bench kafka --brokers $kafka --produce --records "$records" --size "$size" --topic bench 2>/dev/null
else
  "$bin" bench http --server "http://$http" --push --messages "$records" --size "$size" --queue held --keep 2>"$work/bench.err" || { echo "bench failed:"; sort "$work/bench.err" | uniq -c | sort -rn | head -5; }
fi
curl -s "http://$http/metrics" | grep -E '^(go_memstats_heap_inuse_bytes|process_resident_memory_bytes) '
awk '/^write_bytes/{printf "the node wrote %d MiB to disk\n", $2/1048576}' /proc/$pid/io
du -sm "$work/data/state/segments" "$work/data/raft"; du -sm --exclude=segments "$work/data/state"
if [ $mode = kafka ]; then
  t=$(date +%s.%N)
  bytes=$(kcat -b $kafka -C -t bench -o beginning -e -q -X fetch.max.bytes=52428800 | wc -c)
  echo "kcat read $bytes bytes in $(secs "$t") s"
fi
t=$(date +%s.%N)
curl -sf -X POST "http://$http/api/v1/cluster/snapshot" >/dev/null
echo "snapshot: $(secs "$t") s"
kill $pid; wait $pid 2>/dev/null || true
wait $monitor
echo "peak RSS while serving: $(( $(cat "$peak") / 1024 )) MiB"
t=$(date +%s.%N)
start_node
echo "restart to /health 200: $(secs "$t") s"
