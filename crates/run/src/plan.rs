//! From a checked config to what the pipeline runs: the scheduler with one
//! flow per class, and the classifier that maps a frame to its class. Pure
//! (no I/O), so it is tested without interfaces.

use pktsched_core::policy::{FlowParams, Policy, PolicySched};
use pktsched_core::{Algorithm, FlowConfig, FlowId, Nanos, SchedParams};
use pktsched_io::classify::{Classifier, Rule};
use pktsched_runtime::BoxedScheduler;

use crate::config::{ClassConfig, RunConfig, SchedulerChoice};

/// Why a config could not be turned into a scheduler.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The scheduler refused a class's settings.
    #[error("class {class:?}: {msg}")]
    Class {
        /// The class.
        class: String,
        /// The scheduler's reason (field, value, allowed).
        msg: String,
    },
    /// The classifier refused the rules.
    #[error("match rules: {0}")]
    Rules(String),
    /// The node the classes with a `rate` or `ceil` hang below could not
    /// be built (a fault of pktsched, not of the config: the node is
    /// pktsched's own).
    #[error("the classes' rate/ceil node could not be built (a pktsched bug): {0}")]
    ClassRates(String),
}

/// The scheduler and classifier of one config.
pub struct Plan<T> {
    /// The scheduler, one flow per class.
    pub sched: BoxedScheduler<T>,
    /// `flows[i]` is class `i`'s flow.
    pub flows: Vec<FlowId>,
    /// Frame → class index.
    pub classifier: Classifier,
}

impl<T> std::fmt::Debug for Plan<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("sched", &self.sched.name())
            .field("flows", &self.flows)
            .finish_non_exhaustive()
    }
}

/// The flow settings of a class on the config's link: lengths are wire
/// lengths. Round robin over classes with rates weighs every class 1.
pub fn flow_config(cfg: &RunConfig, class: &ClassConfig) -> FlowConfig {
    let link = &cfg.link;
    let rr = matches!(cfg.scheduler, SchedulerChoice::Algorithm(Algorithm::Rr));
    FlowConfig {
        weight: if rr && cfg.has_class_rates() {
            1
        } else {
            class.weight
        },
        quantum: None,
        max_len: link.wire_len(link.max_frame),
        limit: class.limit,
        prio: class.prio,
    }
}

/// The classifier of a config (class indices in file order).
pub fn classifier(cfg: &RunConfig) -> Result<Classifier, PlanError> {
    let mut rules = Vec::new();
    for (i, c) in cfg.classes.iter().enumerate() {
        for m in &c.rules {
            rules.push(Rule {
                class: i as u16,
                matches: m.clone(),
            });
        }
    }
    Classifier::new(rules, cfg.default_class() as u16).map_err(|e| PlanError::Rules(e.to_string()))
}

/// The one-node policy the classes hang below when any has a `rate` or
/// `ceil` (see [`crate::config::ClassConfig::ceiling`]): `prio` for the
/// prio algorithm, else `hclock` (reservation = rate, limit = ceil, share
/// by weight; `rr` gives every class weight 1).
pub fn class_rates_policy(cfg: &RunConfig) -> Result<Policy, PlanError> {
    let node = match &cfg.scheduler {
        SchedulerChoice::Algorithm(Algorithm::Prio) => "kind = \"prio\"\nlevels = 1024",
        _ => "kind = \"hclock\"",
    };
    let src = format!(
        "[policy]\nmax_len = {}\n\n[[node]]\nname = \"classes\"\n{node}\n",
        cfg.link.wire_len(cfg.link.max_frame)
    );
    Policy::from_toml(&src).map_err(|e| PlanError::ClassRates(e.to_string()))
}

