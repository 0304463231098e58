#!/usr/bin/env bash
# pktsched run vs the kernel's HTB on the same wire (root; namespaces of its
# own, removed at exit):
#
#   gen ns: g0 ── d0 [dut ns: pktsched run d0→d1 | bridge br0 + HTB on d1] d1 ── s0: sink ns
#
# The same `pktsched gen` traffic goes once through each; `pktsched sink`
# measures what arrives. Printed as a Markdown table (and written to
# target/compare-htb.md):
#   1. rate accuracy: one greedy 1500-byte flow into a 100 Mbit/s limit;
#   2. the victim: a 1 Mbit/s flow of 200-byte frames next to 8 greedy
#      flows (160 Mbit/s offered into 100 Mbit/s), p50/p99/p999 latency;
#   3. forwarding cost: 64-byte frames at a fixed offered rate, not
#      limiting: packets/s received and whole-machine CPU ns per packet
#      (generator and sink included, the same for both);
#   4. a config change under load (pktsched reload / tc class change):
#      datagrams lost;
#   5. saturation: 64-byte frames in UDP GSO batches (`gen --backend
#      gso`; SAT_GEN=packet: the AF_PACKET ring generator, `gen --backend
#      packet`), far more than any of them forwards, limit
#      far above: frames/s arriving on s0 (its rx_packets counter), also
#      through a plain bridge with no qdisc. s0's receive ends at a bound
#      UDP socket that never reads (SAT_SINK below), not in an ICMP
#      port unreachable per frame.
#   2b. the same victim at a lower link rate (VICTIM_RATE, default
#      10mbit; whole Mbit/s, at least 2): 8 greedy 1500-byte flows of
#      VICTIM_RATE/5 each (1.6x overload) and the victim at
#      min(1 Mbit/s, VICTIM_RATE/10), HTB's classes scaled alike
#      (`victim-slow`). A bulk frame takes 1.2 ms at 10 Mbit/s, more than
#      the VM's noise, so whether the victim waits for it shows.
#      Both victim measurements also run through the plain bridge and the
#      direct veth (`bridge`, `direct`: no scheduler at all), the victim's
#      floor on this wire (generator, sink and VM), in a table of their own.
#   6. the CPU floor: measurement 3 also through a plain bridge (no qdisc)
#      and over a direct gen -> sink veth (`direct`: no device under test
#      at all; the generator's and sink's addresses move to a veth pair
#      fwg <-> fws between their namespaces for it), so a table shows what
#      the generator and sink cost alone at the same offered rate.
#
# pktsched runs once per engine (link.engine = run-to-completion, pspat).
# ARCHS picks the architectures and their order (default "rtc pspat htb
# bridge direct"); `rtc-bp` is the run-to-completion engine with busy polling
# (`run --busy-poll`, needs the pinning below), so `ARCHS="rtc rtc-bp htb"`
# compares both in one interleaved run; `rtc-nc` is the run-to-completion
# engine without the priority credit (`link.prio_burst = 0`; the victim's
# class otherwise gets the default, one frame), `rtc-pbN` with
# `link.prio_burst = N` bytes; a `-nt` suffix (`rtc-nt`) runs that
# architecture with d0's NAPI threaded on the DUT core (as DUT_NAPI=thread
# below, for that architecture only), so `ARCHS="rtc rtc-nt htb"` compares
# both placements interleaved. PKTSCHED_BUSY_POLL=1 turns busy
# polling on for every pktsched architecture.
#
# Placement (alike for every row): with two or more CPUs the device under
# test works on CPU 1 and the generator and sink on CPU 0 — pktsched's
# forwarding threads with `run --cpu 1`, the bridge + HTB path by steering
# d0's receive processing to CPU 1 (RPS: the bridge, HTB's enqueue and
# the transmit to s0 then run in softirq there). PIN=0 turns it off.
# PKTSCHED_RT=N adds `--rt-priority N` (SCHED_FIFO) to pktsched, except
# to a busy-polling one (it would starve its core's softirq work).
# d0's receive work for pktsched (veth's NAPI: the XDP program and the copy
# into the AF_XDP ring) runs in softirq on the core that sent the frame,
# i.e. the generator's CPU 0, where HTB's rows have RPS move d0's receive
# to the DUT core. DUT_NAPI=thread switches d0 to threaded NAPI once
# pktsched has attached its XDP program (/sys/class/net/d0/threaded) and
# pins that kernel thread to the DUT core, under PKTSCHED_RT=N at
# SCHED_FIFO N+1 (veth queues only 256 frames for d0, so the thread must
# preempt the forwarder as a softirq would), so both paths receive on the
# DUT core; DUT_NAPI=softirq (the default) leaves it where it is.
# DUT_NAPI_PRIO=D sets the NAPI thread's priority to PKTSCHED_RT + D
# (default 1; -1 lets the forwarder preempt it). When
# the core that runs d0's NAPI is short of time, veth's 256-frame XDP ring
# from g0 to d0 overflows and those frames are dropped at g0's transmit
# (g0 tx_dropped, printed per fixed-rate run) before pktsched sees them.
# PERF_RECORD=1 records the forwarder's profile in each measurement
# (`perf record -e cpu-clock -g`, kept as NAME.perf.data and the top
# symbols in NAME.profile.txt; use with KEEP); PERF_RECORD=dut records
# the whole DUT core instead (`-C 1`: the forwarder, the NAPI thread,
# softirq and anything else there), for every architecture, and
# PERF_RECORD=all every CPU (`-a`: the generator's core too). KEEP=DIR
# keeps the run's files (configs, each measurement's JSON, pktsched's
# stats) in DIR. The saturation run records its profile too (name
# ARCH-sat) and prints each CPU's busy share, g0's drops and pktsched's
# I/O counters, and with ROUNDS > 1 its frames/s per round and median. ONLY="victim fwd" runs only the listed measurements
# (rate, victim, fwd, reload, sat) of each architecture, e.g. to look at
# the forwarder's pass trace (the `forwarder` object of NAME.stats.json);
# the summary table then prints only what was measured. ROUNDS=N runs
# every architecture N times, the order rotated each round, and prints
# each victim measurement's p99 per round, its median and how many rounds
# each architecture had the lowest p99 (the single tables show the last
# round).
# For pktsched the forwarder's own CPU per frame and its context switches
# per frame (voluntary = sleeps, involuntary = preemptions) are printed
# too, from /proc/PID, and with `perf` its system calls per frame
# (sendto = TX kicks, ppoll/poll = sleeps). The victim's time is split
# from pktsched's stats: kernel receive → taken from the ring (ring wait),
# received → released (inside), kernel receive → released; the rest of the
# sink's one-way latency is the generator → XDP and the transmit. Besides
# whole-machine CPU, the DUT core's busy time per frame (its /proc/stat
# cpuN line) is printed for every architecture: both pktsched and the HTB
# path work on that core.
#
#   scripts/compare-htb.sh [SECONDS]      (default 5 per measurement)
set -euo pipefail
# PKTSCHED_BIN=PATH uses that binary instead of building one (e.g. to
# interleave two builds: before and after a change); a relative PATH is
# taken from the directory the script was started in.
if [ -n "${PKTSCHED_BIN:-}" ]; then
    bin="$(realpath -e -- "$PKTSCHED_BIN" 2>/dev/null)" ||
        { echo "compare-htb.sh: PKTSCHED_BIN=$PKTSCHED_BIN: no such file" >&2; exit 2; }
    [ -f "$bin" ] && [ -x "$bin" ] ||
        { echo "compare-htb.sh: PKTSCHED_BIN=$PKTSCHED_BIN ($bin) is not an executable file" >&2; exit 2; }
