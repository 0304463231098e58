//! Opening the pipeline's four devices on the config's interfaces: AF_XDP
//! (one socket per interface, split into its receive and transmit
//! halves) or AF_PACKET (a ring socket per direction), as
//! `link.backend` says; `auto` tries AF_XDP and falls back to AF_PACKET
//! with the reason.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::xdp::{self, XdpConfig, XdpRx, XdpTx};
use pktsched_io::{BufPool, IoError, IoStats, PacketBuf, PacketIo};

use crate::config::{Backend, LinkConfig};
use crate::engine::Devices;

/// The chosen backend and, for `auto`, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendChoice {
    /// What is used.
    pub backend: &'static str,
    /// Why (a fallback, or what AF_XDP could not have), to log.
    pub reason: Option<String>,
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
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        match self {
            LinkDevice::Packet(d) => d.wait(timeout),
            LinkDevice::XdpRx(d, _) => d.wait(timeout),
            LinkDevice::XdpTx(d) => d.wait(timeout),
        }
    }

    fn stats(&self) -> IoStats {
        match self {
            LinkDevice::Packet(d) => d.stats(),
            LinkDevice::XdpRx(d, _) => d.stats(),
            LinkDevice::XdpTx(d) => d.stats(),
        }
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            LinkDevice::Packet(d) => d.poll_fd(),
            LinkDevice::XdpRx(d, _) => d.poll_fd(),
            LinkDevice::XdpTx(d) => d.poll_fd(),
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
    let (in_rx, in_tx, in_info) = xdp::open(&link.ingress, &cfg)?;
    let (eg_rx, eg_tx, eg_info) = xdp::open(&link.egress, &cfg)?;
    for (dev, info) in [(&link.ingress, in_info), (&link.egress, eg_info)] {
        notes.extend(info.notes.iter().map(|n| format!("{dev}: {n}")));
    }
    let holder = |dev: &str| -> Result<Option<Box<PacketSocket>>, IoError> {
        link.promiscuous
            .then(|| promiscuous_holder(dev).map(Box::new))
            .transpose()
    };
    Ok(Devices {
        ingress_rx: LinkDevice::XdpRx(in_rx, holder(&link.ingress)?),
        egress_tx: LinkDevice::XdpTx(eg_tx),
        egress_rx: LinkDevice::XdpRx(eg_rx, holder(&link.egress)?),
        ingress_tx: LinkDevice::XdpTx(in_tx),
    })
}

/// Opens the four AF_PACKET sockets for `link`.
fn open_packet(link: &LinkConfig) -> Result<Devices<LinkDevice>, IoError> {
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
    let open = |dev: &str, role: Role| {
        let promiscuous = link.promiscuous && !matches!(role, Role::Tx(_));
        PacketSocket::open(dev, role, promiscuous).map(LinkDevice::Packet)
    };
    Ok(Devices {
        ingress_rx: open(&link.ingress, Role::RxFrames(rx))?,
        egress_tx: open(&link.egress, Role::Tx(tx))?,
        egress_rx: open(&link.egress, Role::RxFrames(rx))?,
        ingress_tx: open(&link.ingress, Role::Tx(tx))?,
    })
}

/// Opens the link's four devices on the configured backend and the buffer
/// pool (leaked: it lives as long as the process, see
/// [`crate::frame::Frame`]).
pub fn open_packet_devices(
    link: &LinkConfig,
) -> Result<(Devices<LinkDevice>, &'static BufPool, BackendChoice), IoError> {
    let mut notes = Vec::new();
    let (devices, backend) = match link.backend {
        Backend::Packet => (open_packet(link)?, "packet"),
        Backend::Xdp => (open_xdp(link, &mut notes)?, "xdp"),
        Backend::Auto => match open_xdp(link, &mut notes) {
            Ok(d) => (d, "xdp"),
            Err(e) => {
                notes = vec![format!(
                    "backend auto: AF_XDP could not open ({e}); using AF_PACKET"
                )];
                (open_packet(link)?, "packet")
            }
        },
    };
    let frame_size = (link.max_frame as usize + 4).next_power_of_two().max(2048);
    let pool = BufPool::new(link.buffers as usize, frame_size).ok_or_else(|| IoError::Config {
        device: link.ingress.clone(),
        what: format!(
            "{} buffers of {frame_size} bytes: outside the pool's limits",
            link.buffers
        ),
    })?;
    let pool: &'static BufPool = Box::leak(Box::new(pool));
    let reason = (!notes.is_empty()).then(|| notes.join("; "));
    Ok((devices, pool, BackendChoice { backend, reason }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
