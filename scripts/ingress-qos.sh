#!/usr/bin/env bash
# Ingress QoS on a software router whose CPU is the bottleneck on purpose
# (issue #17; Beifuß et al., "Building a Low Latency Linux Software
# Router"). Root; three namespaces of its own, removed at exit even on
# failure:
#
#   gen ns: g0 10.71.1.2 ── r0 [router ns: pktsched route r0 → r1] r1 ── s0 10.71.2.2: sink ns
#
# `pktsched route` polls one receive ring per class (rt: DSCP EF; be: the
# rest) with a per-packet cost (a busy loop, COST, default 10us) so that
# its capacity, about 1/x packets/s, is a load `pktsched gen` can offer
# on a small machine. For each strategy (sq, rr, ll-rr, ll-wfq):
#   1. a load sweep up to and past saturation with 30 % RT traffic;
#   2. an RT-share sweep at 1.5 × capacity.
# The loads are fractions of the capacity measured first (the router's
# own x under overload, SQ). Every point: gen → router → sink, one-way
# latency (generator's send stamp → the sink's kernel receive) and loss
# per class (`pktsched sink --class`), the router's per-class latency from
# its kernel receive to its transmit and RT ring wait (`pktsched stats
# --json` at the end of the point: router.json), the router's final
# counters (`pktsched route --json`). Then `pktsched plot ingress` writes
# OUT/ingress-results.{csv,json} and SVGs (RT and BE p99 and loss per
# class vs load, RT p99 and loss vs RT share), prints the analytic RT
# bound (b+ρ)x/(1−ρ) + x (`pktsched calc ingress`'s arithmetic, x the
# router's measured per-packet time) next to the measured RT p99s (the
# router's and the sink's), and the issue's targets per strategy
# (OUT/ingress-targets.md: loss-free throughput vs SQ's, RT p99 and RT
# loss at 1.5 × capacity vs SQ's, RT p99 within the bound at ρ_RT ≤ 0.5;
# the RT p99 judged is the router's, kernel receive → transmit, the
# sink's shown next to it).
#
# The forwarding phase (--full, or --forwarding alone): the router with
# no per-packet cost (cost = "none") and, for comparison, the kernel's
# own IP forwarding (ip_forward=1 in the router namespace, no pktsched)
# on the same veths; 64-byte frames from the AF_PACKET ring generator
# (`gen --backend packet`) at saturation; frames/s arriving on s0 (its
# rx_packets) and whole-machine busy CPU ns per arriving frame
# (/proc/stat, generator included, the same for all), next to the
# router's own per-packet time x (route --json); medians of 3 runs
# of FWD_SECS each. Written to OUT/ingress-forwarding.md.
#
#   scripts/ingress-qos.sh [--quick|--full|--forwarding] OUT
#
# --quick (default): 3 loads, 2 shares, 2 s per point (under 2 minutes),
# no forwarding phase; --full: 10 loads, 7 shares, 10 s per point (about
# 13 minutes; 6 at SECS=4), then the forwarding phase (about 1 minute).
# Environment: SECS (seconds per point, overrides the mode's),
# FWD_SECS (seconds per forwarding run, default 3),
# COST (router busy loop per packet, default 10us),
# STRATEGIES (default "sq rr ll-rr ll-wfq"), ROUTE_BACKEND (auto|xdp|packet,
# default auto), GEN_BACKEND (socket|packet, default socket), RT_PATTERN
# (poisson|cbr: the RT flows' arrivals, default poisson; the bound's
# envelope holds for cbr, not for Poisson), BUSY_POLL (the router's
# busy_poll µs, default 0: it sleeps in poll(2) when its rings are empty;
# > 0: it spins on its core and the kernel busy-polls), PKTSCHED
# (a built binary; default: cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=quick
case "${1:-}" in
    --quick) shift ;;
    --full) mode=full; shift ;;
    --forwarding) mode=forwarding; shift ;;