fi
measurements="rate victim victim-slow fwd reload sat"
for w in ${ONLY:-}; do
    case " $measurements " in
        *" $w "*) ;;
        *) echo "compare-htb.sh: ONLY=\"$ONLY\": unknown measurement \"$w\"; allowed: $measurements" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
secs="${1:-5}"
victim_rate="${VICTIM_RATE:-10mbit}"
if ! [[ "$victim_rate" =~ ^[1-9][0-9]{0,5}mbit$ ]] || [ "${victim_rate%mbit}" -lt 2 ]; then
    echo "compare-htb.sh: VICTIM_RATE=$victim_rate: allowed whole Mbit/s of at least 2, e.g. 10mbit" >&2; exit 2
fi
rounds="${ROUNDS:-1}"
case "$rounds" in ''|*[!0-9]*|0) echo "compare-htb.sh: ROUNDS=$rounds: allowed a whole number of at least 1" >&2; exit 2 ;; esac
# The slow victim's flows: 8 greedy at a fifth of the rate, the victim at
# a tenth of it, at most 1 Mbit/s (in kbit/s).
slow_kbit=$(( ${victim_rate%mbit} * 1000 ))
slow_greedy="dport=6000,count=8,rate=$(( slow_kbit / 5 ))kbit,size=1500"
slow_victim="dport=6008,rate=$(( slow_kbit / 10 < 1000 ? slow_kbit / 10 : 1000 ))kbit,size=200,pattern=poisson"
# The environment, checked before anything runs (scripts/compare-htb.sh
# runs as root: PKTSCHED_RT and DUT_NAPI_PRIO go into $(( )), which would
# evaluate text such as a[$(cmd)]; PKTSCHED_BACKEND goes into a TOML file;
# NS_PREFIX into namespace names).
fail_env() { echo "compare-htb.sh: $1" >&2; exit 2; }
if [ -n "${PKTSCHED_RT:-}" ] && ! [[ "$PKTSCHED_RT" =~ ^[1-9][0-9]?$ ]]; then
    fail_env "PKTSCHED_RT=$PKTSCHED_RT: allowed a whole number 1..99 (the forwarder's SCHED_FIFO priority) or unset"
fi
case "${PKTSCHED_BUSY_POLL:-0}" in
    0 | 1) ;;
    *) fail_env "PKTSCHED_BUSY_POLL=$PKTSCHED_BUSY_POLL: allowed 0 (off, the default) or 1 (on)" ;;
esac
case "${PKTSCHED_BACKEND:-auto}" in
    auto | xdp | packet) ;;
    *) fail_env "PKTSCHED_BACKEND=$PKTSCHED_BACKEND: allowed auto (the default), xdp or packet" ;;
esac
[[ "${NS_PREFIX:-vc}" =~ ^[a-z0-9-]{1,8}$ ]] ||
    fail_env "NS_PREFIX=$NS_PREFIX: allowed 1 to 8 of a-z, 0-9 and - (the start of the namespaces' names)"
# SAT_SINK: what takes the saturation run's frames on s0: `socket` (the
# default), a bound UDP socket on the port that never reads, or `none`,
# no socket at all: every frame then makes s0's stack build an ICMP port
# unreachable (rate-limited sends, but a route lookup per frame), work
# that runs on the DUT core for every architecture (saturation figures
# taken with `none` are not comparable with `socket`'s).
sat_sink="${SAT_SINK:-socket}"
case "$sat_sink" in socket|none) ;; *) fail_env "SAT_SINK=$sat_sink: allowed socket or none" ;; esac
# SAT_GEN: the saturation run's generator backend: `gso` (the default: a
# UDP socket sending 64 datagrams per call with UDP GSO, cut into frames
# at g0 in one transmit, so d0's receive runs once per batch, not once per
# frame; g0's offloads are off, so every architecture gets the same
# separate 64-byte frames) or `packet` (the AF_PACKET transmit ring on g0,
# 64 frames per kick, each frame its own transmit and d0 receive; the
# generator of the figures before 2026-11-27).
sat_gen="${SAT_GEN:-gso}"
case "$sat_gen" in packet|gso) ;; *) fail_env "SAT_GEN=$sat_gen: allowed packet or gso" ;; esac
dut_napi="${DUT_NAPI:-softirq}"
case "$dut_napi" in thread|softirq) ;; *) fail_env "DUT_NAPI=$dut_napi: allowed thread or softirq" ;; esac
napi_prio="${DUT_NAPI_PRIO:-1}"
[[ "$napi_prio" =~ ^-?[0-9]{1,2}$ ]] ||
    fail_env "DUT_NAPI_PRIO=$napi_prio: allowed a whole number -99..99 (the NAPI thread's priority relative to PKTSCHED_RT)"
[ "$(id -u)" = 0 ] || { echo "compare-htb.sh needs root (network namespaces)" >&2; exit 2; }
ci/deps.sh >/dev/null 2>&1 || true
if [ -z "${PKTSCHED_BIN:-}" ]; then
    cargo build --release -q -p pktsched
    bin="$PWD/target/release/pktsched"
fi
# NS_PREFIX: the first letters of its namespaces' names (default vc).
p="${NS_PREFIX:-vc}cmp$$-"
gen="${p}gen" dut="${p}dut" sink="${p}sink"
work="$(mktemp -d)"
cleanup() {
    pkill -f "$work/" 2>/dev/null || true
    for ns in "$gen" "$dut" "$sink"; do ip netns del "$ns" 2>/dev/null || true; done
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$work"/. "$KEEP"/; fi
    rm -rf "$work"
}
trap cleanup EXIT
scripts/netns-topology.sh up "$p" >/dev/null

nsx() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }

