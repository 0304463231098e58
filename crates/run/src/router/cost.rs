//! The per-packet processing cost a router can be given on purpose, so
//! its CPU is the bottleneck (the experiment of Beifuß et al.): nothing,
//! a busy loop of a fixed time, or an access list of `N` prefix rules that
//! every packet is checked against (none matches, so all `N` are checked).

use std::fmt;

use pktsched_core::route::acl::{Acl, Action, Prefix, Rule};

/// Longest busy loop accepted per packet.
pub const MAX_BUSY_NS: u64 = 10_000_000;

/// What every packet costs besides forwarding.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cost {
    /// Nothing extra.
    None,
    /// A busy loop of this many nanoseconds (on CLOCK_MONOTONIC).
    Busy(u64),
    /// An access list of this many prefix rules, all checked.
    Acl(u32),
}

/// The words `cost` takes, for error messages.
pub const COST_FORMS: &str = "\"none\", a busy loop such as \"2us\" or \"500ns\" \
     (1ns..=10ms), or \"acl:N\" with N prefix rules (1..=1048576)";

impl Cost {
    /// Parses `none`, a duration or `acl:N`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Cost, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("none") {
            return Ok(Cost::None);
        }
        if let Some(n) = t.strip_prefix("acl:") {
            let max = pktsched_core::route::acl::MAX_RULES as u64;
            return match n.trim().parse::<u64>() {
                Ok(k) if (1..=max).contains(&k) => Ok(Cost::Acl(k as u32)),
                _ => Err(format!("acl rule count {n:?} is not in 1..={max}")),
            };
        }
        let ns = pktsched_core::units::parse_duration(t)
            .map_err(|e| format!("not none, acl:N or a duration ({e})"))?
            .0;
        if ns == 0 || ns > MAX_BUSY_NS {
            return Err(format!("a busy loop of {ns}ns is outside 1ns..=10ms"));
        }
        Ok(Cost::Busy(ns))
    }

    /// The access list that makes this cost (empty unless [`Cost::Acl`]):
    /// `/32` rules in 240.0.0.0/4, which no forwarded packet comes from.
    pub fn acl(self) -> Acl {
        let mut acl = Acl::new();
        if let Cost::Acl(n) = self {
            for i in 0..n {
                let rule = Rule {
                    src: Some(Prefix::V4(0xF000_0000 | i, 32)),
                    dst: None,
                    action: Action::Deny,
                };
                // Canonical /32s, fewer than MAX_RULES: cannot be refused.
                let _ = acl.push(rule);
            }
        }
        acl
    }

    /// Spins for a busy-loop cost; nothing otherwise.
    #[inline]
    pub fn spin(self) {
        if let Cost::Busy(ns) = self {
            let until = crate::sys::monotonic_ns() + ns;
            while crate::sys::monotonic_ns() < until {
                std::hint::spin_loop();
            }
        }
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cost::None => f.write_str("none"),
            Cost::Busy(ns) if ns % 1000 == 0 => write!(f, "{}us", ns / 1000),
            Cost::Busy(ns) => write!(f, "{ns}ns"),
            Cost::Acl(n) => write!(f, "acl:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktsched_core::route::acl::Addr;

    #[test]
    fn parses_each_form_and_refuses_typos() {
        assert_eq!(Cost::parse("none"), Ok(Cost::None));
        assert_eq!(Cost::parse("2us"), Ok(Cost::Busy(2000)));
        assert_eq!(Cost::parse("500ns"), Ok(Cost::Busy(500)));
        assert_eq!(Cost::parse("acl:1000"), Ok(Cost::Acl(1000)));
        for bad in ["acl:0", "acl:x", "2uss", "0us", "1s", "nnone", ""] {
            assert!(Cost::parse(bad).is_err(), "{bad}");
        }
        for c in [Cost::None, Cost::Busy(2000), Cost::Busy(1500), Cost::Acl(7)] {
            assert_eq!(Cost::parse(&c.to_string()), Ok(c));
        }
    }

    #[test]
    fn the_acl_checks_every_rule_and_permits() {
        let acl = Cost::Acl(50).acl();
        assert_eq!(acl.len(), 50);
        let (action, checked) = acl.check(Addr::V4(0x0A00_0001), Addr::V4(0x0A00_0002));
        assert_eq!((action, checked), (Action::Permit, 50));
        assert!(Cost::Busy(5).acl().is_empty());
    }
}
