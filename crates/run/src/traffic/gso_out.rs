//! The generator's UDP GSO backend (`pktsched gen --backend gso`): one UDP
//! socket per flow instance, as the socket backend, but up to
//! [`GSO_BATCH`] equal-size datagrams of a flow leave in one `send` with
//! `UDP_SEGMENT` (Linux ≥ 4.18) set to their payload length. The kernel
//! builds one buffer and cuts it into datagrams in software at the
//! sending device (a veth here: its peer's XDP program turns the veth's
//! segmentation offload off, and the lab topology turns it off anyway),
//! inside one transmit of the segment list with bottom halves disabled —
//! so the peer's receive (its NAPI poll) runs once per batch instead of
//! once per frame, and the frames are ordinary linear socket buffers (no
//! zero-copy ring pages to copy at the veth, as the AF_PACKET ring's are).
//!
//! Each segment carries its own [`Stamp`] (flow, sequence number, the
//! time it was due) at the start of its payload, written into the one
//! buffer per segment, so the sink sees exactly what the socket backend
//! sends. A batch holds one flow's frames of one size: a flow with a size
//! mix sends its pending batch whenever the size changes (runs of equal
//! sizes still go together). If the kernel refuses a segmented send
//! (`EMSGSIZE`: a datagram above the path MTU, which the kernel would
//! otherwise fragment; `EINVAL`/`EIO`/`ENOPROTOOPT`: no UDP GSO), that
//! flow falls back to one datagram per send for the rest of the run, and
//! the refused batch is sent that way. Other send errors (e.g.
//! `ENOBUFS`) count every frame of the batch as an error, as the socket
//! backend counts its one datagram. Buffers are allocated once, when the
//! backend opens: nothing per frame.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use socket2::Socket;

use super::Stamp;
use super::generator::GenFlowReport;

/// Datagrams per `send` at most (the kernel's own limit is
/// `UDP_MAX_SEGMENTS`, 64 on older kernels, 128 on newer ones).
pub const GSO_BATCH: usize = 64;
/// `UDP_SEGMENT` (linux/udp.h; not in the libc crate for glibc targets).
const UDP_SEGMENT: libc::c_int = 103;
/// The largest UDP payload of one send over IPv4 (65535 − 20 − 8).
const MAX_SEND: usize = 65_507;
/// All flows' batch buffers together stay under this (with many flows,
/// each flow's batch is shorter).
const BUFFERS_TOTAL: usize = 16 << 20;

/// One flow instance's socket and pending batch.
struct FlowBatch {
    socket: Socket,
    /// The batch: `count` segments of `seg_len` bytes, back to back.
    buf: Vec<u8>,
    seg_len: usize,
    count: usize,
    /// The frame size of the pending segments (for the byte counters).
    frame_size: u32,
    /// Segments per send at most (1 after a fallback).
    cap: usize,
    /// The socket's current `UDP_SEGMENT` value (0: off).
    gso_set: usize,
}

/// Every flow instance's socket and batch.
pub(crate) struct GsoOut {
    flows: Vec<FlowBatch>,
    /// Segments pending over all flows.
    pending: usize,
}

/// Sets `UDP_SEGMENT` on `fd` to `size` bytes (0: off).
#[allow(unsafe_code)]
fn set_udp_segment(fd: BorrowedFd<'_>, size: usize) -> std::io::Result<()> {
    let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is an open socket for the call (borrowed); the option
    // value is a live c_int whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `e` says the kernel will not segment this send (so one
/// datagram per send is the way).
fn refused_segmentation(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMSGSIZE | libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
    )
}

/// Segments per send for a flow whose largest UDP payload is `payload`
/// bytes, with `flows` flow instances sharing [`BUFFERS_TOTAL`].
fn batch_cap(payload: usize, flows: usize) -> usize {
    let per_flow = (BUFFERS_TOTAL / flows.max(1)).min(MAX_SEND);
    (per_flow / payload.max(1)).clamp(1, GSO_BATCH)
}

