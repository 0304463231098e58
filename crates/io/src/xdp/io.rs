//! The data path of an AF_XDP device: [`XdpRx`] (fill + RX rings, the
//! first `rx_frames` UMEM frames) and [`XdpTx`] (TX + completion rings,
//! the rest). Each half touches only its own rings and frames, so the two
//! can run on different threads; the socket, the UMEM and the attached
//! program are shared and go when both halves are dropped.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::ring::{Consumer, Producer};
use super::socket::{self, Mapping, RingMap, Socket};
use super::{Shared, XdpConfig};
use crate::{BufPool, IoError, IoStats, PacketBuf, PacketIo, RxRingKind, TxRingKind};

/// Kicks and waits before a transmit gives up on the kernel taking the
/// ring (each counted in `tx_busy`).
const TX_RETRIES: u32 = 2000;
const DESC: usize = std::mem::size_of::<libc::xdp_desc>();

/// What the halves of one socket (or a class group and its transmit
/// half) share.
#[derive(Debug)]
pub(super) struct Core {
    /// First: the program is detached before the socket closes.
    pub(super) shared: Shared,
    pub(super) fd: OwnedFd,
    umem: Mapping,
    pub(super) frame_size: u32,
    pub(super) zero_copy: bool,
}

impl Core {
    /// The UMEM bytes `addr..addr + len`, if inside the frame that holds
    /// `addr` and inside the UMEM.
    pub(super) fn frame(&self, addr: u64, len: usize) -> Option<*mut u8> {
        let fs = u64::from(self.frame_size);
        let end = addr.checked_add(len as u64)?;
        if end > (addr / fs + 1) * fs || end > self.umem.len as u64 {
            return None;
        }
        // SAFETY: `addr + len` is inside the mapping (checked above).
        Some(unsafe { self.umem.base.add(addr as usize) })
    }

    /// The receive stamp the XDP program wrote in the 8 bytes before the
    /// frame at `addr` ([`crate::bpf::stamp`]), 0 if there is none; the
    /// bytes are cleared, so a frame later received into the same UMEM
    /// frame without a stamp (no metadata support) reads 0, not this one.
    fn take_rx_stamp(&self, addr: u64) -> u64 {
        const LEN: u64 = crate::bpf::stamp::STAMP_LEN as u64;
        if addr % u64::from(self.frame_size) < LEN {
            return 0;
        }
        let Some(p) = self.frame(addr - LEN, LEN as usize) else {
            return 0;
        };
        // SAFETY: 8 bytes inside the frame we own until it goes back to
        // the fill ring (checked by `frame`); nobody else touches it now.
        unsafe {
            let ns = std::ptr::read_unaligned(p.cast::<u64>());
            std::ptr::write_unaligned(p.cast::<u64>(), 0);
            ns
        }
    }
}

/// The receive half.
#[derive(Debug)]
pub struct XdpRx {
    core: Arc<Core>,
    fill: RingMap,
    rx: RingMap,
    fill_p: Producer,
    rx_c: Consumer,
    /// UMEM bytes of the receive half (its frames are below).
    rx_end: u64,
    need_wakeup: bool,
    busy_poll: bool,
    stats: IoStats,
}

/// The transmit half.
#[derive(Debug)]
pub struct XdpTx {
    core: Arc<Core>,
    tx: RingMap,
    comp: RingMap,
    tx_p: Producer,
    comp_c: Consumer,
    /// UMEM frames free for sending (allocated once).
    free: Vec<u64>,
    need_wakeup: bool,
    stats: IoStats,
}

/// The receive side's rings of a bound socket, its first `rx_frames`
/// UMEM frames not yet in the fill ring.
pub(super) struct RxParts {
    pub(super) core: Arc<Core>,
    pub(super) fill: RingMap,
    pub(super) rx: RingMap,
    pub(super) need_wakeup: bool,
}

/// Splits a bound socket into its receive rings and its transmit half.
pub(super) fn split_tx(sock: Socket, shared: Shared, cfg: &XdpConfig) -> (RxParts, XdpTx) {
    let Socket {
        fd,
        umem,
        fill,
        comp,
        rx,
        tx,
        zero_copy,
        need_wakeup,
    } = sock;
    let fs = u64::from(cfg.frame_size);
    let core = Arc::new(Core {
        shared,
        fd,
        umem,
        frame_size: cfg.frame_size,
        zero_copy,
    });
    let rx_end = u64::from(cfg.rx_frames) * fs;
    let t = XdpTx {
        core: core.clone(),
        tx_p: Producer::new(tx.size),
        comp_c: Consumer::new(comp.size),
        tx,
        comp,
        free: (0..u64::from(cfg.tx_frames))
            .map(|i| rx_end + i * fs)
            .collect(),
        need_wakeup,
        stats: IoStats::default(),
    };
    let parts = RxParts {
        core,
        fill,
        rx,
        need_wakeup,
    };
    (parts, t)
}

