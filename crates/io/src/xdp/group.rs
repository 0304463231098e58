//! One AF_XDP socket per traffic class on one device and queue, all
//! sharing one UMEM ([`open_class_group`]).
//!
//! * The first socket (class 0) owns the UMEM, the fill ring, the
//!   completion ring and the TX ring (the [`XdpTx`] returned); every
//!   other class's socket has an RX ring only and is bound with
//!   `XDP_SHARED_UMEM` to the first, so the kernel takes all their
//!   frames from the one fill ring (same device and queue: the kernel
//!   refuses a fill or completion ring of their own).
//! * The classifier compiled to XDP ([`crate::bpf::classify`],
//!   [`Steer::ByClassOnQueue`]) redirects each frame of the bound queue
//!   into XSKMAP\[class\], the socket of its class.
//! * Each class's RX ring is smaller than the pool of receive frames:
//!   a class whose reader falls behind fills its own ring and the kernel
//!   drops its further frames, counted as that socket's `rx_ring_full`,
//!   while at least `rx_frames − ring` frames stay for the others.
//! * [`XdpClassGroup`] reads every RX ring and refills the one fill ring
//!   from one thread; the transmit half runs on its own thread, as with
//!   [`super::open`]. No allocation per frame: each frame is copied into a
//!   pool buffer and its UMEM frame goes straight back to the fill ring.
//! * System calls: reading a ring makes none. The kernel is kicked
//!   (`recvfrom` on class 0's socket, which drives the queue's NAPI for
//!   every socket of the group) once per poll round by
//!   [`ClassRx::end_round`], and only when busy polling is on or the fill
//!   ring asks for a wake-up; [`XdpClassGroup::kicks`] counts them.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::io::{Core, RxParts, copy_out, fold_rx_kernel_stats, split_tx};
use super::ring::{Consumer, Producer};
use super::socket::{self, RingMap};
use super::{MAX_QUEUES, XdpConfig, XdpInfo, XdpTx, attach, bpf_err};
use crate::bpf::classify::Steer;
use crate::bpf::sys::Map;
use crate::classify::Rule;
use crate::{BufPool, ClassRx, IoError, IoStats, PacketBuf};

/// Most classes (sockets) in one group: the XSKMAP's keys.
pub const MAX_CLASSES: usize = MAX_QUEUES as usize;

const DESC: usize = std::mem::size_of::<libc::xdp_desc>();

/// One class's socket and RX ring.
#[derive(Debug)]
struct ClassRing {
    /// The socket, `None` for class 0 (the owner, in [`Core`]).
    sharer: Option<OwnedFd>,
    /// Its descriptor (the owner's for class 0).
    fd: RawFd,
    rx: RingMap,
    rx_c: Consumer,
    stats: IoStats,
}

/// The receive side of a class group: one RX ring per class, one fill
/// ring for all. See the module documentation.
#[derive(Debug)]
pub struct XdpClassGroup {
    core: Arc<Core>,
    fill: RingMap,
    fill_p: Producer,
    rings: Vec<ClassRing>,
    /// One per class, kept for `poll(2)` so a wait allocates nothing.
    pollfds: Vec<libc::pollfd>,
    /// UMEM bytes of the receive frames (below).
    rx_end: u64,
    need_wakeup: bool,
    busy_poll: bool,
    /// `recvfrom` kicks made.
    kicks: u64,
}

