//! Opening the pipeline's four devices on the config's interfaces: AF_XDP
//! (one socket per interface, split into its receive and transmit
//! halves) or AF_PACKET (a ring socket per direction), as
//! `link.backend` says; `auto` tries AF_XDP and falls back to AF_PACKET
//! with the reason.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use pktsched_io::fanout::FanoutGroup;
use pktsched_io::packet::{BusyPoll, FrameRing, PacketSocket, Role};
use pktsched_io::xdp::{self, XdpConfig, XdpRx, XdpTx};
use pktsched_io::{BufPool, IoError, IoStats, PacketBuf, PacketIo};

use crate::config::{Backend, LinkConfig, RunConfig};
use crate::engine::{
    CLASS_GROUP_RX_FRAMES, ClassRingPlan, ClassRings, Devices, RingBoard, SingleRing,
    class_ring_plan,
};

/// The chosen backend and, for `auto`, why.
#[derive(Debug, Clone)]
pub struct BackendChoice {
    /// What is used.
    pub backend: &'static str,
    /// Why (a fallback, or what AF_XDP could not have), to log.
    pub reason: Option<String>,
    /// How the ingress receives: one ring per class, or one ring and why.
    pub rings: String,
    /// The per-class ring counters, when the ingress has class rings.
    pub ring_board: Option<RingBoard>,
}

/// One device of the pipeline, whichever backend it is on.
#[derive(Debug)]
pub enum LinkDevice {
    /// An AF_PACKET ring socket.
    Packet(PacketSocket),
    /// The receive half of an AF_XDP socket; the AF_PACKET socket beside
    /// it, if any, only holds the interface in promiscuous mode.
    XdpRx(XdpRx, Option<Box<PacketSocket>>),
    /// The transmit half of an AF_XDP socket.
    XdpTx(XdpTx),
    /// One receive ring per class, polled as one device; the AF_PACKET
    /// socket beside it, if any, only holds the interface in promiscuous
    /// mode (AF_XDP).
    ClassRings(Box<ClassRings>, Option<Box<PacketSocket>>),
}

impl LinkDevice {
    /// Whether a receive would find frames now, read from the receive
    /// ring in memory (no system call); `None` for a device that cannot
    /// tell this way (a transmit half, class rings: their own wait checks).
    pub fn rx_ready(&mut self) -> Option<bool> {
        match self {
            LinkDevice::Packet(d) => Some(d.rx_ready()),
            LinkDevice::XdpRx(d, _) => Some(d.rx_ready()),
            LinkDevice::XdpTx(_) | LinkDevice::ClassRings(..) => None,
        }
    }

    /// Whether any receive ring of the device holds frames (every class
    /// ring of class rings), read in memory; `None` for a device that
    /// cannot tell this way (a transmit half, class rings of a backend
    /// that cannot count its rings).
    pub fn frames_waiting(&mut self) -> Option<bool> {
        match self {
            LinkDevice::ClassRings(r, _) => r.any_waiting(),
            LinkDevice::Packet(_) | LinkDevice::XdpRx(..) | LinkDevice::XdpTx(_) => self.rx_ready(),
        }
    }
}

impl PacketIo for LinkDevice {
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        match self {
            LinkDevice::Packet(d) => d.recv_batch(pool, out, max),
            LinkDevice::XdpRx(d, _) => d.recv_batch(pool, out, max),
            LinkDevice::XdpTx(d) => d.recv_batch(pool, out, max),
            LinkDevice::ClassRings(d, _) => d.recv_batch(pool, out, max),
        }
    }

    fn send_batch(
        &mut self,
        frames: &mut Vec<PacketBuf>,
        pool: &BufPool,
    ) -> Result<usize, IoError> {
        match self {
            LinkDevice::Packet(d) => d.send_batch(frames, pool),
            LinkDevice::XdpRx(d, _) => d.send_batch(frames, pool),
            LinkDevice::XdpTx(d) => d.send_batch(frames, pool),
            LinkDevice::ClassRings(d, _) => d.send_batch(frames, pool),
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        match self {
            LinkDevice::Packet(d) => d.wait(timeout),
            LinkDevice::XdpRx(d, _) => d.wait(timeout),
            LinkDevice::XdpTx(d) => d.wait(timeout),
            LinkDevice::ClassRings(d, _) => d.wait(timeout),
        }
    }

    fn stats(&self) -> IoStats {
        match self {
            LinkDevice::Packet(d) => d.stats(),
            LinkDevice::XdpRx(d, _) => d.stats(),
            LinkDevice::XdpTx(d) => d.stats(),
            LinkDevice::ClassRings(d, _) => d.stats(),
        }
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            LinkDevice::Packet(d) => d.poll_fd(),
            LinkDevice::XdpRx(d, _) => d.poll_fd(),
            LinkDevice::XdpTx(d) => d.poll_fd(),
            LinkDevice::ClassRings(d, _) => d.poll_fd(),
        }
    }
}

