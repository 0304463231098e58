//! An access list of prefix rules, checked one after another for every
//! packet: first match wins, no match permits. The linear scan is the
//! point — `N` rules cost `N` comparisons per packet, so a test or a
//! simulation can make the per-packet processing cost what it wants to
//! study (the CPU as the bottleneck).

use super::lpm::{Key, RouteError};

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Let the packet through.
    Permit,
    /// Drop it (counted as `AclDenied`).
    Deny,
}

/// A prefix of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix {
    /// An IPv4 prefix.
    V4(u32, u8),
    /// An IPv6 prefix.
    V6(u128, u8),
}

impl Prefix {
    fn check(self) -> Result<Self, RouteError> {
        fn one<K: Key>(p: K, len: u8) -> Result<(), RouteError> {
            if len > K::BITS {
                return Err(RouteError::Length { len, max: K::BITS });
            }
            if p.masked(len) != p {
                return Err(RouteError::HostBits {
                    prefix: format!("{p:?}"),
                    len,
                    canonical: format!("{:?}", p.masked(len)),
                });
            }
            Ok(())
        }
        match self {
            Prefix::V4(p, l) => one(p, l)?,
            Prefix::V6(p, l) => one(p, l)?,
        }
        Ok(self)
    }

    /// Whether `addr` is inside (families must agree).
    pub fn contains(self, addr: Addr) -> bool {
        match (self, addr) {
            (Prefix::V4(p, l), Addr::V4(a)) => a.masked(l) == p,
            (Prefix::V6(p, l), Addr::V6(a)) => a.masked(l) == p,
            _ => false,
        }
    }
}

/// An address of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addr {
    /// IPv4.
    V4(u32),
    /// IPv6.
    V6(u128),
}

/// One rule: source and destination prefixes (`None` matches anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Source prefix.
    pub src: Option<Prefix>,
    /// Destination prefix.
    pub dst: Option<Prefix>,
    /// What a match does.
    pub action: Action,
}

/// Most rules an access list holds.
pub const MAX_RULES: usize = 1 << 20;

/// The access list.
#[derive(Debug, Clone, Default)]
pub struct Acl {
    rules: Vec<Rule>,
}

impl Acl {
    /// An empty list (permits everything).
    pub fn new() -> Acl {
        Acl::default()
    }

    /// Appends a rule; prefixes must be canonical.
    pub fn push(&mut self, rule: Rule) -> Result<(), AclError> {
        if self.rules.len() >= MAX_RULES {
            return Err(AclError::Full(MAX_RULES));
        }
        rule.src.map(Prefix::check).transpose()?;
        rule.dst.map(Prefix::check).transpose()?;
        self.rules.push(rule);
        Ok(())
    }

    /// Rules in the list.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the list has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The verdict for a packet and how many rules were checked.
    pub fn check(&self, src: Addr, dst: Addr) -> (Action, usize) {
        for (i, r) in self.rules.iter().enumerate() {
            let m = |p: Option<Prefix>, a| p.is_none_or(|p| p.contains(a));
            if m(r.src, src) && m(r.dst, dst) {
                return (r.action, i + 1);
            }
        }
        (Action::Permit, self.rules.len())
    }
}

/// Why a rule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// A prefix is wrong.
    #[error("access list rule: {0}")]
    Prefix(#[from] RouteError),
    /// Too many rules.
    #[error("access list full: at most {0} rules")]
    Full(usize),
}
