//! The real-time (RT) latency bound of a cyclic ring poller, and its
//! inverse (the largest best-effort budget for a latency target).
//!
//! Notation: `x` is the longest time the poller spends on one packet
//! (receive, classify, forward — everything per packet); `ρ` is the RT
//! load, RT packets per second × `x`; `b` is the packets the poller may
//! take from the other rings between two visits of the RT ring (the sum
//! of their budgets, [`RingPlan::others_per_cycle`](super::RingPlan::others_per_cycle)).
//!
//! # Derivation
//!
//! Assume (A1) the RT arrivals obey a `(1 packet, ρ/x)` envelope: at most
//! `1 + ρ·τ/x` of them in any interval of length `τ` (periodic arrivals
//! do; Poisson arrivals do not, and then no bound in terms of `ρ` alone
//! exists); (A2) every RT visit takes everything waiting there (the RT
//! budget is at least `1 + ρ(b+1)/(1−ρ)`, see [`Bound::min_rt_budget`],
//! and the budgets sum to at most the device budget, so no visit is cut
//! short by the round); (A3) a visit of an empty ring costs no time.
//!
//! Let `c_n` be the start of the `n`-th RT visit and `C_n = c_{n+1} − c_n`
//! the cycle. The visit at `c_{n+1}` serves the RT packets that arrived
//! in `(c_n, c_{n+1}]` (A2), at most `1 + ρC_n/x` of them (A1), so it
//! lasts at most `x + ρC_n`; the other rings then take at most `b·x`.
//! Hence `C_{n+1} ≤ (b+1)x + ρC_n`, and since the first cycle after an
//! idle poller is shorter than that, `C_n ≤ C* = (b+1)x/(1−ρ)` for all
//! `n` (needs `ρ < 1`). An RT packet arriving at `a ∈ (c_n, c_{n+1}]`
//! is served at `c_{n+1}` after the RT packets that arrived in
//! `(c_n, a]` before it, at most `ρ(a − c_n)/x` of them, so its waiting
//! time is at most `c_{n+1} − a + ρ(a−c_n) = C_n − (1−ρ)(a−c_n) ≤ C*`:
//!
//! ```text
//!   wait ≤ (b+1)·x/(1−ρ)        response (wait + own service) ≤ wait + x
//! ```
//!
//! The form `T_max = b·x/(1−ρ)` misses the `+1`: a packet arriving just
//! after an RT visit began waits for that visit (which may hold an RT
//! packet that arrived just before it) and then the `b` others; with
//! `ρ → 0` that is `(b+1)·x`, not `b·x`. `b·x/(1−ρ)` bounds the wait when
//! the poller is not serving the RT ring at the arrival; and an RT packet
//! that finds the RT ring empty while the poller serves other rings
//! waits at most `b·x`, one budget of the others. The inverse here uses
//! the bound that holds: `(b+1)/(1−ρ) ≤ m`, i.e. `b ≤ m(1−ρ) − 1`.

use std::fmt;

/// What is wrong with the inputs of the bound.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BoundError {
    /// `ρ` out of range.
    #[error("rho_rt = {0}: allowed 0 <= rho_rt < 1 (an RT ring loaded to 1 or more has no bound)")]
    Rho(f64),
    /// `x` zero.
    #[error("x = 0: the per-packet service time must be positive")]
    ZeroX,
    /// `b` out of range.
    #[error("b = {0}: allowed 1..={max}", max = MAX_B)]
    B(u64),
    /// The target `m` out of range or not finite.
    #[error("m = {0}: allowed a finite number > 0 (the target wait in units of x)")]
    M(f64),
    /// No budget of at least 1 meets the target.
    #[error(
        "no best-effort budget meets a wait of {m} x at rho_rt = {rho}: b = 1 needs m >= {need} (2/(1 - rho_rt))"
    )]
    Unreachable {
        /// The target.
        m: f64,
        /// The RT load.
        rho: f64,
        /// The smallest target `b = 1` meets.
        need: f64,
    },
}

/// Largest `b` accepted (and returned by the inverse).
pub const MAX_B: u64 = 1 << 32;

/// The bound for one `(b, x, ρ)`; times in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// Packets served from the other rings per cycle.
    pub b: u64,
    /// Per-packet service time, ps.
    pub x_ps: u64,
    /// RT load.
    pub rho: f64,
    /// The bound on an RT packet's wait, `(b+1)x/(1−ρ)`, ps.
    pub wait_ps: f64,
    /// The wait plus its own service, ps.
    pub response_ps: f64,
    /// `b·x/(1−ρ)`, the form without the `+1`, ps (holds only when the
    /// poller is not serving the RT ring at the arrival).
    pub paper_wait_ps: f64,
    /// The smallest RT budget for which (A2) holds, `⌈1 + ρ(b+1)/(1−ρ)⌉`.
    pub min_rt_budget: u64,
}

fn check_rho(rho: f64) -> Result<(), BoundError> {
    if (0.0..1.0).contains(&rho) {
        Ok(())
    } else {
        Err(BoundError::Rho(rho))
    }
}

/// The bound for `b` other-ring packets per cycle, service time `x_ps`,
/// RT load `rho`.
pub fn bound(b: u64, x_ps: u64, rho: f64) -> Result<Bound, BoundError> {
    check_rho(rho)?;
    if x_ps == 0 {
        return Err(BoundError::ZeroX);
    }
    if b == 0 || b > MAX_B {
        return Err(BoundError::B(b));
    }
    let x = x_ps as f64;
    let free = 1.0 - rho;
    let wait_ps = (b as f64 + 1.0) * x / free;
    Ok(Bound {
        b,
        x_ps,
        rho,
        wait_ps,
        response_ps: wait_ps + x,
        paper_wait_ps: b as f64 * x / free,
        min_rt_budget: (1.0 + rho * (b as f64 + 1.0) / free - 1e-9).ceil() as u64,
    })
}

/// The largest `b` whose wait bound is at most `m·x`: `⌊m(1−ρ) − 1⌋`.
pub fn largest_b(m: f64, rho: f64) -> Result<u64, BoundError> {
    check_rho(rho)?;
    if !(m.is_finite() && m > 0.0) {
        return Err(BoundError::M(m));
    }
    // A relative slack so that e.g. m = 10, ρ = 0.3 gives 6, not 5.99…→5.
    let v = m * (1.0 - rho) - 1.0;
    let b = (v + 1e-9 * m.max(1.0)).floor();
    if b < 1.0 {
        return Err(BoundError::Unreachable {
            m,
            rho,
            need: 2.0 / (1.0 - rho),
        });
    }
    Ok((b as u64).min(MAX_B))
}

/// The largest `b` whose wait bound is at most `target_ps`.
pub fn largest_b_for_target(target_ps: u64, x_ps: u64, rho: f64) -> Result<u64, BoundError> {
    if x_ps == 0 {
        return Err(BoundError::ZeroX);
    }
    largest_b(target_ps as f64 / x_ps as f64, rho)
}

/// The `b ≤ m(1−ρ)` rule without the `+1` (for comparison).
pub fn paper_largest_b(m: f64, rho: f64) -> Result<u64, BoundError> {
    check_rho(rho)?;
    if !(m.is_finite() && m > 0.0) {
        return Err(BoundError::M(m));
    }
    Ok(((m * (1.0 - rho) + 1e-9 * m.max(1.0)).floor() as u64).min(MAX_B))
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "b = {}, x = {} ps, rho_rt = {}: wait <= {:.0} ps, response <= {:.0} ps",
            self.b, self.x_ps, self.rho, self.wait_ps, self.response_ps
        )
    }
}
