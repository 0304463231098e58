//! A class's HTB-style `rate` (guaranteed) and `ceil` (the most it may
//! borrow up to) in the flat config. With a weighted algorithm (`drr`,
//! `wf2q`, `qfq`, `rr`) the classes then hang below one hClock node: a
//! class is served first while it is below its `rate` (its reservation),
//! shares what is left by `weight`, and never exceeds its `ceil` (a limit
//! on the shared shaper). With `prio`, `ceil` limits a class and `rate`
//! is refused (strict priority has no shares to guarantee). As in HTB,
//! `ceil` defaults to `rate`; `ceil` alone limits without a guarantee.
//!
//! `burst` and `cburst` are HTB's: the bytes (on the wire) a class may
//! send ahead of its `rate` (its reservation starts that much early when
//! it becomes backlogged) and ahead of its `ceil` (the credit of its
//! limit: after idling it sends `cburst` plus one frame back to back, then
//! keeps its `ceil`). `cburst` defaults to `burst` (as `ceil` defaults to
//! `rate`), else one maximum frame. Sizes are bytes, as a number or with
//! a unit: `"15k"` (k, kb, kib = 1024 bytes, m, mb, mib = 1024², as tc
//! reads them), at most [`MAX_CLASS_BURST`].

use pktsched_core::{Algorithm, Rate};
use toml::Spanned;

use super::ConfigError;
use super::SchedulerChoice;
use super::parse::Ctx;
use super::raw::NumOrText;
use super::raw::{RateText, RawClass};

/// Slowest class rate with standard frames: one 1538-byte frame within
/// the shaper's 16 ms horizon (1 µs × 16382 buckets) needs at least 0.751
/// Mbit/s. Larger frames raise it ([`ClassRateRange::for_link`]).
pub const MIN_CLASS_RATE: Rate = Rate::kbit(1000);

/// The rates a class's `rate` and `ceil` may take on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassRateRange {
    /// The slowest: [`MIN_CLASS_RATE`], or more when one frame of the
    /// link's largest wire length would not fit the shaper's horizon at it.
    pub slowest: Rate,
    /// The fastest: the link's rate.
    pub link_rate: Rate,
    /// The link's largest frame on the wire (bytes).
    pub max_wire_len: u32,
    /// The slowest rate (whole kbit/s) at which one such frame fits the
    /// shaper's horizon; below [`MIN_CLASS_RATE`] the floor is that.
    pub frame_floor: Rate,
}

impl ClassRateRange {
    /// The range on a link of `link_rate` whose largest frame takes
    /// `max_wire_len` bytes on the wire; the slowest rate is rounded up to
    /// a whole kbit/s.
    pub fn for_link(link_rate: Rate, max_wire_len: u32) -> ClassRateRange {
        let fits = pktsched_core::policy::slowest_shaped_rate(
            max_wire_len,
            pktsched_core::policy::DEFAULT_SHAPER_UNIT_NS,
            pktsched_core::policy::DEFAULT_SHAPER_BUCKETS,
        );
        // The defaults' horizon is 16 ms: some rate always fits.
        let fits = fits.unwrap_or(Rate::MAX);
        let kbit =
            Rate::from_bps(fits.as_bps().div_ceil(1000).saturating_mul(1000)).unwrap_or(Rate::MAX);
        ClassRateRange {
            slowest: kbit.max(MIN_CLASS_RATE),
            link_rate,
            max_wire_len,
            frame_floor: kbit,
        }
    }
}

/// `(rate, ceil)` of `raw` as written (`ceil` not yet defaulted), checked
/// against the scheduler and the link's range of rates.
pub(super) fn class_rates(
    cx: &Ctx<'_>,
    raw: &RawClass,
    scheduler: &SchedulerChoice,
    range: ClassRateRange,
) -> Result<(Option<Rate>, Option<Rate>), ConfigError> {
    let name = raw.name.get_ref();
    let ClassRateRange {
        slowest,
        link_rate,
        max_wire_len,
        frame_floor,
    } = range;
    let one = |v: &Option<Spanned<RateText>>, field: &str| -> Result<Option<Rate>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let what = format!("class {name:?}: {field}");
        let r = Rate::parse(v.get_ref()).map_err(|e| cx.err(v.span(), format!("{what}: {e}")))?;
        if slowest > link_rate {
            return Err(cx.err(
                v.span(),
                format!(
                    "{what} = {r}: no class rate fits this link: one largest frame \
                     ({max_wire_len} bytes on the wire) needs at least {slowest} to fit the \
                     shaper's 16 ms horizon, above link.rate = {link_rate}; allowed: a smaller \
                     link.max_frame or a faster link.rate"
                ),
            ));
        }
        if r < slowest || r > link_rate {
            let why = if slowest > MIN_CLASS_RATE {
                format!(
                    " (the slowest at which one largest frame, {max_wire_len} bytes on the \
                     wire, fits the shaper's 16 ms horizon)"
                )
            } else {
                format!(
                    " (the floor for a class rate; one largest frame, {max_wire_len} bytes on \
                     the wire, fits the shaper's 16 ms horizon from {frame_floor})"
                )
            };
            return Err(cx.err(
                v.span(),
                format!("{what} = {r}: allowed {slowest}{why} up to link.rate = {link_rate}"),
            ));
        }
        Ok(Some(r))
    };
    let rate = one(&raw.rate, "rate")?;
    let ceil = one(&raw.ceil, "ceil")?;
    let Some(first) = raw.rate.as_ref().or(raw.ceil.as_ref()) else {
        return Ok((None, None));
    };
    if let (Some(r), Some(c), Some(span)) = (rate, ceil, raw.ceil.as_ref())
        && c < r
    {
        return Err(cx.err(
            span.span(),
            format!(
                "class {name:?}: ceil = {c} is below rate = {r}: allowed ceil >= rate (the \
                 most it may borrow up to is at least its guarantee)"
            ),
        ));
    }
    let refuse = |why: String| Err(cx.err(first.span(), format!("class {name:?}: {why}")));
    match scheduler {
        SchedulerChoice::Policy { source, .. } => refuse(format!(
            "rate/ceil need scheduler.algorithm; with policy {source:?} put `reservation` and \
             `rate` on its nodes"
        )),
        SchedulerChoice::Algorithm(Algorithm::Fifo) => refuse(
            "rate/ceil need classes to schedule: algorithm = \"fifo\" has one queue; allowed \
             with drr, wf2q, qfq, rr (ceil alone also with prio)"
                .into(),
        ),
        SchedulerChoice::Algorithm(Algorithm::Prio) if rate.is_some() => refuse(
            "rate (a guarantee) needs a weighted algorithm (drr, wf2q, qfq, rr): strict \
             priority has no shares; ceil alone is allowed with prio"
                .into(),
        ),
        _ => Ok((rate, ceil)),
    }
}

