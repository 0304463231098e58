//! `pktsched gen`: paced UDP flows with stamps, one socket per flow (its
//! DSCP set on the socket) sending one datagram per call or a flow's due
//! datagrams in one call with UDP GSO ([`GenBackend::Gso`]), or whole
//! frames through an AF_PACKET transmit ring in batches
//! ([`GenBackend::Packet`]). Send times come from each flow's own schedule
//! (CBR spacing or exponential gaps), kept in a heap; the generator sleeps
//! when the next send is far and spins when it is near. A blocking socket
//! that pushes back simply delays the schedule (catching up later at full
//! speed), so the rate achieved is what actually left; the run ends after
//! its duration even when behind schedule (saturation).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

use super::Stamp;
use super::gen_flows::{FlowSpec, MAX_FLOWS, Pattern, Sizes};
use super::gso_out::GsoOut;
use super::ring_out::{RING_BATCH, RingOut, RingTarget};
use crate::sys::monotonic_ns;

/// Headers below the UDP payload: Ethernet 14 + IPv4 20 + UDP 8.
const V4_HEADERS: u32 = 42;
/// Ethernet 14 + IPv6 40 + UDP 8.
const V6_HEADERS: u32 = 62;
/// Sleep instead of spinning when the next send is further than this
/// (with a 1 µs timer slack, a sleep ends within a few µs of its target,
/// so the generator leaves the CPU to a sink or router sharing it).
const SPIN_BELOW_NS: u64 = 20_000;
/// The generator thread's timer slack, ns (the kernel's default is 50 µs).
const TIMER_SLACK_NS: u64 = 1_000;

/// What one flow sent.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GenFlowReport {
    /// Flow number (as in the stamps).
    pub flow: u16,
    /// Destination.
    pub dst: String,
    /// Datagrams sent.
    pub sent: u64,
    /// Frame bytes sent (sizes as configured, without FCS).
    pub frame_bytes: u64,
    /// Achieved frame rate over the run, bits/s.
    pub rate_bps: u64,
    /// Sends that failed (counted, not retried).
    pub errors: u64,
}

/// What the generator did.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GenReport {
    /// Per flow.
    pub flows: Vec<GenFlowReport>,
    /// Seconds the run took.
    pub seconds: f64,
    /// Stopped early (a signal).
    pub partial: bool,
    /// Frame bits/s the flows asked for, all together.
    pub offered_bps: u64,
    /// Frame bits/s that left, all together.
    pub sent_bps: u64,
}

/// Below this fraction of the offered load, the load was not met (the
/// machine or the backend could not send that fast).
pub const MET_FRACTION: f64 = 0.95;

impl GenReport {
    /// Whether what left is at least [`MET_FRACTION`] of what was asked.
    pub fn load_met(&self) -> bool {
        self.sent_bps as f64 >= self.offered_bps as f64 * MET_FRACTION
    }
}

/// One flow instance being generated.
struct Live {
    spec: FlowSpec,
    port: u16,
    headers: u32,
    seq: u64,
    /// Mean gap between sends per frame byte, ns (`8e9 / rate`).
    ns_per_byte: f64,
}

/// How the generator's frames leave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenBackend {
    /// One UDP socket per flow instance, one `send` per datagram.
    Socket,
    /// Whole frames through an AF_PACKET transmit ring, in batches
    /// ([`super::ring_out`]).
    Packet(RingTarget),
    /// One UDP socket per flow instance, up to
    /// [`super::gso_out::GSO_BATCH`] equal-size datagrams of a flow per
    /// `send`, segmented by the kernel (`UDP_SEGMENT`,
    /// [`super::gso_out`]); unprivileged.
    Gso,
}

/// Where frames go: sockets (sent one by one), sockets with GSO batches,
/// or the ring (batched).
enum Out {
    Sockets(Vec<Socket>),
    Gso(Box<GsoOut>),
    Ring(Box<RingOut>),
}

