//! The egress policy on a virtual clock: the link rate is kept within one
//! frame and never exceeded (no frame leaves before the link has finished
//! the one before), weights share the rate, a class's `ceil` caps it,
//! limits drop with the reason, and the forwarding worker keeps every
//! class conserved with frames waiting in the egress.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pktsched_core::{DropReason, Nanos, Rate};
use pktsched_io::{BufPool, PacketBuf};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::parse;
use super::egress::{Egress, Released};

const HEAD: &str = "[router]\ningress = \"a0\"\negress = \"a1\"\n\
    [[class]]\nname = \"rt\"\nmatch = [{ dport = 5000 }]\n\
    [[class]]\nname = \"be\"\n\
    [[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"a1\"\n";

fn egress(table: &str) -> Egress {
    let cfg = parse(&format!("{HEAD}{table}"), "r.toml").expect("config");
    Egress::new(cfg.egress.as_ref().expect("[egress]")).expect("egress")
}

fn pool(n: usize) -> &'static BufPool {
    Box::leak(Box::new(BufPool::new(n, 2048).expect("pool")))
}

fn frame(pool: &BufPool, len: usize) -> PacketBuf {
    let mut b = pool.get().expect("a free buffer");
    b.set_len(len);
    b
}

/// A backlog of 1000-byte frames (1024 on the wire) at 10 Mbit/s, the
/// clock advancing by seeded random steps: the k-th frame leaves no
/// earlier than k transmission times after the first and at most one
/// step later.
#[test]
fn the_link_rate_is_kept_and_no_frame_leaves_early() {
    let p = pool(600);
    let mut e = egress("[egress]\nrate = \"10mbit\"\noverhead = 24\nalgorithm = \"fifo\"\n");
    for _ in 0..500 {
        e.enqueue(1, frame(p, 1000), 0, Nanos(0)).expect("queued");
    }
    let tx_ps = Rate::mbit(10).tx_time_ps(1024);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let (mut now, mut before, mut k, mut out) = (0u64, None, 0u128, Vec::new());
    while k < 500 {
        e.release(Nanos(now), &mut out);
        for r in out.drain(..) {
            let earliest_ps = k * tx_ps;
            assert!(
                u128::from(now) * 1000 >= earliest_ps,
                "frame {k} early at {now}"
            );
            if let Some(b) = before {
                // Not released at the look before: it was not due then.
                assert!(
                    u128::from(b) * 1000 < earliest_ps + 1000,
                    "frame {k} late at {now}"
                );
            }
            p.put(r.buf);
            k += 1;
        }
        before = Some(now);
        now += rng.random_range(1..200_000u64);
    }
    let snap = e.snapshot(&["rt".into(), "be".into()]);
    assert_eq!(snap.classes[1].sent_packets, 500);
    assert_eq!(snap.classes[1].sent_bytes, 500 * 1024, "wire bytes");
    assert!(
        snap.overlimits > 400,
        "the link held the backlog back: {snap:?}"
    );
}

/// Both classes backlogged for one virtual second: bytes sent follow the
/// weights 3 : 1, and the total is the link's rate within one frame.
#[test]
fn weights_share_the_rate() {
    let p = pool(512);
    let mut e = egress(
        "[egress]\nrate = \"20mbit\"\nalgorithm = \"drr\"\n\
         [[egress.class]]\nname = \"rt\"\nweight = 3\n\
         [[egress.class]]\nname = \"be\"\nweight = 1\n",
    );
    let (mut sent, mut out, mut now) = ([0u64; 2], Vec::new(), 0u64);
    let mut queued = [0u32; 2];
    while now <= 1_000_000_000 {
        for (c, q) in queued.iter_mut().enumerate() {
            while *q < 64 {
                e.enqueue(c, frame(p, 1500), now, Nanos(now))
                    .expect("queued");
                *q += 1;
            }
        }
        e.release(Nanos(now), &mut out);
        for r in out.drain(..) {
            sent[r.class] += r.buf.len() as u64;
            queued[r.class] -= 1;
            p.put(r.buf);
        }
        now = e.next_due(Nanos(now)).expect("backlogged").0.max(now + 1);
    }
    let total = sent[0] + sent[1];
    let link = Rate::mbit(20).bytes_in(Nanos(1_000_000_000));
    assert!(total.abs_diff(link) <= 1500, "total {total} vs {link}");
    let share = sent[0] as f64 / total as f64;
    assert!((share - 0.75).abs() < 0.01, "rt share {share}: {sent:?}");
}

/// A class's `ceil` caps it below the link even when alone.
#[test]
fn a_class_ceil_caps_it() {
    let p = pool(512);
    let mut e =
        egress("[egress]\nrate = \"20mbit\"\n[[egress.class]]\nname = \"be\"\nceil = \"5mbit\"\n");
    let (mut sent, mut out, mut now, mut queued) = (0u64, Vec::new(), 0u64, 0);
    while now <= 1_000_000_000 {
        while queued < 64 {
            e.enqueue(1, frame(p, 1500), now, Nanos(now))
                .expect("queued");
            queued += 1;
        }
        e.release(Nanos(now), &mut out);
        for r in out.drain(..) {
            sent += r.buf.len() as u64;
            queued -= 1;
            p.put(r.buf);
        }
        now = e.next_due(Nanos(now)).expect("backlogged").0.max(now + 1);
    }
    let cap = Rate::mbit(5).bytes_in(Nanos(1_000_000_000));
    assert!(sent.abs_diff(cap) <= 2 * 1500, "sent {sent} vs ceil {cap}");
}

#[test]
fn a_full_class_queue_refuses_with_queue_full_and_the_backlog_is_counted() {
    let p = pool(16);
    let mut e = egress("[egress]\nrate = \"1mbit\"\n[[egress.class]]\nname = \"rt\"\nlimit = 4\n");
    let mut refused = 0;
    for _ in 0..6 {
        if let Err((buf, why)) = e.enqueue(0, frame(p, 100), 0, Nanos(0)) {
            assert_eq!(why, DropReason::QueueFull);
            p.put(buf);
            refused += 1;
        }
    }
    assert_eq!(refused, 2);
    let mut out: Vec<Released> = Vec::new();
    assert_eq!(e.release(Nanos(0), &mut out), 1, "the idle link takes one");
    assert_eq!(e.release(Nanos(799_999), &mut out), 0, "100 B take 800 µs");
    assert_eq!(e.next_due(Nanos(799_999)), Some(Nanos(800_000)));
    assert_eq!(e.release(Nanos(800_000), &mut out), 1);
    let s = e.snapshot(&["rt".into(), "be".into()]).classes;
    assert_eq!((s[0].dropped_queue_full, s[0].backlog_packets), (2, 2));
    assert_eq!((s[0].backlog_bytes, s[0].sent_packets), (200, 2));
}

/// Idle time is no credit: after a quiet second a burst still leaves at
/// the rate.
#[test]
fn idle_time_gives_no_burst() {
    let p = pool(16);
    let mut e = egress("[egress]\nrate = \"8mbit\"\n");
    let mut out = Vec::new();
    e.enqueue(1, frame(p, 1000), 0, Nanos(0)).expect("queued");
    assert_eq!(e.release(Nanos(0), &mut out), 1);
    let later = 1_000_000_000;
    for _ in 0..3 {
        e.enqueue(1, frame(p, 1000), later, Nanos(later))
            .expect("queued");
    }
    assert_eq!(e.release(Nanos(later), &mut out), 1, "one, not three");
    assert_eq!(e.next_due(Nanos(later)), Some(Nanos(later + 1_000_000)));
}
