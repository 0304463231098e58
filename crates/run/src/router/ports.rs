//! Opening the router's devices on the configured backend: AF_XDP (one
//! socket per class sharing one UMEM, the XDP classifier steering each
//! frame into its class's ring — `pktsched_io::xdp::open_class_group`) or
//! AF_PACKET (a fanout group of one TPACKET_V2 ring per class, the
//! classic-BPF classifier picking the ring); `auto` tries AF_XDP and falls
//! back with the reason. The egress has one plain receive ring (the
//! reverse direction) and each interface a transmit device.

use std::time::Duration;

use pktsched_core::ingress::RingPlan;
use pktsched_io::fanout::FanoutGroup;
use pktsched_io::packet::{BusyPoll, FrameRing, PacketSocket, Role};
use pktsched_io::xdp::{self, XdpClassGroup, XdpConfig};
use pktsched_io::{BufPool, ClassRx, IoError, IoStats, PacketBuf};

use super::config::RouteConfig;
use super::worker::RouterPorts;
use crate::config::Backend;
use crate::devices::LinkDevice;

/// The ingress's per-class rings on either backend.
#[derive(Debug)]
pub enum ClassRings {
    /// AF_PACKET fanout group.
    Fanout(FanoutGroup),
    /// AF_XDP sockets sharing one UMEM.
    Xdp(XdpClassGroup),
}

impl ClassRx for ClassRings {
    fn classes(&self) -> usize {
        match self {
            ClassRings::Fanout(g) => ClassRx::classes(g),
            ClassRings::Xdp(g) => g.classes(),
        }
    }

    fn recv_class(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        match self {
            ClassRings::Fanout(g) => ClassRx::recv_class(g, class, pool, out, max),
            ClassRings::Xdp(g) => g.recv_class(class, pool, out, max),
        }
    }

    fn waiting(&self, class: usize) -> Option<usize> {
        match self {
            ClassRings::Fanout(g) => ClassRx::waiting(g, class),
            ClassRings::Xdp(g) => g.waiting(class),
        }
    }

    fn end_round(&mut self) {
        if let ClassRings::Xdp(g) = self {
            g.end_round();
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        match self {
            ClassRings::Fanout(g) => ClassRx::wait(g, timeout),
            ClassRings::Xdp(g) => g.wait(timeout),
        }
    }

    fn class_stats(&mut self) -> Vec<IoStats> {
        match self {
            ClassRings::Fanout(g) => ClassRx::class_stats(g),
            ClassRings::Xdp(g) => g.class_stats(),
        }
    }
}

/// The router's devices.
pub type Ports = RouterPorts<ClassRings, LinkDevice>;

fn busy_poll(cfg: &RouteConfig) -> Option<BusyPoll> {
    (cfg.router.busy_poll > 0).then_some(BusyPoll {
        usecs: cfg.router.busy_poll,
        prefer: false,
        budget: 0,
    })
}

fn open_packet(cfg: &RouteConfig, plan: &RingPlan) -> Result<Ports, IoError> {
    let r = &cfg.router;
    let ring = FrameRing {
        frame_size: 2048,
        frame_count: r.ring_frames,
    };
    let rings = vec![Role::RxFrames(ring); plan.rings()];
    // SQ: one ring for every class (classes are told apart in user space).
    let rules = if plan.rings() == 1 {
        Vec::new()
    } else {
        cfg.rules()
    };
    let default = plan.ring_of(cfg.default_class) as u16;
    let mut rx = FanoutGroup::open_classified(&r.ingress, &rings, &rules, default, false)?;
    if let Some(b) = busy_poll(cfg) {
        rx.set_busy_poll(b)?;
    }
    let tx = FrameRing {
        frame_size: 2048,
        frame_count: 1024,
    };
    let reverse = FrameRing {
        frame_size: 2048,
        frame_count: r.ring_frames.max(256),
    };
    let open = |dev: &str, role| PacketSocket::open(dev, role, false).map(LinkDevice::Packet);
    Ok(RouterPorts {
        rx: ClassRings::Fanout(rx),
        reverse_rx: open(&r.egress, Role::RxFrames(reverse))?,
        ingress_tx: open(&r.ingress, Role::Tx(tx))?,
        egress_tx: open(&r.egress, Role::Tx(tx))?,
    })
}

fn open_xdp(cfg: &RouteConfig, plan: &RingPlan, notes: &mut Vec<String>) -> Result<Ports, IoError> {
    let r = &cfg.router;
    let xcfg = XdpConfig {
        rx_frames: r.pool_frames.next_power_of_two().clamp(64, 32_768),
        busy_poll: (r.busy_poll > 0).then_some(xdp::BusyPoll {
            usecs: r.busy_poll,
            budget: r.device_budget,
        }),
        ..XdpConfig::default()
    };
    let rules = if plan.rings() == 1 {
        Vec::new()
    } else {
        cfg.rules()
    };
    let default = plan.ring_of(cfg.default_class) as u16;
    let sizes = vec![r.ring_frames; plan.rings()];
    let (group, in_tx, in_info) =
        xdp::open_class_group(&r.ingress, &xcfg, &rules, default, &sizes)?;
    let egress_cfg = XdpConfig {
        busy_poll: None,
        ..XdpConfig::default()
    };
    let (eg_rx, eg_tx, eg_info) = xdp::open(&r.egress, &egress_cfg)?;
    for (dev, info) in [(&r.ingress, in_info), (&r.egress, eg_info)] {
        notes.extend(info.notes.iter().map(|n| format!("{dev}: {n}")));
    }
    Ok(RouterPorts {
        rx: ClassRings::Xdp(group),
        reverse_rx: LinkDevice::XdpRx(eg_rx, None),
        ingress_tx: LinkDevice::XdpTx(in_tx),
        egress_tx: LinkDevice::XdpTx(eg_tx),
    })
}

/// Opens the devices; returns them, the backend used and notes to log.
pub fn open_ports(
    cfg: &RouteConfig,
    plan: &RingPlan,
) -> Result<(Ports, &'static str, Vec<String>), String> {
    let mut notes = Vec::new();
    let e = |e: IoError| e.to_string();
    if cfg.router.backend == Backend::Auto
        && let Some(class) = cfg.vlan_class()
    {
        notes.push(format!(
            "backend auto: AF_PACKET, as class {class:?} matches on vlan ({})",
            crate::config::XDP_NO_VLAN
        ));
        return Ok((open_packet(cfg, plan).map_err(e)?, "packet", notes));
    }
    match cfg.router.backend {
        Backend::Packet => Ok((open_packet(cfg, plan).map_err(e)?, "packet", notes)),
        Backend::Xdp => Ok((open_xdp(cfg, plan, &mut notes).map_err(e)?, "xdp", notes)),
        Backend::Auto => match open_xdp(cfg, plan, &mut notes) {
            Ok(p) => Ok((p, "xdp", notes)),
            Err(why) => {
                let note = format!("backend auto: AF_XDP could not open ({why}); using AF_PACKET");
                Ok((open_packet(cfg, plan).map_err(e)?, "packet", vec![note]))
            }
        },
    }
}
