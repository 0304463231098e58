//! Where the forwarder's threads run (`link.cpu`), with which
//! scheduling policy (`link.sched`), and whether the forwarder busy-polls
//! its ingress (`link.busy_poll`): the pinning, real-time priority and
//! polling a software router offers so the forwarder is not queued behind
//! other work on its core.

use std::fmt;

use toml::Spanned;

use super::parse::Ctx;
use super::raw::BoolOrNum;
use super::{ConfigError, Engine};

/// Frames one busy poll of the ingress's NAPI context takes
/// (`SO_BUSY_POLL_BUDGET`) with `link.busy_poll = true`.
pub const DEFAULT_BUSY_POLL_BUDGET: u32 = 64;
/// Largest busy-poll budget accepted.
pub const MAX_BUSY_POLL_BUDGET: u32 = 1024;

/// Busy polling (`link.busy_poll`, `run --busy-poll`): the forwarder never
/// sleeps; each receive call drives the ingress's NAPI context itself
/// (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`), so the kernel's receive
/// work for it runs on the forwarder's core, not in a softirq elsewhere.
/// It burns that core whole: it needs `link.cpu` and the
/// run-to-completion engine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BusyPolling {
    /// Frames per busy poll (1..=[`MAX_BUSY_POLL_BUDGET`]).
    pub budget: u32,
}

impl BusyPolling {
    /// Busy polling with `budget` frames per poll, if in range; the error
    /// names the value and what is allowed.
    pub fn with_budget(budget: u32) -> Result<BusyPolling, String> {
        if (1..=MAX_BUSY_POLL_BUDGET).contains(&budget) {
            Ok(BusyPolling { budget })
        } else {
            Err(format!(
                "busy-poll budget {budget} is out of range: allowed 1..={MAX_BUSY_POLL_BUDGET} \
                 frames (or true for {DEFAULT_BUSY_POLL_BUDGET}, false for off)"
            ))
        }
    }
}

/// `link.busy_poll`: absent or `false` is off, `true` the default budget,
/// a number that budget.
pub(crate) fn parse_busy_poll(
    cx: &Ctx<'_>,
    raw: Option<&Spanned<BoolOrNum>>,
    engine: Engine,
) -> Result<Option<BusyPolling>, ConfigError> {
    let Some(v) = raw else {
        return Ok(None);
    };
    if engine != Engine::RunToCompletion && !matches!(v.get_ref(), BoolOrNum::Bool(false)) {
        return Err(cx.err(
            v.span(),
            format!(
                "link.busy_poll needs link.engine = \"run-to-completion\", and link.engine is \
                 {:?} (its receive and arbiter threads would share the pinned core, one spinning)",
                engine.name()
            ),
        ));
    }
    match v.get_ref() {
        BoolOrNum::Bool(false) => Ok(None),
        BoolOrNum::Bool(true) => Ok(Some(BusyPolling {
            budget: DEFAULT_BUSY_POLL_BUDGET,
        })),
        BoolOrNum::Num(n) => u32::try_from(*n)
            .map_err(|_| format!("busy-poll budget {n} is out of range: allowed 1..={MAX_BUSY_POLL_BUDGET} frames (or true for {DEFAULT_BUSY_POLL_BUDGET}, false for off)"))
            .and_then(BusyPolling::with_budget)
            .map(Some)
            .map_err(|e| cx.err(v.span(), format!("link.busy_poll = {n}: {e}"))),
    }
}

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
    use super::{BusyPolling, DEFAULT_BUSY_POLL_BUDGET, ThreadSched};

    fn link_with(extra: &str) -> Result<Option<BusyPolling>, String> {
        let src = format!(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n{extra}\n\n\
             [[class]]\nname = \"a\"\ndefault = true\n"
        );
        crate::config::parse(&src, "t.toml", None)
            .map(|c| c.link.busy_poll)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn busy_poll_is_off_true_or_a_budget_and_bad_ones_name_the_value() {
        assert_eq!(link_with(""), Ok(None));
        assert_eq!(link_with("busy_poll = false"), Ok(None));
        let default = Some(BusyPolling {
            budget: DEFAULT_BUSY_POLL_BUDGET,
        });
        assert_eq!(link_with("busy_poll = true"), Ok(default));
        assert_eq!(
            link_with("busy_poll = 16"),
            Ok(Some(BusyPolling { budget: 16 }))
        );
        for (bad, says) in [
            (
                "busy_poll = 0",
                "link.busy_poll = 0: busy-poll budget 0 is out of range: allowed 1..=1024",
            ),
            ("busy_poll = 1025", "budget 1025 is out of range"),
            ("busy_poll = -3", "link.busy_poll = -3"),
            ("busy_poll = 99999999999", "99999999999"),
            (
                "engine = \"pspat\"\nbusy_poll = true",
                "link.busy_poll needs link.engine = \"run-to-completion\", and link.engine is \"pspat\"",
            ),
        ] {
            let e = link_with(bad).expect_err(bad);
            assert!(e.contains(says) && e.contains("t.toml:"), "{bad}: {e}");
        }
        let e = link_with("busy_poll = \"yes\"").expect_err("a string");
        assert!(
            e.contains("`link.busy_poll = \"yes\"`: the value is a string")
                && e.contains("allowed true, false or a whole number"),
            "{e}"
        );
    }

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