/// An empty scheduler for the config's `[scheduler]`.
pub fn empty_scheduler<T: Send + 'static>(cfg: &RunConfig) -> BoxedScheduler<T> {
    if cfg.has_class_rates()
        && let Ok(p) = class_rates_policy(cfg)
    {
        return Box::new(PolicySched::<T>::new(&p));
    }
    match &cfg.scheduler {
        SchedulerChoice::Algorithm(a) => {
            let params = SchedParams {
                drr_quantum: cfg.link.wire_len(cfg.link.max_frame),
                ..SchedParams::default()
            };
            a.build_send_with(params)
        }
        SchedulerChoice::Policy { policy, .. } => Box::new(PolicySched::<T>::new(policy)),
    }
}

/// Adds class `class`'s flow to `sched`: below its node in a policy tree,
/// and, when the config's classes have rates (the scheduler is then
/// [`class_rates_policy`]'s), with its shaping ([`class_params`]).
pub fn add_class<T: Send + 'static>(
    sched: &mut BoxedScheduler<T>,
    cfg: &RunConfig,
    class: &ClassConfig,
) -> Result<FlowId, PlanError> {
    let refused = |msg: String| PlanError::Class {
        class: class.name.clone(),
        msg,
    };
    let fc = flow_config(cfg, class);
    if cfg.has_class_rates() {
        let flow = sched.add_flow(fc).map_err(|e| refused(e.to_string()))?;
        if let Err(e) = sched.set_flow_params(flow, class_params(class), Nanos(0)) {
            // Not left behind half-configured: the flow is new and empty.
            let _ = sched.remove_flow(flow);
            return Err(refused(format!("rate/ceil/burst: {e}")));
        }
        return Ok(flow);
    }
    let added = match (&cfg.scheduler, &class.node) {
        (SchedulerChoice::Policy { policy, .. }, Some(node)) => match policy.node(node) {
            Some(idx) => sched.add_flow_at(idx, fc).map_err(|e| e.to_string()),
            None => Err(format!("node {node:?} is not in the policy")),
        },
        _ => sched.add_flow(fc).map_err(|e| e.to_string()),
    };
    added.map_err(refused)
}

