//! A device socket with its name and role; I/O errors are counted (and the
//! last one kept for the stats) instead of ending the thread that owns it.

use std::time::Duration;

use pktsched_io::{BufPool, PacketBuf, PacketIo};

use super::ClassRings;
use crate::devices::LinkDevice;

/// One socket of the pipeline.
#[derive(Debug)]
pub(crate) struct Port<P> {
    pub(crate) io: P,
    pub(crate) device: String,
    pub(crate) role: &'static str,
    /// Calls that failed.
    pub(crate) errors: u64,
    /// The last failure, as text.
    pub(crate) last_error: Option<String>,
}

impl<P: PacketIo> Port<P> {
    pub(crate) fn new(io: P, device: &str, role: &'static str) -> Port<P> {
        Port {
            io,
            device: device.to_string(),
            role,
            errors: 0,
            last_error: None,
        }
    }

    fn failed(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        self.last_error = Some(e.to_string());
    }

    /// Receives up to `max` frames into `out`.
    pub(crate) fn recv(&mut self, pool: &BufPool, out: &mut Vec<PacketBuf>, max: usize) -> usize {
        match self.io.recv_batch(pool, out, max) {
            Ok(n) => n,
            Err(e) => {
                self.failed(e);
                0
            }
        }
    }

    /// Sends what it can of `frames` (sent buffers go back to `pool`; the
    /// rest stay in `frames`).
    pub(crate) fn send(&mut self, frames: &mut Vec<PacketBuf>, pool: &BufPool) -> usize {
        match self.io.send_batch(frames, pool) {
            Ok(n) => n,
            Err(e) => {
                self.failed(e);
                0
            }
        }
    }

    /// Waits up to `timeout` for frames to arrive.
    pub(crate) fn wait(&mut self, timeout: Duration) {
        if let Err(e) = self.io.wait(timeout) {
            self.failed(e);
            std::thread::sleep(timeout);
        }
    }
}

impl<P: PacketIo + 'static> Port<P> {
    /// `true` if the device's receive ring already holds frames, read in
    /// memory ([`LinkDevice::rx_ready`]): a wait now would return at once
    /// without sleeping. `false` when the device cannot tell that way.
    pub(crate) fn rx_ready(&mut self) -> bool {
        let any: &mut dyn std::any::Any = &mut self.io;
        any.downcast_mut::<LinkDevice>()
            .and_then(LinkDevice::rx_ready)
            .unwrap_or(false)
    }

    /// `true` if any receive ring of the device holds frames (every
    /// class ring too), read in memory; `None` when the device cannot
    /// tell that way ([`LinkDevice::frames_waiting`]).
    pub(crate) fn frames_waiting(&mut self) -> Option<bool> {
        let any: &mut dyn std::any::Any = &mut self.io;
        if let Some(d) = any.downcast_mut::<LinkDevice>() {
            return d.frames_waiting();
        }
        any.downcast_mut::<ClassRings>()
            .and_then(|r| r.any_waiting())
    }

    /// Waits up to `timeout` for frames to arrive, before a release due
    /// at its end for which the emulated link is busy (`link_busy`) or
    /// not (a shaper's wait: per-class rings then watch every class);
    /// returns whether it waited (false: per-class rings already held
    /// frames). Devices without class rings take it as [`Port::wait`].
    pub(crate) fn wait_due(&mut self, timeout: Duration, link_busy: bool) -> bool {
        let any: &mut dyn std::any::Any = &mut self.io;
        let rings = if any.is::<LinkDevice>() {
            match any.downcast_mut::<LinkDevice>() {
                Some(LinkDevice::ClassRings(r, _)) => Some(&mut **r),
                _ => None,
            }
        } else {
            any.downcast_mut::<ClassRings>()
        };
        let Some(rings) = rings else {
            self.wait(timeout);
            return true;
        };
        match rings.wait_due(timeout, link_busy) {
            Ok(slept) => slept,
            Err(e) => {
                self.failed(e);
                std::thread::sleep(timeout);
                true
            }
        }
    }
}
