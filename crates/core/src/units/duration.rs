//! Durations written by people: `20ms`, `1.5us`, `100ns`, `2s`, `7ps`.
//!
//! A duration is a non-negative decimal number (an optional fraction, no
//! exponent) followed by one of the units `ps`, `ns`, `us` (or `µs`), `ms`,
//! `s`. A bare number is refused: say which unit you mean. Arithmetic is
//! exact: [`parse_duration_ps`] refuses anything finer than a picosecond,
//! [`parse_duration`] anything finer than a nanosecond, instead of rounding.
//!
//! ```
//! use pktsched_core::units::{parse_duration, parse_duration_ps, DurationError};
//! use pktsched_core::Nanos;
//!
//! assert_eq!(parse_duration_ps("1.5us"), Ok(1_500_000));
//! assert_eq!(parse_duration("20ms"), Ok(Nanos::from_millis(20)));
//! assert!(matches!(parse_duration("1ps"), Err(DurationError::TooFine { .. })));
//! assert!(matches!(parse_duration("-1s"), Err(DurationError::Negative(_))));
//! ```

use super::Nanos;

/// The units a duration may have, as error messages list them.
pub const DURATION_UNITS: &str = "ps, ns, us (or µs), ms, s";

/// Why a duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The input was empty.
    #[error("empty duration: write a number and a unit, e.g. `20ms` (units: {DURATION_UNITS})")]
    Empty,
    /// The duration was negative.
    #[error("duration `{0}` is negative; a duration is at least 0 (e.g. `0s`, `20ms`)")]
    Negative(String),
    /// The number part could not be read.
    #[error(
        "duration `{0}` is not a number followed by a unit, e.g. `20ms` or `1.5us` (units: {DURATION_UNITS})"
    )]
    BadNumber(String),
    /// No unit was given.
    #[error("duration `{0}` has no unit; add one of: {DURATION_UNITS}")]
    NoUnit(String),
    /// The unit is unknown.
    #[error("unknown unit `{unit}` in duration `{input}`; allowed: {DURATION_UNITS}")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The offending unit.
        unit: String,
    },
    /// More precise than the resolution the caller counts in.
    #[error("duration `{input}` is finer than 1 {resolution}, the resolution here")]
    TooFine {
        /// The whole input.
        input: String,
        /// `ps` or `ns`.
        resolution: &'static str,
    },
    /// Does not fit in 64 bits of the caller's resolution.
    #[error("duration `{input}` is too long; the maximum is {max}")]
    TooLong {
        /// The whole input.
        input: String,
        /// The largest duration, in words.
        max: &'static str,
    },
}

/// Parses a duration into picoseconds (exact; at most about 213 days).
pub fn parse_duration_ps(s: &str) -> Result<u64, DurationError> {
    let (input, ps) = parse_u128_ps(s)?;
    u64::try_from(ps).map_err(|_| DurationError::TooLong {
        input: input.to_string(),
        max: "about 213 days (2^64 ps)",
    })
}

/// Parses a duration into nanoseconds (exact: `1ps` or `1.5ns` is refused
/// rather than rounded; at most about 584 years).
pub fn parse_duration(s: &str) -> Result<Nanos, DurationError> {
    let (input, ps) = parse_u128_ps(s)?;
    if ps % 1_000 != 0 {
        return Err(DurationError::TooFine {
            input: input.to_string(),
            resolution: "ns",
        });
    }
    u64::try_from(ps / 1_000)
        .map(Nanos)
        .map_err(|_| DurationError::TooLong {
            input: input.to_string(),
            max: "about 584 years (2^64 ns)",
        })
}

