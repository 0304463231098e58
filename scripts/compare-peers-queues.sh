#!/usr/bin/env bash
# pktsched's queues side by side with the original C peers, interleaved:
#
#   * the PSPAT mailbox (`cargo bench -p pktsched-runtime --bench mailbox`,
#     u64 items, capacity 1024, producer on core 0, consumer on core 1)
#     against the PSPAT authors' spscq `iffq` and `ffq` (the same command
#     line as `run spscq`: pointers only, QLEN 1024, 32-entry lines, producer
#     on core 0, consumer on core 1, 2 s) and against rtrb (measured in the
#     mailbox bench itself). A run is *clean* when each of its two threads
#     was on a CPU for >= 90 % of it, the same rule on both sides: the
#     mailbox bench reads each thread's CPU time over its loop; for spscq
#     this script reads each thread's on-CPU time from
#     /proc/PID/task/TID/schedstat every 0.25 s while it runs (its producer
#     and consumer are the two threads that ran most; each one's interval
#     is from its first sample, at 0.5 s, to its last, ~1.5 of its 2 s). A
#     round is clean when every queue's run in it was; every row's median
#     is over the same rounds: the clean ones when there are >= 3, else all
#     (the table says which), so both sides are filtered alike. spscq's
#     runs have a time limit (its producer can spin forever on a full queue
#     after its consumer has stopped) and a run that hits it counts as
#     missing (and its round as not clean). Runs differ in length: a
#     mailbox run moves 10 M items (~0.1 s idle, more under load), an spscq
#     run lasts 2 s (its own time unit). The "P run" / "C run" columns are
#     items per stretch between two stalls on a full / empty queue (spscq's
#     "avg batch"): the regime the queue ran in. The mailbox rows are its layouts,
#     measured in the same interleaved runs: the default (28-slot lines of
#     four 64-byte groups, each slot's stamp and value in one hardware
#     line; spscq's iffq checks 32-entry lines), 7-slot lines (one group),
#     14-slot lines of one group (14 stamps then 14 values: two hardware
#     lines for slots 6-13) and 14-slot lines of two groups, and
#     the default with the consumer's software prefetch on (off by
#     default since 2026-11-27), and "push runs" (one `try_push_many`
#     until full, single pops: spscq's iffq loop keeps its write index in
#     a register the same way, so this is the like-for-like row), and the
#     word mailbox (`Mailbox::words`: each u64 item one non-zero word, one
#     store per push, one load per pop; items travel as value + 1) one
#     item a call and in push runs, with its ratios to iffq and rtrb on a
#     line under the table;
#   * the MLTW shaper (`pktsched bench shape --structs mltw --outstanding 2`)
#     against FlowBundler's MLTW qdisc (`run shape mltw ... --outstanding 2`):
#     1 000 and 10 000 flows at 10 Gbit/s in phase, 1 000 flows at 1 Mbit/s
#     staggered. CPU ns per packet (enqueue + release, the loop's own
#     thread time). FlowBundler releases packets early by up to 1-2 slots of
#     the flow's level; pktsched never releases early (see the peers' README).
#
# A round is one run of every queue and every shaping case: the mailbox
# bench with `--runs 1` (one untimed warm-up run of each queue, then one
# measured run of each, interleaved), then one spscq run of each test,
# then each shaping case once, pktsched first, then the peer. The tables
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
# Decimal points whatever the caller's locale ($EPOCHREALTIME, bash `time`).
export LC_ALL=C

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
    echo "compare-peers-queues: ROUNDS='$ROUNDS' is not a number; allowed: 1..100" >&2
    exit 2
    ;;
esac
if [ "$ROUNDS" -lt 1 ] || [ "$ROUNDS" -gt 100 ]; then
    echo "compare-peers-queues: ROUNDS=$ROUNDS; allowed: 1..100 (3 or more for medians; 1 is a smoke test)" >&2
    exit 2
fi

cd "$ROOT"
# Paths of the built executables, from cargo's own messages.
executable() { grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4; }
MAILBOX=$(cargo bench -q -p pktsched-runtime --bench mailbox --no-run --message-format=json | executable)
PKTSCHED=$(cargo build -q --release -p pktsched --message-format=json | executable)
[ -x "$MAILBOX" ] || { echo "compare-peers-queues: mailbox bench not built" >&2; exit 1; }
# `run spscq` builds spscq on first use; then it is run directly (same
# arguments as `run spscq`), with a time limit and its CPU time measured.
SPSCQ=${PEERS_BUILD:-${TMPDIR:-/tmp}/pktsched-peers}/spscq/spscq
[ -x "$SPSCQ" ] || DURATION=1 timeout 120 "$PEERS/run" spscq iffq >/dev/null 2>&1 || true
[ -x "$SPSCQ" ] || { echo "compare-peers-queues: spscq not built at '$SPSCQ' (by '$PEERS/run spscq')" >&2; exit 1; }
[ -x "$PKTSCHED" ] || { echo "compare-peers-queues: pktsched not built" >&2; exit 1; }

