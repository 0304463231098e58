#!/usr/bin/env bash
# pktsched's schedulers vs dummynet's C on the same closed-loop harness
# (one enqueue or one dequeue per loop, backlog between qmin = 4n and
# qmax = 30n, each packet to the shortest flow), side by side:
# `pktsched bench sched --cpu` and the peers' `run sched` run interleaved,
# ROUNDS rounds, medians.
#
# Both sides are timed the same way: the whole process's user + sys CPU
# time (bash `time`, 1 ms resolution; exec, set-up and exit included) ÷
# its enqueues. That is all dummynet's harness allows: the peers' `run
# sched` times it so (it reports only wall time around its loop itself),
# and this script times pktsched's process alike. For reference the table
# also shows pktsched's own figure, the timed loop's thread CPU time ÷
# enqueues, which leaves out exec and set-up: the difference of the two
# columns is that overhead spread over the run. Measured 2026-11-27 at
# -n 4M (2 M enqueues, loaded machine): 1.1–2.5 ns per pair on
# 1::512,8::64 and 4.2–6.8 on `mix` (its 40 k flows are built before the
# loop), so about a fifth of that at the default -n 20M. Before, the
# pktsched column was the loop's thread time against dummynet's whole
# process, which favoured pktsched by that much.
# Prints a Markdown table: CPU ns per enqueue+dequeue pair of each, the
# ratio pktsched / dummynet (whole processes), and per flowset each side's
# scheduler cost above its own harness (ALG − none).
#
#   scripts/compare-peers.sh [ROUNDS]      (default 3)
#
# Environment:
#   PKTSCHED_PEERS  the peers folder with its `run` script
#                   (default ../shared/peers relative to the repository)
#   ALGS            algorithms (default "none fifo prio drr qfq wf2q")
#   FLOWSETS        flowsets separated by spaces; `mix` stands for
#                   1::32768,2::4096,4::2048,8::1024,128::16,1024::1
#                   (default "1::1 1::512,8::64 1::4096 mix")
#   N               loop iterations per run (default 20M; suffixes K M G k m)
#   PKTSCHED_BIN    the pktsched binary to measure (default: build
#                   target/release/pktsched)
#
# Without the peers folder it says so and prints pktsched's figures alone.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
case "$rounds" in '' | *[!0-9]* | 0)
    echo "compare-peers.sh: ROUNDS must be a positive whole number, got '$rounds'" >&2
    exit 2
    ;;
esac
peers="${PKTSCHED_PEERS:-../shared/peers}"
algs="${ALGS:-none fifo prio drr qfq wf2q}"
flowsets="${FLOWSETS:-1::1 1::512,8::64 1::4096 mix}"
n="${N:-20M}"
mix="1::32768,2::4096,4::2048,8::1024,128::16,1024::1"

have_peers=1
if [ ! -x "$peers/run" ]; then
    have_peers=0
    echo "compare-peers.sh: no peers at '$peers' (no executable '$peers/run'); set PKTSCHED_PEERS to the folder holding dummynet's harness. Printing pktsched's figures only." >&2
fi

if [ -n "${PKTSCHED_BIN:-}" ]; then
    bin="$(realpath -e -- "$PKTSCHED_BIN" 2>/dev/null)" ||
        { echo "compare-peers.sh: PKTSCHED_BIN=$PKTSCHED_BIN: no such file" >&2; exit 2; }
    [ -f "$bin" ] && [ -x "$bin" ] ||
        { echo "compare-peers.sh: PKTSCHED_BIN=$PKTSCHED_BIN ($bin) is not an executable file" >&2; exit 2; }
else
    cargo build --release -q -p pktsched
    bin="$PWD/target/release/pktsched"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# dummynet's harness takes plain counts.
n_plain="$(awk -v s="$n" 'BEGIN{
    m = 1; c = substr(s, length(s))
    if (c == "K") m = 1e3; else if (c == "M") m = 1e6; else if (c == "G") m = 1e9
    else if (c == "k") m = 1024; else if (c == "m") m = 1048576
    if (m != 1) s = substr(s, 1, length(s) - 1)
    if (s !~ /^[0-9]+$/) exit 1
    printf "%d", s * m }')" || { echo "compare-peers.sh: N must be a count (digits, optional K M G k m), got '$n'" >&2; exit 2; }