/// The transmit slot size for frames of up to `max_frame` bytes.
fn tx_slot(max_frame: u32) -> u32 {
    (max_frame + 64).next_power_of_two().max(2048)
}

/// Bytes of a UMEM frame the kernel keeps in front of a received frame in
/// copy mode (`XDP_PACKET_HEADROOM`).
const XDP_HEADROOM: u32 = 256;

/// The AF_XDP geometry for frames of up to `max_frame` bytes, or why
/// there is none.
fn xdp_config(link: &LinkConfig) -> Result<XdpConfig, IoError> {
    let frame_size = match link.max_frame + XDP_HEADROOM {
        0..=2048 => 2048,
        2049..=4096 => 4096,
        _ => {
            return Err(IoError::Config {
                device: link.ingress.clone(),
                what: format!(
                    "link.max_frame = {}: AF_XDP takes frames of up to {} bytes (a 4096-byte \
                     UMEM frame less {XDP_HEADROOM} of headroom); use backend = \"packet\"",
                    link.max_frame,
                    4096 - XDP_HEADROOM
                ),
            });
        }
    };
    Ok(XdpConfig {
        frame_size,
        ..XdpConfig::default()
    })
}

/// `SO_BUSY_POLL` µs of a busy-polling ingress: how long one receive
/// call may poll the NAPI context (a non-blocking receive polls once).
pub const BUSY_POLL_USECS: u32 = 20;

/// The ingress's AF_XDP geometry: `xcfg` with the link's busy polling.
fn ingress_xdp(link: &LinkConfig, xcfg: XdpConfig) -> XdpConfig {
    XdpConfig {
        busy_poll: link.busy_poll.map(|b| xdp::BusyPoll {
            usecs: BUSY_POLL_USECS,
            budget: b.budget,
        }),
        ..xcfg
    }
}

/// The AF_PACKET busy-poll settings of the link's ingress (preferred, so
/// the forwarder's receive calls do the NAPI work), if it busy-polls.
fn packet_busy_poll(link: &LinkConfig) -> Option<BusyPoll> {
    link.busy_poll.map(|b| BusyPoll {
        usecs: BUSY_POLL_USECS,
        prefer: true,
        budget: u16::try_from(b.budget).unwrap_or(u16::MAX),
    })
}

/// Holds `device` in promiscuous mode for as long as the returned socket
/// is open (AF_XDP has no option of its own for it); its one-slot ring
/// sees nothing, the XDP program takes the frames first.
fn promiscuous_holder(device: &str) -> Result<PacketSocket, IoError> {
    let ring = FrameRing {
        frame_size: 4096,
        frame_count: 1,
    };
    PacketSocket::open(device, Role::RxFrames(ring), true)
}

/// Opens the AF_XDP devices of `link`; notes of what the kernel did not
/// offer (zero-copy, native XDP) go to `notes`.
fn open_xdp(link: &LinkConfig, notes: &mut Vec<String>) -> Result<Devices<LinkDevice>, IoError> {
    let cfg = xdp_config(link)?;
    let (in_rx, in_tx, in_info) = xdp::open(&link.ingress, &ingress_xdp(link, cfg))?;
    let (eg_rx, eg_tx, eg_info) = xdp::open(&link.egress, &cfg)?;
    for (dev, info) in [(&link.ingress, in_info), (&link.egress, eg_info)] {
        notes.extend(info.notes.iter().map(|n| format!("{dev}: {n}")));
    }
    Ok(Devices {
        ingress_rx: LinkDevice::XdpRx(in_rx, holder(link, &link.ingress)?),
        egress_tx: LinkDevice::XdpTx(eg_tx),
        egress_rx: LinkDevice::XdpRx(eg_rx, holder(link, &link.egress)?),
        ingress_tx: LinkDevice::XdpTx(in_tx),
    })
}

/// The promiscuous-mode holder of `dev` when the link asks for one.
fn holder(link: &LinkConfig, dev: &str) -> Result<Option<Box<PacketSocket>>, IoError> {
    link.promiscuous
        .then(|| promiscuous_holder(dev).map(Box::new))
        .transpose()
}

