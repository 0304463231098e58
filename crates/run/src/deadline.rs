//! One deadline for a whole client exchange on the control socket and the
//! Prometheus endpoint: each read or write waits at most for the time left
//! until it, so a client that trickles its request a byte at a time (or
//! takes the answer a byte at a time) is cut off when the deadline passes,
//! however often it sends; a per-call timeout alone would let it hold the
//! serving thread for as long as it keeps a byte coming.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A stream whose blocking reads and writes can time out.
pub(crate) trait Timeouts: Read + Write {
    /// Sets the read timeout (`None`: none).
    fn read_timeout_to(&self, d: Option<Duration>) -> io::Result<()>;
    /// Sets the write timeout (`None`: none).
    fn write_timeout_to(&self, d: Option<Duration>) -> io::Result<()>;
}

impl Timeouts for TcpStream {
    fn read_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(d)
    }
    fn write_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_write_timeout(d)
    }
}

impl Timeouts for UnixStream {
    fn read_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(d)
    }
    fn write_timeout_to(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_write_timeout(d)
    }
}

/// When an exchange must be over.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// `d` from now.
    pub(crate) fn after(d: Duration) -> Deadline {
        Deadline(Instant::now() + d)
    }

    /// The time left, `None` once it has passed (a zero timeout would mean
    /// "none" to the socket, so it is never returned).
    fn left(&self) -> Option<Duration> {
        let left = self.0.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }
}

fn timed_out() -> io::Error {
    io::Error::new(ErrorKind::TimedOut, "the client's time is up")
}

/// Reads into `req` until `complete(req)` holds, `req` has `max` bytes
/// (never more), or the peer closes; an error of kind `TimedOut` when the
/// deadline passes first.
pub(crate) fn read_until<S: Timeouts>(
    s: &mut S,
    by: Deadline,
    max: usize,
    req: &mut Vec<u8>,
    complete: impl Fn(&[u8]) -> bool,
) -> io::Result<()> {
    let mut buf = [0u8; 1024];
    while req.len() < max && !complete(req) {
        let left = by.left().ok_or_else(timed_out)?;
        s.read_timeout_to(Some(left))?;
        let want = (max - req.len()).min(buf.len());
        match s.read(&mut buf[..want]) {
            Ok(0) => return Ok(()),
            Ok(n) => req.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(timed_out());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `bytes`; an error of kind `TimedOut` when the deadline
/// passes first.
pub(crate) fn write_all_by<S: Timeouts>(s: &mut S, by: Deadline, bytes: &[u8]) -> io::Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let left = by.left().ok_or_else(timed_out)?;
        s.write_timeout_to(Some(left))?;
        match s.write(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(timed_out());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passed_deadline_stops_before_reading_and_a_complete_request_stops_early() {
        let (mut a, mut b) = UnixStream::pair().expect("pair");
        b.write_all(b"stats\nmore").expect("write");
        let mut req = Vec::new();
        read_until(
            &mut a,
            Deadline::after(Duration::from_secs(60)),
            256,
            &mut req,
            |r| r.contains(&b'\n'),
        )
        .expect("complete");
        assert!(req.starts_with(b"stats\n"), "{req:?}");
        let mut req = Vec::new();
        let e = read_until(
            &mut a,
            Deadline(Instant::now() - Duration::from_millis(1)),
            256,
            &mut req,
            |_| false,
        )
        .expect_err("passed");
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(req.is_empty());
        // Never more than `max` bytes, even when more are there.
        b.write_all(&[b'x'; 600]).expect("write");
        let mut req = Vec::new();
        read_until(
            &mut a,
            Deadline::after(Duration::from_secs(60)),
            300,
            &mut req,
            |_| false,
        )
        .expect("full");
        assert_eq!(req.len(), 300);
    }
}
