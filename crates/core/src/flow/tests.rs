//! The flow table's entry points for a scheduler keeping its own per-flow
//! state in the hot record (`admit_filed`, `pop_if`).

use super::*;

/// A filer that records whether it ran and says `yes` or not, counting
/// the packets it filed in the flow's state.
struct Count<'a> {
    ran: &'a mut bool,
    yes: bool,
}

impl Filer<u32> for Count<'_> {
    fn file(self, ext: &mut u32) -> bool {
        *self.ran = true;
        if self.yes {
            *ext += 1;
        }
        self.yes
    }
}

fn admit(
    t: &mut FlowTable<u64, u32>,
    f: FlowId,
    item: u64,
    yes: bool,
) -> (bool, Result<(), Unqueued<u64>>) {
    let mut ran = false;
    let r = t.admit_filed(
        Pkt::new(f, 100, Nanos::ZERO, item),
        Count { ran: &mut ran, yes },
    );
    (ran, r)
}

/// A packet the filer does not take comes back untouched and uncounted,
/// with the pool as it was, on the path that grows the pool and on the one
/// that reuses a free slot; the filer never runs for a packet the table
/// refuses (here: the scheduler-wide limit of two packets).
#[test]
fn unfiled_packets_leave_the_table_as_it_was() {
    let mut t = FlowTable::<u64, u32>::default();
    t.set_pool_cap(2);
    let f = t.insert(FlowConfig::default());
    // No free slot: the path that grows the pool.
    match admit(&mut t, f, 7, false) {
        (true, Err(Unqueued::Unfiled(p))) => assert_eq!(p, Pkt::new(f, 100, Nanos::ZERO, 7)),
        (ran, r) => panic!("ran {ran}, {r:?}"),
    }
    assert_eq!(t.totals().enqueued.pkts, 0);
    assert_eq!(t.queued(f), Some(0));
    assert_eq!(t.ext(f), Some(&0));
    assert_eq!(t.pool_slots(), 0);
    assert!(matches!(admit(&mut t, f, 1, true), (true, Ok(()))));
    assert!(matches!(admit(&mut t, f, 3, true), (true, Ok(()))));
    assert_eq!(t.pool_slots(), 2);
    match admit(&mut t, f, 4, true) {
        (false, Err(Unqueued::Refused(r))) => assert_eq!(r.reason, DropReason::QueueFull),
        (ran, r) => panic!("ran {ran}, {r:?}"),
    }
    // A free slot: the common path.
    assert_eq!(t.pop_if(f, |_| true).map(|p| p.item), Some(1));
    match admit(&mut t, f, 2, false) {
        (true, Err(Unqueued::Unfiled(p))) => assert_eq!(p, Pkt::new(f, 100, Nanos::ZERO, 2)),
        (ran, r) => panic!("ran {ran}, {r:?}"),
    }
    assert_eq!(t.queued(f), Some(1));
    assert!(matches!(admit(&mut t, f, 5, true), (true, Ok(()))));
    assert_eq!(t.pool_slots(), 2);
    assert_eq!(t.ext(f), Some(&3));
    let c = t.totals();
    assert_eq!(
        (c.enqueued.pkts, c.dequeued.pkts, c.backlog.pkts),
        (3, 1, 2)
    );
    assert_eq!(c.dropped(DropReason::QueueFull).pkts, 1);
    assert!(c.conserved());
    let items: Vec<u64> = t.packets(f).map(|p| p.item).collect();
    assert_eq!(items, vec![3, 5]);
}

