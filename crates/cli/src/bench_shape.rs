//! `pktsched bench shape`: closed-loop EDT shaping benchmark, structures
//! side by side in one run.

use anyhow::{Result, bail};
use pktsched_bench::shape::{self, ShapeOptions};

use crate::output::Stdout;

/// Arguments of `bench shape`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShapeArgs {
    /// Numbers of flows, comma separated.
    #[arg(long, default_value = "1,4,16,1000,100000")]
    flows: String,
    /// Per-flow rates, comma separated, cycled over the flows.
    #[arg(long, default_value = "10gbit")]
    rate: String,
    /// Packet length in bytes.
    #[arg(long, default_value = "1500")]
    len: String,
    /// Packets released per run (per flow count and structure).
    #[arg(short = 'n', long, default_value = "2000000")]
    pkts: String,
    /// Packets each flow keeps queued in the shaper.
    #[arg(long, default_value = "4")]
    outstanding: String,
    /// Slot width of the single wheel and the cFFS, ns (power of two).
    #[arg(long, default_value = "64")]
    gran: String,
    /// Finest slot of the MLTW, ns (power of two).
    #[arg(long, default_value = "1")]
    mltw_gran: String,
    /// Memory cap for each structure's tables, bytes.
    #[arg(long, default_value = "1073741824")]
    max_memory: String,
    /// Start each flow at a pseudo-random phase within its first packet gap
    /// (seeded, deterministic) instead of all at t = 0, so flows are not
    /// synchronised: the case where batching across flows is hard.
    #[arg(long)]
    stagger: bool,
    /// Structures: mltw, wheel, cffs.
    #[arg(long, default_value = "mltw,wheel,cffs")]
    structs: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw `PREFIX-ns.svg` (ns per packet vs flows) and
    /// `PREFIX-wakeups.svg` (wake-ups per second vs flows), one line per
    /// structure.
    #[arg(long, value_name = "PREFIX")]
    plot: Option<String>,
}

impl ShapeArgs {
    fn options(&self) -> Result<ShapeOptions> {
        Ok(ShapeOptions {
            flows: shape::parse_flows(&self.flows)?,
            rates: shape::parse_rates(&self.rate)?,
            rate_text: self.rate.clone(),
            len: shape::LEN.parse_as(&self.len)?,
            pkts: shape::PKTS.parse(&self.pkts)?,
            outstanding: shape::OUTSTANDING.parse(&self.outstanding)?,
            gran: shape::GRAN.parse(&self.gran)?,
            mltw_gran: shape::MLTW_GRAN.parse(&self.mltw_gran)?,
            max_memory: shape::MAX_MEMORY.parse(&self.max_memory)?,
            stagger: self.stagger,
            structs: shape::parse_structs(&self.structs)?,
        })
    }
}

pub(crate) fn run(a: &ShapeArgs, out: &mut Stdout) -> Result<()> {
    let o = a.options()?;
    if let Some(prefix) = &a.plot {
        crate::output::check_output_dir(
            "--plot",
            std::path::Path::new(prefix),
            "the plots are PREFIX-*.svg",
        )?;
    }
    let rep = shape::run(&o, crate::stop::stop_flag()?)?;
    let failed: Vec<String> = rep
        .failed()
        .map(|f| format!("{} at {} flows: {}", f.structure, f.flows, f.error))
        .collect();
    for f in &failed {
        eprintln!("{f}");
    }
    if let Some(prefix) = &a.plot {
        for f in shape::plot(prefix, &o, &rep)? {
            eprintln!("wrote {f}");
        }
    }
    if a.json {
        crate::stop::write_json(out, &rep.rows, rep.partial)?;
    } else {
        shape::write_table(out, &rep.rows)?;
        crate::stop::mark_partial(out, rep.partial)?;
    }
    crate::stop::interrupted(rep.partial)?;
    if !failed.is_empty() {
        bail!(
            "{} of {} rows could not be measured (reasons above)",
            failed.len(),
            rep.rows.len()
        );
    }
    Ok(())
}
