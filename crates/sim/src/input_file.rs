//! Reading input files with a size cap.
//!
//! Every file a user names (scenario, trace, policy) is read through
//! [`read_capped`], so pointing one at `/dev/zero` or a multi-gigabyte log
//! is a clear error instead of an unbounded allocation, and a FIFO or a
//! device is refused by what it is instead of hanging the read.

use std::fs::FileType;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest scenario or policy file accepted (16 MiB: a policy at its
/// node limit takes a few MiB).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The largest trace file accepted (256 MiB: about ten million rows).
pub const MAX_TRACE_BYTES: u64 = 256 << 20;

/// Why an input file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    /// Opening or reading failed.
    #[error("cannot read {what} `{path}`: {source}")]
    Io {
        /// What the file is (`scenario`, `trace`, `policy`).
        what: &'static str,
        /// The path as given.
        path: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is larger than the cap.
    #[error(
        "{what} `{path}` is larger than {cap} bytes (at least {len}), the limit for a {what} file"
    )]
    TooLarge {
        /// What the file is.
        what: &'static str,
        /// The path as given.
        path: String,
        /// Its size, bytes (or what was read before the cap).
        len: u64,
        /// The cap, bytes.
        cap: u64,
    },
    /// The path names a FIFO, device, socket or directory.
    #[error(
        "cannot read {what} `{path}`: it is {kind}, not a regular file: allowed a regular file of \
         at most {cap} bytes"
    )]
    NotRegular {
        /// What the file is.
        what: &'static str,
        /// The path as given.
        path: String,
        /// What the path names instead.
        kind: &'static str,
        /// The cap, bytes.
        cap: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{what} `{path}` is not UTF-8 text")]
    NotText {
        /// What the file is.
        what: &'static str,
        /// The path as given.
        path: String,
    },
}

/// Reads the whole of `path` as text, refusing more than `cap` bytes
/// (without reading further than `cap + 1`).
pub fn read_capped(path: &Path, what: &'static str, cap: u64) -> Result<String, InputFileError> {
    let shown = || path.display().to_string();
    let io = |source| InputFileError::Io {
        what,
        path: shown(),
        source,
    };
    let not_regular = |kind: FileType| InputFileError::NotRegular {
        what,
        path: shown(),
        kind: kind_name(&kind),
        cap,
    };
    // Anything but a regular file is refused by what it is before it is
    // opened (opening a device can act: a watchdog, a tty), then checked
    // again on the opened file; opened without blocking (a FIFO swapped
    // in cannot hang the open) and never as a controlling terminal.
    let kind = std::fs::metadata(path).map_err(io)?.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let too_large = |len| InputFileError::TooLarge {
        what,
        path: shown(),
        len,
        cap,
    };
    if meta.len() > cap {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| InputFileError::NotText {
        what,
        path: shown(),
    })
}

/// What a path that is not a regular file names.
fn kind_name(kind: &FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_missing_files_are_named_errors() {
        let e = read_capped(Path::new("/dev/zero"), "trace", 1000).expect_err("endless");
        assert!(
            e.to_string().contains(
                "trace `/dev/zero`: it is a device, not a regular file: allowed a regular file \
                 of at most 1000 bytes"
            ),
            "{e}"
        );
        let e = read_capped(Path::new("/nonexistent/x.toml"), "scenario", 10).expect_err("missing");
        assert!(
            e.to_string()
                .starts_with("cannot read scenario `/nonexistent/x.toml`"),
            "{e}"
        );
        let e = read_capped(Path::new("/"), "policy", 10).expect_err("directory");
        assert!(e.to_string().contains("`/`: it is a directory"), "{e}");
        let fifo = std::env::temp_dir().join(format!("pktsched-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let e = read_capped(&fifo, "trace", 10).expect_err("a FIFO, no writer: no hang");
        std::fs::remove_file(&fifo).expect("clean up");
        assert!(e.to_string().contains("it is a FIFO (named pipe)"), "{e}");
    }

    #[test]
    fn a_file_at_the_cap_is_read() {
        let dir = std::env::temp_dir().join(format!("pktsched-capped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let f = dir.join("ten.txt");
        std::fs::write(&f, "0123456789").expect("write");
        assert_eq!(read_capped(&f, "trace", 10).expect("at cap"), "0123456789");
        assert!(matches!(
            read_capped(&f, "trace", 9),
            Err(InputFileError::TooLarge { cap: 9, .. })
        ));
        std::fs::write(&f, [0xff, 0xfe]).expect("write");
        assert!(matches!(
            read_capped(&f, "trace", 10),
            Err(InputFileError::NotText { .. })
        ));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
