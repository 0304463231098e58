//! The optional `[egress]` table of a route config: the egress link's
//! rate with its link-layer accounting (`overhead`, `mpu`, as in
//! `pktsched run`'s `[link]`), the scheduling `algorithm` (the names
//! `pktsched run` accepts) and per-class parameters in `[[egress.class]]`
//! keyed by the route's `[[class]]` names. The class fields (`weight`,
//! `prio`, `limit`, `rate`, `ceil`, `burst`, `cburst`) are checked by `pktsched run`'s own
//! class parser; a class without an entry gets `pktsched run`'s defaults.
//!
//! ```toml
//! [egress]
//! rate = "100mbit"
//! overhead = 24
//! algorithm = "drr"
//!
//! [[egress.class]]
//! name = "rt"
//! weight = 3
//! limit = 256
//! ```

use std::collections::HashMap;
use std::path::PathBuf;

use pktsched_core::{Algorithm, Rate};
use serde::Deserialize;
use toml::Spanned;

use super::config::RouteClass;
use super::worker::TX_BATCH;
use crate::config::{
    Backend, ClassConfig, ClassRateRange, ConfigError, ControlConfig, Ctx, Engine, LinkConfig,
    MAX_LINK_RATE, MAX_OVERHEAD, RawClass, RunConfig, SchedulerChoice, ThreadSched, parse_class,
    prio_levels,
};

/// The longest frame the egress queues: the router's pool buffer.
pub const EGRESS_MAX_FRAME: u32 = 2048;

/// `[egress]` as TOML gives it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEgress {
    pub(crate) rate: Spanned<crate::config::RateText>,
    pub(crate) overhead: Option<Spanned<i64>>,
    pub(crate) mpu: Option<Spanned<i64>>,
    pub(crate) algorithm: Option<Spanned<String>>,
    pub(crate) class: Option<Vec<Spanned<RawClass>>>,
}

/// A checked `[egress]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressSection {
    /// The egress link's rate.
    pub rate: Rate,
    /// Bytes added to every frame's length on the wire.
    pub overhead: u32,
    /// Smallest wire length a frame counts for (after `overhead`).
    pub mpu: u32,
    /// How the classes share the rate.
    pub algorithm: Algorithm,
    /// Per route class (same order as `[[class]]`), its egress settings.
    pub classes: Vec<ClassConfig>,
}

impl EgressSection {
    /// The length a frame of `len` bytes counts for on the wire.
    pub fn wire_len(&self, len: u32) -> u32 {
        (len + self.overhead).max(self.mpu)
    }

    /// The same settings as a `pktsched run` config, so its scheduler
    /// builder ([`crate::plan::build`]) makes the egress scheduler.
    pub fn as_run_config(&self, ingress: &str, egress: &str) -> RunConfig {
        RunConfig {
            file: String::new(),
            link: LinkConfig {
                ingress: ingress.to_string(),
                egress: egress.to_string(),
                rate: self.rate,
                overhead: self.overhead,
                mpu: self.mpu,
                max_frame: EGRESS_MAX_FRAME,
                backend: Backend::Auto,
                promiscuous: false,
                buffers: 64,
                burst: 0,
                prio_burst: 0,
                engine: Engine::RunToCompletion,
                cpu: None,
                sched: ThreadSched::Other,
                busy_poll: None,
            },
            scheduler: SchedulerChoice::Algorithm(self.algorithm),
            control: ControlConfig {
                socket: PathBuf::new(),
                prometheus: None,
            },
            classes: self.classes.clone(),
        }
    }
}

/// `pktsched run`'s defaults for a class with no `[[egress.class]]`.
fn default_class(name: &str) -> ClassConfig {
    ClassConfig {
        name: name.to_string(),
        weight: 1,
        prio: 0,
        limit: 1024,
        rate: None,
        ceil: None,
        burst: None,
        cburst: None,
        node: None,
        default: false,
        rules: Vec::new(),
    }
}

/// Buffers the pool keeps beyond the egress's class limits: a device
/// poll's receive batch (`router.device_budget`) and the two output
/// batches ([`TX_BATCH`] each), so with every class at its limit a poll
/// still receives a whole batch.
pub fn pool_reserve(device_budget: u32) -> u64 {
    u64::from(device_budget) + 2 * TX_BATCH as u64
}