median() {
    printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
        END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2];
              else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

# Appends "s TID NS T" to the array named by $2 for each thread of
# process $1: its on-CPU time NS (ns, from its schedstat file) at T (s).
# Bash builtins only (the caller's `sleep 0.25` between samples is the
# one process this script starts while the queues run).
thread_cpu() {
    local -n into=$2
    local f tid ns t=$EPOCHREALTIME
    for f in /proc/"$1"/task/*/schedstat; do
        tid=${f%/schedstat}
        tid=${tid##*/}
        [ -e "$f" ] || continue
        read -r ns _ 2>/dev/null <"$f" || continue
        into+=("s $tid $ns $t")
    done
}

# One spscq run of TEST: "rate clean p_run c_run", or "nan 0 nan nan" if it
# failed or hit the time limit. Clean: each of the two threads that ran
# most was on a CPU >= 90 % of the time between its first and its last
# schedstat sample (from 0.5 s on, every 0.25 s; at least 0.5 s apart).
spscq_run() {
    local out pid samples=() waited=0 rc=0
    out=$(mktemp)
    "$SPSCQ" -t "$1" -D 2 -l 1024 -L 32 -b 32 -b 32 -c 0 -c 1 >"$out" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.25
        waited=$((waited + 1))
        if [ "$waited" -ge 80 ]; then # 20 s
            kill "$pid" 2>/dev/null || true
            break
        fi
        if [ "$waited" -ge 2 ]; then thread_cpu "$pid" samples; fi
    done
    wait "$pid" || rc=$?
    if [ "$rc" -ne 0 ] || [ "$waited" -ge 80 ]; then
        echo "nan 0 nan nan"
        rm -f "$out"
        return
    fi
    { printf '%s\n' "${samples[@]}"; cat "$out"; } | awk '
        $1 == "s" && NF == 4 {
            if (!($2 in t0)) { t0[$2] = $4; n0[$2] = $3 }
            t1[$2] = $4; n1[$2] = $3
            next
        }
        / Mpps/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mpps") rate = $i }
        /^\[P\] avg batch/ { p = $NF }
        /^\[C\] avg batch/ { c = $NF }
        END {
            # The two largest on-CPU shares.
            s1 = s2 = 0
            for (tid in t0) {
                wall = (t1[tid] - t0[tid]) * 1e9
                if (wall < 0.5e9) continue
                s = (n1[tid] - n0[tid]) / wall
                if (s > s1) { s2 = s1; s1 = s } else if (s > s2) s2 = s
            }
            clean = (s2 >= 0.9) ? 1 : 0
            if (rate == "") print "nan 0 nan nan"
            else printf "%s %d %s %s\n", rate, clean, (p == "" ? "nan" : p), (c == "" ? "nan" : c)
        }'
    rm -f "$out"
}

# One line of the mailbox bench's table for NAME: "rate clean p_run c_run"
# (with `--runs 1`: clean = 1 when that run was clean, "1/1").
bench_row() {
    awk -v name="$1" '
        index($0, name) == 1 {
            rest = substr($0, length(name) + 1)
            if (rest !~ /^ +[0-9]/) next
            n = split(rest, f, " ")
            split(f[2], c, "/")
            print f[1], (c[2] > 0 && c[1] == c[2] ? 1 : 0), f[n - 1], f[n]
        }' <<<"$2"
}

# Median of the values of the clean rounds if there are >= 3, else of all;
# arguments: the values of one row, one per round (nan = missing). The
# clean rounds are the same for every row (CLEAN_ROUNDS, 1 = clean).
clean_median() {
    local i=0 vals=() all=()
    for v in "$@"; do
        i=$((i + 1))
        [ "$v" = nan ] && continue
        all+=("$v")
        [ "${CLEAN_ROUNDS[$i]}" = 1 ] && vals+=("$v")
    done
    if [ "$N_CLEAN" -ge 3 ]; then median "${vals[@]}"; else median "${all[@]}"; fi
}
clean_count() { printf '%s\n' "$@" | grep -c '^1$' || true; }

# Shape cases: label | pktsched arguments | peer arguments.
SHAPE_CASES=(
    "1000 flows 10 Gbit/s|--flows 1000 --rate 10gbit|1000 --rate 10gbit"
    "10000 flows 10 Gbit/s|--flows 10000 --rate 10gbit|10000 --rate 10gbit"
    "1000 flows 1 Mbit/s staggered|--flows 1000 --rate 1mbit --stagger|1000 --rate 1mbit --stagger"
)

