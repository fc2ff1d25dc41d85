#!/usr/bin/env bash
# fabric-testbed.sh: an emulated cluster in network namespaces on one machine, for
# measuring what the fabric does to collectives.
#
#   scripts/fabric-testbed.sh [options] -- <command> [args...]
#
# Layout: H hosts (namespaces <name>-h0 ..) on L leaf switches (Linux bridges in the
# namespace <name>-sw), the leaves joined by a spine bridge through one uplink each. Every
# link is rate-limited in both directions with `tc tbf`: host links at --host-rate, uplinks
# at (hosts per leaf x host rate / --oversub), so with --oversub 4 a leaf's hosts together
# can send four times what its uplink carries. Hosts are named node01..nodeHH (4 per leaf
# by default, as in tests/fixtures/slurm/two-level.conf) and the matching Slurm
# topology.conf is written and exported as TEMPO_TOPO_FILE.
#
# The command runs --ranks-per-host times per host (default once), launched through the
# environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=rank 0's address, TEMPO_HOSTNAME;
# the ranks of a host are consecutive and share its namespace), with
# NCCL_SOCKET_IFNAME and TEMPO_NIC set to the host's link (eth0) and TEMPO_NET_MBITS to its
# rate (for the tuner's cost model) unless the caller set them. With --nics K each host has
# K links, eth0..eth<K-1>, each on a rail of its own (rail k: its own leaf bridges, spine and
# uplinks, subnet 10.77.k.0/24, every link limited as rail 0's), as in rail-optimised
# clusters, and TEMPO_NIC lists them all. Ranks are numbered --numbering block (rank r on host r) or round-robin
# (rank r on leaf r % L). Rank 0's output is printed; every rank's is kept in the work
# directory, and the last lines of a failing rank's are printed. The exit code is the
# first failing rank's, 124 on --timeout, or 77 (a skip, for ctest) when namespaces
# cannot be created. Everything is torn down on exit, failure and interruption included.
#
# Options (defaults in brackets):
#   --hosts H [8]   --leaves L [2]   --host-rate R [400mbit]   --oversub X [4]
#   --numbering block|round-robin [block]   --name N [tb, at most 6 characters]
#   --ranks-per-host K [1]   --nics K [1]   --timeout S [600]   --keep-logs DIR (copy the rank logs there)
set -euo pipefail

hosts=8 leaves=2 host_rate=400mbit oversub=4 numbering=block name=tb timeout_s=600 keep_logs="" per_host=1 nics=1
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --leaves) leaves=$2; shift 2 ;;
    --host-rate) host_rate=$2; shift 2 ;;
    --oversub) oversub=$2; shift 2 ;;
    --numbering) numbering=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --keep-logs) keep_logs=$2; shift 2 ;;
    --ranks-per-host) per_host=$2; shift 2 ;;
    --nics) nics=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "fabric-testbed: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "fabric-testbed: no command given (… -- <command>)" >&2; exit 2; }
case $numbering in block|round-robin) ;; *) echo "fabric-testbed: --numbering must be block or round-robin" >&2; exit 2 ;; esac
[[ $hosts =~ ^[0-9]+$ && $leaves =~ ^[0-9]+$ && $oversub =~ ^[0-9]+$ && $per_host =~ ^[1-9][0-9]*$ && $nics =~ ^[1-8]$ ]] ||
  { echo "fabric-testbed: --hosts, --leaves, --oversub and --ranks-per-host take whole numbers, --nics 1 to 8" >&2; exit 2; }
if [ "$leaves" -lt 1 ] || [ "$hosts" -lt "$leaves" ] || [ $((hosts % leaves)) -ne 0 ] || [ "$hosts" -gt 250 ]; then
  echo "fabric-testbed: --hosts ($hosts) must be a multiple of --leaves ($leaves), at most 250" >&2; exit 2
