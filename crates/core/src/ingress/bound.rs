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
//! Let `c_n` be the start of the `n`-th RT visit, `C_n = c_{n+1} − c_n`
//! the cycle, `u_n` the RT packets that visit takes and `V_n ≤ b·x` the
//! time spent on the other rings before the next RT visit, so
//! `C_n = u_n·x + V_n`.
//!
//! *Cycles.* Visit `n` takes the RT packets that arrived in
//! `(c_{n−1}, c_n]` (A2), at most `1 + ρC_{n−1}/x` (A1), so
//! `C_n ≤ (b+1)x + ρC_{n−1}`; the first cycle after an idle poller is
//! shorter than `(b+1)x/(1−ρ)`, so by induction `C_n ≤ C* = (b+1)x/(1−ρ)`
//! (needs `ρ < 1`), and no visit takes more than `1 + ρ(b+1)/(1−ρ)`.
//!
//! *Wait.* An RT packet arriving at `a ∈ (c_n, c_{n+1}]` is served in
//! visit `n+1`, after the `v` RT packets that arrived in `(c_n, a]`
//! before it. Apply (A1) once to `(c_{n−1}, a]`, the packet itself being
//! the `1`: `u_n + v ≤ ρ(C_{n−1} + a − c_n)/x`. Its wait is
//! `c_{n+1} + v·x − a = u_n·x + V_n + v·x − (a − c_n)
//! ≤ b·x + ρC_{n−1} − (1−ρ)(a − c_n) ≤ b·x + ρC*`:
//!
//! ```text
//!   wait ≤ b·x + ρ(b+1)x/(1−ρ) = (b+ρ)·x/(1−ρ)     response ≤ wait + x
//! ```
//!
//! This is the form `T_max = b·x/(1−ρ)` plus `ρx/(1−ρ)`: the extra term
//! is the RT packet the envelope allows just before the tagged one, in
//! the RT visit that began just before it arrived (the poller finishes
//! the current RT batch, then serves `b` others). The proof does not
//! show the extra term is reached; the simulations (crates/sim
//! tests/ingress.rs) stay below both. An RT packet that finds the RT
//! ring empty while the poller serves other rings waits at most `b·x`,
//! one budget of the others. The inverse uses the bound proved here:
//! `(b+ρ)/(1−ρ) ≤ m`, i.e. `b ≤ m(1−ρ) − ρ`.

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
        "no best-effort budget meets a wait of {m} x at rho_rt = {rho}: b = 1 needs m >= {need:.3} ((1 + rho_rt)/(1 - rho_rt))"
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
    /// The bound on an RT packet's wait, `(b+ρ)x/(1−ρ)`, ps.
    pub wait_ps: f64,
    /// The wait plus its own service, ps.
    pub response_ps: f64,
    /// `b·x/(1−ρ)`, the published form (smaller by `ρx/(1−ρ)`), ps.
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
    let wait_ps = (b as f64 + rho) * x / free;
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

/// The largest `b` whose wait bound is at most `m·x`: `⌊m(1−ρ) − ρ⌋`.
pub fn largest_b(m: f64, rho: f64) -> Result<u64, BoundError> {
    check_rho(rho)?;
    if !(m.is_finite() && m > 0.0) {
        return Err(BoundError::M(m));
    }
    // A relative slack so that a product that is a whole number in exact
    // arithmetic is not floored to the one below.
    let v = m * (1.0 - rho) - rho;
    let b = (v + 1e-9 * m.max(1.0)).floor();
    if b < 1.0 {
        return Err(BoundError::Unreachable {
            m,
            rho,
            need: (1.0 + rho) / (1.0 - rho),
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

/// The published rule `b ≤ m(1−ρ)` (for comparison).
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
