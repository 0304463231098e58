#!/usr/bin/env bash
# Instructions per item of the two per-packet queues, under callgrind (the
# steady measure on a noisy machine), each counted as the difference between
# a long and a short run so that start-up and set-up cancel out:
#
#   * mailbox push + pop: `benches/mailbox.rs --single N` (one thread, 64
#     pushes then 64 pops, u64 items, capacity 1024): one item a call
#     (`try_push` / `pop`, the default 28-slot lines of four 7-slot
#     groups), batches of up to 32 (`try_push_many` / `pop_batch`), push
#     runs (`pushrun`: one `try_push_many` until full, then single pops,
#     the shape of spscq's iffq loop), the word mailbox (`words`,
#     `Mailbox::words`: one store per push) one item a call and in push
#     runs (`wordrun`), the default with the consumer's
#     prefetch on (`pf`; off by default, so a base revision before
#     2026-11-27 counted its default with the prefetch on), and the
#     other layouts (7-slot lines of one group, 14-slot lines of one
#     group, 14-slot lines of two groups); rtrb in the same harness for
#     reference; the harness loop is included (~10 instructions). A base
#     revision without a layout's `--only` name runs the default instead;
#     such a "before" figure is not that layout's;
#   * MLTW enqueue + release: `pktsched bench shape --structs mltw
#     --outstanding 2` (the closed loop: stamp, file, release, refill),
#     1 000 and 10 000 flows at 10 Gbit/s and 1 000 flows at 1 Mbit/s
#     staggered;
#   * FlowBundler's MLTW (sch_dfb in the peers' `shapebench`, the same
#     closed loop in C) on the same three cases, for reference, when the
#     C peers are found (PKTSCHED_PEERS, default ../shared/peers).
#
#   ci/instructions-queues.sh            # this tree
#   ci/instructions-queues.sh BASE_REV   # also BASE_REV, as "before"
#
# With BASE_REV the base is checked out in a temporary git worktree (its own
# target directory, so a full build) with this tree's mailbox bench copied
# in (same harness, the base's queue). Valgrind is installed if missing.
# Not part of CI's pass/fail: run it before and after a change to a hot path
# and record the table. A failing build or run fails the script (errexit
# holds inside command substitutions; no figure comes from an old file).
set -euxo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BASE=${1:-}
PEERS=${PKTSCHED_PEERS:-$ROOT/../shared/peers}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
work="$(mktemp -d)"
cleanup() {
    if [ -n "$BASE" ] && [ -d "$work/base" ]; then
        git -C "$ROOT" worktree remove --force "$work/base" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

executable() { grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4; }

build() { # dir -> "mailbox-bench pktsched" paths
    local mb ps
    mb=$(cd "$1" && cargo bench -q -p pktsched-runtime --bench mailbox --no-run --message-format=json | executable)
    ps=$(cd "$1" && cargo build -q --release -p pktsched --message-format=json | executable)
    echo "$mb $ps"
}

ir() { # command... -> total instructions
    rm -f "$work/out" "$work/log"
    valgrind --tool=callgrind --callgrind-out-file="$work/out" "$@" >/dev/null 2>"$work/log" || {
        cat "$work/log" >&2
        return 1
    }
    local n
    n=$(awk '/^summary:/ { print $2 }' "$work/out")
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "instructions-queues.sh: no summary in callgrind's output of: $*" >&2; return 1; }
    echo "$n"
}

per_item() { # short long cmd-with-N... (N replaced by the count)
    local short=$1 long=$2 a b
    shift 2
    a=$(ir "${@//@N@/$short}")
    b=$(ir "${@//@N@/$long}")
    awk -v a="$a" -v b="$b" -v s="$short" -v l="$long" 'BEGIN { printf "%.1f", (b - a) / (l - s) }'
}

