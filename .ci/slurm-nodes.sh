#!/usr/bin/env bash
# The two extra compute nodes of the Slurm test cluster, both on this machine.
#
#   bash .ci/slurm-nodes.sh list               # "NAME ADDRESS" of each node, one a line
#   bash .ci/slurm-nodes.sh network            # bridge, namespaces, links, /etc/hosts (idempotent)
#   bash .ci/slurm-nodes.sh start [NODE...]    # start the slurmd of each node that is not running
#   bash .ci/slurm-nodes.sh kill NODE...       # a node crash: kill -9 its slurmd and every process in it
#   bash .ci/slurm-nodes.sh pid NODE           # the pid of the node's slurmd (exit 1 when none runs)
#
# Each node is a network namespace named after it, with its own address on a private Linux
# bridge; the host holds the bridge's first address, which is where slurmctld is reached.
# Nothing is routed off the machine: the namespaces have no default route. Each slurmd also
# runs in its own UTS namespace (so the node's hostname is its own and resolves to its own
# address, which torchrun and gloo rely on) and in its own mount namespace (mounts made on
# the host propagate into it, mounts made in it stay there). The
# munge socket is a file, so the host's munged serves every node. .ci/provision-slurm.sh
# writes each node's slurm.conf (/etc/slurm/nodes/NODE.conf: the cluster's, with the node's
# own spool folder, pid file and log file) before it calls `start`. Run as root.
set -euo pipefail

NET=${DETBENCH_SLURM_NODE_NET:-10.77.0}    # the bridge's /24
BRIDGE=dbnode-br0
HOST_ADDR=$NET.1
NODES=(dbnode1 dbnode2)
CONF_DIR=/etc/slurm/nodes

log() { echo "slurm-nodes: $*"; }
die() { echo "slurm-nodes: $*" >&2; exit 1; }

address() {   # NODE -> its address: dbnodeK is $NET.(10+K)
    local k=${1#dbnode}
    case "$k" in ''|*[!0-9]*) die "unknown node '$1' (nodes: ${NODES[*]})" ;; esac
    local known=0 n
    for n in "${NODES[@]}"; do
        if [ "$n" = "$1" ]; then known=1; fi
    done
    [ "$known" = 1 ] || die "unknown node '$1' (nodes: ${NODES[*]})"
    echo "$NET.$((10 + k))"
}

pidfile() { echo "/run/slurmd-$1.pid"; }

slurmd_pid() {   # the pid of NODE's slurmd, or nothing
    local f
    f=$(pidfile "$1")
    [ -f "$f" ] || return 0
    local pid
    pid=$(head -n1 "$f" 2>/dev/null || true)
    case "$pid" in ''|*[!0-9]*) return 0 ;; esac
    if kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

need_tools() {
    if ! command -v ip >/dev/null || ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null; then
        log "installing iproute2 and util-linux"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends iproute2 util-linux >/dev/null
    fi
}

set_hosts_line() {   # ADDRESS NAME: exactly one /etc/hosts line names NAME, and it is this one
    local addr=$1 name=$2 rest
    if grep -qxF "$addr $name" /etc/hosts \
            && [ "$(awk -v n="$name" '{for (i = 2; i <= NF; i++) if ($i == n) c++} END {print c + 0}' /etc/hosts)" = 1 ]; then
        return 0
    fi
    rest=$(awk -v n="$name" '{keep = 1; for (i = 2; i <= NF; i++) if ($i == n) keep = 0} keep' /etc/hosts)
    # rewritten in place (not renamed over), so a bind-mounted /etc/hosts works too
    printf '%s\n%s\n' "$rest" "$addr $name" > /etc/hosts
}

