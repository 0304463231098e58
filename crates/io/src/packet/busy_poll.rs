//! Busy polling on a packet socket: `SO_BUSY_POLL`, `SO_PREFER_BUSY_POLL`,
//! `SO_BUSY_POLL_BUDGET` (socket(7)).
//!
//! Preferred busy polling lets the thread that reads a socket run the
//! device's NAPI poll itself (with a budget of frames per poll) instead
//! of the kernel running it in softirq context on the same core, so
//! kernel receive work and the poller sharing a core cannot livelock;
//! with `napi_defer_hard_irqs` / `gro_flush_timeout` set on the device,
//! interrupts stay off while the application polls.
//!
//! The kernel busy-polls the NAPI instance a socket last received from
//! (`sk_napi_id`). AF_PACKET's receive path (6.18) does not record it,
//! so on an AF_PACKET ring the options are accepted and read back but
//! [`PacketSocket::incoming_napi_id`] stays 0 and no busy polling
//! happens; they take effect on sockets that record it (AF_XDP, UDP,
//! TCP). They are here so one setting covers every backend, checked
//! against the kernel when the device opens.

use std::io;

use super::{PacketSocket, setopt};
use crate::IoError;

/// Busy-polling settings.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BusyPoll {
    /// How long a blocking receive or `poll` busy-polls before sleeping,
    /// µs (`SO_BUSY_POLL`; 0 = off).
    pub usecs: u32,
    /// Prefer busy polling over the kernel's softirq processing
    /// (`SO_PREFER_BUSY_POLL`).
    pub prefer: bool,
    /// Frames per busy poll (`SO_BUSY_POLL_BUDGET`; 0 = the kernel's
    /// default, 8).
    pub budget: u16,
}

fn getopt(fd: i32, name: i32) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for the call and sized together.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

impl PacketSocket {
    /// Applies `b`; an error names the option the kernel refused and why
    /// (raising any of them needs CAP_NET_ADMIN).
    pub fn set_busy_poll(&mut self, b: BusyPoll) -> Result<(), IoError> {
        let fd = self.raw_fd();
        let usecs = libc::c_int::try_from(b.usecs).map_err(|_| IoError::Config {
            device: self.device().to_string(),
            what: format!("busy poll usecs {}: allowed 0..={}", b.usecs, i32::MAX),
        })?;
        for (name, opt, value) in [
            ("SO_BUSY_POLL", libc::SO_BUSY_POLL, usecs),
            (
                "SO_PREFER_BUSY_POLL",
                libc::SO_PREFER_BUSY_POLL,
                libc::c_int::from(b.prefer),
            ),
            (
                "SO_BUSY_POLL_BUDGET",
                libc::SO_BUSY_POLL_BUDGET,
                libc::c_int::from(b.budget),
            ),
        ] {
            if let Err(IoError::Sys { source, .. }) =
                setopt(fd, libc::SOL_SOCKET, opt, &value, self.device(), name)
            {
                let hint = match source.raw_os_error() {
                    Some(libc::EPERM) => ": raising it needs CAP_NET_ADMIN",
                    Some(libc::ENOPROTOOPT) | Some(libc::EINVAL) => {
                        ": this kernel does not support it (SO_PREFER_BUSY_POLL and \
                         SO_BUSY_POLL_BUDGET need Linux 5.11)"
                    }
                    _ => "",
                };
                return Err(IoError::Config {
                    device: self.device().to_string(),
                    what: format!("{name} = {value} refused: {source}{hint}"),
                });
            }
        }
        self.busy = b;
        Ok(())
    }

    /// The busy-polling settings: `usecs` and `prefer` as the kernel
    /// holds them, `budget` as last set (the kernel has no
    /// `getsockopt` for it).
    pub fn busy_poll(&self) -> Result<BusyPoll, IoError> {
        let fd = self.raw_fd();
        let get = |name: &'static str, opt: i32| {
            getopt(fd, opt).map_err(|source| IoError::Sys {
                device: self.device().to_string(),
                call: name,
                source,
            })
        };
        Ok(BusyPoll {
            usecs: get("SO_BUSY_POLL", libc::SO_BUSY_POLL)?.max(0) as u32,
            prefer: get("SO_PREFER_BUSY_POLL", libc::SO_PREFER_BUSY_POLL)? != 0,
            budget: self.busy.budget,
        })
    }

    /// The NAPI instance the kernel last recorded for this socket
    /// (`SO_INCOMING_NAPI_ID`; 0: none, so busy polling has nothing to
    /// poll).
    pub fn incoming_napi_id(&self) -> Result<u32, IoError> {
        getopt(self.raw_fd(), libc::SO_INCOMING_NAPI_ID)
            .map(|v| v as u32)
            .map_err(|source| IoError::Sys {
                device: self.device().to_string(),
                call: "SO_INCOMING_NAPI_ID",
                source,
            })
    }
}
