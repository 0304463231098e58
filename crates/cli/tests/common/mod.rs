//! Shared by the CLI's integration tests.

#[path = "../../../io/tests/common/untested.rs"]
mod untested;
use std::path::{Path, PathBuf};
use std::process::Child;
#[allow(unused_imports)]
pub(crate) use untested::{skipped, untested};

/// A scratch directory, unique per process and name, removed when dropped
/// (also when the test fails), so tests leave nothing in the temp directory.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("pktsched-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    #[allow(dead_code)] // not every test file uses each helper
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `body` to `name` inside the directory; returns its path.
    #[allow(dead_code)] // not every test file uses each helper
    pub(crate) fn file(&self, name: &str, body: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, body).expect("write scratch file");
        p.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Kills the child (a shaper, a sink) if the test fails before it ends.
#[allow(dead_code)] // not every test file uses each helper
pub(crate) struct Guard(pub(crate) Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