/// Opens the AF_XDP devices of `cfg` with the ingress's receive side as
/// one socket per class sharing one UMEM (the XDP classifier steers each
/// frame into its class's socket); notes as for [`open_xdp`].
fn open_xdp_class_rings(
    cfg: &RunConfig,
    plan: &ClassRingPlan,
    notes: &mut Vec<String>,
) -> Result<Devices<LinkDevice>, IoError> {
    let link = &cfg.link;
    let xcfg = XdpConfig {
        rx_frames: CLASS_GROUP_RX_FRAMES,
        ..xdp_config(link)?
    };
    let (group, in_tx, in_info) = xdp::open_class_group(
        &link.ingress,
        &ingress_xdp(link, xcfg),
        &plan.rules,
        plan.default_ring,
        &plan.frames,
    )?;
    let (eg_rx, eg_tx, eg_info) = xdp::open(&link.egress, &xcfg)?;
    for (dev, info) in [(&link.ingress, in_info), (&link.egress, eg_info)] {
        notes.extend(info.notes.iter().map(|n| format!("{dev}: {n}")));
    }
    // The rings' own descriptors: a short wait (the emulated link's
    // next free time) ends when a frame arrives, not only at its timeout.
    let fds = group
        .ring_fds()
        .into_iter()
        .map(|fd| dup_fd(fd, &link.ingress))
        .collect::<Result<Vec<OwnedFd>, IoError>>()?;
    let rings = ClassRings::new(Box::new(group), fds, plan, cfg)?;
    Ok(Devices {
        ingress_rx: LinkDevice::ClassRings(Box::new(rings), holder(link, &link.ingress)?),
        egress_tx: LinkDevice::XdpTx(eg_tx),
        egress_rx: LinkDevice::XdpRx(eg_rx, holder(link, &link.egress)?),
        ingress_tx: LinkDevice::XdpTx(in_tx),
    })
}

/// The AF_XDP devices of `cfg`: the ingress on one socket per class when
/// `plan` is there and the group opens, else on one socket; what the
/// ingress got, in words, and its ring counters.
fn open_xdp_for(
    cfg: &RunConfig,
    plan: Result<ClassRingPlan, SingleRing>,
    notes: &mut Vec<String>,
) -> Result<(Devices<LinkDevice>, String, Option<RingBoard>), IoError> {
    let why = match plan {
        Err(single) => single.0,
        Ok(plan) => {
            let mut group_notes = Vec::new();
            match open_xdp_class_rings(cfg, &plan, &mut group_notes) {
                Ok(d) => {
                    notes.extend(group_notes);
                    let board = match &d.ingress_rx {
                        LinkDevice::ClassRings(r, _) => Some(r.board()),
                        _ => None,
                    };
                    return Ok((d, describe_rings(cfg, &plan, "AF_XDP shared UMEM"), board));
                }
                Err(e) => format!("the AF_XDP class group could not open ({e})"),
            }
        }
    };
    let d = open_xdp(&cfg.link, notes)?;
    Ok((d, format!("one receive ring: {why}"), None))
}

/// The AF_PACKET ring geometry for frames of up to `max_frame` bytes.
fn packet_rings(link: &LinkConfig) -> (FrameRing, FrameRing) {
    let tx = FrameRing {
        frame_size: tx_slot(link.max_frame),
        frame_count: 1024,
    };
    // Frame slots, not blocks: a frame is readable as soon as it arrived
    // (a V3 block would hold it until the block fills or times out, 1 ms).
    let rx = FrameRing {
        frame_size: tx.frame_size,
        frame_count: 4096,
    };
    (tx, rx)
}

/// Opens the ingress's receive side as one AF_PACKET ring per class: a
/// fanout group whose classic-BPF classifier picks the ring.
fn open_packet_class_rings(cfg: &RunConfig, plan: &ClassRingPlan) -> Result<ClassRings, IoError> {
    let link = &cfg.link;
    let (_, rx) = packet_rings(link);
    let roles: Vec<Role> = plan
        .frames
        .iter()
        .map(|&frame_count| {
            Role::RxFrames(FrameRing {
                frame_size: rx.frame_size,
                frame_count,
            })
        })
        .collect();
    let mut group = FanoutGroup::open_classified(
        &link.ingress,
        &roles,
        &plan.rules,
        plan.default_ring,
        link.promiscuous,
    )?;
    if let Some(b) = packet_busy_poll(link) {
        group.set_busy_poll(b)?;
    }
    let fds = group
        .sockets_mut()
        .iter()
        .map(|s| poll_fd_copy(s, &link.ingress))
        .collect::<Result<Vec<OwnedFd>, IoError>>()?;
    ClassRings::new(Box::new(group), fds, plan, cfg)
}

