//! Standard output as a value that can fail.
//!
//! Results go through [`Stdout`] with `write!`/`writeln!` and `?`, never
//! `println!` (which panics when a write fails). A failed write is tagged
//! as a [`StdoutError`] so `main` can tell it from other I/O errors: a
//! closed pipe (`pktsched … | head -1`) ends the program quietly with
//! status 141, as a shell reports a C tool killed by SIGPIPE in the same
//! place; any other failure (a full disk) is an error message and status 2.

use std::io::{self, Write};

/// Exit status after the reader of standard output went away
/// (128 + SIGPIPE).
pub(crate) const BROKEN_PIPE_STATUS: u8 = 141;

/// A write to standard output failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output")]
pub(crate) struct StdoutError(#[source] pub(crate) io::Error);

/// Buffered standard output whose errors are [`StdoutError`]s.
#[derive(Debug)]
pub(crate) struct Stdout(io::BufWriter<io::Stdout>);

impl Stdout {
    pub(crate) fn new() -> Stdout {
        Stdout(io::BufWriter::new(io::stdout()))
    }
}

fn tag(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), StdoutError(e))
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(tag)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(tag)
    }
}

/// Whether `err` is a write to standard output that failed because its
/// reader went away (end quietly with [`BROKEN_PIPE_STATUS`]).
pub(crate) fn is_broken_stdout(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<io::Error>().is_some_and(|e| {
            e.kind() == io::ErrorKind::BrokenPipe
                && e.get_ref().is_some_and(|i| i.is::<StdoutError>())
        })
    })
}

/// Refuses an output path (`--plot`, `--departures`, ...) whose directory
/// does not exist, before a long run whose results it would lose; `what`
/// says which files the path makes (e.g. "PREFIX-rate.svg, ...").
pub(crate) fn check_output_dir(
    flag: &str,
    path: &std::path::Path,
    what: &str,
) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{flag} {}: {} is not a directory; allowed a path in an existing directory \
             ({what})",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// A `--seed` value: a whole number that fits 64 bits (clap's own message
/// for a bad one says only "invalid digit found in string").
pub(crate) fn parse_seed(s: &str) -> Result<u64, String> {
    s.trim().parse::<u64>().map_err(|_| {
        format!(
            "`{s}` is not a seed; allowed a whole number 0..={}",
            u64::MAX
        )
    })
}
