//! A small `bpf(2)` loader with no C toolchain: eBPF programs are
//! assembled at run time as Rust values ([`insn`]), loaded and attached
//! through the system call itself ([`sys`]).
//!
//! * [`insn`]: instructions, registers, and [`insn::Asm`], an assembler
//!   with labels resolved to relative jumps.
//! * [`sys`]: maps (XSKMAP, ARRAY), `BPF_PROG_LOAD` of XDP programs with
//!   the verifier's log in the error, attachment through `BPF_LINK_CREATE`
//!   (native first, generic with the reason otherwise; detached when the
//!   link is dropped), and `BPF_PROG_TEST_RUN`.
//! * [`redirect`]: the XDP program that hands each frame to the AF_XDP
//!   socket of its receive queue (`bpf_redirect_map(xskmap,
//!   rx_queue_index, XDP_PASS)`), the frame stamped first.
//! * [`stamp`]: the receive stamp (`bpf_ktime_get_ns()`, 8 bytes of
//!   metadata right before the frame) both programs write.
//! * [`classify`]: the classifier of [`crate::classify`] compiled to
//!   eBPF (headers read in place, no helper call per read): the same
//!   fields, the same rule for odd frames, the first
//!   matching rule's class written into the frame's metadata and used as
//!   the XSKMAP key (for frames of one queue only, or the queue as key:
//!   see [`classify::Steer`]).

pub mod classify;
pub mod insn;
pub mod redirect;
pub mod stamp;
pub mod sys;

/// Helper numbers (`enum bpf_func_id`) used by the programs here; none is
/// GPL-only.
pub mod helper {
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC.
    pub const KTIME_GET_NS: i32 = 5;
    /// `bpf_redirect_map(map, key, flags)`.
    pub const REDIRECT_MAP: i32 = 51;
    /// `bpf_xdp_adjust_meta(ctx, delta)`.
    pub const XDP_ADJUST_META: i32 = 54;
}

/// XDP actions.
pub mod action {
    /// Drop the frame.
    pub const DROP: u32 = 1;
    /// Hand the frame to the kernel's stack.
    pub const PASS: u32 = 2;
    /// Redirected (to a socket, device or CPU).
    pub const REDIRECT: u32 = 4;
}

/// Offsets in `struct xdp_md`, the XDP program's context.
pub mod xdp_md {
    /// `data` (u32).
    pub const DATA: i16 = 0;
    /// `data_end` (u32).
    pub const DATA_END: i16 = 4;
    /// `data_meta` (u32).
    pub const DATA_META: i16 = 8;
    /// `rx_queue_index` (u32).
    pub const RX_QUEUE_INDEX: i16 = 16;
}

/// Errors of the loader.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// A `bpf(2)` command failed.
    #[error("{call} ({what}): {source}")]
    Sys {
        /// The command.
        call: &'static str,
        /// What it was asked to do.
        what: String,
        /// The kernel's reason.
        source: std::io::Error,
    },
    /// The verifier refused a program.
    #[error("the verifier refused program {program}: {source}\n{log}")]
    Verifier {
        /// The program's name.
        program: String,
        /// The kernel's reason.
        source: std::io::Error,
        /// The verifier's log.
        log: String,
    },
    /// A program could not be assembled.
    #[error(transparent)]
    Asm(#[from] insn::AsmError),
    /// A request that cannot be met, with what is allowed.
    #[error("{0}")]
    Invalid(String),
}
