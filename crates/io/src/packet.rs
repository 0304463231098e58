//! AF_PACKET devices: a TPACKET_V3 receive ring and a TPACKET_V2 transmit
//! ring (with `PACKET_QDISC_BYPASS`), each on its own socket.
//!
//! * Receive: the kernel fills blocks of frames and hands a whole block
//!   over by setting `TP_STATUS_USER` in its header (or when the block
//!   timeout retires it half full); frames are copied into pool buffers
//!   and the block is given back at once. A VLAN tag the kernel moved into
//!   the frame's metadata is put back into the frame. Our own
//!   transmissions are not received (`PACKET_IGNORE_OUTGOING`).
//! * Transmit: frames are written into free slots (`TP_STATUS_AVAILABLE`),
//!   marked `TP_STATUS_SEND_REQUEST`, and `sendto(MSG_DONTWAIT)` kicks the
//!   batch. A kick may take only part of it, failing with `EAGAIN` /
//!   `ENOBUFS` or even succeeding: the kernel stops when the socket's send
//!   buffer is full of frames in flight (a veth peer in NAPI mode holds up
//!   to 256) and marks a frame the driver refused for sending again. So
//!   the kick is repeated until the newest frame has left
//!   `TP_STATUS_SEND_REQUEST` (the kernel takes frames in ring order), a
//!   bounded number of times, each retry counted (`tx_busy`); what is
//!   still left goes with the next `send_batch` (an empty one will do) or
//!   `wait`. Without this, the tail of a burst could sit in the ring until
//!   the next frame came.
//!
//! Busy polling is an opt-in setting ([`BusyPoll`]); per-class receive
//! rings fed by a fanout classifier are [`crate::fanout`]'s.
//!
//! The walking of blocks and frames is in pure functions over byte slices
//! ([`block_header`], [`frame_at`]), bounds-checked against the block, so
//! a malformed header can never reach outside it; they are unit-tested on
//! synthetic blocks (and run under Miri).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::{BufPool, IoError, IoStats, PacketBuf, PacketIo, RxRingKind};

mod busy_poll;
mod layout;

pub use busy_poll::BusyPoll;
use layout::*;
pub use layout::{
    RxFrame, block_header, copy_frame, frame_at, realtime_to_monotonic, rx_monotonic_ns, slot_frame,
};

/// Receive ring geometry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RxRing {
    /// Bytes per block (a multiple of the page size).
    pub block_size: u32,
    /// Blocks.
    pub block_count: u32,
    /// Most time a partly filled block waits before the kernel hands it
    /// over, ms.
    pub timeout_ms: u32,
}

impl Default for RxRing {
    fn default() -> Self {
        RxRing {
            block_size: 1 << 18,
            block_count: 16,
            timeout_ms: 1,
        }
    }
}

/// Geometry of a ring of fixed frame slots (TPACKET_V2): the transmit
/// ring, and the low-latency receive ring.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FrameRing {
    /// Bytes per slot (header + frame; a power of two ≥ 2048 for 1514-byte
    /// frames).
    pub frame_size: u32,
    /// Slots.
    pub frame_count: u32,
}

impl Default for FrameRing {
    fn default() -> Self {
        FrameRing {
            frame_size: 2048,
            frame_count: 1024,
        }
    }
}

/// What kind of socket to open.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Receive only, TPACKET_V3 blocks: fewest wake-ups, but a frame may
    /// wait in a partly filled block until its timeout (≥ 1 ms).
    Rx(RxRing),
    /// Receive only, TPACKET_V2 frame slots: each frame is readable as soon
    /// as the kernel wrote it (the shaper's choice: latency).
    RxFrames(FrameRing),
    /// Transmit only.
    Tx(FrameRing),
}

/// An mmap'ed ring, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; the
// socket that uses it moves with it, and only `&mut self` methods touch it.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; nothing
        // borrows the mapping once its owner is dropped.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// An AF_PACKET socket with one ring.
