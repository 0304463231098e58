//! The optional Prometheus endpoint (`control.prometheus`, bound to
//! 127.0.0.1 unless an address is given): `GET /metrics` answers the
//! counters in the text exposition format; anything else is a 404. One
//! connection at a time, with read and write timeouts, so a slow or hostile
//! client cannot hold the thread.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Longest request read (headers included).
const MAX_REQUEST: usize = 8192;
/// How long a client may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// A running endpoint; [`MetricsServer::stop`] ends it.
#[derive(Debug)]
pub struct MetricsServer {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// Where it listens (the port is known once bound, also for port 0).
    pub addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` and serves `metrics()` on a thread.
    pub fn start(
        addr: SocketAddr,
        metrics: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("pktsched-metrics".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((s, _)) => answer(s, &metrics),
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

    /// Stops serving.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn answer(mut s: TcpStream, metrics: &dyn Fn() -> String) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = s.set_write_timeout(Some(CLIENT_TIMEOUT));
    let mut req = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while req.len() < MAX_REQUEST && !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (status, body) = match (words.next(), words.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", metrics()),
        _ => ("404 Not Found", "only GET /metrics is served\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_metrics_and_nothing_else() {
        let server = MetricsServer::start("127.0.0.1:0".parse().expect("addr"), || {
            "pktsched_up 1\n".to_string()
        })
        .expect("bind");
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
}