/// Checks the group's arguments against `cfg` (already checked).
fn check_group(
    device: &str,
    cfg: &XdpConfig,
    rules: &[Rule],
    default: u16,
    ring_frames: &[u32],
) -> Result<(), IoError> {
    let bad = |what: String| {
        Err(IoError::Config {
            device: device.to_string(),
            what,
        })
    };
    let n = ring_frames.len();
    if n == 0 || n > MAX_CLASSES {
        return bad(format!(
            "AF_XDP class group of {n} classes (one per RX ring size given): allowed \
             1..={MAX_CLASSES}"
        ));
    }
    let pool = cfg.rx_frames;
    for (class, &r) in ring_frames.iter().enumerate() {
        if !r.is_power_of_two() || r < 2 || r >= pool {
            return bad(format!(
                "AF_XDP class {class} RX ring of {r} frames: allowed a power of two \
                 2..={} (below rx_frames {pool}, the shared pool, so one class cannot \
                 hold every frame)",
                pool / 2
            ));
        }
    }
    if usize::from(default) >= n {
        return bad(format!(
            "AF_XDP class group default class {default}: allowed 0..={} (one class per RX \
             ring)",
            n - 1
        ));
    }
    if let Some((i, r)) = rules
        .iter()
        .enumerate()
        .find(|(_, r)| usize::from(r.class) >= n)
    {
        return bad(format!(
            "AF_XDP class group rule {i} class {}: allowed 0..={} (one class per RX ring)",
            r.class,
            n - 1
        ));
    }
    Ok(())
}

/// Opens one AF_XDP socket per class on `device` queue `cfg.queue` (in
/// the calling thread's network namespace), class `c` with an RX ring of
/// `ring_frames[c]` frames, all sharing one UMEM of `cfg.rx_frames`
/// receive frames; attaches the classifier compiled from `rules` (first
/// match wins, else `default`), which redirects each frame of the queue
/// into its class's socket. Returns the receive side, the transmit half
/// (on class 0's socket) and what the kernel granted.
///
/// Refused, with the value and what is allowed: no class or more than
/// [`MAX_CLASSES`]; a ring size that is not a power of two below
/// `cfg.rx_frames`; a default or rule class without a ring; what
/// [`XdpConfig`] and the classifier refuse.
pub fn open_class_group(
    device: &str,
    cfg: &XdpConfig,
    rules: &[Rule],
    default: u16,
    ring_frames: &[u32],
) -> Result<(XdpClassGroup, XdpTx, XdpInfo), IoError> {
    cfg.check(device)?;
    check_group(device, cfg, rules, default, ring_frames)?;
    let ifindex = crate::packet::if_index(device)? as u32;
    let (owner, zc_note) = socket::open_bound(device, ifindex, cfg, ring_frames[0])?;
    let owner_fd = owner.fd.as_raw_fd();
    let mut sharers = Vec::with_capacity(ring_frames.len() - 1);
    for &size in &ring_frames[1..] {
        sharers.push(socket::open_sharer(device, ifindex, cfg, owner_fd, size)?);
    }
    let map =
        Map::xsk(ring_frames.len() as u32, "pst_xsk_class").map_err(|e| bpf_err(device, e))?;
    let fds = std::iter::once(owner_fd).chain(sharers.iter().map(|s| s.fd.as_raw_fd()));
    for (class, fd) in fds.enumerate() {
        map.update(&(class as u32).to_ne_bytes(), &(fd as u32).to_ne_bytes())
            .map_err(|e| bpf_err(device, e))?;
    }
    let steer = Steer::ByClassOnQueue(cfg.queue);
    let prog =
        crate::bpf::classify::load(rules, default, &map, steer).map_err(|e| bpf_err(device, e))?;
    let zero_copy = owner.zero_copy;
    let (shared, info) = attach(device, ifindex, cfg, prog, map, zero_copy, zc_note)?;
    let (parts, tx) = split_tx(owner, shared, cfg);
    let mut group = XdpClassGroup::new(parts, sharers, cfg);
    group.stock_fill(cfg);
    Ok((group, tx, info))
}