///
/// Busy polling ([`BusyPoll`], [`PacketSocket::set_busy_poll`]) is an
/// opt-in setting.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    map: Mapping,
    role: Role,
    device: String,
    /// Receive: the block being read and the next frame in it.
    block: usize,
    cursor: Option<(u32, usize)>,
    /// Transmit (and frame-slot receive): the next slot.
    slot: usize,
    /// Transmit: offset of the newest frame handed to the ring, until the
    /// kernel has taken it (`TP_STATUS_SEND_REQUEST` no longer set).
    tx_last: Option<usize>,
    /// Frames received since the kernel's drop counter was last read.
    since_stats: u32,
    /// Busy-polling settings applied (the kernel has no `getsockopt` for
    /// the budget).
    busy: BusyPoll,
    stats: IoStats,
}

pub(crate) fn sys(device: &str, call: &'static str) -> IoError {
    IoError::Sys {
        device: device.to_string(),
        call,
        source: io::Error::last_os_error(),
    }
}

/// `setsockopt(fd, level, name, value)`; `value` must be plain data with
/// no pointers in it.
pub(crate) fn setopt<T: Copy>(
    fd: i32,
    level: i32,
    name: i32,
    value: &T,
    device: &str,
    call: &'static str,
) -> Result<(), IoError> {
    // SAFETY: `value` points to a live `T` of the given size for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        Err(sys(device, call))
    } else {
        Ok(())
    }
}

/// The interface index of `device`.
pub fn if_index(device: &str) -> Result<i32, IoError> {
    let name = CString::new(device).map_err(|_| IoError::Config {
        device: device.to_string(),
        what: "an interface name cannot contain a NUL byte".into(),
    })?;
    // SAFETY: `name` is a valid NUL-terminated string for the call.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        return Err(IoError::Config {
            device: device.to_string(),
            what: "no such interface in this network namespace".into(),
        });
    }
    Ok(idx as i32)
}

fn check_geometry(device: &str, role: Role) -> Result<usize, IoError> {
    let bad = |what: String| IoError::Config {
        device: device.to_string(),
        what,
    };
    match role {
        Role::Rx(r) => {
            if r.block_size < 4096 || !r.block_size.is_power_of_two() || r.block_size > 1 << 24 {
                return Err(bad(format!(
                    "rx block_size {}: allowed a power of two 4096..=16777216",
                    r.block_size
                )));
            }
            if r.block_count == 0 || r.block_count > 1024 || r.timeout_ms > 1000 {
                return Err(bad("rx block_count 1..=1024, timeout_ms 0..=1000".into()));
            }
            Ok(r.block_size as usize * r.block_count as usize)
        }
        Role::Tx(t) | Role::RxFrames(t) => {
            if t.frame_size < 256 || !t.frame_size.is_power_of_two() || t.frame_size > 1 << 16 {
                return Err(bad(format!(
                    "tx frame_size {}: allowed a power of two 256..=65536",
                    t.frame_size
                )));
            }
            if t.frame_count == 0 || t.frame_count > 1 << 16 {
                return Err(bad(format!(
                    "tx frame_count {}: allowed 1..=65536",
                    t.frame_count
                )));
            }
            let block = t.frame_size.max(4096) as usize;
            Ok((t.frame_size as usize * t.frame_count as usize).next_multiple_of(block))
        }
    }
}

