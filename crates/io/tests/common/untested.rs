//! One way for every test crate to say a check went unmeasured here
//! (included by path from the io, run, cli and runtime test crates, so
//! the rule lives once).
#![allow(dead_code)]

/// Says on stderr that a check went unmeasured on this machine (the
/// environment, not pktsched, kept it from running), and appends the same
/// line to the file `PKTSCHED_UNTESTED_LOG` names, if set: `ci/test.sh`
/// sets it and prints the file at the end, so a skipped check is seen in
/// CI's output and not only in a passing test's hidden stderr.
pub(crate) fn untested(test: &str, what: &str) {
    eprintln!("UNTESTED ({test}): {what}");
    let Some(path) = std::env::var_os("PKTSCHED_UNTESTED_LOG") else {
        return;
    };
    use std::io::Write;
    let line = format!("{test}: {}\n", what.replace('\n', "\n    "));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("could not append to PKTSCHED_UNTESTED_LOG {path:?}: {e}");
    }
}

/// [`untested`] for the running test as a whole: the test is named after
/// its thread (libtest names each test's thread after the test).
pub(crate) fn skipped(why: &str) {
    let thread = std::thread::current();
    untested(
        thread.name().unwrap_or("a test"),
        &format!("skipped: {why}"),
    );
}
