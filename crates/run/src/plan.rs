//! From a checked config to what the pipeline runs: the scheduler with one
//! flow per class, and the classifier that maps a frame to its class. Pure
//! (no I/O), so it is tested without interfaces.

use pktsched_core::policy::PolicySched;
use pktsched_core::{FlowConfig, FlowId, SchedParams};
use pktsched_io::classify::{Classifier, Rule};
use pktsched_runtime::BoxedScheduler;

use crate::config::{ClassConfig, LinkConfig, RunConfig, SchedulerChoice};

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

/// The flow settings of a class on this link: lengths are wire lengths.
pub fn flow_config(link: &LinkConfig, class: &ClassConfig) -> FlowConfig {
    FlowConfig {
        weight: class.weight,
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

/// An empty scheduler for the config's `[scheduler]`.
pub fn empty_scheduler<T: Send + 'static>(cfg: &RunConfig) -> BoxedScheduler<T> {
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

/// Adds class `class`'s flow to `sched`.
pub fn add_class<T: Send + 'static>(
    sched: &mut BoxedScheduler<T>,
    cfg: &RunConfig,
    class: &ClassConfig,
) -> Result<FlowId, PlanError> {
    let fc = flow_config(&cfg.link, class);
    let added = match (&cfg.scheduler, &class.node) {
        (SchedulerChoice::Policy { policy, .. }, Some(node)) => match policy.node(node) {
            Some(idx) => sched.add_flow_at(idx, fc).map_err(|e| e.to_string()),
            None => Err(format!("node {node:?} is not in the policy")),
        },
        _ => sched.add_flow(fc).map_err(|e| e.to_string()),
    };
    added.map_err(|msg| PlanError::Class {
        class: class.name.clone(),
        msg,
    })
}

/// Builds the scheduler with every class and the classifier.
pub fn build<T: Send + 'static>(cfg: &RunConfig) -> Result<Plan<T>, PlanError> {
    let classifier = classifier(cfg)?;
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
