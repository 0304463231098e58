//! Reading a config file with a size cap, so a path to `/dev/zero` or a
//! huge log is an error naming the cap rather than an unbounded allocation.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest config or policy file accepted.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads `path` as UTF-8 text of at most `cap` bytes. Only a regular file
/// is read: a directory, FIFO, socket or device is refused by what it is
/// (opened without blocking, so a FIFO with no writer cannot hang the
/// read, and `/dev/zero` is never read). The error names what the file
/// is, the path and the cap.
pub fn read_capped(path: &Path, what: &str, cap: u64) -> Result<String, String> {
    let shown = path.display();
    let file = open_nonblocking(path, what, cap)?;
    regular_within(&file, path, what, cap)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(what, &shown, bytes.len() as u64, cap));
    }
    String::from_utf8(bytes).map_err(|_| format!("{what} `{shown}` is not UTF-8 text"))
}

/// Refuses `file` (opened from `path`) unless it is a regular file of at
/// most `cap` bytes.
fn regular_within(file: &std::fs::File, path: &Path, what: &str, cap: u64) -> Result<(), String> {
    let shown = path.display();
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {what} `{shown}`: {e}"))?;
    if not_regular(&meta.file_type()).is_some() {
        return Err(not_regular_message(path, what, &meta.file_type(), cap));
    }
    if meta.len() > cap {
        return Err(too_large(what, &shown, meta.len(), cap));
    }
    Ok(())
}

/// Opens `path` for reading: anything but a regular file is refused by
/// what it is before it is opened (opening a device can act: a watchdog,
/// a tty); the open itself does not block (a FIFO swapped in after the
/// look opens at once and is refused on the opened file) and never takes
/// a controlling terminal.
fn open_nonblocking(path: &Path, what: &str, cap: u64) -> Result<std::fs::File, String> {
    let cannot = |e: std::io::Error| format!("cannot read {what} `{}`: {e}", path.display());
    let kind = std::fs::metadata(path).map_err(cannot)?.file_type();
    if not_regular(&kind).is_some() {
        return Err(not_regular_message(path, what, &kind, cap));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(cannot)
}

fn not_regular_message(path: &Path, what: &str, t: &std::fs::FileType, cap: u64) -> String {
    format!(
        "cannot read {what} `{}`: it is {}, not a regular file: allowed a regular file of at \
         most {cap} bytes",
        path.display(),
        not_regular(t).unwrap_or("not a regular file")
    )
}

fn too_large(what: &str, shown: &dyn std::fmt::Display, len: u64, cap: u64) -> String {
    format!(
        "{what} `{shown}` is larger than {cap} bytes (at least {len}): allowed at most {cap} \
         bytes for a {what} file"
    )
}

/// What a file that is not a regular file is (`None` for a regular one).
fn not_regular(t: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else {
        Some("not a regular file")
    }
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