/// Splits a bound socket into its halves and stocks the fill ring.
pub(super) fn split(sock: Socket, shared: Shared, cfg: &XdpConfig) -> (XdpRx, XdpTx) {
    let (parts, t) = split_tx(sock, shared, cfg);
    let fs = u64::from(cfg.frame_size);
    let mut r = XdpRx {
        core: parts.core,
        fill_p: Producer::new(parts.fill.size),
        rx_c: Consumer::new(parts.rx.size),
        fill: parts.fill,
        rx: parts.rx,
        rx_end: u64::from(cfg.rx_frames) * fs,
        need_wakeup: parts.need_wakeup,
        busy_poll: cfg.busy_poll.is_some(),
        stats: IoStats::default(),
    };
    for i in 0..cfg.rx_frames {
        r.put_fill(i, u64::from(i) * fs);
    }
    r.fill_p.submit(r.fill.producer(), cfg.rx_frames);
    (r, t)
}

/// Copies the received frame `d` (of the receive half: below `rx_end`)
/// and its receive stamp into a pool buffer appended to `out`; counted in
/// `stats` either way.
pub(super) fn copy_out(
    core: &Core,
    rx_end: u64,
    d: &libc::xdp_desc,
    pool: &BufPool,
    out: &mut Vec<PacketBuf>,
    stats: &mut IoStats,
) -> bool {
    let len = d.len as usize;
    let Some(src) = core.frame(d.addr, len).filter(|_| d.addr < rx_end) else {
        stats.rx_oversize += 1;
        return false;
    };
    let rx_ns = core.take_rx_stamp(d.addr);
    let Some(mut buf) = pool.get() else {
        stats.rx_no_buffer += 1;
        return false;
    };
    // SAFETY: the frame is ours until its address goes back to the fill
    // ring (after this returns); `len` bytes from `src` are inside it.
    let bytes = unsafe { std::slice::from_raw_parts(src, len) };
    if !buf.fill(bytes) {
        stats.rx_oversize += 1;
        pool.put(buf);
        return false;
    }
    buf.set_rx_ns(rx_ns);
    stats.rx_packets += 1;
    stats.rx_bytes += len as u64;
    out.push(buf);
    true
}

/// Folds the kernel's receive counters of socket `fd` into `s`.
pub(super) fn fold_rx_kernel_stats(fd: i32, s: &mut IoStats) {
    s.rx_ring = RxRingKind::Xdp;
    if let Some(k) = socket::kernel_stats(fd) {
        s.rx_kernel_drops = k.rx_dropped + k.rx_ring_full;
        s.rx_ring_full = k.rx_ring_full;
        s.rx_fill_empty = k.rx_fill_ring_empty_descs;
        s.rx_invalid = k.rx_invalid_descs;
    }
}

fn poll(fd: i32, events: i16, timeout: Duration, device: &str) -> Result<(), IoError> {
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
        return Err(socket::sys(device, "poll"));
    }
    Ok(())
}

impl XdpRx {
    /// Writes UMEM address `addr` into the `i`-th free fill slot.
    fn put_fill(&mut self, i: u32, addr: u64) {
        let p = self.fill.desc(self.fill_p.slot(i), 8).cast::<u64>();
        // SAFETY: a fill slot not yet published is ours to write; it is
        // 8-aligned (ring offsets are checked) and inside the mapping.
        unsafe { p.write_volatile(addr) };
    }

    fn desc(&self, i: u32) -> libc::xdp_desc {
        let p = self
            .rx
            .desc(self.rx_c.slot(i), DESC)
            .cast::<libc::xdp_desc>();
        // SAFETY: the slot was published by the kernel (acquire on its
        // producer index) and is ours until we release it.
        unsafe { p.read_volatile() }
    }

    fn take(&mut self, d: &libc::xdp_desc, pool: &BufPool, out: &mut Vec<PacketBuf>) -> bool {
        copy_out(&self.core, self.rx_end, d, pool, out, &mut self.stats)
    }

    /// `true` if bound zero-copy.
    pub fn is_zero_copy(&self) -> bool {
        self.core.zero_copy
    }

    /// `true` if the RX ring holds frames a receive would take now: read
    /// from the ring's producer index in memory, no system call (a
    /// caller about to sleep skips a `ppoll` that would return at once).
    pub fn rx_ready(&mut self) -> bool {
        self.rx_c.available(self.rx.producer(), 1) > 0
    }

