//! The receive side split by traffic class: one kernel ring per class, so
//! a flooded class overflows its own ring and the others' frames do not
//! wait behind it. Two implementations: an AF_PACKET fanout group
//! ([`crate::fanout::FanoutGroup`], the classic-BPF classifier picks the
//! socket) and AF_XDP sockets sharing one UMEM
//! ([`crate::xdp::XdpClassGroup`]: the XDP classifier redirects into the
//! class's socket).

use std::time::Duration;

use crate::{BufPool, IoError, IoStats, PacketBuf};

/// Per-class receive rings of one interface.
pub trait ClassRx: Send {
    /// How many classes (rings); classes are `0..classes()`.
    fn classes(&self) -> usize;

    /// Receives up to `max` frames of class `class` into buffers from
    /// `pool`, appended to `out`, oldest first; returns how many. Never
    /// blocks; 0 for a class past the last.
    fn recv_class(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError>;

    /// Frames waiting in class `class`'s ring if the ring can tell
    /// cheaply (AF_XDP can), else `None` (the caller then tries
    /// [`ClassRx::recv_class`]).
    fn waiting(&self, class: usize) -> Option<usize> {
        let _ = class;
        None
    }

    /// Called once at the end of each poll round: a backend that needs
    /// a system call to keep frames coming (a busy-poll or need-wakeup
    /// kick) makes it here, once for all classes. Default: nothing.
    fn end_round(&mut self) {}

    /// Waits up to `timeout` until some class's ring may have frames.
    fn wait(&mut self, timeout: Duration) -> Result<(), IoError>;

    /// Each class's counters, kernel drop counters read now.
    fn class_stats(&mut self) -> Vec<IoStats>;
}

impl ClassRx for crate::fanout::FanoutGroup {
    fn classes(&self) -> usize {
        self.len()
    }

    fn recv_class(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        crate::fanout::FanoutGroup::recv_class(self, class, pool, out, max)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        crate::fanout::FanoutGroup::wait(self, timeout)
    }

    fn class_stats(&mut self) -> Vec<IoStats> {
        self.refresh_stats()
    }
}
