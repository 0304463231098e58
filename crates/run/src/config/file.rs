//! Reading a config file with a size cap, so a path to `/dev/zero` or a
//! huge log is an error naming the cap rather than an unbounded allocation.

use std::io::Read;
use std::path::Path;

/// The largest config or policy file accepted.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads `path` as UTF-8 text of at most `cap` bytes. The error names what
/// the file is, the path and the cap.
pub fn read_capped(path: &Path, what: &str, cap: u64) -> Result<String, String> {
    let shown = path.display();
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!(
            "{what} `{shown}` is larger than {cap} bytes, the limit for a {what} file"
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{what} `{shown}` is not UTF-8 text"))
}

/// Reads the config file at `path` (capped at [`MAX_CONFIG_BYTES`]):
/// its name as errors show it and its text, or the error with the name.
pub(crate) fn read_config(path: &Path) -> Result<(String, String), super::ConfigError> {
    let file = path.display().to_string();
    match read_capped(path, "config", MAX_CONFIG_BYTES) {
        Ok(text) => Ok((file, text)),
        Err(msg) => Err(super::ConfigError {
            file,
            line: 0,
            col: 0,
            msg,
        }),
    }
}