# Queue rows: label | source (bench row name, or spscq:TEST).
QUEUES=(
    "pktsched mailbox|pspat mailbox"
    "mailbox, prefetch on|pspat mailbox, prefetch"
    "mailbox, batch 32|pspat mailbox, batch 32"
    "mailbox, push runs|pspat mailbox, push runs"
    "word mailbox|pspat word mailbox"
    "word mailbox, push runs|pspat word mailbox, push runs"
    "mailbox, 7-slot lines|pspat mailbox, 7-slot lines"
    "mailbox, 1-group lines|pspat mailbox, 1-group lines"
    "mailbox, 14-slot lines|pspat mailbox, 14-slot lines"
    "rtrb (same bench)|rtrb 0.3"
    "spscq iffq|spscq:iffq"
    "spscq ffq|spscq:ffq"
)
declare -A RATE PRUN CRUN CLEAN
declare -A OURS PEER
CLEAN_ROUNDS=()
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS" >&2
    out=$("$MAILBOX" --runs 1 --only mailbox --capacity 1024)
    CLEAN_ROUNDS[r]=1
    for i in "${!QUEUES[@]}"; do
        IFS='|' read -r label src <<<"${QUEUES[$i]}"
        case "$src" in
        spscq:*) row=$(spscq_run "${src#spscq:}") ;;
        *) row=$(bench_row "$src" "$out") ;;
        esac
        read -r rate clean prun crun <<<"${row:-nan 0 nan nan}"
        echo "  $label: $rate M/s, clean $clean, P run $prun, C run $crun" >&2
        [ "$clean" = 1 ] || CLEAN_ROUNDS[r]=0
        RATE[$i]="${RATE[$i]:-} $rate"
        PRUN[$i]="${PRUN[$i]:-} $prun"
        CRUN[$i]="${CRUN[$i]:-} $crun"
        CLEAN[$i]="${CLEAN[$i]:-} $clean"
    done
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

N_CLEAN=$(clean_count "${CLEAN_ROUNDS[@]}")
echo
echo "SPSC queue, u64 / pointer items, capacity 1024, producer core 0, consumer core 1:"
if [ "$N_CLEAN" -ge 3 ]; then
    echo "median M items/s over the $N_CLEAN of $ROUNDS rounds in which every queue's run was clean"
else
    echo "median M items/s over all $ROUNDS rounds (only $N_CLEAN had every queue's run clean; 3 needed)"
fi
echo "clean = runs of this queue with both threads on a CPU >= 90 % of the run"
printf '%-24s %10s %6s %10s %8s %8s %10s\n' "queue" "M items/s" "clean" "mailbox/x" "P run" "C run" "target"
# shellcheck disable=SC2086 # the lists are meant to split
mb=$(clean_median ${RATE[0]})
for i in "${!QUEUES[@]}"; do
    IFS='|' read -r label src <<<"${QUEUES[$i]}"
    # shellcheck disable=SC2086
    m=$(clean_median ${RATE[$i]})
    case "$src" in
    "rtrb 0.3") target=">= 1.2" ;;
    spscq:iffq) target=">= 1.0" ;;
    *) target="" ;;
    esac
    # shellcheck disable=SC2086
    printf '%-24s %10s %3s/%-2s %10s %8s %8s %10s\n' "$label" "$m" "$(clean_count ${CLEAN[$i]})" "$ROUNDS" \
        "$(ratio "$mb" "$m")" "$(clean_median ${PRUN[$i]})" "$(clean_median ${CRUN[$i]})" "$target"
done
# The like-for-like pair (see the header): the mailbox's push runs against
# iffq, whose compiled producer loop keeps its write index in a register.
for i in "${!QUEUES[@]}"; do
    IFS='|' read -r _ src <<<"${QUEUES[$i]}"
    # shellcheck disable=SC2086
    case "$src" in
    "pspat mailbox, push runs") runs=$(clean_median ${RATE[$i]}) ;;
    spscq:iffq) iffq=$(clean_median ${RATE[$i]}) ;;
    esac
done
echo "push runs / spscq iffq (producer loops of the same shape): $(ratio "${runs:-nan}" "${iffq:-nan}")"
# The word mailbox (`Mailbox::words`: u64 items are words, one store per
# push) against the targets: >= 1.0x iffq and >= 1.2x rtrb.
for i in "${!QUEUES[@]}"; do
    IFS='|' read -r _ src <<<"${QUEUES[$i]}"
    # shellcheck disable=SC2086
    case "$src" in
    "pspat word mailbox") words=$(clean_median ${RATE[$i]}) ;;
    "pspat word mailbox, push runs") wordruns=$(clean_median ${RATE[$i]}) ;;
    "rtrb 0.3") rtrb=$(clean_median ${RATE[$i]}) ;;
    esac
done
echo "word mailbox / spscq iffq: $(ratio "${words:-nan}" "${iffq:-nan}") (target >= 1.0), / rtrb: $(ratio "${words:-nan}" "${rtrb:-nan}") (target >= 1.2); push runs / iffq: $(ratio "${wordruns:-nan}" "${iffq:-nan}")"
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