/// Checks `[egress]` against the route's classes and the router's pool
/// (`router.pool_frames`, `router.device_budget`).
pub(crate) fn parse_egress(
    cx: &Ctx<'_>,
    raw: &Spanned<RawEgress>,
    classes: &[RouteClass],
    (pool_frames, device_budget): (u32, u32),
) -> Result<EgressSection, ConfigError> {
    let e = raw.get_ref();
    let rate = Rate::parse(e.rate.get_ref())
        .map_err(|err| cx.err(e.rate.span(), format!("egress.rate: {err}")))?;
    if rate > MAX_LINK_RATE {
        return Err(cx.err(
            e.rate.span(),
            format!("egress.rate = {rate} is too fast: allowed up to {MAX_LINK_RATE}"),
        ));
    }
    let opt = |v: &Option<Spanned<i64>>, field: &str| {
        v.as_ref()
            .map_or(Ok(0), |v| cx.range(v, field, 0, MAX_OVERHEAD))
    };
    let overhead = opt(&e.overhead, "egress.overhead")?;
    let mpu = opt(&e.mpu, "egress.mpu")?;
    let algorithm = match &e.algorithm {
        None => Algorithm::Drr,
        Some(a) => Algorithm::parse(a.get_ref())
            .map_err(|err| cx.err(a.span(), format!("egress.algorithm: {err}")))?,
    };
    let scheduler = SchedulerChoice::Algorithm(algorithm);
    let mut out: Vec<ClassConfig> = classes.iter().map(|c| default_class(&c.name)).collect();
    let mut seen = HashMap::new();
    let raws = e.class.as_deref().unwrap_or(&[]);
    // The parsed entries in the file's order, for `prio_levels`.
    let mut parsed = Vec::with_capacity(raws.len());
    for c in raws {
        let rc = c.get_ref();
        let name = rc.name.get_ref();
        let Some(i) = classes.iter().position(|k| k.name == *name) else {
            let names: Vec<String> = classes.iter().map(|k| format!("{:?}", k.name)).collect();
            return Err(cx.err(
                rc.name.span(),
                format!(
                    "egress.class name {name:?} is not a [[class]] of the router: allowed {}",
                    names.join(", ")
                ),
            ));
        };
        if let Some(first) = seen.insert(i, cx.line_of(&rc.name.span())) {
            return Err(cx.err(
                rc.name.span(),
                format!(
                    "egress.class {name:?} is given twice (first at line {first}): allowed one \
                     entry per class"
                ),
            ));
        }
        refuse_run_only_fields(cx, rc)?;
        // run's messages call the rate the classes share `link.rate`.
        let wire_max = (EGRESS_MAX_FRAME + overhead).max(mpu);
        let range = ClassRateRange::for_link(rate, wire_max);
        out[i] = parse_class(cx, rc, &scheduler, range).map_err(|mut err| {
            err.msg = err
                .msg
                .replace("a smaller link.max_frame or ", "")
                .replace("link.rate", "egress.rate");
            err
        })?;
        parsed.push(out[i].clone());
    }
    prio_levels(cx, raws, &scheduler, &parsed).map_err(|mut err| {
        err.msg = format!("egress.{}", err.msg);
        err
    })?;
    // Queued frames hold pool buffers: the egress must leave enough for
    // a device poll's receive batch and the output batches, or a flooded
    // egress would cut receiving down to a frame or two per call.
    let held: u64 = out.iter().map(|c| u64::from(c.limit)).sum();
    let reserve = pool_reserve(device_budget);
    if held + reserve > u64::from(pool_frames) {
        return Err(cx.err(
            raw.span(),
            format!(
                "[egress]: the class limits add up to {held} frames, leaving {} of \
                 router.pool_frames = {pool_frames} for receiving and sending: allowed a sum \
                 below pool_frames by at least {reserve} (router.device_budget = {device_budget} \
                 + 2 output batches of {TX_BATCH}), so at most {}; lower the classes' `limit` \
                 (default 1024) or raise pool_frames",
                u64::from(pool_frames).saturating_sub(held),
                u64::from(pool_frames).saturating_sub(reserve)
            ),
        ));
    }
    Ok(EgressSection {
        rate,
        overhead,
        mpu,
        algorithm,
        classes: out,
    })
}

/// `match`, `default` and `node` belong to `pktsched run`: the router's
/// `[[class]]` already classifies, and the egress has no policy tree.
fn refuse_run_only_fields(cx: &Ctx<'_>, rc: &RawClass) -> Result<(), ConfigError> {
    let name = rc.name.get_ref();
    let why = if let Some(m) = &rc.matches {
        Some((m.span(), "match"))
    } else if let Some(d) = &rc.default {
        Some((d.span(), "default"))
    } else {
        rc.node.as_ref().map(|n| (n.span(), "node"))
    };
    match why {
        None => Ok(()),
        Some((span, field)) => Err(cx.err(
            span,
            format!(
                "egress.class {name:?}: `{field}` is not allowed here (frames are classified by \
                 the [[class]] of the same name): allowed name, weight, prio, limit, rate, ceil, \
                 burst, cburst"
            ),
        )),
    }
}
