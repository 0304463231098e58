#!/usr/bin/env bash
# pktsched's queues side by side with the original C peers, interleaved:
#
#   * the PSPAT mailbox (`cargo bench -p pktsched-runtime --bench mailbox`,
#     u64 items, capacity 1024, cores 0 and 1) against the PSPAT authors'
#     spscq `iffq` and `ffq` (`run spscq iffq ffq`: pointers only, QLEN 1024,
#     cores 0 and 1) and against rtrb (measured in the mailbox bench itself);
#   * the MLTW shaper (`pktsched bench shape --structs mltw --outstanding 2`)
#     against FlowBundler's MLTW qdisc (`run shape mltw ... --outstanding 2`):
#     1 000 and 10 000 flows at 10 Gbit/s in phase, 1 000 flows at 1 Mbit/s
#     staggered. CPU ns per packet (enqueue + release, the loop's own
#     thread time). FlowBundler releases packets early by up to 1-2 slots of
#     the flow's level; pktsched never releases early (see the peers' README).
#
# Each round runs every case once, pktsched first, then the peer; the tables
# print the medians over the rounds and the ratios.
#
#   scripts/compare-peers-queues.sh            # 3 rounds
#   ROUNDS=5 scripts/compare-peers-queues.sh
#   PKTSCHED_PEERS=/path/to/peers scripts/compare-peers-queues.sh
#
# The peers live outside the repository (third-party code, some GPL): by
# default in ../shared/peers relative to the repository root, or wherever
# PKTSCHED_PEERS points. Nothing else in the build depends on them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PKTSCHED_PEERS:-$ROOT/../shared/peers}
ROUNDS=${ROUNDS:-3}

if [ ! -x "$PEERS/run" ]; then
    echo "compare-peers-queues: no peers folder with a 'run' script at '$PEERS'." >&2
    echo "Set PKTSCHED_PEERS to the folder that holds the C peers (spscq, FlowBundler) and their 'run' script." >&2
    exit 2
fi
case "$ROUNDS" in
'' | *[!0-9]*)
    echo "compare-peers-queues: ROUNDS='$ROUNDS' is not a number; allowed: 3..100" >&2
    exit 2
    ;;
esac
if [ "$ROUNDS" -lt 3 ] || [ "$ROUNDS" -gt 100 ]; then
    echo "compare-peers-queues: ROUNDS=$ROUNDS; allowed: 3..100 (medians need at least 3)" >&2
    exit 2
fi

cd "$ROOT"
# Paths of the built executables, from cargo's own messages.
executable() { grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4; }
MAILBOX=$(cargo bench -q -p pktsched-runtime --bench mailbox --no-run --message-format=json | executable)
PKTSCHED=$(cargo build -q --release -p pktsched --message-format=json | executable)
[ -x "$MAILBOX" ] || { echo "compare-peers-queues: mailbox bench not built" >&2; exit 1; }
[ -x "$PKTSCHED" ] || { echo "compare-peers-queues: pktsched not built" >&2; exit 1; }

median() {
    printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
        END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2];
              else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

# Shape cases: label | pktsched arguments | peer arguments.
SHAPE_CASES=(
    "1000 flows 10 Gbit/s|--flows 1000 --rate 10gbit|1000 --rate 10gbit"
    "10000 flows 10 Gbit/s|--flows 10000 --rate 10gbit|10000 --rate 10gbit"
    "1000 flows 1 Mbit/s staggered|--flows 1000 --rate 1mbit --stagger|1000 --rate 1mbit --stagger"
)

declare -a MB RT IFFQ FFQ
declare -A OURS PEER
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS" >&2
    out=$("$MAILBOX" --runs 3 --only mailbox --capacity 1024)
    MB+=("$(awk '/^pspat mailbox +[0-9]/ { print $3 }' <<<"$out")")
    RT+=("$(awk '/^rtrb / { print $3 }' <<<"$out")")
    peer=$("$PEERS/run" spscq iffq ffq)
    IFFQ+=("$(awk '$1 == "iffq" { print $2 }' <<<"$peer")")
    FFQ+=("$(awk '$1 == "ffq" { print $2 }' <<<"$peer")")
    for i in "${!SHAPE_CASES[@]}"; do
        IFS='|' read -r _ ours theirs <<<"${SHAPE_CASES[$i]}"
        # shellcheck disable=SC2086 # the argument lists are meant to split
        o=$("$PKTSCHED" bench shape --structs mltw --outstanding 2 $ours |
            awk '$1 == "mltw" { print $5 }')
        # shellcheck disable=SC2086
        p=$("$PEERS/run" shape mltw $theirs --outstanding 2 |
            grep -o 'cpu_ns_per_pkt=[0-9.]*' | cut -d= -f2)
        OURS[$i]="${OURS[$i]:-} $o"
        PEER[$i]="${PEER[$i]:-} $p"
    done
done

mb=$(median "${MB[@]}")
rt=$(median "${RT[@]}")
iffq=$(median "${IFFQ[@]}")
ffq=$(median "${FFQ[@]}")
echo
echo "SPSC queue, u64 / pointer items, capacity 1024, cores 0 and 1: median M items/s over $ROUNDS rounds"
printf '%-24s %10s %10s %10s\n' "queue" "M items/s" "mailbox/x" "target"
printf '%-24s %10s %10s %10s\n' "pktsched mailbox" "$mb" "1.00" ""
printf '%-24s %10s %10s %10s\n' "rtrb (same bench)" "$rt" "$(ratio "$mb" "$rt")" ">= 1.2"
printf '%-24s %10s %10s %10s\n' "spscq iffq" "$iffq" "$(ratio "$mb" "$iffq")" ">= 1.0"
printf '%-24s %10s %10s %10s\n' "spscq ffq" "$ffq" "$(ratio "$mb" "$ffq")" ""
echo
echo "MLTW shaping, 1500 B packets, 2 outstanding per flow: median CPU ns/packet over $ROUNDS rounds"
printf '%-32s %10s %12s %12s %8s\n' "case" "pktsched" "FlowBundler" "pktsched/FB" "target"
for i in "${!SHAPE_CASES[@]}"; do
    IFS='|' read -r label _ _ <<<"${SHAPE_CASES[$i]}"
    # shellcheck disable=SC2086
    o=$(median ${OURS[$i]})
    # shellcheck disable=SC2086
    p=$(median ${PEER[$i]})
    printf '%-32s %10s %12s %12s %8s\n' "$label" "$o" "$p" "$(ratio "$o" "$p")" "<= 1.0"
done
