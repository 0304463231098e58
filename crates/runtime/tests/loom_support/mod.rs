//! Shared by the loom model tests (include with `mod loom_support;`).
//!
//! When loom catches some bugs — a deadlock, a spin past its branch limit —
//! it panics, and unwinding its parked threads then aborts the whole
//! process, so such a deliberately broken model cannot be a
//! `#[should_panic]` test. It is an ignored test instead, which
//! [`expect_broken_model_fails`] runs in a child process of the same test
//! binary.
#![forbid(unsafe_code)]

/// Runs the ignored test `child` of the current test binary in a child
/// process and checks that it failed, with `expected` in its output.
/// `missing` names what the broken model leaves out ("fence") and `how`
/// the expected failure ("with loom's deadlock report"), for the messages.
pub(crate) fn expect_broken_model_fails(child: &str, expected: &str, missing: &str, how: &str) {
    let exe = std::env::current_exe().expect("test binary path");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            child,
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the broken model in a child process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "loom did not catch the missing {missing}"
    );
    assert!(
        text.contains(expected),
        "the child failed, but not {how}:\n{text}"
    );
}
