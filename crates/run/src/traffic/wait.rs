//! Waiting for any of the sink's sockets to become readable (`poll(2)`),
//! so a datagram is taken as soon as it arrives: a fixed sleep between
//! passes would add up to its length to every measured latency.

use std::os::fd::{AsRawFd, BorrowedFd};
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
