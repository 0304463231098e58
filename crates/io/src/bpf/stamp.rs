//! The receive stamp both XDP programs write: `bpf_ktime_get_ns()`
//! (CLOCK_MONOTONIC) as 8 bytes (host byte order) of XDP metadata right
//! in front of the frame, so an AF_XDP reader finds it at `addr − 8`.
//!
//! Metadata is reserved with `bpf_xdp_adjust_meta`; where a driver does
//! not support it the call fails and the frame goes on unstamped (the
//! reader then sees the 0 it left there, [`crate::PacketBuf::rx_ns`]).
//! The stamp is checked against `data` before the store, as the verifier
//! demands, and stored two bytes at a time ([`store_halves`]): a kernel
//! that checks packet alignment (one without efficient unaligned access)
//! takes `data` to sit 2 bytes past an aligned address (`NET_IP_ALIGN`),
//! so no wider store just in front of it is aligned there.

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
        .jmp_reg(Cond::Gt, Reg::R1, Reg::R2, skip);
    store_halves(a, Reg::R3, (meta_len - STAMP_LEN) as i16, stamp, 8);
}

/// Emits: store the low `bytes` (4 or 8) of `value` at `base + off` in
/// host byte order, as the same-width store would, but two bytes at a
/// time (aligned wherever the packet is 2-aligned); R1 scratch, `value`
/// kept.
pub fn store_halves(a: &mut Asm, base: Reg, off: i16, value: Reg, bytes: i16) {
    a.mov64_reg(Reg::R1, value);
    for k in 0..bytes / 2 {
        // The k-th 16 bits from the least significant end go first on a
        // little-endian host, last on a big-endian one.
        let at = if cfg!(target_endian = "little") {
            off + 2 * k
        } else {
            off + bytes - 2 - 2 * k
        };
        if k > 0 {
            a.alu64_imm(Alu::Rsh, Reg::R1, 16);
        }
        a.stx(Size::H, base, at, Reg::R1);
    }
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
