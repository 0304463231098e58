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

/// A `pollfd` waiting for `fd` to become readable.
pub(crate) fn pollfd_for(fd: BorrowedFd<'_>) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    }
}

/// Waits until any of `fds` (made by [`pollfd_for`], their descriptors
/// open for the call) is readable or `timeout` has passed; `Ok(true)` if
/// one became readable. An interrupted wait returns `Ok(false)`.
pub(crate) fn any_readable_within(
    fds: &mut [libc::pollfd],
    timeout: Duration,
) -> std::io::Result<bool> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `fds` is a valid, writable array of `fds.len()` pollfds and
    // `ts` a valid timespec, both living across the call; no signal mask is
    // passed. A closed descriptor is reported in `revents` (POLLNVAL), not
    // a memory error.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
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

    use super::{any_readable_within, pollfd_for, readable_within};

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

    #[test]
    fn a_wait_on_many_ends_when_any_of_them_has_data() {
        let (a1, b1) = UnixDatagram::pair().expect("pair");
        let (a2, b2) = UnixDatagram::pair().expect("pair");
        let mut fds = [pollfd_for(b1.as_fd()), pollfd_for(b2.as_fd())];
        let got = any_readable_within(&mut fds, Duration::from_micros(200)).expect("ppoll");
        assert!(!got, "nothing was sent");
        a2.send(b"x").expect("send");
        assert!(any_readable_within(&mut fds, Duration::from_secs(10)).expect("ppoll"));
        assert_eq!(fds[0].revents, 0);
        assert_ne!(fds[1].revents & libc::POLLIN, 0);
        drop(a1);
    }
}