fi
[ "$oversub" -ge 1 ] || { echo "fabric-testbed: --oversub must be at least 1" >&2; exit 2; }
[[ $name =~ ^[a-z][a-z0-9]{0,5}$ ]] || { echo "fabric-testbed: --name must be 1-6 lowercase letters or digits" >&2; exit 2; }
[[ $host_rate =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || { echo "fabric-testbed: --host-rate takes e.g. 400mbit or 1gbit" >&2; exit 2; }

per_leaf=$((hosts / leaves))
rate_kbit() { local v=${1%?bit}; case $1 in *kbit) echo "$v" ;; *mbit) echo $((v * 1000)) ;; *gbit) echo $((v * 1000000)) ;; esac; }
uplink_kbit=$(( $(rate_kbit "$host_rate") * per_leaf / oversub ))
sw=$name-sw
work=$(mktemp -d "/tmp/fabric-testbed.$name.XXXXXX")
pids=()
owned=0  # set once this run has created its namespaces: only then does teardown remove them

teardown() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do [ "$p" = done ] || kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  if [ "$owned" = 1 ]; then
    for ((h = 0; h < hosts; ++h)); do ip netns del "$name-h$h" 2>/dev/null || true; done
    ip netns del "$sw" 2>/dev/null || true
  fi
  if [ -n "$keep_logs" ]; then mkdir -p "$keep_logs" && cp "$work"/rank*.log "$keep_logs"/ 2>/dev/null || true; fi
  rm -rf "$work"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# A link's egress limit. htb rather than tbf: tbf splits every GSO super-packet that exceeds
# its bucket into MTU segments, which cost so much CPU here that a 10 Gbit/s limit
# delivered 0.35 GB/s of all-reduce busbw against 1.3 unlimited; htb shapes whole
# super-packets. `TESTBED_QDISC=tbf` selects tbf anyway.
limit() {  # <netns> <dev> <rate in kbit>
  local burst=$(( $3 * 1000 / 8 / 100 ))  # 10 ms at the rate, in bytes
  [ "$burst" -ge 131072 ] || burst=131072
  if [ "${TESTBED_QDISC:-htb}" = tbf ]; then
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3kbit" burst "$burst" latency 50ms
  else
    ip netns exec "$1" tc qdisc add dev "$2" root handle 1: htb default 1
    ip netns exec "$1" tc class add dev "$2" parent 1: classid 1:1 htb rate "$3kbit" ceil "$3kbit" \
      burst "$burst" cburst "$burst" quantum 65536
    # A queue of ~20 ms at the rate: with the default 1000-packet queue of 64 KiB GSO
    # packets, the acknowledgements of one direction waited seconds behind the other's data.
    local queue=$(( $3 * 1000 / 8 / 50 ))
    [ "$queue" -ge 262144 ] || queue=262144
    ip netns exec "$1" tc qdisc add dev "$2" parent 1:1 handle 10: bfifo limit "$queue"
  fi
}

# Phase 1: the switch namespace, a bridge per leaf and the spine.
if [ "$(id -u)" != 0 ]; then
  echo "fabric-testbed: skipped: network namespaces need root (running as uid $(id -u))" >&2
  exit 77
fi
if [ -e "/run/netns/$sw" ]; then
  echo "fabric-testbed: a testbed named '$name' exists already (namespace $sw): choose another --name, or remove a" \
    "stale one with: for n in \$(ip netns list | grep -o '^$name-[a-z0-9]*'); do ip netns del \$n; done" >&2
  exit 1
fi
if ! ip netns add "$sw" 2>"$work/err"; then
  echo "fabric-testbed: skipped: cannot create network namespaces: $(cat "$work/err")" >&2
  exit 77
fi
owned=1
ip -n "$sw" link set lo up
# Rail k's devices carry the prefix r<k> (none for rail 0).
rail() { [ "$1" = 0 ] || echo "r$1"; }
for ((k = 0; k < nics; ++k)); do
  p=$(rail "$k")
  ip -n "$sw" link add "${p}spine" type bridge
  ip -n "$sw" link set "${p}spine" up
  for ((l = 0; l < leaves; ++l)); do
    ip -n "$sw" link add "${p}leaf$l" type bridge
    ip -n "$sw" link set "${p}leaf$l" up
    # Phase 2: the leaf's uplink, limited both ways.
    ip -n "$sw" link add "${p}up${l}l" type veth peer name "${p}up${l}s"
    ip -n "$sw" link set "${p}up${l}l" master "${p}leaf$l" up
    ip -n "$sw" link set "${p}up${l}s" master "${p}spine" up
    limit "$sw" "${p}up${l}l" "$uplink_kbit"
    limit "$sw" "${p}up${l}s" "$uplink_kbit"
  done
done

