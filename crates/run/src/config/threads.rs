//! Where the forwarder's threads run (`link.cpu`) and with which
//! scheduling policy (`link.sched`): the pinning and real-time priority a
//! software router offers so the forwarder is not queued behind other work
//! on its core.

use std::fmt;

/// Highest CPU number accepted (`CPU_SETSIZE` − 1).
pub const MAX_CPU: u32 = 1023;
/// Real-time priorities `SCHED_FIFO` takes.
pub const RT_PRIORITIES: std::ops::RangeInclusive<u32> = 1..=99;

/// The scheduling policy of the forwarder's threads.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum ThreadSched {
    /// The normal time-sharing policy (`SCHED_OTHER`).
    #[default]
    Other,
    /// `SCHED_FIFO` at this priority (1..=99): the thread runs whenever it
    /// is runnable, ahead of every normal thread on its CPU.
    Fifo(u32),
}

impl ThreadSched {
    /// Reads `other` or `fifo:N`; the error names the value and what is
    /// allowed.
    pub fn parse(s: &str) -> Result<ThreadSched, String> {
        if s == "other" {
            return Ok(ThreadSched::Other);
        }
        let Some(prio) = s.strip_prefix("fifo:") else {
            return Err(format!(
                "{s:?} is unknown: allowed \"other\" or \"fifo:N\" with N in 1..=99"
            ));
        };
        let n: u32 = prio.parse().map_err(|_| {
            format!(
                "{s:?}: the priority {prio:?} is not a number: allowed \"fifo:N\" with N in 1..=99"
            )
        })?;
        ThreadSched::fifo(n).map_err(|e| format!("{s:?}: {e}"))
    }

    /// `SCHED_FIFO` at `priority`, if in 1..=99.
    pub fn fifo(priority: u32) -> Result<ThreadSched, String> {
        if RT_PRIORITIES.contains(&priority) {
            Ok(ThreadSched::Fifo(priority))
        } else {
            Err(format!(
                "real-time priority {priority} is out of range: allowed 1..=99"
            ))
        }
    }
}

impl fmt::Display for ThreadSched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadSched::Other => f.write_str("other"),
            ThreadSched::Fifo(p) => write!(f, "fifo:{p}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadSched;

    #[test]
    fn policies_read_back_as_written_and_bad_ones_name_the_value() {
        for s in ["other", "fifo:1", "fifo:50", "fifo:99"] {
            let p = ThreadSched::parse(s).expect(s);
            assert_eq!(p.to_string(), s);
        }
        assert_eq!(ThreadSched::parse("fifo:7"), Ok(ThreadSched::Fifo(7)));
        for (bad, says) in [
            ("fifo:0", "out of range: allowed 1..=99"),
            ("fifo:100", "out of range: allowed 1..=99"),
            ("fifo:x", "\"x\" is not a number"),
            ("fifo:", "is not a number"),
            ("rr:5", "\"rr:5\" is unknown"),
            ("FIFO:5", "is unknown"),
        ] {
            let e = ThreadSched::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