/// A descriptor of `dev`'s own to wait on (the same open socket).
fn poll_fd_copy(dev: &impl PacketIo, device: &str) -> Result<OwnedFd, IoError> {
    let fd = dev.poll_fd().ok_or_else(|| IoError::Config {
        device: device.to_string(),
        what: "a class ring has no descriptor to wait on".into(),
    })?;
    dup_fd(fd, device)
}

fn dup_fd(fd: BorrowedFd<'_>, device: &str) -> Result<OwnedFd, IoError> {
    fd.try_clone_to_owned().map_err(|e| IoError::Config {
        device: device.to_string(),
        what: format!("dup of a class ring's descriptor: {e}"),
    })
}

/// Opens the four AF_PACKET sockets for `link`; with `class_rings`, the
/// ingress's receive side is that instead of one ring.
fn open_packet(
    link: &LinkConfig,
    class_rings: Option<ClassRings>,
) -> Result<Devices<LinkDevice>, IoError> {
    let (tx, rx) = packet_rings(link);
    let open = |dev: &str, role: Role| {
        let promiscuous = link.promiscuous && !matches!(role, Role::Tx(_));
        PacketSocket::open(dev, role, promiscuous).map(LinkDevice::Packet)
    };
    let ingress_rx = match class_rings {
        Some(r) => LinkDevice::ClassRings(Box::new(r), None),
        None => {
            let mut s = PacketSocket::open(&link.ingress, Role::RxFrames(rx), link.promiscuous)?;
            if let Some(b) = packet_busy_poll(link) {
                s.set_busy_poll(b)?;
            }
            LinkDevice::Packet(s)
        }
    };
    Ok(Devices {
        ingress_rx,
        egress_tx: open(&link.egress, Role::Tx(tx))?,
        egress_rx: open(&link.egress, Role::RxFrames(rx))?,
        ingress_tx: open(&link.ingress, Role::Tx(tx))?,
    })
}

/// The leaked buffer pool of `link` (it lives as long as the process, see
/// [`crate::frame::Frame`]).
fn leak_pool(link: &LinkConfig) -> Result<&'static BufPool, IoError> {
    let frame_size = (link.max_frame as usize + 4).next_power_of_two().max(2048);
    let pool = BufPool::new(link.buffers as usize, frame_size).ok_or_else(|| IoError::Config {
        device: link.ingress.clone(),
        what: format!(
            "{} buffers of {frame_size} bytes: outside the pool's limits",
            link.buffers
        ),
    })?;
    Ok(Box::leak(Box::new(pool)))
}

/// Opens the link's four devices on the configured backend, each with one
/// ring, and the buffer pool.
pub fn open_packet_devices(
    link: &LinkConfig,
) -> Result<(Devices<LinkDevice>, &'static BufPool, BackendChoice), IoError> {
    let mut notes = Vec::new();
    let (devices, backend) = match link.backend {
        Backend::Packet => (open_packet(link, None)?, "packet"),
        Backend::Xdp => (open_xdp(link, &mut notes)?, "xdp"),
        Backend::Auto => match open_xdp(link, &mut notes) {
            Ok(d) => (d, "xdp"),
            Err(e) => {
                notes = vec![format!(
                    "backend auto: AF_XDP could not open ({e}); using AF_PACKET"
                )];
                (open_packet(link, None)?, "packet")
            }
        },
    };
    let pool = leak_pool(link)?;
    let reason = (!notes.is_empty()).then(|| notes.join("; "));
    let choice = BackendChoice {
        backend,
        reason,
        rings: "one receive ring".into(),
        ring_board: None,
    };
    Ok((devices, pool, choice))
}

/// How a class ring plan reads in the log: each ring's class, budget and
/// slots, in polling order.
pub fn describe_rings(cfg: &RunConfig, plan: &ClassRingPlan, how: &str) -> String {
    let rings: Vec<String> = plan
        .order
        .iter()
        .enumerate()
        .map(|(r, &c)| {
            format!(
                "{} (budget {}, {} slots)",
                cfg.classes[c].name, plan.budgets[r], plan.frames[r]
            )
        })
        .collect();
    format!(
        "one receive ring per class ({how}), polled in order: {}",
        rings.join(", ")
    )
}

