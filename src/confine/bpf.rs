//! A tiny classic-BPF assembler and interpreter, for seccomp programs only.
//!
//! [`Assembler`] turns instructions with symbolic, forward-only jump targets into a
//! [`SockFilter`] program: it resolves labels, and where a conditional jump cannot reach its
//! target (8-bit offsets) it routes it through an unconditional `JA` trampoline (32-bit offset).
//! [`run`] executes a program against a [`SeccompData`] the way the kernel does, so the
//! semantics of guard's filter are proven by unit tests and fuzzing without installing it.
//! Pure code: no I/O, no `unsafe`.

use super::ConfineError;

/// One classic-BPF instruction, with the layout of the kernel's `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl From<SockFilter> for libc::sock_filter {
    fn from(f: SockFilter) -> Self {
        libc::sock_filter {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        }
    }
}

/// The kernel's `struct seccomp_data`: what a seccomp program reads with `LD W ABS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeccompData {
    pub nr: i32,
    pub arch: u32,
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

/// Size of `struct seccomp_data` in bytes.
pub const SECCOMP_DATA_LEN: u32 = 64;
/// Offset of `nr` in `struct seccomp_data`.
pub const OFF_NR: u32 = 0;
/// Offset of `arch` in `struct seccomp_data`.
pub const OFF_ARCH: u32 = 4;

/// Offset of the low 32 bits of syscall argument `i` (0..6).
pub const fn off_arg_lo(i: usize) -> u32 {
    let base = 16 + 8 * i as u32;
    if cfg!(target_endian = "little") {
        base
    } else {
        base + 4
    }
}

/// Offset of the high 32 bits of syscall argument `i` (0..6).
pub const fn off_arg_hi(i: usize) -> u32 {
    let base = 16 + 8 * i as u32;
    if cfg!(target_endian = "little") {
        base + 4
    } else {
        base
    }
}

impl SeccompData {
    /// The structure as the kernel lays it out (host byte order).
    pub fn to_bytes(&self) -> [u8; SECCOMP_DATA_LEN as usize] {
        let mut b = [0u8; SECCOMP_DATA_LEN as usize];
        b[0..4].copy_from_slice(&self.nr.to_ne_bytes());
        b[4..8].copy_from_slice(&self.arch.to_ne_bytes());
        b[8..16].copy_from_slice(&self.instruction_pointer.to_ne_bytes());
        for (i, a) in self.args.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        b
    }
}

// Seccomp return actions (include/uapi/linux/seccomp.h).
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const SECCOMP_RET_KILL_THREAD: u32 = 0x0000_0000;
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
pub const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
pub const SECCOMP_RET_DATA: u32 = 0x0000_ffff;

/// `SECCOMP_RET_ERRNO` carrying `errno`.
pub const fn ret_errno(errno: i32) -> u32 {
    SECCOMP_RET_ERRNO | (errno as u32 & SECCOMP_RET_DATA)
}

/// The longest program the kernel accepts (`BPF_MAXINSNS`).
pub const BPF_MAXINSNS: usize = 4096;

// Instruction classes, sizes, modes, operations and sources (include/uapi/linux/bpf_common.h).
pub const BPF_LD: u16 = 0x00;
pub const BPF_LDX: u16 = 0x01;
pub const BPF_ST: u16 = 0x02;
pub const BPF_STX: u16 = 0x03;
pub const BPF_ALU: u16 = 0x04;
pub const BPF_JMP: u16 = 0x05;
pub const BPF_RET: u16 = 0x06;
pub const BPF_MISC: u16 = 0x07;
pub const BPF_W: u16 = 0x00;
pub const BPF_IMM: u16 = 0x00;
pub const BPF_ABS: u16 = 0x20;
pub const BPF_LEN: u16 = 0x80;
pub const BPF_MEM: u16 = 0x60;
pub const BPF_ADD: u16 = 0x00;
pub const BPF_SUB: u16 = 0x10;
pub const BPF_MUL: u16 = 0x20;
pub const BPF_DIV: u16 = 0x30;
pub const BPF_OR: u16 = 0x40;
pub const BPF_AND: u16 = 0x50;
pub const BPF_LSH: u16 = 0x60;
pub const BPF_RSH: u16 = 0x70;
pub const BPF_NEG: u16 = 0x80;
pub const BPF_MOD: u16 = 0x90;
pub const BPF_XOR: u16 = 0xa0;
pub const BPF_JA: u16 = 0x00;
pub const BPF_JEQ: u16 = 0x10;
pub const BPF_JGT: u16 = 0x20;
pub const BPF_JGE: u16 = 0x30;
pub const BPF_JSET: u16 = 0x40;
pub const BPF_K: u16 = 0x00;
pub const BPF_X: u16 = 0x08;
pub const BPF_A: u16 = 0x10;
pub const BPF_TAX: u16 = 0x00;
pub const BPF_TXA: u16 = 0x80;

