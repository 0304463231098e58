//! Longest-prefix match over a binary trie, for IPv4 (`u32` keys) and
//! IPv6 (`u128` keys).
//!
//! One node per prefix bit on the way to each route: a lookup follows at
//! most `BITS` nodes (32 or 128) and remembers the last route seen.
//! Nodes live in one array (12 bytes each: two child indexes and a route
//! index), so the memory is at most `12 × (1 + Σ prefix lengths)` bytes
//! plus the routes themselves, and [`MAX_NODES`] caps it at 192 MiB
//! whatever the table: an insert that would pass the cap is refused.
//! Removing a route clears it but keeps its nodes (a later insert of the
//! same prefix reuses them).

use std::fmt;

/// Most routes one table holds.
pub const MAX_ROUTES: usize = 1 << 20;
/// Most trie nodes one table holds (12 bytes each: 192 MiB).
pub const MAX_NODES: usize = 1 << 24;

const NONE: u32 = u32::MAX;

/// An address type the trie can key on.
pub trait Key: Copy + Eq + fmt::Debug {
    /// Bits in an address.
    const BITS: u8;
    /// Bit `i`, counting from the most significant (0).
    fn bit(self, i: u8) -> bool;
    /// The address with all bits after the first `len` cleared.
    fn masked(self, len: u8) -> Self;
    /// The address as a `u128` (right-aligned).
    fn to_u128(self) -> u128;
    /// The address from the low `BITS` bits of `v`.
    fn from_u128(v: u128) -> Self;
}

impl Key for u32 {
    const BITS: u8 = 32;
    fn bit(self, i: u8) -> bool {
        (self >> (31 - u32::from(i))) & 1 == 1
    }
    fn masked(self, len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - u32::from(len)))
        }
    }
    fn to_u128(self) -> u128 {
        u128::from(self)
    }
    fn from_u128(v: u128) -> u32 {
        v as u32
    }
}

impl Key for u128 {
    const BITS: u8 = 128;
    fn bit(self, i: u8) -> bool {
        (self >> (127 - u32::from(i))) & 1 == 1
    }
    fn masked(self, len: u8) -> u128 {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - u32::from(len)))
        }
    }
    fn to_u128(self) -> u128 {
        self
    }
    fn from_u128(v: u128) -> u128 {
        v
    }
}

/// Why a route was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// Prefix length above the address size.
    #[error("prefix length {len} is out of range: allowed 0..={max}")]
    Length {
        /// The length given.
        len: u8,
        /// The address size in bits.
        max: u8,
    },
    /// Bits set after the prefix length.
    #[error("prefix {prefix}/{len} has bits set after the first {len}; write {canonical}/{len}")]
    HostBits {
        /// The prefix as given.
        prefix: String,
        /// Its length.
        len: u8,
        /// The prefix with those bits cleared.
        canonical: String,
    },
    /// The table is full.
    #[error("route table full: at most {routes} routes and {nodes} trie nodes")]
    Full {
        /// [`MAX_ROUTES`].
        routes: usize,
        /// [`MAX_NODES`].
        nodes: usize,
    },
}

#[derive(Debug, Clone, Copy)]
struct Node {
    child: [u32; 2],
    route: u32,
}

const EMPTY: Node = Node {
    child: [NONE; 2],
    route: NONE,
};

/// A longest-prefix-match table from prefixes of `K` to values `V`.
#[derive(Debug, Clone)]
pub struct Lpm<K: Key, V> {
    nodes: Vec<Node>,
    routes: Vec<Option<(K, u8, V)>>,
    free: Vec<u32>,
    /// Trie nodes pruned by [`Lpm::remove`], reused before new ones.
    free_nodes: Vec<u32>,
    len: usize,
}

