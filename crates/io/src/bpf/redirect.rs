//! The XDP program that hands each frame to the AF_XDP socket bound to its
//! receive queue, and lets frames of queues without one go on to the
//! kernel's stack; every frame first gets its receive stamp
//! ([`super::stamp`]: 8 bytes of metadata, skipped where the driver has
//! no metadata):
//!
//! ```text
//! r6 = ctx; r7 = bpf_ktime_get_ns()
//! if bpf_xdp_adjust_meta(ctx, -8) == 0 && meta + 8 <= data: *(u64 *)meta = r7
//! r2 = ctx->rx_queue_index
//! r1 = xskmap
//! r3 = XDP_PASS            // the action when the key has no socket
//! return bpf_redirect_map(r1, r2, r3)
//! ```

use super::insn::{Asm, Insn, Reg, Size};
use super::stamp::{STAMP_LEN, reserve_and_stamp};
use super::sys::{Map, Program};
use super::{BpfError, helper, xdp_md};

/// The instructions for `map`.
pub fn redirect_by_queue(map: &Map) -> Result<Vec<Insn>, BpfError> {
    let mut a = Asm::new();
    let redirect = a.label();
    a.mov64_reg(Reg::R6, Reg::R1)
        .call(helper::KTIME_GET_NS)
        .mov64_reg(Reg::R7, Reg::R0);
    reserve_and_stamp(&mut a, Reg::R6, Reg::R7, STAMP_LEN, redirect);
    a.bind(redirect);
    a.ldx(Size::W, Reg::R2, Reg::R6, xdp_md::RX_QUEUE_INDEX)
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
            crate::untested::skipped("bpf(2) needs root");
            return;
        }
        let map = Map::xsk(4, "pst_test").expect("map");
        let prog = load_redirect_by_queue(&map).expect("load");
        let frame = [0u8; 60];
        let mut out = [0u8; 256];
        let before = crate::clock::monotonic_ns();
        let run = prog.test_run(&frame, &mut out).expect("test run");
        let after = crate::clock::monotonic_ns();
        assert_eq!(run.retval, action::PASS);
        let meta = STAMP_LEN as usize;
        assert_eq!(&out[meta..run.out_len], &frame[..]);
        let rx = crate::bpf::stamp::rx_ns_of_output(&out[..run.out_len], frame.len(), meta)
            .expect("the frame comes out with its stamp in front");
        assert!(before <= rx && rx <= after, "{before} <= {rx} <= {after}");
    }

    #[test]
    fn repeated_test_runs_give_the_verdict_and_refuse_a_bad_count() {
        if !crate::netns::is_root() {
            crate::untested::skipped("bpf(2) needs root");
            return;
        }
        let map = Map::xsk(4, "pst_test").expect("map");
        let prog = load_redirect_by_queue(&map).expect("load");
        let frame = [0x5au8; 60];
        let mut out = [0u8; 512];
        let (run, _mean_ns) = prog
            .test_run_repeated(&frame, &mut out, 1000)
            .expect("1000 runs");
        assert_eq!(run.retval, action::PASS);
        // The frame comes out unchanged behind whatever metadata the runs
        // left reserved (at most the test run's 256 bytes of headroom).
        assert!(run.out_len >= frame.len() && run.out_len <= frame.len() + 256);
        assert_eq!(&out[run.out_len - frame.len()..run.out_len], &frame[..]);
        for bad in [0, crate::bpf::sys::MAX_TEST_REPEAT + 1] {
            let e = prog
                .test_run_repeated(&frame, &mut out, bad)
                .expect_err("refused")
                .to_string();
            assert!(
                e.contains(&format!("repeat {bad}:")) && e.contains("allowed"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_refused_program_brings_the_verifier_log() {
        if !crate::netns::is_root() {
            crate::untested::skipped("bpf(2) needs root");
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
