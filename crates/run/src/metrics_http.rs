//! The optional Prometheus endpoint (`control.prometheus`, bound to
//! 127.0.0.1 unless an address is given): `GET /metrics` answers the
//! counters in the text exposition format (503 with the reason when they
//! cannot be read); anything else is a 404. One connection at a time: the
//! request must arrive within [`CLIENT_TIMEOUT`] of the connection and the
//! answer be taken within as long again, however the client paces its
//! bytes (one deadline per phase, see `crate::deadline`), so a slow or
//! hostile client holds the thread for at most twice that.
//!
//! Binding ([`MetricsListener::bind`]) and serving
//! ([`MetricsListener::serve`]) are apart so that a daemon binds with its
//! privileges (a port below 1024), before it drops them, and fails before
//! anything runs when the address is taken.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::deadline::{Deadline, read_until, write_all_by};

/// Longest request read (headers included).
const MAX_REQUEST: usize = 8192;
/// How long a client may take to send its request, and again to take
/// the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// What the endpoint serves: the counters in the exposition format, or
/// why they cannot be read (answered as 503).
pub type Metrics = dyn Fn() -> Result<String, String> + Send + 'static;

/// A bound endpoint, not yet serving.
#[derive(Debug)]
pub struct MetricsListener {
    listener: TcpListener,
    /// Where it listens (the port is known once bound, also for port 0).
    pub addr: SocketAddr,
    timeout: Duration,
}

impl MetricsListener {
    /// Binds `addr`; the error names the address.
    pub fn bind(addr: SocketAddr) -> Result<MetricsListener, String> {
        let bound = TcpListener::bind(addr).and_then(|l| {
            l.set_nonblocking(true)?;
            let local = l.local_addr()?;
            Ok((l, local))
        });
        let (listener, local) =
            bound.map_err(|e| format!("control.prometheus {addr}: cannot listen: {e}"))?;
        Ok(MetricsListener {
            listener,
            addr: local,
            timeout: CLIENT_TIMEOUT,
        })
    }

    /// A client's time per phase other than [`CLIENT_TIMEOUT`] (tests).
    #[cfg(test)]
    fn with_client_timeout(mut self, timeout: Duration) -> MetricsListener {
        self.timeout = timeout;
        self
    }

    /// Serves `metrics()` on a thread.
    pub fn serve(
        self,
        metrics: impl Fn() -> Result<String, String> + Send + 'static,
    ) -> std::io::Result<MetricsServer> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let MetricsListener {
            listener,
            addr,
            timeout,
        } = self;
        let handle = std::thread::Builder::new()
            .name("pktsched-metrics".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((s, _)) => answer(s, &metrics, timeout),
                        Err(_) => std::thread::sleep(Duration::from_millis(50)),
                    }
                }
            })?;
        Ok(MetricsServer {
            stop,
            handle: Some(handle),
            addr,
        })
    }
}

/// A running endpoint; stopped by [`MetricsServer::stop`] or when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl MetricsServer {
    /// Stops serving (waits for the answer under way, if any).
    pub fn stop(self) {}
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn answer(mut s: TcpStream, metrics: &Metrics, timeout: Duration) {
    let _ = s.set_nonblocking(false);
    let mut req = Vec::with_capacity(512);
    let read = read_until(
        &mut s,
        Deadline::after(timeout),
        MAX_REQUEST,
        &mut req,
        // The blank line that ends the head: CRLF as HTTP says, or a bare
        // LF as lenient clients send it.
        |r| r.windows(4).any(|w| w == b"\r\n\r\n") || r.windows(2).any(|w| w == b"\n\n"),
    );
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (status, body) = match (read, words.next(), words.next()) {
        (Err(e), _, _) if e.kind() == std::io::ErrorKind::TimedOut => (
            "408 Request Timeout",
            format!("no complete request within {} ms\n", timeout.as_millis()),
        ),
        (_, Some("GET"), Some("/metrics")) => match metrics() {
            Ok(body) => ("200 OK", body),
            Err(why) => ("503 Service Unavailable", format!("{}\n", why.trim_end())),
        },
        _ => ("404 Not Found", "only GET /metrics is served\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let by = Deadline::after(timeout);
    let _ = write_all_by(&mut s, by, head.as_bytes())
        .and_then(|()| write_all_by(&mut s, by, body.as_bytes()));
    let _ = s.flush();
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    fn serve(
        metrics: impl Fn() -> Result<String, String> + Send + 'static,
        timeout: Duration,
    ) -> MetricsServer {
        MetricsListener::bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind")
            .with_client_timeout(timeout)
            .serve(metrics)
            .expect("serve")
    }

    #[test]
    fn serves_metrics_and_nothing_else() {
        let server = serve(|| Ok("pktsched_up 1\n".to_string()), CLIENT_TIMEOUT);
        let ok = get(server.addr, "/metrics");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\npktsched_up 1\n"), "{ok}");
        let other = get(server.addr, "/etc/passwd");
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        // A client that sends nothing is timed out, not served forever.
        let idle = TcpStream::connect(server.addr).expect("connect");
        let ok = get(server.addr, "/metrics");
        assert!(ok.contains("pktsched_up 1"));
        drop(idle);
        server.stop();
    }

    /// A head ended by bare LFs (as lenient clients write it) is complete:
    /// answered at once, not held to the deadline and refused with 408.
    #[test]
    fn a_request_ended_by_bare_line_feeds_is_served() {
        let server = serve(
            || Ok("pktsched_up 1\n".to_string()),
            Duration::from_secs(30),
        );
        let mut s = TcpStream::connect(server.addr).expect("connect");
        s.write_all(b"GET /metrics HTTP/1.0\nHost: x\n\n")
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        server.stop();
    }

    #[test]
    fn counters_that_cannot_be_read_are_a_503_with_the_reason() {
        let server = serve(
            || Err("error: the arbiter thread is gone".to_string()),
            CLIENT_TIMEOUT,
        );
        let out = get(server.addr, "/metrics");
        assert!(
            out.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{out}"
        );
        assert!(
            out.ends_with("\r\n\r\nerror: the arbiter thread is gone\n"),
            "{out}"
        );
    }

    #[test]
    fn a_client_trickling_its_request_is_cut_off_at_one_deadline() {
        // 300 ms for the whole request; a byte every 50 ms, so every single
        // read returns well within any per-read timeout.
        let server = serve(
            || Ok("pktsched_up 1\n".to_string()),
            Duration::from_millis(300),
        );
        let mut s = TcpStream::connect(server.addr).expect("connect");
        let mut accepted = 0;
        while accepted < 200 && s.write_all(b"G").is_ok() {
            accepted += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        // About 6 bytes (300 ms / 50 ms) and the one or two the closed
        // connection still takes; 100 allows for a very loaded machine.
        assert!(
            accepted < 100,
            "the trickling client was never cut off ({accepted} bytes)"
        );
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        if !answer.is_empty() {
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        }
        let ok = get(server.addr, "/metrics");
        assert!(
            ok.contains("pktsched_up 1"),
            "another client is served: {ok}"
        );
    }
}
