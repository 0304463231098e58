//! Units: time in nanoseconds, rates in bits per second, lengths in bytes.
//!
//! All arithmetic is integer. Transmission times are computed with 128-bit
//! intermediates so a 40 Gbit/s link never runs fast or slow because of a
//! truncated per-byte constant (the PSPAT kernel code truncates picoseconds per
//! byte and runs such a link ~0.4 % fast).
//!
//! # Rate syntax
//!
//! [`Rate::parse`] accepts a decimal number (optionally with a fraction and an
//! exponent, e.g. `1.5`, `1e9`, `2.5e3`) followed by a unit, optionally
//! followed by `/s`:
//!
//! | unit | meaning |
//! | --- | --- |
//! | `bit`, `kbit`, `mbit`, `gbit`, `tbit` (any case) | bits/s, SI (×1000) |
//! | `kibit`, `mibit`, `gibit`, `tibit` (any case) | bits/s, binary (×1024) |
//! | `b/s`, `kb/s`, `Mb/s`, `Gb/s`, `Tb/s` (lower-case `b`) | bits/s, SI |
//! | `B/s`, `kB/s`, `KB/s`, `MB/s`, `GB/s`, `TB/s` (upper-case `B`) | bytes/s, SI |
//! | `KiB/s`, `MiB/s`, `GiB/s`, `TiB/s` | bytes/s, binary |
//!
//! `bps`, `kbps`, `mbps`, ... are rejected: `tc` reads `bps` as *bytes* per
//! second while most people read it as bits per second. A bare number is
//! rejected too: say which unit you mean.
//!
//! Durations (`20ms`, `1.5us`) are parsed by [`parse_duration`] (whole
//! nanoseconds) and [`parse_duration_ps`] (picoseconds, for the simulator).

mod duration;

pub use duration::{DURATION_UNITS, DurationError, parse_duration, parse_duration_ps};

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use serde::{Deserialize, Serialize};

/// Monotonic time in nanoseconds. The core never reads a clock: time is
/// always passed in as a `now: Nanos` argument.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Time zero.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable time (about 584 years).
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Builds a time from microseconds (saturating).
    pub const fn from_micros(us: u64) -> Nanos {
        Nanos(us.saturating_mul(1_000))
    }
    /// Builds a time from milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }
    /// Builds a time from seconds (saturating).
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s.saturating_mul(1_000_000_000))
    }
    /// The raw value.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_sub(self, earlier: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1_000_000_000 {
            write!(f, "{:.3}s", n as f64 / 1e9)
        } else if n >= 1_000_000 {
            write!(f, "{:.3}ms", n as f64 / 1e6)
        } else if n >= 1_000 {
            write!(f, "{:.3}us", n as f64 / 1e3)
        } else {
            write!(f, "{n}ns")
        }
    }
}

/// A packet or queue length in bytes.
pub type Bytes = u32;

/// A rate in bits per second. Never zero.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct Rate(u64);

/// Why a rate could not be built or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// The input was empty.
    #[error("empty rate: write a number and a unit, e.g. `10gbit` or `125MB/s`")]
    Empty,
    /// The rate was zero.
    #[error("rate `{0}` is zero; a rate must be at least 1bit")]
    Zero(String),
    /// The rate was negative.
    #[error("rate `{0}` is negative; a rate must be at least 1bit")]
    Negative(String),
    /// The rate does not fit in 64 bits of bits/s.
    #[error("rate `{0}` is too large; the maximum is {max}bit (about 18.4 Ebit/s)", max = u64::MAX)]
    Overflow(String),
    /// The number part could not be read.
    #[error(
        "rate `{0}` is not a number followed by a unit; examples: `100kbit`, `1.5mbit`, `10Gbit/s`, `125MB/s`, `1e9bit`"
    )]
    BadNumber(String),
    /// No unit was given.
    #[error(
        "rate `{0}` has no unit; add one: `bit`, `kbit`, `mbit`, `gbit`, `tbit` (bits/s) or `B/s`, `KB/s`, `MB/s`, `GB/s` (bytes/s)"
    )]
    NoUnit(String),
    /// `bps`-style units are ambiguous.
    #[error(
        "unit `{unit}` in `{input}` is ambiguous: tc reads `bps` as bytes/s, most people as bits/s; write `{num}{bits}` for bits/s or `{num}{bytes}` for bytes/s"
    )]
    AmbiguousBps {
        /// The whole input.
        input: String,
        /// The offending unit.
        unit: String,
        /// The number part, echoed in the suggestion.
        num: String,
        /// Suggested bits/s unit.
        bits: &'static str,
        /// Suggested bytes/s unit.
        bytes: &'static str,
    },
    /// The unit is unknown.
    #[error(
        "unknown unit `{unit}` in `{input}`; allowed: bit, kbit, mbit, gbit, tbit, kibit, mibit, gibit, tibit, b/s, kb/s, Mb/s, Gb/s, Tb/s (bits/s); B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s (bytes/s)"
    )]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The offending unit.
        unit: String,
    },
    /// More than 38 significant digits.
    #[error("rate `{0}` has more than 38 significant digits")]
    TooPrecise(String),
    /// The value is not a whole number of bits per second.
    #[error("rate `{0}` is not a whole number of bits per second")]
    Fractional(String),
}

