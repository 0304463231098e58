//! The sink's system calls outside `std`: waiting for any of its sockets
//! to become readable (`poll(2)`), so a datagram is taken as soon as it
//! arrives (a fixed sleep between passes would add up to its length to
//! every measured latency), and a receive buffer large enough to ride out
//! the sink being descheduled for a while; the kernel's receive time of
//! each datagram (`SO_TIMESTAMPNS`, read with `recvmsg`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Receive buffer the sink asks for per socket, bytes.
pub(super) const RCVBUF: i32 = 16 << 20;

/// Sets the socket's receive buffer to `bytes`: SO_RCVBUFFORCE (root,
/// beyond `net.core.rmem_max`), else SO_RCVBUF (capped by the kernel at
/// rmem_max). Best effort: a smaller buffer only means earlier drops,
/// which the sink counts.
pub(super) fn grow_receive_buffer(fd: BorrowedFd<'_>, bytes: i32) {
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: `fd` is an open socket for the call (borrowed); the
        // option value is a live i32 whose size is passed with it.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const bytes).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}
use std::time::Duration;

/// Blocks until one of `fds` is readable or `timeout` passes (rounded up
/// to whole milliseconds, at most `i32::MAX`). Interruptions and errors
/// count as a wake-up: the caller reads its sockets anyway, non-blocking.
pub(super) fn readable(fds: &[BorrowedFd<'_>], timeout: Duration) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
    // SAFETY: `pfds` is a valid, initialised array of `pfds.len()` pollfd
    // entries that lives across the call; the descriptors are borrowed, so
    // they stay open for its duration.
    let _ = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
}

/// Asks the kernel to stamp each datagram of the socket with its receive
/// time (`SO_TIMESTAMPNS`: a software stamp taken when the kernel received
/// the frame, CLOCK_REALTIME, handed over as a control message). `false`
/// if refused (the sink then times datagrams when it reads them).
pub(super) fn enable_rx_timestamps(fd: BorrowedFd<'_>) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: `fd` is an open socket for the call (borrowed); the option
    // value is a live c_int whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// One datagram read by [`recv_stamped`].
#[derive(Copy, Clone, Debug)]
pub(super) struct Datagram {
    /// Bytes written into the buffer.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// The kernel's receive time (CLOCK_REALTIME ns), 0 if none came.
    pub rx_real_ns: u64,
}

/// Reads one datagram without blocking (`recvmsg`, `MSG_DONTWAIT`) into
/// `buf`, with its `SO_TIMESTAMPNS` receive time if the socket has them
/// on; `None` if none is waiting (or on an error, or from a sender that is
/// neither IPv4 nor IPv6).
pub(super) fn recv_stamped(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Option<Datagram> {
    // SAFETY: plain data; all-zero is a valid value of each.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: plain data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&raw mut addr).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: every pointer in `msg` points at live, writable memory of
    // the stated length (the address, one iovec over `buf`, `control`),
    // all outliving the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return None;
    }
    let from = sender(&addr)?;
    let mut rx_real_ns = 0;
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its
    // control buffer (`control`, alive here) within `msg_controllen`.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !c.is_null() {
        // SAFETY: `c` is a non-null header inside the control buffer.
        let h = unsafe { &*c };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPNS {
            // SAFETY: an SCM_TIMESTAMPNS message carries a timespec;
            // read unaligned from its data.
            let ts: libc::timespec =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>()) };
            rx_real_ns = u64::try_from(ts.tv_sec)
                .unwrap_or(0)
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0));
        }
        // SAFETY: as above; returns null after the last header.
        c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
    }
    Some(Datagram {
        len: n as usize,
        from,
        rx_real_ns,
    })
}

/// The sender's address from what `recvmsg` wrote.
fn sender(addr: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in,
            // which is smaller than sockaddr_storage and less aligned.
            let a =
                unsafe { &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, a sockaddr_in6.
            let a =
                unsafe { &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}