/// A position in a program being assembled; bind it with [`Assembler::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Label(usize);

/// Where a conditional jump goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// The next instruction.
    Next,
    Label(Label),
}

/// A conditional jump comparing the accumulator with a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// `A == k`
    Eq,
    /// `A > k` (unsigned)
    Gt,
    /// `A >= k` (unsigned)
    Ge,
    /// `A & k != 0`
    Set,
}

impl Cond {
    fn code(self) -> u16 {
        BPF_JMP
            | BPF_K
            | match self {
                Cond::Eq => BPF_JEQ,
                Cond::Gt => BPF_JGT,
                Cond::Ge => BPF_JGE,
                Cond::Set => BPF_JSET,
            }
    }
}

#[derive(Debug, Clone, Copy)]
enum Item {
    Stmt(SockFilter),
    Jump {
        code: u16,
        k: u32,
        jt: Label,
        jf: Label,
    },
    Ja(Label),
    Bind(Label),
}

/// Builds a program from instructions with symbolic forward jumps.
#[derive(Debug, Default)]
pub struct Assembler {
    items: Vec<Item>,
    labels: usize,
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    /// Binds `label` to the position of the next instruction.
    pub fn bind(&mut self, label: Label) {
        self.items.push(Item::Bind(label));
    }

    /// `A = data[offset]` (32-bit word).
    pub fn ld_abs(&mut self, offset: u32) {
        self.stmt(BPF_LD | BPF_W | BPF_ABS, offset);
    }

    /// `A = k`.
    pub fn ld_imm(&mut self, k: u32) {
        self.stmt(BPF_LD | BPF_IMM, k);
    }

    /// `A &= k`.
    pub fn and(&mut self, k: u32) {
        self.stmt(BPF_ALU | BPF_AND | BPF_K, k);
    }

    /// Returns `k` (a seccomp action).
    pub fn ret(&mut self, k: u32) {
        self.stmt(BPF_RET | BPF_K, k);
    }

    /// Any instruction without a jump target, as is.
    pub fn stmt(&mut self, code: u16, k: u32) {
        self.items.push(Item::Stmt(SockFilter {
            code,
            jt: 0,
            jf: 0,
            k,
        }));
    }

    /// Unconditional jump to `target`.
    pub fn ja(&mut self, target: Label) {
        self.items.push(Item::Ja(target));
    }

    /// `if cond(A, k) goto jt else goto jf`.
    pub fn jump(&mut self, cond: Cond, k: u32, jt: Dest, jf: Dest) {
        let mut next = None;
        let mut resolve = |d: Dest, this: &mut Self| match d {
            Dest::Label(l) => l,
            Dest::Next => *next.get_or_insert_with(|| this.label()),
        };
        let jt = resolve(jt, self);
        let jf = resolve(jf, self);
        self.items.push(Item::Jump {
            code: cond.code(),
            k,
            jt,
            jf,
        });
        if let Some(next) = next {
            self.bind(next);
        }
    }

    /// Resolves every label and returns the program.
    ///
    /// A conditional jump whose target is more than 255 instructions ahead is sent to a `JA`
    /// trampoline placed right after it. Jumps must go forward (classic BPF has no backward
    /// jumps); a label bound before its use or never bound is an error.
    pub fn finish(mut self) -> Result<Vec<SockFilter>, ConfineError> {
        loop {
            let pos = self.positions();
            let mut far = None;
            for (idx, item) in self.items.iter().enumerate() {
                if let Item::Jump { jt, jf, .. } = *item {
                    let at = pos.at[idx];
                    let too_far = |l: Label| match pos.label(l) {
                        Some(t) if t > at => t - at - 1 > u8::MAX as usize,
                        _ => false,
                    };
                    if too_far(jt) || too_far(jf) {
                        far = Some((idx, too_far(jt), too_far(jf)));
                        break;
                    }
                }
            }
            let Some((idx, t_far, f_far)) = far else {
                return self.encode(&pos);
            };
            let Item::Jump { code, k, jt, jf } = self.items[idx] else {
                unreachable!("index found as a jump above");
            };
            let mut insert = Vec::new();
            let mut route = |target: Label, is_far: bool, this: &mut Self| {
                if !is_far {
                    return target;
                }
                let tramp = this.label();
                insert.push(Item::Bind(tramp));
                insert.push(Item::Ja(target));
                tramp
            };
            let jt2 = route(jt, t_far, &mut self);
            let jf2 = route(jf, f_far, &mut self);
            self.items[idx] = Item::Jump {
                code,
                k,
                jt: jt2,
                jf: jf2,
            };
            self.items.splice(idx + 1..idx + 1, insert);
        }
    }