    fn wants_wakeup(&self) -> bool {
        self.need_wakeup
            && self.fill.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

impl XdpRx {
    /// Receives like [`PacketIo::recv_batch`], and pushes onto `classes`,
    /// one per frame received, the class the XDP classifier wrote into the
    /// frame's metadata ([`super::open_classified`]); `None` for a frame
    /// that came without room for it before the frame.
    pub fn recv_classified(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        classes: &mut Vec<Option<u16>>,
        max: usize,
    ) -> usize {
        self.receive(pool, out, Some(classes), max)
    }

    /// The class in the metadata before the frame at `addr` (its first 4
    /// bytes of [`crate::bpf::classify::META_LEN`]), if inside its UMEM
    /// frame.
    fn meta_class(&self, addr: u64) -> Option<u16> {
        const META: u64 = crate::bpf::classify::META_LEN as u64;
        if addr % u64::from(self.core.frame_size) < META {
            return None;
        }
        let p = self.core.frame(addr - META, 4)?;
        // SAFETY: 4 bytes inside the frame we own until it is returned to
        // the fill ring (checked by `frame`).
        let b = unsafe { std::ptr::read_unaligned(p.cast::<[u8; 4]>()) };
        Some(u32::from_ne_bytes(b) as u16)
    }

    fn receive(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        mut classes: Option<&mut Vec<Option<u16>>>,
        max: usize,
    ) -> usize {
        let avail = self
            .rx_c
            .available(self.rx.producer(), max.min(u32::MAX as usize) as u32);
        if avail == 0 {
            if self.busy_poll || self.wants_wakeup() {
                socket::kick_rx(self.core.fd.as_raw_fd());
            }
            return 0;
        }
        // Every frame of the receive half is in the fill ring, the RX ring
        // or the kernel: the fill ring has room for those being returned.
        let n = avail.min(self.fill_p.free(self.fill.consumer(), avail));
        let mask = !(u64::from(self.core.frame_size) - 1);
        let mut got = 0;
        for i in 0..n {
            let d = self.desc(i);
            if self.take(&d, pool, out) {
                got += 1;
                if let Some(c) = classes.as_deref_mut() {
                    c.push(self.meta_class(d.addr));
                }
            }
            self.put_fill(i, d.addr & mask);
        }
        self.rx_c.release(self.rx.consumer(), n);
        self.fill_p.submit(self.fill.producer(), n);
        if self.wants_wakeup() {
            socket::kick_rx(self.core.fd.as_raw_fd());
        }
        got
    }
}

impl PacketIo for XdpRx {
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        Ok(self.receive(pool, out, None, max))
    }

    fn send_batch(
        &mut self,
        _frames: &mut Vec<PacketBuf>,
        _pool: &BufPool,
    ) -> Result<usize, IoError> {
        Ok(0)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        if self.rx_ready() {
            return Ok(());
        }
        poll(
            self.core.fd.as_raw_fd(),
            libc::POLLIN,
            timeout,
            &self.core.shared.device,
        )
    }

    fn stats(&self) -> IoStats {
        let mut s = self.stats;
        fold_rx_kernel_stats(self.core.fd.as_raw_fd(), &mut s);
        s
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.core.fd.as_fd())
    }
}

impl XdpTx {
    /// Takes completed frames back into the free list.
    fn reclaim(&mut self) {
        let n = self.comp_c.available(self.comp.producer(), u32::MAX);
        for i in 0..n {
            let p = self.comp.desc(self.comp_c.slot(i), 8).cast::<u64>();
            // SAFETY: a completion slot published by the kernel (acquire),
            // ours until released below.
            let addr = unsafe { p.read_volatile() };
            if self.free.len() < self.free.capacity() {
                self.free
                    .push(addr & !(u64::from(self.core.frame_size) - 1));
            }
        }
        self.comp_c.release(self.comp.consumer(), n);
    }

    /// Kicks until the kernel has taken every descriptor of the TX ring,
    /// or the retries run out (`false` then, or on an error other than
    /// push-back). In copy mode each kick sends a bounded batch (32), so
    /// a burst needs several.
    fn flush(&mut self) -> bool {
        let fd = self.core.fd.as_raw_fd();
        for attempt in 0..TX_RETRIES {
            if self.tx_p.outstanding(self.tx.consumer()) == 0 {
                return true;
            }
            let asks = self.tx.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0;
            if (!self.core.zero_copy || !self.need_wakeup || asks) && socket::kick_tx(fd).is_err() {
                return false;
            }
            if attempt > 0 {
                self.stats.tx_busy += 1;
                if attempt > 16 {
                    std::thread::sleep(Duration::from_micros(10));
                }
            }
        }
        self.tx_p.outstanding(self.tx.consumer()) == 0
    }

