//! eBPF instructions as Rust values and a small assembler with labels.
//!
//! [`Asm`] appends instructions; jumps name a [`Label`] that is bound to a
//! position later (or earlier), and [`Asm::finish`] resolves every jump to
//! its 16-bit relative offset (`target − (jump + 1)`), refusing unbound
//! labels and offsets that do not fit. The encoding is `struct bpf_insn`:
//! opcode, the two 4-bit registers, a signed 16-bit offset and a signed
//! 32-bit immediate.

/// A register: `R0` return value, `R1`..`R5` arguments (clobbered by
/// calls), `R6`..`R9` kept across calls, `R10` the read-only frame pointer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// An arithmetic operation (`BPF_ALU` / `BPF_ALU64` op bits).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Div = 0x30,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Mod = 0x90,
    Xor = 0xa0,
    Mov = 0xb0,
    Arsh = 0xc0,
}

/// A jump condition (`BPF_JMP` / `BPF_JMP32` op bits); `Gt`, `Ge`, `Lt`,
/// `Le` are unsigned, the `S` ones signed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Cond {
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Set = 0x40,
    Ne = 0x50,
    Sgt = 0x60,
    Sge = 0x70,
    Lt = 0xa0,
    Le = 0xb0,
    Slt = 0xc0,
    Sle = 0xd0,
}

/// A memory access width.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B = 0x10,
    /// 2 bytes.
    H = 0x08,
    /// 4 bytes.
    W = 0x00,
    /// 8 bytes.
    DW = 0x18,
}

/// Instruction classes.
pub mod class {
    /// Wide immediate loads.
    pub const LD: u8 = 0x00;
    /// Loads from memory.
    pub const LDX: u8 = 0x01;
    /// Stores of an immediate.
    pub const ST: u8 = 0x02;
    /// Stores of a register.
    pub const STX: u8 = 0x03;
    /// 32-bit arithmetic.
    pub const ALU: u8 = 0x04;
    /// 64-bit jumps, calls, exit.
    pub const JMP: u8 = 0x05;
    /// 32-bit jumps.
    pub const JMP32: u8 = 0x06;
    /// 64-bit arithmetic.
    pub const ALU64: u8 = 0x07;
}

const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const SRC_X: u8 = 0x08;
const OP_END: u8 = 0xd0;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;
const OP_JA: u8 = 0x00;
/// `src_reg` of a wide load whose immediate is a map's descriptor.
pub const PSEUDO_MAP_FD: u8 = 1;
/// Most instructions the kernel accepts in one program.
pub const MAX_INSNS: usize = 1_000_000;

/// One instruction (`struct bpf_insn`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode: class | size/op | mode/source.
    pub code: u8,
    /// Destination register (0..=10).
    pub dst: u8,
    /// Source register (0..=10, or a pseudo value).
    pub src: u8,
    /// Signed offset (memory offset or jump distance).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl Insn {
    /// The 8 bytes the kernel reads (register nibbles in the host's
    /// bit-field order).
    pub fn encode(&self) -> [u8; 8] {
        let regs = if cfg!(target_endian = "little") {
            (self.dst & 0xf) | (self.src << 4)
        } else {
            (self.dst << 4) | (self.src & 0xf)
        };
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = regs;
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }
}

/// A jump target, bound with [`Asm::bind`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Why a program could not be assembled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    /// A jump to a label never bound.
    #[error("instruction {at} jumps to label {label}, which is never bound")]
    Unbound {
        /// The jump's index.
        at: usize,
        /// The label's number.
        label: usize,
    },
    /// A label bound twice.
    #[error("label {0} is bound twice")]
    Rebound(usize),
    /// A jump farther than a 16-bit offset reaches.
    #[error("instruction {at} jumps {distance} instructions: allowed -32768..=32767")]
    TooFar {
        /// The jump's index.
        at: usize,
        /// The distance.
        distance: i64,
    },
    /// More instructions than the kernel accepts.
    #[error("{0} instructions: allowed at most {MAX_INSNS}")]
    TooLong(usize),
}

