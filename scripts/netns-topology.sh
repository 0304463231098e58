#!/usr/bin/env bash
# The test topology of `pktsched run`, by hand:
#
#   namespace ${P}gen: g0 198.18.0.1/24 ── d0 ┐ namespace ${P}dut  ┌ d1 ── s0 198.18.0.2/24: namespace ${P}sink
#                                            └─ pktsched run d0→d1 ┘
#
#   scripts/netns-topology.sh up [PREFIX]     # default PREFIX: ps-
#   scripts/netns-topology.sh down [PREFIX]
#
# Then, for example:
#   ip netns exec ps-dut pktsched run --config examples/run/three-classes.toml
#   ip netns exec ps-sink pktsched sink --ports 5000
#   ip netns exec ps-gen pktsched gen --dst 198.18.0.2 --flow dport=5000,rate=200mbit
#
# Offloads are turned off on every end (frames bigger than the MTU and
# checksums left to hardware would not survive a userspace bump in the
# wire). Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN); installs ethtool
# if missing. Touches nothing outside the three namespaces it creates.
set -euo pipefail

action="${1:-}"
prefix="${2:-ps-}"
gen="${prefix}gen" dut="${prefix}dut" sink="${prefix}sink"

need_ethtool() {
    command -v ethtool >/dev/null && return
    apt-get update -qq && apt-get install -y -qq ethtool >/dev/null
}

down() {
    for ns in "$gen" "$dut" "$sink"; do
        ip netns del "$ns" 2>/dev/null || true
    done
}

up() {
    need_ethtool
    down
    trap 'down; exit 1' ERR
    for ns in "$gen" "$dut" "$sink"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    ip link add g0 netns "$gen" type veth peer name d0 netns "$dut"
    ip link add d1 netns "$dut" type veth peer name s0 netns "$sink"
    ip -n "$gen" addr add 198.18.0.1/24 dev g0
    ip -n "$sink" addr add 198.18.0.2/24 dev s0
    for pair in "$gen:g0" "$dut:d0" "$dut:d1" "$sink:s0"; do
        ns="${pair%%:*}" dev="${pair#*:}"
        ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off tx off rx off >/dev/null 2>&1 || true
        ip -n "$ns" link set "$dev" up
    done
    trap - ERR
    echo "up: $gen:g0 <-> $dut:d0 | $dut:d1 <-> $sink:s0"
}

case "$action" in
    up) up ;;
    down) down; echo "down: $gen $dut $sink removed" ;;
    *) echo "usage: $0 up|down [PREFIX]" >&2; exit 2 ;;
esac