impl GsoOut {
    /// Wraps the flow instances' connected sockets; `largest[i]` is the
    /// largest UDP payload flow instance `i` sends.
    pub(crate) fn new(sockets: Vec<Socket>, largest: &[usize]) -> GsoOut {
        let n = sockets.len();
        let flows = sockets
            .into_iter()
            .zip(largest)
            .map(|(socket, &payload)| {
                let cap = batch_cap(payload, n);
                FlowBatch {
                    socket,
                    buf: vec![0u8; cap * payload.max(1)],
                    seg_len: 0,
                    count: 0,
                    frame_size: 0,
                    cap,
                    gso_set: 0,
                }
            })
            .collect();
        GsoOut { flows, pending: 0 }
    }

    /// Frames written and not yet sent, over all flows.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Writes the frame `stamp` of flow instance `i` (`size` frame bytes,
    /// `payload` bytes of UDP payload) into its batch, sending the batch
    /// first if it holds another size and after if it is full.
    pub(crate) fn push(
        &mut self,
        i: usize,
        size: u32,
        payload: usize,
        stamp: &Stamp,
        reports: &mut [GenFlowReport],
    ) {
        let Some(f) = self.flows.get_mut(i) else {
            return;
        };
        if f.count > 0 && f.seg_len != payload {
            self.pending -= f.count;
            f.send(reports.get_mut(i));
        }
        if f.count == 0 {
            f.seg_len = payload;
            f.frame_size = size;
        }
        let at = f.count * payload;
        let Some(segment) = f.buf.get_mut(at..at + payload) else {
            // Longer than the flow's largest size (not generated).
            if let Some(r) = reports.get_mut(i) {
                r.errors += 1;
            }
            return;
        };
        let mut bytes = [0u8; Stamp::LEN];
        stamp.write(&mut bytes);
        let n = payload.min(Stamp::LEN);
        segment[..n].copy_from_slice(&bytes[..n]);
        f.count += 1;
        self.pending += 1;
        if f.count >= f.cap || (f.count + 1) * payload > f.buf.len() {
            self.pending -= f.count;
            f.send(reports.get_mut(i));
        }
    }

    /// Sends every flow's pending batch.
    pub(crate) fn flush(&mut self, reports: &mut [GenFlowReport]) {
        if self.pending == 0 {
            return;
        }
        for (i, f) in self.flows.iter_mut().enumerate() {
            if f.count > 0 {
                f.send(reports.get_mut(i));
            }
        }
        self.pending = 0;
    }
}

impl FlowBatch {
    /// Sends the pending segments (one `send`, segmented by the kernel)
    /// and counts them in `report`.
    fn send(&mut self, report: Option<&mut GenFlowReport>) {
        let (count, len) = (self.count, self.seg_len);
        self.count = 0;
        let mut sent = 0u64;
        let mut errors = 0u64;
        match self.send_segmented(count, len) {
            Ok(()) => sent = count as u64,
            Err(e) if refused_segmentation(&e) && self.cap > 1 => {
                // No GSO for this flow: one datagram per send from now on.
                self.cap = 1;
                if self.gso_set != 0 && set_udp_segment(self.socket_fd(), 0).is_ok() {
                    self.gso_set = 0;
                }
                for k in 0..count {
                    match self.socket.send(&self.buf[k * len..(k + 1) * len]) {
                        Ok(_) => sent += 1,
                        Err(_) => errors += 1,
                    }
                }
            }
            Err(_) => errors = count as u64,
        }
        if let Some(r) = report {
            r.sent += sent;
            r.frame_bytes += sent * u64::from(self.frame_size);
            r.errors += errors;
        }
    }