/// The AF_PACKET devices of `cfg`, the ingress receiving on one ring per
/// class when `plan` is there and the fanout group opens; what the ingress
/// got, in words, and its ring counters.
fn open_packet_for(
    cfg: &RunConfig,
    plan: Result<ClassRingPlan, SingleRing>,
) -> Result<(Devices<LinkDevice>, String, Option<RingBoard>), IoError> {
    let (class_rings, rings) = match plan {
        Err(single) => (None, format!("one receive ring: {}", single.0)),
        Ok(plan) => match open_packet_class_rings(cfg, &plan) {
            Ok(r) => (Some(r), describe_rings(cfg, &plan, "AF_PACKET fanout")),
            Err(e) => (
                None,
                format!("one receive ring: the fanout group could not open ({e})"),
            ),
        },
    };
    let board = class_rings.as_ref().map(ClassRings::board);
    Ok((open_packet(&cfg.link, class_rings)?, rings, board))
}

/// The backend `cfg` asks for, `auto` made AF_PACKET (with a note) when a
/// class matches on VLAN ids, which AF_XDP cannot see when the kernel keeps
/// the tag in metadata.
fn backend_for(cfg: &RunConfig, notes: &mut Vec<String>) -> Backend {
    match (cfg.link.backend, cfg.vlan_class()) {
        (Backend::Auto, Some(class)) => {
            notes.push(format!(
                "backend auto: AF_PACKET, as class {class:?} matches on vlan ({})",
                crate::config::XDP_NO_VLAN
            ));
            Backend::Packet
        }
        (b, _) => b,
    }
}

/// Opens the devices of `cfg` and the buffer pool: the ingress receives on
/// one ring per class where the backend and the config allow it
/// ([`class_ring_plan`]), else on one ring; [`BackendChoice::rings`] says
/// which and why.
pub fn open_devices(
    cfg: &RunConfig,
) -> Result<(Devices<LinkDevice>, &'static BufPool, BackendChoice), IoError> {
    let link = &cfg.link;
    let plan = class_ring_plan(cfg);
    let mut notes = Vec::new();
    let backend = backend_for(cfg, &mut notes);
    let (devices, backend, rings, ring_board) = match backend {
        Backend::Packet => {
            let (d, rings, board) = open_packet_for(cfg, plan)?;
            (d, "packet", rings, board)
        }
        Backend::Xdp => {
            let (d, rings, board) = open_xdp_for(cfg, plan, &mut notes)?;
            (d, "xdp", rings, board)
        }
        Backend::Auto => match open_xdp_for(cfg, plan.clone(), &mut notes) {
            Ok((d, rings, board)) => (d, "xdp", rings, board),
            Err(e) => {
                notes = vec![format!(
                    "backend auto: AF_XDP could not open ({e}); using AF_PACKET"
                )];
                let (d, rings, board) = open_packet_for(cfg, plan)?;
                (d, "packet", rings, board)
            }
        },
    };
    let choice = BackendChoice {
        backend,
        reason: (!notes.is_empty()).then(|| notes.join("; ")),
        rings,
        ring_board,
    };
    Ok((devices, leak_pool(link)?, choice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_af_packet_for_vlan_rules_and_says_why() {
        let src = |backend: &str, rule: &str| {
            format!(
                "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n{backend}\n\
                 [[class]]\nname = \"v\"\nmatch = [{{ {rule} }}]\n\
                 [[class]]\nname = \"a\"\ndefault = true\n"
            )
        };
        let pick = |backend: &str, rule: &str| {
            let cfg = crate::config::parse(&src(backend, rule), "t.toml", None).expect("config");
            let mut notes = Vec::new();
            (backend_for(&cfg, &mut notes), notes)
        };
        let (b, notes) = pick("", "vlan = 7");
        assert_eq!(b, Backend::Packet);
        assert!(
            notes.len() == 1 && notes[0].contains("class \"v\" matches on vlan"),
            "{notes:?}"
        );
        assert_eq!(pick("", "dport = 53"), (Backend::Auto, vec![]));
        assert_eq!(
            pick("backend = \"packet\"", "vlan = 7"),
            (Backend::Packet, vec![])
        );
        assert_eq!(
            pick("backend = \"xdp\"", "dport = 53"),
            (Backend::Xdp, vec![])
        );
    }

    #[test]
    fn frames_too_long_for_a_umem_frame_are_refused_by_name() {
        let src = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\n\
                   [[class]]\nname = \"a\"\ndefault = true\n";
        let mut link = crate::config::parse(src, "t.toml", None)
            .expect("config")
            .link;
        link.max_frame = 1500;
        assert_eq!(xdp_config(&link).expect("fits").frame_size, 2048);
        link.max_frame = 3000;
        assert_eq!(xdp_config(&link).expect("fits").frame_size, 4096);
        link.max_frame = 9000;
        let e = xdp_config(&link).expect_err("too long").to_string();
        assert!(e.contains("max_frame = 9000") && e.contains("3840"), "{e}");
    }
}
