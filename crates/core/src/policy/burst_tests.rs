//! Per-flow `burst` (ahead of the reservation) and `cburst` (ahead of the
//! rate limit), HTB-style, on a virtual clock: an idle flow sends its
//! credit at once and then keeps its rate; over any interval it never
//! sends more than `rate·t + cburst` plus the interval's last packet.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::flow::{FlowConfig, FlowId, Pkt};
use crate::sched::{ConfigError, Scheduler};
use crate::units::{Nanos, Rate};

/// One `rr` node; its flows are limited by `set_flow_params`.
fn rr() -> PolicySched<u64> {
    let p = Policy::from_toml("[[node]]\nname = \"root\"\nkind = \"rr\"\n").expect("policy");
    PolicySched::new(&p)
}

fn limited(s: &mut PolicySched<u64>, rate: Rate, cburst: Option<u64>) -> FlowId {
    let f = s
        .add_flow(FlowConfig::default().with_limit(100_000))
        .expect("flow");
    let params = FlowParams {
        rate: Some(rate),
        cburst,
        ..FlowParams::default()
    };
    s.set_flow_params(f, params, Nanos(0)).expect("params");
    f
}

/// Send times of everything queued, dequeuing as early as allowed on an
/// infinitely fast link.
fn drain(s: &mut PolicySched<u64>, mut now: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Some(t) = s.next_ready(Nanos(now)) {
        now = t.0;
        while let Some(p) = s.dequeue(Nanos(now)) {
            out.push((now, u64::from(p.len)));
        }
    }
    out
}

#[test]
fn an_idle_flow_sends_its_cburst_at_once_then_keeps_its_rate() {
    // 12 Mbit/s: a 1500-byte frame every 1 ms (a whole number of shaper units).
    let rate = Rate::mbit(12);
    for (cburst, at_once) in [(Some(15_000), 11), (Some(14_999), 10), (None, 2)] {
        let mut s = rr();
        let f = limited(&mut s, rate, cburst);
        // Idle for a second: the credit is full (and capped).
        let t0 = 1_000_000_000;
        for i in 0..30 {
            s.enqueue(Pkt::new(f, 1500, Nanos(t0), i), Nanos(t0))
                .expect("enqueue");
        }
        let sent = drain(&mut s, t0);
        assert_eq!(sent.len(), 30);
        let first = sent.iter().filter(|&&(t, _)| t == t0).count();
        // cburst bytes ahead of the rate, plus the frame the rate itself
        // allows at once (HTB: a class sends while its tokens are not
        // negative); the default is one maximum frame of credit.
        assert_eq!(first, at_once, "cburst {cburst:?}: {sent:?}");
        // Then at the rate: one frame per millisecond (a credit short of a
        // whole frame sends the next one that much early, rounded up to
        // the shaper's 1 µs unit).
        assert!(sent[at_once].0 - t0 <= 1_000_000, "{sent:?}");
        for w in sent[at_once..].windows(2) {
            assert_eq!(w[1].0 - w[0].0, 1_000_000, "cburst {cburst:?}: {sent:?}");
        }
    }
}

#[test]
fn a_flow_never_sends_more_than_rate_times_t_plus_its_credit_over_any_interval() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    for case in 0..40 {
        let rate = Rate::kbit(rng.random_range(1_000..=1_000_000));
        let cburst = rng.random_range(1..=60_000u64);
        let link = Rate::mbit(rng.random_range(100..=10_000));
        let mut s = rr();
        let f = limited(&mut s, rate, Some(cburst));
        // Random arrivals (bursts and idle gaps) on a link of finite speed.
        let mut now = 0u64;
        let mut sent: Vec<(u64, u64)> = Vec::new();
        for i in 0..600 {
            if rng.random_range(0..4) == 0 {
                now += rng.random_range(0..20_000_000);
            }
            for _ in 0..rng.random_range(0..4) {
                let len = rng.random_range(64..=1514);
                s.enqueue(Pkt::new(f, len, Nanos(now), i), Nanos(now))
                    .expect("enqueue");
            }
            // Serve until nothing is eligible now.
            while let Some(p) = s.dequeue(Nanos(now)) {
                sent.push((now, u64::from(p.len)));
                now += link.tx_time(u64::from(p.len)).0;
            }
            if let Some(t) = s.next_ready(Nanos(now)) {
                now = now.max(t.0.min(now + rng.random_range(0..3_000_000)));
            }
        }
        sent.extend(drain(&mut s, now));
        assert!(sent.len() > 500, "case {case}: only {} sent", sent.len());
        // Every window [i, j]: the bytes before the last send ≤ rate·t +
        // the credit, which is cburst but never less than one maximum
        // packet (the policy's max_len, 1514).
        let credit = cburst.max(1514);
        for i in 0..sent.len() {
            let mut bytes = 0u128;
            for j in i + 1..sent.len() {
                bytes += u128::from(sent[j - 1].1);
                let t = u128::from(sent[j].0 - sent[i].0);
                let allowed = u128::from(rate.as_bps()) * t + u128::from(credit) * 8_000_000_000;
                assert!(
                    bytes * 8_000_000_000 <= allowed,
                    "case {case}: {bytes} bytes before the send at {} in {t} ns at {rate} \
                     with cburst {cburst}",
                    sent[j].0
                );
            }
        }
    }
}

