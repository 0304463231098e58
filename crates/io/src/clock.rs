//! The one clock every network namespace of a machine shares.

/// CLOCK_MONOTONIC in nanoseconds. A generator's [`crate::frame::Stamp`]
/// and a sink's receive time taken in different namespaces (or processes)
/// compare directly: one-way latency is `now − tx_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the call's duration;
    // clock_gettime writes only into it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::monotonic_ns;

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(a > 0 && b >= a + 1_000_000, "{a} {b}");
    }
}
