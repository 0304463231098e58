//! Packet I/O for pktsched, with no scheduling in it: frame buffers from a
//! fixed pool ([`buf`]), one small device trait ([`PacketIo`]: receive a
//! batch, send a batch, buffers go back to the pool), its implementations
//! — AF_PACKET rings ([`packet`]), AF_XDP sockets ([`xdp`]) and in-memory
//! devices for tests ([`mem`]) — a `bpf(2)` loader with no C toolchain
//! ([`bpf`]: an eBPF assembler, maps, XDP load/attach/test-run, the XSKMAP
//! redirect and the frame classifier compiled to XDP), the frame
//! classifier ([`classify`]), frame building for tests and generators
//! ([`frame`], with the [`frame::Stamp`] payload codec and the shared
//! clock in [`clock`]), and test topologies in network namespaces
//! ([`netns`]).
//!
//! Per-class receive rings for the AF_PACKET fallback: [`fanout`] joins one
//! socket per class in a `PACKET_FANOUT_CBPF` group whose classic-BPF
//! program ([`cbpf`]: assembler, load-time checks, interpreter, compiler
//! from the classifier's rules) picks the class in the kernel; busy-polling
//! socket options are in [`packet`].
//!
//! Per-class receive rings on AF_XDP: [`xdp::open_class_group`] opens one
//! socket per class sharing one UMEM and fill ring, the compiled
//! classifier redirecting each frame into its class's socket; both
//! groups implement [`ClassRx`].
//!
//! Not here yet: AF_XDP zero-copy into pool buffers (frames are copied
//! between the UMEM and the pool; zero-copy *binding* is tried where the
//! driver offers it) and several queues per interface. [`PacketIo`] keeps the devices interchangeable:
//! batches in, batches out, buffers owned by a pool, one pollable
//! descriptor ([`PacketIo::poll_fd`]), and counters that name where frames
//! were lost ([`IoStats`]).
//!
//! `unsafe` is denied except in [`packet`] (the socket options, the mmap'ed
//! rings, busy polling), [`fanout`] (the `sock_fprog` pointer, `poll`,
//! `getsockopt`), [`xdp`] (the UMEM and the rings), [`bpf`] (the `bpf(2)` system
//! call), [`netns`] (`setns`, `geteuid`) and [`clock`]
//! (`clock_gettime`); every block has its `// SAFETY:` note.

#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(unsafe_code)]
pub mod bpf;
pub mod buf;
pub mod cbpf;
pub mod class_rx;
pub mod classify;
#[allow(unsafe_code)]
pub mod clock;
#[allow(unsafe_code)]
pub mod fanout;
pub mod frame;
pub mod mem;
#[allow(unsafe_code)]
pub mod netns;
#[allow(unsafe_code)]
pub mod packet;
#[allow(unsafe_code)]
pub mod xdp;

/// The test crates' one way of saying a check went unmeasured here,
/// for the unit tests too (`ci/test.sh` lists what it reports).
#[cfg(test)]
#[path = "../tests/common/untested.rs"]
mod untested;

use std::os::fd::BorrowedFd;
use std::time::Duration;

pub use buf::{BufPool, PacketBuf, PoolStats};
pub use class_rx::ClassRx;

/// Errors of a device.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// A system call failed.
    #[error("{device}: {call}: {source}")]
    Sys {
        /// The interface.
        device: String,
        /// What was being done (`socket`, `bind`, `PACKET_RX_RING`, ...).
        call: &'static str,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A setting is outside what the device supports.
    #[error("{device}: {what}")]
    Config {
        /// The interface.
        device: String,
        /// What is wrong and what is allowed.
        what: String,
    },
}

/// The kind of kernel receive ring behind a device, which says which of
/// the ring counters of [`IoStats`] the kernel keeps for it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum RxRingKind {
    /// No kernel receive ring (a transmit socket, an in-memory device):
    /// no ring-full, fill-empty or freeze counter.
    #[default]
    None,
    /// An AF_PACKET TPACKET_V3 ring of blocks: ring full (`tp_drops`)
    /// and queue freezes (`tp_freeze_q_cnt`); no fill ring.
    PacketBlocks,
    /// An AF_PACKET TPACKET_V2 ring of frame slots: ring full
    /// (`tp_drops`); no fill ring, no freezes (a V3 block notion).
    PacketSlots,
    /// An AF_XDP RX ring and its fill ring: ring full and fill ring
    /// empty (`XDP_STATISTICS`); no freezes.
    Xdp,
}

impl RxRingKind {
    /// Whether the kernel counts frames lost to a full receive ring.
    pub fn counts_ring_full(self) -> bool {
        self != RxRingKind::None
    }