impl XdpClassGroup {
    fn new(parts: RxParts, sharers: Vec<socket::Sharer>, cfg: &XdpConfig) -> XdpClassGroup {
        let RxParts {
            core,
            fill,
            rx,
            need_wakeup,
        } = parts;
        let owner = ClassRing {
            sharer: None,
            fd: core.fd.as_raw_fd(),
            rx_c: Consumer::new(rx.size),
            rx,
            stats: IoStats::default(),
        };
        let others = sharers.into_iter().map(|s| ClassRing {
            fd: s.fd.as_raw_fd(),
            sharer: Some(s.fd),
            rx_c: Consumer::new(s.rx.size),
            rx: s.rx,
            stats: IoStats::default(),
        });
        let rings: Vec<ClassRing> = std::iter::once(owner).chain(others).collect();
        let pollfds = rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        XdpClassGroup {
            core,
            fill_p: Producer::new(fill.size),
            fill,
            rings,
            pollfds,
            rx_end: u64::from(cfg.rx_frames) * u64::from(cfg.frame_size),
            need_wakeup,
            busy_poll: cfg.busy_poll.is_some(),
            kicks: 0,
        }
    }

    /// Hands every receive frame to the kernel through the fill ring.
    fn stock_fill(&mut self, cfg: &XdpConfig) {
        let fs = u64::from(cfg.frame_size);
        for i in 0..cfg.rx_frames {
            self.put_fill(i, u64::from(i) * fs);
        }
        self.fill_p.submit(self.fill.producer(), cfg.rx_frames);
    }

    /// Writes UMEM address `addr` into the `i`-th free fill slot.
    fn put_fill(&mut self, i: u32, addr: u64) {
        let p = self.fill.desc(self.fill_p.slot(i), 8).cast::<u64>();
        // SAFETY: a fill slot not yet published is ours to write; it is
        // 8-aligned (ring offsets are checked) and inside the mapping.
        unsafe { p.write_volatile(addr) };
    }

    fn wants_wakeup(&self) -> bool {
        self.need_wakeup
            && self.fill.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// `true` if bound zero-copy.
    pub fn is_zero_copy(&self) -> bool {
        self.core.zero_copy
    }

    /// Each class ring's socket, in class order, to wait on with
    /// `ppoll` (readable when its RX ring has frames).
    pub fn ring_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.rings
            .iter()
            .map(|r| {
                r.sharer
                    .as_ref()
                    .map_or(self.core.fd.as_fd(), |s| s.as_fd())
            })
            .collect()
    }

    /// The `recvfrom` kicks made so far (at most one per poll round).
    pub fn kicks(&self) -> u64 {
        self.kicks
    }

    /// Receives from class `class`'s ring (`class` is in range).
    fn receive(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> usize {
        let ring = &mut self.rings[class];
        let avail = ring
            .rx_c
            .available(ring.rx.producer(), max.min(u32::MAX as usize) as u32);
        if avail == 0 {
            return 0;
        }
        // Every receive frame is in the fill ring, an RX ring or the
        // kernel: the fill ring has room for those being returned.
        let n = avail.min(self.fill_p.free(self.fill.consumer(), avail));
        let mask = !(u64::from(self.core.frame_size) - 1);
        let mut got = 0;
        for i in 0..n {
            let ring = &mut self.rings[class];
            let p = ring
                .rx
                .desc(ring.rx_c.slot(i), DESC)
                .cast::<libc::xdp_desc>();
            // SAFETY: the slot was published by the kernel (acquire on its
            // producer index) and is ours until we release it.
            let d = unsafe { p.read_volatile() };
            if copy_out(&self.core, self.rx_end, &d, pool, out, &mut ring.stats) {
                got += 1;
            }
            self.put_fill(i, d.addr & mask);
        }
        let ring = &mut self.rings[class];
        ring.rx_c.release(ring.rx.consumer(), n);
        self.fill_p.submit(self.fill.producer(), n);
        got
    }
}

impl ClassRx for XdpClassGroup {
    fn classes(&self) -> usize {
        self.rings.len()
    }

    fn recv_class(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        if class >= self.rings.len() || max == 0 {
            return Ok(0);
        }
        Ok(self.receive(class, pool, out, max))
    }

