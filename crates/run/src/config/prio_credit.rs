//! `link.prio_burst`: the priority credit of the most urgent classes.
//!
//! The shaper releases a frame while the emulated link is within
//! `link.burst` of the clock. Under overload a bulk class keeps it there,
//! so a frame of a strict-priority class that arrives waits for the bulk
//! frame already on the wire (one 1538-byte frame: 123 µs at 100 Mbit/s,
//! 1.2 ms at 10 Mbit/s). HTB's prio-0 class within its own rate sends at
//! once instead (its parent goes into debt). `prio_burst` gives the most
//! urgent classes that: their frames may start while the link is within
//! `burst + prio_burst` of the clock, every other frame only within
//! `burst`, so the other classes pay the urgent bytes back at once and
//! over any interval `t` the link sends at most
//! `rate·t + burst + prio_burst` + one frame.
//!
//! Default: one maximum frame on the wire (`max_frame + overhead`, at least
//! `mpu`) when the config has urgent classes. Under overload the bulk
//! class leaves the link at most `burst` plus one frame ahead, so one frame
//! of credit is exactly what an urgent frame needs to start at once; more
//! only lets a run of urgent frames leave faster than the link's rate. 0
//! (and the only value accepted) when no class can use it.

use pktsched_core::Algorithm;

use super::parse::Ctx;
use super::raw::RawLink;
use super::{ConfigError, MAX_BURST, RunConfig, SchedulerChoice};

impl RunConfig {
    /// The priority level (`prio`, 0 first) of the classes that may use
    /// `link.prio_burst`: the most urgent level, with strict priority
    /// (`algorithm = "prio"`), no class `rate` or `ceil` (a shaped class
    /// could be held back while queued) and at least one class on a less
    /// urgent level. `None` when no class may use it.
    pub fn urgent_level(&self) -> Option<u32> {
        if !matches!(self.scheduler, SchedulerChoice::Algorithm(Algorithm::Prio))
            || self.has_class_rates()
        {
            return None;
        }
        let top = self.classes.iter().map(|c| c.prio).min()?;
        self.classes.iter().any(|c| c.prio > top).then_some(top)
    }
}

/// `link.prio_burst` as written, checked against the classes, or its
/// default (see the module docs).
pub(super) fn prio_burst(cx: &Ctx<'_>, raw: &RawLink, cfg: &RunConfig) -> Result<u32, ConfigError> {
    let urgent = cfg.urgent_level().is_some();
    let Some(v) = &raw.prio_burst else {
        let link = &cfg.link;
        return Ok(if urgent {
            link.wire_len(link.max_frame)
        } else {
            0
        });
    };
    let bytes = cx.range(v, "link.prio_burst", 0, MAX_BURST)?;
    if bytes > 0 && !urgent {
        return Err(cx.err(
            v.span(),
            format!(
                "link.prio_burst = {bytes} has no class to serve: allowed above 0 only with \
                 [scheduler] algorithm = \"prio\", no class rate or ceil, and classes on at \
                 least two prio levels (the most urgent level uses it); else 0"
            ),
        ));
    }
    Ok(bytes)
}
