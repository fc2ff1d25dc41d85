#!/usr/bin/env bash
# scripts/fabric-testbed.sh's contract: hosts get their names, addresses and the switch map;
# the first failing rank's exit code comes back; a timeout returns 124; and nothing is
# left behind (no namespace, no rank process) in any case. Exits 77 (skip) where network
# namespaces cannot be created.
set -u
testbed=$(dirname "$0")/../../scripts/fabric-testbed.sh
name=tbt$$
name=${name:0:6}
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi; }
leftovers() { ip netns list 2>/dev/null | grep -c "^$name-" || true; }

out=$("$testbed" --name "$name" --hosts 4 --leaves 2 --numbering round-robin -- \
  sh -c 'echo "rank $RANK of $WORLD_SIZE is $TEMPO_HOSTNAME at $(ip -4 -o addr show eth0 | awk "{print \$4}") master $MASTER_ADDR"; cat "$TEMPO_TOPO_FILE"' 2>&1)
rc=$?
[ "$rc" = 77 ] && { echo "$out"; exit 77; }
echo "$out"
check "a clean run exits 0" '[ "$rc" = 0 ]'
check "rank 0 is node01 at 10.77.0.1" 'grep -q "rank 0 of 4 is node01 at 10.77.0.1/24 master 10.77.0.1" <<<"$out"'
check "the switch map names both leaves and the spine" \
  'grep -q "SwitchName=leaf0 Nodes=node\[01-02\]" <<<"$out" && grep -q "SwitchName=leaf1 Nodes=node\[03-04\]" <<<"$out" && grep -q "SwitchName=spine Switches=leaf\[0-1\]" <<<"$out"'
check "nothing left after a clean run" '[ "$(leftovers)" = 0 ]'

"$testbed" --name "$name" --hosts 2 --leaves 1 -- sh -c '[ "$RANK" = 1 ] && exit 3; sleep 30.25' > /dev/null 2>&1
rc=$?
check "the failing rank's exit code (3) comes back" '[ "$rc" = 3 ]'
check "nothing left after a failure" '[ "$(leftovers)" = 0 ] && ! pgrep -f "sleep 30.25" > /dev/null'

"$testbed" --name "$name" --hosts 2 --leaves 1 --timeout 2 -- sleep 60.25 > /dev/null 2>&1
rc=$?
check "a run past --timeout returns 124" '[ "$rc" = 124 ]'
check "nothing left after a timeout" '[ "$(leftovers)" = 0 ] && ! pgrep -x -f "sleep 60.25" > /dev/null'

logs=$(mktemp -d)
"$testbed" --name "$name" --hosts 2 --leaves 1 --ranks-per-host 2 --keep-logs "$logs" -- \
  sh -c 'echo "rank $RANK of $WORLD_SIZE local $LOCAL_RANK of $LOCAL_WORLD_SIZE on $TEMPO_HOSTNAME"' > /dev/null 2>&1
check "--ranks-per-host 2 puts consecutive ranks on one host" \
  'grep -q "rank 1 of 4 local 1 of 2 on node01" "$logs/rank1.log" && grep -q "rank 2 of 4 local 0 of 2 on node02" "$logs/rank2.log"'
rm -rf "$logs"

logs=$(mktemp -d)
"$testbed" --name "$name" --hosts 2 --leaves 2 --nics 2 --keep-logs "$logs" -- \
  sh -c 'echo "rank $RANK nics $TEMPO_NIC eth1 $(ip -4 -o addr show eth1 | awk "{print \$4}")"; ip route get 10.77.1.2' > /dev/null 2>&1
rc=$?
check "--nics 2 gives every host eth0 and eth1, on rails of their own, named in TEMPO_NIC" \
  '[ "$rc" = 0 ] && grep -q "rank 0 nics eth0,eth1 eth1 10.77.1.1/24" "$logs/rank0.log" && grep -q "10.77.1.2 dev eth1" "$logs/rank0.log"'
check "nothing left after a run with two rails" '[ "$(leftovers)" = 0 ]'
rm -rf "$logs"

"$testbed" --hosts 3 --leaves 2 -- true > /dev/null 2>&1
check "hosts that do not divide into leaves are refused (exit 2)" '[ $? = 2 ]'
exit $((fails > 0))
