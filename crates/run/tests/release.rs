//! Frames the scheduler released reach the egress device within one pass
//! of the run-to-completion engine, idle or under load: the egress batches
//! released frames into one transmit kick per run of releasing passes
//! (`engine/tx.rs`), and must not hold them for a fuller batch. In-memory
//! devices; the engine's passes are observed through the control path
//! (each snapshot is answered at the start of a pass).

use pktsched_io::BufPool;
use pktsched_io::frame::{UdpSpec, build_udp};
use pktsched_io::mem::{MemDevice, MemWire};
use pktsched_run::config::parse;
use pktsched_run::engine::{Devices, Pipeline};
use std::time::{Duration, Instant};

fn config(rate: &str) -> String {
    format!(
        "[link]\ningress = \"in0\"\negress = \"out0\"\nrate = \"{rate}\"\nbuffers = 4096\n\n\
         [[class]]\nname = \"a\"\nlimit = 1000\ndefault = true\n"
    )
}

fn udp(len: usize) -> Vec<u8> {
    let spec = UdpSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        vlan: None,
        src_ip: "198.18.0.1".parse().expect("ip"),
        dst_ip: "198.18.0.2".parse().expect("ip"),
        sport: 1234,
        dport: 5000,
        dscp: 0,
        ttl: 64,
        payload: vec![0; len - 42],
    };
    let mut buf = vec![0u8; 2048];
    let n = build_udp(&mut buf, &spec).expect("fits");
    buf.truncate(n);
    buf
}

struct Rig {
    pipeline: Pipeline,
    ingress: MemWire,
    egress: MemWire,
}

fn start(rate: &str) -> Rig {
    let cfg = parse(&config(rate), "test.toml", None).expect("config");
    let (ingress_rx, ingress) = MemDevice::new();
    let (egress_tx, egress) = MemDevice::new();
    let (egress_rx, _reverse_in) = MemDevice::new();
    let (ingress_tx, _reverse_out) = MemDevice::new();
    let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(4096, 2048).expect("pool")));
    let devices = Devices {
        ingress_rx,
        egress_tx,
        egress_rx,
        ingress_tx,
    };
    Rig {
        pipeline: Pipeline::start(cfg, devices, pool).expect("start"),
        ingress,
        egress,
    }
}

impl Rig {
    fn push(&self, n: usize, len: usize) {
        let mut w = self.ingress.lock().expect("wire");
        w.inbound.extend((0..n).map(|_| udp(len)));
    }

    fn on_the_device(&self) -> u64 {
        self.egress.lock().expect("wire").sent.len() as u64
    }

    /// Frames the scheduler released so far (answered at a pass's start).
    fn released(&self) -> u64 {
        let s = self.pipeline.snapshot().expect("snapshot");
        s.classes
            .iter()
            .map(|c| c.packets + c.drops_by_reason[3])
            .sum()
    }
}

/// Idle: a few frames (fewer than a kick batch) released at once reach
/// the device by the pass after the one that saw them released, in every
/// round.
#[test]
fn frames_released_on_an_idle_link_reach_the_device_by_the_next_pass() {
    let rig = start("10gbit");
    let mut total = 0;
    for round in 0..20u64 {
        let n = round % 7 + 1; // 1..=7 frames, never a full kick batch
        rig.push(n as usize, 100);
        total += n;
        // Bound on a hang, not a timing goal.
        let until = Instant::now() + Duration::from_secs(60);
        while rig.released() < total {
            assert!(Instant::now() < until, "round {round}: never released");
            std::thread::sleep(Duration::from_millis(1));
        }
        // That snapshot's pass released nothing more: it sent what was
        // waiting. The next snapshot is answered after it.
        let _ = rig.released();
        assert_eq!(
            rig.on_the_device(),
            total,
            "round {round}: frames released but held"
        );
    }
    let fin = rig.pipeline.stop().expect("stop");
    assert_eq!(fin.flushed_at_stop, 0);
}

/// Under load: a paced backlog (10 Mbit/s of 1000-byte frames, one frame
/// due every 0.8 ms). At every sample, what the previous sample counted as
/// released is on the device but for what the last two passes released
/// (a pass that releases keeps its frames for the next one's kick): never
/// a kick batch's worth.
#[test]
fn frames_released_under_load_are_not_held_for_a_fuller_kick() {
    let rig = start("10mbit");
    rig.push(300, 1000);
    let mut before = rig.released();
    let mut samples = 0;
    let mut worst = 0;
    let until = Instant::now() + Duration::from_secs(60);
    while before < 300 {
        assert!(Instant::now() < until, "the backlog never drained");
        std::thread::sleep(Duration::from_micros(500));
        let now_on_device = rig.on_the_device();
        let released = rig.released();
        worst = worst.max(before.saturating_sub(now_on_device));
        before = released;
        samples += 1;
    }
    assert!(samples > 20, "{samples} samples");
    assert!(
        worst <= 4,
        "up to {worst} frames released but not yet handed to the device"
    );
    let egress = rig.egress.clone();
    rig.pipeline.stop().expect("stop");
    assert_eq!(egress.lock().expect("wire").sent.len(), 300);
}
