//! Reading input files with a size cap.
//!
//! Every file a user names (scenario, trace, policy) is read through
//! [`read_capped`], so pointing one at `/dev/zero` or a multi-gigabyte log
//! is a clear error instead of an unbounded allocation.

use std::io::Read;
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
    #[error("{what} `{path}` is larger than {cap} bytes, the limit for a {what} file")]
    TooLarge {
        /// What the file is.
        what: &'static str,
        /// The path as given.
        path: String,
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
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(InputFileError::TooLarge {
            what,
            path: shown(),
            cap,
        });
    }
    String::from_utf8(bytes).map_err(|_| InputFileError::NotText {
        what,
        path: shown(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_missing_files_are_named_errors() {
        let e = read_capped(Path::new("/dev/zero"), "trace", 1000).expect_err("endless");
        assert!(
            e.to_string()
                .contains("trace `/dev/zero` is larger than 1000 bytes"),
            "{e}"
        );
        let e = read_capped(Path::new("/nonexistent/x.toml"), "scenario", 10).expect_err("missing");
        assert!(
            e.to_string()
                .starts_with("cannot read scenario `/nonexistent/x.toml`"),
            "{e}"
        );
        let e = read_capped(Path::new("/"), "policy", 10).expect_err("directory");
        assert!(e.to_string().starts_with("cannot read policy `/`"), "{e}");
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