#[test]
fn a_reservation_burst_is_served_ahead_of_heavier_shares() {
    let p = Policy::from_toml("[[node]]\nname = \"root\"\nkind = \"hclock\"\n").expect("policy");
    // At 12 Mbit/s a 1500-byte frame is 1 ms of reservation.
    let rate = Rate::mbit(12);
    let leading = |burst: Option<u64>| {
        let mut s: PolicySched<u64> = PolicySched::new(&p);
        let heavy = s.add_flow(FlowConfig::weight(1000)).expect("heavy");
        let res = s.add_flow(FlowConfig::weight(1)).expect("reserved");
        let params = FlowParams {
            reservation: Some(rate),
            burst,
            ..FlowParams::default()
        };
        s.set_flow_params(res, params, Nanos(0)).expect("params");
        let t0 = Nanos(1_000_000_000);
        for i in 0..20 {
            s.enqueue(Pkt::new(heavy, 1500, t0, i), t0).expect("heavy");
            s.enqueue(Pkt::new(res, 1500, t0, i), t0).expect("reserved");
        }
        // Frames of the reserved flow dequeued at t0 before the first of
        // the heavy one.
        (0..12)
            .map_while(|_| s.dequeue(t0))
            .take_while(|p| p.flow == res)
            .count()
    };
    // Without a burst the reservation is due once at t0, then the heavier
    // share goes first; with 6000 bytes (4 ms at 12 Mbit/s) it is due
    // 1 + 4 times.
    assert_eq!(leading(None), 1);
    assert_eq!(leading(Some(6000)), 5);
}

#[test]
fn a_changed_cburst_takes_effect_with_frames_queued() {
    let rate = Rate::mbit(12);
    let mut s = rr();
    let f = limited(&mut s, rate, None);
    for i in 0..40 {
        s.enqueue(Pkt::new(f, 1500, Nanos(0), i), Nanos(0))
            .expect("enqueue");
    }
    let mut params = s.flow_params(f).expect("params");
    assert_eq!(params.cburst, None);
    params.cburst = Some(9000);
    // Changed while 40 frames are queued: none is lost, and after an idle
    // second the new credit (6 frames + 1) goes out at once.
    s.set_flow_params(f, params, Nanos(0)).expect("change");
    assert_eq!(s.flow_params(f).and_then(|p| p.cburst), Some(9000));
    let first = drain(&mut s, 0);
    assert_eq!(first.len(), 40);
    let t1 = first.last().expect("sent").0 + 1_000_000_000;
    for i in 0..10 {
        s.enqueue(Pkt::new(f, 1500, Nanos(t1), i), Nanos(t1))
            .expect("enqueue");
    }
    let again = drain(&mut s, t1);
    assert_eq!(again.iter().filter(|&&(t, _)| t == t1).count(), 7);
}

#[test]
fn a_burst_above_the_maximum_is_refused_naming_it() {
    let mut s = rr();
    let f = limited(&mut s, Rate::mbit(10), Some(limits::MAX_BURST));
    for field in ["burst", "cburst"] {
        let mut p = s.flow_params(f).expect("params");
        if field == "burst" {
            p.burst = Some(limits::MAX_BURST + 1);
        } else {
            p.cburst = Some(limits::MAX_BURST + 1);
        }
        match s.set_flow_params(f, p, Nanos(0)) {
            Err(ConfigError::OutOfRange {
                field: got, max, ..
            }) => {
                assert_eq!((got, max), (field, limits::MAX_BURST));
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    // The refused change left the flow as it was.
    assert_eq!(
        s.flow_params(f).and_then(|p| p.cburst),
        Some(limits::MAX_BURST)
    );
}