ours() { # alg flowsets -> "process loop": CPU ns/pair of the whole process and of the loop
    local json="$work/ours.json" t="$work/ours.time" enq loop
    rm -f "$json" "$t"
    TIMEFORMAT='%U %S'
    { time "$bin" bench sched --alg "$1" --cpu --no-wfi --json -n "$n" --flowsets "$2" >"$json"; } 2>"$t" ||
        { cat "$t" >&2; echo "compare-peers.sh: pktsched bench sched --alg $1 --flowsets $2 failed" >&2; exit 1; }
    enq="$(sed -n 's/^ *"enqueues": *\([0-9]*\),*$/\1/p' "$json" | head -1)"
    loop="$(sed -n 's/^ *"ns_per_pair": *\([0-9.e+-]*\),*$/\1/p' "$json" | head -1)"
    [ -n "$enq" ] && [ "$enq" -gt 0 ] && [ -n "$loop" ] ||
        { echo "compare-peers.sh: pktsched bench sched --alg $1 --flowsets $2: no enqueues or ns_per_pair in its JSON" >&2; exit 1; }
    awk -v c="$(tail -1 "$t")" -v e="$enq" -v l="$loop" \
        'BEGIN { split(c, a, " "); printf "%.2f %s\n", (a[1] + a[2]) * 1e9 / e, l }'
}
theirs() { # alg flowsets -> CPU ns/pair (from the run script's stderr)
    local v
    v="$("$peers/run" sched "$1" "$2" "$n_plain" 2>&1 >/dev/null |
        sed -n 's/.*cpu_ns_per_pair=\([0-9.]*\).*/\1/p' | tail -1)"
    [ -n "$v" ] || { echo "compare-peers.sh: run sched $1 $2: no cpu_ns_per_pair" >&2; exit 1; }
    echo "$v"
}
median() { sort -g | awk '{v[NR]=$1} END{if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
key() { echo "$1" | tr ':,' '._'; }

for r in $(seq 1 "$rounds"); do
    for fs in $flowsets; do
        spec="$fs"
        [ "$fs" = mix ] && spec="$mix"
        for a in $algs; do
            k="$(key "$fs")-$a"
            ours "$a" "$spec" >>"$work/ours-$k"
            if [ "$have_peers" = 1 ]; then
                theirs "$a" "$spec" >>"$work/theirs-$k"
            fi
            echo "round $r/$rounds $fs $a done" >&2
        done
    done
done

echo "CPU ns per enqueue+dequeue pair, medians of $rounds interleaved rounds, -n $n:"
echo "whole process (user + sys) for both; pktsched's loop thread alone in the last column"
echo
echo "| flowset | algorithm | pktsched | dummynet | pktsched / dummynet | pktsched loop |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for fs in $flowsets; do
    for a in $algs; do
        k="$(key "$fs")-$a"
        o="$(awk '{ print $1 }' "$work/ours-$k" | median)"
        l="$(awk '{ print $2 }' "$work/ours-$k" | median)"
        t=nan
        [ "$have_peers" = 1 ] && t="$(median <"$work/theirs-$k")"
        ratio="$(awk -v o="$o" -v t="$t" 'BEGIN{ if (t == "nan" || t + 0 == 0) print "n/a"; else printf "%.2f", o / t }')"
        printf '| `%s` | %s | %.1f | %s | %s | %.1f |\n' "$fs" "$a" "$o" "$t" "$ratio" "$l"
    done
done
case " $algs " in *" none "*)
    echo
    echo "Scheduler cost above the harness (ALG − none), ns per pair:"
    echo
    echo "| flowset | algorithm | pktsched | dummynet |"
    echo "| --- | --- | ---: | ---: |"
    for fs in $flowsets; do
        k0="$(key "$fs")-none"
        o0="$(awk '{ print $1 }' "$work/ours-$k0" | median)"
        t0=nan
        [ "$have_peers" = 1 ] && t0="$(median <"$work/theirs-$k0")"
        for a in $algs; do
            [ "$a" = none ] && continue
            k="$(key "$fs")-$a"
            o="$(awk '{ print $1 }' "$work/ours-$k" | median)"
            t=nan
            [ "$have_peers" = 1 ] && t="$(median <"$work/theirs-$k")"
            awk -v fs="$fs" -v a="$a" -v o="$o" -v o0="$o0" -v t="$t" -v t0="$t0" 'BEGIN{
                d = (t == "nan" || t0 == "nan") ? "n/a" : sprintf("%.1f", t - t0)
                printf "| `%s` | %s | %.1f | %s |\n", fs, a, o - o0, d }'
        done
    done
    ;;
esac