impl Out {
    /// Opens `backend` for the flow instances `live`.
    fn open(backend: &GenBackend, live: &[Live]) -> std::io::Result<Out> {
        let sockets = || -> std::io::Result<Vec<Socket>> {
            live.iter().map(|f| open(&f.spec, f.port)).collect()
        };
        Ok(match backend {
            GenBackend::Socket => Out::Sockets(sockets()?),
            GenBackend::Gso => {
                let largest: Vec<usize> = live
                    .iter()
                    .map(|f| (largest_size(&f.spec.sizes).saturating_sub(f.headers)) as usize)
                    .collect();
                Out::Gso(Box::new(GsoOut::new(sockets()?, &largest)))
            }
            GenBackend::Packet(target) => {
                let instances: Vec<(FlowSpec, u16)> =
                    live.iter().map(|f| (f.spec.clone(), f.port)).collect();
                Out::Ring(Box::new(RingOut::open(target, &instances)?))
            }
        })
    }

    /// Sends what a batching backend holds (before a wait and at the end).
    fn flush(&mut self, reports: &mut [GenFlowReport]) {
        match self {
            Out::Sockets(_) => {}
            Out::Gso(g) => g.flush(reports),
            Out::Ring(r) => r.flush(reports),
        }
    }
}

/// The largest frame of `sizes`.
fn largest_size(sizes: &Sizes) -> u32 {
    match sizes {
        Sizes::Fixed(s) => *s,
        Sizes::Mix(mix) => mix.iter().map(|&(s, _)| s).max().unwrap_or(0),
    }
}

fn open(spec: &FlowSpec, port: u16) -> std::io::Result<Socket> {
    let dst = SocketAddr::new(spec.dst, port);
    let socket = Socket::new(Domain::for_address(dst), Type::DGRAM, Some(Protocol::UDP))?;
    let tos = u32::from(spec.dscp) << 2;
    if spec.dst.is_ipv4() {
        socket.set_tos_v4(tos)?;
    } else {
        socket.set_tclass_v6(tos)?;
    }
    if spec.sport != 0 {
        let any: SocketAddr = if spec.dst.is_ipv4() {
            ([0, 0, 0, 0], spec.sport).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, spec.sport).into()
        };
        socket.set_reuse_port(true)?;
        socket.bind(&any.into())?;
    }
    socket.connect(&dst.into())?;
    Ok(socket)
}

fn pick_size(sizes: &Sizes, rng: &mut ChaCha8Rng) -> u32 {
    match sizes {
        Sizes::Fixed(s) => *s,
        Sizes::Mix(mix) => {
            let total: u32 = mix.iter().map(|&(_, w)| w).sum();
            let mut x = rng.random_range(0..total.max(1));
            for &(s, w) in mix {
                if x < w {
                    return s;
                }
                x -= w;
            }
            mix[0].0
        }
    }
}

/// The flow instances of `flows` (`count` expanded), with their reports.
fn expand(flows: &[FlowSpec]) -> std::io::Result<(Vec<Live>, Vec<GenFlowReport>)> {
    let mut live = Vec::new();
    let mut reports = Vec::new();
    for spec in flows {
        for i in 0..spec.count {
            if live.len() >= MAX_FLOWS {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_FLOWS} flows in all (counting `count`)"
                )));
            }
            let port = spec.dport + i as u16;
            reports.push(GenFlowReport {
                flow: live.len() as u16,
                dst: SocketAddr::new(spec.dst, port).to_string(),
                sent: 0,
                frame_bytes: 0,
                rate_bps: 0,
                errors: 0,
            });
            live.push(Live {
                headers: if spec.dst.is_ipv4() {
                    V4_HEADERS
                } else {
                    V6_HEADERS
                },
                ns_per_byte: 8e9 / spec.rate.as_bps() as f64,
                spec: spec.clone(),
                port,
                seq: 0,
            });
        }
    }
    Ok((live, reports))
}

/// Runs `flows` over UDP sockets for `duration` (or until `stop`);
/// `progress` gets the fraction done about every 100 ms.
pub fn generate(
    flows: &[FlowSpec],
    duration: Duration,
    seed: u64,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64),
) -> std::io::Result<GenReport> {
    generate_with(&GenBackend::Socket, flows, duration, seed, stop, progress)
}