/// A packet `admit_filed` refuses before the filing (longer than its
/// flow's maximum, its flow at its limit, an unknown flow) comes back whole
/// with the reason, counted as dropped, the filer not run and the totals
/// conserved.
#[test]
fn refused_packets_come_back_whole_and_counted() {
    let mut t = FlowTable::<u64, u32>::default();
    let f = t.insert(FlowConfig {
        max_len: 200,
        limit: 1,
        ..FlowConfig::default()
    });
    let mut ran = false;
    let mut offer = |t: &mut FlowTable<u64, u32>, flow: FlowId, len: u32, item: u64| {
        let pkt = Pkt::new(flow, len, Nanos(5), item);
        match t.admit_filed(
            pkt,
            Count {
                ran: &mut ran,
                yes: true,
            },
        ) {
            Err(Unqueued::Refused(r)) => {
                assert_eq!(r.pkt, Pkt::new(flow, len, Nanos(5), item));
                Some(r.reason)
            }
            Ok(()) => None,
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(offer(&mut t, f, 201, 1), Some(DropReason::TooLarge));
    assert_eq!(offer(&mut t, f, 200, 2), None);
    assert_eq!(offer(&mut t, f, 100, 3), Some(DropReason::QueueFull));
    assert_eq!(
        offer(&mut t, FlowId(9), 100, 4),
        Some(DropReason::UnknownFlow)
    );
    let c = t.totals();
    assert_eq!((c.enqueued.pkts, c.backlog.pkts), (1, 1));
    let dropped: u64 = [
        DropReason::TooLarge,
        DropReason::QueueFull,
        DropReason::UnknownFlow,
    ]
    .iter()
    .map(|r| c.dropped(*r).pkts)
    .sum();
    assert_eq!(dropped, 3);
    assert!(c.conserved());
    assert_eq!(
        t.ext(f),
        Some(&1),
        "the filer ran once, for the queued packet"
    );
}

/// `pop_if` pops the head only when asked, in FIFO order, and keeps no
/// head lengths; an unknown flow is refused before the filer runs.
#[test]
fn pop_if_pops_only_when_asked() {
    let mut t = FlowTable::<u64, u32>::default();
    let f = t.insert(FlowConfig::default());
    for i in 0..3 {
        assert!(matches!(admit(&mut t, f, i, true), (true, Ok(()))));
    }
    assert_eq!(t.pop_if(f, |n| *n == 99), None);
    assert_eq!(t.queued(f), Some(3));
    let got: Vec<u64> = core::iter::from_fn(|| t.pop_if(f, |n| *n == 3).map(|p| p.item)).collect();
    assert_eq!(got, vec![0, 1, 2]);
    assert_eq!(t.head_len(f), 0);
    assert!(t.totals().conserved());
    match admit(&mut t, FlowId(5), 9, true) {
        (false, Err(Unqueued::Refused(r))) => assert_eq!(r.reason, DropReason::UnknownFlow),
        (ran, r) => panic!("ran {ran}, {r:?}"),
    }
}

/// `pop_onto` appends the head packet to the caller's `Vec` and reports
/// what `pop` would have (the packet's length, the new head's length or
/// `None` once the flow is empty), counting the departure the same way;
/// an empty or unknown flow leaves `out` and the counters alone.
#[test]
fn pop_onto_matches_pop() {
    let mut a = FlowTable::<u64>::default();
    let mut b = FlowTable::<u64>::default();
    let (fa, fb) = (
        a.insert(FlowConfig::default()),
        b.insert(FlowConfig::default()),
    );
    for (i, len) in [(0, 100), (1, 300), (2, 60)] {
        assert!(a.admit(Pkt::new(fa, len, Nanos::ZERO, i), false).is_ok());
        assert!(b.admit(Pkt::new(fb, len, Nanos::ZERO, i), false).is_ok());
    }
    let mut out = vec![Pkt::new(FlowId(9), 1, Nanos::ZERO, 99)];
    for _ in 0..3 {
        let (p, next) = a.pop(fa).expect("a packet");
        assert_eq!(b.pop_onto(fb, true, &mut out), Some((p.len, next)));
        assert_eq!(out.last(), Some(&p));
        assert_eq!(a.head_len(fa), b.head_len(fb));
    }
    assert_eq!(
        out.iter().map(|p| p.item).collect::<Vec<_>>(),
        [99, 0, 1, 2]
    );
    assert_eq!(b.pop_onto(fb, true, &mut out), None);
    assert_eq!(b.pop_onto(FlowId(3), true, &mut out), None);
    assert_eq!(out.len(), 4);
    assert_eq!(a.totals(), b.totals());
    assert_eq!(a.stats(fa), b.stats(fb));
    assert!(b.totals().conserved());
}
