//! Frame buffers: a fixed pool allocated once, so receiving and sending
//! allocate nothing per frame.
//!
//! Ownership: [`BufPool::get`] hands out a [`PacketBuf`] that moves by
//! value (through a scheduler, across threads); whoever is done with it
//! gives it back with [`BufPool::put`] — a device's send does so for the
//! frames it sent, and so does whoever drops a frame. A buffer dropped
//! instead of returned is freed (never a leak of memory); the pool then
//! simply has one buffer fewer for good, so a pipeline that is idle and
//! holds no frames should see `free == capacity` in [`PoolStats`] (the
//! tests check it).
//!
//! Nothing here is per packet but a lock-free pop and push: no allocation,
//! no lock. A `PacketBuf` is `Send + 'static`, so it can be the item of
//! the PSPAT runtime (receive thread → arbiter → transmit thread).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;

/// One frame's buffer and length.
#[derive(Debug)]
pub struct PacketBuf {
    data: Box<[u8]>,
    len: usize,
    rx_ns: u64,
}

impl PacketBuf {
    /// The frame.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// The frame, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data[..self.len]
    }

    /// Frame length.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` if the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer's capacity (the pool's frame size).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// Replaces the frame with `bytes`; `false` (and unchanged) if they do
    /// not fit.
    #[inline]
    pub fn fill(&mut self, bytes: &[u8]) -> bool {
        let Some(dst) = self.data.get_mut(..bytes.len()) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        self.len = bytes.len();
        true
    }

    /// Sets the length after writing into [`PacketBuf::spare`]; clamped to
    /// the capacity.
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.data.len());
    }

    /// When the kernel received the frame: CLOCK_MONOTONIC nanoseconds
    /// (the clock of [`crate::clock::monotonic_ns`]), or 0 if unknown.
    /// AF_XDP: the stamp the XDP program wrote into the frame's metadata;
    /// AF_PACKET: the ring header's receive time, converted from
    /// CLOCK_REALTIME. A buffer from [`BufPool::get`] starts at 0.
    #[inline]
    pub fn rx_ns(&self) -> u64 {
        self.rx_ns
    }

    /// Sets the receive time ([`PacketBuf::rx_ns`]).
    #[inline]
    pub fn set_rx_ns(&mut self, ns: u64) {
        self.rx_ns = ns;
    }

    /// The whole buffer, to write a frame into.
    #[inline]
    pub fn spare(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

/// Counters of a pool.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers the pool was made with.
    pub capacity: u64,
    /// Buffers in the pool now.
    pub free: u64,
    /// `get` calls that found the pool empty.
    pub empty: u64,
    /// Buffers given back that were not the pool's (another size, or
    /// beyond its capacity): freed, and a sign of an ownership bug.
    pub foreign: u64,
}

#[derive(Debug)]
struct Inner {
    free: ArrayQueue<Box<[u8]>>,
    capacity: usize,
    frame_size: usize,
    empty: AtomicU64,
    foreign: AtomicU64,
}

/// A fixed set of equal buffers, shared by threads (cloning shares it).
#[derive(Clone, Debug)]
pub struct BufPool {
    inner: Arc<Inner>,
}

/// Most buffers in one pool.
pub const MAX_POOL_BUFFERS: usize = 1 << 22;
/// Largest frame size of a pool.
pub const MAX_FRAME_SIZE: usize = 65536;

impl BufPool {
    /// `count` buffers of `frame_size` bytes each, allocated now. `None`
    /// if either is zero or above [`MAX_POOL_BUFFERS`] /
    /// [`MAX_FRAME_SIZE`].
    pub fn new(count: usize, frame_size: usize) -> Option<BufPool> {
        if count == 0 || count > MAX_POOL_BUFFERS || frame_size == 0 || frame_size > MAX_FRAME_SIZE
        {
            return None;
        }
        let free = ArrayQueue::new(count);
        for _ in 0..count {
            let _ = free.push(vec![0u8; frame_size].into_boxed_slice());
        }
        Some(BufPool {
            inner: Arc::new(Inner {
                free,
                capacity: count,
                frame_size,
                empty: AtomicU64::new(0),
                foreign: AtomicU64::new(0),
            }),
        })
    }

    /// A free buffer (length 0), or `None` if all are out.
    #[inline]
    pub fn get(&self) -> Option<PacketBuf> {
        match self.inner.free.pop() {
            Some(data) => Some(PacketBuf {
                data,
                len: 0,
                rx_ns: 0,
            }),
            None => {
                self.inner.empty.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Gives a buffer back. A buffer of another size (another pool's), or
    /// one more than the pool can hold, is freed instead and counted in
    /// [`PoolStats::foreign`], so the pool's buffers stay equal.
    #[inline]
    pub fn put(&self, buf: PacketBuf) {
        if buf.data.len() != self.inner.frame_size || self.inner.free.push(buf.data).is_err() {
            self.inner.foreign.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The size of every buffer.
    pub fn frame_size(&self) -> usize {
        self.inner.frame_size
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            capacity: self.inner.capacity as u64,
            free: self.inner.free.len() as u64,
            empty: self.inner.empty.load(Ordering::Relaxed),
            foreign: self.inner.foreign.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_cycle_through_a_fixed_pool() {
        assert!(BufPool::new(0, 2048).is_none());
        assert!(BufPool::new(4, 0).is_none());
        let pool = BufPool::new(2, 64).expect("pool");
        let mut a = pool.get().expect("a");
        let b = pool.get().expect("b");
        assert!(pool.get().is_none());
        assert_eq!(pool.stats().empty, 1);
        assert!(a.fill(&[1, 2, 3]));
        assert_eq!(a.as_slice(), &[1, 2, 3]);
        assert!(!a.fill(&[0; 65]));
        assert_eq!(a.len(), 3);
        pool.put(a);
        pool.put(b);
        assert_eq!(pool.stats().free, 2);
        let other = BufPool::new(1, 32).expect("other");
        pool.put(other.get().expect("foreign"));
        assert_eq!(pool.stats().free, 2, "a foreign buffer is not kept");
        assert_eq!(pool.stats().foreign, 1);
        let twin = BufPool::new(1, 64).expect("same size");
        pool.put(twin.get().expect("one too many"));
        assert_eq!((pool.stats().free, pool.stats().foreign), (2, 2));
        let mut c = pool.get().expect("c");
        assert!(c.is_empty(), "a buffer comes back empty");
        assert_eq!(c.rx_ns(), 0, "and without a receive time");
        c.set_rx_ns(7);
        assert_eq!(c.rx_ns(), 7);
        pool.put(c);
        let mut c = pool.get().expect("c again");
        assert_eq!(c.rx_ns(), 0, "a reused buffer forgets its receive time");
        c.set_len(1000);
        assert_eq!(c.len(), 64);
    }
}
