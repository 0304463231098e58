//! Opening the pipeline's four sockets on the config's interfaces.

use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::{BufPool, IoError};

use crate::config::{Backend, LinkConfig};
use crate::engine::Devices;

/// The chosen backend and, for `auto`, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendChoice {
    /// What is used.
    pub backend: &'static str,
    /// Why (for `auto`), to log.
    pub reason: Option<String>,
}

/// The transmit slot size for frames of up to `max_frame` bytes.
fn tx_slot(max_frame: u32) -> u32 {
    (max_frame + 64).next_power_of_two().max(2048)
}

/// Opens the four AF_PACKET sockets for `link` and the buffer pool (leaked:
/// it lives as long as the process, see [`crate::frame::Frame`]).
pub fn open_packet_devices(
    link: &LinkConfig,
) -> Result<(Devices<PacketSocket>, &'static BufPool, BackendChoice), IoError> {
    let choice = match link.backend {
        Backend::Packet => BackendChoice {
            backend: "packet",
            reason: None,
        },
        Backend::Auto => BackendChoice {
            backend: "packet",
            reason: Some(
                "backend auto: AF_XDP is not built into this version; using AF_PACKET".into(),
            ),
        },
        Backend::Xdp => {
            return Err(IoError::Config {
                device: link.ingress.clone(),
                what: "backend = \"xdp\": AF_XDP is not built into this version; allowed \
                       \"packet\" or \"auto\""
                    .into(),
            });
        }
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
    let devices = Devices {
        ingress_rx: PacketSocket::open(&link.ingress, Role::RxFrames(rx), link.promiscuous)?,
        egress_tx: PacketSocket::open(&link.egress, Role::Tx(tx), false)?,
        egress_rx: PacketSocket::open(&link.egress, Role::RxFrames(rx), link.promiscuous)?,
        ingress_tx: PacketSocket::open(&link.ingress, Role::Tx(tx), false)?,
    };
    Ok((devices, pool, choice))
}