/// The scheduler of a config whose classes have rates: every class a flow
/// of the one node of [`class_rates_policy`], with its reservation and
/// limit.
fn rated_scheduler<T: Send + 'static>(
    cfg: &RunConfig,
) -> Result<(BoxedScheduler<T>, Vec<FlowId>), PlanError> {
    let mut sched: BoxedScheduler<T> = Box::new(PolicySched::<T>::new(&class_rates_policy(cfg)?));
    let flows = cfg
        .classes
        .iter()
        .map(|c| add_class(&mut sched, cfg, c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((sched, flows))
}

/// A rated class's shaping in the policy tree: reservation = `rate` with
/// `burst`, limit = [`ClassConfig::ceiling`] with
/// [`ClassConfig::ceiling_burst`] (lengths and bursts are wire bytes).
pub fn class_params(c: &ClassConfig) -> FlowParams {
    FlowParams {
        rate: c.ceiling(),
        reservation: c.rate,
        burst: c.burst.map(u64::from),
        cburst: c.ceiling_burst().map(u64::from),
        ..FlowParams::default()
    }
}

/// Builds the scheduler with every class and the classifier.
pub fn build<T: Send + 'static>(cfg: &RunConfig) -> Result<Plan<T>, PlanError> {
    let classifier = classifier(cfg)?;
    if cfg.has_class_rates() {
        let (sched, flows) = rated_scheduler(cfg)?;
        return Ok(Plan {
            sched,
            flows,
            classifier,
        });
    }
    let mut sched = empty_scheduler(cfg);
    let mut flows = Vec::with_capacity(cfg.classes.len());
    for c in &cfg.classes {
        flows.push(add_class(&mut sched, cfg, c)?);
    }
    Ok(Plan {
        sched,
        flows,
        classifier,
    })
}

#[cfg(test)]
mod tests {
    use pktsched_core::{Nanos, Pkt, Rate};

    use super::*;
    use crate::config::parse;

    const RATED: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\n\n\
        [scheduler]\nalgorithm = \"drr\"\n\n\
        [[class]]\nname = \"guaranteed\"\nweight = 1\nrate = \"30mbit\"\nceil = \"100mbit\"\n\
        match = [{ dport = 1 }]\n\n\
        [[class]]\nname = \"capped\"\nweight = 100\nceil = \"20mbit\"\nmatch = [{ dport = 2 }]\n\n\
        [[class]]\nname = \"rest\"\nweight = 10\ndefault = true\n";

    /// Every class backlogged for one virtual second on the emulated
    /// link; the bytes each sent.
    fn one_second(src: &str) -> Vec<u64> {
        let cfg = parse(src, "t.toml", None).expect("config");
        let mut plan = build::<()>(&cfg).expect("plan");
        let len = 1500u32;
        let link = cfg.link.rate;
        let mut sent = vec![0u64; plan.flows.len()];
        let mut now = Nanos(0);
        let end = Nanos(1_000_000_000);
        while now < end {
            for &f in &plan.flows {
                while plan.sched.flow_stats(f).is_some_and(|s| s.backlog.pkts < 4) {
                    if plan.sched.enqueue(Pkt::new(f, len, now, ()), now).is_err() {
                        break;
                    }
                }
            }
            match plan.sched.dequeue(now) {
                Some(p) => {
                    let i = plan.flows.iter().position(|&f| f == p.flow).expect("flow");
                    sent[i] += u64::from(p.len);
                    now = Nanos(now.0 + link.tx_time(u64::from(p.len)).0);
                }
                None => {
                    let next = plan.sched.next_ready(now).expect("a parked class");
                    now = Nanos(next.0.max(now.0 + 1));
                }
            }
        }
        sent
    }

    /// What the config accepts, the scheduler builds: a class at the
    /// slowest rate `check` allows (for the link's largest frame) gets its
    /// flow, with standard and jumbo frames.
    #[test]
    fn the_slowest_class_rate_the_config_allows_builds() {
        for (max_frame, overhead, mpu) in [(1514u32, 24u32, 84u32), (4000, 0, 0), (9216, 24, 84)] {
            let range = crate::config::ClassRateRange::for_link(
                Rate::gbit(1),
                (max_frame + overhead).max(mpu),
            );
            let src = format!(
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\
                 max_frame = {max_frame}\noverhead = {overhead}\nmpu = {mpu}\n\
                 [scheduler]\nalgorithm = \"drr\"\n\
                 [[class]]\nname = \"slow\"\ndefault = true\nrate = \"{}\"\n",
                range.slowest
            );
            let cfg = parse(&src, "t.toml", None).expect("the slowest rate parses");
            build::<()>(&cfg).unwrap_or_else(|e| panic!("max_frame {max_frame}: {e}"));
            let slower = Rate::from_bps(range.slowest.as_bps() - 1000).expect("rate");
            let below = src.replace(&range.slowest.to_string(), &slower.to_string());
            let err = parse(&below, "t.toml", None).expect_err("1 kbit/s slower");
            assert!(err.to_string().contains("allowed"), "{err}");
        }
    }

    #[test]
    fn a_guarantee_is_kept_against_heavier_weights_and_a_ceil_caps_a_class() {
        let sent = one_second(RATED);
        let mbit = |b: u64| b as f64 * 8.0 / 1e6;
        let (g, c, r) = (mbit(sent[0]), mbit(sent[1]), mbit(sent[2]));
        // Weight alone would give "guaranteed" 1/111 of the link (< 1 Mbit/s).
        assert!(
            g >= 29.0,
            "guaranteed got {g:.1} Mbit/s of its 30: {sent:?}"
        );
        // Weight 100 alone would give "capped" ~90 Mbit/s.
        assert!(
            (19.0..=20.5).contains(&c),
            "capped got {c:.1} Mbit/s (ceil 20): {sent:?}"
        );
        // The rest is work-conserving: the link stays busy.
        assert!(
            g + c + r >= 99.0,
            "link used {:.1} of 100: {sent:?}",
            g + c + r
        );
        assert_eq!(
            Rate::mbit(100),
            parse(RATED, "t", None).expect("c").link.rate
        );
    }

    /// Every algorithm that takes a class `ceil` builds its plan with one
    /// (`prio` through its own node kind, the others through `hclock`).
    #[test]
    fn every_algorithm_that_takes_a_ceil_builds_one() {
        for alg in ["prio", "drr", "wf2q", "qfq", "rr"] {
            let src = RATED
                .replace("\"drr\"", &format!("\"{alg}\""))
                .replace("rate = \"30mbit\"\n", "");
            let cfg = parse(&src, "t.toml", None).unwrap_or_else(|e| panic!("{alg}: {e}"));
            build::<()>(&cfg).unwrap_or_else(|e| panic!("{alg}: {e}"));
            let policy = class_rates_policy(&cfg).expect("the rate node");
            assert_eq!(policy.nodes().len(), 1, "{alg}");
        }
    }

    /// Under `prio` a ceil caps the first class and strict priority gives
    /// the rest of the link to the next one.
    #[test]
    fn a_prio_class_is_capped_by_its_ceil() {
        let src = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\n\n\
            [scheduler]\nalgorithm = \"prio\"\n\n\
            [[class]]\nname = \"capped\"\nprio = 0\nceil = \"20mbit\"\nmatch = [{ dport = 1 }]\n\n\
            [[class]]\nname = \"low\"\nprio = 1\nmatch = [{ dport = 2 }]\n\n\
            [[class]]\nname = \"lowest\"\nprio = 2\ndefault = true\n";
        let sent = one_second(src);
        let mbit = |b: u64| b as f64 * 8.0 / 1e6;
        let (capped, low, lowest) = (mbit(sent[0]), mbit(sent[1]), mbit(sent[2]));
        assert!(
            (19.0..=20.5).contains(&capped),
            "capped {capped:.1} Mbit/s (ceil 20): {sent:?}"
        );
        assert!(low >= 79.0, "low {low:.1} of the other 80: {sent:?}");
        assert!(lowest < 0.5, "lowest {lowest:.2}: {sent:?}");
    }

    /// Frames of class `capped` (20 Mbit/s ceil) that leave at once after
    /// a second idle, with `extra` added to its settings.
    fn at_once_after_idle(extra: &str) -> usize {
        let src = RATED.replace(
            "ceil = \"20mbit\"\n",
            &format!("ceil = \"20mbit\"\n{extra}"),
        );
        let cfg = parse(&src, "t.toml", None).expect("config");
        let mut plan = build::<()>(&cfg).expect("plan");
        let f = plan.flows[1];
        let t = Nanos(1_000_000_000);
        for _ in 0..30 {
            plan.sched
                .enqueue(Pkt::new(f, 1500, t, ()), t)
                .expect("enqueue");
        }
        std::iter::from_fn(|| plan.sched.dequeue(t)).count()
    }

    #[test]
    fn a_class_s_cburst_is_the_credit_of_its_ceil() {
        // 15 KiB of credit: 10 frames of 1500 bytes ahead of the ceil, plus
        // the one the ceil allows at once; the default is one frame ahead.
        assert_eq!(at_once_after_idle("cburst = \"15k\"\n"), 11);
        assert_eq!(at_once_after_idle(""), 2);
    }

    const BURSTY: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\n\n\
        [[class]]\nname = \"bursty\"\nrate = \"20mbit\"\nburst = BURST\nmatch = [{ dport = 1 }]\n\n\
        [[class]]\nname = \"rest\"\ndefault = true\n";

    /// A class with `rate` and `burst` (its ceil is its rate, with the
    /// burst as credit) next to a greedy class on a 100 Mbit/s link, its
    /// arrivals random on/off: over any interval `t` between two of its
    /// departures it sends at most `rate·t + burst` bytes before the last,
    /// and after idling it sends `burst` bytes as fast as the link goes.
    #[test]
    fn a_class_never_sends_more_than_its_rate_times_t_plus_its_burst() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
        for case in 0..12 {
            let burst = rng.random_range(1..=64u64) * 1000;
            let cfg = parse(&BURSTY.replace("BURST", &burst.to_string()), "t.toml", None)
                .expect("config");
            let mut plan = build::<()>(&cfg).expect("plan");
            let (bursty, rest) = (plan.flows[0], plan.flows[1]);
            let (link, rate) = (cfg.link.rate, Rate::mbit(20));
            let mut now = 0u64;
            let mut sent: Vec<(u64, u64)> = Vec::new();
            while now < 2_000_000_000 {
                let backlog = |p: &Plan<()>, f| p.sched.flow_stats(f).map_or(0, |s| s.backlog.pkts);
                if backlog(&plan, rest) < 4 {
                    let _ = plan
                        .sched
                        .enqueue(Pkt::new(rest, 1500, Nanos(now), ()), Nanos(now));
                }
                if rng.random_range(0..2000) == 0 {
                    // An idle gap, then a burst of arrivals.
                    now += rng.random_range(0..50_000_000);
                    for _ in 0..rng.random_range(1..200) {
                        let len = rng.random_range(64..=1514);
                        let _ = plan
                            .sched
                            .enqueue(Pkt::new(bursty, len, Nanos(now), ()), Nanos(now));
                    }
                }
                match plan.sched.dequeue(Nanos(now)) {
                    Some(p) => {
                        if p.flow == bursty {
                            sent.push((now, u64::from(p.len)));
                        }
                        now += link.tx_time(u64::from(p.len)).0;
                    }
                    None => {
                        now = plan
                            .sched
                            .next_ready(Nanos(now))
                            .map_or(now + 1000, |t| t.0.max(now + 1))
                    }
                }
            }
            assert!(sent.len() > 100, "case {case}: {} sent", sent.len());
            for i in 0..sent.len() {
                let mut bytes = 0u128;
                for j in i + 1..sent.len() {
                    bytes += u128::from(sent[j - 1].1);
                    let t = u128::from(sent[j].0 - sent[i].0);
                    let allowed = u128::from(rate.as_bps()) * t + u128::from(burst) * 8_000_000_000;
                    assert!(
                        bytes * 8_000_000_000 <= allowed,
                        "case {case}: {bytes} bytes in {t} ns before the send at {}, burst {burst}",
                        sent[j].0
                    );
                }
            }
            // The credit is there to use: idle for a second, then 1000-byte
            // frames; the class sends `burst` bytes in the time the link
            // takes for them (and one frame of the other class), where its
            // rate alone would allow a fifth of that.
            let t0 = now + 1_000_000_000;
            for _ in 0..burst / 1000 + 10 {
                plan.sched
                    .enqueue(Pkt::new(bursty, 1000, Nanos(t0), ()), Nanos(t0))
                    .expect("enqueue");
            }
            let _ = plan
                .sched
                .enqueue(Pkt::new(rest, 1500, Nanos(t0), ()), Nanos(t0));
            let within = t0 + link.tx_time(burst + 2 * 1514).0;
            let (mut t, mut early) = (t0, 0u64);
            while t <= within {
                match plan.sched.dequeue(Nanos(t)) {
                    Some(p) => {
                        if p.flow == bursty {
                            early += u64::from(p.len);
                        }
                        t += link.tx_time(u64::from(p.len)).0;
                    }
                    None => break,
                }
            }
            assert!(
                early >= burst,
                "case {case}: {early} bytes at once, burst {burst}"
            );
        }
    }

    #[test]
    fn without_rates_the_flat_algorithm_is_built() {
        let plain = RATED
            .replace("rate = \"30mbit\"\nceil = \"100mbit\"\n", "")
            .replace("ceil = \"20mbit\"\n", "");
        let cfg = parse(&plain, "t.toml", None).expect("config");
        assert_eq!(build::<()>(&cfg).expect("plan").sched.name(), "drr");
        let cfg = parse(RATED, "t.toml", None).expect("config");
        assert_ne!(build::<()>(&cfg).expect("plan").sched.name(), "drr");
    }
}
