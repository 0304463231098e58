//! Setting up an AF_XDP socket: the UMEM, the four rings mapped through
//! `XDP_MMAP_OFFSETS`, the bind (zero-copy tried first when asked), the
//! busy-polling options, and the kernel's counters.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

use super::{BindMode, XdpConfig};
use crate::IoError;

/// `SO_BUSY_POLL`, `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`
/// (asm-generic/socket.h).
const SO_BUSY_POLL: i32 = 46;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;

pub(super) use crate::packet::{setopt, sys};

/// A shared mapping, unmapped on drop.
#[derive(Debug)]
pub(super) struct Mapping {
    pub(super) base: *mut u8,
    pub(super) len: usize,
}

// SAFETY: plain shared memory owned by this value; which parts each
// thread touches is decided by the ring protocol (see `io.rs`).
unsafe impl Send for Mapping {}
// SAFETY: as above; shared references only hand out the base pointer.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly what mmap returned; nothing borrows it any more.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

fn map(
    fd: RawFd,
    len: usize,
    offset: i64,
    device: &str,
    call: &'static str,
) -> Result<Mapping, IoError> {
    let (flags, fd) = if fd < 0 {
        (
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
        )
    } else {
        (libc::MAP_SHARED | libc::MAP_POPULATE, fd)
    };
    // SAFETY: a fresh mapping of `len` bytes; the result is checked.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            offset as libc::off_t,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(sys(device, call));
    }
    Ok(Mapping {
        base: base.cast(),
        len,
    })
}

/// One mapped ring: its indices, flags and descriptor array.
#[derive(Debug)]
pub(super) struct RingMap {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    pub(super) size: u32,
}

impl RingMap {
    fn at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS, are 4-aligned and
        // inside the mapping (checked in `map_ring`); the kernel and we
        // access these words only atomically; the mapping lives with self.
        unsafe { &*self.map.base.add(off).cast::<AtomicU32>() }
    }
    pub(super) fn producer(&self) -> &AtomicU32 {
        self.at(self.producer)
    }
    pub(super) fn consumer(&self) -> &AtomicU32 {
        self.at(self.consumer)
    }
    pub(super) fn flags(&self) -> &AtomicU32 {
        self.at(self.flags)
    }
    /// Pointer to descriptor slot `i` of `width` bytes (`i < size`).
    pub(super) fn desc(&self, i: usize, width: usize) -> *mut u8 {
        debug_assert!(i < self.size as usize);
        // SAFETY: `i < size` and the mapping holds `size` descriptors of
        // `width` bytes from `desc` (its length was computed so).
        unsafe {
            self.map
                .base
                .add(self.desc + (i & (self.size as usize - 1)) * width)
        }
    }
}

fn map_ring(
    fd: RawFd,
    off: &libc::xdp_ring_offset,
    size: u32,
    width: usize,
    pgoff: i64,
    device: &str,
    call: &'static str,
) -> Result<RingMap, IoError> {
    let len = off.desc as usize + size as usize * width;
    let fields = [off.producer, off.consumer, off.flags];
    if fields
        .iter()
        .any(|&o| !o.is_multiple_of(4) || o as usize + 4 > len)
        || !off.desc.is_multiple_of(8)
    {
        return Err(IoError::Config {
            device: device.to_string(),
            what: format!("{call}: the kernel's ring offsets {off:?} do not fit the ring"),
        });
    }
    Ok(RingMap {
        map: map(fd, len, pgoff, device, call)?,
        producer: off.producer as usize,
        consumer: off.consumer as usize,
        flags: off.flags as usize,
        desc: off.desc as usize,
        size,
    })
}

/// A socket with its UMEM and rings, bound.
#[derive(Debug)]
pub(super) struct Socket {
    pub(super) fd: OwnedFd,
    pub(super) umem: Mapping,
    pub(super) fill: RingMap,
    pub(super) comp: RingMap,
    pub(super) rx: RingMap,
    pub(super) tx: RingMap,
    /// Bound with `XDP_ZEROCOPY`.
    pub(super) zero_copy: bool,
    /// Bound with `XDP_USE_NEED_WAKEUP`.
    pub(super) need_wakeup: bool,
}

fn new_socket(device: &str) -> Result<OwnedFd, IoError> {
    // SAFETY: plain socket(2); the result is checked.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(sys(device, "socket(AF_XDP)"));
    }
    // SAFETY: a fresh descriptor owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn mmap_offsets(fdn: RawFd, device: &str) -> Result<libc::xdp_mmap_offsets, IoError> {
    // SAFETY: plain data; zero is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: `off` and `len` are valid and sized together.
    let rc = unsafe {
        libc::getsockopt(
            fdn,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    };
    if rc != 0 || len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(sys(device, "XDP_MMAP_OFFSETS"));
    }
    Ok(off)
}