# Phase 3: the hosts, each on its leaf, and the switch map that describes them.
topo=$work/topology.conf
: > "$topo"
host_of_rank=()
for ((h = 0; h < hosts; ++h)); do
  ns=$name-h$h
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  for ((k = 0; k < nics; ++k)); do
    p=$(rail "$k")
    ip -n "$sw" link add "${p}h$h" type veth peer name "eth$k" netns "$ns"
    ip -n "$sw" link set "${p}h$h" master "${p}leaf$((h / per_leaf))" up
    ip -n "$ns" addr add "10.77.$k.$((h + 1))/24" dev "eth$k"
    ip -n "$ns" link set "eth$k" up
    limit "$ns" "eth$k" "$(rate_kbit "$host_rate")"
    limit "$sw" "${p}h$h" "$(rate_kbit "$host_rate")"
  done
done
nic_list=eth0
for ((k = 1; k < nics; ++k)); do nic_list+=",eth$k"; done
for ((l = 0; l < leaves; ++l)); do
  printf 'SwitchName=leaf%d Nodes=node[%02d-%02d]\n' "$l" $((l * per_leaf + 1)) $(((l + 1) * per_leaf)) >> "$topo"
done
printf 'SwitchName=spine Switches=leaf[0-%d]\n' $((leaves - 1)) >> "$topo"
# The i-th host in rank order: block takes them in switch order, round-robin deals them
# across the leaves. Each host's ranks are consecutive.
nranks=$((hosts * per_host))
for ((r = 0; r < nranks; ++r)); do
  i=$((r / per_host))
  if [ "$numbering" = block ]; then host_of_rank+=("$i")
  else host_of_rank+=($(( (i % leaves) * per_leaf + i / leaves )))
  fi
done
master=10.77.0.$((host_of_rank[0] + 1))
echo "# fabric-testbed: $hosts hosts on $leaves leaves, $per_host rank(s) each, $nics link(s) each of $host_rate, uplinks ${uplink_kbit}kbit ($oversub:1) per rail, ranks numbered $numbering"

# Phase 4: one rank per host; wait for all, or for the first failure, or the timeout.
for ((r = 0; r < nranks; ++r)); do
  h=${host_of_rank[r]}
  setsid ip netns exec "$name-h$h" env RANK="$r" WORLD_SIZE="$nranks" LOCAL_RANK=$((r % per_host)) LOCAL_WORLD_SIZE="$per_host" \
    MASTER_ADDR="$master" MASTER_PORT="${MASTER_PORT:-29500}" TEMPO_HOSTNAME="$(printf 'node%02d' $((h + 1)))" \
    TEMPO_TOPO_FILE="${TEMPO_TOPO_FILE:-$topo}" NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-eth0}" \
    TEMPO_NIC="${TEMPO_NIC:-$nic_list}" TEMPO_NET_MBITS="${TEMPO_NET_MBITS:-$(( $(rate_kbit "$host_rate") / 1000 ))}" \
    "$@" > "$work/rank$r.log" 2>&1 &
  pids+=($!)
done
[ -z "${TESTBED_PRINT_TOPO:-}" ] || cat "$topo"
deadline=$((SECONDS + timeout_s))
rc=0 failed=-1
while :; do
  running=0
  for ((r = 0; r < nranks; ++r)); do
    p=${pids[r]}
    [ "$p" = done ] && continue
    if kill -0 "$p" 2>/dev/null; then running=1; continue; fi
    set +e; wait "$p"; code=$?; set -e
    pids[r]=done
    if [ "$code" != 0 ] && [ "$failed" -lt 0 ]; then failed=$r rc=$code; fi
  done
  [ "$running" = 0 ] && break
  if [ "$failed" -ge 0 ]; then sleep 2; break; fi  # give the others a moment to report, then stop them
  if [ "$SECONDS" -ge "$deadline" ]; then echo "fabric-testbed: timed out after ${timeout_s}s" >&2; rc=124; break; fi
  sleep 0.2
done
live=()
for p in "${pids[@]}"; do [ "$p" = done ] || live+=("$p"); done
pids=("${live[@]}")
cat "$work/rank0.log"
if [ "$failed" -gt 0 ]; then
  echo "fabric-testbed: rank $failed exited with $rc; its last lines:" >&2
  tail -n 20 "$work/rank$failed.log" >&2
fi
exit "$rc"