impl Rate {
    /// The largest rate.
    pub const MAX: Rate = Rate(u64::MAX);

    /// A rate of `bps` bits per second; `None` if zero.
    pub const fn from_bps(bps: u64) -> Option<Rate> {
        if bps == 0 { None } else { Some(Rate(bps)) }
    }
    /// A rate in bits/s; panics on zero (for constants in tests and docs).
    ///
    /// # Panics
    /// If `bps` is zero.
    pub const fn bps(bps: u64) -> Rate {
        assert!(bps != 0, "rate must not be zero");
        Rate(bps)
    }
    /// `n` kbit/s (SI).
    ///
    /// # Panics
    /// If zero or above `u64::MAX` bits/s.
    pub const fn kbit(n: u64) -> Rate {
        match n.checked_mul(1_000) {
            Some(v) => Rate::bps(v),
            None => panic!("rate overflows u64 bits/s"),
        }
    }
    /// `n` Mbit/s (SI).
    ///
    /// # Panics
    /// If zero or above `u64::MAX` bits/s.
    pub const fn mbit(n: u64) -> Rate {
        match n.checked_mul(1_000_000) {
            Some(v) => Rate::bps(v),
            None => panic!("rate overflows u64 bits/s"),
        }
    }
    /// `n` Gbit/s (SI).
    ///
    /// # Panics
    /// If zero or above `u64::MAX` bits/s.
    pub const fn gbit(n: u64) -> Rate {
        match n.checked_mul(1_000_000_000) {
            Some(v) => Rate::bps(v),
            None => panic!("rate overflows u64 bits/s"),
        }
    }
    /// Bits per second.
    pub const fn as_bps(self) -> u64 {
        self.0
    }
    /// Bytes per second, rounded down.
    pub const fn as_bytes_per_sec(self) -> u64 {
        self.0 / 8
    }

    /// Time to transmit `bytes` at this rate, rounded up to a whole
    /// nanosecond (so a sender paced with it is never early). Saturates.
    pub const fn tx_time(self, bytes: u64) -> Nanos {
        let num = bytes as u128 * 8 * 1_000_000_000;
        let d = self.0 as u128;
        let t = num.div_ceil(d);
        if t > u64::MAX as u128 {
            Nanos::MAX
        } else {
            Nanos(t as u64)
        }
    }

    /// The slowest rate at which `bytes` take at most `within` to
    /// transmit ([`Rate::tx_time`] rounds up, so this rounds up too);
    /// `None` if `within` is zero or the rate would exceed `u64::MAX`
    /// bits/s.
    pub const fn slowest_for(bytes: u64, within: Nanos) -> Option<Rate> {
        if within.0 == 0 || bytes == 0 {
            return None;
        }
        let bps = (bytes as u128 * 8 * 1_000_000_000).div_ceil(within.0 as u128);
        if bps > u64::MAX as u128 {
            None
        } else {
            Some(Rate(bps as u64))
        }
    }

    /// Time to transmit `bytes` at this rate in picoseconds, exact when it
    /// fits, rounded up otherwise. Useful to accumulate without drift.
    pub const fn tx_time_ps(self, bytes: u64) -> u128 {
        (bytes as u128 * 8 * 1_000_000_000_000).div_ceil(self.0 as u128)
    }

    /// Bytes that can be sent in `t` at this rate, rounded down.
    pub const fn bytes_in(self, t: Nanos) -> u64 {
        let b = self.0 as u128 * t.0 as u128 / 8_000_000_000;
        if b > u64::MAX as u128 {
            u64::MAX
        } else {
            b as u64
        }
    }

