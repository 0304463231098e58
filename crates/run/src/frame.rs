//! The scheduler's item: a received frame in a pool buffer. Whoever ends a
//! frame's life — the egress after sending it, the scheduler refusing it, a
//! stop that counts it — returns its buffer to the pool by dropping it, so
//! the pool never shrinks and nothing is allocated per frame.

use pktsched_io::{BufPool, PacketBuf};

/// A frame on its way through the pipeline.
#[derive(Debug)]
pub struct Frame {
    buf: Option<PacketBuf>,
    /// The pool lives as long as the process (leaked once at start), so a
    /// frame carries a plain reference, not a reference count.
    pool: &'static BufPool,
}

impl Frame {
    /// Wraps a buffer taken from `pool`.
    pub fn new(buf: PacketBuf, pool: &'static BufPool) -> Frame {
        Frame {
            buf: Some(buf),
            pool,
        }
    }

    /// The frame's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| b.as_slice())
    }

    /// Takes the buffer out (to hand it to a transmit batch, which returns
    /// it to the pool itself).
    pub fn into_buf(mut self) -> Option<PacketBuf> {
        self.buf.take()
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.put(b);
        }
    }
}
