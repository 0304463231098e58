//! Per-class receive rings on one interface: an AF_PACKET fanout group
//! (`PACKET_FANOUT`, type `PACKET_FANOUT_CBPF`) of one socket per traffic
//! class, each with a ring of its own (TPACKET_V3 blocks or TPACKET_V2
//! slots), and a classic-BPF program ([`crate::cbpf::compile()`]) that the
//! kernel runs on every frame to pick the socket: its return value
//! modulo the group size is the index of the socket, here the class.
//!
//! * **Drop isolation.** Each class has its own ring memory, so a flooded
//!   class fills only its own ring; the kernel counts those drops on that
//!   socket (`tp_drops`, per class in [`FanoutGroup::class_stats`]), and
//!   the other classes keep receiving. `PACKET_FANOUT_FLAG_ROLLOVER` is
//!   not set: it would move a full class's frames into another class's
//!   ring.
//! * **Ring sizing for isolation.** A class's ring must hold what
//!   arrives for it while its reader is away. A TPACKET_V3 ring holds
//!   `block_count` blocks, and the kernel hands a block over when it is
//!   full *or* when its timeout expires, even with one frame in it: left
//!   unread, the default ring (16 blocks, 1 ms) is full after 16 ms of a
//!   trickle, whatever its size in bytes. TPACKET_V2 slots
//!   ([`Role::RxFrames`]) hold one frame each however slowly they come.
//! * **Ingress only.** The group is opened with
//!   `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` (Linux 6.2): frames sent on the
//!   interface never reach the program, which is compiled for the
//!   ingress view (data at the network header; see [`crate::cbpf`]).
//! * **No stray frames while opening.** A socket receives as soon as it
//!   is bound, which is before it can join the group. Each socket gets a
//!   drop-everything socket filter before it is bound; once every socket
//!   has joined and the program is in place, the filters are removed.
//!   Frames that arrive during `open` are therefore dropped uncounted
//!   (they are no class's); from the return of `open` on, every frame is
//!   received by its class's socket or counted as that socket's kernel
//!   drop.
//! * **Group id.** `PACKET_FANOUT_FLAG_UNIQUEID` lets the kernel pick an
//!   id unused in the network namespace for the first socket; the others
//!   join with that id. Sockets are added in class order, so the kernel's
//!   member `i` is class `i` (members move only when one leaves, and
//!   they leave together when the group is dropped).
//!
//! Everything else — the ring walking, the per-socket counters, busy
//! polling ([`crate::packet::BusyPoll`]) — is [`PacketSocket`]'s.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use crate::cbpf::{Insn, Program, compile};
use crate::classify::Rule;
use crate::packet::{BusyPoll, PacketSocket, Role, setopt, sys};
use crate::{BufPool, IoError, IoStats, PacketBuf, PacketIo};

/// `PACKET_FANOUT` type: a classic BPF program picks the socket.
const FANOUT_CBPF: u32 = 6;
/// The kernel picks a free group id (first socket only).
const FLAG_UNIQUEID: u32 = 0x2000;
/// Outgoing frames do not reach the group.
const FLAG_IGNORE_OUTGOING: u32 = 0x4000;
/// Most sockets in a group joined with the plain `int` argument.
pub const MAX_CLASSES: usize = 256;

/// One receive ring per class on one interface, fed by a fanout
/// classifier (see the module docs).
#[derive(Debug)]
pub struct FanoutGroup {
    sockets: Vec<PacketSocket>,
    id: u16,
    program_len: usize,
    /// One per socket, for [`FanoutGroup::wait`] (no allocation there).
    pollfds: Vec<libc::pollfd>,
}

fn config(device: &str, what: String) -> IoError {
    IoError::Config {
        device: device.to_string(),
        what,
    }
}

/// Attaches `insns` as `fd`'s socket filter (`SO_ATTACH_FILTER`) or, on a
/// socket in a fanout group, as the group's program
/// (`PACKET_FANOUT_DATA`).
fn set_program(
    fd: i32,
    insns: &[Insn],
    level: i32,
    name: i32,
    device: &str,
    call: &'static str,
) -> Result<(), IoError> {
    let prog = libc::sock_fprog {
        len: insns.len() as u16,
        // Insn is #[repr(C)] with sock_filter's layout; the kernel only
        // reads through this pointer.
        filter: insns.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    // SAFETY: `prog` points to `insns.len()` instructions that stay
    // borrowed for the call; the kernel copies them.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(sys(device, call));
    }
    Ok(())
}

/// A filter that keeps no frame.
const DROP_ALL: [Insn; 1] = [Insn::stmt(0x06, 0)];

/// The group id and flags of a socket's group (`getsockopt PACKET_FANOUT`).
fn group_of(fd: i32, device: &str) -> Result<u32, IoError> {
    let mut v: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for the call and sized together.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            (&mut v as *mut u32).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(sys(device, "getsockopt(PACKET_FANOUT)"));
    }
    Ok(v)
}

