#!/usr/bin/env bash
# Instructions per packet, the steady measure on noisy machines: each
# algorithm of the closed-loop harness (one enqueue + one dequeue per pair)
# under callgrind, counted as the difference between a long and a short run
# so that start-up and set-up cancel out. Not part of CI's pass/fail: run it
# before and after a change to a hot path and record the table.
#
# A second table counts the PSPAT arbiter's per-packet path
# (crates/runtime/benches/arbiter.rs: one thread, a client `send` per
# 64-byte packet, a round per 64 packets: mailbox pop, scheduler enqueue and
# dequeue, emulated link, null output; the client's send included) for QFQ
# and FIFO on 1 and 64 flows, and for QFQ with the packets spread over 8
# clients (a round's eight mailbox reads of ~8 packets each).
#
# With the peers folder (PKTSCHED_PEERS, default ../shared/peers) the first
# table has a second column: dummynet's own harness and schedulers
# (`run sched`, test_sched) counted the same way, as a reference.
#
#   ci/instructions.sh [FLOWSETS]     (default 1::512,8::64)
#
# ARBITER=0 skips the arbiter's table (and the build of its bench), for a
# change that touches the schedulers only.
#
# CACHE=1 counts under cachegrind's cache simulation instead and adds a
# column of L1 data misses per pair (reads + writes; dummynet's too). The
# runs then cover whole fill/drain cycles (52 loops per flow each), so a
# flowset of many flows (the mix) is counted in its steady state.
#
# A failing build, valgrind run or benchmark fails the script (errexit
# holds inside command substitutions, and each run starts without an
# output file, so no figure comes from an old one).
#
# dummynet's `rr` is a DRR (quantum = weight × length): its figure on the
# `rr` row is that DRR, not a plain round robin.
set -euxo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
cargo build --release -q -p pktsched
bin=target/release/pktsched
if [ "${ARBITER:-1}" != 0 ]; then
    arbiter=$(cargo bench -q -p pktsched-runtime --bench arbiter --no-run --message-format=json |
        grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
fi
flowsets="${1:-1::512,8::64}"
short=200000
long=1200000
if [ "${CACHE:-0}" = 1 ]; then
    # Flows in the flowset list (a flowset's third field, default 1).
    nflows=$(echo "$flowsets" | tr ',' '\n' | awk -F: '{ s += ($3 == "" ? 1 : $3) } END { print s }')
    cycle=$((52 * nflows))
    short=$((2 * cycle > short ? 2 * cycle : short))
    long=$((short + (4 * cycle > 1000000 ? 4 * cycle : 1000000)))
    tool=(--tool=cachegrind --cache-sim=yes)
    out_opt=--cachegrind-out-file
else
    tool=(--tool=callgrind)
    out_opt=--callgrind-out-file
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Runs valgrind with `tool` on the command, its output in "$work/out"
# (removed first), and fails with its log when the run fails.
counted() {
    rm -f "$work/out" "$work/log"
    valgrind "${tool[@]}" "$out_opt=$work/out" "$@" >/dev/null 2>"$work/log" || {
        cat "$work/log" >&2
        echo "instructions.sh: failed under valgrind: $*" >&2
        exit 1
    }
}
summary() { # -> total instructions [and L1 data misses] of the last run
    local s
    if [ "${CACHE:-0}" = 1 ]; then
        s=$(awk '/^summary:/{print $2, $6 + $9}' "$work/out")
    else
        s=$(awk '/^summary:/{print $2}' "$work/out")
    fi
    [[ "$s" =~ ^[0-9]+( [0-9]+)?$ ]] || { echo "instructions.sh: no summary in valgrind's output file" >&2; exit 1; }
    echo "$s"
}
instructions() { # alg ops -> total instructions [and L1 data misses] of the run
    counted "$bin" bench sched --alg "$1" -n "$2" --flowsets "$flowsets" --no-wfi --json
    summary
}

peers="${PKTSCHED_PEERS:-../shared/peers}"
dn=""
if [ -x "$peers/run" ]; then
    # `run` builds dummynet's harness on first use.
    "$peers/run" sched none 1::1 1000 >/dev/null 2>&1 ||
        echo "instructions.sh: '$peers/run sched' failed: no dummynet column" >&2
    dn="${PEERS_BUILD:-${TMPDIR:-/tmp}/pktsched-peers}/dummynet/test/test_sched"
    [ -x "$dn" ] || dn=""
fi
theirs() { # alg ops -> total instructions of dummynet's run
    local a="$1"
    case "$a" in drr) a=rr ;; wf2q) a=wf2q+ ;; esac
    counted "$dn" -n "$2" -qmin 4n -qmax 30n -alg "$a" -flowsets "$flowsets"
    summary
}
per_pair() { # short-run and long-run summaries -> per-pair figures
    # Each loop iteration is one enqueue or one dequeue: a pair is two.
    awk -v a="$1" -v b="$2" -v d="$((long - short))" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        printf "%d", (y[1] - x[1]) * 2 / d
        if (n > 1) printf " | %.2f", (y[2] - x[2]) * 2 / d }'
}

set +x
cols="instructions per pair ($flowsets)"
[ "${CACHE:-0}" = 1 ] && cols="$cols | L1 data misses per pair"
head="| algorithm | $cols |"
[ -n "$dn" ] && head="$head dummynet: ${cols/ ($flowsets)/} |"
echo "$head"
# One `| ---` for the name column and `| ---:` for each figure.
echo "$head" | awk -F'|' '{ s = "| --- |"; for (i = 3; i < NF; i++) s = s " ---: |"; print s }'
for alg in none fifo prio rr drr wf2q qfq; do
    a=$(instructions "$alg" "$short")
    b=$(instructions "$alg" "$long")
    name=$alg
    # dummynet's rr is a DRR (see the header).
    [ "$alg" = rr ] && [ -n "$dn" ] && name="rr (dummynet: its rr, a DRR)"
    row="| $name | $(per_pair "$a" "$b") |"
    if [ -n "$dn" ]; then
        c=$(theirs "$alg" "$short")
        d=$(theirs "$alg" "$long")
        row="$row $(per_pair "$c" "$d") |"
    fi
    echo "$row"
done

ir() { # command... -> total instructions of the run
    # callgrind even with CACHE=1 (bash's locals reach the callees).
    local tool=(--tool=callgrind) out_opt=--callgrind-out-file CACHE=0
    counted "$@"
    summary
}

[ "${ARBITER:-1}" = 0 ] && exit 0
echo
echo "| arbiter path (client send → mailbox → scheduler → link → output) | instructions per packet |"
echo "| --- | ---: |"
for alg in qfq fifo; do
    for flows in 1 64; do
        a=$(ir "$arbiter" --single "$short" --alg "$alg" --flows "$flows")
        b=$(ir "$arbiter" --single "$long" --alg "$alg" --flows "$flows")
        echo "| $alg, $flows flow(s) | $(( (b - a) / (long - short) )) |"
    done
done
# Eight clients in turn: a round reads eight mailboxes of ~8 packets.
for flows in 1 64; do
    a=$(ir "$arbiter" --single "$short" --alg qfq --flows "$flows" --clients 8)
    b=$(ir "$arbiter" --single "$long" --alg qfq --flows "$flows" --clients 8)
    echo "| qfq, $flows flow(s), 8 clients | $(( (b - a) / (long - short) )) |"
done