/// Sets the TPACKET version, the per-role option and the ring of a fresh
/// socket.
fn set_up_ring(fdn: i32, role: Role, device: &str) -> Result<(), IoError> {
    let one: libc::c_int = 1;
    match role {
        Role::Rx(r) => {
            let v3 = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
            setopt(
                fdn,
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                &v3,
                device,
                "PACKET_VERSION",
            )?;
            setopt(
                fdn,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &one,
                device,
                "PACKET_IGNORE_OUTGOING",
            )?;
            let req = libc::tpacket_req3 {
                tp_block_size: r.block_size,
                tp_block_nr: r.block_count,
                tp_frame_size: 2048,
                tp_frame_nr: r.block_size / 2048 * r.block_count,
                tp_retire_blk_tov: r.timeout_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            setopt(
                fdn,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                &req,
                device,
                "PACKET_RX_RING",
            )?;
        }
        Role::Tx(t) | Role::RxFrames(t) => {
            let v2 = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
            setopt(
                fdn,
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                &v2,
                device,
                "PACKET_VERSION",
            )?;
            let (opt, name, ring, ring_name) = if matches!(role, Role::Tx(_)) {
                let bypass = libc::PACKET_QDISC_BYPASS;
                (
                    bypass,
                    "PACKET_QDISC_BYPASS",
                    libc::PACKET_TX_RING,
                    "PACKET_TX_RING",
                )
            } else {
                let ignore = libc::PACKET_IGNORE_OUTGOING;
                (
                    ignore,
                    "PACKET_IGNORE_OUTGOING",
                    libc::PACKET_RX_RING,
                    "PACKET_RX_RING",
                )
            };
            setopt(fdn, libc::SOL_PACKET, opt, &one, device, name)?;
            // Blocks must be whole pages; slots stay contiguous at
            // `i × frame_size` because a block holds whole slots.
            let block = t.frame_size.max(4096);
            let per_block = block / t.frame_size;
            let req = libc::tpacket_req {
                tp_block_size: block,
                tp_block_nr: t.frame_count.div_ceil(per_block),
                tp_frame_size: t.frame_size,
                tp_frame_nr: t.frame_count.div_ceil(per_block) * per_block,
            };
            setopt(fdn, libc::SOL_PACKET, ring, &req, device, ring_name)?;
        }
    }
    Ok(())
}

impl PacketSocket {
    /// `true` if the receive ring's next block (or frame slot) belongs to
    /// the user: a receive would take frames now. Read from the ring's
    /// status word in memory, no system call; always `false` for a
    /// transmit socket.
    pub fn rx_ready(&self) -> bool {
        let ready_at = match self.role {
            Role::Rx(r) => self.block * r.block_size as usize + BLOCK_STATUS,
            Role::RxFrames(f) => self.slot * f.frame_size as usize + TX_STATUS,
            Role::Tx(_) => return false,
        };
        self.status(ready_at).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Opens a socket on `device` (in the calling thread's network
    /// namespace) with `role`'s ring. `promiscuous` receives frames for any
    /// MAC address (a bump in the wire needs it).
    pub fn open(device: &str, role: Role, promiscuous: bool) -> Result<PacketSocket, IoError> {
        Self::open_with(device, role, promiscuous, &|_| Ok(()))
    }

    /// [`PacketSocket::open`], calling `before_bind` on the descriptor
    /// once the ring is set up and before the socket is bound (when it
    /// starts receiving): for a filter that must be in place from the
    /// first frame.
    pub(crate) fn open_with(
        device: &str,
        role: Role,
        promiscuous: bool,
        before_bind: &dyn Fn(BorrowedFd<'_>) -> Result<(), IoError>,
    ) -> Result<PacketSocket, IoError> {
        let len = check_geometry(device, role)?;
        let ifindex = if_index(device)?;
        let proto = match role {
            Role::Rx(_) | Role::RxFrames(_) => (libc::ETH_P_ALL as u16).to_be(),
            Role::Tx(_) => 0,
        };
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if raw < 0 {
            return Err(sys(device, "socket(AF_PACKET)"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let fdn = fd.as_raw_fd();
        set_up_ring(fdn, role, device)?;
        // SAFETY: mapping the ring the kernel just set up on this socket,
        // `len` bytes as configured; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fdn,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(sys(device, "mmap(ring)"));
        }
        let map = Mapping {
            base: base.cast(),
            len,
        };
        before_bind(fd.as_fd())?;
        // SAFETY: sockaddr_ll is plain data; zero is valid before filling.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll for the call.
        let rc = unsafe {
            libc::bind(
                fdn,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(sys(device, "bind"));
        }
        if promiscuous && !matches!(role, Role::Tx(_)) {
            // SAFETY: packet_mreq is plain data; zero is valid before filling.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = ifindex;
            mr.mr_type = libc::PACKET_MR_PROMISC as u16;
            setopt(
                fdn,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mr,
                device,
                "PACKET_MR_PROMISC",
            )?;
        }
        Ok(PacketSocket {
            fd,
            map,
            role,
            device: device.to_string(),
            block: 0,
            cursor: None,
            slot: 0,
            tx_last: None,
            since_stats: 0,
            busy: BusyPoll::default(),
            stats: IoStats {
                rx_ring: match role {
                    Role::Rx(_) => RxRingKind::PacketBlocks,
                    Role::RxFrames(_) => RxRingKind::PacketSlots,
                    Role::Tx(_) => RxRingKind::None,
                },
                ..IoStats::default()
            },
        })
    }

    /// The status word at `offset` in the ring, as an atomic.
    fn status(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset + 4 <= self.map.len && offset.is_multiple_of(4));
        // SAFETY: `offset` is a 4-aligned offset inside the mapping (block
        // and slot starts are page/power-of-two aligned) that the kernel
        // and we access only atomically; the mapping lives as long as self.
        unsafe { &*self.map.base.add(offset).cast::<AtomicU32>() }
    }

    fn rx_geometry(&self) -> (usize, usize) {
        match self.role {
            Role::Rx(r) => (r.block_size as usize, r.block_count as usize),
            Role::Tx(_) | Role::RxFrames(_) => (0, 0),
        }
    }

    /// Copies one received frame into a pool buffer appended to `out`;
    /// `false` (and counted) if no buffer was free or it did not fit.
    fn take(
        &mut self,
        bytes: &[u8],
        f: &RxFrame,
        clock_offset: i64,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
    ) -> bool {
        if f.truncated {
            // Only part of it is in the ring: never passed on as if whole.
            self.stats.rx_oversize += 1;
            return false;
        }
        let Some(mut buf) = pool.get() else {
            self.stats.rx_no_buffer += 1;
            return false;
        };
        if !copy_frame(bytes, f.vlan, &mut buf) {
            self.stats.rx_oversize += 1;
            pool.put(buf);
            return false;
        }
        buf.set_rx_ns(rx_monotonic_ns(f.rx_real_ns, clock_offset));
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += buf.len() as u64;
        out.push(buf);
        true
    }

    /// Receive from a TPACKET_V2 ring: slot by slot.
    fn recv_slots(
        &mut self,
        ring: FrameRing,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let (fsize, fcount) = (ring.frame_size as usize, ring.frame_count as usize);
        let clock_offset = realtime_to_monotonic();
        let mut n = 0;
        while n < max {
            let off = self.slot * fsize;
            let status = self.status(off + TX_STATUS).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is ours (TP_STATUS_USER) until we write
            // TP_STATUS_KERNEL below; the kernel does not write it meanwhile.
            let slot = unsafe { std::slice::from_raw_parts(self.map.base.add(off), fsize) };
            match slot_frame(slot) {
                Some(f) => {
                    n += usize::from(self.take(&slot[f.data.clone()], &f, clock_offset, pool, out))
                }
                None => self.stats.rx_oversize += 1,
            }
            self.status(off + TX_STATUS)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.slot = (self.slot + 1) % fcount;
            self.since_stats += 1;
        }
        if self.since_stats >= 1024 {
            self.since_stats = 0;
            self.read_kernel_stats();
        }
        n
    }

    /// Reads the kernel's receive drop and freeze counters now (they are
    /// otherwise read as blocks are handed back, every 1024 frames of a
    /// frame-slot ring, and whenever [`PacketIo::wait`] finds nothing).
    pub fn refresh_stats(&mut self) -> IoStats {
        if !matches!(self.role, Role::Tx(_)) {
            self.read_kernel_stats();
        }
        self.stats
    }

    /// The socket's descriptor (for socket options set by other modules).
    pub(crate) fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The interface.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// `true` while frames handed to the transmit ring have not all been
    /// taken by the kernel (after a push-back outlasted the retries); the
    /// next [`PacketIo::send_batch`] (an empty one will do) or
    /// [`PacketIo::wait`] kicks them again.
    pub fn tx_pending(&self) -> bool {
        self.tx_last.is_some_and(|last| {
            self.status(last).load(Ordering::Acquire) == libc::TP_STATUS_SEND_REQUEST
        })
    }

    /// Adds the kernel's drop counter (read and reset by the call).
    fn read_kernel_stats(&mut self) {
        // SAFETY: tpacket_stats_v3 is plain data; zero is valid.
        let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` are valid for the call and sized together.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if rc == 0 {
            self.stats.rx_kernel_drops += u64::from(st.tp_drops);
            self.stats.rx_ring_full += u64::from(st.tp_drops);
            // Zero for a TPACKET_V2 ring (its shorter struct leaves it).
            self.stats.rx_freezes += u64::from(st.tp_freeze_q_cnt);
        }
    }

    fn recv_frames(&mut self, pool: &BufPool, out: &mut Vec<PacketBuf>, max: usize) -> usize {
        let (bsize, bcount) = self.rx_geometry();
        let clock_offset = realtime_to_monotonic();
        let mut n = 0;
        while n < max && bcount > 0 {
            let off = self.block * bsize;
            if self.status(off + BLOCK_STATUS).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the block is ours (TP_STATUS_USER) until we write
            // TP_STATUS_KERNEL below; the kernel does not write it meanwhile.
            let block = unsafe { std::slice::from_raw_parts(self.map.base.add(off), bsize) };
            let (mut left, mut at) = match self.cursor {
                Some(c) => c,
                None => block_header(block).unwrap_or((0, 0)),
            };
            while left > 0 && n < max {
                let Some(f) = frame_at(block, at) else {
                    left = 0;
                    break;
                };
                left -= 1;
                at = f.next;
                n += usize::from(self.take(&block[f.data.clone()], &f, clock_offset, pool, out));
                if at == 0 {
                    left = 0;
                }
            }
            if left > 0 {
                self.cursor = Some((left, at));
                break;
            }
            self.cursor = None;
            self.status(off + BLOCK_STATUS)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.block = (self.block + 1) % bcount;
            self.read_kernel_stats();
        }
        n
    }

    /// Kicks the transmit ring until the kernel has taken every frame
    /// handed to it, or the retries run out; `false` then, or on an error
    /// other than push-back. The kernel takes frames in ring order, so the
    /// newest one leaving `TP_STATUS_SEND_REQUEST` means all have. A kick
    /// can return success having taken only some: with `MSG_DONTWAIT` the
    /// kernel stops when the socket's send buffer is full of frames still
    /// in flight (a veth in NAPI mode holds up to 256), and a frame the
    /// driver refused is marked for sending again. Each retry is counted
    /// in `tx_busy`.
    fn flush(&mut self) -> bool {
        let Some(last) = self.tx_last else {
            return true;
        };
        for attempt in 0..TX_RETRIES {
            // SAFETY: sendto with no buffer and no address kicks the TX ring
            // of this bound socket.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
                    _ => return false,
                }
            }
            if self.status(last).load(Ordering::Acquire) != libc::TP_STATUS_SEND_REQUEST {
                self.tx_last = None;
                return true;
            }
            self.stats.tx_busy += 1;
            if attempt > 8 {
                std::thread::sleep(Duration::from_micros(20));
            } else {
                std::hint::spin_loop();
            }
        }
        false
    }

    /// Copies frames into the TX ring in order and kicks the kernel. A
    /// frame longer than a slot is left unsent (counted as `tx_oversize`
    /// and `tx_failed`) and the frames behind it still go: what is left in
    /// `frames` afterwards, in order, is the oversize frames and whatever
    /// a full ring kept back. Returns the frames sent.
    fn send_frames(&mut self, frames: &mut Vec<PacketBuf>, pool: &BufPool) -> usize {
        let Role::Tx(t) = self.role else { return 0 };
        let (fsize, fcount) = (t.frame_size as usize, t.frame_count as usize);
        let room = fsize - TX_DATA;
        // frames[..kept]: the oversize ones, in order; frames[kept..next]:
        // copied into the ring (their order no longer matters).
        let (mut next, mut kept) = (0, 0);
        let mut waited = 0u32;
        while next < frames.len() {
            if frames[next].len() > room {
                // Longer than a slot: size the ring for the link's frames.
                self.stats.tx_failed += 1;
                self.stats.tx_oversize += 1;
                frames.swap(kept, next);
                kept += 1;
                next += 1;
                continue;
            }
            let off = self.slot * fsize;
            let status = self.status(off + TX_STATUS).load(Ordering::Acquire);
            if status == libc::TP_STATUS_WRONG_FORMAT {
                self.stats.tx_failed += 1;
                self.status(off + TX_STATUS)
                    .store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
            } else if status != libc::TP_STATUS_AVAILABLE {
                // The ring is full: send what is queued, then wait a little.
                if !self.flush() || waited > TX_RETRIES {
                    break;
                }
                waited += 1;
                std::thread::sleep(Duration::from_micros(10));
                continue;
            }
            let frame = frames[next].as_slice();
            let len = frame.len();
            // SAFETY: the slot is ours (TP_STATUS_AVAILABLE) until we set
            // TP_STATUS_SEND_REQUEST; we write only inside it (`len` fits
            // the slot's room, checked above).
            unsafe {
                let slot = std::slice::from_raw_parts_mut(self.map.base.add(off), fsize);
                slot[TX_LEN..TX_LEN + 4].copy_from_slice(&(len as u32).to_ne_bytes());
                slot[TX_SNAPLEN..TX_SNAPLEN + 4].copy_from_slice(&(len as u32).to_ne_bytes());
                slot[TX_DATA..TX_DATA + len].copy_from_slice(&frame[..len]);
            }
            self.status(off + TX_STATUS)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_last = Some(off + TX_STATUS);
            self.slot = (self.slot + 1) % fcount;
            next += 1;
        }
        // Also with nothing new: frames an earlier call left go now. What
        // the kernel has still not taken after the retries stays marked in
        // the ring and goes at the next kick (next send_batch or wait).
        self.flush();
        for buf in frames.drain(kept..next) {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += buf.len() as u64;
            pool.put(buf);
        }
        next - kept
    }
}

impl PacketIo for PacketSocket {
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        Ok(match self.role {
            Role::RxFrames(ring) => self.recv_slots(ring, pool, out, max),
            Role::Rx(_) | Role::Tx(_) => self.recv_frames(pool, out, max),
        })
    }

    fn send_batch(
        &mut self,
        frames: &mut Vec<PacketBuf>,
        pool: &BufPool,
    ) -> Result<usize, IoError> {
        Ok(self.send_frames(frames, pool))
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        if let Role::Tx(_) = self.role {
            // Nothing to receive; frames still in the ring go now.
            self.flush();
            std::thread::sleep(timeout);
            return Ok(());
        }
        if self.rx_ready() {
            return Ok(());
        }
        // Idle: bring the kernel's drop counters up to date, so drops of a
        // burst followed by silence show in `stats` (they are otherwise
        // read as blocks retire, or every 1024 frames of a V2 ring).
        self.read_kernel_stats();
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(sys(&self.device, "poll"));
        }
        Ok(())
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block as the kernel lays it out: header, then frames each with a
    /// `tpacket3_hdr` at a 16-aligned offset.
    fn block(frames: &[(&[u8], Option<u16>)]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[BLOCK_FIRST..BLOCK_FIRST + 4].copy_from_slice(&(BLOCK_HEADER_LEN as u32).to_ne_bytes());
        let mut at = BLOCK_HEADER_LEN;
        for (i, (data, vlan)) in frames.iter().enumerate() {
            let mac = 66usize; // TPACKET3_HDRLEN-ish plus padding, as the kernel does
            let next = if i + 1 == frames.len() {
                0
            } else {
                (mac + data.len()).next_multiple_of(16)
            };
            let h = &mut b[at..at + PKT_HEADER_LEN];
            h[PKT_NEXT..PKT_NEXT + 4].copy_from_slice(&(next as u32).to_ne_bytes());
            h[PKT_SNAPLEN..PKT_SNAPLEN + 4].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            h[PKT_MAC..PKT_MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
            if let Some(tci) = vlan {
                h[PKT_STATUS..PKT_STATUS + 4]
                    .copy_from_slice(&libc::TP_STATUS_VLAN_VALID.to_ne_bytes());
                h[PKT_VLAN_TCI..PKT_VLAN_TCI + 4].copy_from_slice(&u32::from(*tci).to_ne_bytes());
            }
            b[at + mac..at + mac + data.len()].copy_from_slice(data);
            at += next;
        }
        b
    }

    type Walked = Vec<(Vec<u8>, Option<(u16, u16)>)>;

    fn walk(b: &[u8]) -> Walked {
        let (n, mut at) = block_header(b).expect("header");
        let mut out = Vec::new();
        for _ in 0..n {
            let Some(f) = frame_at(b, at) else { break };
            out.push((b[f.data.clone()].to_vec(), f.vlan));
            if f.next == 0 {
                break;
            }
            at = f.next;
        }
        out
    }

    #[test]
    fn frames_are_walked_in_order_with_their_vlan_tags() {
        let a = [1u8; 60];
        let c = [2u8; 1514];
        let b = block(&[(&a, None), (&c, Some(100)), (&a, None)]);
        let got = walk(&b);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (a.to_vec(), None));
        assert_eq!(got[1], (c.to_vec(), Some((0x8100, 100))));
        let pool = BufPool::new(1, 2048).expect("pool");
        let mut buf = pool.get().expect("buf");
        assert!(copy_frame(&got[1].0, got[1].1, &mut buf));
        assert_eq!(buf.len(), 1518);
        assert_eq!(&buf.as_slice()[12..16], &[0x81, 0x00, 0, 100]);
        assert_eq!(&buf.as_slice()[16..], &c[12..]);
    }

    #[test]
    fn malformed_headers_never_reach_outside_the_block() {
        let mut b = block(&[(&[7u8; 100], None)]);
        // A snaplen past the end.
        let at = BLOCK_HEADER_LEN;
        b[at + PKT_SNAPLEN..at + PKT_SNAPLEN + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(frame_at(&b, at), None);
        // A header past the end; a first-frame offset past the end.
        assert_eq!(frame_at(&b, b.len() - 10), None);
        assert_eq!(frame_at(&b, usize::MAX - 3), None);
        assert_eq!(block_header(&b[..20]), None);
        // A next offset that wraps.
        let mut c = block(&[(&[7u8; 100], None), (&[8u8; 100], None)]);
        c[at + PKT_NEXT..at + PKT_NEXT + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        let f = frame_at(&c, at).expect("first frame is fine");
        assert_eq!(frame_at(&c, f.next), None);
        // A frame cut to the ring's snap length is marked.
        let mut d = block(&[(&[7u8; 100], None)]);
        assert!(!frame_at(&d, at).expect("frame").truncated);
        d[at + PKT_LEN..at + PKT_LEN + 4].copy_from_slice(&9000u32.to_ne_bytes());
        assert!(frame_at(&d, at).expect("frame").truncated);
    }

    #[test]
    fn frame_slots_are_read_within_their_bounds() {
        let mut slot = vec![0u8; 2048];
        let data = [9u8; 100];
        slot[TX_SNAPLEN..TX_SNAPLEN + 4].copy_from_slice(&100u32.to_ne_bytes());
        slot[V2_MAC..V2_MAC + 2].copy_from_slice(&66u16.to_ne_bytes());
        slot[66..166].copy_from_slice(&data);
        let f = slot_frame(&slot).expect("frame");
        assert_eq!((&slot[f.data.clone()], f.vlan), (&data[..], None));
        slot[V2_STATUS..V2_STATUS + 4].copy_from_slice(&libc::TP_STATUS_VLAN_VALID.to_ne_bytes());
        slot[V2_VLAN_TCI..V2_VLAN_TCI + 2].copy_from_slice(&7u16.to_ne_bytes());
        assert_eq!(slot_frame(&slot).expect("frame").vlan, Some((0x8100, 7)));
        // Longer on the wire than kept: marked, so it is counted, not sent.
        assert!(!slot_frame(&slot).expect("frame").truncated);
        slot[TX_LEN..TX_LEN + 4].copy_from_slice(&101u32.to_ne_bytes());
        assert!(slot_frame(&slot).expect("frame").truncated);
        slot[TX_LEN..TX_LEN + 4].copy_from_slice(&100u32.to_ne_bytes());
        assert!(!slot_frame(&slot).expect("frame").truncated);
        slot[TX_SNAPLEN..TX_SNAPLEN + 4].copy_from_slice(&5000u32.to_ne_bytes());
        assert_eq!(slot_frame(&slot), None);
        slot[TX_SNAPLEN..TX_SNAPLEN + 4].copy_from_slice(&10u32.to_ne_bytes());
        slot[V2_MAC..V2_MAC + 2].copy_from_slice(&4u16.to_ne_bytes());
        assert_eq!(slot_frame(&slot), None, "data inside the header");
        assert_eq!(slot_frame(&slot[..10]), None);
    }

    #[test]
    fn opening_a_missing_interface_names_it() {
        let e = PacketSocket::open("nosuch0", Role::Rx(RxRing::default()), false)
            .expect_err("no such interface");
        assert!(e.to_string().contains("nosuch0"), "{e}");
        let e = PacketSocket::open(
            "lo",
            Role::Rx(RxRing {
                block_size: 1000,
                ..RxRing::default()
            }),
            false,
        )
        .expect_err("bad geometry");
        assert!(e.to_string().contains("power of two"), "{e}");
    }

    #[test]
    fn ring_header_receive_times_become_monotonic() {
        let mut b = block(&[(&[1u8; 60], None)]);
        let h = BLOCK_HEADER_LEN;
        b[h + PKT_SEC..h + PKT_SEC + 4].copy_from_slice(&5u32.to_ne_bytes());
        b[h + PKT_NSEC..h + PKT_NSEC + 4].copy_from_slice(&7u32.to_ne_bytes());
        let f = frame_at(&b, h).expect("frame");
        assert_eq!(f.rx_real_ns, 5_000_000_007);
        assert_eq!(rx_monotonic_ns(f.rx_real_ns, -4_000_000_000), 1_000_000_007);
        assert_eq!(rx_monotonic_ns(0, 123), 0, "no stamp stays unknown");
        assert_eq!(rx_monotonic_ns(5, -6), 0, "before the clock's start");
        let mut slot = vec![0u8; 256];
        slot[TX_SNAPLEN..TX_SNAPLEN + 4].copy_from_slice(&10u32.to_ne_bytes());
        slot[V2_MAC..V2_MAC + 2].copy_from_slice(&64u16.to_ne_bytes());
        slot[V2_SEC..V2_SEC + 4].copy_from_slice(&2u32.to_ne_bytes());
        slot[V2_NSEC..V2_NSEC + 4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(slot_frame(&slot).expect("slot").rx_real_ns, 2_000_000_003);
        // Now on both clocks: the offset maps one to the other.
        let off = realtime_to_monotonic();
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64;
        let mono = rx_monotonic_ns(real, off);
        let now = crate::clock::monotonic_ns();
        assert!(mono <= now && now - mono < 1_000_000_000, "{mono} {now}");
    }
}