esac
[ $# = 1 ] || { echo "usage: $0 [--quick|--full|--forwarding] OUT" >&2; exit 2; }
out="$1"
[ "$(id -u)" = 0 ] || { echo "ingress-qos.sh needs root (network namespaces)" >&2; exit 2; }

if [ "$mode" = quick ]; then
    secs=2 loads="0.5 1.0 1.5" shares="0.1 0.5"
else
    secs=10 loads="0.2 0.4 0.6 0.8 0.9 1.0 1.1 1.25 1.5 2.0" shares="0.1 0.2 0.3 0.4 0.5 0.6 0.7"
fi
positive() { # $1 variable name, $2 value: a positive number of seconds
    [[ "$2" =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v v="$2" 'BEGIN{exit !(v > 0)}' ||
        { echo "$1=$2: expected a positive number of seconds (e.g. 4 or 0.5)" >&2; exit 2; }
}
secs="${SECS:-$secs}"
positive SECS "$secs"
fwd_secs="${FWD_SECS:-3}"
positive FWD_SECS "$fwd_secs"
cost="${COST:-10us}"
route_cost="$cost"
strategies="${STRATEGIES:-sq rr ll-rr ll-wfq}"
route_backend="${ROUTE_BACKEND:-auto}"
gen_backend="${GEN_BACKEND:-socket}"
rt_pattern="${RT_PATTERN:-poisson}"
busy_poll="${BUSY_POLL:-0}"
[[ "$busy_poll" =~ ^[0-9]+$ ]] || { echo "BUSY_POLL=$busy_poll: expected µs, a whole number (0 = the router sleeps when idle)" >&2; exit 2; }
overload=1.5 rt_share=0.3
# The router's busy loop on a core of its own, generator and sink on the
# other (with one CPU, no pinning).
pin_router=() pin_rest=()
if [ "$(nproc)" -ge 2 ]; then pin_router=(taskset -c 1) pin_rest=(taskset -c 0); fi
# The sink at a real-time priority: it sleeps in poll(2) and preempts the
# generator as soon as a datagram arrives, so its latencies are the
# path's, not its own waits for a CPU.
pin_sink=("${pin_rest[@]}")
if command -v chrt >/dev/null; then pin_sink=(chrt -f 10 "${pin_rest[@]}"); fi

if [ -z "${PKTSCHED:-}" ]; then
    cargo build --release -q -p pktsched
    PKTSCHED="$PWD/target/release/pktsched"
fi
bin="$PKTSCHED"
command -v ethtool >/dev/null || { apt-get update -qq && apt-get install -y -qq ethtool >/dev/null; }

p="ig$$-"
gen="${p}gen" rtr="${p}rtr" sink="${p}snk"
work="$(mktemp -d /tmp/ingress-qos.XXXXXX)"
router_pid=""
cleanup() {
    [ -n "$router_pid" ] && kill -TERM "$router_pid" 2>/dev/null || true
    for ns in "$gen" "$rtr" "$sink"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out/points"

. scripts/lib/cpu.sh # busy_jiffies, cpu_ns_per_frame
nsx() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }
mac() { nsx "$1" cat "/sys/class/net/$2/address"; }

topology() {
    for ns in "$gen" "$rtr" "$sink"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        nsx "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done
    ip link add g0 netns "$gen" type veth peer name r0 netns "$rtr"
    ip link add r1 netns "$rtr" type veth peer name s0 netns "$sink"
    nsx "$rtr" sysctl -qw net.ipv4.ip_forward=0 # pktsched forwards, not the kernel
    for pair in "$gen:g0" "$rtr:r0" "$rtr:r1" "$sink:s0"; do
        local ns="${pair%%:*}" dev="${pair#*:}"
        nsx "$ns" ethtool -K "$dev" tso off gso off gro off tx off rx off >/dev/null 2>&1 || true
        ip -n "$ns" link set "$dev" up
    done
    ip -n "$gen" addr add 10.71.1.2/24 dev g0
    ip -n "$sink" addr add 10.71.2.2/24 dev s0
    # The router answers no ARP: static neighbours on both ends.
    ip -n "$gen" neigh replace 10.71.1.1 lladdr "$(mac "$rtr" r0)" dev g0 nud permanent
    ip -n "$gen" route add 10.71.2.0/24 via 10.71.1.1 dev g0
    ip -n "$sink" neigh replace 10.71.2.1 lladdr "$(mac "$rtr" r1)" dev s0 nud permanent
    ip -n "$sink" route add 10.71.1.0/24 via 10.71.2.1 dev s0
}

# BE packets the poller may serve between two RT visits (b of the bound);
# empty for SQ (one FIFO ring: no bound).
be_budget() {
    case "$1" in
        sq) echo null ;;
        rr) echo 64 ;;
        ll-rr) echo 8 ;;
        ll-wfq) echo 4 ;;
    esac
}

route_config() { # $1 strategy
    local rt_budget=60 be=4
    [ "$1" = ll-rr ] && rt_budget=8 be=8
    cat >"$work/route.toml" <<EOF
[router]
ingress = "r0"
egress = "r1"
backend = "$route_backend"
strategy = "$1"
device_budget = 64
ring_frames = 256
pool_frames = 4096
cost = "$route_cost"
busy_poll = $busy_poll

[[class]]
name = "rt"
budget = $rt_budget
match = [{ dscp = "ef" }]

[[class]]
name = "be"
budget = $be

[[route]]
prefix = "10.71.2.0/24"
dev = "r1"

[[route]]
prefix = "10.71.1.0/24"
dev = "r0"

[[neighbour]]
ip = "10.71.2.2"
mac = "$(mac "$sink" s0)"

[[neighbour]]
ip = "10.71.1.2"
mac = "$(mac "$gen" g0)"

[control]
socket = "$work/ctl.sock"
EOF
}

