//! Files that are not regular files or are huge, and paths that are not
//! UTF-8.

use crate::common::Scratch;
use crate::table::{row, run_table};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

/// Every command that reads a file, given one that is not a regular file
/// of a sane size: a FIFO nobody writes (no hang), a 2 GiB sparse file
/// (no 2 GiB allocation), `/dev/zero`, a directory, a socket. Each is
/// named by what it is and the limit; nothing is read.
#[test]
fn files_that_are_not_regular_or_are_huge() {
    let scratch = Scratch::new("special-files");
    let dir = scratch.path();
    let fifo = dir.join("fifo.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success(),
        "mkfifo"
    );
    let huge = dir.join("huge.toml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let sock = dir.join("sock.toml");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    // A results directory whose point.json is a FIFO.
    let results = dir.join("results");
    std::fs::create_dir_all(results.join("points/p1")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(results.join("points/p1/point.json"))
            .status()
            .unwrap()
            .success()
    );
    let leak = |p: &std::path::Path| &*Box::leak(p.display().to_string().into_boxed_str());
    let (fifo, huge, sock, results) = (leak(&fifo), leak(&huge), leak(&sock), leak(&results));
    let fifo_says: &'static [&'static str] = &["a FIFO (named pipe), not a regular file"];
    let huge_says: &'static [&'static str] = &["is larger than", "at least 2147483648"];
    let mut rows = Vec::new();
    for (path, says) in [
        (fifo, fifo_says),
        (huge, huge_says),
        (sock, &["a socket, not a regular file"][..]),
        ("/dev/zero", &["a device, not a regular file"][..]),
        ("/", &["a directory, not a regular file"][..]),
    ] {
        let leak_args = |a: Vec<&'static str>| &*Box::leak(a.into_boxed_slice());
        for args in [
            vec!["check", path],
            vec!["run", "--config", path],
            vec!["route", "--check", path],
            vec!["route", "--config", path],
            vec!["stats", "--config", path],
            vec!["reload", "--config", path],
            vec!["gen", "--dst", "127.0.0.1", "--flows-file", path],
            vec!["sim", path],
        ] {
            rows.push(row(leak_args(args), 2, says));
        }
    }
    rows.push(row(
        Box::leak(Box::new(["plot", "ingress", results])),
        2,
        &["point.json", "a FIFO (named pipe), not a regular file"],
    ));
    // Control sockets: one others may use (mode 0666), one nobody answers.
    let open_sock = dir.join("open.sock");
    let _open = std::os::unix::net::UnixListener::bind(&open_sock).unwrap();
    std::fs::set_permissions(&open_sock, PermissionsExt::from_mode(0o666)).unwrap();
    let dead_sock = dir.join("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead_sock).unwrap());
    std::fs::set_permissions(&dead_sock, PermissionsExt::from_mode(0o600)).unwrap();
    let (open_sock, dead_sock) = (leak(&open_sock), leak(&dead_sock));
    rows.push(row(
        Box::leak(Box::new(["stats", "--socket", open_sock])),
        2,
        &["has mode 0666: allowed 0600 (owner only)"],
    ));
    rows.push(row(
        Box::leak(Box::new(["reload", "--json", "--socket", dead_sock])),
        2,
        &["cannot reach pktsched on", "Connection refused"],
    ));
    rows.push(row(
        Box::leak(Box::new(["reload", "--prometheus", "--socket", dead_sock])),
        2,
        &["--prometheus", "allowed with `pktsched stats`"],
    ));
    // Two forms asked for: a clap conflict naming both, not one picked.
    rows.push(row(
        Box::leak(Box::new([
            "stats",
            "--json",
            "--prometheus",
            "--socket",
            dead_sock,
        ])),
        2,
        &["--json", "cannot be used with", "--prometheus"],
    ));
    rows.push(row(
        Box::leak(Box::new([
            "stats",
            "--prometheus",
            "--json",
            "--socket",
            dead_sock,
        ])),
        2,
        &["--prometheus", "cannot be used with", "--json"],
    ));
    run_table(&rows);
}

/// Paths that are not UTF-8: named (lossily), never a panic.
#[test]
fn paths_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let scratch = Scratch::new("non-utf8");
    let garbage = scratch
        .path()
        .join(std::ffi::OsStr::from_bytes(b"c\xff.toml"));
    std::fs::write(&garbage, "\u{1}\u{2}garbage").unwrap();
    let missing = scratch
        .path()
        .join(std::ffi::OsStr::from_bytes(b"m\xfe.toml"));
    for (args, says) in [
        (
            vec!["check".into(), garbage.clone().into_os_string()],
            "c\u{fffd}.toml:1:1",
        ),
        (
            vec!["check".into(), missing.clone().into_os_string()],
            "No such file",
        ),
        (
            vec!["route".into(), "--check".into(), garbage.into_os_string()],
            "c\u{fffd}.toml:1:1",
        ),
        (
            vec!["sim".into(), missing.clone().into_os_string()],
            "cannot read scenario",
        ),
        (
            vec!["stats".into(), "--socket".into(), missing.into_os_string()],
            "cannot reach pktsched on",
        ),
    ] {
        let out = Command::new("timeout")
            .args(["-s", "KILL", "60", env!("CARGO_BIN_EXE_pktsched")])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}
