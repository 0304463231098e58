//! The EDT `CffsShaper` keeps its bound (never early, late by less than one
//! granularity) when its window has moved past `now`: an empty queue jumps
//! to its first entry's half, and entries filed after that below the
//! window must not wait behind later ones.
#![allow(clippy::unwrap_used)]

use pktsched_core::Nanos;
use pktsched_core::shape::{CffsShaper, Entry, TimeQueue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const US: u64 = 1000;

fn entry(edt: u64, flow: u32) -> Entry {
    Entry {
        edt,
        flow,
        generation: 0,
    }
}

/// Releases what is due at `now`, checking every entry against its EDT:
/// never early, in slot order, and nothing due left behind.
fn release(q: &mut CffsShaper, g: u64, now: u64, out: &mut Vec<Entry>) {
    let from = out.len();
    q.release_to(Nanos(now), out);
    for e in &out[from..] {
        assert!(e.edt.div_ceil(g) * g <= now, "{e:?} early at {now}");
    }
    let slots: Vec<u64> = out[from..].iter().map(|e| e.edt.div_ceil(g)).collect();
    assert!(slots.is_sorted(), "out of order at {now}: {slots:?}");
    if let Some(next) = q.next_due() {
        assert!(next.0 > now, "{next:?} still queued at {now}");
    }
}

/// The review's case: 1 µs buckets, 16384 per half; empty at 1,010,000 µs,
/// a first entry at 1,022,304 µs moves the window to 1,015,808 µs. The
/// entries at 1,010,013, 1,010,025 and 1,010,005 µs were clamped to its
/// first bucket and left in filing order (the last 20 µs late).
#[test]
fn entries_below_a_jumped_window_leave_in_their_slot() {
    let mut q = CffsShaper::new(US, Nanos(16_384 * US), CffsShaper::DEFAULT_MAX_MEMORY).unwrap();
    let edts = [
        1_022_304 * US,
        1_010_013 * US,
        1_010_025 * US,
        1_010_005 * US,
    ];
    for (i, &t) in edts.iter().enumerate() {
        q.push(entry(t, i as u32), 0).unwrap();
    }
    assert_eq!(q.len(), 4);
    let mut out = Vec::new();
    for now in (1_010_000..=1_022_304).map(|u| u * US) {
        release(&mut q, US, now, &mut out);
        assert_eq!(
            out.len(),
            edts.iter().filter(|&&t| t <= now).count(),
            "at {now}"
        );
    }
    let flows: Vec<u32> = out.iter().map(|e| e.flow).collect();
    assert_eq!(flows, [3, 1, 2, 0]);
    assert_eq!(q.len(), 0);
}

/// Random filings within the horizon of `now`, idle gaps of up to 100
/// horizons (empty-queue jumps), cancellations, releases at least once
/// per granularity: every entry leaves in its slot, in slot order.
#[test]
fn random_filings_with_idle_gaps_leave_in_their_slot() {
    for seed in 0..20u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let g = rng.random_range(1..50u64);
        let buckets = rng.random_range(2..64u64);
        let horizon = g * buckets;
        let mut q = CffsShaper::new(g, Nanos(horizon), CffsShaper::DEFAULT_MAX_MEMORY).unwrap();
        let mut now = rng.random_range(0..10 * horizon);
        let (mut filed, mut cancelled) = (0u32, 0usize);
        let mut out = Vec::new();
        for _ in 0..3000 {
            if rng.random_bool(0.02) && q.len() == 0 {
                now += rng.random_range(0..100 * horizon);
            }
            for _ in 0..rng.random_range(0..4) {
                let e = entry(now + rng.random_range(0..=horizon), filed);
                let t = q
                    .reserve(e, 0)
                    .unwrap_or_else(|| panic!("seed {seed}: {e:?} refused at {now}"));
                if rng.random_bool(0.05) {
                    q.cancel(t);
                    cancelled += 1;
                } else {
                    q.commit(t);
                }
                filed += 1;
            }
            now += rng.random_range(1..=g);
            release(&mut q, g, now, &mut out);
        }
        while let Some(t) = q.next_due() {
            now = now.max(t.0);
            release(&mut q, g, now, &mut out);
        }
        assert_eq!(out.len() + cancelled, filed as usize, "seed {seed}");
    }
}