start_router() { # $1 strategy, $2 file for its final JSON
    route_config "$1"
    rm -f "$work/ctl.sock"
    # Not through nsx: $! must be the router itself.
    ip netns exec "$rtr" "${pin_router[@]}" "$bin" route --config "$work/route.toml" --json \
        >"$2" 2>"$work/route.err" &
    router_pid=$!
    for _ in $(seq 200); do
        [ -S "$work/ctl.sock" ] && return
        kill -0 "$router_pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "pktsched route did not start:" >&2; cat "$work/route.err" >&2; exit 1
}
stop_router() {
    kill -TERM "$router_pid" 2>/dev/null || true
    wait "$router_pid" || true # exit status 130/143 after a signal
    router_pid=""
}

point() { # $1 strategy, $2 sweep (load|share), $3 packets/s, $4 RT share, $5 load ÷ capacity
    local st="$1" sweep="$2" pps="$3" share="$4" factor="$5"
    local dir="$out/points/$st-$sweep-$pps-$share"
    mkdir -p "$dir"
    start_router "$st" "$dir/route.json"
    nsx "$sink" "${pin_sink[@]}" "$bin" sink --class rt=5001 --class be=5002-5009 --idle 1s --json \
        >"$dir/sink.json" 2>"$work/sink.err" &
    local sink_pid=$!
    sleep 0.3
    nsx "$gen" "${pin_rest[@]}" "$bin" gen "${gen_args[@]}" --load "${pps}pps" --rt-share "$share" --rt-pattern "$rt_pattern" \
        --duration "${secs}s" --json >"$dir/gen.json" 2>"$work/gen.err" ||
        { echo "gen failed at $dir:" >&2; cat "$work/gen.err" >&2; }
    wait "$sink_pid" || { echo "sink failed at $dir:" >&2; cat "$work/sink.err" >&2; }
    # The router's own per-class latency, kernel receive -> transmit (and
    # the RT ring wait), read before it stops.
    "$bin" stats --socket "$work/ctl.sock" --json >"$dir/router.json" 2>"$work/stats.err" ||
        { echo "stats failed at $dir:" >&2; cat "$work/stats.err" >&2; rm -f "$dir/router.json"; }
    stop_router
    cat >"$dir/point.json" <<EOF
{"strategy": "$st", "sweep": "$sweep", "load_pps": $pps, "load_factor": $factor, "rt_share": $share, "be_budget": $(be_budget "$st"), "cost": "$cost", "rt_pattern": "$rt_pattern", "gen_backend": "$gen_backend"}
EOF
    printf '%-7s %-5s %8s pps rt %-4s %s\n' "$st" "$sweep" "$pps" "$share" \
        "$(grep -q 'offered load was not met' "$work/gen.err" && echo '(offered load not met)' || true)"
}

# Frames/s and CPU per frame of one forwarding run ($1: a file prefix):
# the ring generator at saturation, 64-byte frames to the sink's address
# through r0 (no ARP: the router's MAC given).
fwd_run() {
    local f="$1" r0 r1 b0 b1
    r0=$(nsx "$sink" cat /sys/class/net/s0/statistics/rx_packets); b0=$(busy_jiffies)
    nsx "$gen" "${pin_rest[@]}" "$bin" gen --dst 10.71.2.2 --backend packet --device g0 \
        --dst-mac "$(mac "$rtr" r0)" --flow "dport=5002,rate=5gbit,size=64" \
        --duration "${fwd_secs}s" --json >"$f.gen.json" 2>"$work/gen.err" ||
        { echo "gen failed at $f:" >&2; cat "$work/gen.err" >&2; }
    sleep 0.2 # frames still in the router's rings
    r1=$(nsx "$sink" cat /sys/class/net/s0/statistics/rx_packets); b1=$(busy_jiffies)
    awk -v n=$((r1 - r0)) -v s="$fwd_secs" 'BEGIN{printf "%d\n", n / s}' >"$f.pps"
    cpu_ns_per_frame $((b1 - b0)) $((r1 - r0)) >"$f.cpu_ns"
    awk -v s="$fwd_secs" 'BEGIN{t=0} {n=split($0,a,"\"sent\":"); for(i=2;i<=n;i++) t+=a[i]+0} END{printf "%d\n", t / s}' \
        "$f.gen.json" >"$f.offered"
}
median() { sort -n "$@" | awk '{v[NR]=$1} END{print (NR ? v[int((NR+1)/2)] : "—")}'; }

