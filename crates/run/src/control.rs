//! The control socket: a Unix stream socket (mode 0600, owner only) on
//! which `pktsched stats` and `pktsched reload` ask the running shaper for
//! something. One request line per connection, one answer, then close.
//!
//! Requests: `stats`, `stats json`, `prometheus`, `dump`, `reload`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::deadline::{Deadline, read_until, write_all_by};

/// A request on the control socket.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Counters as `tc -s`-style text.
    Stats,
    /// Counters as JSON.
    StatsJson,
    /// Counters in the Prometheus text format.
    Prometheus,
    /// The pipeline with its counters.
    Dump,
    /// Re-read the config file and apply it.
    Reload,
}

impl Request {
    /// The request's line.
    pub fn line(self) -> &'static str {
        match self {
            Request::Stats => "stats",
            Request::StatsJson => "stats json",
            Request::Prometheus => "prometheus",
            Request::Dump => "dump",
            Request::Reload => "reload",
        }
    }

    /// Parses a request line.
    pub fn parse(line: &str) -> Option<Request> {
        [
            Request::Stats,
            Request::StatsJson,
            Request::Prometheus,
            Request::Dump,
            Request::Reload,
        ]
        .into_iter()
        .find(|r| r.line() == line.trim())
    }
}

/// Longest request line read.
const MAX_REQUEST: usize = 256;
/// How long a client may take to send its request line, and again to
/// read the answer: one deadline for each, however the client paces its
/// bytes (see [`crate::deadline`]).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Errors of the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Creating the socket failed.
    #[error("control socket {path}: {error}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// Why (in the message, not a separate source: printed once).
        error: std::io::Error,
    },
    /// Another shaper answers on that path.
    #[error(
        "control socket {0} is in use by a running pktsched (stop it or choose control.socket)"
    )]
    InUse(PathBuf),
    /// The path exists and is something else than a socket: never
    /// removed or connected to.
    #[error(
        "control socket {path} is {what}, not a socket: allowed a path that does not exist yet \
         or pktsched's own socket (choose another control.socket)"
    )]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What it is (`a regular file`, `a directory`, ...).
        what: &'static str,
    },
    /// The socket's mode lets others than its owner connect: not a socket
    /// pktsched made (it makes them 0600), or changed since.
    #[error(
        "control socket {path} has mode {mode:04o}: allowed 0600 (owner only), the mode \
         pktsched gives it; it is not pktsched's or its mode was changed (restart pktsched \
         or chmod 600 it)"
    )]
    Mode {
        /// The path.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A socket file is there and connecting to it failed otherwise than
    /// "refused" (a permission error, a socket of another type): it may
    /// be another program's, so it is left alone.
    #[error(
        "control socket {path} exists and cannot be checked: {error}; it is left alone \
         (allowed: a path that does not exist yet, or a stale socket nobody listens on, \
         which is replaced; remove it yourself or choose another control.socket)"
    )]
    Unchecked {
        /// The path.
        path: PathBuf,
        /// Why connecting failed (in the message, not a separate source).
        error: std::io::Error,
    },
    /// Connecting or talking to the shaper failed.
    #[error(
        "cannot reach pktsched on {path}: {error} (is `pktsched run` or `pktsched route` \
         running with this control.socket?)"
    )]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// Why (in the message, not a separate source: printed once).
        error: std::io::Error,
    },
}

/// The listening end; removes its socket file when dropped.
#[derive(Debug)]
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    /// A client's time per phase ([`CLIENT_TIMEOUT`]).
    timeout: Duration,
}

/// A listening Unix socket at `path` whose file is owner-only from the
/// moment it exists: the socket's own mode is set to 0600 before `bind`
/// (Linux creates the file with that mode less the umask), then the
/// file's to exactly 0600 (a umask can only have taken bits away). A
/// chmod after a plain `bind` left a window in which, under a lax umask,
/// another user could connect and be served once `serve` ran.
fn bind_owner_only(path: &Path) -> std::io::Result<UnixListener> {
    let socket = bound_with_mode(path, 0o600)?;
    socket.listen(128)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(UnixListener::from(std::os::fd::OwnedFd::from(socket)))
}