    fn positions(&self) -> Positions {
        let mut at = Vec::with_capacity(self.items.len());
        let mut labels = vec![None; self.labels];
        let mut n = 0;
        for item in &self.items {
            at.push(n);
            match item {
                Item::Bind(l) => labels[l.0] = Some(n),
                _ => n += 1,
            }
        }
        Positions { at, labels, len: n }
    }

    fn encode(&self, pos: &Positions) -> Result<Vec<SockFilter>, ConfineError> {
        if pos.len > BPF_MAXINSNS {
            return Err(ConfineError::ProgramTooLong {
                len: pos.len,
                max: BPF_MAXINSNS,
            });
        }
        let mut out = Vec::with_capacity(pos.len);
        for (idx, item) in self.items.iter().enumerate() {
            let at = pos.at[idx];
            let offset = |l: Label| -> Result<usize, ConfineError> {
                match pos.label(l) {
                    Some(t) if t > at => Ok(t - at - 1),
                    _ => Err(ConfineError::UnresolvedLabel {
                        from: at,
                        label: l.0,
                    }),
                }
            };
            match *item {
                Item::Stmt(f) => out.push(f),
                Item::Bind(_) => {}
                Item::Ja(l) => out.push(SockFilter {
                    code: BPF_JMP | BPF_JA,
                    jt: 0,
                    jf: 0,
                    k: u32::try_from(offset(l)?).expect("program length is bounded by 4096"),
                }),
                Item::Jump { code, k, jt, jf } => {
                    let narrow = |o: usize| {
                        u8::try_from(o).map_err(|_| ConfineError::UnresolvedLabel {
                            from: at,
                            label: jt.0,
                        })
                    };
                    out.push(SockFilter {
                        code,
                        jt: narrow(offset(jt)?)?,
                        jf: narrow(offset(jf)?)?,
                        k,
                    });
                }
            }
        }
        Ok(out)
    }
}

struct Positions {
    /// Instruction index of each item (for a label: the instruction it names).
    at: Vec<usize>,
    labels: Vec<Option<usize>>,
    len: usize,
}

impl Positions {
    fn label(&self, l: Label) -> Option<usize> {
        self.labels.get(l.0).copied().flatten()
    }
}

/// Runs `prog` on `data` as the kernel's seccomp does and returns the action.
///
/// Programs the kernel would refuse to load (unknown or misaligned instructions, jumps out of the
/// program, falling off its end) return `SECCOMP_RET_KILL_PROCESS` here, so a test can never
/// mistake a broken program for a permissive one. Division by a zero `X` returns 0, like the
/// kernel.
pub fn run(prog: &[SockFilter], data: &SeccompData) -> u32 {
    run_counting(prog, data).0
}

