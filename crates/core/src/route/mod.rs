//! Routing pieces for a software router, as pure functions over bytes
//! and tables (no I/O):
//!
//! - [`lpm`]: longest-prefix match for IPv4 and IPv6 (a binary trie with
//!   stated limits: [`MAX_ROUTES`](lpm::MAX_ROUTES) routes,
//!   [`MAX_NODES`](lpm::MAX_NODES) nodes of 12 bytes);
//! - [`forward`]: one forwarding step on an Ethernet frame — checks,
//!   TTL / hop-limit decrement with the RFC 1624 incremental checksum,
//!   "time exceeded", drops counted by reason;
//! - [`acl`]: an access list of prefix rules checked linearly per packet,
//!   a per-packet cost that can be set on purpose.
//!
//! ```
//! use pktsched_core::route::forward::{Router, Verdict};
//!
//! let mut r: Router<u8> = Router::new();
//! r.v4.insert(0x0A00_0000, 8, 1)?; // 10.0.0.0/8 → port 1
//! let mut frame = [0u8; 34];
//! frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
//! let ip = &mut frame[14..];
//! ip[0] = 0x45;
//! ip[3] = 20; // total length
//! ip[8] = 64; // TTL
//! ip[12..16].copy_from_slice(&[192, 0, 2, 7]); // from
//! ip[16..20].copy_from_slice(&[10, 1, 2, 3]); // to
//! let c = pktsched_core::route::forward::ipv4_checksum(ip);
//! ip[10..12].copy_from_slice(&c.to_be_bytes());
//! assert_eq!(r.forward(&mut frame), Verdict::Forward(1));
//! assert_eq!(frame[14 + 8], 63);
//! # Ok::<(), pktsched_core::route::lpm::RouteError>(())
//! ```

pub mod acl;
pub mod forward;
pub mod lpm;

#[cfg(test)]
mod tests;
