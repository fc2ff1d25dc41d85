#!/usr/bin/env bash
# TEMPO_TRACE: every rank writes P.json (Chrome trace events, a closed JSON document) and
# P.jsonl (a "comm" line naming the rank, then one "coll" line per collective with its
# sequence number, in order from 0); both ranks trace the same collectives.
#
# usage: trace_test.sh <tempo-run> <all_reduce_perf>
set -euo pipefail
run=$1 perf=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/trace_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "trace_test: $*" >&2; exit 1; }
TEMPO_TRACE="$dir/trace.%r.json" "$run" -n 2 --timeout 100 -- "$perf" -b 8 -e 4096 -f 4 -n 5 -w 1 -c 1 \
  > "$dir/out" 2>&1 || { cat "$dir/out"; fail "all_reduce_perf failed"; }
counts=()
for r in 0 1; do
  f=$dir/trace.$r
  [ -s "$f.json" ] || fail "$f.json is missing or empty"
  [ -s "$f.jsonl" ] || fail "$f.jsonl is missing or empty"
  head -1 "$f.jsonl" | grep -q "\"type\":\"comm\".*\"rank\":$r,\"nranks\":2" || fail "$f.jsonl: no comm line for rank $r"
  [ "$(tail -1 "$f.json")" = "]}" ] || fail "$f.json is not closed"
  grep -q '"traceEvents":\[' "$f.json" || fail "$f.json has no traceEvents"
  # coll lines: seq 0, 1, 2, ... in order, each with arrival <= exit.
  awk -F'[:,]' '/"type":"coll"/ {
      for (i = 1; i < NF; i++) { if ($i == "\"seq\"") seq = $(i + 1); if ($i == "\"t_arr\"") a = $(i + 1); if ($i == "\"t_exit\"") e = $(i + 1) }
      if (seq != n) { print "seq " seq " where " n " was expected"; exit 1 }
      if (a + 0 > e + 0) { print "seq " seq " exits before it arrives"; exit 1 }
      n++ }
      END { if (n == 0) { print "no collectives"; exit 1 } }' "$f.jsonl" || fail "$f.jsonl: bad coll lines"
  counts+=("$(grep -c '"type":"coll"' "$f.jsonl")")
  [ "$(grep -c '"cat":"coll"' "$f.json")" = "${counts[-1]}" ] || fail "$f.json and $f.jsonl disagree"
done
[ "${counts[0]}" = "${counts[1]}" ] || fail "rank 0 traced ${counts[0]} collectives, rank 1 ${counts[1]}"
echo "trace_test: OK: 2 ranks, ${counts[0]} collectives each, in order"
