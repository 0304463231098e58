//! The assembler: instructions and jumps to labels, laid out with far
//! conditional jumps widened (see [`crate::cbpf`]).

use super::{Insn, Program, ProgramError, SKF_AD_OFF, SKF_NET_OFF, op};

/// Why the assembler could not lay out a program.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    /// A label jumped to but never bound.
    #[error("label {0} is jumped to but never placed")]
    Unbound(usize),
    /// A label placed twice.
    #[error("label {0} is placed twice")]
    Rebound(usize),
    /// A jump to a label placed before it (classic BPF jumps forward only).
    #[error("jump to label {0} goes backwards: classic BPF jumps forward only")]
    Backward(usize),
    /// The result is not a valid program.
    #[error(transparent)]
    Program(#[from] ProgramError),
}

/// A place in a program being assembled.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Where a conditional jump goes: the next instruction or a label.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The instruction after the jump.
    Next,
    /// A label.
    To(Label),
}

/// The instruction after the jump.
pub const NEXT: Target = Target::Next;

impl From<Label> for Target {
    fn from(l: Label) -> Target {
        Target::To(l)
    }
}

#[derive(Copy, Clone, Debug)]
enum Item {
    Stmt(Insn),
    Cond {
        code: u16,
        k: u32,
        t: Target,
        f: Target,
    },
    Ja(Label),
    Bind(Label),
}

/// An assembler: instructions and jumps to labels, laid out by
/// [`Asm::finish`].
#[derive(Clone, Debug, Default)]
pub struct Asm {
    items: Vec<Item>,
    labels: usize,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// A new label, placed later with [`Asm::bind`].
    pub fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    /// Places `l` before the next instruction.
    pub fn bind(&mut self, l: Label) {
        self.items.push(Item::Bind(l));
    }

    /// Any non-jump instruction.
    pub fn stmt(&mut self, code: u16, k: u32) {
        self.items.push(Item::Stmt(Insn::stmt(code, k)));
    }

    /// A conditional jump (`code` = `JMP | JEQ/JGT/JGE/JSET | K/X`).
    pub fn jump(&mut self, code: u16, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.items.push(Item::Cond {
            code,
            k,
            t: t.into(),
            f: f.into(),
        });
    }

    /// An unconditional jump.
    pub fn ja(&mut self, l: Label) {
        self.items.push(Item::Ja(l));
    }

    /// Instructions so far (a long jump counted as one).
    pub fn len(&self) -> usize {
        self.items
            .iter()
            .filter(|i| !matches!(i, Item::Bind(_)))
            .count()
    }

