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
# and FIFO on 1 and 64 flows.
#
#   ci/instructions.sh [FLOWSETS]     (default 1::512,8::64)
set -euxo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
cargo build --release -q -p pktsched
bin=target/release/pktsched
arbiter=$(cargo bench -q -p pktsched-runtime --bench arbiter --no-run --message-format=json |
    grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
flowsets="${1:-1::512,8::64}"
short=200000
long=1200000
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

instructions() { # alg ops -> total instructions of the run
    valgrind --tool=callgrind --callgrind-out-file="$work/out" \
        "$bin" bench sched --alg "$1" -n "$2" --flowsets "$flowsets" --no-wfi --json \
        >/dev/null 2>"$work/log"
    awk '/^summary:/{print $2}' "$work/out"
}

set +x
echo "| algorithm | instructions per pair ($flowsets) |"
echo "| --- | ---: |"
for alg in none fifo prio rr drr wf2q qfq; do
    a=$(instructions "$alg" "$short")
    b=$(instructions "$alg" "$long")
    # Each loop iteration is one enqueue or one dequeue: a pair is two.
    echo "| $alg | $(( (b - a) * 2 / (long - short) )) |"
done

ir() { # command... -> total instructions of the run
    valgrind --tool=callgrind --callgrind-out-file="$work/out" "$@" >/dev/null 2>"$work/log"
    awk '/^summary:/{print $2}' "$work/out"
}

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