    /// Parses a rate such as `10gbit`, `1.5mbit`, `10Gbit/s`, `125MB/s`,
    /// `1e9bit`. See the module documentation for the accepted units.
    pub fn parse(s: &str) -> Result<Rate, RateError> {
        let input = s.trim();
        if input.is_empty() {
            return Err(RateError::Empty);
        }
        let own = || input.to_string();
        if input.starts_with('-') {
            return Err(RateError::Negative(own()));
        }
        let split = split_number(input);
        let (num, unit) = input.split_at(split);
        if num.is_empty() {
            return Err(RateError::BadNumber(own()));
        }
        let unit = unit.trim();
        let dec = Decimal::parse(num).ok_or_else(|| RateError::BadNumber(own()))?;
        if unit.is_empty() {
            return Err(RateError::NoUnit(own()));
        }
        let mult = unit_multiplier(input, num, unit)?;
        let bps = dec.times(mult).map_err(|e| match e {
            DecErr::Overflow => RateError::Overflow(own()),
            DecErr::Fraction => RateError::Fractional(own()),
            DecErr::TooPrecise => RateError::TooPrecise(own()),
        })?;
        if bps == 0 {
            return Err(RateError::Zero(own()));
        }
        Ok(Rate(bps))
    }
}

impl TryFrom<u64> for Rate {
    type Error = RateError;
    fn try_from(v: u64) -> Result<Rate, RateError> {
        Rate::from_bps(v).ok_or_else(|| RateError::Zero(v.to_string()))
    }
}
impl From<Rate> for u64 {
    fn from(r: Rate) -> u64 {
        r.0
    }
}

impl core::str::FromStr for Rate {
    type Err = RateError;
    fn from_str(s: &str) -> Result<Rate, RateError> {
        Rate::parse(s)
    }
}

/// Prints the rate exactly in the largest SI bit unit that keeps it readable,
/// e.g. `10gbit`, `1.5mbit`, `123bit`. The output parses back to the same
/// rate.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 5] = [
            (1_000_000_000_000, "tbit"),
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
            (1, "bit"),
        ];
        let v = self.0;
        for (m, name) in UNITS {
            if v >= m {
                let whole = v / m;
                let frac = v % m;
                if frac == 0 {
                    return write!(f, "{whole}{name}");
                }
                let width = m.ilog10() as usize;
                let digits = format!("{frac:0width$}");
                let digits = digits.trim_end_matches('0');
                return write!(f, "{whole}.{digits}{name}");
            }
        }
        write!(f, "{v}bit")
    }
}

