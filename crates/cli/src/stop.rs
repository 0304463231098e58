//! Stopping a bench on SIGINT, SIGTERM or SIGHUP: the handlers, and the marks of
//! a partial result (a line under a table, `"partial": true` in JSON, the
//! exit status 130 or 143 through [`Interrupted`]).

use std::io::Write;

use anyhow::Result;
use pktsched_runtime::signal;

use crate::output::Stdout;

/// A bench was stopped by a signal after printing what it had.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {}: the results above are partial", .0.name())]
pub(crate) struct Interrupted(pub(crate) signal::Signal);

/// The flag the bench loops poll, with the stop-signal handlers
/// installed (once) so that a signal sets it instead of ending the
/// process.
pub(crate) fn stop_flag() -> Result<&'static std::sync::atomic::AtomicBool> {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let mut res = Ok(());
    INSTALLED.call_once(|| res = signal::install());
    res.map_err(|e| anyhow::anyhow!("cannot install the SIGINT/SIGTERM/SIGHUP handlers: {e}"))?;
    Ok(signal::stop_flag())
}

/// `Err(Interrupted)` when `partial` (the run was stopped by a signal).
pub(crate) fn interrupted(partial: bool) -> Result<()> {
    match signal::received() {
        Some(sig) if partial => Err(Interrupted(sig).into()),
        _ => Ok(()),
    }
}

/// A line saying the table above is partial, when it is.
pub(crate) fn mark_partial(out: &mut Stdout, partial: bool) -> Result<()> {
    if partial {
        let sig = signal::received().map_or("a signal", |s| s.name());
        writeln!(
            out,
            "partial: interrupted by {sig} before every run finished"
        )?;
    }
    Ok(())
}

/// What a partial JSON output adds: `"partial": true` and the signal.
#[derive(serde::Serialize)]
struct PartialMark {
    partial: bool,
    signal: &'static str,
}

fn partial_mark() -> PartialMark {
    PartialMark {
        partial: true,
        signal: signal::received().map_or("", |s| s.name()),
    }
}

/// Pretty JSON of the rows `v`; when `partial`, a last element
/// `{"partial": true, "signal": …}`.
pub(crate) fn write_json<T: serde::Serialize>(
    out: &mut Stdout,
    v: &[T],
    partial: bool,
) -> Result<()> {
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Item<'a, T> {
        Row(&'a T),
        Mark(PartialMark),
    }
    let mut items: Vec<Item<'_, T>> = v.iter().map(Item::Row).collect();
    if partial {
        items.push(Item::Mark(partial_mark()));
    }
    writeln!(out, "{}", serde_json::to_string_pretty(&items)?)?;
    Ok(())
}

/// Pretty JSON of the object `v`; when `partial`, with `"partial": true`
/// and the signal after its fields.
pub(crate) fn write_json_object<T: serde::Serialize>(
    out: &mut Stdout,
    v: &T,
    partial: bool,
) -> Result<()> {
    #[derive(serde::Serialize)]
    struct With<'a, T> {
        #[serde(flatten)]
        v: &'a T,
        #[serde(flatten)]
        mark: Option<PartialMark>,
    }
    let w = With {
        v,
        mark: partial.then(partial_mark),
    };
    writeln!(out, "{}", serde_json::to_string_pretty(&w)?)?;
    Ok(())
}