network() {
    need_tools
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        log "creating bridge $BRIDGE ($HOST_ADDR/24)"
        ip link add "$BRIDGE" type bridge
    fi
    ip addr replace "$HOST_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    # where bridged traffic passes iptables (br_netfilter loaded, as Docker does) and the FORWARD
    # policy drops, let the nodes talk to each other
    if command -v iptables >/dev/null && [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo 0)" = 1 ]; then
        iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null \
            || iptables -I FORWARD 1 -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
    fi
    local node addr link
    for node in "${NODES[@]}"; do
        addr=$(address "$node")
        link=veth-$node
        if [ ! -e "/run/netns/$node" ]; then
            log "creating network namespace $node ($addr)"
            ip netns add "$node"
        fi
        if ! ip link show "$link" >/dev/null 2>&1; then
            ip -n "$node" link del eth0 2>/dev/null || true
            ip link add "$link" type veth peer name eth0 netns "$node"
        fi
        ip link set "$link" master "$BRIDGE"
        ip link set "$link" up
        ip -n "$node" link set lo up
        ip -n "$node" addr replace "$addr/24" dev eth0
        ip -n "$node" link set eth0 up
        set_hosts_line "$addr" "$node"
    done
    # the nodes reach the host's slurmctld over the bridge
    if command -v ping >/dev/null; then
        for node in "${NODES[@]}"; do
            local ok=0
            for _ in $(seq 30); do
                if ip netns exec "$node" ping -c1 -W1 "$HOST_ADDR" >/dev/null 2>&1; then ok=1; break; fi
                sleep 0.2
            done
            [ "$ok" = 1 ] || die "node $node cannot reach $HOST_ADDR over $BRIDGE"
        done
    fi
}

start() {
    local node conf
    for node in "$@"; do
        address "$node" >/dev/null
        [ -n "$(slurmd_pid "$node")" ] && continue
        conf=$CONF_DIR/$node.conf
        [ -f "$conf" ] || die "$conf is missing: run .ci/provision-slurm.sh"
        [ -e "/run/netns/$node" ] || die "network namespace $node is missing: run .ci/provision-slurm.sh"
        log "starting slurmd of $node"
        # in the node's network namespace, with its own hostname (a UTS namespace) and its own
        # mount namespace (a slave of the host's: it keeps /sys and its cgroup mounts, which
        # `ip netns exec` would replace); slurmd daemonizes
        # shellcheck disable=SC2016 # the inner shell expands its own arguments
        if ! nsenter --net="/run/netns/$node" -- unshare --uts --mount --propagation slave -- \
                /bin/sh -c 'hostname "$1" && shift && exec "$@"' node-start "$node" \
                /usr/sbin/slurmd -N "$node" -f "$conf"; then
            tail -n 5 "/var/log/slurm/slurmd-$node.log" >&2 || true
            die "slurmd of $node failed to start"
        fi
        for _ in $(seq 50); do [ -n "$(slurmd_pid "$node")" ] && break; sleep 0.1; done
        [ -n "$(slurmd_pid "$node")" ] || die "slurmd of $node did not start; see /var/log/slurm/slurmd-$node.log"
    done
}

kill_node() {
    local node pid left
    for node in "$@"; do
        address "$node" >/dev/null
        pid=$(slurmd_pid "$node")
        if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
        # everything still in the node's network namespace: its job steps and their processes
        for _ in $(seq 50); do
            left=$(ip netns pids "$node" 2>/dev/null || true)
            [ -z "$left" ] && break
            # shellcheck disable=SC2086
            kill -9 $left 2>/dev/null || true
            sleep 0.1
        done
        [ -z "$(ip netns pids "$node" 2>/dev/null || true)" ] || die "processes of $node survived kill -9"
        log "killed node $node"
    done
}

[ "$(id -u)" = 0 ] || die "must run as root"
cmd=${1:-}
shift || true
case "$cmd" in
    list)
        for node in "${NODES[@]}"; do echo "$node $(address "$node")"; done ;;
    host-address) echo "$HOST_ADDR" ;;
    network) network ;;
    start) if [ $# = 0 ]; then start "${NODES[@]}"; else start "$@"; fi ;;
    kill) [ $# -gt 0 ] || die "kill: name the node(s)"; kill_node "$@" ;;
    pid) [ $# = 1 ] || die "pid: name one node"; pid=$(slurmd_pid "$1"); [ -n "$pid" ] || exit 1; echo "$pid" ;;
    *) die "usage: $0 list|host-address|network|start [NODE...]|kill NODE...|pid NODE" ;;
esac