/// An instruction list under construction.
#[derive(Clone, Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
    rebound: Option<usize>,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Instructions so far.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// `true` before the first instruction.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// A new, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction appended.
    pub fn bind(&mut self, l: Label) {
        if self.labels[l.0].is_some() {
            self.rebound.get_or_insert(l.0);
        }
        self.labels[l.0] = Some(self.insns.len());
    }

    /// Appends a raw instruction.
    pub fn raw(&mut self, insn: Insn) -> &mut Asm {
        self.insns.push(insn);
        self
    }

    fn op(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> &mut Asm {
        self.raw(Insn {
            code,
            dst: dst as u8,
            src: src as u8,
            off,
            imm,
        })
    }

    /// `dst = dst OP imm` (64-bit; `imm` sign-extended).
    pub fn alu64_imm(&mut self, op: Alu, dst: Reg, imm: i32) -> &mut Asm {
        self.op(class::ALU64 | op as u8, dst, Reg::R0, 0, imm)
    }

    /// `dst = dst OP src` (64-bit).
    pub fn alu64_reg(&mut self, op: Alu, dst: Reg, src: Reg) -> &mut Asm {
        self.op(class::ALU64 | op as u8 | SRC_X, dst, src, 0, 0)
    }

    /// `dst = (u32)dst OP (u32)imm`, upper half zeroed.
    pub fn alu32_imm(&mut self, op: Alu, dst: Reg, imm: i32) -> &mut Asm {
        self.op(class::ALU | op as u8, dst, Reg::R0, 0, imm)
    }

    /// `dst = (u32)dst OP (u32)src`, upper half zeroed.
    pub fn alu32_reg(&mut self, op: Alu, dst: Reg, src: Reg) -> &mut Asm {
        self.op(class::ALU | op as u8 | SRC_X, dst, src, 0, 0)
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub fn mov64_imm(&mut self, dst: Reg, imm: i32) -> &mut Asm {
        self.alu64_imm(Alu::Mov, dst, imm)
    }

    /// `dst = src` (64-bit).
    pub fn mov64_reg(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.alu64_reg(Alu::Mov, dst, src)
    }

    /// Converts the low `bits` (16, 32 or 64) of `dst` from big-endian
    /// (network order) to host order (`BPF_END | BPF_TO_BE`).
    pub fn be(&mut self, dst: Reg, bits: i32) -> &mut Asm {
        self.op(class::ALU | OP_END | SRC_X, dst, Reg::R0, 0, bits)
    }

    /// `dst = *(size *)(src + off)`.
    pub fn ldx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.op(class::LDX | size as u8 | MODE_MEM, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    pub fn stx(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.op(class::STX | size as u8 | MODE_MEM, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn st_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Asm {
        self.op(class::ST | size as u8 | MODE_MEM, dst, Reg::R0, off, imm)
    }

    /// `dst = imm64` (two instruction slots).
    pub fn ld_imm64(&mut self, dst: Reg, imm: u64) -> &mut Asm {
        self.ld_wide(dst, 0, imm)
    }

    /// `dst = the map with descriptor fd` (the kernel puts the map's
    /// address in; two instruction slots).
    pub fn ld_map_fd(&mut self, dst: Reg, fd: i32) -> &mut Asm {
        self.ld_wide(dst, PSEUDO_MAP_FD, fd as u32 as u64)
    }

    fn ld_wide(&mut self, dst: Reg, src: u8, imm: u64) -> &mut Asm {
        self.raw(Insn {
            code: class::LD | Size::DW as u8 | MODE_IMM,
            dst: dst as u8,
            src,
            off: 0,
            imm: imm as u32 as i32,
        });
        self.raw(Insn {
            code: 0,
            dst: 0,
            src: 0,
            off: 0,
            imm: (imm >> 32) as u32 as i32,
        })
    }

    fn jump(&mut self, code: u8, dst: Reg, src: Reg, imm: i32, to: Label) -> &mut Asm {
        self.fixups.push((self.insns.len(), to));
        self.op(code, dst, src, 0, imm)
    }

    /// `if dst COND imm goto to` (64-bit compare, `imm` sign-extended).
    pub fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) -> &mut Asm {
        self.jump(class::JMP | cond as u8, dst, Reg::R0, imm, to)
    }

    /// `if dst COND src goto to` (64-bit compare).
    pub fn jmp_reg(&mut self, cond: Cond, dst: Reg, src: Reg, to: Label) -> &mut Asm {
        self.jump(class::JMP | cond as u8 | SRC_X, dst, src, 0, to)
    }

    /// `if (u32)dst COND (u32)imm goto to`.
    pub fn jmp32_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) -> &mut Asm {
        self.jump(class::JMP32 | cond as u8, dst, Reg::R0, imm, to)
    }

    /// `goto to`.
    pub fn ja(&mut self, to: Label) -> &mut Asm {
        self.jump(class::JMP | OP_JA, Reg::R0, Reg::R0, 0, to)
    }

    /// Calls helper number `helper` (arguments in R1..R5, result in R0).
    pub fn call(&mut self, helper: i32) -> &mut Asm {
        self.op(class::JMP | OP_CALL, Reg::R0, Reg::R0, 0, helper)
    }

    /// Returns R0.
    pub fn exit(&mut self) -> &mut Asm {
        self.op(class::JMP | OP_EXIT, Reg::R0, Reg::R0, 0, 0)
    }

    /// The instructions with every jump resolved.
    pub fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        if let Some(l) = self.rebound {
            return Err(AsmError::Rebound(l));
        }
        if self.insns.len() > MAX_INSNS {
            return Err(AsmError::TooLong(self.insns.len()));
        }
        for &(at, label) in &self.fixups {
            let target = self.labels[label.0].ok_or(AsmError::Unbound { at, label: label.0 })?;
            let distance = target as i64 - (at as i64 + 1);
            self.insns[at].off =
                i16::try_from(distance).map_err(|_| AsmError::TooFar { at, distance })?;
        }
        Ok(self.insns)
    }
}

/// The program as the bytes `BPF_PROG_LOAD` reads.
pub fn encode_all(insns: &[Insn]) -> Vec<u8> {
    insns.iter().flat_map(Insn::encode).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_kernel_layout() {
        let mut a = Asm::new();
        a.mov64_imm(Reg::R0, 2).exit();
        let p = a.finish().expect("assembles");
        // BPF_ALU64|BPF_MOV|BPF_K = 0xb7, dst r0, imm 2; BPF_JMP|BPF_EXIT = 0x95.
        assert_eq!(p[0].encode(), [0xb7, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(p[1].encode(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        let mut a = Asm::new();
        a.ldx(Size::W, Reg::R2, Reg::R1, 16)
            .stx(Size::H, Reg::R10, -8, Reg::R3)
            .st_imm(Size::B, Reg::R10, -1, 7)
            .be(Reg::R4, 16)
            .alu32_imm(Alu::And, Reg::R5, 0xff)
            .call(51);
        let p = a.finish().expect("assembles");
        if cfg!(target_endian = "little") {
            assert_eq!(p[0].encode(), [0x61, 0x12, 16, 0, 0, 0, 0, 0]);
            assert_eq!(p[1].encode(), [0x6b, 0x3a, 0xf8, 0xff, 0, 0, 0, 0]);
            assert_eq!(p[2].encode(), [0x72, 0x0a, 0xff, 0xff, 7, 0, 0, 0]);
            assert_eq!(p[3].encode(), [0xdc, 0x04, 0, 0, 16, 0, 0, 0]);
            assert_eq!(p[4].encode(), [0x54, 0x05, 0, 0, 0xff, 0, 0, 0]);
            assert_eq!(p[5].encode(), [0x85, 0, 0, 0, 51, 0, 0, 0]);
        }
    }

    #[test]
    fn wide_loads_take_two_slots() {
        let mut a = Asm::new();
        a.ld_map_fd(Reg::R1, 9)
            .ld_imm64(Reg::R2, 0x1122_3344_5566_7788);
        let p = a.finish().expect("assembles");
        assert_eq!(p.len(), 4);
        assert_eq!((p[0].code, p[0].src, p[0].imm, p[1].imm), (0x18, 1, 9, 0));
        assert_eq!(
            (p[2].imm as u32, p[3].imm as u32),
            (0x5566_7788, 0x1122_3344)
        );
    }

    #[test]
    fn jumps_resolve_forward_and_backward() {
        let mut a = Asm::new();
        let (back, fwd) = (a.label(), a.label());
        a.bind(back);
        a.mov64_imm(Reg::R0, 0); // 0
        a.jmp_imm(Cond::Eq, Reg::R0, 1, fwd); // 1 -> 4: off 2
        a.jmp32_imm(Cond::Ne, Reg::R0, 0, back); // 2 -> 0: off -3
        a.ja(fwd); // 3 -> 4: off 0
        a.bind(fwd);
        a.exit(); // 4
        let p = a.finish().expect("assembles");
        assert_eq!((p[1].off, p[2].off, p[3].off), (2, -3, 0));
        assert_eq!((p[1].code, p[2].code, p[3].code), (0x15, 0x56, 0x05));
    }

    #[test]
    fn bad_labels_are_refused_with_the_place() {
        let mut a = Asm::new();
        let l = a.label();
        a.ja(l);
        assert_eq!(a.finish(), Err(AsmError::Unbound { at: 0, label: 0 }));
        let mut a = Asm::new();
        let l = a.label();
        a.bind(l);
        a.exit();
        a.bind(l);
        assert_eq!(a.finish(), Err(AsmError::Rebound(0)));
        let mut a = Asm::new();
        let l = a.label();
        a.ja(l);
        for _ in 0..40_000 {
            a.exit();
        }
        a.bind(l);
        a.exit();
        assert!(matches!(
            a.finish(),
            Err(AsmError::TooFar {
                at: 0,
                distance: 40_000
            })
        ));
    }
}
