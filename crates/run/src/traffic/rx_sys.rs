//! The sink's system calls outside `std`: waiting for any of its sockets
//! to become readable (`poll(2)`), so a datagram is taken as soon as it
//! arrives (a fixed sleep between passes would add up to its length to
//! every measured latency), and a receive buffer large enough to ride out
//! the sink being descheduled for a while.

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
