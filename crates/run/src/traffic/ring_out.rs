//! The generator's AF_PACKET backend (`pktsched gen --backend packet`):
//! whole Ethernet/IP/UDP frames, built in pool buffers
//! ([`pktsched_io::frame::build_udp`], a [`Stamp`] at the start of each
//! payload) and sent through a TPACKET_V2 transmit ring in batches — one
//! kick per batch instead of one system call per datagram, so a single
//! core offers several times what a UDP socket does. The frames bypass
//! the generator's own IP stack: the source address is the one the route
//! to the destination would use, the source MAC the device's, and the
//! destination MAC the neighbour's (looked up in the ARP table after one
//! ordinary datagram made the kernel resolve it, or given).

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use pktsched_io::frame::{Stamp, UdpSpec, build_udp};
use pktsched_io::packet::{FrameRing, PacketSocket, Role};
use pktsched_io::{BufPool, PacketBuf, PacketIo};

use super::gen_flows::FlowSpec;
use super::generator::GenFlowReport;
use crate::sent::Handed;

/// Frames sent with one kick.
pub const RING_BATCH: usize = 64;
/// Slots of the transmit ring.
const RING_SLOTS: u32 = 1024;
/// How long the neighbour lookup waits for ARP.
const ARP_WAIT: Duration = Duration::from_secs(3);
/// UDP discard port: where the datagram that starts ARP goes.
const DISCARD_PORT: u16 = 9;

/// Where the packet backend sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingTarget {
    /// The interface whose transmit ring is used.
    pub device: String,
    /// The destination MAC of every frame; `None`: the ARP table's entry
    /// for each flow's destination (IPv4 only).
    pub dst_mac: Option<[u8; 6]>,
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The ARP table's complete entry for `ip` on `device`.
fn arp_entry(ip: Ipv4Addr, device: &str) -> Option<[u8; 6]> {
    // The calling thread's namespace (/proc/net follows the process's).
    let table = std::fs::read_to_string("/proc/thread-self/net/arp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let complete = f
            .get(2)
            .is_some_and(|flags| *flags == "0x2" || *flags == "0x6");
        (f.len() >= 6 && f[0] == ip.to_string() && f[5] == device && complete)
            .then(|| parse_mac(f[3]))
            .flatten()
    })
}

