//! AF_XDP devices: one socket bound to one queue of an interface, its
//! UMEM split between a receive half ([`XdpRx`]: fill and RX rings) and a
//! transmit half ([`XdpTx`]: TX and completion rings), each a
//! [`crate::PacketIo`] usable from its own thread.
//!
//! * The XDP program (from [`crate::bpf`]) is attached to the interface
//!   natively when the driver offers it (veth does), generically (SKB
//!   mode) otherwise, with the reason; it redirects the frames of the
//!   bound queue into the socket through an XSKMAP and passes the others
//!   on to the kernel's stack. It is detached when both halves are
//!   dropped.
//! * The bind tries `XDP_ZEROCOPY` first where asked ([`BindMode::Auto`])
//!   and falls back to `XDP_COPY` with the reason; `XDP_USE_NEED_WAKEUP`
//!   is on by default, so the kernel is kicked (`sendto` for TX,
//!   `recvfrom` or `poll` for RX) only when it asks.
//! * Receive copies each frame from its UMEM frame into a pool buffer and
//!   gives the frame straight back to the fill ring; transmit copies pool
//!   buffers into free UMEM frames of the transmit half, which come back
//!   through the completion ring. No allocation per frame.
//! * Counters: [`crate::IoStats`], with the kernel's `XDP_STATISTICS`
//!   (`rx_dropped`, `rx_ring_full`, `rx_fill_ring_empty_descs`,
//!   `tx_ring_empty_descs`, invalid descriptors) folded in.
//!
//! [`open_class_group`] opens one socket per traffic class on one queue,
//! all sharing one UMEM and its fill ring (`XDP_SHARED_UMEM`), with the
//! classifier steering each frame into its class's socket:
//! [`XdpClassGroup`], a [`crate::ClassRx`].
//!
//! The ring index protocol is in [`ring`] (pure functions, loom-checked);
//! the system calls in `socket`; the data path in `io` and `group`.

mod group;
mod io;
pub mod ring;
mod socket;

pub use group::{MAX_CLASSES, XdpClassGroup, open_class_group};
pub use io::{XdpRx, XdpTx};

use crate::IoError;
use crate::bpf::classify::Steer;
use crate::bpf::sys::{AttachMode, Map, Program, XdpLink, attach_xdp, attach_xdp_best};
use crate::classify::Rule;

/// How the socket is bound.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy if the driver offers it, else copy mode.
    Auto,
    /// Copy mode only (`XDP_COPY`).
    Copy,
    /// Zero-copy only (`XDP_ZEROCOPY`); fails where not offered.
    ZeroCopy,
}

/// How the XDP program is attached.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AttachPref {
    /// Native if the driver offers it, else generic.
    Auto,
    /// This mode only.
    Only(AttachMode),
}

/// Preferred busy polling: the socket's NAPI context is polled by the
/// application's receive calls instead of by interrupts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BusyPoll {
    /// `SO_BUSY_POLL`: µs to busy-poll per call.
    pub usecs: u32,
    /// `SO_BUSY_POLL_BUDGET`: frames per poll.
    pub budget: u32,
}

/// Geometry and options of an AF_XDP device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    /// UMEM frames of the receive half, also the fill and RX ring size (a
    /// power of two, 64..=32768).
    pub rx_frames: u32,
    /// UMEM frames of the transmit half, also the TX and completion ring
    /// size (a power of two, 64..=32768).
    pub tx_frames: u32,
    /// The queue to bind to.
    pub queue: u32,
    /// Zero-copy or copy mode.
    pub bind: BindMode,
    /// Native or generic XDP.
    pub attach: AttachPref,
    /// `XDP_USE_NEED_WAKEUP`.
    pub need_wakeup: bool,
    /// Preferred busy polling, off by default.
    pub busy_poll: Option<BusyPoll>,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            frame_size: 2048,
            rx_frames: 4096,
            tx_frames: 2048,
            queue: 0,
            bind: BindMode::Auto,
            attach: AttachPref::Auto,
            need_wakeup: true,
            busy_poll: None,
        }
    }
}

/// Keys in the XSKMAP: queue ids below this.
pub const MAX_QUEUES: u32 = 64;