    /// Whether there is a fill ring whose emptiness the kernel counts.
    pub fn counts_fill_empty(self) -> bool {
        self == RxRingKind::Xdp
    }

    /// Whether the kernel counts receive-queue freezes.
    pub fn counts_freezes(self) -> bool {
        self == RxRingKind::PacketBlocks
    }
}

/// The kind of kernel transmit ring behind a device, which says whether
/// [`IoStats::tx_invalid`] and [`IoStats::tx_ring_empty`] mean anything.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum TxRingKind {
    /// No AF_XDP transmit ring (AF_PACKET, in memory, receive only): the
    /// kernel keeps no invalid-descriptor count.
    #[default]
    Other,
    /// An AF_XDP TX ring: the kernel counts the descriptors it refused
    /// (`tx_invalid_descs`) and the times it found the ring empty.
    Xdp,
}

impl TxRingKind {
    /// Whether the kernel counts refused transmit descriptors.
    pub fn counts_invalid(self) -> bool {
        self == TxRingKind::Xdp
    }
}

/// A device's counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Which ring counters below the kernel keeps for this device (those
    /// it does not keep stay 0 and mean nothing).
    pub rx_ring: RxRingKind,
    /// Which transmit ring counters below the kernel keeps for this
    /// device.
    pub tx_ring: TxRingKind,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_kernel_drops: u64,
    /// Frames dropped because the pool had no buffer.
    pub rx_no_buffer: u64,
    /// Frames longer than a pool buffer, or cut short by the ring's slot
    /// (AF_PACKET: longer on the wire than the ring kept), dropped.
    pub rx_oversize: u64,
    /// Times the kernel froze the receive queue because every block was
    /// still held by user space (`tp_freeze_q_cnt` of `PACKET_STATISTICS`,
    /// TPACKET_V3 rings only): the reader is too slow or holds blocks.
    pub rx_freezes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Times the transmit ring or the peer was full (waited and retried).
    pub tx_busy: u64,
    /// Frames that could not be sent after the retries (including
    /// `tx_oversize`).
    pub tx_failed: u64,
    /// Frames longer than a transmit slot (left unsent; also in
    /// `tx_failed`).
    pub tx_oversize: u64,
    /// Frames the kernel dropped because the receive ring had no room
    /// (also in `rx_kernel_drops`). AF_XDP: `rx_ring_full` of
    /// `XDP_STATISTICS`. AF_PACKET: `tp_drops` of `PACKET_STATISTICS`,
    /// which on a ring socket without a virtio-net header the kernel
    /// raises only when the ring has no free slot or block (a frozen V3
    /// queue included).
    pub rx_ring_full: u64,
    /// AF_XDP: times the kernel found the fill ring empty
    /// (`rx_fill_ring_empty_descs`): the reader returns frames too slowly.
    pub rx_fill_empty: u64,
    /// AF_XDP: the kernel's `rx_invalid_descs`, counted on the RX ring the
    /// kernel itself fills, so 0 in practice (fill-ring entries it refuses
    /// are counted on the fill ring, which `XDP_STATISTICS` does not
    /// report); kept for completeness, not shown in the stats.
    pub rx_invalid: u64,
    /// AF_XDP: times the kernel found the TX ring empty when it looked
    /// (`tx_ring_empty_descs`; informational).
    pub tx_ring_empty: u64,
    /// AF_XDP: transmit descriptors the kernel refused as invalid
    /// (`tx_invalid_descs`; those frames were not sent).
    pub tx_invalid: u64,
}

/// A packet device: one direction or both of one interface.
pub trait PacketIo: Send {
    /// Receives up to `max` frames into buffers from `pool`, appended to
    /// `out`; returns how many. Never blocks (see [`PacketIo::wait`]).
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError>;

    /// Sends the frames of `frames` in order, returning the buffers of
    /// those sent to `pool`; what could not be sent stays in `frames`, in
    /// its order: a tail the device had no room for (after its bounded
    /// retries), and any frame too long for a transmit slot (counted
    /// `tx_oversize`), which the frames behind it do not wait for — so what
    /// stays is not always a tail. Returns how many were sent.
    fn send_batch(&mut self, frames: &mut Vec<PacketBuf>, pool: &BufPool)
    -> Result<usize, IoError>;

    /// Waits up to `timeout` until a receive may find frames.
    fn wait(&mut self, timeout: Duration) -> Result<(), IoError>;

    /// Counters.
    fn stats(&self) -> IoStats;

    /// The descriptor to `poll(2)`/`epoll(7)` when one thread waits on
    /// several devices (readable: a receive may find frames); `None` for
    /// devices without one (in-memory ones), which the caller then polls
    /// with [`PacketIo::wait`] or by trying.
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}
