//! A progress bar for timed runs: drawn on a terminal only (hidden when
//! stderr is a pipe or a file, so logs stay clean), in thousandths.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar for a run of `length`; hidden off a terminal or under a second.
pub(crate) fn bar(length: Duration) -> ProgressBar {
    if !std::io::stderr().is_terminal() || length < Duration::from_secs(1) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1000);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {percent}% (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
