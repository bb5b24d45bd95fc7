#!/usr/bin/env bash
# Bring up a one-node Slurm cluster on this machine for the Slurm service tests.
#
#   bash .ci/provision-slurm.sh          # as root; idempotent; prints the node state at the end
#
# Installs Debian's slurm-wlm and munge, creates a munge key, writes a minimal
# slurm.conf whose only node is this host (CPUs and memory read from the machine),
# starts munged, slurmctld and slurmd, and waits until `sinfo` shows the node idle.
# Process tracking is proctrack/linuxproc and there is no task plugin, because cgroups
# are often unusable inside containers and sandboxes. There is no accounting database
# (sacct is unavailable): detbench falls back to `scontrol show job` for end states.
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/lib/slurm
LOGS=/var/log/slurm
PARTITION=${DETBENCH_SLURM_PARTITION:-debug}

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

# --- slurm.conf --------------------------------------------------------------------
NODE=$(hostname -s)
CPUS=$(nproc --all)
# leave some memory to the OS; RealMemory is in MiB
MEM_MB=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
# jobs that ask for no memory get their CPUs' share, so small jobs can share the node
MEM_PER_CPU=$((MEM_MB / CPUS))
install -d -m 0755 "$CONF_DIR" "$LOGS" "$STATE" "$STATE/slurmctld" "$STATE/slurmd"

NEW_CONF=$(cat <<EOF
# written by detbench .ci/provision-slurm.sh: a one-node test cluster
ClusterName=detbench
SlurmctldHost=$NODE
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
NodeName=$NODE CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)

CHANGED=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW_CONF" ]; then
    log "writing $CONF (node $NODE, $CPUS CPUs, $MEM_MB MiB)"
    printf '%s\n' "$NEW_CONF" > "$CONF"
    CHANGED=1
fi
# the Debian package reads cgroup.conf when present; keep a harmless one
[ -f "$CONF_DIR/cgroup.conf" ] || echo "CgroupPlugin=autodetect" > "$CONF_DIR/cgroup.conf"

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ "$CHANGED" = 1 ]; then
    # a new configuration: restart whatever runs with the old one
    for pidfile in /run/slurmd.pid /run/slurmctld.pid; do
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

# --- wait for the node ---------------------------------------------------------------
for _ in $(seq 120); do
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n1 || true)
    case "$state" in
        idle|mixed|allocated) break ;;
        down*|drain*|fail*)
            scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n1 || true)
case "$state" in
    idle|mixed|allocated) ;;
    *)
        echo "provision-slurm: node $NODE is '$state', not idle; see $LOGS/" >&2
        tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmd.log" >&2 || true
        exit 1 ;;
esac
log "ready: partition $PARTITION, node $NODE is $state"
sinfo
