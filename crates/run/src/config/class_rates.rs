//! A class's HTB-style `rate` (guaranteed) and `ceil` (the most it may
//! borrow up to) in the flat config. With a weighted algorithm (`drr`,
//! `wf2q`, `qfq`, `rr`) the classes then hang below one hClock node: a
//! class is served first while it is below its `rate` (its reservation),
//! shares what is left by `weight`, and never exceeds its `ceil` (a limit
//! on the shared shaper). With `prio`, `ceil` limits a class and `rate`
//! is refused (strict priority has no shares to guarantee). As in HTB,
//! `ceil` defaults to `rate`; `ceil` alone limits without a guarantee.

use pktsched_core::{Algorithm, Rate};
use toml::Spanned;

use super::ConfigError;
use super::SchedulerChoice;
use super::parse::Ctx;
use super::raw::RawClass;

/// Slowest class rate: one 1538-byte frame within the shaper's 16 ms
/// horizon (1 µs × 16382 buckets) needs at least 0.77 Mbit/s.
pub const MIN_CLASS_RATE: Rate = Rate::kbit(1000);

/// `(rate, ceil)` of `raw` as written (`ceil` not yet defaulted), checked
/// against the scheduler and the link's rate.
pub(super) fn class_rates(
    cx: &Ctx<'_>,
    raw: &RawClass,
    scheduler: &SchedulerChoice,
    link_rate: Rate,
) -> Result<(Option<Rate>, Option<Rate>), ConfigError> {
    let name = raw.name.get_ref();
    let one = |v: &Option<Spanned<String>>, field: &str| -> Result<Option<Rate>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let what = format!("class {name:?}: {field}");
        let r = Rate::parse(v.get_ref()).map_err(|e| cx.err(v.span(), format!("{what}: {e}")))?;
        if r < MIN_CLASS_RATE || r > link_rate {
            return Err(cx.err(
                v.span(),
                format!("{what} = {r}: allowed {MIN_CLASS_RATE} up to link.rate = {link_rate}"),
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
