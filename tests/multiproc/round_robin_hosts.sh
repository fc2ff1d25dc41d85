#!/bin/sh
# round_robin_hosts.sh <command...>: runs the command as rank $RANK of a job whose ranks are
# numbered round-robin across LEAVES leaf switches (default 2) of tests/fixtures/slurm/
# two-level.conf (4 hosts per leaf, node01..node16): rank r is host (r / LEAVES) on leaf
# (r % LEAVES), named through TEMPO_HOSTNAME.
leaves=${LEAVES:-2}
leaf=$((RANK % leaves))
index=$((RANK / leaves + 1 + leaf * 4))
TEMPO_HOSTNAME=$(printf "node%02d" "$index")
export TEMPO_HOSTNAME
exec "$@"