/// Runs `flows` through `backend` for `duration` (or until `stop`);
/// `progress` gets the fraction done about every 100 ms. Each flow keeps
/// its own schedule; with the ring, frames due together (the generator
/// behind its schedule, as at saturation) leave in one batch of up to
/// [`RING_BATCH`], with GSO a flow's frames due together in one `send` of
/// up to [`super::gso_out::GSO_BATCH`]; a batch is sent before any wait.
pub fn generate_with(
    backend: &GenBackend,
    flows: &[FlowSpec],
    duration: Duration,
    seed: u64,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64),
) -> std::io::Result<GenReport> {
    let (mut live, mut reports) = expand(flows)?;
    let mut out = Out::open(backend, &live)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    crate::sys::set_timer_slack(TIMER_SLACK_NS);
    let start = monotonic_ns();
    let end = start.saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
        (0..live.len()).map(|i| Reverse((start, i))).collect();
    let mut buf = vec![0u8; 9216];
    let mut next_progress = start;
    let mut partial = false;
    while let Some(Reverse((due, i))) = heap.pop() {
        if due >= end {
            break;
        }
        let mut now = monotonic_ns();
        if now >= end {
            break; // behind schedule at the end (saturation): time is up
        }
        if now >= next_progress {
            if stop.load(Ordering::Relaxed) {
                partial = true;
                break;
            }
            progress((now - start) as f64 / (end - start).max(1) as f64);
            next_progress = now + 100_000_000;
        }
        if now < due {
            out.flush(&mut reports);
            now = monotonic_ns();
        }
        while now < due {
            if due - now > SPIN_BELOW_NS {
                std::thread::sleep(Duration::from_nanos(due - now - SPIN_BELOW_NS / 2));
            } else {
                std::hint::spin_loop();
            }
            now = monotonic_ns();
        }
        let f = &mut live[i];
        let size = pick_size(&f.spec.sizes, &mut rng);
        let payload = (size - f.headers) as usize;
        let stamp = Stamp {
            flow: reports[i].flow,
            seq: f.seq,
            tx_ns: now,
        };
        f.seq += 1;
        match &mut out {
            Out::Sockets(sockets) => {
                stamp.write(&mut buf);
                let r = &mut reports[i];
                match sockets[i].send(&buf[..payload]) {
                    Ok(_) => {
                        r.sent += 1;
                        r.frame_bytes += u64::from(size);
                    }
                    Err(_) => r.errors += 1,
                }
            }
            Out::Gso(gso) => gso.push(i, size, payload, &stamp, &mut reports),
            Out::Ring(ring) => {
                let io_stamp = pktsched_io::frame::Stamp {
                    flow: stamp.flow,
                    seq: stamp.seq,
                    tx_ns: stamp.tx_ns,
                };
                if !ring.push(i, size, payload, &io_stamp) {
                    reports[i].errors += 1;
                }
                if ring.pending() >= RING_BATCH {
                    ring.flush(&mut reports);
                }
            }
        }
        let gap = f64::from(size) * f.ns_per_byte;
        let gap = match f.spec.pattern {
            Pattern::Cbr => gap,
            Pattern::Poisson => -gap * (1.0 - rng.random::<f64>()).ln(),
        };
        heap.push(Reverse((due + gap.max(1.0) as u64, i)));
    }
    out.flush(&mut reports);
    let secs = (monotonic_ns() - start) as f64 / 1e9;
    for r in &mut reports {
        r.rate_bps = (r.frame_bytes as f64 * 8.0 / secs.max(1e-9)) as u64;
    }
    let offered_bps = flows
        .iter()
        .map(|f| f.rate.as_bps().saturating_mul(u64::from(f.count)))
        .fold(0u64, u64::saturating_add);
    Ok(GenReport {
        sent_bps: reports.iter().map(|r| r.rate_bps).sum(),
        flows: reports,
        seconds: secs,
        partial,
        offered_bps,
    })
}

impl GenReport {
    /// A table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{:>5} {:<28} {:>10} {:>14} {:>12} {:>7}\n",
            "flow", "dst", "sent", "frame bytes", "rate", "errors"
        );
        for f in &self.flows {
            s += &format!(
                "{:>5} {:<28} {:>10} {:>14} {:>12} {:>7}\n",
                f.flow,
                f.dst,
                f.sent,
                f.frame_bytes,
                format!("{:.3}Mbit", f.rate_bps as f64 / 1e6),
                f.errors
            );
        }
        s += &format!(
            "offered {:.3}Mbit sent {:.3}Mbit{}\n",
            self.offered_bps as f64 / 1e6,
            self.sent_bps as f64 / 1e6,
            if self.load_met() {
                ""
            } else {
                " (offered load not met)"
            }
        );
        s += &format!(
            "{:.2} s{}\n",
            self.seconds,
            if self.partial {
                " (partial: stopped by a signal)"
            } else {
                ""
            }
        );
        s
    }
}