/// Index where the numeric part of `s` ends: digits, one dot, and an
/// exponent `e[+-]digits` only when followed by a digit (so `1e9bit` works
/// but the `e` is not confused with a unit letter otherwise).
fn split_number(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && b[i] == b'+' {
        i += 1;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    i
}

fn unit_multiplier(input: &str, num: &str, unit: &str) -> Result<u64, RateError> {
    let base = unit.strip_suffix("/s").unwrap_or(unit);
    let lower = base.to_ascii_lowercase();
    // Ambiguous `bps` forms first.
    if lower.ends_with("bps") {
        let (bits, bytes) = match lower.as_str() {
            "kbps" => ("kbit", "KB/s"),
            "mbps" => ("mbit", "MB/s"),
            "gbps" => ("gbit", "GB/s"),
            "tbps" => ("tbit", "TB/s"),
            _ => ("bit", "B/s"),
        };
        return Err(RateError::AmbiguousBps {
            input: input.to_string(),
            unit: unit.to_string(),
            num: num.to_string(),
            bits,
            bytes,
        });
    }
    const K: u64 = 1_000;
    const KI: u64 = 1_024;
    let bits = match lower.as_str() {
        "bit" => Some(1),
        "kbit" => Some(K),
        "mbit" => Some(K * K),
        "gbit" => Some(K * K * K),
        "tbit" => Some(K * K * K * K),
        "kibit" => Some(KI),
        "mibit" => Some(KI * KI),
        "gibit" => Some(KI * KI * KI),
        "tibit" => Some(KI * KI * KI * KI),
        _ => None,
    };
    if let Some(m) = bits {
        return Ok(m);
    }
    // Case-sensitive SI symbols: b = bit, B = byte. These need the `/s`.
    if unit.ends_with("/s") {
        let m = match base {
            "b" => Some(1),
            "kb" | "Kb" => Some(K),
            "Mb" => Some(K * K),
            "Gb" => Some(K * K * K),
            "Tb" => Some(K * K * K * K),
            "B" => Some(8),
            "kB" | "KB" => Some(8 * K),
            "MB" => Some(8 * K * K),
            "GB" => Some(8 * K * K * K),
            "TB" => Some(8 * K * K * K * K),
            "KiB" => Some(8 * KI),
            "MiB" => Some(8 * KI * KI),
            "GiB" => Some(8 * KI * KI * KI),
            "TiB" => Some(8 * KI * KI * KI * KI),
            _ => None,
        };
        if let Some(m) = m {
            return Ok(m);
        }
    }
    Err(RateError::UnknownUnit {
        input: input.to_string(),
        unit: unit.to_string(),
    })
}

/// An exact decimal `digits × 10^exp` (`digits` without trailing zeros).
struct Decimal {
    digits: u128,
    exp: i64,
    /// More than 38 significant digits: `digits` holds the first 38.
    too_precise: bool,
}

enum DecErr {
    Overflow,
    Fraction,
    TooPrecise,
}

/// Exponents beyond this are clamped: any non-zero value is then far out of
/// range either way.
const EXP_CLAMP: i64 = 100_000;

impl Decimal {
    fn parse(s: &str) -> Option<Decimal> {
        let s = s.strip_prefix('+').unwrap_or(s);
        let (mant, exp) = match s.find(['e', 'E']) {
            Some(i) => {
                let e = &s[i + 1..];
                let body = e.strip_prefix(['+', '-']).unwrap_or(e);
                if body.is_empty() || !body.bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                // Too many digits for i64: saturate; the clamp below applies.
                let v = e.parse::<i64>().unwrap_or(if e.starts_with('-') {
                    i64::MIN
                } else {
                    i64::MAX
                });
                (&s[..i], v.clamp(-EXP_CLAMP, EXP_CLAMP))
            }
            None => (s, 0),
        };
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let all: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
        let mut exp = exp - frac.len() as i64;
        let start = all.iter().position(|&c| c != b'0').unwrap_or(all.len());
        let mut sig = &all[start..];
        while let [rest @ .., b'0'] = sig {
            sig = rest;
            exp += 1;
        }
        let too_precise = sig.len() > 38;
        if too_precise {
            exp += (sig.len() - 38) as i64;
            sig = &sig[..38];
        }
        let digits = sig
            .iter()
            .fold(0u128, |d, &c| d * 10 + u128::from(c - b'0'));
        Some(Decimal {
            digits,
            exp,
            too_precise,
        })
    }

    /// `self × mult` as a whole u64.
    fn times(&self, mult: u64) -> Result<u64, DecErr> {
        if self.digits == 0 {
            return Ok(0);
        }
        if self.too_precise {
            // 38 digits × 10^exp with exp ≥ 0 is at least 10^37 ≫ u64::MAX.
            return Err(if self.exp >= 0 {
                DecErr::Overflow
            } else {
                DecErr::TooPrecise
            });
        }
        let mut v = self
            .digits
            .checked_mul(u128::from(mult))
            .ok_or(DecErr::Overflow)?;
        let mut e = self.exp;
        while e > 0 {
            v = v.checked_mul(10).ok_or(DecErr::Overflow)?;
            if v > u128::from(u64::MAX) {
                return Err(DecErr::Overflow);
            }
            e -= 1;
        }
        while e < 0 {
            if v % 10 != 0 {
                return Err(DecErr::Fraction);
            }
            v /= 10;
            e += 1;
        }
        u64::try_from(v).map_err(|_| DecErr::Overflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowest_for_is_the_boundary_of_tx_time() {
        for (bytes, within) in [
            (1538u64, 16_382_000u64),
            (9048, 16_382_000),
            (1, 1),
            (64, 7),
        ] {
            let r = Rate::slowest_for(bytes, Nanos(within)).expect("a rate");
            assert!(r.tx_time(bytes).0 <= within, "{r} too slow for {bytes} B");
            let slower = Rate::from_bps(r.as_bps() - 1);
            if let Some(s) = slower {
                assert!(s.tx_time(bytes).0 > within, "{s} also fits {bytes} B");
            }
        }
        assert_eq!(Rate::slowest_for(1, Nanos(0)), None);
        assert_eq!(Rate::slowest_for(0, Nanos(5)), None);
        assert_eq!(Rate::slowest_for(u64::MAX, Nanos(1)), None);
    }

    #[test]
    fn parses_examples() {
        assert_eq!(Rate::parse("100kbit").unwrap().as_bps(), 100_000);
        assert_eq!(Rate::parse("1.5mbit").unwrap().as_bps(), 1_500_000);
        assert_eq!(Rate::parse("10gbit").unwrap().as_bps(), 10_000_000_000);
        assert_eq!(Rate::parse("10Gbit/s").unwrap().as_bps(), 10_000_000_000);
        assert_eq!(Rate::parse("125MB/s").unwrap().as_bps(), 1_000_000_000);
        assert_eq!(Rate::parse("1e9bit").unwrap().as_bps(), 1_000_000_000);
        assert_eq!(Rate::parse("2.5e3kbit").unwrap().as_bps(), 2_500_000);
        assert_eq!(Rate::parse("1kibit").unwrap().as_bps(), 1024);
        assert_eq!(Rate::parse("1MiB/s").unwrap().as_bps(), 8 * 1024 * 1024);
        assert_eq!(Rate::parse("40Gb/s").unwrap().as_bps(), 40_000_000_000);
        assert_eq!(Rate::parse(" 1 gbit ").unwrap().as_bps(), 1_000_000_000);
        assert_eq!(Rate::parse("0.000001gbit").unwrap().as_bps(), 1_000);
        // Trailing zeros and long digit strings that still name whole rates.
        let long = "0.10000000000000000000000000000000000000000gbit";
        assert_eq!(Rate::parse(long).unwrap().as_bps(), 100_000_000);
        let big = "100000000000000000000000000000000000000000e-41gbit";
        assert_eq!(Rate::parse(big).unwrap().as_bps(), 1_000_000_000);
        assert_eq!(Rate::parse("0.5kibit").unwrap().as_bps(), 512);
    }

    #[test]
    fn rejects_bad_input() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("10bps", "ambiguous"),
            ("10kbps", "ambiguous"),
            ("10Mbps", "ambiguous"),
            ("10gbps", "ambiguous"),
            ("0gbit", "zero"),
            ("0", "no unit"),
            ("-1gbit", "negative"),
            ("100", "no unit"),
            ("1e30gbit", "too large"),
            ("18446744073709551616bit", "too large"),
            (
                "99999999999999999999999999999999999999999999gbit",
                "too large",
            ),
            ("abc", "not a number"),
            ("1.2.3gbit", "not a number"),
            ("10 furlongs", "unknown unit"),
            ("10Mb", "unknown unit"),
            ("0.5bit", "whole number"),
            ("1e-3bit", "whole number"),
            (".", "not a number"),
            ("1e", "unknown unit"),
            (
                "1.0000000000000000000000000000000000000000001bit",
                "significant digits",
            ),
            ("1e99999999999bit", "too large"),
            (
                "99999999999999999999999999999999999999999e2147483647bit",
                "too large",
            ),
            ("1e-99999999999bit", "whole number"),
            ("0e99999999999bit", "zero"),
        ];
        for (input, want) in cases {
            let err = Rate::parse(input).expect_err(input).to_string();
            assert!(
                err.contains(want),
                "{input:?}: error {err:?} should mention {want:?}"
            );
        }
    }

    #[test]
    fn ambiguous_bps_suggests_both() {
        let err = Rate::parse("100mbps").unwrap_err().to_string();
        assert!(err.contains("100mbit") && err.contains("100MB/s"), "{err}");
    }

    #[test]
    fn prints_exact_and_roundtrips() {
        for (bps, s) in [
            (1, "1bit"),
            (1_500_000, "1.5mbit"),
            (10_000_000_000, "10gbit"),
            (123_456_789, "123.456789mbit"),
            (1_000_000_000_001, "1.000000000001tbit"),
        ] {
            let r = Rate::bps(bps);
            assert_eq!(r.to_string(), s);
            assert_eq!(Rate::parse(s).unwrap(), r);
        }
        assert_eq!(Rate::MAX.to_string().parse::<Rate>().unwrap(), Rate::MAX);
    }

    #[test]
    fn tx_time_is_exact_and_rounds_up() {
        let r = Rate::gbit(40);
        assert_eq!(r.tx_time(1500), Nanos(300));
        assert_eq!(Rate::gbit(10).tx_time(1), Nanos(1)); // 0.8 ns rounds up
        assert_eq!(Rate::mbit(1).tx_time(125), Nanos(1_000_000));
        // 40 Gbit/s for 1e9 bytes of 1500-byte packets in ps: no drift.
        let ps: u128 = (0..1_000_000u64).map(|_| r.tx_time_ps(1500)).sum();
        assert_eq!(ps, 300_000_000_000); // 1e6 × 300 ns
        assert_eq!(Rate::gbit(1).bytes_in(Nanos::from_secs(1)), 125_000_000);
        assert_eq!(Rate::bps(1).tx_time(u64::MAX), Nanos::MAX);
    }
}