fn bind(
    fdn: RawFd,
    ifindex: u32,
    queue: u32,
    flags: u16,
    shared_umem_fd: u32,
    device: &str,
    call: &'static str,
) -> Result<(), IoError> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: shared_umem_fd,
    };
    // A queue whose last socket just closed (its process exited, even
    // killed) stays taken until the kernel's deferred teardown of that
    // socket's buffer pool has run: EBUSY for a few ms. Retry for up to
    // BIND_BUSY_TRIES × BIND_BUSY_WAIT before naming the queue as taken.
    for _ in 0..BIND_BUSY_TRIES {
        // SAFETY: a valid sockaddr_xdp of the size passed.
        let rc = unsafe {
            libc::bind(
                fdn,
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EBUSY) {
            return Err(sys(device, call));
        }
        std::thread::sleep(BIND_BUSY_WAIT);
    }
    Err(IoError::Config {
        device: device.to_string(),
        what: format!(
            "{call}: queue {queue} is taken by another AF_XDP socket (still after {} ms): \
             stop the other program using it (another pktsched?)",
            BIND_BUSY_WAIT.as_millis() * u128::from(BIND_BUSY_TRIES)
        ),
    })
}

/// How often, and how far apart, a bind that finds its queue taken is
/// tried again (see `bind`).
const BIND_BUSY_TRIES: u32 = 50;
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// Opens, registers, maps and binds a socket on `ifindex` queue
/// `cfg.queue`, the owner of its UMEM and of the fill and completion
/// rings; its RX ring has `rx_ring` slots (the fill ring `cfg.rx_frames`).
pub(super) fn open_socket(
    device: &str,
    ifindex: u32,
    cfg: &XdpConfig,
    zero_copy: bool,
    rx_ring: u32,
) -> Result<Socket, IoError> {
    let fd = new_socket(device)?;
    let fdn = fd.as_raw_fd();
    let frames = cfg.rx_frames + cfg.tx_frames;
    let umem = map(
        -1,
        frames as usize * cfg.frame_size as usize,
        0,
        device,
        "mmap(UMEM)",
    )?;
    let reg = libc::xdp_umem_reg {
        addr: umem.base as u64,
        len: umem.len as u64,
        chunk_size: cfg.frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setopt(
        fdn,
        libc::SOL_XDP,
        libc::XDP_UMEM_REG,
        &reg,
        device,
        "XDP_UMEM_REG",
    )?;
    for (opt, size, call) in [
        (
            libc::XDP_UMEM_FILL_RING,
            cfg.rx_frames,
            "XDP_UMEM_FILL_RING",
        ),
        (
            libc::XDP_UMEM_COMPLETION_RING,
            cfg.tx_frames,
            "XDP_UMEM_COMPLETION_RING",
        ),
        (libc::XDP_RX_RING, rx_ring, "XDP_RX_RING"),
        (libc::XDP_TX_RING, cfg.tx_frames, "XDP_TX_RING"),
    ] {
        setopt(fdn, libc::SOL_XDP, opt, &size, device, call)?;
    }
    let off = mmap_offsets(fdn, device)?;
    let d16 = std::mem::size_of::<libc::xdp_desc>();
    let fill = map_ring(
        fdn,
        &off.fr,
        cfg.rx_frames,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING as i64,
        device,
        "mmap(fill ring)",
    )?;
    let comp = map_ring(
        fdn,
        &off.cr,
        cfg.tx_frames,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
        device,
        "mmap(completion ring)",
    )?;
    let rx = map_ring(
        fdn,
        &off.rx,
        rx_ring,
        d16,
        libc::XDP_PGOFF_RX_RING,
        device,
        "mmap(RX ring)",
    )?;
    let tx = map_ring(
        fdn,
        &off.tx,
        cfg.tx_frames,
        d16,
        libc::XDP_PGOFF_TX_RING,
        device,
        "mmap(TX ring)",
    )?;
    let mut flags = if zero_copy {
        libc::XDP_ZEROCOPY
    } else {
        libc::XDP_COPY
    };
    if cfg.need_wakeup {
        flags |= libc::XDP_USE_NEED_WAKEUP;
    }
    let call = if zero_copy {
        "bind(XDP_ZEROCOPY)"
    } else {
        "bind(XDP_COPY)"
    };
    bind(fdn, ifindex, cfg.queue, flags, 0, device, call)?;
    busy_poll(fdn, cfg, device)?;
    Ok(Socket {
        fd,
        umem,
        fill,
        comp,
        rx,
        tx,
        zero_copy,
        need_wakeup: cfg.need_wakeup,
    })
}

/// Applies `cfg.busy_poll` (if any) to the socket.
fn busy_poll(fdn: RawFd, cfg: &XdpConfig, device: &str) -> Result<(), IoError> {
    if let Some(bp) = cfg.busy_poll {
        let one: libc::c_int = 1;
        let usecs = bp.usecs as libc::c_int;
        let budget = bp.budget as libc::c_int;
        setopt(
            fdn,
            libc::SOL_SOCKET,
            SO_PREFER_BUSY_POLL,
            &one,
            device,
            "SO_PREFER_BUSY_POLL",
        )?;
        setopt(
            fdn,
            libc::SOL_SOCKET,
            SO_BUSY_POLL,
            &usecs,
            device,
            "SO_BUSY_POLL",
        )?;
        setopt(
            fdn,
            libc::SOL_SOCKET,
            SO_BUSY_POLL_BUDGET,
            &budget,
            device,
            "SO_BUSY_POLL_BUDGET",
        )?;
    }
    Ok(())
}

/// A socket sharing the UMEM, fill and completion rings of the socket
/// `owner` (same device and queue): its own RX ring only.
#[derive(Debug)]
pub(super) struct Sharer {
    pub(super) fd: OwnedFd,
    pub(super) rx: RingMap,
}

/// Opens a socket with an RX ring of `rx_ring` slots and binds it with
/// `XDP_SHARED_UMEM` to `owner`'s UMEM on the same device and queue. The
/// kernel takes the owner's mode (copy or zero-copy, need-wakeup) and
/// refuses those flags here.
pub(super) fn open_sharer(
    device: &str,
    ifindex: u32,
    cfg: &XdpConfig,
    owner: RawFd,
    rx_ring: u32,
) -> Result<Sharer, IoError> {
    let fd = new_socket(device)?;
    let fdn = fd.as_raw_fd();
    setopt(
        fdn,
        libc::SOL_XDP,
        libc::XDP_RX_RING,
        &rx_ring,
        device,
        "XDP_RX_RING",
    )?;
    let off = mmap_offsets(fdn, device)?;
    let rx = map_ring(
        fdn,
        &off.rx,
        rx_ring,
        std::mem::size_of::<libc::xdp_desc>(),
        libc::XDP_PGOFF_RX_RING,
        device,
        "mmap(RX ring)",
    )?;
    bind(
        fdn,
        ifindex,
        cfg.queue,
        libc::XDP_SHARED_UMEM,
        owner as u32,
        device,
        "bind(XDP_SHARED_UMEM)",
    )?;
    busy_poll(fdn, cfg, device)?;
    Ok(Sharer { fd, rx })
}

/// Opens the socket as `cfg.bind` asks: `Auto` tries zero-copy and falls
/// back to copy mode, returning why.
pub(super) fn open_bound(
    device: &str,
    ifindex: u32,
    cfg: &XdpConfig,
    rx_ring: u32,
) -> Result<(Socket, Option<String>), IoError> {
    match cfg.bind {
        BindMode::Copy => Ok((open_socket(device, ifindex, cfg, false, rx_ring)?, None)),
        BindMode::ZeroCopy => Ok((open_socket(device, ifindex, cfg, true, rx_ring)?, None)),
        BindMode::Auto => match open_socket(device, ifindex, cfg, true, rx_ring) {
            Ok(s) => Ok((s, None)),
            Err(zc) => {
                let s = open_socket(device, ifindex, cfg, false, rx_ring)?;
                Ok((s, Some(format!("zero-copy refused ({zc}); copy mode"))))
            }
        },
    }
}

/// The kernel's counters of a socket (`XDP_STATISTICS`, running totals).
pub(super) fn kernel_stats(fd: RawFd) -> Option<libc::xdp_statistics> {
    // SAFETY: plain data; zero is valid.
    let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: `st` and `len` are valid and sized together.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&mut st as *mut libc::xdp_statistics).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(st)
}

/// `sendto(MSG_DONTWAIT)` with no data: kicks the TX ring. `Ok(true)`
/// when the kernel took what it could, `Ok(false)` on push-back (`EAGAIN`,
/// `EBUSY`, `ENOBUFS`, `EINTR`: try again).
pub(super) fn kick_tx(fd: RawFd) -> io::Result<bool> {
    // SAFETY: no buffer and no address: a kick of this bound socket.
    let rc = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc >= 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
            Ok(false)
        }
        _ => Err(e),
    }
}

/// `recvfrom(MSG_DONTWAIT)` with no buffer: wakes the driver to refill
/// from the fill ring, or runs a busy poll.
pub(super) fn kick_rx(fd: RawFd) {
    // SAFETY: no buffer and no address; the result does not matter.
    unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
}
