//! The receive stamp both XDP programs write: `bpf_ktime_get_ns()`
//! (CLOCK_MONOTONIC) as 8 bytes (host byte order) of XDP metadata right
//! in front of the frame, so an AF_XDP reader finds it at `addr − 8`.
//!
//! Metadata is reserved with `bpf_xdp_adjust_meta`; where a driver does
//! not support it the call fails and the frame goes on unstamped (the
//! reader then sees the 0 it left there, [`crate::PacketBuf::rx_ns`]).
//! The stamp is checked against `data` before the store, as the verifier
//! demands.

use super::insn::{Alu, Asm, Cond, Label, Reg, Size};
use super::{helper, xdp_md};

/// Bytes of the stamp in the metadata.
pub const STAMP_LEN: i32 = 8;

/// Emits: reserve `meta_len` bytes of metadata in front of the frame of
/// context `ctx` (a callee-saved register), check `meta + meta_len ≤ data`,
/// store `stamp` (a callee-saved register holding the ktime) at
/// `data − 8`, and leave the metadata start in R3; jumps to `skip` if
/// either fails. `meta_len` ≥ 8 and a multiple of 4; the bytes below the
/// stamp are the caller's to fill (R3 + 0 ..).
pub fn reserve_and_stamp(a: &mut Asm, ctx: Reg, stamp: Reg, meta_len: i32, skip: Label) {
    a.mov64_reg(Reg::R1, ctx)
        .mov64_imm(Reg::R2, -meta_len)
        .call(helper::XDP_ADJUST_META)
        .jmp_imm(Cond::Ne, Reg::R0, 0, skip)
        .ldx(Size::W, Reg::R2, ctx, xdp_md::DATA)
        .ldx(Size::W, Reg::R3, ctx, xdp_md::DATA_META)
        .mov64_reg(Reg::R1, Reg::R3)
        .alu64_imm(Alu::Add, Reg::R1, meta_len)
        .jmp_reg(Cond::Gt, Reg::R1, Reg::R2, skip)
        .stx(Size::DW, Reg::R3, (meta_len - STAMP_LEN) as i16, stamp);
}

/// The receive stamp a program wrote in front of a frame, from a test
/// run's output whose metadata is `meta_len` bytes (`None` if the output
/// is not the frame plus that much metadata).
pub fn rx_ns_of_output(out: &[u8], frame_len: usize, meta_len: usize) -> Option<u64> {
    if out.len() != frame_len + meta_len || meta_len < STAMP_LEN as usize {
        return None;
    }
    let at = meta_len - STAMP_LEN as usize;
    Some(u64::from_ne_bytes(out[at..meta_len].try_into().ok()?))
}
