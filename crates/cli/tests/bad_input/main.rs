//! The bad-input table, in the spirit of the kernel's tdc: one row per
//! case — a command line (and the files it reads), where its output goes,
//! the exit status it must end with and the words its message must hold.
//!
//! Every row runs under `timeout` and `prlimit` (wall-clock and address
//! space limits), so a hang or an unbounded allocation fails the row
//! instead of the machine, and any panic fails it too. Add a row for every
//! bug fixed.
//!
//! One test binary, a module per area: `table` holds the row type and
//! its runner, the others the rows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod bench;
mod calc;
mod cli;
mod config;
mod control;
mod files;
mod policy;
mod route;
mod shaper;
mod sim;
mod table;
mod traffic;
