//! The pipeline's stop accounts for every frame, on in-memory devices
//! with no clock in the checks: frames a PSPAT receive thread held when
//! the stop came (its mailbox full) are counted dropped at stop, and a
//! receive or reverse thread that panicked makes the stop an error naming
//! it (the frames it had counted received may be nowhere).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pktsched_io::mem::{MemDevice, MemWire};
use pktsched_io::{BufPool, IoError, IoStats, PacketBuf, PacketIo};
use pktsched_run::config::parse;
use pktsched_run::engine::{Devices, EngineError, Pipeline};
use pktsched_runtime::Mailbox;

/// The engine's mailbox capacity asked for (`MAILBOX_CAPACITY`).
const MAILBOX_ASKED: usize = 1024;

/// An in-memory device with hooks: a receive that panics on its n-th
/// call, a count of the frames received, a transmit that blocks until a
/// gate opens, and a flag raised when the device is dropped.
#[derive(Default)]
struct Hooks {
    panic_on_recv_call: Option<usize>,
    received: Option<Arc<AtomicUsize>>,
    /// (gate, entered): sends wait until `gate`; `entered` says one waits.
    gate: Option<(Arc<AtomicBool>, Arc<AtomicBool>)>,
    on_drop: Option<Arc<AtomicBool>>,
}

struct TestIo {
    inner: MemDevice,
    hooks: Hooks,
    recv_calls: usize,
}

impl TestIo {
    fn new(hooks: Hooks) -> (TestIo, MemWire) {
        let (inner, wire) = MemDevice::new();
        let io = TestIo {
            inner,
            hooks,
            recv_calls: 0,
        };
        (io, wire)
    }
}

impl PacketIo for TestIo {
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        self.recv_calls += 1;
        if self.hooks.panic_on_recv_call == Some(self.recv_calls) {
            panic!("test device: receive call {}", self.recv_calls);
        }
        let n = self.inner.recv_batch(pool, out, max)?;
        if let Some(r) = &self.hooks.received {
            r.fetch_add(n, Ordering::SeqCst);
        }
        Ok(n)
    }

    fn send_batch(
        &mut self,
        frames: &mut Vec<PacketBuf>,
        pool: &BufPool,
    ) -> Result<usize, IoError> {
        if let Some((gate, entered)) = &self.hooks.gate {
            entered.store(true, Ordering::SeqCst);
            while !gate.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.inner.send_batch(frames, pool)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        self.inner.wait(timeout)
    }

    fn stats(&self) -> IoStats {
        self.inner.stats()
    }
}

impl Drop for TestIo {
    fn drop(&mut self) {
        if let Some(f) = &self.hooks.on_drop {
            f.store(true, Ordering::SeqCst);
        }
    }
}

/// A 100-byte UDP frame to port 5000.
fn udp() -> Vec<u8> {
    common::udp_frame(5000, 100)
}

/// One default class on a PSPAT engine at 1 Gbit/s.
const PSPAT: &str = "[link]\ningress = \"in0\"\negress = \"out0\"\nrate = \"1gbit\"\n\
    engine = \"pspat\"\nbuffers = 8192\n\n\
    [[class]]\nname = \"a\"\nlimit = 4096\ndefault = true\n";

/// The four devices with `ingress` and `egress` hooks; their wires
/// (ingress, egress, reverse in).
fn start(ingress: Hooks, egress: Hooks, reverse_in: Hooks) -> (Pipeline, [MemWire; 3]) {
    let cfg = parse(PSPAT, "test.toml", None).expect("config");
    let (ingress_rx, in_wire) = TestIo::new(ingress);
    let (egress_tx, out_wire) = TestIo::new(egress);
    let (egress_rx, rev_wire) = TestIo::new(reverse_in);
    let (ingress_tx, _) = TestIo::new(Hooks::default());
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(8192, 2048).expect("pool")));
    let devices = Devices {
        ingress_rx,
        egress_tx,
        egress_rx,
        ingress_tx,
    };
    let p = Pipeline::start(cfg, devices, pool).expect("start");
    (p, [in_wire, out_wire, rev_wire])
}