/// The trimmed input and its value in picoseconds (may exceed `u64`).
fn parse_u128_ps(s: &str) -> Result<(&str, u128), DurationError> {
    let input = s.trim();
    let own = || input.to_string();
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    if input.starts_with('-') {
        return Err(DurationError::Negative(own()));
    }
    let body = input.strip_prefix('+').unwrap_or(input);
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, unit) = body.split_at(split);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(DurationError::BadNumber(own()));
    }
    let mult: u128 = match unit.trim() {
        "ps" => 1,
        "ns" => 1_000,
        "us" | "µs" => 1_000_000,
        "ms" => 1_000_000_000,
        "s" => 1_000_000_000_000,
        "" => return Err(DurationError::NoUnit(own())),
        u => {
            return Err(DurationError::UnknownUnit {
                input: own(),
                unit: u.to_string(),
            });
        }
    };
    let too_long = || DurationError::TooLong {
        input: own(),
        max: "about 213 days (2^64 ps)",
    };
    // Leading zeros cannot overflow; anything else longer than 39 digits does.
    let int = int.trim_start_matches('0');
    let whole: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| too_long())?
    };
    let mut ps = whole.checked_mul(mult).ok_or_else(too_long)?;
    let mut scale = mult;
    for c in frac.trim_end_matches('0').bytes() {
        if scale < 10 {
            return Err(DurationError::TooFine {
                input: own(),
                resolution: "ps",
            });
        }
        scale /= 10;
        // The whole part may already sit just below u128::MAX.
        ps = ps
            .checked_add(u128::from(c - b'0') * scale)
            .ok_or_else(too_long)?;
    }
    Ok((input, ps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values() {
        assert_eq!(parse_duration_ps("20ms"), Ok(20_000_000_000));
        assert_eq!(parse_duration_ps("1.5us"), Ok(1_500_000));
        assert_eq!(parse_duration_ps("1.5µs"), Ok(1_500_000));
        assert_eq!(parse_duration_ps("7ps"), Ok(7));
        assert_eq!(parse_duration_ps(" 2 s "), Ok(2_000_000_000_000));
        assert_eq!(parse_duration_ps("0s"), Ok(0));
        assert_eq!(parse_duration_ps(".5ns"), Ok(500));
        assert_eq!(parse_duration_ps("3.ms"), Ok(3_000_000_000));
        assert_eq!(parse_duration_ps("1.000000000000000000000s"), Ok(PS_PER_S));
        assert_eq!(parse_duration("1.5us"), Ok(Nanos(1_500)));
        assert_eq!(parse_duration("2000ps"), Ok(Nanos(2)));
    }

    const PS_PER_S: u64 = 1_000_000_000_000;

    #[test]
    fn a_fraction_that_overflows_the_whole_part_is_too_long() {
        // u128::MAX is 340282366920938463463374607.431768211455 s: the
        // whole seconds fit, the fraction's digits carry past the top.
        for input in [
            "340282366920938463463374607.999999999999s",
            "340282366920938463463374607.431768211456s",
        ] {
            assert!(
                matches!(parse_duration_ps(input), Err(DurationError::TooLong { .. })),
                "{input}: {:?}",
                parse_duration_ps(input)
            );
        }
    }

    #[test]
    fn refusals_name_the_problem() {
        let cases: &[(&str, &str)] = &[
            ("", "empty duration"),
            ("-1s", "negative"),
            ("10", "has no unit"),
            ("ms", "not a number"),
            ("1..2ms", "not a number"),
            ("1.2.3ms", "not a number"),
            ("10 min", "unknown unit `min`"),
            ("1e3ms", "unknown unit `e3ms`"),
            ("1.0001ns", "finer than 1 ps"),
            ("300days", "unknown unit"),
            ("214000000s", "too long"),
            ("99999999999999999999999999999999999999999s", "too long"),
        ];
        for (input, words) in cases {
            let err = parse_duration_ps(input).expect_err(input).to_string();
            assert!(err.contains(words), "{input}: {err}");
        }
        let err = parse_duration("1ps").expect_err("1ps").to_string();
        assert!(err.contains("finer than 1 ns"), "{err}");
        assert!(parse_duration("600years").is_err());
        assert!(parse_duration("214000000s").is_ok());
        let err = parse_duration("18446744074s")
            .expect_err("long")
            .to_string();
        assert!(err.contains("584 years"), "{err}");
    }
}