kernel_forwarding() { # $1 on|off
    if [ "$1" = on ]; then
        ip -n "$rtr" addr add 10.71.1.1/24 dev r0
        ip -n "$rtr" addr add 10.71.2.1/24 dev r1
        ip -n "$rtr" neigh replace 10.71.2.2 lladdr "$(mac "$sink" s0)" dev r1 nud permanent
        nsx "$rtr" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.r0.rp_filter=0
    else
        nsx "$rtr" sysctl -qw net.ipv4.ip_forward=0
        ip -n "$rtr" addr flush dev r0
        ip -n "$rtr" addr flush dev r1
    fi
}

# Each strategy with cost "none", then the kernel; 3 runs each.
forwarding() {
    local dir="$out/forwarding" archs="$strategies kernel" a i
    mkdir -p "$dir"
    route_cost=none
    for a in $archs; do
        if [ "$a" = kernel ]; then kernel_forwarding on; else start_router "$a" "$dir/$a.route.json"; fi
        for i in 1 2 3; do fwd_run "$dir/$a-$i"; done
        if [ "$a" = kernel ]; then kernel_forwarding off; else stop_router; fi
        echo "forwarding $a: $(median "$dir/$a"-?.pps) frames/s, $(median "$dir/$a"-?.cpu_ns) CPU ns/frame"
    done
    route_cost="$cost"
    {
        echo "| 64 B frames, ring generator at saturation (median of 3 × ${fwd_secs} s) |$(for a in $archs; do
            [ "$a" = kernel ] && printf ' kernel ip_forward |' || printf ' pktsched %s |' "$a"; done)"
        echo "| --- |$(for a in $archs; do printf ' ---: |'; done)"
        echo "| frames/s arriving at the sink (s0 rx_packets) |$(for a in $archs; do printf ' %s |' "$(median "$dir/$a"-?.pps)"; done)"
        echo "| whole-machine busy CPU ns per arriving frame (generator included) |$(for a in $archs; do printf ' %s |' "$(median "$dir/$a"-?.cpu_ns)"; done)"
        echo "| frames/s offered by the generator |$(for a in $archs; do printf ' %s |' "$(median "$dir/$a"-?.offered)"; done)"
        echo "| the router's own per-packet time x, ns (route --json service_ns, over the 3 runs) |$(for a in $archs; do
            printf ' %s |' "$(sed -n 's/.*"service_ns": *\([0-9.]*\).*/\1/p' "$dir/$a.route.json" 2>/dev/null | head -1 |
                awk '{printf "%.0f", $1} END{if (!NR) printf "—"}')"; done)"
    } >"$out/ingress-forwarding.md"
    echo
    cat "$out/ingress-forwarding.md"
}

sweeps() {
    # Capacity: SQ at an overload, x as the router measured it.
    start_router sq "$work/calib.json"
    nsx "$gen" "${pin_rest[@]}" "$bin" gen "${gen_args[@]}" --load "$(awk -v c="$cost" 'BEGIN{
        n=c+0; u=c; sub(/^[0-9.]+/,"",u); ns=(u=="us")?n*1000:(u=="ms")?n*1e6:n; printf "%d", 2e9/ns }')pps" \
        --rt-share 0 --duration 1s >/dev/null 2>&1 || true
    stop_router
    x_ns=$(sed -n 's/.*"service_ns": *\([0-9.eE+-]*\).*/\1/p' "$work/calib.json" | head -1)
    [ -n "$x_ns" ] && awk -v x="$x_ns" 'BEGIN{exit !(x > 0)}' ||
        { echo "the router reported no service time x:" >&2; cat "$work/calib.json" "$work/route.err" >&2; exit 1; }
    capacity=$(awk -v x="$x_ns" 'BEGIN{printf "%d", 1e9/x}')
    echo "router: cost $cost, measured x = $x_ns ns, capacity ≈ $capacity packets/s; $mode mode, ${secs}s per point"

    for st in $strategies; do
        for f in $loads; do
            point "$st" load "$(awk -v c="$capacity" -v f="$f" 'BEGIN{printf "%d", c*f}')" "$rt_share" "$f"
        done
        for s in $shares; do
            point "$st" share "$(awk -v c="$capacity" -v f="$overload" 'BEGIN{printf "%d", c*f}')" "$s" "$overload"
        done
    done
}

topology
gen_args=(--dst 10.71.2.2 --backend "$gen_backend")
if [ "$gen_backend" = packet ]; then gen_args+=(--device g0 --dst-mac "$(mac "$rtr" r0)"); fi

[ "$mode" = forwarding ] || sweeps
[ "$mode" = quick ] || forwarding
[ "$mode" = forwarding ] && exit 0

echo
echo "RT bound (b+rho)x/(1-rho) + x with the router's measured x, next to the measured RT p99; the targets:"
"$bin" plot ingress "$out"