/// Waits (a bound on a hang, not a timing goal) until `f` holds.
fn wait_for(what: &str, f: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How many items the engine's mailbox holds (its capacity rounded up to
/// its layout), found by filling one made the same way.
fn mailbox_holds() -> usize {
    let (mut p, _c) = Mailbox::with_capacity::<u32>(MAILBOX_ASKED);
    (0..).take_while(|&i| p.try_push(i).is_ok()).count()
}

/// The arbiter is held inside its first transmit (the egress's gate
/// shut), so it takes nothing more from the receive thread's mailbox; the
/// receive thread fills it and then holds frames it cannot hand on. Once
/// it has received more since than the mailbox holds, it holds some for
/// certain, and keeps holding them (nothing drains the mailbox). The stop
/// then finds them: counted dropped at stop, and every class's frames add
/// up (received = sent + dropped + queued + moved + dropped at stop). The
/// gate opens when the receive thread has let go of its device, i.e. has
/// stopped.
#[test]
fn frames_a_pspat_receive_thread_holds_at_stop_are_counted() {
    let holds = mailbox_holds();
    assert!(holds >= MAILBOX_ASKED, "{holds}");
    let received = Arc::new(AtomicUsize::new(0));
    let (gate, entered) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let ingress = Hooks {
        received: Some(received.clone()),
        on_drop: Some(gate.clone()),
        ..Hooks::default()
    };
    let egress = Hooks {
        gate: Some((gate.clone(), entered.clone())),
        ..Hooks::default()
    };
    let (pipeline, [in_wire, out_wire, _]) = start(ingress, egress, Hooks::default());
    in_wire.lock().expect("wire").inbound.push_back(udp());
    wait_for("the arbiter's first transmit", || {
        entered.load(Ordering::SeqCst)
    });
    let first = received.load(Ordering::SeqCst);
    let more = holds + 2 * 64 + 100;
    in_wire
        .lock()
        .expect("wire")
        .inbound
        .extend((0..more).map(|_| udp()));
    wait_for(
        "the receive thread to take more than its mailbox holds",
        || received.load(Ordering::SeqCst) - first > holds,
    );
    let taken = received.load(Ordering::SeqCst) - first;
    let fin = pipeline.stop().expect("stop");
    assert!(gate.load(Ordering::SeqCst), "the receive thread let go");
    let held = (taken - holds) as u64;
    assert!(
        fin.rx_dropped_at_stop >= held,
        "the receive thread held at least {held} frames at stop; {} counted",
        fin.rx_dropped_at_stop
    );
    let s = &fin.after_stop;
    let a = s.classes.iter().find(|c| c.class == "a").expect("class a");
    assert_eq!(a.dropped_at_stop, fin.rx_dropped_at_stop, "{a:?}");
    assert_eq!(
        a.received,
        a.packets + a.drops + a.qlen + a.moved + a.dropped_at_stop,
        "received = sent + dropped + queued + moved + dropped at stop: {a:?}"
    );
    assert_eq!(a.received, (first + taken) as u64, "{a:?}");
    assert_eq!(a.qlen, 0, "the stop sends what is queued: {a:?}");
    let sent = out_wire.lock().expect("wire").sent.len() as u64;
    assert_eq!(a.packets, sent, "{a:?}");
}

/// A receive thread (PSPAT) or the reverse thread whose device panics on
/// its second receive: the stop is an error naming that thread.
#[test]
fn a_thread_that_panicked_makes_the_stop_an_error_naming_it() {
    let panics = || Hooks {
        panic_on_recv_call: Some(2),
        ..Hooks::default()
    };
    for (thread, ingress, reverse) in [
        ("pktsched-rx", panics(), Hooks::default()),
        ("pktsched-reverse", Hooks::default(), panics()),
    ] {
        let died = Arc::new(AtomicBool::new(false));
        let (ingress, reverse) = if thread == "pktsched-rx" {
            let h = Hooks {
                on_drop: Some(died.clone()),
                ..ingress
            };
            (h, reverse)
        } else {
            let h = Hooks {
                on_drop: Some(died.clone()),
                ..reverse
            };
            (ingress, h)
        };
        let (pipeline, [in_wire, _, rev_wire]) = start(ingress, Hooks::default(), reverse);
        in_wire.lock().expect("wire").inbound.push_back(udp());
        rev_wire.lock().expect("wire").inbound.push_back(udp());
        // The device goes with the thread's unwinding.
        wait_for("the panic", || died.load(Ordering::SeqCst));
        let e = pipeline.stop().expect_err("a thread panicked");
        match &e {
            EngineError::ThreadPanicked { thread: t, message } => {
                assert_eq!(t, thread, "{e}");
                assert!(message.contains("receive call 2"), "{e}");
            }
            other => panic!("{thread}: {other:?}"),
        }
        let text = e.to_string();
        assert!(text.contains(thread) && text.contains("panicked"), "{text}");
    }
}
