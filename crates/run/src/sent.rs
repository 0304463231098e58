//! Which frames of a batch a device sent. A device sends a batch's frames
//! in order and leaves those it could not send in the batch, in order:
//! usually a tail (a full ring), but a frame too long for its transmit
//! slot stays while the frames behind it go. A caller that counts each
//! frame for its class (or flow) notes the buffers it hands over and
//! matches what is left against them by the buffers' addresses, so every
//! frame is counted where it belongs whichever frames stayed.

use pktsched_io::PacketBuf;

/// The buffers of the last batch handed to a device.
#[derive(Debug, Default)]
pub(crate) struct Handed {
    addrs: Vec<usize>,
}

fn addr(b: &PacketBuf) -> usize {
    b.as_slice().as_ptr().addr()
}

impl Handed {
    /// Room for `n` frames per batch.
    pub(crate) fn with_capacity(n: usize) -> Handed {
        Handed {
            addrs: Vec::with_capacity(n),
        }
    }

    /// Notes `frames`, about to be handed to the device.
    pub(crate) fn note(&mut self, frames: &[PacketBuf]) {
        self.addrs.clear();
        self.addrs.extend(frames.iter().map(addr));
    }

    /// For each noted frame, in order: whether it was sent, given the
    /// frames the device `left` in the batch.
    pub(crate) fn sent<'a>(&'a self, left: &'a [PacketBuf]) -> impl Iterator<Item = bool> + 'a {
        let mut j = 0;
        self.addrs.iter().map(move |a| {
            let stayed = left.get(j).is_some_and(|b| addr(b) == *a);
            j += usize::from(stayed);
            !stayed
        })
    }
}

#[cfg(test)]
mod tests {
    use pktsched_io::BufPool;

    use super::*;

    #[test]
    fn frames_left_anywhere_in_the_batch_are_matched_to_their_place() {
        let pool = BufPool::new(8, 256).expect("pool");
        let mut batch: Vec<PacketBuf> = (0..5).map(|_| pool.get().expect("buffer")).collect();
        let mut handed = Handed::with_capacity(8);
        handed.note(&batch);
        // The device sent 0, 2 and 4 and left 1 and 3 (say, too long).
        for k in [4, 2, 0] {
            pool.put(batch.remove(k));
        }
        let sent: Vec<bool> = handed.sent(&batch).collect();
        assert_eq!(sent, [true, false, true, false, true]);
        // Nothing left: all sent; everything left: none.
        assert!(handed.sent(&[]).all(|s| s));
        handed.note(&batch);
        assert!(handed.sent(&batch).all(|s| !s));
    }
}