    /// Nothing yet?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves the labels and checks the program.
    pub fn finish(self) -> Result<Program, AsmError> {
        let mut long = vec![false; self.items.len()];
        let mut at = self.layout(&long)?;
        // Widen out-of-range conditional jumps until none is left; widening
        // only lengthens distances, so this ends.
        loop {
            let mut changed = false;
            for (n, item) in self.items.iter().enumerate() {
                if let Item::Cond { t, f, .. } = *item
                    && !long[n]
                {
                    let from = at.pos[n] + 1;
                    let far = [t, f].into_iter().any(|tg| match tg {
                        Target::Next => false,
                        Target::To(l) => {
                            at.label[l.0].is_some_and(|p| p.saturating_sub(from) > 255)
                        }
                    });
                    if far {
                        long[n] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
            at = self.layout(&long)?;
        }
        self.emit(&long, &at)
    }

    fn layout(&self, long: &[bool]) -> Result<Layout, AsmError> {
        let mut label = vec![None; self.labels];
        let mut pos = vec![0; self.items.len()];
        let mut pc = 0;
        for (n, item) in self.items.iter().enumerate() {
            pos[n] = pc;
            match item {
                Item::Bind(l) => {
                    if label[l.0].replace(pc).is_some() {
                        return Err(AsmError::Rebound(l.0));
                    }
                }
                Item::Cond { .. } if long[n] => pc += 3,
                _ => pc += 1,
            }
        }
        Ok(Layout {
            label,
            pos,
            len: pc,
        })
    }

    fn emit(&self, long: &[bool], at: &Layout) -> Result<Program, AsmError> {
        let resolve = |l: Label, from: usize| -> Result<u32, AsmError> {
            let to = at.label[l.0].ok_or(AsmError::Unbound(l.0))?;
            if to < from {
                return Err(AsmError::Backward(l.0));
            }
            Ok((to - from) as u32)
        };
        let mut out = Vec::with_capacity(at.len);
        for (n, item) in self.items.iter().enumerate() {
            let from = at.pos[n] + 1;
            match *item {
                Item::Bind(_) => {}
                Item::Stmt(i) => out.push(i),
                Item::Ja(l) => out.push(Insn::stmt(op::JMP | op::JA, resolve(l, from)?)),
                Item::Cond { code, k, t, f } if long[n] => {
                    // jcc 0,1; ja T; ja F — the two ja end 1 and 2 later.
                    out.push(Insn {
                        code,
                        jt: 0,
                        jf: 1,
                        k,
                    });
                    for (tg, after) in [(t, from + 1), (f, from + 2)] {
                        let off = match tg {
                            Target::Next => (from + 2 - after) as u32,
                            Target::To(l) => resolve(l, after)?,
                        };
                        out.push(Insn::stmt(op::JMP | op::JA, off));
                    }
                }
                Item::Cond { code, k, t, f } => {
                    let mut off = [0u8; 2];
                    for (slot, tg) in off.iter_mut().zip([t, f]) {
                        if let Target::To(l) = tg {
                            // In range: the widening loop made sure.
                            *slot = u8::try_from(resolve(l, from)?).unwrap_or(u8::MAX);
                        }
                    }
                    out.push(Insn {
                        code,
                        jt: off[0],
                        jf: off[1],
                        k,
                    });
                }
            }
        }
        Ok(Program::new(out)?)
    }
}

struct Layout {
    label: Vec<Option<usize>>,
    pos: Vec<usize>,
    len: usize,
}

/// Shorthands for the instructions the compiler uses.
impl Asm {
    /// A = constant.
    pub fn ld_imm(&mut self, k: u32) {
        self.stmt(op::LD | op::W | op::IMM, k);
    }
    /// A = `M[m]`.
    pub fn ld_mem(&mut self, m: u32) {
        self.stmt(op::LD | op::W | op::MEM, m);
    }
    /// A = packet length.
    pub fn ld_len(&mut self) {
        self.stmt(op::LD | op::W | op::LEN, 0);
    }
    /// A = ancillary value `SKF_AD_OFF + a`.
    pub fn ld_anc(&mut self, a: u32) {
        self.stmt(
            op::LD | op::W | op::ABS,
            (SKF_AD_OFF as u32).wrapping_add(a),
        );
    }
    /// A = the `size` bytes at X + `SKF_NET_OFF` + n (big endian).
    pub fn ld_net_ind(&mut self, size: u16, n: u32) {
        self.stmt(
            op::LD | size | op::IND,
            (SKF_NET_OFF as u32).wrapping_add(n),
        );
    }
    /// A = the `size` bytes at `SKF_NET_OFF` + n.
    pub fn ld_net(&mut self, size: u16, n: u32) {
        self.stmt(
            op::LD | size | op::ABS,
            (SKF_NET_OFF as u32).wrapping_add(n),
        );
    }
    /// X = constant.
    pub fn ldx_imm(&mut self, k: u32) {
        self.stmt(op::LDX | op::W | op::IMM, k);
    }
    /// X = `M[m]`.
    pub fn ldx_mem(&mut self, m: u32) {
        self.stmt(op::LDX | op::W | op::MEM, m);
    }
    /// `M[m]` = A.
    pub fn st(&mut self, m: u32) {
        self.stmt(op::ST, m);
    }
    /// `M[m]` = X.
    pub fn stx(&mut self, m: u32) {
        self.stmt(op::STX, m);
    }
    /// A = A `o` k.
    pub fn alu(&mut self, o: u16, k: u32) {
        self.stmt(op::ALU | o | op::K, k);
    }
    /// A = A `o` X.
    pub fn alu_x(&mut self, o: u16) {
        self.stmt(op::ALU | o | op::X, 0);
    }
    /// X = A.
    pub fn tax(&mut self) {
        self.stmt(op::MISC | op::TAX, 0);
    }
    /// A = X.
    pub fn txa(&mut self) {
        self.stmt(op::MISC | op::TXA, 0);
    }
    /// Return k.
    pub fn ret(&mut self, k: u32) {
        self.stmt(op::RET | op::K, k);
    }
    /// If A == k go to t else f.
    pub fn jeq(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(op::JMP | op::JEQ | op::K, k, t, f);
    }
    /// If A >= k go to t else f.
    pub fn jge(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(op::JMP | op::JGE | op::K, k, t, f);
    }
    /// If A > k go to t else f.
    pub fn jgt(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(op::JMP | op::JGT | op::K, k, t, f);
    }
    /// If A & k != 0 go to t else f.
    pub fn jset(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(op::JMP | op::JSET | op::K, k, t, f);
    }
    /// If A >= X go to t else f.
    pub fn jge_x(&mut self, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(op::JMP | op::JGE | op::X, 0, t, f);
    }
}