/// Largest class `burst`/`cburst` (bytes): 1 MiB, as `link.burst`.
pub const MAX_CLASS_BURST: u32 = super::MAX_BURST;

/// Units of a size, and their bytes (1024-based, as tc reads them).
const SIZE_UNITS: [(&str, u64); 8] = [
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
];

/// Bytes of a size written as digits and an optional unit (`"1500"`,
/// `"15k"`, `"2mb"`; see `SIZE_UNITS`), or why not: a rate or a time
/// where a size belongs is named as such.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (num, unit) = t.split_at(digits);
    let allowed = "allowed bytes as a whole number with an optional unit b, k, kb, kib, m, \
                   mb, mib (1024-based, as tc), e.g. \"15k\" or 15000";
    if ["bit", "bps", "bit/s", "b/s"]
        .iter()
        .any(|u| unit.ends_with(u))
    {
        return Err(format!("{text:?} is a rate, not a size: {allowed}"));
    }
    if ["ns", "us", "ms", "s", "sec"].contains(&unit) {
        return Err(format!("{text:?} is a time, not a size: {allowed}"));
    }
    let Some(&(_, mult)) = SIZE_UNITS.iter().find(|(u, _)| *u == unit) else {
        return Err(format!("{text:?} is not a size: {allowed}"));
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{text:?} is not a size: {allowed}"))
}

/// `(burst, cburst)` of `raw` as written, in bytes: each needs the rate it
/// runs ahead of (`burst` a `rate`, `cburst` a `ceil`) and is
/// 1..=[`MAX_CLASS_BURST`].
pub(super) fn class_bursts(
    cx: &Ctx<'_>,
    raw: &RawClass,
    rate: Option<Rate>,
    ceil: Option<Rate>,
) -> Result<(Option<u32>, Option<u32>), ConfigError> {
    let name = raw.name.get_ref();
    let one = |v: &Option<Spanned<NumOrText>>, field: &str, needs: Option<&str>| {
        let Some(v) = v else { return Ok(None) };
        let what = format!("class {name:?}: {field} = {}", v.get_ref());
        if let Some(why) = needs {
            return Err(cx.err(v.span(), format!("{what}: {why}")));
        }
        // A number is bytes as written; a size with a unit is shown in
        // bytes when out of range.
        let (bytes, shown) = match v.get_ref() {
            NumOrText::Num(n) => (u64::try_from(*n).ok(), String::new()),
            NumOrText::Text(t) => {
                let b = parse_size(t).map_err(|e| cx.err(v.span(), format!("{what}: {e}")))?;
                (Some(b), format!(" ({b} bytes)"))
            }
        };
        match bytes.and_then(|b| u32::try_from(b).ok()) {
            Some(b) if (1..=MAX_CLASS_BURST).contains(&b) => Ok(Some(b)),
            _ => Err(cx.err(
                v.span(),
                format!("{what}{shown} is out of range: allowed 1..={MAX_CLASS_BURST} bytes"),
            )),
        }
    };
    let burst = one(
        &raw.burst,
        "burst",
        rate.is_none().then_some(
            "burst needs rate (it is credit ahead of the guaranteed rate); ahead of a ceil \
             alone use cburst",
        ),
    )?;
    let cburst = one(
        &raw.cburst,
        "cburst",
        ceil.is_none().then_some(
            "cburst needs ceil (it is credit ahead of ceil); without ceil the limit is rate \
             and burst sets its credit",
        ),
    )?;
    Ok((burst, cburst))
}
