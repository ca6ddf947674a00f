#!/bin/sh
# netns_rsh_agent.sh — what mpirun runs instead of ssh in netns_faults.sh
# (--mca plm_rsh_agent): `netns_rsh_agent.sh <host> <command...>` runs the command, OpenMPI's
# orted, inside the network namespace of that host, "$ZL_NETNS_PREFIX-<last octet of the
# address>", with its own TMPDIR under $ZL_NETNS_TMP (the "hosts" share one file system, and
# each orted needs its own session directory). The orted dies with mpirun (a parent-death signal),
# as it would when its ssh session ends.
set -eu
host="$1"
shift
namespace="$ZL_NETNS_PREFIX-${host##*.}"
TMPDIR="$ZL_NETNS_TMP/$namespace"
export TMPDIR
mkdir -p "$TMPDIR"
exec ip netns exec "$namespace" setpriv --pdeathsig KILL sh -c "$*"
