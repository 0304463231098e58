//! The forwarding table built from the config: routes in the core LPM
//! ([`pktsched_core::route::forward::Router`]) with a [`Hop`] each, static
//! neighbours, and the config pieces that check them. Neighbours are
//! static: no ARP or ND is sent, learnt or answered.

use std::collections::HashMap;
use std::net::IpAddr;

use pktsched_core::route::forward::Router;
use pktsched_io::classify::IpPrefix;
use toml::Spanned;

use super::config::{MAX_NEIGHBOURS, RouteConfig, mac};
use super::raw::RawNeighbour;
use crate::config::{ConfigError, Ctx};

/// The router's two interfaces.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Port {
    /// `router.ingress` (per-class rings).
    Ingress,
    /// `router.egress` (one ring).
    Egress,
}

/// Where a route sends a frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The outgoing interface.
    pub port: Port,
    /// The next hop's MAC; `None`: the destination is on the link and its
    /// own neighbour entry gives the MAC.
    pub mac: Option<[u8; 6]>,
}

/// Routes and neighbours, ready to forward with.
#[derive(Debug)]
pub struct Table {
    /// The core router (LPM for both families, the access list).
    pub router: Router<Hop>,
    /// Static neighbours.
    pub neighbours: HashMap<IpAddr, [u8; 6]>,
}

impl Table {
    /// Builds the table; `acl` is the cost's access list.
    pub fn build(cfg: &RouteConfig) -> Result<Table, String> {
        let neighbours: HashMap<IpAddr, [u8; 6]> = cfg.neighbours.iter().copied().collect();
        let mut router = Router::new();
        router.acl = cfg.router.cost.acl();
        for r in &cfg.routes {
            let port = if r.dev == cfg.router.ingress {
                Port::Ingress
            } else {
                Port::Egress
            };
            let mac = r.via.and_then(|v| neighbours.get(&v).copied());
            let hop = Hop { port, mac };
            let res = match r.prefix.addr {
                IpAddr::V4(a) => router.v4.insert(u32::from(a), r.prefix.len, hop),
                IpAddr::V6(a) => router.v6.insert(u128::from(a), r.prefix.len, hop),
            };
            res.map_err(|e| format!("route {}: {e}", r.prefix))?;
        }
        Ok(Table { router, neighbours })
    }

    /// The destination MAC for a forwarded frame: the hop's, or the
    /// destination's own neighbour entry.
    pub fn next_mac(&self, hop: &Hop, frame: &[u8]) -> Option<[u8; 6]> {
        hop.mac
            .or_else(|| dst_ip(frame).and_then(|ip| self.neighbours.get(&ip).copied()))
    }
}

/// The destination address of an IPv4 or IPv6 frame (one VLAN tag at most).
pub fn dst_ip(frame: &[u8]) -> Option<IpAddr> {
    let (ty, l3) = match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        0x8100 => (u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]), 18),
        t => (t, 14),
    };
    match ty {
        0x0800 => {
            let b: [u8; 4] = frame.get(l3 + 16..l3 + 20)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        0x86DD => {
            let b: [u8; 16] = frame.get(l3 + 24..l3 + 40)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        _ => None,
    }
}

/// `[[neighbour]]` entries.
pub(crate) fn parse_neighbours(
    cx: &Ctx<'_>,
    list: Option<&[Spanned<RawNeighbour>]>,
) -> Result<Vec<(IpAddr, [u8; 6])>, ConfigError> {
    let list = list.unwrap_or(&[]);
    if list.len() > MAX_NEIGHBOURS {
        return Err(cx.err(
            list[0].span(),
            format!(
                "{} neighbours: allowed at most {MAX_NEIGHBOURS}",
                list.len()
            ),
        ));
    }
    let mut out: Vec<(IpAddr, [u8; 6])> = Vec::with_capacity(list.len());
    for n in list {
        let raw = n.get_ref();
        let ip: IpAddr = raw.ip.get_ref().parse().map_err(|_| {
            cx.err(
                raw.ip.span(),
                format!(
                    "neighbour.ip = {:?}: allowed an IPv4 or IPv6 address",
                    raw.ip.get_ref()
                ),
            )
        })?;
        if let Some(first) = out.iter().position(|(seen, _)| *seen == ip) {
            let first = cx.line_of(&list[first].get_ref().ip.span());
            return Err(cx.err(
                raw.ip.span(),
                format!("neighbour.ip = {ip} is given twice (first at line {first})"),
            ));
        }
        out.push((ip, mac(cx, &raw.mac, "neighbour.mac")?));
    }
    Ok(out)
}

/// A route's `via`: an address with a neighbour entry.
pub(crate) fn via(
    cx: &Ctx<'_>,
    v: &Spanned<String>,
    prefix: &IpPrefix,
    neighbours: &[(IpAddr, [u8; 6])],
) -> Result<IpAddr, ConfigError> {
    let text = v.get_ref();
    let ip: IpAddr = text.parse().map_err(|_| {
        cx.err(
            v.span(),
            format!("route {prefix}: via = {text:?}: allowed an IPv4 or IPv6 address"),
        )
    })?;
    if ip.is_ipv4() != prefix.addr.is_ipv4() {
        return Err(cx.err(
            v.span(),
            format!("route {prefix}: via = {ip} is of the other IP version"),
        ));
    }
    if !neighbours.iter().any(|(n, _)| *n == ip) {
        return Err(cx.err(
            v.span(),
            format!(
                "route {prefix}: via = {ip} is not a [[neighbour]] (neighbours are static: \
                 add [[neighbour]] ip = \"{ip}\" with its mac)"
            ),
        ));
    }
    Ok(ip)
}