impl XdpConfig {
    fn check(&self, device: &str) -> Result<(), IoError> {
        let bad = |what: String| {
            Err(IoError::Config {
                device: device.to_string(),
                what,
            })
        };
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!(
                "AF_XDP frame_size {}: allowed 2048 or 4096",
                self.frame_size
            ));
        }
        for (name, n) in [("rx_frames", self.rx_frames), ("tx_frames", self.tx_frames)] {
            if !n.is_power_of_two() || !(64..=32768).contains(&n) {
                return bad(format!(
                    "AF_XDP {name} {n}: allowed a power of two 64..=32768"
                ));
            }
        }
        if self.queue >= MAX_QUEUES {
            return bad(format!(
                "AF_XDP queue {}: allowed 0..{MAX_QUEUES}",
                self.queue
            ));
        }
        if let Some(bp) = self.busy_poll
            && (bp.usecs == 0 || bp.usecs > 1_000_000 || bp.budget == 0 || bp.budget > 65535)
        {
            return bad(format!(
                "AF_XDP busy poll {} µs budget {}: allowed 1..=1000000 µs, budget 1..=65535",
                bp.usecs, bp.budget
            ));
        }
        Ok(())
    }
}

/// What an open device ended up with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpInfo {
    /// Bound zero-copy.
    pub zero_copy: bool,
    /// How the program is attached.
    pub attach: AttachMode,
    /// Why a fallback was taken (zero-copy refused, native refused).
    pub notes: Vec<String>,
}

/// What both halves share; dropped with the last of them: the link first
/// (the program is detached), then the program and map, then the socket.
#[derive(Debug)]
pub(super) struct Shared {
    _link: XdpLink,
    _prog: Program,
    _map: Map,
    pub(super) device: String,
}

pub(super) fn bpf_err(device: &str, e: crate::bpf::BpfError) -> IoError {
    IoError::Config {
        device: device.to_string(),
        what: e.to_string(),
    }
}

/// Opens an AF_XDP device on `device` (in the calling thread's network
/// namespace): the socket, the redirect program attached, the fill ring
/// stocked. Returns the two halves and what the kernel granted.
pub fn open(device: &str, cfg: &XdpConfig) -> Result<(XdpRx, XdpTx, XdpInfo), IoError> {
    open_with(device, cfg, crate::bpf::redirect::load_redirect_by_queue)
}

/// Like [`open`], with the classifier compiled from `rules` (first match
/// wins, else `default`) as the XDP program: frames of the bound queue
/// reach the socket with their class in the metadata, which
/// [`XdpRx::recv_classified`] reads.
pub fn open_classified(
    device: &str,
    cfg: &XdpConfig,
    rules: &[Rule],
    default: u16,
) -> Result<(XdpRx, XdpTx, XdpInfo), IoError> {
    open_with(device, cfg, |map| {
        crate::bpf::classify::load(rules, default, map, Steer::ByQueue)
    })
}

fn open_with(
    device: &str,
    cfg: &XdpConfig,
    program: impl FnOnce(&Map) -> Result<Program, crate::bpf::BpfError>,
) -> Result<(XdpRx, XdpTx, XdpInfo), IoError> {
    cfg.check(device)?;
    let ifindex = crate::packet::if_index(device)? as u32;
    let (sock, zc_note) = socket::open_bound(device, ifindex, cfg, cfg.rx_frames)?;
    let map = Map::xsk(MAX_QUEUES, "pst_xsks").map_err(|e| bpf_err(device, e))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock.fd) as u32;
    map.update(&cfg.queue.to_ne_bytes(), &fd.to_ne_bytes())
        .map_err(|e| bpf_err(device, e))?;
    let prog = program(&map).map_err(|e| bpf_err(device, e))?;
    let (shared, info) = attach(device, ifindex, cfg, prog, map, sock.zero_copy, zc_note)?;
    let (rx, tx) = io::split(sock, shared, cfg);
    Ok((rx, tx, info))
}

/// Attaches `prog` to `ifindex` as `cfg.attach` asks; returns what the
/// sockets share and what was granted (with `zc_note`, why zero-copy was
/// not taken).
pub(super) fn attach(
    device: &str,
    ifindex: u32,
    cfg: &XdpConfig,
    prog: Program,
    map: Map,
    zero_copy: bool,
    zc_note: Option<String>,
) -> Result<(Shared, XdpInfo), IoError> {
    let (link, attach_note) = match cfg.attach {
        AttachPref::Auto => attach_xdp_best(&prog, ifindex).map_err(|e| bpf_err(device, e))?,
        AttachPref::Only(m) => (
            attach_xdp(&prog, ifindex, m).map_err(|e| bpf_err(device, e))?,
            None,
        ),
    };
    let info = XdpInfo {
        zero_copy,
        attach: link.mode,
        notes: zc_note.into_iter().chain(attach_note).collect(),
    };
    let shared = Shared {
        _link: link,
        _prog: prog,
        _map: map,
        device: device.to_string(),
    };
    Ok((shared, info))
}
