//! `pktsched plot ingress`: reads the ingress experiment's points
//! (`RESULTS/points/*/{point,gen,sink,route,router}.json`), writes the
//! CSV, JSON, charts and targets, and prints the bound table and the
//! targets. The reading, the arithmetic, the drawing and the verdicts are
//! `pktsched_bench::ingress`'s; this is the shell around them.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use pktsched_bench::ingress::{self, IngressError, LeftOut, report};

use crate::output::Stdout;

/// Names the points left out on stderr.
fn say_left_out(left_out: &[LeftOut]) {
    for l in left_out {
        eprintln!("pktsched plot ingress: left out {l}");
    }
}

pub(crate) fn run(results: &Path, out_dir: &Path, out: &mut Stdout) -> Result<()> {
    let points = match ingress::read_points(results) {
        Ok(p) => p,
        Err(IngressError::NoPoints { path, left_out }) => {
            say_left_out(&left_out);
            return Err(IngressError::NoPoints {
                path,
                left_out: Vec::new(),
            }
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    say_left_out(&points.left_out);
    let rows = &points.rows;
    report::write_results(rows, out_dir)?;
    let svgs = report::charts(rows, out_dir)?;
    write!(out, "{}", report::bound_table(rows))?;
    let targets = report::write_targets(rows, out_dir)?;
    write!(out, "\n{targets}")?;
    writeln!(
        out,
        "{} points; wrote ingress-results.csv, ingress-results.json, ingress-targets.md and {} in {}",
        rows.len(),
        svgs.join(", "),
        out_dir.display()
    )?;
    Ok(())
}