impl FanoutGroup {
    /// Opens one socket per entry of `rings` on `device` (in the calling
    /// thread's network namespace), joins them into a new fanout group in
    /// that order and installs `program` to pick each frame's socket.
    /// `rings` must be receive rings ([`Role::Rx`] or [`Role::RxFrames`]),
    /// 1..=[`MAX_CLASSES`] of them. `promiscuous`: frames for any MAC.
    pub fn open(
        device: &str,
        rings: &[Role],
        program: &Program,
        promiscuous: bool,
    ) -> Result<FanoutGroup, IoError> {
        if rings.is_empty() || rings.len() > MAX_CLASSES {
            return Err(config(
                device,
                format!("{} classes: allowed 1..={MAX_CLASSES}", rings.len()),
            ));
        }
        if let Some(i) = rings.iter().position(|r| matches!(r, Role::Tx(_))) {
            return Err(config(
                device,
                format!("class {i}: a fanout group receives; give it an Rx or RxFrames ring"),
            ));
        }
        let mut sockets = Vec::with_capacity(rings.len());
        let mut id = 0u32;
        for (i, &role) in rings.iter().enumerate() {
            let s = PacketSocket::open_with(device, role, promiscuous, &|fd: BorrowedFd<'_>| {
                set_program(
                    fd.as_raw_fd(),
                    &DROP_ALL,
                    libc::SOL_SOCKET,
                    libc::SO_ATTACH_FILTER,
                    device,
                    "SO_ATTACH_FILTER",
                )
            })?;
            let flags = FANOUT_CBPF | FLAG_IGNORE_OUTGOING | if i == 0 { FLAG_UNIQUEID } else { 0 };
            let arg = (id | flags << 16) as libc::c_int;
            setopt(
                s.raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &arg,
                device,
                "PACKET_FANOUT (CBPF, IGNORE_OUTGOING: Linux 6.2)",
            )?;
            if i == 0 {
                id = group_of(s.raw_fd(), device)? & 0xffff;
            }
            sockets.push(s);
        }
        set_program(
            sockets[0].raw_fd(),
            program.insns(),
            libc::SOL_PACKET,
            libc::PACKET_FANOUT_DATA,
            device,
            "PACKET_FANOUT_DATA",
        )?;
        for s in &sockets {
            let none: libc::c_int = 0;
            setopt(
                s.raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_DETACH_FILTER,
                &none,
                device,
                "SO_DETACH_FILTER",
            )?;
        }
        let pollfds = sockets
            .iter()
            .map(|s| libc::pollfd {
                fd: s.raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            })
            .collect();
        Ok(FanoutGroup {
            sockets,
            id: id as u16,
            program_len: program.len(),
            pollfds,
        })
    }

    /// Compiles `rules` and `default` ([`crate::cbpf::compile()`]) and opens
    /// a group with one ring per class: every class a rule or the default
    /// names must have a ring.
    pub fn open_classified(
        device: &str,
        rings: &[Role],
        rules: &[Rule],
        default: u16,
        promiscuous: bool,
    ) -> Result<FanoutGroup, IoError> {
        let classes = rules.iter().map(|r| (Some(r), r.class));
        for (rule, class) in classes.chain([(None, default)]) {
            if usize::from(class) >= rings.len() {
                let who = rule.map_or("the default class".to_string(), |r| format!("rule `{r}`"));
                return Err(config(
                    device,
                    format!(
                        "{who} names class {class}, but there are {} rings (classes 0..={})",
                        rings.len(),
                        rings.len().saturating_sub(1)
                    ),
                ));
            }
        }
        let program = compile(rules, default)
            .map_err(|e| config(device, format!("fanout classifier: {e}")))?;
        Self::open(device, rings, &program, promiscuous)
    }

    /// Classes (sockets) in the group.
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    /// Never true (a group has a socket at least).
    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// The kernel's id of the group (unique in its network namespace).
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Instructions in the installed program.
    pub fn program_len(&self) -> usize {
        self.program_len
    }

    /// Class `class`'s socket (`None` past the last class).
    pub fn class_socket(&mut self, class: usize) -> Option<&mut PacketSocket> {
        self.sockets.get_mut(class)
    }

    /// Every class's socket, in class order.
    pub fn sockets_mut(&mut self) -> &mut [PacketSocket] {
        &mut self.sockets
    }

    /// Receives up to `max` frames of class `class` (see
    /// [`PacketIo::recv_batch`]); 0 for a class past the last.
    pub fn recv_class(
        &mut self,
        class: usize,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        match self.sockets.get_mut(class) {
            Some(s) => s.recv_batch(pool, out, max),
            None => Ok(0),
        }
    }

    /// Each class's counters (received; kernel drops as of the last time
    /// they were read, see [`FanoutGroup::refresh_stats`]).
    pub fn class_stats(&self) -> Vec<IoStats> {
        self.sockets.iter().map(|s| s.stats()).collect()
    }

    /// Reads every class's kernel drop counter now and returns the
    /// counters.
    pub fn refresh_stats(&mut self) -> Vec<IoStats> {
        self.sockets.iter_mut().map(|s| s.refresh_stats()).collect()
    }

    /// Applies `b` to every class's socket.
    pub fn set_busy_poll(&mut self, b: BusyPoll) -> Result<(), IoError> {
        self.sockets.iter_mut().try_for_each(|s| s.set_busy_poll(b))
    }

    /// Waits up to `timeout` until some class's ring may have frames.
    pub fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        let fds = &mut self.pollfds;
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            let device = self.sockets.first().map_or("", |s| s.device());
            return Err(sys(device, "poll"));
        }
        Ok(())
    }
}

/// The layouts agree, so a program can be handed to the kernel as is.
const _: () = {
    assert!(std::mem::size_of::<Insn>() == std::mem::size_of::<libc::sock_filter>());
    assert!(std::mem::align_of::<Insn>() == std::mem::align_of::<libc::sock_filter>());
};

#[cfg(test)]
mod tests;
