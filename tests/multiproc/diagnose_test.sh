#!/usr/bin/env bash
# tempo-diagnose end to end: 4 ranks of bench/train_emulator, rank 3 computing 1.5x as
# long, traced with TEMPO_TRACE; tempo-diagnose must read every rank's trace, name rank 3
# and label the run "locality variance" (exit 1: a failure mode found), give the rate of
# the data from each topology tier that sent any and rank the links, align the ranks on rank 0's clock
# (every rank's offset traced, within its guaranteed bound), merge every rank into one
# Chrome trace, and write a
# self-contained HTML report (inline SVG, no external assets).
#
# usage: diagnose_test.sh <tempo-run> <train_emulator> <tempo-diagnose>
set -euo pipefail
run=$1 emu=$2 diag=$3
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/../fixtures
dir=$(mktemp -d "${TMPDIR:-/tmp}/diagnose_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "diagnose_test: $*" >&2; exit 1; }
# The ranks sit on 4 emulated hosts, round-robin over the 2 leaves of a switch map, so
# that data comes from peers of two tiers (leaf and fabric).
TEMPO_TOPO_FILE="$fixtures/slurm/two-level.conf" TEMPO_TRACE="$dir/rank%r" \
  "$run" -n 4 --timeout 200 -- "$here/round_robin_hosts.sh" "$emu" --modes observe --rounds 1 --warmup 10 --iters 80 \
  --compute-us 3000 --noise normal:0.05 --straggler 3:1.5 --buckets 2 --bucket-bytes 65536 > "$dir/emu.out" 2>&1 ||
  { cat "$dir/emu.out"; fail "train_emulator failed"; }
rc=0
"$diag" --html "$dir/report.html" --chrome "$dir/merged.json" "$dir"/rank*.jsonl > "$dir/diag.out" 2>&1 || rc=$?
cat "$dir/diag.out"
[ "$rc" = 1 ] || fail "tempo-diagnose exited $rc, expected 1 (a failure mode found)"
grep -q "diagnosis: locality variance" "$dir/diag.out" || fail "not labelled locality variance"
grep -qE "rank 3 \([^)]*\) was last" "$dir/diag.out" || fail "rank 3 not named as the last arriver"
# Two equal buckets repeat every bucket; the emulator declares 2 per iteration
# (tempoCommSetIterationPeriod), the trace carries it, and the report counts by it.
grep -qE "iterations: [0-9]+ of 2 collectives" "$dir/diag.out" || fail "the declared iteration period was not used"
grep -qE "^  leaf +[0-9]+ " "$dir/diag.out" && grep -qE "^  fabric +[0-9]+ " "$dir/diag.out" ||
  fail "no rates for the leaf and fabric tiers"
# Per-peer flows: every rank's collectives say which peers sent it data; the report ranks
# the links.
for r in 0 1 2 3; do
  grep -qE '"rx_peers":\[\[[0-3],"(host|leaf|fabric)",' "$dir/rank$r.jsonl" || fail "rank $r traced no per-peer flows"
  ! grep -qE '"rx_peers":\[(\[[0-9]+,[^]]*\],)*\['"$r"',' "$dir/rank$r.jsonl" || fail "rank $r received from itself"
done
grep -qE "^  slowest links +tier" "$dir/diag.out" || fail "no link table"
# Clock offsets: each host's leader probed rank 0; on one machine the true offset is 0,
# and the estimate's bound is guaranteed (no message arrives before it is sent), so every
# rank's |offset| is within its error.
for r in 0 1 2 3; do
  grep -qE '^\{"type":"clock","offset":-?[0-9]+,"error":[0-9]+' "$dir/rank$r.jsonl" || fail "rank $r traced no clock offset"
  awk -F'[:,}]' '/"type":"clock"/ { o = $4 + 0; e = $6 + 0; if (o < 0) o = -o; if (o > e) exit 1 }' "$dir/rank$r.jsonl" ||
    fail "rank $r: clock offset outside its own bound: $(grep '"clock"' "$dir/rank$r.jsonl")"
done
grep -q '"type":"clock","offset":0,"error":0' "$dir/rank0.jsonl" || fail "rank 0 is not its own reference"
grep -q "clocks: every rank's offset to rank 0 known" "$dir/diag.out" || fail "the report did not use the clock offsets"
# The merged Chrome trace: one process per rank, every collective of every rank, closed.
for r in 0 1 2 3; do
  grep -q "\"name\":\"rank $r (node" "$dir/merged.json" || fail "merged.json has no process for rank $r"
done
colls=$(cat "$dir"/rank*.jsonl | grep -c '"type":"coll"')
[ "$(grep -c '"cat":"coll"' "$dir/merged.json")" = "$colls" ] || fail "merged.json does not hold all $colls collectives"
[ "$(tail -1 "$dir/merged.json")" = "]}" ] || fail "merged.json is not closed"
grep -q "<svg" "$dir/report.html" || fail "the HTML report has no SVG"
! grep -qE "src=|href=|<link|<script" "$dir/report.html" || fail "the HTML report refers to external assets"
# Bad input: a missing rank is refused with exit 2 and a reason.
rc=0
"$diag" "$dir"/rank0.jsonl > "$dir/one.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "give every rank's file" "$dir/one.out" || { cat "$dir/one.out"; fail "a missing rank was not refused"; }
echo "diagnose_test: OK"