pin_dut=() pin_rest=() dut_cpu=""
if [ "${PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ]; then
    dut_cpu=1 pin_dut=(--cpu 1) pin_rest=(taskset -c 0)
fi
rt_args=()
[ -n "${PKTSCHED_RT:-}" ] && rt_args=(--rt-priority "$PKTSCHED_RT")
bp_args=()
[ "${PKTSCHED_BUSY_POLL:-0}" = 1 ] && bp_args=(--busy-poll)
# The generator and sink on the other CPU.
nsr() { local ns="$1"; shift; ip netns exec "$ns" "${pin_rest[@]}" "$@"; }
# RPS: d0's receive processing on the DUT's CPU (HTB rows), or back to
# where the frame arrived ("0").
rps() { nsx "$dut" sh -c "echo $1 > /sys/class/net/d0/queues/rx-0/rps_cpus" 2>/dev/null || true; }
[ -n "$dut_cpu" ] || dut_napi=softirq
# The NAPI placement of the pktsched architecture being run: DUT_NAPI,
# or `thread` for the `-nt` variants (rtc-nt: run-to-completion with d0's
# NAPI threaded), so both placements interleave in one run.
arch_napi="$dut_napi"
# napi_on_dut: d0's NAPI as a kernel thread on the DUT core, with
# pktsched's policy (after the XDP program is attached: veth has a NAPI
# context only then). Kernel threads live in no namespace and other runs
# may have a d0 too, so the thread is the napi/d0-* that appears when
# threaded NAPI is switched on.
napi_threads() { ps -eo pid=,comm= | awk 'index($2, "napi/d0-") == 1 {print $1}' | sort; }
napi_on_dut() {
    [ "$arch_napi" = thread ] || return 0
    [ "${PKTSCHED_BACKEND:-auto}" = packet ] &&
        { echo "compare-htb.sh: DUT_NAPI=thread needs the xdp backend (veth has a NAPI context only with an XDP program); PKTSCHED_BACKEND=packet runs with DUT_NAPI=softirq" >&2; exit 1; }
    local before pid=""
    before=$(napi_threads)
    nsx "$dut" sh -c 'echo 1 > /sys/class/net/d0/threaded' ||
        { echo "compare-htb.sh: d0 refused threaded NAPI; DUT_NAPI=softirq to run without" >&2; exit 1; }
    for _ in $(seq 50); do
        pid=$(comm -13 <(echo "$before") <(napi_threads) | head -1)
        [ -n "$pid" ] && break
        sleep 0.02
    done
    [ -n "$pid" ] || { echo "compare-htb.sh: no new napi/d0 thread after threaded NAPI on d0" >&2; exit 1; }
    taskset -pc "$dut_cpu" "$pid" >/dev/null
    # One above the forwarder: veth queues only 256 frames for d0, so its
    # NAPI preempts the forwarder as a softirq would, not wait for its pass.
    # DUT_NAPI_PRIO=D puts it D above the forwarder instead (0: level, no
    # preemption either way; -1: the forwarder preempts it).
    if [ -n "${PKTSCHED_RT:-}" ]; then
        local np=$(( PKTSCHED_RT + napi_prio ))
        chrt -f -p "$(( np < 1 ? 1 : np > 99 ? 99 : np ))" "$pid"
    fi
}
napi_off() { [ "$arch_napi" = thread ] && nsx "$dut" sh -c 'echo 0 > /sys/class/net/d0/threaded' 2>/dev/null || true; }

# proc_counters PID: "cpu_jiffies voluntary involuntary" summed over the
# process's threads (zeros when there is none).
proc_counters() {
    local pid="$1" j=0 v=0 n=0 t
    if [ -z "$pid" ] || [ ! -d "/proc/$pid" ]; then echo "0 0 0"; return; fi
    j=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')
    for t in /proc/"$pid"/task/*/status; do
        v=$(( v + $(awk '/^voluntary_ctxt_switches/{print $2}' "$t" 2>/dev/null || echo 0) ))
        n=$(( n + $(awk '/^nonvoluntary_ctxt_switches/{print $2}' "$t" 2>/dev/null || echo 0) ))
    done
    echo "$j $v $n"
}

# busy_jiffies
. scripts/lib/cpu.sh

shaper_config() { # $1 algorithm-or-policy line, $2 rate, $3 engine
    cat >"$work/run.toml" <<EOF
[link]
ingress = "d0"
egress = "d1"
rate = "$2"
engine = "$3"
backend = "${PKTSCHED_BACKEND:-auto}"
$prio_line
[scheduler]
$1
[control]
socket = "$work/ctl.sock"
[[class]]
name = "victim"
weight = 50
prio = 0
limit = 1000
match = [{ dport = 6008 }]
[[class]]
name = "bulk"
weight = 1
prio = 1
limit = 1000
default = true
EOF
}

# PKTSCHED_BACKEND: link.backend for pktsched (default auto: AF_XDP in
# copy mode on veth, else AF_PACKET; packet or xdp to force one).
# PKTSCHED_ALG: the algorithm for pktsched's two classes (default prio,
# as HTB's victim class has prio 0; drr weighs them 50:1 instead).
prio_line="" # a `link.prio_burst` line, for rtc-nc
start_pktsched() { # $1 rate, $2 engine, rest: more `run` arguments
    local rate="$1" engine="$2"; shift 2
    shaper_config "algorithm = \"${PKTSCHED_ALG:-prio}\"" "$rate" "$engine"
    # Not through nsx: $! must be the shaper itself (ip netns exec execs it).
    # A busy poller keeps the normal policy: under SCHED_FIFO it would
    # starve the softirq work of its own core.
    local rt=("${rt_args[@]}")
    case " $* ${bp_args[*]} " in *" --busy-poll "*) rt=() ;; esac
    ip netns exec "$dut" ${PKTSCHED_CHRT:+chrt -f "$PKTSCHED_CHRT"} "$bin" run --config "$work/run.toml" \
        "${pin_dut[@]}" "${rt[@]}" "${bp_args[@]}" "$@" >"$work/run.out" 2>"$work/run.err" &
    shaper_pid=$!
    for _ in $(seq 100); do [ -S "$work/ctl.sock" ] && { napi_on_dut; return; }; sleep 0.05; done
    cat "$work/run.err" >&2; exit 1
}
stop_pktsched() { napi_off; kill -TERM "$shaper_pid" 2>/dev/null || true; wait "$shaper_pid" 2>/dev/null || true; shaper_pid=""; rm -f "$work/ctl.sock"; }
shaper_pid=""

start_htb() { # $1 rate
    nsx "$dut" ip link add br0 type bridge
    nsx "$dut" ip link set d0 master br0
    nsx "$dut" ip link set d1 master br0
    nsx "$dut" ip link set br0 up
    nsx "$dut" tc qdisc add dev d1 root handle 1: htb default 20 r2q 100
    nsx "$dut" tc class add dev d1 parent 1: classid 1:1 htb rate "$1" ceil "$1"
    nsx "$dut" tc class add dev d1 parent 1:1 classid 1:10 htb rate "$(( ${1%mbit} / 2 ))mbit" ceil "$1" prio 0
    nsx "$dut" tc class add dev d1 parent 1:1 classid 1:20 htb rate "$(( ${1%mbit} / 2 ))mbit" ceil "$1" prio 1
    nsx "$dut" tc filter add dev d1 parent 1: protocol ip u32 match ip dport 6008 0xffff flowid 1:10
    if [ -n "$dut_cpu" ]; then rps $(( 1 << dut_cpu )); fi
}
stop_htb() {
    rps 0
    nsx "$dut" tc qdisc del dev d1 root 2>/dev/null || true
    nsx "$dut" ip link del br0 2>/dev/null || true
}
start_bridge() { # a plain bridge, no qdisc (veths default to noqueue)
    nsx "$dut" ip link add br0 type bridge
    nsx "$dut" ip link set d0 master br0
    nsx "$dut" ip link set d1 master br0
    nsx "$dut" ip link set br0 up
    if [ -n "$dut_cpu" ]; then rps $(( 1 << dut_cpu )); fi
}

# The direct path: g0's and s0's addresses move to a veth pair fwg <-> fws
# between the generator's and the sink's namespaces (nothing in between).
start_direct() {
    ip link add fwg netns "$gen" type veth peer name fws netns "$sink"
    nsx "$gen" ip addr del 198.18.0.1/24 dev g0
    nsx "$sink" ip addr del 198.18.0.2/24 dev s0
    nsx "$gen" ip addr add 198.18.0.1/24 dev fwg
    nsx "$sink" ip addr add 198.18.0.2/24 dev fws
    nsx "$gen" ethtool -K fwg tso off gso off gro off tx off rx off >/dev/null 2>&1 || true
    nsx "$sink" ethtool -K fws tso off gso off gro off tx off rx off >/dev/null 2>&1 || true
    nsx "$gen" ip link set fwg up
    nsx "$sink" ip link set fws up
}
stop_direct() {
    nsx "$gen" ip link del fwg 2>/dev/null || true
    # `replace` is idempotent; a failure here must stop the script, or the
    # later measurements would run with no addresses and record zeros.
    nsx "$gen" ip addr replace 198.18.0.1/24 dev g0
    nsx "$sink" ip addr replace 198.18.0.2/24 dev s0
}

# Architectures: pktsched with each engine, bridge + HTB, plain bridge, and
# no device under test (direct).
start_arch() { # $1 arch, $2 rate
    arch_napi="$dut_napi"
    case "$1" in
        htb-nt|bridge-nt|direct-nt)
            echo "compare-htb.sh: ARCHS: $1: the -nt suffix is for pktsched's architectures (rtc..., pspat)" >&2; exit 2 ;;
        *-nt)
            [ -n "$dut_cpu" ] || { echo "compare-htb.sh: ARCHS: $1 needs the pinning (two CPUs, PIN=1)" >&2; exit 2; }
            arch_napi=thread
            start_arch_base "${1%-nt}" "$2"
            arch_napi=thread
            return ;;
    esac
    start_arch_base "$1" "$2"
}
start_arch_base() { # $1 arch, $2 rate
    case "$1" in
        rtc) prio_line="" start_pktsched "$2" run-to-completion ;;
        rtc-nc) prio_line="prio_burst = 0" start_pktsched "$2" run-to-completion ;;
        rtc-pb*)
            [[ "${1#rtc-pb}" =~ ^[0-9]+$ ]] ||
                { echo "compare-htb.sh: ARCHS: $1: allowed rtc-pbN with N whole bytes, e.g. rtc-pb3028" >&2; exit 2; }
            prio_line="prio_burst = ${1#rtc-pb}" start_pktsched "$2" run-to-completion ;;
        rtc-bp) start_pktsched "$2" run-to-completion --busy-poll ;;
        pspat) start_pktsched "$2" pspat ;;
        htb) start_htb "$2" ;;
        bridge) start_bridge ;;
        direct) start_direct ;;
    esac
}
stop_arch() {
    case "$1" in
        *-nt) stop_arch "${1%-nt}"; arch_napi="$dut_napi"; return ;;
    esac
    case "$1" in
        rtc|rtc-nc|rtc-pb*|rtc-bp|pspat) stop_pktsched ;;
        direct) stop_direct ;;
        *) stop_htb ;;
    esac
}

s0_rx() { nsx "$sink" cat /sys/class/net/s0/statistics/rx_packets; }
# Frames veth dropped at g0's transmit: d0's receive ring (its XDP ring
# when a program is attached, 256 frames) was full.
g0_tx_dropped() { nsx "$gen" cat /sys/class/net/g0/statistics/tx_dropped; }

saturate() { # $1 name: 64-byte frames from the generator (SAT_GEN), far above
    local name="$1"
    # One ordinary datagram first, so ARP has resolved the sink's MAC.
    nsr "$gen" "$bin" gen --dst 198.18.0.2 --flow dport=6000,rate=1mbit,size=64 --duration 200ms >/dev/null 2>&1 || true
    local r0 b0 r1 b1 c0 c1 p0 p1 g0 hold_pid=""
    if [ "$sat_sink" = socket ]; then
        # A bound UDP socket that never reads: s0's receive ends at its
        # full buffer (the kernel's UDP RcvbufErrors) instead of building
        # an ICMP port-unreachable per frame (a route lookup and an ICMP
        # send on the DUT core, where s0's receive runs).
        # Not through nsr: $! must be python itself (ip netns exec and
        # taskset exec it), so the kill below ends it before the next sink.
        ip netns exec "$sink" "${pin_rest[@]}" python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.bind(("198.18.0.2", 6000))
time.sleep(float(sys.argv[1]))' "$(( secs + 2 ))" &
        hold_pid=$!
        sleep 0.3
    fi
    perf_start "$name"
    g0=$(g0_tx_dropped); p0=($(proc_counters "$shaper_pid"))
    local t0 t1
    r0=$(s0_rx); b0=$(busy_jiffies); c0=($(per_cpu_busy)); t0=$(date +%s%N)
    local gen_backend=(--backend packet --device g0)
    [ "$sat_gen" = gso ] && gen_backend=(--backend gso)
    nsr "$gen" "$bin" gen --dst 198.18.0.2 "${gen_backend[@]}" \
        --flow "dport=6000,rate=5gbit,size=64" --duration "${secs}s" --json >"$work/$name.gen.json"
    r1=$(s0_rx); b1=$(busy_jiffies); c1=($(per_cpu_busy)); t1=$(date +%s%N); p1=($(proc_counters "$shaper_pid"))
    perf_stop "$name"
    if [ -n "$hold_pid" ]; then kill "$hold_pid" 2>/dev/null || true; wait "$hold_pid" 2>/dev/null || true; fi
    echo $(( (r1 - r0) / secs )) >"$work/$name.pps"
    echo $(( (b1 - b0) * 10000000 / ((r1 - r0) > 0 ? (r1 - r0) : 1) )) >"$work/$name.cpu_per_frame"
    # Each CPU's busy share of the run (%), g0's drops, the forwarder's
    # own jiffies and switches: what saturates first.
    local i shares=""
    # Over the generator's whole run (it starts and stops around SECONDS).
    local ticks=$(( (t1 - t0) * $(getconf CLK_TCK) / 1000000000 ))
    for i in "${!c0[@]}"; do shares="$shares $(( (c1[i] - c0[i]) * 100 / (ticks > 0 ? ticks : 1) ))"; done
    echo "$shares" >"$work/$name.cpu_busy_pct"
    echo $(( ($(g0_tx_dropped) - g0) / secs )) >"$work/$name.g0_dropped"
    echo $(( p1[0] - p0[0] )) $(( p1[1] - p0[1] )) $(( p1[2] - p0[2] )) >"$work/$name.proc"
    [ -S "$work/ctl.sock" ] && "$bin" stats --socket "$work/ctl.sock" --json >"$work/$name.stats.json" 2>/dev/null || true
}

# per_cpu_busy: every CPU's busy jiffies (cpu0 cpu1 ...), one line.
per_cpu_busy() { awk '$1 ~ /^cpu[0-9]+$/ {printf "%d ", $2+$3+$4+$7+$8} END {print ""}' /proc/stat; }

# perf_start NAME: with PERF_RECORD=dut the whole DUT core's profile
# (every architecture: kernel threads and softirq too), PERF_RECORD=all
# every CPU's (the generator's side too: `perf report --sort cpu,comm`),
# PERF_RECORD=1 the forwarder's; the recorder's pid in rec_pid (empty
# when none). perf_stop NAME stops it and writes NAME.profile.txt.
rec_pid=""
perf_start() {
    rec_pid=""
    if [ "${PERF_RECORD:-}" = dut ] && [ -n "$dut_cpu" ] && command -v perf >/dev/null; then
        perf record -q -e cpu-clock -g -C "$dut_cpu" -o "$work/$1.perf.data" 2>/dev/null &
        rec_pid=$!
    elif [ "${PERF_RECORD:-}" = all ] && command -v perf >/dev/null; then
        perf record -q -e cpu-clock -g -a -o "$work/$1.perf.data" 2>/dev/null &
        rec_pid=$!
    elif [ -n "${PERF_RECORD:-}" ] && [ -n "$shaper_pid" ] && command -v perf >/dev/null; then
        perf record -q -e cpu-clock -g -p "$shaper_pid" -o "$work/$1.perf.data" 2>/dev/null &
        rec_pid=$!
    fi
}
perf_stop() {
    [ -n "$rec_pid" ] || return 0
    kill -INT "$rec_pid" 2>/dev/null || true; wait "$rec_pid" 2>/dev/null || true; rec_pid=""
    perf report -i "$work/$1.perf.data" --no-children --sort sym --stdio 2>/dev/null \
        | grep -v '^#' | grep '%' | head -40 >"$work/$1.profile.txt" || true
}

measure() { # $1 name; rest: gen --flow specs. Prints the sink's JSON path.
    local name="$1"; shift
    nsr "$sink" "$bin" sink --ports 6000-6008 --idle 1s --json >"$work/$name.json" 2>/dev/null &
    local sink_pid=$!
    sleep 0.3
    local flows=()
    for f in "$@"; do flows+=(--flow "$f"); done
    local b0 b1 p0 p1 perf_pid=""
    if [ -n "$shaper_pid" ] && command -v perf >/dev/null; then
        perf stat -x, -o "$work/$name.perf" -p "$shaper_pid" \
            -e syscalls:sys_enter_sendto,syscalls:sys_enter_ppoll,syscalls:sys_enter_poll 2>/dev/null &
        perf_pid=$!
    fi
    local d0=0 d1=0
    perf_start "$name"
    local g0=$(g0_tx_dropped)
    b0=$(busy_jiffies); p0=($(proc_counters "$shaper_pid"))
    [ -n "$dut_cpu" ] && d0=$(cpu_busy_jiffies "$dut_cpu")
    nsr "$gen" "$bin" gen --dst 198.18.0.2 "${flows[@]}" --duration "${secs}s" --json >"$work/$name.gen.json"
    b1=$(busy_jiffies); p1=($(proc_counters "$shaper_pid"))
    [ -n "$dut_cpu" ] && d1=$(cpu_busy_jiffies "$dut_cpu")
    echo $(( $(g0_tx_dropped) - g0 )) >"$work/$name.g0_dropped"
    echo $(( d1 - d0 )) >"$work/$name.dut_jiffies"
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; fi
    perf_stop "$name"
    # The forwarder's own CPU jiffies, voluntary and involuntary switches.
    echo $(( p1[0] - p0[0] )) $(( p1[1] - p0[1] )) $(( p1[2] - p0[2] )) >"$work/$name.proc"
    # pktsched's own view: each class's sojourn (received → released to the output).
    [ -S "$work/ctl.sock" ] && "$bin" stats --socket "$work/ctl.sock" --json >"$work/$name.stats.json" 2>/dev/null || true
    wait "$sink_pid" || true
    echo $(( (b1 - b0) * 10000000 )) >"$work/$name.cpu_ns" # jiffies at HZ=100 in /proc/stat (USER_HZ)
}

jq_py() { python3 -c "import json,sys; d=json.load(open('$1')); $2"; }

wanted() { case " ${ONLY:-$measurements} " in *" $1 "*) return 0 ;; esac; return 1; }

victims() { # $1 arch, $2 rate for victim-slow: both victim measurements
    local a="$1"
    if wanted victim; then
        start_arch "$a" 100mbit
        measure "$a-victim" "dport=6000,count=8,rate=20mbit,size=1500" "dport=6008,rate=1mbit,size=200,pattern=poisson"
        stop_arch "$a"
    fi
    if wanted victim-slow; then
        start_arch "$a" "$2"
        measure "$a-victim-slow" "$slow_greedy" "$slow_victim"
        stop_arch "$a"
    fi
}

run_all() { # $1 arch
    local a="$1"
    if [ "$a" = direct ]; then # no device to shape with: the floors only
        victims direct 0
        if wanted fwd; then
            start_arch direct 0
            measure direct-fwd "dport=6000,rate=60mbit,size=64"
            stop_arch direct
        fi
        return 0
    fi
    if [ "$a" = bridge ]; then victims bridge 0; fi
    if [ "$a" = bridge ] && wanted fwd; then # the CPU floor with a device
        start_arch bridge 0
        measure bridge-fwd "dport=6000,rate=60mbit,size=64"
        stop_arch bridge
    fi
    if [ "$a" != bridge ]; then
        # 1. rate accuracy
        if wanted rate; then
            start_arch "$a" 100mbit
            measure "$a-rate" "dport=6000,rate=150mbit,size=1500"
            stop_arch "$a"
        fi
        # 2. victim latency under overload (and 2b. at VICTIM_RATE)
        victims "$a" "$victim_rate"
        # 3. forwarding cost, 64-byte frames, limit far above the offered load
        if wanted fwd; then
            start_arch "$a" 10000mbit
            measure "$a-fwd" "dport=6000,rate=60mbit,size=64"
            stop_arch "$a"
        fi
    fi
    if [ "$a" != bridge ] && wanted reload; then
        # 4. a change under load (half load, nothing should be lost)
        start_arch "$a" 100mbit
        (
            sleep "$(( secs / 2 ))"
            if [ "$a" = htb ]; then
                nsx "$dut" tc class change dev d1 parent 1:1 classid 1:20 htb rate 60mbit ceil 100mbit prio 1
            else
                sed -i 's/weight = 1$/weight = 2/' "$work/run.toml"
                "$bin" reload --socket "$work/ctl.sock" >/dev/null
            fi
        ) &
        local change_pid=$!
        measure "$a-reload" "dport=6000,count=4,rate=12mbit,size=1500"
        wait "$change_pid"
        stop_arch "$a"
    fi
    wanted sat || return 0
    # 5. saturation with the SAT_GEN generator, limit far above
    start_arch "$a" 10000mbit
    saturate "$a-sat"
    stop_arch "$a"
}

archs="${ARCHS:-rtc pspat htb bridge direct}"
for r in $(seq "$rounds"); do
    # Round r starts r - 1 architectures further on.
    read -r -a list <<<"$archs"
    k=$(( (r - 1) % ${#list[@]} ))
    for a in "${list[@]:k}" "${list[@]:0:k}"; do run_all "$a"; done
    mkdir -p "$work/round$r"
    for f in "$work"/*-victim*.json "$work"/*-sat.pps; do [ -e "$f" ] && cp "$f" "$work/round$r/"; done
done

# The run-to-completion forwarder's own account (its stats' `forwarder`):
# per measurement, passes, sleeps and kicks per 1000 frames, and how the
# ring wait of the frames that waited >= 200 µs divides by what the
# forwarder was doing meanwhile.
forwarder_trace() {
    for f in "$work"/*.stats.json; do
        [ -e "$f" ] || continue
        python3 - "$f" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1])).get("forwarder")
if d:
    n = max(d["frames_received"], 1)
    name = os.path.basename(sys.argv[1])[:-len(".stats.json")]
    print(f"{name}: per 1000 frames: {d['passes']*1000/n:.0f} passes, "
          f"{d['sleeps']*1000/n:.0f} sleeps ({d['sleeps_woken']*1000/n:.0f} woken by a frame), "
          f"{d['tx_kicks']*1000/n:.0f} kicks; sleep overshoot p99 {d['sleep_overshoot_p99_us']:.0f} "
          f"max {d['sleep_overshoot_max_us']:.0f} µs; kick p99 {d['tx_kick_p99_us']:.0f} "
          f"max {d['tx_kick_max_us']:.0f} µs; receive call p99 {d['rx_call_p99_us']:.0f} µs")
    for t in d["ring_wait_tail"]:
        w = max(t["wait_us"], 1e-9)
        parts = ", ".join(f"{k[:-3]} {100*t[k]/w:.0f} %" for k in
            ("sleep_timeout_us", "sleep_woken_us", "tx_us", "rx_us", "sched_us", "unlogged_us"))
        print(f"  {t['class']}: {t['frames']} frames waited >= 200 µs (mean {t['wait_us']/max(t['frames'],1):.0f} µs): "
              f"{parts}; stamped asleep {t['stamped_asleep']} (their sleep asked {t['asleep_asked_us']/max(t['stamped_asleep'],1):.0f} µs, "
              f"slept {t['asleep_slept_us']/max(t['stamped_asleep'],1):.0f} µs on average), missed by a receive call {t['missed_by_rx']}")
PY
    done
}

# The CPU floor: measurement 3 for every architecture that ran it, the
# plain bridge and the direct veth included (what gen + sink cost alone).
cpu_floor_table() {
    local a n c head="" sep="" got="" cpu="" dut="" sent="" lost=""
    for a in $archs; do
        [ -s "$work/$a-fwd.json" ] || continue
        head="$head $(name_of "$a") |"; sep="$sep ---: |"
        sent="$sent $(jq_py "$work/$a-fwd.gen.json" "print('%.0f' % (sum(f['sent'] for f in d['flows'])/d['seconds']))") |"
        lost="$lost $(( $(cat "$work/$a-fwd.g0_dropped") / secs )) |"
        n=$(jq_py "$work/$a-fwd.json" "print(sum(f['received'] for f in d['flows']))")
        n=$(( n > 0 ? n : 1 ))
        got="$got $(( n / secs )) |"
        c=$(cat "$work/$a-fwd.cpu_ns")
        cpu="$cpu $(( c / n )) |"
        dut="$dut $(cpu_ns_per_frame "$(cat "$work/$a-fwd.dut_jiffies")" "$n") |"
    done
    [ -n "$head" ] || return 0
    echo
    echo "| CPU floor: 64 B frames at a fixed offered rate, limit far above |$head"
    echo "| --- |$sep"
    echo "| frames/s sent by the generator (offered: 117 188) |$sent"
    echo "| frames/s dropped at g0's transmit (veth's ring to d0 full) |$lost"
    echo "| frames/s received by the sink |$got"
    echo "| whole-machine CPU ns per frame (gen + DUT + sink) |$cpu"
    [ -n "$dut_cpu" ] && echo "| DUT core (CPU $dut_cpu) busy CPU ns per frame |$dut"
    echo
}

# The victim's floor: each victim measurement for every architecture that
# ran it, the plain bridge and the direct veth (no scheduler) included.
victim_floor_table() {
    local a m head="" sep="" q line
    for a in $archs; do
        [ -s "$work/$a-victim.json" ] || [ -s "$work/$a-victim-slow.json" ] || continue
        head="$head $(name_of "$a") |"; sep="$sep ---: |"
    done
    [ -n "$head" ] || return 0
    echo
    echo "| victim latency, no scheduler vs shapers (µs) |$head"
    echo "| --- |$sep"
    for m in victim victim-slow; do
        wanted "$m" || continue
        for q in p50 p99 p999; do
            line="| $m $q |"
            for a in $archs; do
                [ -s "$work/$a-victim.json" ] || [ -s "$work/$a-victim-slow.json" ] || continue
                if [ -s "$work/$a-$m.json" ]; then
                    line="$line $(jq_py "$work/$a-$m.json" "v=[f for f in d['flows'] if f['port']==6008]; print('%.0f' % v[0]['latency_${q}_us'] if v else 'lost')") |"
                else
                    line="$line — |"
                fi
            done
            echo "$line"
        done
    done
    echo "(victim: 100 Mbit/s link; victim-slow: $victim_rate; bridge and direct do not shape, so their greedy flows pass whole)"
}

# ROUNDS > 1: each victim measurement's p99 per round, its median, and in
# how many rounds each architecture had the lowest p99 among the shapers
# (bridge and direct are the floors, not contenders).
rounds_table() {
    [ "$rounds" -gt 1 ] || return 0
    python3 - "$work" "$rounds" "$archs" <<'PY'
import json, os, statistics, sys
work, rounds, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
for m in ("victim", "victim-slow"):
    # p99[a][r]: round r + 1's figure, None when its file is missing (a
    # placeholder, so every column's rows stay the same rounds).
    p99 = {}
    for a in archs:
        vals = []
        for r in range(1, rounds + 1):
            f = os.path.join(work, f"round{r}", f"{a}-{m}.json")
            if not os.path.exists(f):
                vals.append(None)
                continue
            v = [x for x in json.load(open(f))["flows"] if x["port"] == 6008]
            vals.append(v[0]["latency_p99_us"] if v else float("inf"))
        if any(x is not None for x in vals):
            p99[a] = vals
    if not p99:
        continue
    shapers = [a for a in p99 if a not in ("bridge", "direct")]
    wins = {a: 0 for a in p99}
    # Only rounds every shaper has are compared.
    both = [r for r in range(rounds) if all(p99[a][r] is not None for a in shapers)]
    for r in both:
        if shapers:
            wins[min(shapers, key=lambda a: p99[a][r])] += 1
    print(f"\n| {m} p99 (µs) per round | " + " | ".join(p99) + " |")
    print("| --- |" + " ---: |" * len(p99))
    for r in range(rounds):
        print(f"| round {r + 1} | " + " | ".join(
            "—" if p99[a][r] is None else f"{p99[a][r]:.0f}" for a in p99) + " |")
    def med(vals):
        have = [x for x in vals if x is not None]
        cell = f"{statistics.median(have):.0f}"
        return cell if len(have) == rounds else f"{cell} (of {len(have)})"
    print("| median | " + " | ".join(med(p99[a]) for a in p99) + " |")
    print(f"| rounds with the lowest p99 among the shapers (of the {len(both)} all have) | " + " | ".join(
        str(wins[a]) if a in shapers else "—" for a in p99) + " |")
PY
}

# The saturation run's I/O counters (pktsched only, per second): frames
# taken from d0's AF_XDP ring, dropped by the kernel at it (ring full or
# no fill buffer), dropped for want of a pool buffer, transmit retries
# (tx_busy), kicks and frames per kick, the forwarder's own CPU share.
sat_io_rows() {
    local a line k
    line="| pktsched per s: rx / kernel drops at the ring / no pool buffer / tx busy / kicks (frames per kick) / forwarder CPU % |"
    for a in $sat_archs; do
        if [ ! -s "$work/$a-sat.stats.json" ]; then line="$line — |"; continue; fi
        read -r j _ _ <"$work/$a-sat.proc"
        k=$(jq_py "$work/$a-sat.stats.json" "
rx=[x for x in d['devices'] if x['role']=='rx']; tx=[x for x in d['devices'] if x['role']=='tx']
s=lambda xs,k: sum(x.get(k,0) for x in xs)
f=d.get('forwarder') or {}
kicks=f.get('tx_kicks',0); fr=f.get('frames_received',0)
print('%.0f / %.0f / %.0f / %.0f / %.0f (%.1f)' % (s(rx,'rx_packets')/$secs, s(rx,'rx_kernel_drops')/$secs, s(rx,'rx_no_buffer')/$secs, s(tx,'tx_busy')/$secs, kicks/$secs, fr/max(kicks,1)))")
        line="$line $k / $(( j * 100 / (secs * $(getconf CLK_TCK)) )) |"
    done
    echo "$line"
}

# ROUNDS > 1: the saturation frames/s per round and the median.
sat_rounds_table() {
    [ "$rounds" -gt 1 ] || return 0
    python3 - "$work" "$rounds" "$sat_archs" <<'PY2'
import os, statistics, sys
work, rounds, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
got = {a: [int(open(f).read()) for r in range(1, rounds + 1)
           for f in [os.path.join(work, f"round{r}", f"{a}-sat.pps")] if os.path.exists(f)] for a in archs}
got = {a: v for a, v in got.items() if v}
if got:
    print("\n| saturation frames/s per round | " + " | ".join(got) + " |")
    print("| --- |" + " ---: |" * len(got))
    for r in range(max(len(v) for v in got.values())):
        print(f"| round {r + 1} | " + " | ".join(str(got[a][r]) if r < len(got[a]) else "—" for a in got) + " |")
    print("| median | " + " | ".join(f"{statistics.median(got[a]):.0f}" for a in got) + " |")
PY2
}

shaped=""
sat_archs=""
for a in $archs; do
    case "$a" in bridge|direct) ;; *) shaped="$shaped $a" ;; esac
    [ "$a" = direct ] || sat_archs="$sat_archs $a"
done
name_of() { case "$1" in *-nt) echo "$(name_of "${1%-nt}"), d0 NAPI threaded" ;; rtc) echo "pktsched run-to-completion" ;; rtc-nc) echo "pktsched rtc, no priority credit" ;; rtc-pb*) echo "pktsched rtc, prio_burst ${1#rtc-pb}" ;; rtc-bp) echo "pktsched rtc, busy poll" ;; pspat) echo "pktsched pspat" ;; htb) echo "bridge + HTB" ;; bridge) echo "bridge, no qdisc" ;; direct) echo "gen → sink veth, no DUT" ;; esac; }

# The victim's time split by pktsched's stats (stamped frames), one table
# row per part: $1 measurement, $2 / $3 the row label's head and tail, then
# KEY:TEXT parts (ring_wait, sojourn, latency); each p50 / p99 µs, or "—"
# when the class has no sample (null in the stats JSON).
victim_parts() {
    local m="$1" head="$2" tail="$3" part key line a f
    shift 3
    for part in "$@"; do
        key="${part%%:*}"
        line="| $head${part#*:}$tail |"
        for a in $shaped; do
            f="$work/$a-$m.stats.json"
            if [ -s "$f" ]; then
                line="$line $(jq_py "$f" "v=[c for c in d['classes'] if c['class']=='victim'][0]; lo, hi = v['${key}_p50_us'], v['${key}_p99_us']; print('%.0f / %.0f' % (lo, hi) if lo is not None and hi is not None and ('${key}' == 'sojourn' or v['rx_stamped'] > 0) else '— (no stamped frame)')") |"
            else
                line="$line — |"
            fi
        done
        echo "$line"
    done
}
row() { # label, python expression over d (sink JSON), measurement name
    local label="$1" expr="$2" line
    wanted "$3" || return 0
    line="| $label |"
    for a in $shaped; do line="$line $(jq_py "$work/$a-$3.json" "$expr") |"; done
    echo "$line"
}
{
    header="| measurement ($secs s each) |"; sep="| --- |"
    for a in $shaped; do header="$header $(name_of "$a") |"; sep="$sep ---: |"; done
    echo "$header"; echo "$sep"
    row "rate, 1 greedy 1500 B flow into 100 Mbit/s (Mbit/s of frames)" \
        "print('%.2f' % (d['flows'][0]['throughput_bps']*1500/1458/1e6))" rate
    for q in p50 p99 p999; do
        row "victim $q latency, 1 Mbit/s next to 8 greedy flows (µs)" \
            "v=[f for f in d['flows'] if f['port']==6008]; print('%.0f' % v[0]['latency_${q}_us'] if v else 'lost')" victim
    done
    # The victim's time split by pktsched's stats (stamped frames): ring
    # wait (kernel receive → taken), inside (taken → released), kernel
    # receive → released; each p50 / p99 µs.
    if wanted victim; then
        victim_parts victim "victim " ", p50 / p99 (µs)" \
            "ring_wait:ring wait, kernel receive → taken from the ring" \
            "sojourn:inside pktsched, taken → released to the output" \
            "latency:kernel receive → released to the output"
    fi
    for q in p50 p99 p999; do
        row "victim $q latency at $victim_rate (8 greedy flows of $(( slow_kbit / 5 )) kbit/s) (µs)" \
            "v=[f for f in d['flows'] if f['port']==6008]; print('%.0f' % v[0]['latency_${q}_us'] if v else 'lost')" victim-slow
    done
    if wanted victim-slow; then
        victim_parts victim-slow "victim at $victim_rate, " ", p50 / p99 (µs)" \
            "ring_wait:ring wait" "sojourn:inside pktsched"
    fi
    row "victim datagrams lost" \
        "v=[f for f in d['flows'] if f['port']==6008]; print(v[0]['lost'] if v else 'all')" victim
    row "64 B frames received per second (not limiting)" \
        "print('%.0f' % (sum(f['received'] for f in d['flows'])/$secs))" fwd
    if wanted fwd; then
        # Where the frames not received went: never sent (the generator
        # short of its rate), dropped by veth at g0's transmit, dropped by
        # the kernel at pktsched's AF_XDP rings (its stats' rx_kernel_drops).
        line="| 64 B frames/s: sent by gen / dropped at g0 → d0 / dropped at pktsched's rings |"
        for a in $shaped; do
            k="—"
            [ -s "$work/$a-fwd.stats.json" ] && k=$(jq_py "$work/$a-fwd.stats.json" \
                "print('%.0f' % (sum(x['rx_kernel_drops'] + x.get('rx_no_buffer', 0) for x in d['devices'] if x['role'] == 'rx') / $secs))")
            line="$line $(jq_py "$work/$a-fwd.gen.json" "print('%.0f' % (sum(f['sent'] for f in d['flows'])/d['seconds']))") / $(( $(cat "$work/$a-fwd.g0_dropped") / secs )) / $k |"
        done
        echo "$line"
    fi
    if wanted fwd; then
    line="| whole-machine CPU ns per 64 B frame (gen + forwarder + sink) |"
    for a in $shaped; do
        n=$(jq_py "$work/$a-fwd.json" "print(sum(f['received'] for f in d['flows']))")
        c=$(cat "$work/$a-fwd.cpu_ns")
        line="$line $(( c / (n > 0 ? n : 1) )) |"
    done
    echo "$line"
    if [ -n "$dut_cpu" ]; then
        line="| DUT core (CPU $dut_cpu) busy CPU ns per 64 B frame |"
        for a in $shaped; do
            n=$(jq_py "$work/$a-fwd.json" "print(sum(f['received'] for f in d['flows']))")
            line="$line $(cpu_ns_per_frame "$(cat "$work/$a-fwd.dut_jiffies")" "$n") |"
        done
        echo "$line"
    fi
    fi
    # The forwarder alone (pktsched: its process; HTB works in softirq).
    for what in "CPU ns per 64 B frame, the forwarder process alone" \
        "forwarder sleeps (voluntary switches) per 1000 frames" \
        "forwarder preemptions (involuntary switches) per 1000 frames, 64 B frames" \
        "forwarder preemptions per 1000 frames, victim run"; do
        case "$what" in *victim*) m=victim ;; *) m=fwd ;; esac
        wanted "$m" || continue
        line="| $what |"
        for a in $shaped; do
            case "$a" in htb) line="$line — |"; continue ;; esac
            n=$(jq_py "$work/$a-$m.json" "print(sum(f['received'] for f in d['flows']))")
            read -r j v iv <"$work/$a-$m.proc"
            n=$(( n > 0 ? n : 1 ))
            case "$what" in
                CPU*) line="$line $(( j * $(ns_per_jiffy) / n )) |" ;;
                *sleeps*) line="$line $(( v * 1000 / n )) |" ;;
                *) line="$line $(( iv * 1000 / n )).$(( iv * 10000 / n % 10 )) |" ;;
            esac
        done
        echo "$line"
    done
    for sc in sendto ppoll poll; do
        wanted fwd || break
        line="| forwarder $sc calls per 1000 64 B frames (perf) |"
        for a in $shaped; do
            f="$work/$a-fwd.perf"
            if [ "$a" = htb ] || [ ! -s "$f" ]; then line="$line — |"; continue; fi
            n=$(jq_py "$work/$a-fwd.json" "print(sum(f['received'] for f in d['flows']))")
            c=$(awk -F, -v e="syscalls:sys_enter_$sc" '$3 == e {print $1}' "$f")
            line="$line $(( ${c:-0} * 1000 / (n > 0 ? n : 1) )) |"
        done
        echo "$line"
    done
    placed="no pinning"
    [ -n "$dut_cpu" ] && placed="DUT on CPU $dut_cpu, gen + sink on CPU 0"
    [ "$dut_napi" = thread ] && placed="$placed, pktsched's d0 NAPI threaded on CPU $dut_cpu"
    echo "| placement | $placed${rt_args[*]:+, pktsched ${rt_args[*]}} |"
    row "datagrams lost across a config change at half load" \
        "print(sum(f['lost'] for f in d['flows']))" reload
    if wanted fwd; then cpu_floor_table; fi
    victim_floor_table
    rounds_table
    wanted sat || exit 0
    echo
    echo "| saturation: $sat_gen generator, 64 B frames, limit far above (SAT_SINK=$sat_sink) |$(for a in $sat_archs; do printf ' %s |' "$(name_of "$a")"; done)"
    echo "| --- |$(for a in $sat_archs; do printf ' ---: |'; done)"
    echo "| frames/s arriving on s0 |$(for a in $sat_archs; do printf ' %s |' "$(cat "$work/$a-sat.pps")"; done)"
    echo "| whole-machine CPU ns per arriving frame |$(for a in $sat_archs; do printf ' %s |' "$(cat "$work/$a-sat.cpu_per_frame")"; done)"
    echo "| frames/s offered by the generator |$(for a in $sat_archs; do printf ' %s |' "$(jq_py "$work/$a-sat.gen.json" "print('%.0f' % (sum(f['sent'] for f in d['flows'])/d['seconds']))")"; done)"
    echo "| frames/s dropped at g0 → d0 (veth's ring to d0 full) |$(for a in $sat_archs; do printf ' %s |' "$(cat "$work/$a-sat.g0_dropped")"; done)"
    echo "| busy % of each CPU (cpu0 cpu1 ...) |$(for a in $sat_archs; do printf ' %s |' "$(cat "$work/$a-sat.cpu_busy_pct")"; done)"
    sat_io_rows
    sat_rounds_table
} | tee target/compare-htb.md
forwarder_trace
