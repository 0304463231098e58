//! Ingress polling configuration: the strategy, the classes, the per-ring
//! budgets and the device budget, validated into a [`RingPlan`].

use std::fmt;
use std::str::FromStr;

/// Largest number of traffic classes (and so of receive rings).
pub const MAX_CLASSES: usize = 64;
/// Default device budget: packets one poll round may take (NAPI's 64).
pub const DEFAULT_DEVICE_BUDGET: u32 = 64;
/// Largest device budget accepted.
pub const MAX_DEVICE_BUDGET: u32 = 65_536;

/// How classes are mapped to receive rings and how the rings are polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// One ring for every class, served first in, first out with the
    /// whole device budget.
    Sq,
    /// One ring (one device) per class; each poll round serves one ring
    /// with the whole device budget, rings in round robin.
    Rr,
    /// One ring per class, all with the same small budget, visited in
    /// turn within a round (low-latency round robin).
    LlRr,
    /// One ring per class, budgets by priority (e.g. RT 60, BE 4).
    LlWfq,
}

impl Strategy {
    /// Every strategy, in the order the sweep reports them.
    pub const ALL: [Strategy; 4] = [Strategy::Sq, Strategy::Rr, Strategy::LlRr, Strategy::LlWfq];

    /// The name used on command lines and in output.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Sq => "sq",
            Strategy::Rr => "rr",
            Strategy::LlRr => "ll-rr",
            Strategy::LlWfq => "ll-wfq",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = IngressError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| IngressError::UnknownStrategy(s.to_string()))
    }
}

/// What is wrong with an ingress configuration (or a strategy name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngressError {
    /// Unknown strategy name.
    #[error("unknown ingress strategy `{0}`; allowed: sq, rr, ll-rr, ll-wfq")]
    UnknownStrategy(String),
    /// Class count out of range.
    #[error("classes = {0}: allowed 1..={MAX_CLASSES}")]
    Classes(usize),
    /// Device budget out of range.
    #[error("device_budget = {0}: allowed 1..={MAX_DEVICE_BUDGET}")]
    DeviceBudget(u32),
    /// One ring budget out of range.
    #[error("budget of class {class} = {value}: allowed 1..={device_budget} (the device budget)")]
    Budget {
        /// The class (= ring) index.
        class: usize,
        /// The budget given.
        value: u32,
        /// The device budget, the largest ring budget allowed.
        device_budget: u32,
    },
    /// Wrong number of budgets for the strategy.
    #[error("{strategy} takes {allowed} budget(s) for {classes} classes, got {given}")]
    BudgetCount {
        /// The strategy.
        strategy: Strategy,
        /// How many budgets were given.
        given: usize,
        /// The class count.
        classes: usize,
        /// What is allowed, in words.
        allowed: &'static str,
    },
    /// LL-RR budgets that differ.
    #[error(
        "ll-rr gives every ring the same budget; class {class} has {value}, class 0 has {first} (use ll-wfq for unequal budgets)"
    )]
    UnequalBudgets {
        /// The first class whose budget differs.
        class: usize,
        /// Its budget.
        value: u32,
        /// Class 0's budget.
        first: u32,
    },
}

/// An ingress polling configuration as written by a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressConfig {
    /// The strategy.
    pub strategy: Strategy,
    /// Number of traffic classes; class 0 is the most urgent (RT).
    pub classes: usize,
    /// Per-class ring budgets: none for SQ and RR (they use the device
    /// budget), one (or one per class, all equal) for LL-RR, one per
    /// class for LL-WFQ.
    pub budgets: Vec<u32>,
    /// Packets one poll round may take in total.
    pub device_budget: u32,
}

