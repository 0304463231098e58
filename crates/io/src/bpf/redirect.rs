//! The XDP program that hands each frame to the AF_XDP socket bound to its
//! receive queue, and lets frames of queues without one go on to the
//! kernel's stack:
//!
//! ```text
//! r2 = ctx->rx_queue_index
//! r1 = xskmap
//! r3 = XDP_PASS            // the action when the key has no socket
//! return bpf_redirect_map(r1, r2, r3)
//! ```

use super::insn::{Asm, Insn, Reg, Size};
use super::sys::{Map, Program};
use super::{BpfError, helper, xdp_md};

/// The instructions for `map`.
pub fn redirect_by_queue(map: &Map) -> Result<Vec<Insn>, BpfError> {
    let mut a = Asm::new();
    a.ldx(Size::W, Reg::R2, Reg::R1, xdp_md::RX_QUEUE_INDEX)
        .ld_map_fd(Reg::R1, map.fd())
        .mov64_imm(Reg::R3, super::action::PASS as i32)
        .call(helper::REDIRECT_MAP)
        .exit();
    Ok(a.finish()?)
}

/// Loads the redirect program for `map`.
pub fn load_redirect_by_queue(map: &Map) -> Result<Program, BpfError> {
    Program::load_xdp("pst_xsk_queue", &redirect_by_queue(map)?, "Dual MIT/GPL")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::action;

    #[test]
    fn frames_of_a_queue_without_a_socket_pass() {
        if !crate::netns::is_root() {
            eprintln!("skipped: bpf(2) needs root");
            return;
        }
        let map = Map::xsk(4, "pst_test").expect("map");
        let prog = load_redirect_by_queue(&map).expect("load");
        let frame = [0u8; 60];
        let mut out = [0u8; 256];
        let run = prog.test_run(&frame, &mut out).expect("test run");
        assert_eq!(run.retval, action::PASS);
        assert_eq!(&out[..run.out_len], &frame[..]);
    }

    #[test]
    fn a_refused_program_brings_the_verifier_log() {
        if !crate::netns::is_root() {
            eprintln!("skipped: bpf(2) needs root");
            return;
        }
        // Returns R0 without ever setting it.
        let mut a = Asm::new();
        a.exit();
        let e = Program::load_xdp("pst_bad", &a.finish().expect("assembles"), "GPL")
            .expect_err("the verifier refuses it")
            .to_string();
        assert!(e.contains("pst_bad") && e.contains("R0 !read_ok"), "{e}");
    }
}