/// A Unix stream socket bound to `path`, its file created with `mode`
/// less the umask (the socket's own mode, set with `fchmod` through a
/// `File` of its descriptor before `bind`).
fn bound_with_mode(path: &Path, mode: u32) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, SockAddr, Socket, Type};
    use std::os::fd::OwnedFd;
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    let as_file = std::fs::File::from(OwnedFd::from(socket));
    as_file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    let socket = Socket::from(OwnedFd::from(as_file));
    socket.bind(&SockAddr::unix(path)?)?;
    Ok(socket)
}

impl ControlServer {
    /// Binds `path` with mode 0600. A stale socket file (nobody answering)
    /// is replaced; a live one is an error.
    pub fn bind(path: &Path) -> Result<ControlServer, ControlError> {
        if let Some(what) = not_a_socket(path) {
            return Err(ControlError::NotASocket {
                path: path.to_path_buf(),
                what,
            });
        }
        if path.exists() {
            match UnixStream::connect(path) {
                Ok(_) => return Err(ControlError::InUse(path.to_path_buf())),
                Err(e) if is_stale(&e) => {
                    let _ = std::fs::remove_file(path);
                }
                // Gone in between: nothing to remove.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(ControlError::Unchecked {
                        path: path.to_path_buf(),
                        error,
                    });
                }
            }
        }
        let bind_err = |error| ControlError::Bind {
            path: path.to_path_buf(),
            error,
        };
        let listener = bind_owner_only(path).map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
            timeout: CLIENT_TIMEOUT,
        })
    }

    /// A client's time per phase other than [`CLIENT_TIMEOUT`] (tests).
    #[cfg(test)]
    fn with_client_timeout(mut self, timeout: Duration) -> ControlServer {
        self.timeout = timeout;
        self
    }

    /// Serves requests with `answer` until `stop` is set (checked every
    /// 50 ms).
    pub fn serve(&self, stop: &AtomicBool, answer: &dyn Fn(Request) -> String) {
        while !stop.load(Ordering::Acquire) {
            match self.listener.accept() {
                Ok((stream, _)) => handle(stream, answer, self.timeout),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn handle(mut stream: UnixStream, answer: &dyn Fn(Request) -> String, timeout: Duration) {
    let _ = stream.set_nonblocking(false);
    let mut req = Vec::with_capacity(64);
    let read = read_until(
        &mut stream,
        Deadline::after(timeout),
        MAX_REQUEST,
        &mut req,
        |r| r.contains(&b'\n'),
    );
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let reply = match (read, Request::parse(&line)) {
        (Err(e), _) if e.kind() == std::io::ErrorKind::TimedOut => format!(
            "error: no complete request line within {} ms\n",
            timeout.as_millis()
        ),
        (Ok(()), Some(r)) => answer(r),
        _ => format!(
            "error: unknown request {:?}; allowed: stats, stats json, prometheus, dump, reload\n",
            line.trim()
        ),
    };
    // The answer has a deadline of its own: a reload may take a while
    // before it is ready.
    let _ = write_all_by(&mut stream, Deadline::after(timeout), reply.as_bytes());
}

/// `true` if a failed connect means nobody listens on the socket file
/// (`ECONNREFUSED`): a stale file a stopped daemon left, safe to replace.
/// Any other error (a permission error, a socket of another type) says
/// nothing of the kind.
fn is_stale(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::ConnectionRefused
}

/// What the file at `path` is when it exists and is not a socket
/// (symbolic links followed).
fn not_a_socket(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    if t.is_socket() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_file() {
        Some("a regular file")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else {
        Some("a device or other special file")
    }
}

/// Sends `req` to the shaper listening on `path` and returns its answer.
/// A path that is not a socket, or a socket others than its owner may use
/// (not mode 0600), is refused before connecting.
pub fn request(path: &Path, req: Request) -> Result<String, ControlError> {
    if let Some(what) = not_a_socket(path) {
        return Err(ControlError::NotASocket {
            path: path.to_path_buf(),
            what,
        });
    }
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(ControlError::Mode {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    let err = |error| ControlError::Connect {
        path: path.to_path_buf(),
        error,
    };
    let mut s = UnixStream::connect(path).map_err(err)?;
    s.set_read_timeout(Some(answer_wait(req))).map_err(err)?;
    s.write_all(format!("{}\n", req.line()).as_bytes())
        .map_err(err)?;
    let mut out = String::new();
    s.take(64 << 20).read_to_string(&mut out).map_err(err)?;
    Ok(out)
}

/// How long a client waits for the daemon's answer to `req`: a reload is
/// answered only once the scheduling thread has taken it (up to
/// [`crate::engine::RELOAD_WAIT`]) and applied it (as long again), after
/// the daemon has read and checked the new config; every other answer is
/// a snapshot.
fn answer_wait(req: Request) -> Duration {
    match req {
        Request::Reload => 2 * crate::engine::RELOAD_WAIT + Duration::from_secs(5),
        _ => Duration::from_secs(10),
    }
}

/// A flag and a thread serving the control socket; [`ControlThread::stop`]
/// (or dropping it) ends it.
#[derive(Debug)]
pub struct ControlThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl ControlThread {
    /// Serves `server` on a new thread.
    pub fn spawn(
        server: ControlServer,
        answer: impl Fn(Request) -> String + Send + 'static,
    ) -> std::io::Result<ControlThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("pktsched-control".into())
            .spawn(move || server.serve(&flag, &answer))?;
        Ok(ControlThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops serving and removes the socket (as dropping it does).
    pub fn stop(self) {}
}

impl Drop for ControlThread {
    /// Stops serving and removes the socket: also when a daemon returns
    /// early with an error, no thread serves on and no socket file stays.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_socket(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("pktsched-ctl-{}-{name}.sock", std::process::id()))
    }

    /// The client outwaits the daemon's longest answer (a reload taken at
    /// the end of its first wait and applied at the end of its second),
    /// so it reads the daemon's own "not confirmed" text, not a timeout
    /// that blames the connection.
    #[test]
    fn a_reload_client_outwaits_the_daemons_longest_answer() {
        assert!(answer_wait(Request::Reload) > 2 * crate::engine::RELOAD_WAIT);
        for req in [
            Request::Stats,
            Request::StatsJson,
            Request::Prometheus,
            Request::Dump,
        ] {
            assert!(answer_wait(req) > CLIENT_TIMEOUT, "{req:?}");
        }
    }

    /// The socket file is owner-only as `bind` creates it, before any
    /// chmod: a plain bind gives it 0777 less the umask (0755 under the
    /// usual 022), which group and others could connect through.
    #[test]
    fn the_socket_file_is_created_owner_only() {
        let path = scratch_socket("created");
        let _socket = bound_with_mode(&path, 0o600).expect("bind");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn answers_requests_owner_only_and_cleans_up() {
        let path = scratch_socket("a");
        let server = ControlServer::bind(&path).expect("bind");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(matches!(
            ControlServer::bind(&path),
            Err(ControlError::InUse(_))
        ));
        let t = ControlThread::spawn(server, |r| format!("got {}\n", r.line())).expect("thread");
        assert_eq!(
            request(&path, Request::StatsJson).expect("ask"),
            "got stats json\n"
        );
        let mut s = UnixStream::connect(&path).expect("connect");
        s.write_all(b"rm -rf /\n").expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        assert!(
            out.starts_with("error: unknown request \"rm -rf /\""),
            "{out}"
        );
        t.stop();
        assert!(!path.exists());
        assert!(matches!(
            request(&path, Request::Stats),
            Err(ControlError::Connect { .. })
        ));
    }

    #[test]
    fn a_client_trickling_its_request_is_cut_off_at_one_deadline() {
        let path = scratch_socket("trickle");
        let server = ControlServer::bind(&path)
            .expect("bind")
            .with_client_timeout(Duration::from_millis(300));
        let t = ControlThread::spawn(server, |r| format!("got {}\n", r.line())).expect("thread");
        // A byte every 50 ms, never a newline: every single read returns
        // well within any per-read timeout, and 200 bytes stay under the
        // 256-byte limit.
        let mut s = UnixStream::connect(&path).expect("connect");
        let mut accepted = 0;
        while accepted < 200 && s.write_all(b"s").is_ok() {
            accepted += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        // About 6 bytes (300 ms / 50 ms); 100 allows for a loaded machine.
        assert!(
            accepted < 100,
            "the trickling client was never cut off ({accepted} bytes)"
        );
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(
            out.starts_with("error: no complete request line within 300 ms"),
            "{out}"
        );
        assert_eq!(
            request(&path, Request::Stats).expect("another client"),
            "got stats\n"
        );
        t.stop();
    }

    #[test]
    fn a_stale_socket_file_is_replaced() {
        let path = scratch_socket("b");
        drop(UnixListener::bind(&path).expect("stale"));
        assert!(path.exists());
        let server = ControlServer::bind(&path).expect("replaces stale");
        drop(server);
        assert!(!path.exists());
    }

    #[test]
    fn only_a_refused_connect_makes_a_socket_file_stale() {
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert!(is_stale(&refused));
        for other in [libc::EACCES, libc::EPERM, libc::EPROTOTYPE, libc::ETIMEDOUT] {
            let e = std::io::Error::from_raw_os_error(other);
            assert!(!is_stale(&e), "{e}");
        }
    }

    #[test]
    fn a_socket_file_that_fails_otherwise_than_refused_is_left_alone() {
        // A datagram socket: a stream connect fails with EPROTOTYPE (as a
        // permission error would for a non-root caller), not "refused".
        let path = scratch_socket("dgram");
        let other = std::os::unix::net::UnixDatagram::bind(&path).expect("datagram socket");
        let e = ControlServer::bind(&path).expect_err("not stale");
        let text = e.to_string();
        assert!(matches!(e, ControlError::Unchecked { .. }), "{text}");
        assert!(
            text.contains(&path.display().to_string()) && text.contains("left alone"),
            "{text}"
        );
        assert!(path.exists(), "another program's socket is not removed");
        drop(other);
        std::fs::remove_file(&path).expect("cleanup");
    }

    #[test]
    fn a_path_that_is_not_a_socket_is_left_alone_and_named() {
        let path = scratch_socket("file");
        std::fs::write(&path, "precious").expect("file");
        let e = ControlServer::bind(&path).expect_err("a regular file");
        assert!(
            e.to_string().contains("is a regular file, not a socket"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&path).expect("kept"), "precious");
        let e = request(&path, Request::Stats).expect_err("a regular file");
        assert!(matches!(e, ControlError::NotASocket { .. }), "{e}");
        std::fs::remove_file(&path).expect("cleanup");
        let dir = std::env::temp_dir();
        let e = request(&dir, Request::Stats).expect_err("a directory");
        assert!(
            e.to_string().contains("is a directory, not a socket"),
            "{e}"
        );
    }

    #[test]
    fn a_socket_others_may_use_is_refused_naming_its_mode() {
        let path = scratch_socket("mode");
        let server = ControlServer::bind(&path).expect("bind");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let e = request(&path, Request::Stats).expect_err("0666");
        assert!(e.to_string().contains("has mode 0666: allowed 0600"), "{e}");
        drop(server);
        assert!(!path.exists());
    }
}