    /// One `send` of `count` segments of `len` bytes; `UDP_SEGMENT` set
    /// to `len` first when more than one, and off when its value would
    /// cut a single datagram.
    fn send_segmented(&mut self, count: usize, len: usize) -> std::io::Result<()> {
        let wanted = if count > 1 {
            len
        } else if self.gso_set >= len {
            self.gso_set
        } else {
            0
        };
        if wanted != self.gso_set {
            set_udp_segment(self.socket_fd(), wanted)?;
            self.gso_set = wanted;
        }
        self.socket.send(&self.buf[..count * len]).map(|_| ())
    }

    fn socket_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn report() -> GenFlowReport {
        GenFlowReport {
            flow: 0,
            dst: String::new(),
            sent: 0,
            frame_bytes: 0,
            rate_bps: 0,
            errors: 0,
        }
    }

    /// A receiver on loopback and a connected sender to it.
    fn pair() -> (UdpSocket, Socket) {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )
        .unwrap();
        tx.connect(&rx.local_addr().unwrap().into()).unwrap();
        (rx, tx)
    }

    fn stamp(seq: u64) -> Stamp {
        Stamp {
            flow: 3,
            seq,
            tx_ns: 1_000_000 + seq * 7,
        }
    }

    #[test]
    fn batch_caps_follow_the_payload_and_the_flow_count() {
        assert_eq!(batch_cap(22, 1), GSO_BATCH);
        // 65 507 bytes a send: 44 payloads of 1 458 bytes, 7 of 9 174.
        assert_eq!(batch_cap(1458, 1), 44);
        assert_eq!(batch_cap(9174, 1), 7);
        assert_eq!(batch_cap(70_000, 1), 1);
        // 16 MiB over 1 024 flows: 16 KiB each, 11 payloads of 1 458
        // bytes, and still one of 9 174.
        assert_eq!(batch_cap(1458, 1024), 11);
        assert_eq!(batch_cap(9174, 1024), 1);
    }

    /// A full batch leaves as one send: the receiver gets every segment as
    /// its own datagram of the configured length, each with its own stamp,
    /// in order.
    #[test]
    fn every_segment_of_a_batch_arrives_with_its_own_stamp() {
        let (rx, tx) = pair();
        let payload = 22; // a 64-byte IPv4 frame
        let mut out = GsoOut::new(vec![tx], &[payload]);
        let mut reports = vec![report()];
        for seq in 0..(GSO_BATCH as u64 + 5) {
            out.push(0, 64, payload, &stamp(seq), &mut reports);
        }
        // The first batch left when full; five wait for the flush.
        assert_eq!(out.pending(), 5);
        assert_eq!(reports[0].sent, GSO_BATCH as u64);
        out.flush(&mut reports);
        assert_eq!(out.pending(), 0);
        assert_eq!(reports[0].sent, GSO_BATCH as u64 + 5);
        assert_eq!(reports[0].frame_bytes, 64 * (GSO_BATCH as u64 + 5));
        assert_eq!(reports[0].errors, 0);
        let mut buf = [0u8; 2048];
        for seq in 0..(GSO_BATCH as u64 + 5) {
            let n = rx.recv(&mut buf).expect("a datagram per segment");
            assert_eq!(n, payload, "segment {seq}");
            assert_eq!(Stamp::read(&buf[..n]), Some(stamp(seq)), "segment {seq}");
            assert!(buf[Stamp::LEN..n].iter().all(|&b| b == 0));
        }
    }

    /// A size change sends the pending batch first; each datagram keeps
    /// its own length and stamp.
    #[test]
    fn a_size_change_splits_the_batch() {
        let (rx, tx) = pair();
        let mut out = GsoOut::new(vec![tx], &[1458]);
        let mut reports = vec![report()];
        let sizes = [100usize, 100, 100, 1458, 1458, 22, 100];
        for (seq, &p) in sizes.iter().enumerate() {
            out.push(0, p as u32 + 42, p, &stamp(seq as u64), &mut reports);
        }
        out.flush(&mut reports);
        assert_eq!(reports[0].sent, sizes.len() as u64);
        let bytes: usize = sizes.iter().map(|p| p + 42).sum();
        assert_eq!(reports[0].frame_bytes, bytes as u64);
        let mut buf = [0u8; 2048];
        for (seq, &p) in sizes.iter().enumerate() {
            let n = rx.recv(&mut buf).expect("datagram");
            assert_eq!(n, p, "datagram {seq}");
            assert_eq!(Stamp::read(&buf[..n]), Some(stamp(seq as u64)));
        }
    }

    /// The whole generator on the GSO backend into the sink over loopback
    /// at a modest rate: one flow of 64-byte frames, one of a size mix;
    /// the sink counts every frame the generator counted, none lost or
    /// reordered, each with its stamp and payload length.
    #[test]
    fn the_sink_counts_every_gso_frame_on_loopback() {
        use crate::traffic::gen_flows::FlowSpec;
        use crate::traffic::generator::{GenBackend, generate_with};
        use crate::traffic::sink::Sink;
        use std::sync::atomic::AtomicBool;

        // Above the ephemeral range and the other loopback tests' ports.
        let base = 61000 + (std::process::id() % 2250) as u16 * 2;
        let ports = [base, base + 1];
        let lo: std::net::IpAddr = "127.0.0.1".parse().expect("addr");
        let bound = Sink::bind(lo, &ports).expect("bind");
        let sink_thread = std::thread::spawn(move || {
            let never = AtomicBool::new(false);
            bound.run(
                Some(Duration::from_secs(10)),
                Duration::from_millis(500),
                &never,
            )
        });
        let flows: Vec<FlowSpec> = [
            format!("dport={base},rate=10mbit,size=64"),
            format!("dport={},rate=10mbit,size=64:3+300:1+1500:1", base + 1),
        ]
        .iter()
        .map(|s| FlowSpec::parse_cli(s, &FlowSpec::new(lo)).expect("spec"))
        .collect();
        let stop = AtomicBool::new(false);
        let g = generate_with(
            &GenBackend::Gso,
            &flows,
            Duration::from_millis(400),
            7,
            &stop,
            &mut |_| {},
        )
        .expect("generate");
        let r = sink_thread.join().expect("join");
        assert_eq!(r.unstamped, 0, "{r:?}");
        assert_eq!(r.flows.len(), 2, "{r:?}");
        for (gf, port) in g.flows.iter().zip(ports) {
            assert_eq!(gf.errors, 0, "{gf:?}");
            assert!(gf.sent > 100, "{gf:?}");
            let sf = r
                .flows
                .iter()
                .find(|f| f.port == port)
                .unwrap_or_else(|| panic!("port {port} missing: {r:?}"));
            assert_eq!(sf.received, gf.sent, "{sf:?} {gf:?}");
            assert_eq!((sf.lost, sf.reordered), (0, 0), "{sf:?}");
            // Every datagram's payload is its frame less 42 header bytes.
            assert_eq!(sf.payload_bytes, gf.frame_bytes - 42 * gf.sent, "{sf:?}");
        }
    }

    /// A send the kernel refuses outright counts every frame of the batch
    /// as an error (nothing lost silently): here the receiver is gone, so
    /// loopback answers ECONNREFUSED on a later send.
    #[test]
    fn failed_sends_are_counted_as_errors() {
        let (rx, tx) = pair();
        drop(rx);
        let mut out = GsoOut::new(vec![tx], &[22]);
        let mut reports = vec![report()];
        for round in 0..3u64 {
            for k in 0..4 {
                out.push(0, 64, 22, &stamp(round * 4 + k), &mut reports);
            }
            out.flush(&mut reports);
        }
        let r = &reports[0];
        assert_eq!(r.sent + r.errors, 12, "{r:?}");
        assert!(r.errors >= 4, "{r:?}");
        assert_eq!(r.frame_bytes, 64 * r.sent);
    }
}