/// The source address for `dst` and its neighbour's MAC (resolved by the
/// kernel after one datagram to the discard port).
fn route_to(
    dst: IpAddr,
    device: &str,
    given: Option<[u8; 6]>,
) -> std::io::Result<(IpAddr, [u8; 6])> {
    let any: IpAddr = if dst.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let probe = UdpSocket::bind((any, 0))?;
    probe.connect((dst, DISCARD_PORT))?;
    let src = probe.local_addr()?.ip();
    if let Some(mac) = given {
        return Ok((src, mac));
    }
    let IpAddr::V4(v4) = dst else {
        return Err(std::io::Error::other(format!(
            "{dst}: no neighbour lookup for IPv6 here: give --dst-mac"
        )));
    };
    let until = Instant::now() + ARP_WAIT;
    loop {
        if let Some(mac) = arp_entry(v4, device) {
            return Ok((src, mac));
        }
        if Instant::now() > until {
            return Err(std::io::Error::other(format!(
                "{dst}: no ARP entry on {device} after {ARP_WAIT:?}: is it reachable through \
                 {device}? (or give --dst-mac)"
            )));
        }
        let _ = probe.send(b"");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Frames of every flow instance, built into pool buffers and sent through
/// the ring in batches.
pub(crate) struct RingOut {
    socket: PacketSocket,
    pool: BufPool,
    /// Per flow instance: its headers and payload (the stamp rewritten
    /// for each frame).
    specs: Vec<UdpSpec>,
    batch: Vec<PacketBuf>,
    /// (flow instance, frame size) of each frame in `batch`.
    meta: Vec<(usize, u32)>,
    /// The buffers of the batch being sent, to tell which the ring left.
    handed: Handed,
}

impl RingOut {
    /// Opens the ring on `target.device` for the flow instances `flows`
    /// (one entry per instance, with its destination port).
    pub(crate) fn open(target: &RingTarget, flows: &[(FlowSpec, u16)]) -> std::io::Result<RingOut> {
        let src_mac = super::ifmac::mac_of(&target.device)?;
        let largest = flows
            .iter()
            .map(|(f, _)| match &f.sizes {
                super::gen_flows::Sizes::Fixed(s) => *s,
                super::gen_flows::Sizes::Mix(m) => m.iter().map(|&(s, _)| s).max().unwrap_or(0),
            })
            .max()
            .unwrap_or(0);
        let slot = (largest + 64).next_power_of_two().max(2048);
        let ring = FrameRing {
            frame_size: slot,
            frame_count: RING_SLOTS,
        };
        let socket = PacketSocket::open(&target.device, Role::Tx(ring), false)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let pool = BufPool::new(2 * RING_BATCH, slot as usize)
            .ok_or_else(|| std::io::Error::other(format!("frames of {largest} bytes: too long")))?;
        let mut routes: Vec<(IpAddr, (IpAddr, [u8; 6]))> = Vec::new();
        let mut specs = Vec::with_capacity(flows.len());
        for (i, (f, dport)) in flows.iter().enumerate() {
            let route = match routes.iter().find(|(d, _)| *d == f.dst) {
                Some((_, r)) => *r,
                None => {
                    let r = route_to(f.dst, &target.device, target.dst_mac)?;
                    routes.push((f.dst, r));
                    r
                }
            };
            specs.push(UdpSpec {
                src_mac,
                dst_mac: route.1,
                vlan: None,
                src_ip: route.0,
                dst_ip: f.dst,
                sport: if f.sport != 0 {
                    f.sport
                } else {
                    49152 + (i % 16384) as u16
                },
                dport: *dport,
                dscp: f.dscp,
                ttl: 64,
                payload: Vec::with_capacity(9216),
            });
        }
        Ok(RingOut {
            socket,
            pool,
            specs,
            batch: Vec::with_capacity(RING_BATCH),
            meta: Vec::with_capacity(RING_BATCH),
            handed: Handed::with_capacity(RING_BATCH),
        })
    }

    /// Frames built and not yet sent.
    pub(crate) fn pending(&self) -> usize {
        self.batch.len()
    }

    /// Builds frame `stamp.seq` of flow instance `i` (`size` bytes, UDP
    /// payload `payload` bytes) into the batch; `false` if it could not be
    /// built (counted by the caller as an error).
    pub(crate) fn push(&mut self, i: usize, size: u32, payload: usize, stamp: &Stamp) -> bool {
        let Some(spec) = self.specs.get_mut(i) else {
            return false;
        };
        spec.payload.clear();
        spec.payload.resize(payload, 0);
        stamp.write(&mut spec.payload);
        let Some(mut buf) = self.pool.get() else {
            return false;
        };
        match build_udp(buf.spare(), spec) {
            Some(n) => {
                buf.set_len(n);
                self.batch.push(buf);
                self.meta.push((i, size));
                true
            }
            None => {
                self.pool.put(buf);
                false
            }
        }
    }

    /// Sends the batch with one kick (the ring pushes back by waiting);
    /// each frame is counted as sent or as an error in `reports`.
    pub(crate) fn flush(&mut self, reports: &mut [GenFlowReport]) {
        if self.batch.is_empty() {
            return;
        }
        self.handed.note(&self.batch);
        let _ = self.socket.send_batch(&mut self.batch, &self.pool);
        // What the ring left may sit anywhere in the batch (a frame too
        // long for its slot stays while the rest go).
        let outcomes = self.handed.sent(&self.batch);
        for ((i, size), sent) in self.meta.drain(..).zip(outcomes) {
            let Some(r) = reports.get_mut(i) else {
                continue;
            };
            if sent {
                r.sent += 1;
                r.frame_bytes += u64::from(size);
            } else {
                r.errors += 1;
            }
        }
        for buf in self.batch.drain(..) {
            self.pool.put(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mac;

    #[test]
    fn macs_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_mac("02:0a:FF:00:1:2"), Some([2, 0x0a, 0xff, 0, 1, 2]));
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "zz:00:00:00:00:00",
            "002:0:0:0:0:0",
            "02::00:00:00:00",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad:?}");
        }
    }
}