CASES=(
    "mailbox push+pop|mailbox|mailbox"
    "mailbox push+pop, batches of 32|mailbox|batch"
    "mailbox push runs + single pops|mailbox|pushrun"
    "word mailbox push+pop|mailbox|words"
    "word mailbox push runs + single pops|mailbox|wordrun"
    "mailbox push+pop, prefetch on|mailbox|pf"
    "mailbox push+pop, 7-slot lines (one group)|mailbox|mailbox7"
    "mailbox push+pop, 14-slot lines of one group|mailbox|onegroup"
    "mailbox push+pop, 14-slot lines (two groups)|mailbox|mailbox14"
    "rtrb push+pop (reference)|mailbox|rtrb"
    "MLTW 1000 flows 10 Gbit/s|shape|--flows 1000 --rate 10gbit"
    "MLTW 10000 flows 10 Gbit/s|shape|--flows 10000 --rate 10gbit"
    "MLTW 1000 flows 1 Mbit/s staggered|shape|--flows 1000 --rate 1mbit --stagger"
)

measure() { # mailbox-bench pktsched -> one figure per case, one per line
    local mb=$1 ps=$2 label kind args
    for c in "${CASES[@]}"; do
        IFS='|' read -r label kind args <<<"$c"
        if [ "$kind" = mailbox ]; then
            per_item 100000 1100000 "$mb" --single @N@ --only "$args"
        else
            # shellcheck disable=SC2086 # the argument list is meant to split
            per_item 200000 1200000 "$ps" bench shape --structs mltw --outstanding 2 -n @N@ $args
        fi
        echo
    done
}

# FlowBundler's MLTW under the same count, if the peers are there: one
# figure per shape case, one per line (nothing without the peers).
measure_peer() {
    local label kind args bin n
    [ -x "$PEERS/run" ] || return 0
    "$PEERS/run" shape mltw 1 -n 10 >/dev/null
    bin=${PEERS_BUILD:-${TMPDIR:-/tmp}/pktsched-peers}/shape/shapebench
    for c in "${CASES[@]}"; do
        IFS='|' read -r label kind args <<<"$c"
        [ "$kind" = shape ] || continue
        # shellcheck disable=SC2086 # the argument list is meant to split
        n=$(per_item 200000 1200000 "$bin" --struct mltw --outstanding 2 -n @N@ $args)
        echo "FlowBundler $label (reference)|$n"
    done
}

# Each step's output is taken whole first, so that its failure stops the
# script (a `<(…)` or `<<<"$(…)"` would hide it).
paths=$(build "$ROOT")
read -r mb ps <<<"$paths"
figures=$(measure "$mb" "$ps")
mapfile -t AFTER <<<"$figures"
BEFORE=()
if [ -n "$BASE" ]; then
    git worktree add --detach "$work/base" "$BASE" >/dev/null
    # This tree's bench uses the word mailbox (`Mailbox::words`): a base
    # without it keeps its own bench (its unknown `--only` names run its
    # default, as said above).
    if grep -q 'WordProducer' "$work/base/crates/runtime/src/mailbox.rs"; then
        cp crates/runtime/benches/mailbox.rs "$work/base/crates/runtime/benches/mailbox.rs"
    fi
    paths=$(CARGO_TARGET_DIR="$work/target" build "$work/base")
    read -r mb ps <<<"$paths"
    figures=$(measure "$mb" "$ps")
    mapfile -t BEFORE <<<"$figures"
fi

peer=$(measure_peer)
PEER=()
[ -z "$peer" ] || mapfile -t PEER <<<"$peer"

set +x
if [ -n "$BASE" ]; then
    echo "| instructions per item | before ($BASE) | after |"
    echo "| --- | ---: | ---: |"
else
    echo "| instructions per item | count |"
    echo "| --- | ---: |"
fi
for i in "${!CASES[@]}"; do
    IFS='|' read -r label _ _ <<<"${CASES[$i]}"
    if [ -n "$BASE" ]; then
        echo "| $label | ${BEFORE[$i]} | ${AFTER[$i]} |"
    else
        echo "| $label | ${AFTER[$i]} |"
    fi
done
for row in "${PEER[@]}"; do
    IFS='|' read -r label n <<<"$row"
    if [ -n "$BASE" ]; then
        echo "| $label | — | $n |"
    else
        echo "| $label | $n |"
    fi
done
