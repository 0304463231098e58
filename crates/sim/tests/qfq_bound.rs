//! The QFQ bound (`metrics`, "The QFQ bound"; ARCHITECTURE.md, "The QFQ bound"): the
//! jumbo-frame scenarios exceed PSPAT's eq. (2), which the simulator used to
//! check, and stay within the QFQ paper's `(3·σ_k + 2·L)/R`.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use pktsched_sim::metrics::{qfq_pspat_eq2_ps, qfq_slot_bytes, qfq_twfi_ps};

fn load(name: &str) -> pktsched_sim::SimConfig {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/scenarios")
        .join(name);
    pktsched_sim::scenario::load(&p).unwrap()
}

/// Runs `name` and checks its first flow (the 64-byte flow of weight
/// 1000): measured T-WFI above eq. (2), within the QFQ bound (which is the
/// bound the report checks). Returns (measured, eq. (2), bound) in ns.
fn jumbo(name: &str, jumbo: u32) -> (f64, f64, f64) {
    let c = load(name);
    let rep = pktsched_sim::run(&c).unwrap();
    assert!(rep.accounting.conserved, "{}", rep.table());
    assert!(rep.violations.is_empty(), "{}", rep.table());
    let bps = c.rate.as_bps();
    let wsum: u64 = c.flows.iter().map(|f| u64::from(f.weight)).sum();
    let l = c.flows.iter().map(|f| f.size.max()).max().unwrap();
    let f0 = &c.flows[0];
    assert_eq!((f0.weight, f0.size.max(), wsum, l), (1000, 64, 4001, jumbo));
    // eq. (2) computed here from its definition: 6·L_k/(φ_k·R) + (L − L_k)/R.
    let ns_per_byte = 8e9 / bps as f64;
    let phi = f64::from(f0.weight) / wsum as f64;
    let eq2 = (6.0 * 64.0 / phi + f64::from(l - 64)) * ns_per_byte;
    assert!((eq2 - qfq_pspat_eq2_ps(1000, 64, wsum, l, bps) / 1e3).abs() < 1e-6);
    // The QFQ bound with the exact slot of the flow's group: 64·⌊2^31/1000⌋
    // lies in (2^27, 2^28], so σ = 2^-3·Σw = 500.125 bytes (L_k/φ_k =
    // 256.06; the estimate 2·L_k/φ_k = 512.1 is looser).
    let sigma = qfq_slot_bytes(1000, 64, wsum);
    assert_eq!(sigma, 500.125);
    let bound = (3.0 * sigma + 2.0 * f64::from(l)) * ns_per_byte;
    assert!((bound - qfq_twfi_ps(1000, 64, wsum, l, bps) / 1e3).abs() < 1e-6);
    let f = &rep.flows[0];
    let m = f.twfi_ns.unwrap();
    let checked = f.twfi_bound_ns.unwrap();
    assert!(
        (checked - bound).abs() < 1e-6,
        "the report checks {checked}"
    );
    assert!(m > eq2, "{name}: T-WFI {m} ns is within eq. (2) {eq2} ns");
    assert!(
        m <= bound,
        "{name}: T-WFI {m} ns exceeds the bound {bound} ns"
    );
    // Every flow is within its bound (the report checked it too).
    for fr in &rep.flows {
        if let (Some(m), Some(b)) = (fr.twfi_ns, fr.twfi_bound_ns) {
            assert!(m <= b * (1.0 + pktsched_sim::metrics::REL_TOL) + 2.0);
        }
    }
    println!(
        "{name}: T-WFI {m:.3} ns, eq. (2) {eq2:.3} ns ({:.3}), QFQ bound {bound:.3} ns ({:.3})",
        m / eq2,
        m / bound
    );
    (m, eq2, bound)
}

#[test]
fn jumbo_9000_exceeds_eq2_within_the_qfq_bound() {
    let (m, eq2, bound) = jumbo("qfq-jumbo.toml", 9000);
    // Pinned so that a change of behaviour shows: 9.965 us, 1.19 × eq. (2).
    assert!((m - 9964.748).abs() < 1.0, "{m}");
    assert!((eq2 - 8377.907).abs() < 0.01 && (bound - 15600.3).abs() < 0.01);
}

#[test]
fn jumbo_64k_exceeds_eq2_within_the_qfq_bound() {
    let (m, eq2, bound) = jumbo("qfq-jumbo-64k.toml", 65536);
    // 88.986 us, 1.66 × eq. (2): more than one jumbo frame (52.4 us).
    assert!((m - 88985.548).abs() < 1.0, "{m}");
    assert!((eq2 - 53606.707).abs() < 0.01 && (bound - 106057.9).abs() < 0.01);
    assert!(m > 65536.0 * 0.8 * 1.5);
}

/// The tightest case found by the random workloads
/// (`properties::qfq_stays_within_its_bound_with_jumbo_frames`): a 64-byte
/// flow of weight 65536 (φ ≈ 1) next to three greedy 64 KiB flows of
/// weight 3. The small flow, served slightly ahead of its virtual time, is
/// ineligible when a jumbo frame ends, so a second one goes first: it waits
/// for almost 2·L (104.704 us, 2·L/R = 104.858 us), 1.99 × eq. (2) and 0.997
/// of the QFQ bound (σ_k = 2^-10·Σw = 64.009 bytes). The `2·L` term is
/// needed and tight.
#[test]
fn two_jumbo_frames_reach_the_2l_term() {
    let src = r#"
link = "10gbit"
algorithm = "qfq"
duration = "2ms"
[[flows]]
weight = 65536
size = 64
source = { type = "cbr", rate = "5gbit" }
[[flows]]
count = 3
weight = 3
size = 65536
"#;
    let c = pktsched_sim::scenario::parse(src, "two-jumbo.toml", None).unwrap();
    let rep = pktsched_sim::run(&c).unwrap();
    assert!(rep.violations.is_empty(), "{}", rep.table());
    let bps = c.rate.as_bps();
    let m = rep.flows[0].twfi_ns.unwrap();
    let eq2 = qfq_pspat_eq2_ps(65536, 64, 65545, 65536, bps) / 1e3;
    let bound = qfq_twfi_ps(65536, 64, 65545, 65536, bps) / 1e3;
    assert_eq!(qfq_slot_bytes(65536, 64, 65545), 65545.0 / 1024.0);
    assert!((m - 104_703.985).abs() < 1.0, "{}", rep.table());
    assert!(m > 1.98 * eq2 && m <= bound && m > 0.99 * bound);
}