    /// One kick for the whole group, and only when the kernel needs one:
    /// busy polling (the `recvfrom` runs the queue's NAPI) or the fill
    /// ring's need-wakeup flag.
    fn end_round(&mut self) {
        if self.busy_poll || self.wants_wakeup() {
            socket::kick_rx(self.rings[0].fd);
            self.kicks += 1;
        }
    }

    /// The kernel's producer index minus ours: exact, since only this
    /// side moves the consumer index.
    fn waiting(&self, class: usize) -> Option<usize> {
        let ring = self.rings.get(class)?;
        let prod = ring.rx.producer().load(Ordering::Acquire);
        let cons = ring.rx.consumer().load(Ordering::Relaxed);
        Some(prod.wrapping_sub(cons) as usize)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        if (0..self.rings.len()).any(|c| self.waiting(c).unwrap_or(0) > 0) {
            return Ok(());
        }
        for p in &mut self.pollfds {
            p.revents = 0;
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `pollfds` is a valid array of that many pollfd entries
        // for the duration of the call.
        let rc = unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            )
        };
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(socket::sys(&self.core.shared.device, "poll"));
        }
        Ok(())
    }

    /// Each class's counters with its socket's `XDP_STATISTICS` folded
    /// in. The fill ring is shared, so the kernel's count of an empty
    /// fill ring (`rx_fill_empty`) is the same on every socket: it is
    /// reported on class 0 only (the ring's owner), so that sums over
    /// the classes stay right; each socket's frames lost to it are in its
    /// own `rx_kernel_drops`.
    fn class_stats(&mut self) -> Vec<IoStats> {
        self.rings
            .iter()
            .enumerate()
            .map(|(class, r)| {
                let mut s = r.stats;
                fold_rx_kernel_stats(r.fd, &mut s);
                if class > 0 {
                    s.rx_fill_empty = 0;
                }
                s
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Match;

    fn err(cfg: &XdpConfig, rules: &[Rule], default: u16, rings: &[u32]) -> String {
        check_group("xg0", cfg, rules, default, rings)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn ring_sizes_must_be_powers_of_two_below_the_pool() {
        let cfg = XdpConfig {
            rx_frames: 512,
            ..XdpConfig::default()
        };
        check_group("xg0", &cfg, &[], 0, &[2, 256, 64]).expect("accepted");
        for bad in [0u32, 1, 3, 100, 512, 1024] {
            let e = err(&cfg, &[], 0, &[64, bad]);
            assert!(
                e.starts_with("xg0: ")
                    && e.contains(&format!("class 1 RX ring of {bad} frames"))
                    && e.contains("power of two 2..=256")
                    && e.contains("rx_frames 512"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_number_of_classes_is_bounded() {
        let cfg = XdpConfig::default();
        let e = err(&cfg, &[], 0, &[]);
        assert!(e.contains("0 classes") && e.contains("1..=64"), "{e}");
        let many = vec![64u32; MAX_CLASSES + 1];
        let e = err(&cfg, &[], 0, &many);
        assert!(e.contains("65 classes") && e.contains("1..=64"), "{e}");
        check_group("xg0", &cfg, &[], 0, &many[..MAX_CLASSES]).expect("64 classes");
    }

    #[test]
    fn every_class_named_needs_a_ring() {
        let cfg = XdpConfig::default();
        let e = err(&cfg, &[], 3, &[64, 64, 64]);
        assert!(e.contains("default class 3") && e.contains("0..=2"), "{e}");
        let rules = [
            Rule {
                class: 1,
                matches: Match::default(),
            },
            Rule {
                class: 7,
                matches: Match::default(),
            },
        ];
        let e = err(&cfg, &rules, 0, &[64, 64]);
        assert!(e.contains("rule 1 class 7") && e.contains("0..=1"), "{e}");
        check_group("xg0", &cfg, &rules[..1], 0, &[64, 64]).expect("accepted");
    }
}
