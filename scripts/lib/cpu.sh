# Whole-machine CPU time for the measurement scripts (sourced, not run).
#
# busy_jiffies: user + nice + system + irq + softirq of every CPU, from
# /proc/stat's `cpu` line, in clock ticks (USER_HZ).
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }

# cpu_busy_jiffies N: the same for CPU N alone (its `cpuN` line; 0 when
# there is no such CPU).
cpu_busy_jiffies() { awk -v c="cpu$1" '$1 == c {b=$2+$3+$4+$7+$8} END {print b+0}' /proc/stat; }

# ns_per_jiffy: nanoseconds per /proc/stat tick (1e9 / USER_HZ).
ns_per_jiffy() { echo $(( 1000000000 / $(getconf CLK_TCK) )); }

# cpu_ns_per_frame JIFFIES FRAMES: busy CPU ns per frame (0 frames: the
# whole time, as if 1).
cpu_ns_per_frame() {
    local j="$1" n="$2"
    echo $(( j * $(ns_per_jiffy) / (n > 0 ? n : 1) ))
}