/// [`run`], and how many instructions it executed: what a call costs in the kernel, which
/// runs the program on every call whose verdict it could not cache.
pub fn run_counting(prog: &[SockFilter], data: &SeccompData) -> (u32, usize) {
    const INVALID: u32 = SECCOMP_RET_KILL_PROCESS;
    let bytes = data.to_bytes();
    let word = |k: u32| -> Option<u32> {
        if k % 4 != 0 || k >= SECCOMP_DATA_LEN {
            return None;
        }
        let k = k as usize;
        Some(u32::from_ne_bytes([
            bytes[k],
            bytes[k + 1],
            bytes[k + 2],
            bytes[k + 3],
        ]))
    };
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    let mut steps = 0usize;
    // Jumps only go forward, so the program always terminates.
    while let Some(ins) = prog.get(pc) {
        pc += 1;
        steps += 1;
        let k = ins.k;
        let class = ins.code & 0x07;
        match class {
            BPF_LD | BPF_LDX => {
                let v = match ins.code & 0xe0 {
                    BPF_ABS if ins.code & 0x18 == BPF_W => match word(k) {
                        Some(v) => v,
                        None => return (INVALID, steps),
                    },
                    BPF_IMM => k,
                    BPF_LEN => SECCOMP_DATA_LEN,
                    BPF_MEM => match mem.get(k as usize) {
                        Some(v) => *v,
                        None => return (INVALID, steps),
                    },
                    _ => return (INVALID, steps),
                };
                if class == BPF_LD {
                    a = v;
                } else {
                    x = v;
                }
            }
            BPF_ST | BPF_STX => {
                let v = if class == BPF_ST { a } else { x };
                match mem.get_mut(k as usize) {
                    Some(m) => *m = v,
                    None => return (INVALID, steps),
                }
            }
            BPF_ALU => {
                let src = if ins.code & BPF_X != 0 { x } else { k };
                a = match ins.code & 0xf0 {
                    BPF_ADD => a.wrapping_add(src),
                    BPF_SUB => a.wrapping_sub(src),
                    BPF_MUL => a.wrapping_mul(src),
                    BPF_DIV if src == 0 => return (0, steps),
                    BPF_DIV => a / src,
                    BPF_MOD if src == 0 => return (0, steps),
                    BPF_MOD => a % src,
                    BPF_OR => a | src,
                    BPF_AND => a & src,
                    BPF_XOR => a ^ src,
                    BPF_LSH => a.checked_shl(src).unwrap_or(0),
                    BPF_RSH => a.checked_shr(src).unwrap_or(0),
                    BPF_NEG => a.wrapping_neg(),
                    _ => return (INVALID, steps),
                };
            }
            BPF_JMP => {
                let op = ins.code & 0xf0;
                if op == BPF_JA {
                    pc = match pc.checked_add(k as usize) {
                        Some(p) => p,
                        None => return (INVALID, steps),
                    };
                    continue;
                }
                let src = if ins.code & BPF_X != 0 { x } else { k };
                let taken = match op {
                    BPF_JEQ => a == src,
                    BPF_JGT => a > src,
                    BPF_JGE => a >= src,
                    BPF_JSET => a & src != 0,
                    _ => return (INVALID, steps),
                };
                pc += usize::from(if taken { ins.jt } else { ins.jf });
            }
            BPF_RET => {
                let action = match ins.code & 0x18 {
                    BPF_K => k,
                    BPF_A => a,
                    _ => INVALID,
                };
                return (action, steps);
            }
            BPF_MISC => match ins.code & 0xf8 {
                BPF_TAX => x = a,
                BPF_TXA => a = x,
                _ => return (INVALID, steps),
            },
            _ => return (INVALID, steps),
        }
    }
    (INVALID, steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn sock_filter_has_the_kernel_layout() {
        assert_eq!(size_of::<SockFilter>(), 8);
        assert_eq!(size_of::<SockFilter>(), size_of::<libc::sock_filter>());
        assert_eq!(
            offset_of!(SockFilter, code),
            offset_of!(libc::sock_filter, code)
        );
        assert_eq!(
            offset_of!(SockFilter, jt),
            offset_of!(libc::sock_filter, jt)
        );
        assert_eq!(
            offset_of!(SockFilter, jf),
            offset_of!(libc::sock_filter, jf)
        );
        assert_eq!(offset_of!(SockFilter, k), offset_of!(libc::sock_filter, k));
    }

    #[test]
    fn seccomp_data_has_the_kernel_layout() {
        assert_eq!(size_of::<SeccompData>(), SECCOMP_DATA_LEN as usize);
        assert_eq!(offset_of!(SeccompData, nr), OFF_NR as usize);
        assert_eq!(offset_of!(SeccompData, arch), OFF_ARCH as usize);
        assert_eq!(offset_of!(SeccompData, instruction_pointer), 8);
        assert_eq!(offset_of!(SeccompData, args), 16);
        assert_eq!(SECCOMP_RET_USER_NOTIF, libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(SECCOMP_RET_ALLOW, libc::SECCOMP_RET_ALLOW);
        assert_eq!(SECCOMP_RET_ERRNO, libc::SECCOMP_RET_ERRNO);
        assert_eq!(SECCOMP_RET_KILL_PROCESS, libc::SECCOMP_RET_KILL_PROCESS);
    }

    #[test]
    fn args_are_read_as_two_words_low_first() {
        let data = SeccompData {
            args: [0, 0x1122_3344_5566_7788, 0, 0, 0, 0],
            ..Default::default()
        };
        for (off, want) in [(off_arg_lo(1), 0x5566_7788), (off_arg_hi(1), 0x1122_3344)] {
            let mut asm = Assembler::new();
            asm.ld_abs(off);
            asm.stmt(BPF_RET | BPF_A, 0);
            assert_eq!(run(&asm.finish().unwrap(), &data), want);
        }
    }

    #[test]
    fn interpreter_rejects_broken_programs() {
        let d = SeccompData::default();
        assert_eq!(run(&[], &d), SECCOMP_RET_KILL_PROCESS);
        let misaligned = [SockFilter {
            code: BPF_LD | BPF_W | BPF_ABS,
            jt: 0,
            jf: 0,
            k: 2,
        }];
        assert_eq!(run(&misaligned, &d), SECCOMP_RET_KILL_PROCESS);
        let past_end = [SockFilter {
            code: BPF_JMP | BPF_JA,
            jt: 0,
            jf: 0,
            k: 5,
        }];
        assert_eq!(run(&past_end, &d), SECCOMP_RET_KILL_PROCESS);
    }

    #[test]
    fn labels_resolve_to_forward_offsets() {
        let mut asm = Assembler::new();
        let yes = asm.label();
        asm.ld_abs(OFF_NR);
        asm.jump(Cond::Eq, 7, Dest::Label(yes), Dest::Next);
        asm.ret(SECCOMP_RET_ALLOW);
        asm.bind(yes);
        asm.ret(ret_errno(libc::EPERM));
        let prog = asm.finish().unwrap();
        assert_eq!(prog.len(), 4);
        assert_eq!((prog[1].jt, prog[1].jf), (1, 0));
        let d = |nr| SeccompData {
            nr,
            ..Default::default()
        };
        assert_eq!(run(&prog, &d(7)), ret_errno(libc::EPERM));
        assert_eq!(run(&prog, &d(8)), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn unbound_and_backward_labels_are_errors() {
        let mut asm = Assembler::new();
        let nowhere = asm.label();
        asm.ja(nowhere);
        assert!(asm.finish().is_err());

        let mut asm = Assembler::new();
        let back = asm.label();
        asm.bind(back);
        asm.ld_imm(0);
        asm.jump(Cond::Eq, 0, Dest::Label(back), Dest::Next);
        asm.ret(0);
        assert!(asm.finish().is_err());
    }

    /// 600 comparisons all jumping to one shared return at the end: most of them are far more
    /// than 255 instructions away, so they go through trampolines.
    #[test]
    fn far_jumps_go_through_trampolines() {
        let mut asm = Assembler::new();
        let hit = asm.label();
        asm.ld_abs(OFF_NR);
        for nr in 0..600u32 {
            asm.jump(Cond::Eq, nr * 3, Dest::Label(hit), Dest::Next);
        }
        asm.ret(SECCOMP_RET_ALLOW);
        asm.bind(hit);
        asm.ret(SECCOMP_RET_USER_NOTIF);
        let prog = asm.finish().unwrap();
        assert!(prog.len() > 602, "trampolines were inserted");
        for nr in 0..1800i32 {
            let d = SeccompData {
                nr,
                ..Default::default()
            };
            let want = if nr % 3 == 0 {
                SECCOMP_RET_USER_NOTIF
            } else {
                SECCOMP_RET_ALLOW
            };
            assert_eq!(run(&prog, &d), want, "nr {nr}");
        }
    }

    /// The interpreter never panics, whatever the program (fuzzing relies on it).
    #[test]
    fn random_programs_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..5_000 {
            let len = (next() % 12) as usize;
            let prog: Vec<SockFilter> = (0..len)
                .map(|_| {
                    let r = next();
                    SockFilter {
                        code: (r & 0xff) as u16,
                        jt: (r >> 8) as u8 % 4,
                        jf: (r >> 16) as u8 % 4,
                        k: (r >> 32) as u32 % 80,
                    }
                })
                .collect();
            let data = SeccompData {
                nr: next() as i32,
                arch: next() as u32,
                instruction_pointer: next(),
                args: [next(), next(), next(), next(), next(), next()],
            };
            let _ = run(&prog, &data);
        }
    }

    #[test]
    fn too_long_programs_are_refused() {
        let mut asm = Assembler::new();
        for _ in 0..=BPF_MAXINSNS {
            asm.ld_imm(0);
        }
        assert!(matches!(
            asm.finish(),
            Err(ConfineError::ProgramTooLong { .. })
        ));
    }
}
