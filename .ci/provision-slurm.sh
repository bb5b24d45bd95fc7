#!/usr/bin/env bash
# Bring up a Slurm cluster on this machine for the Slurm service tests.
#
#   bash .ci/provision-slurm.sh          # as root; idempotent; prints the node states at the end
#
# Installs Debian's slurm-wlm and munge, creates a munge key, writes a minimal slurm.conf,
# starts munged, slurmctld and the slurmd of every node, and waits until `sinfo` shows every
# node idle. Partition `debug` (the default) holds one node, this host (CPUs and memory read
# from the machine). Partition `twonode` holds two more nodes, dbnode1 and dbnode2: each a
# slurmd in its own network namespace with its own address on a private bridge, made by
# .ci/slurm-nodes.sh. Multi-node jobs run there. Where network namespaces cannot be made,
# the cluster has the one-node partition only and says so (DETBENCH_SLURM_NODES=0 leaves
# the two nodes out on purpose).
# Process tracking is proctrack/linuxproc and there is no task plugin, because cgroups
# are often unusable inside containers and sandboxes. There is no accounting database
# (sacct is unavailable): detbench falls back to `scontrol show job` for end states.
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/lib/slurm
LOGS=/var/log/slurm
PARTITION=${DETBENCH_SLURM_PARTITION:-debug}
TWO_PARTITION=twonode
NODES_SH=$(cd "$(dirname "$0")" && pwd)/slurm-nodes.sh

log() { echo "provision-slurm: $*"; }

if [ "$(id -u)" != 0 ]; then
    echo "provision-slurm: must run as root" >&2
    exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

# --- munge ------------------------------------------------------------------------
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    log "creating a munge key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.1
    done
fi
munge -n | unmunge >/dev/null

# --- the namespace nodes' network -----------------------------------------------------
EXTRA=()      # the namespace nodes' names
ADDRS=()      # and their addresses
HOST_ADDR=""
if [ "${DETBENCH_SLURM_NODES:-1}" != 0 ]; then
    if bash "$NODES_SH" network; then
        while read -r name addr; do
            EXTRA+=("$name")
            ADDRS+=("$addr")
        done < <(bash "$NODES_SH" list)
        HOST_ADDR=$(bash "$NODES_SH" host-address)
    else
        echo "provision-slurm: WARNING: cannot make the nodes' network namespaces;" \
             "partition $TWO_PARTITION is left out" >&2
    fi
fi

# --- slurm.conf --------------------------------------------------------------------
NODE=$(hostname -s)
CPUS=$(nproc --all)
# leave some memory to the OS; RealMemory is in MiB
MEM_MB=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
# jobs that ask for no memory get their CPUs' share, so small jobs can share the node
MEM_PER_CPU=$((MEM_MB / CPUS))
install -d -m 0755 "$CONF_DIR" "$LOGS" "$STATE" "$STATE/slurmctld" "$STATE/slurmd"

CTLD=$NODE
NODE_LINES=""
if [ ${#EXTRA[@]} -gt 0 ]; then
    # the namespace nodes reach slurmctld at the host's address on their bridge
    CTLD="$NODE($HOST_ADDR)"
    for i in "${!EXTRA[@]}"; do
        NODE_LINES+="NodeName=${EXTRA[$i]} NodeHostname=${EXTRA[$i]} NodeAddr=${ADDRS[$i]}"
        NODE_LINES+=" CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN"$'\n'
    done
    NODE_LINES+="PartitionName=$TWO_PARTITION Nodes=$(IFS=,; echo "${EXTRA[*]}")"
    NODE_LINES+=" Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO"
fi

NEW_CONF=$(cat <<EOF
# written by detbench .ci/provision-slurm.sh: the test cluster
ClusterName=detbench
SlurmctldHost=$CTLD
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$MEM_PER_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=30
DebugFlags=NO_CONF_HASH
NodeName=$NODE CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
$NODE_LINES
EOF
)

CHANGED=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW_CONF" ]; then
    log "writing $CONF (node $NODE and ${#EXTRA[@]} namespace nodes, $CPUS CPUs, $MEM_MB MiB each)"
    printf '%s\n' "$NEW_CONF" > "$CONF"
    CHANGED=1
fi
# each namespace node's slurmd reads the same configuration with its own spool folder, pid
# file and log file, since they all share this machine's /run and /var
install -d -m 0755 "$CONF_DIR/nodes"
for name in "${EXTRA[@]}"; do
    install -d -m 0755 "$STATE/slurmd-$name"
    node_conf=$(printf '%s\n' "$NEW_CONF" | sed \
        -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$STATE/slurmd-$name|" \
        -e "s|^SlurmdPidFile=.*|SlurmdPidFile=/run/slurmd-$name.pid|" \
        -e "s|^SlurmdLogFile=.*|SlurmdLogFile=$LOGS/slurmd-$name.log|")
    if [ ! -f "$CONF_DIR/nodes/$name.conf" ] || [ "$(cat "$CONF_DIR/nodes/$name.conf")" != "$node_conf" ]; then
        printf '%s\n' "$node_conf" > "$CONF_DIR/nodes/$name.conf"
        CHANGED=1
    fi
done
# the Debian package reads cgroup.conf when present; keep a harmless one
[ -f "$CONF_DIR/cgroup.conf" ] || echo "CgroupPlugin=autodetect" > "$CONF_DIR/cgroup.conf"

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ "$CHANGED" = 1 ]; then
    # a new configuration: restart whatever runs with the old one
    for name in "${EXTRA[@]}"; do
        bash "$NODES_SH" kill "$name"
    done
    # and the namespace nodes of an earlier configuration, when this one has none
    for pidfile in /run/slurmd-*.pid /run/slurmd.pid /run/slurmctld.pid; do
        if running "$pidfile"; then
            kill "$(cat "$pidfile")" || true
            for _ in $(seq 50); do running "$pidfile" || break; sleep 0.1; done
        fi
    done
fi
if ! running /run/slurmctld.pid; then
    log "starting slurmctld"
    /usr/sbin/slurmctld
fi
if ! running /run/slurmd.pid; then
    log "starting slurmd"
    /usr/sbin/slurmd
fi
if [ ${#EXTRA[@]} -gt 0 ]; then
    bash "$NODES_SH" start "${EXTRA[@]}"
fi

# --- wait for the nodes --------------------------------------------------------------
node_state() { sinfo -h -N -n "$1" -o %T 2>/dev/null | head -n1 || true; }
for node in "$NODE" "${EXTRA[@]}"; do
    for _ in $(seq 120); do
        state=$(node_state "$node")
        case "$state" in
            idle|mixed|allocated) break ;;
            down*|drain*|fail*)
                scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true ;;
        esac
        sleep 0.5
    done
    state=$(node_state "$node")
    case "$state" in
        idle|mixed|allocated) ;;
        *)
            echo "provision-slurm: node $node is '$state', not idle; see $LOGS/" >&2
            tail -n 20 "$LOGS/slurmctld.log" >&2 || true
            if [ "$node" = "$NODE" ]; then slurmd_log=$LOGS/slurmd.log; else slurmd_log=$LOGS/slurmd-$node.log; fi
            tail -n 20 "$slurmd_log" >&2 || true
            exit 1 ;;
    esac
done
if [ ${#EXTRA[@]} -gt 0 ]; then
    log "ready: partition $PARTITION (node $NODE), partition $TWO_PARTITION (nodes ${EXTRA[*]}), all idle"
else
    log "ready: partition $PARTITION, node $NODE is idle; no partition $TWO_PARTITION"
fi
sinfo
