//! `pktsched gen`: paced UDP flows with stamps, one socket per flow (its
//! DSCP set on the socket). Send times come from each flow's own schedule
//! (CBR spacing or exponential gaps), kept in a heap; the generator sleeps
//! when the next send is far and spins when it is near. A blocking socket
//! that pushes back simply delays the schedule (catching up later at full
//! speed), so the rate achieved is what actually left.

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
use crate::sys::monotonic_ns;

/// Headers below the UDP payload: Ethernet 14 + IPv4 20 + UDP 8.
const V4_HEADERS: u32 = 42;
/// Ethernet 14 + IPv6 40 + UDP 8.
const V6_HEADERS: u32 = 62;
/// Sleep instead of spinning when the next send is further than this.
const SPIN_BELOW_NS: u64 = 100_000;

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
}

/// One flow instance being generated.
struct Live {
    socket: Socket,
    spec: FlowSpec,
    headers: u32,
    seq: u64,
    /// Mean gap between sends per frame byte, ns (`8e9 / rate`).
    ns_per_byte: f64,
    report: GenFlowReport,
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

/// Runs `flows` for `duration` (or until `stop`); `progress` gets the
/// fraction done about every 100 ms.
pub fn generate(
    flows: &[FlowSpec],
    duration: Duration,
    seed: u64,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64),
) -> std::io::Result<GenReport> {
    let mut live = Vec::new();
    for spec in flows {
        for i in 0..spec.count {
            if live.len() >= MAX_FLOWS {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_FLOWS} flows in all (counting `count`)"
                )));
            }
            let port = spec.dport + i as u16;
            live.push(Live {
                socket: open(spec, port)?,
                headers: if spec.dst.is_ipv4() {
                    V4_HEADERS
                } else {
                    V6_HEADERS
                },
                ns_per_byte: 8e9 / spec.rate.as_bps() as f64,
                spec: spec.clone(),
                seq: 0,
                report: GenFlowReport {
                    flow: live.len() as u16,
                    dst: SocketAddr::new(spec.dst, port).to_string(),
                    sent: 0,
                    frame_bytes: 0,
                    rate_bps: 0,
                    errors: 0,
                },
            });
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
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
        if now >= next_progress {
            if stop.load(Ordering::Relaxed) {
                partial = true;
                break;
            }
            progress((now - start) as f64 / (end - start).max(1) as f64);
            next_progress = now + 100_000_000;
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
            flow: f.report.flow,
            seq: f.seq,
            tx_ns: now,
        };
        stamp.write(&mut buf);
        match f.socket.send(&buf[..payload]) {
            Ok(_) => {
                f.report.sent += 1;
                f.report.frame_bytes += u64::from(size);
                f.seq += 1;
            }
            Err(_) => f.report.errors += 1,
        }
        let gap = f64::from(size) * f.ns_per_byte;
        let gap = match f.spec.pattern {
            Pattern::Cbr => gap,
            Pattern::Poisson => -gap * (1.0 - rng.random::<f64>()).ln(),
        };
        heap.push(Reverse((due + gap.max(1.0) as u64, i)));
    }
    let secs = (monotonic_ns() - start) as f64 / 1e9;
    let flows = live
        .into_iter()
        .map(|mut f| {
            f.report.rate_bps = (f.report.frame_bytes as f64 * 8.0 / secs.max(1e-9)) as u64;
            f.report
        })
        .collect();
    Ok(GenReport {
        flows,
        seconds: secs,
        partial,
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