impl IngressConfig {
    /// SQ with `classes` classes and the default device budget.
    pub fn sq(classes: usize) -> Self {
        Self::new(Strategy::Sq, classes, Vec::new())
    }
    /// RR with `classes` classes and the default device budget.
    pub fn rr(classes: usize) -> Self {
        Self::new(Strategy::Rr, classes, Vec::new())
    }
    /// LL-RR: `classes` rings of `budget` packets each.
    pub fn ll_rr(classes: usize, budget: u32) -> Self {
        Self::new(Strategy::LlRr, classes, vec![budget])
    }
    /// LL-WFQ: one ring per budget, class `i` with `budgets[i]`.
    pub fn ll_wfq(budgets: &[u32]) -> Self {
        Self::new(Strategy::LlWfq, budgets.len(), budgets.to_vec())
    }
    fn new(strategy: Strategy, classes: usize, budgets: Vec<u32>) -> Self {
        IngressConfig {
            strategy,
            classes,
            budgets,
            device_budget: DEFAULT_DEVICE_BUDGET,
        }
    }
    /// The same with another device budget.
    pub fn with_device_budget(mut self, device_budget: u32) -> Self {
        self.device_budget = device_budget;
        self
    }

    /// Checks every field and resolves the rings and their budgets.
    pub fn plan(&self) -> Result<RingPlan, IngressError> {
        if self.classes == 0 || self.classes > MAX_CLASSES {
            return Err(IngressError::Classes(self.classes));
        }
        let d = self.device_budget;
        if d == 0 || d > MAX_DEVICE_BUDGET {
            return Err(IngressError::DeviceBudget(d));
        }
        let count_err = |allowed| IngressError::BudgetCount {
            strategy: self.strategy,
            given: self.budgets.len(),
            classes: self.classes,
            allowed,
        };
        let n = self.classes;
        let (budgets, one_ring_per_round) = match self.strategy {
            Strategy::Sq | Strategy::Rr if !self.budgets.is_empty() => {
                return Err(count_err("no (they poll with the device budget)"));
            }
            Strategy::Sq => (vec![d], false),
            Strategy::Rr => (vec![d; n], true),
            Strategy::LlRr => {
                if self.budgets.len() != 1 && self.budgets.len() != n {
                    return Err(count_err("one (or one per class, all equal)"));
                }
                let first = self.budgets[0];
                if let Some((class, &value)) =
                    self.budgets.iter().enumerate().find(|(_, b)| **b != first)
                {
                    return Err(IngressError::UnequalBudgets {
                        class,
                        value,
                        first,
                    });
                }
                (vec![first; n], false)
            }
            Strategy::LlWfq => {
                if self.budgets.len() != n {
                    return Err(count_err("one per class"));
                }
                (self.budgets.clone(), false)
            }
        };
        if let Some((class, &value)) = budgets
            .iter()
            .enumerate()
            .find(|(_, b)| **b == 0 || **b > d)
        {
            return Err(IngressError::Budget {
                class,
                value,
                device_budget: d,
            });
        }
        Ok(RingPlan {
            strategy: self.strategy,
            classes: n,
            budgets,
            device_budget: d,
            one_ring_per_round,
        })
    }
}

/// A validated configuration: the rings, their budgets and the round rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingPlan {
    strategy: Strategy,
    classes: usize,
    budgets: Vec<u32>,
    device_budget: u32,
    one_ring_per_round: bool,
}

impl RingPlan {
    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }
    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }
    /// Number of receive rings (1 for SQ, one per class otherwise).
    pub fn rings(&self) -> usize {
        self.budgets.len()
    }
    /// The ring a class's packets go to.
    pub fn ring_of(&self, class: usize) -> usize {
        if self.budgets.len() == 1 {
            0
        } else {
            class.min(self.budgets.len() - 1)
        }
    }
    /// Ring `ring`'s budget: the most one visit takes.
    pub fn budget(&self, ring: usize) -> u32 {
        self.budgets[ring]
    }
    /// Every ring's budget.
    pub fn budgets(&self) -> &[u32] {
        &self.budgets
    }
    /// The device budget: the most one round takes.
    pub fn device_budget(&self) -> u32 {
        self.device_budget
    }
    /// Whether a round visits one ring only (RR: one device per class).
    pub fn one_ring_per_round(&self) -> bool {
        self.one_ring_per_round
    }
    /// Packets the poller may serve from rings other than `ring` between
    /// two visits of `ring`: the `b` of the latency bound (each other
    /// ring's budget, capped by the device budget, once).
    pub fn others_per_cycle(&self, ring: usize) -> u64 {
        let d = u64::from(self.device_budget);
        (0..self.rings())
            .filter(|&r| r != ring)
            .map(|r| u64::from(self.budgets[r]).min(d))
            .sum()
    }
}
