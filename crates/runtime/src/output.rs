//! Where cleared packets go: the [`Output`] trait (implemented by the I/O
//! crate for real devices) and the [`NullOutput`] that counts and discards.

use pktsched_core::Pkt;
use serde::Serialize;

/// A transmit path. One instance is owned by one thread (the arbiter when
/// there are no dispatchers, else one dispatcher each).
pub trait Output<T>: Send + 'static {
    /// Transmits every packet of `batch` (in order) and leaves it empty.
    ///
    /// An output that cannot send must still take the packets out of
    /// `batch` (and count them as its own drops): the runtime's accounting
    /// ends here.
    fn transmit(&mut self, batch: &mut Vec<Pkt<T>>);
}

/// Counts packets and bytes and drops them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NullOutput {
    /// Packets transmitted.
    pub pkts: u64,
    /// Bytes transmitted.
    pub bytes: u64,
}

impl<T: Send + 'static> Output<T> for NullOutput {
    #[inline]
    fn transmit(&mut self, batch: &mut Vec<Pkt<T>>) {
        self.pkts += batch.len() as u64;
        self.bytes += batch.iter().map(|p| u64::from(p.len)).sum::<u64>();
        batch.clear();
    }
}

/// Collects every packet (tests).
#[derive(Debug, Default)]
pub struct VecOutput<T> {
    /// Packets in transmission order.
    pub pkts: Vec<Pkt<T>>,
}

impl<T: Send + 'static> Output<T> for VecOutput<T> {
    fn transmit(&mut self, batch: &mut Vec<Pkt<T>>) {
        self.pkts.append(batch);
    }
}