impl<K: Key, V: Copy> Default for Lpm<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key, V: Copy> Lpm<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        Lpm {
            nodes: vec![EMPTY],
            routes: Vec::new(),
            free: Vec::new(),
            free_nodes: Vec::new(),
            len: 0,
        }
    }

    /// Routes in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no routes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Trie nodes in use, the root included (removing every route brings
    /// it back to 1: [`Lpm::remove`] prunes the branches it empties).
    pub fn trie_nodes(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }

    /// Bytes of trie nodes and route slots allocated.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + self.routes.len() * std::mem::size_of::<Option<(K, u8, V)>>()
    }

    fn check(prefix: K, len: u8) -> Result<(), RouteError> {
        if len > K::BITS {
            return Err(RouteError::Length { len, max: K::BITS });
        }
        if prefix.masked(len) != prefix {
            return Err(RouteError::HostBits {
                prefix: format!("{prefix:?}"),
                len,
                canonical: format!("{:?}", prefix.masked(len)),
            });
        }
        Ok(())
    }

    /// Adds or replaces the route for `prefix/len`; returns the value it
    /// replaced.
    pub fn insert(&mut self, prefix: K, len: u8, value: V) -> Result<Option<V>, RouteError> {
        Self::check(prefix, len)?;
        let full = RouteError::Full {
            routes: MAX_ROUTES,
            nodes: MAX_NODES,
        };
        let mut n = 0usize;
        for i in 0..len {
            let b = usize::from(prefix.bit(i));
            let next = self.nodes[n].child[b];
            n = if next == NONE {
                let id = match self.free_nodes.pop() {
                    Some(id) => id as usize,
                    None if self.nodes.len() >= MAX_NODES => return Err(full),
                    None => {
                        self.nodes.push(EMPTY);
                        self.nodes.len() - 1
                    }
                };
                self.nodes[n].child[b] = id as u32;
                id
            } else {
                next as usize
            };
        }
        let r = self.nodes[n].route;
        if r != NONE {
            let slot = &mut self.routes[r as usize];
            let old = slot.map(|s| s.2);
            *slot = Some((prefix, len, value));
            return Ok(old);
        }
        if self.len >= MAX_ROUTES {
            return Err(full);
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.routes[id as usize] = Some((prefix, len, value));
                id
            }
            None => {
                self.routes.push(Some((prefix, len, value)));
                (self.routes.len() - 1) as u32
            }
        };
        self.nodes[n].route = id;
        self.len += 1;
        Ok(None)
    }

    /// Removes the route for exactly `prefix/len`; returns its value. Trie
    /// nodes left with neither a route nor a child are freed for reuse, so
    /// any sequence of inserts and removes keeps the trie as small as the
    /// routes it holds.
    pub fn remove(&mut self, prefix: K, len: u8) -> Result<Option<V>, RouteError> {
        Self::check(prefix, len)?;
        // The path from the root: at most 129 nodes (a /128 and the root).
        let mut path = [0u32; 129];
        let mut n = 0usize;
        for i in 0..len {
            let next = self.nodes[n].child[usize::from(prefix.bit(i))];
            if next == NONE {
                return Ok(None);
            }
            path[usize::from(i) + 1] = next;
            n = next as usize;
        }
        let r = self.nodes[n].route;
        if r == NONE {
            return Ok(None);
        }
        self.nodes[n].route = NONE;
        self.free.push(r);
        self.len -= 1;
        self.prune(prefix, &path[..=usize::from(len)]);
        Ok(self.routes[r as usize].take().map(|s| s.2))
    }

    /// Frees the nodes at the end of `path` (root first) that hold no
    /// route and have no child, unlinking each from its parent.
    fn prune(&mut self, prefix: K, path: &[u32]) {
        for depth in (1..path.len()).rev() {
            let id = path[depth] as usize;
            let node = self.nodes[id];
            if node.route != NONE || node.child != [NONE; 2] {
                return;
            }
            let parent = path[depth - 1] as usize;
            let bit = usize::from(prefix.bit(depth as u8 - 1));
            self.nodes[parent].child[bit] = NONE;
            self.free_nodes.push(id as u32);
        }
    }

    /// The value and prefix length of the longest prefix matching `addr`.
    pub fn lookup(&self, addr: K) -> Option<(V, u8)> {
        let mut best = NONE;
        let mut n = 0usize;
        for i in 0..=K::BITS {
            let node = self.nodes[n];
            if node.route != NONE {
                best = node.route;
            }
            if i == K::BITS {
                break;
            }
            let next = node.child[usize::from(addr.bit(i))];
            if next == NONE {
                break;
            }
            n = next as usize;
        }
        if best == NONE {
            return None;
        }
        self.routes[best as usize].map(|(_, len, v)| (v, len))
    }
}

/// An IPv4 table.
pub type Ipv4Lpm<V> = Lpm<u32, V>;
/// An IPv6 table.
pub type Ipv6Lpm<V> = Lpm<u128, V>;