    /// `true` while frames handed to the TX ring have not all been taken
    /// by the kernel (the next `send_batch` or `wait` kicks again).
    pub fn tx_pending(&mut self) -> bool {
        self.tx_p.outstanding(self.tx.consumer()) != 0
    }

    /// Writes `frame` into a free UMEM frame and the `k`-th free TX slot;
    /// `false` (nothing written, the slot left unused) without a free frame
    /// or room for `frame`, which the caller's checks rule out.
    fn put(&mut self, k: u32, frame: &[u8]) -> bool {
        let Some(addr) = self.free.pop() else {
            return false;
        };
        let Some(dst) = self.core.frame(addr, frame.len()) else {
            self.free.push(addr);
            return false;
        };
        // SAFETY: a free frame of the transmit half is ours until its
        // descriptor is published; `frame.len()` bytes fit (checked).
        unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), dst, frame.len()) };
        let d = libc::xdp_desc {
            addr,
            len: frame.len() as u32,
            options: 0,
        };
        let p = self
            .tx
            .desc(self.tx_p.slot(k), DESC)
            .cast::<libc::xdp_desc>();
        // SAFETY: a TX slot not yet published is ours to write.
        unsafe { p.write_volatile(d) };
        true
    }
}

impl PacketIo for XdpTx {
    fn recv_batch(
        &mut self,
        _pool: &BufPool,
        _out: &mut Vec<PacketBuf>,
        _max: usize,
    ) -> Result<usize, IoError> {
        Ok(0)
    }

    /// Frames in order into the UMEM and the TX ring, then a kick. A frame
    /// longer than a UMEM frame is left unsent (`tx_oversize`, also in
    /// `tx_failed`) and the frames behind it still go: what stays in
    /// `frames`, in order, is the oversize frames and whatever a full ring
    /// kept back.
    fn send_batch(
        &mut self,
        frames: &mut Vec<PacketBuf>,
        pool: &BufPool,
    ) -> Result<usize, IoError> {
        self.reclaim();
        let room = self.core.frame_size as usize;
        let (mut queued, mut pending, mut waited) = (0usize, 0u32, 0u32);
        // frames[..kept]: the oversize ones, in order; frames[kept..queued]:
        // copied into the UMEM (their order no longer matters).
        let mut kept = 0;
        while queued < frames.len() {
            if frames[queued].len() > room {
                // Longer than a UMEM frame: left unsent (the caller counts
                // it), the frames behind it still go.
                self.stats.tx_failed += 1;
                self.stats.tx_oversize += 1;
                frames.swap(kept, queued);
                kept += 1;
                queued += 1;
                continue;
            }
            if self.free.is_empty() || self.tx_p.free(self.tx.consumer(), pending + 1) <= pending {
                // Every frame is in flight: send what is queued, take back
                // what completed, wait a little.
                self.tx_p.submit(self.tx.producer(), pending);
                pending = 0;
                let ok = self.flush();
                self.reclaim();
                if !ok || waited > TX_RETRIES {
                    break;
                }
                if self.free.is_empty() {
                    waited += 1;
                    self.stats.tx_busy += 1;
                    std::thread::sleep(Duration::from_micros(10));
                }
                continue;
            }
            if !self.put(pending, frames[queued].as_slice()) {
                // Ruled out by the checks above; were it to happen, the
                // frame is kept and counted, never a stale descriptor sent.
                self.stats.tx_failed += 1;
                frames.swap(kept, queued);
                kept += 1;
                queued += 1;
                continue;
            }
            pending += 1;
            queued += 1;
        }
        self.tx_p.submit(self.tx.producer(), pending);
        self.flush();
        self.reclaim();
        for buf in frames.drain(kept..queued) {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += buf.len() as u64;
            pool.put(buf);
        }
        Ok(queued - kept)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        self.reclaim();
        self.flush();
        std::thread::sleep(timeout);
        Ok(())
    }

    fn stats(&self) -> IoStats {
        let mut s = self.stats;
        s.tx_ring = TxRingKind::Xdp;
        if let Some(k) = socket::kernel_stats(self.core.fd.as_raw_fd()) {
            s.tx_ring_empty = k.tx_ring_empty_descs;
            s.tx_invalid = k.tx_invalid_descs;
        }
        s
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.core.fd.as_fd())
    }
}
