//! Waiting on a device's descriptor with nanosecond precision (`ppoll`):
//! the run-to-completion thread sleeps until a frame arrives or the next
//! link or shaper deadline, which is often well under the millisecond
//! that `poll`'s timeout counts in.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Waits until `fd` is readable or `timeout` has passed; `Ok(true)` if it
/// became readable. An interrupted wait returns `Ok(false)`.
pub(crate) fn readable_within(fd: BorrowedFd<'_>, timeout: Duration) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: one valid pollfd and a valid timespec, both living across the
    // call; no signal mask is passed (null keeps the thread's).
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;
    use std::time::{Duration, Instant};

    use super::readable_within;

    #[test]
    fn a_wait_ends_when_data_arrives_and_reports_a_timeout_otherwise() {
        let (a, b) = UnixDatagram::pair().expect("pair");
        let started = Instant::now();
        let got = readable_within(b.as_fd(), Duration::from_micros(300)).expect("ppoll");
        assert!(!got, "nothing was sent");
        assert!(started.elapsed() >= Duration::from_micros(300));
        a.send(b"x").expect("send");
        assert!(readable_within(b.as_fd(), Duration::from_secs(10)).expect("ppoll"));
    }
}
