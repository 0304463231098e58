//! Range-checked parsing of the sizes a user controls: every value a bench
//! accepts is in a stated range, so every accepted command line finishes
//! in bounded time and memory; a refusal names the option, the value and
//! the allowed range (`--flows 0: must be 1..=1000000`).

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use pktsched_core::Rate;
use pktsched_core::units::parse_duration;

/// An inclusive range of a numeric option (rates: bits/s; durations: ns).
#[derive(Copy, Clone, Debug)]
pub struct Range<T> {
    /// The option, as written on the command line (`--flows`, `-n`).
    pub name: &'static str,
    /// Smallest allowed value.
    pub lo: T,
    /// Largest allowed value.
    pub hi: T,
}

impl<T> Range<T> {
    /// `name` takes values in `lo..=hi`.
    pub const fn new(name: &'static str, lo: T, hi: T) -> Range<T> {
        Range { name, lo, hi }
    }
}

impl Range<u64> {
    /// What is allowed, for messages (`allowed: 1..=1000000`).
    pub fn allowed(&self) -> String {
        format!("allowed: {}..={}", self.lo, self.hi)
    }

    /// Parses a whole number in range; the error names the option, the
    /// value and the range (`--flows 0; allowed: 1..=1000000`).
    pub fn parse(&self, s: &str) -> Result<u64> {
        let s = s.trim();
        let v: u64 = s.parse().map_err(|_| {
            anyhow!(
                "{} `{s}` is not a whole number; {}",
                self.name,
                self.allowed()
            )
        })?;
        self.check(v)
    }

    /// [`Range::parse`] into a narrower integer type that holds the range.
    pub fn parse_as<T: TryFrom<u64>>(&self, s: &str) -> Result<T> {
        let v = self.parse(s)?;
        T::try_from(v).map_err(|_| anyhow!("{} {v}; {}", self.name, self.allowed()))
    }

    /// Checks a value already parsed.
    pub fn check(&self, v: u64) -> Result<u64> {
        if !(self.lo..=self.hi).contains(&v) {
            bail!("{} {v}; {}", self.name, self.allowed());
        }
        Ok(v)
    }

    /// Parses a rate in range (the bounds are bits/s).
    pub fn rate(&self, s: &str) -> Result<Rate> {
        let r = Rate::parse(s).map_err(|e| anyhow!("{} {s}: {e}", self.name))?;
        if !(self.lo..=self.hi).contains(&r.as_bps()) {
            bail!(
                "{} {s}; allowed: {}..={}",
                self.name,
                Rate::bps(self.lo),
                Rate::bps(self.hi)
            );
        }
        Ok(r)
    }

    /// What is allowed, for messages about a duration (bounds in ns).
    pub fn allowed_duration(&self) -> String {
        format!(
            "allowed: {:?}..={:?}",
            Duration::from_nanos(self.lo),
            Duration::from_nanos(self.hi)
        )
    }

    /// Parses a duration in range (the bounds are ns) with core's
    /// [`parse_duration`] (whole nanoseconds).
    pub fn duration(&self, s: &str) -> Result<Duration> {
        let allowed = || self.allowed_duration();
        let d = parse_duration(s).map_err(|e| anyhow!("{} {s}: {e}; {}", self.name, allowed()))?;
        if !(self.lo..=self.hi).contains(&d.0) {
            bail!("{} {s}; {}", self.name, allowed());
        }
        Ok(Duration::from_nanos(d.0))
    }
}

/// A comma-separated list of at most `max` values, each parsed by `f`.
pub fn list<T>(name: &str, s: &str, max: usize, f: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let v: Vec<T> = s.split(',').map(|x| f(x.trim())).collect::<Result<_>>()?;
    if v.len() > max {
        bail!("{name}: {} values; allowed at most {max}", v.len());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_option_value_and_range() {
        let r = Range::new("--flows", 1, 1_000_000);
        let e = r.parse("0").err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("--flows 0; allowed: 1..=1000000"));
        let e = r
            .parse("x")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("not a whole number") && e.contains("1..=1000000"),
            "{e}"
        );
        assert_eq!(r.parse("7").ok(), Some(7));
        let d = Range::new("--duration", 1_000_000, 3_600_000_000_000);
        let e = d
            .duration("1ps")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("1ns") || e.contains("1 ns"), "{e}");
        assert!(e.contains("1ms..=3600s"), "{e}");
        let l = list("--flows", "1,2,3", 2, |x| r.parse(x));
        assert!(l.is_err());
    }
}
