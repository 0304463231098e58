//! Long commands stopped by SIGINT/SIGTERM: they stop at the next safe
//! point, print what they measured marked partial, and exit 130/143.

use std::io::Write;

use anyhow::Result;
use pktsched_runtime::signal;

/// If a signal stopped the run: a note (also printed on stderr) saying how
/// much of it was done, e.g. `partial: stopped by SIGINT after 3 of 24 runs`.
pub(crate) fn note(done: usize, total: usize, what: &str) -> Option<String> {
    let sig = signal::received()?;
    let text = format!(
        "partial: stopped by {} after {done} of {total} {what}",
        sig.name()
    );
    eprintln!("{text}");
    Some(text)
}

/// Ends the command: after a signal, flushes what was printed and exits
/// with the signal's status; otherwise returns normally.
pub(crate) fn finish(out: &mut crate::output::Stdout) -> Result<()> {
    if let Some(sig) = signal::received() {
        out.flush()?;
        std::process::exit(i32::from(sig.exit_code()));
    }
    Ok(())
}
