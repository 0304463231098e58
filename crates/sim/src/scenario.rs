//! Scenario files (TOML) and their validation.
//!
//! ```toml
//! name = "example"
//! link = "10gbit"            # Rate::parse syntax
//! algorithm = "qfq"          # fifo, prio, rr, drr, wf2q, qfq, or "policy"
//! # policy = "hpfq.toml"     # with algorithm = "policy": a policy tree
//!                            # (TOML, or DOT if the name ends in .dot/.gv)
//! duration = "20ms"          # arrivals stop here (ns, us, ms, s)
//! seed = 1
//! drain = true               # serve what is queued after `duration` (default)
//! # trace = "trace.csv"      # rows `time_ns,flow,len` for flows with source "trace"
//!
//! [pspat]                    # optional PSPAT arbiter/dispatcher model
//! arbiter = "1us"            # Δ_A
//! dispatcher = "1us"         # Δ_D
//!
//! [[flows]]
//! name = "victim"
//! weight = 50
//! size = 1500                                # or { min = 64, max = 1500 }
//!                                            # or { mix = [[64, 7], [1500, 3]] }
//! source = { type = "cbr", rate = "10mbit" } # greedy, cbr, poisson, onoff, trace
//! max_delay = "200us"                        # optional delay target: a packet
//!                                            # waiting longer is a violation
//!
//! [[flows]]
//! count = 100                                # 100 identical flows
//! source = { type = "greedy" }
//! # node = "gold.web"                        # policy only: the node the
//! # prio = 0                                 # flows attach to, their prio
//! ```
//!
//! Every error names the line and column, the field, the value and the
//! allowed range or forms (a value of the wrong type too:
//! `crate::toml_error`).

use std::ops::Range;
use std::path::{Path, PathBuf};

use pktsched_core::sched::{Algorithm, ConfigError};
use pktsched_core::units::parse_duration_ps;
use pktsched_core::{FlowConfig, Rate};
use serde::Deserialize;
use toml::Spanned;

use crate::input_file::{MAX_CONFIG_BYTES, MAX_TRACE_BYTES, read_capped};
use crate::{FlowSpec, Pspat, SimConfig, SizeDist, SourceSpec};

/// Largest packet the simulator accepts (the fluid reference's fixed point
/// is proven for lengths up to 2^16 bytes).
pub const MAX_PKT_LEN: u32 = 1 << 16;
/// Largest sum of weights (fixed-point range of the fluid reference).
pub const MAX_WEIGHT_SUM: u64 = 1 << 32;
/// Fastest link or source rate: the simulator's clock counts picoseconds,
/// and above this a packet's transmission lasts only a few of them, so
/// rounding to whole picoseconds would decide the results.
pub const MAX_RATE: Rate = Rate::bps(1_000_000_000_000);
/// Largest number of flows in one scenario.
pub const MAX_FLOWS: u64 = 1 << 20;

/// A scenario error with its position in the file (`FILE:LINE:COL: msg`,
/// or `FILE: msg` when no position is known).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {msg}", position(*.line, *.col))]
pub struct ScenarioError {
    /// File name as given.
    pub file: String,
    /// 1-based line (0: no position, e.g. the file cannot be read).
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong: field, value, allowed range.
    pub msg: String,
}

/// `:LINE:COL`, or nothing for line 0 (no position).
fn position(line: usize, col: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{col}")
    }
}

/// 1-based line and column of byte offset `pos` in `src`.
pub use pktsched_core::toml_error::line_col;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<Spanned<String>>,
    link: Spanned<String>,
    algorithm: Spanned<String>,
    duration: Spanned<String>,
    #[serde(default)]
    seed: u64,
    #[serde(default = "yes")]
    drain: bool,
    trace: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    pspat: Option<RawPspat>,
    flows: Spanned<Vec<Spanned<RawFlow>>>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPspat {
    arbiter: Spanned<String>,
    dispatcher: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Option<Spanned<String>>,
    #[serde(default = "one")]
    count: Spanned<i64>,
    #[serde(default = "one")]
    weight: Spanned<i64>,
    #[serde(default = "default_size")]
    size: Spanned<RawSize>,
    limit: Option<Spanned<i64>>,
    #[serde(default)]
    source: Option<Spanned<RawSource>>,
    node: Option<Spanned<String>>,
    prio: Option<Spanned<i64>>,
    max_delay: Option<Spanned<String>>,
}

fn one() -> Spanned<i64> {
    Spanned::new(0..0, 1)
}
fn default_size() -> Spanned<RawSize> {
    Spanned::new(0..0, RawSize::Fixed(1500))
}

/// A packet size: a number, `{ min, max }` or `{ mix = [...] }`.
/// Deserialized by hand (not as an untagged enum, whose error names no
/// field): an unknown key in the table (`{ min = 64, mx = 1500 }`) is named
/// with the keys allowed, a lone `min` or `max` names the one missing, and
/// `mix` next to `min`/`max` is refused.
#[derive(Debug)]
enum RawSize {
    Fixed(i64),
    Uniform(RawUniform),
    Mix(RawMix),
}

#[derive(Debug)]
struct RawUniform {
    min: i64,
    max: i64,
}

#[derive(Debug)]
struct RawMix {
    mix: Vec<(i64, i64)>,
}

/// The keys a size table may have.
const SIZE_KEYS: &[&str] = &["min", "max", "mix"];

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawSize, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

struct SizeVisitor;

impl<'de> serde::de::Visitor<'de> for SizeVisitor {
    type Value = RawSize;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a length in bytes or a table with `min` and `max`, or `mix`")
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawSize, E> {
        Ok(RawSize::Fixed(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawSize, E> {
        i64::try_from(v)
            .map(RawSize::Fixed)
            .map_err(|_| E::custom(format!("{v} is above every length allowed")))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawSize, A::Error> {
        use serde::de::Error;
        let (mut min, mut max, mut mix) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "min" => min = Some(map.next_value::<i64>()?),
                "max" => max = Some(map.next_value::<i64>()?),
                "mix" => mix = Some(map.next_value::<Vec<(i64, i64)>>()?),
                other => return Err(A::Error::unknown_field(other, SIZE_KEYS)),
            }
        }
        match (min, max, mix) {
            (None, None, Some(mix)) => Ok(RawSize::Mix(RawMix { mix })),
            (Some(min), Some(max), None) => Ok(RawSize::Uniform(RawUniform { min, max })),
            (_, _, Some(_)) => Err(A::Error::custom(
                "`mix` with `min` or `max`: give `{ min, max }` or `{ mix }`, not both",
            )),
            (Some(_), None, None) => Err(A::Error::missing_field("max")),
            (None, Some(_), None) => Err(A::Error::missing_field("min")),
            (None, None, None) => Err(A::Error::custom("an empty table")),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum RawSource {
    /// `{}`, not a unit variant: an internally tagged unit variant
    /// ignores other keys (`{ type = "greedy", rate = "1mbit" }` would
    /// pass silently).
    Greedy {},
    Cbr {
        rate: String,
    },
    Poisson {
        rate: String,
    },
    Onoff {
        rate: String,
        on: String,
        off: String,
        #[serde(default)]
        fixed: bool,
    },
    Trace {},
}

struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, msg: impl Into<String>) -> ScenarioError {
        let (line, col) = line_col(self.src, span.start);
        ScenarioError {
            file: self.file.to_string(),
            line,
            col,
            msg: msg.into(),
        }
    }
    fn range(
        &self,
        span: Range<usize>,
        field: &str,
        v: i64,
        min: i64,
        max: i64,
    ) -> Result<i64, ScenarioError> {
        if v < min || v > max {
            return Err(self.err(
                span,
                format!("{field} = {v} is out of range: allowed {min}..={max}"),
            ));
        }
        Ok(v)
    }
}

/// Loads a scenario file.
pub fn load(path: &Path) -> Result<SimConfig, ScenarioError> {
    let file = path.display().to_string();
    let src = read_capped(path, "scenario", MAX_CONFIG_BYTES).map_err(|e| ScenarioError {
        file: file.clone(),
        line: 0,
        col: 0,
        msg: e.to_string(),
    })?;
    parse(&src, &file, path.parent())
}

/// Parses a scenario from a string. `dir` resolves a relative `trace` path.
pub fn parse(src: &str, file: &str, dir: Option<&Path>) -> Result<SimConfig, ScenarioError> {
    let cx = Ctx { file, src };
    let raw: RawScenario = toml::from_str(src).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        cx.err(
            span.clone(),
            crate::toml_error::describe(src, span.start, e.message()),
        )
    })?;
    if let Some(n) = &raw.name
        && let Some(problem) = group_name_problem(n.get_ref())
    {
        return Err(cx.err(n.span(), format!("name = {problem}")));
    }
    let rate = link_rate(&cx, &raw.link)?;
    let (algorithm, policy) = algorithm_and_policy(&cx, &raw, dir)?;
    let duration_ps = parse_duration_ps(raw.duration.get_ref())
        .map_err(|e| cx.err(raw.duration.span(), format!("duration: {e}")))?;
    if duration_ps == 0 {
        return Err(cx.err(
            raw.duration.span(),
            "duration = 0 is out of range: must be > 0",
        ));
    }
    let pspat = match &raw.pspat {
        None => None,
        Some(p) => Some(pspat_model(&cx, p)?),
    };
    if raw.flows.get_ref().is_empty() {
        return Err(cx.err(
            raw.flows.span(),
            "flows: at least one [[flows]] entry is needed",
        ));
    }
    let lim = match &policy {
        Some((pol, _)) => pktsched_core::Scheduler::<u32>::limits(
            &pktsched_core::policy::PolicySched::<u32>::new(pol),
        ),
        None => algorithm_limits(algorithm),
    };
    let table = flow_table(&cx, &raw.flows, &lim, policy.as_ref().map(|(pol, _)| pol))?;
    let mut cfg = SimConfig {
        name: raw
            .name
            .as_ref()
            .map_or_else(|| file.to_string(), |n| n.get_ref().clone()),
        rate,
        algorithm,
        duration_ps,
        seed: raw.seed,
        drain: raw.drain,
        pspat,
        policy: policy.map(|(pol, p)| crate::SimPolicy {
            file: p.get_ref().clone(),
            policy: std::sync::Arc::new(pol),
            node: table.node,
            prio: table.prio,
        }),
        flows: table.flows,
        groups: table.groups,
    };
    if let Some(t) = &raw.trace {
        attach_trace(&cx, t, dir, &mut cfg)?;
    } else if let Some(i) = cfg
        .flows
        .iter()
        .position(|f| matches!(f.source, SourceSpec::Trace(_)))
    {
        return Err(cx.err(
            table.spans[i].1.clone(),
            "source = \"trace\" needs a top-level `trace = \"file.csv\"`",
        ));
    }
    check_clock_range(&cx, &raw, &cfg)?;
    // Ask the algorithm itself (its own ranges and weight-sum rules).
    if let Err((i, e)) = crate::engine::check_with_algorithm(&cfg) {
        let span = match &e {
            ConfigError::OutOfRange { field, .. } if *field == "weight" => table.spans[i].0.clone(),
            _ => raw.flows.get_ref()[cfg.flows[i].group as usize].span(),
        };
        return Err(cx.err(span, format!("flow {i}: {e}")));
    }
    Ok(cfg)
}

/// The link rate: `Rate::parse` syntax, at most [`MAX_RATE`].
fn link_rate(cx: &Ctx<'_>, link: &Spanned<String>) -> Result<Rate, ScenarioError> {
    let rate =
        Rate::parse(link.get_ref()).map_err(|e| cx.err(link.span(), format!("link: {e}")))?;
    if rate > MAX_RATE {
        return Err(cx.err(
            link.span(),
            format!(
                "link = {:?} is out of range: allowed 1bit..={MAX_RATE} (the simulator counts picoseconds; a 64-byte packet takes 512 ps at 1 Tbit/s)",
                link.get_ref()
            ),
        ));
    }
    Ok(rate)
}

/// A loaded policy tree and the scenario key that named its file.
type LoadedPolicy<'a> = (pktsched_core::policy::Policy, &'a Spanned<String>);

/// The algorithm, and the policy tree when it is `policy` (which needs a
/// `policy` file, and no `[pspat]`: the PSPAT model needs a
/// work-conserving algorithm).
fn algorithm_and_policy<'a>(
    cx: &Ctx<'_>,
    raw: &'a RawScenario,
    dir: Option<&Path>,
) -> Result<(Algorithm, Option<LoadedPolicy<'a>>), ScenarioError> {
    let is_policy = raw.algorithm.get_ref() == "policy";
    let algorithm = if is_policy {
        // Not used: the policy schedules the link.
        Algorithm::Fifo
    } else {
        Algorithm::parse(raw.algorithm.get_ref()).map_err(|e| {
            cx.err(
                raw.algorithm.span(),
                format!("algorithm: {e}, or `policy` with `policy = \"file.toml\"`"),
            )
        })?
    };
    let policy = match (&raw.policy, is_policy) {
        (None, false) => None,
        (Some(p), false) => {
            return Err(cx.err(p.span(), "policy: only used with algorithm = \"policy\""));
        }
        (None, true) => {
            return Err(cx.err(
                raw.algorithm.span(),
                "algorithm = \"policy\" needs a top-level `policy = \"file.toml\"` (or a .dot file)",
            ));
        }
        (Some(p), true) => Some((load_policy(cx, p, dir)?, p)),
    };
    if let (Some(_), Some(ps)) = (&policy, &raw.pspat) {
        return Err(cx.err(
            ps.arbiter.span(),
            "pspat: the PSPAT model needs a work-conserving algorithm; it is not available with algorithm = \"policy\"",
        ));
    }
    Ok((algorithm, policy))
}

/// The `[pspat]` table: two durations above zero.
fn pspat_model(cx: &Ctx<'_>, p: &RawPspat) -> Result<Pspat, ScenarioError> {
    let a = parse_duration_ps(p.arbiter.get_ref())
        .map_err(|e| cx.err(p.arbiter.span(), format!("pspat.arbiter: {e}")))?;
    let d = parse_duration_ps(p.dispatcher.get_ref())
        .map_err(|e| cx.err(p.dispatcher.span(), format!("pspat.dispatcher: {e}")))?;
    if a == 0 {
        return Err(cx.err(
            p.arbiter.span(),
            "pspat.arbiter = 0 is out of range: must be > 0",
        ));
    }
    if d == 0 {
        return Err(cx.err(
            p.dispatcher.span(),
            "pspat.dispatcher = 0 is out of range: must be > 0",
        ));
    }
    Ok(Pspat {
        arbiter_ps: a,
        dispatcher_ps: d,
    })
}

/// Every flow of the scenario, one `[[flows]]` entry after another.
struct FlowTable {
    flows: Vec<FlowSpec>,
    groups: Vec<crate::Group>,
    /// Per flow: its policy node (see [`crate::SimPolicy::node`]).
    node: Vec<Option<usize>>,
    /// Per flow: its policy prio.
    prio: Vec<u32>,
    /// Per flow: where its entry's weight and source are, for the errors
    /// found later.
    spans: Vec<(Range<usize>, Range<usize>)>,
}

/// One `[[flows]]` entry, checked on its own.
struct FlowGroup {
    name: String,
    count: u32,
    spec: FlowSpec,
    source_span: Range<usize>,
    node: Option<usize>,
    prio: u32,
    max_delay_ps: Option<u64>,
}

/// Expands the `[[flows]]` entries into flows; names are unique, and the
/// number of flows and the sum of weights are within `lim`.
fn flow_table(
    cx: &Ctx<'_>,
    raw_flows: &Spanned<Vec<Spanned<RawFlow>>>,
    lim: &pktsched_core::Limits,
    policy: Option<&pktsched_core::policy::Policy>,
) -> Result<FlowTable, ScenarioError> {
    let mut table = FlowTable {
        flows: Vec::new(),
        groups: Vec::new(),
        node: Vec::new(),
        prio: Vec::new(),
        spans: Vec::new(),
    };
    let mut group_index = std::collections::HashMap::new();
    let mut wsum: u64 = 0;
    for (gi, f) in raw_flows.get_ref().iter().enumerate() {
        let g = flow_group(cx, gi, f, lim, policy)?;
        let fspan = f.span();
        let f = f.get_ref();
        if let Some(&other) = group_index.get(&g.name) {
            let span = f.name.as_ref().map_or(fspan, |n| n.span());
            return Err(cx.err(
                span,
                format!(
                    "flows[{gi}].name = {:?} is already the name of flows[{other}]; group names must be unique (unnamed groups are called g<index>)",
                    g.name
                ),
            ));
        }
        let count = u64::from(g.count);
        wsum += u64::from(g.spec.weight) * count;
        let max_flows = MAX_FLOWS.min(lim.max_flows);
        if table.flows.len() as u64 + count > max_flows {
            return Err(cx.err(
                f.count.span(),
                format!(
                    "flows[{gi}].count: {} flows in all is out of range: allowed 1..={max_flows}",
                    table.flows.len() as u64 + count,
                ),
            ));
        }
        group_index.insert(g.name.clone(), gi);
        table.groups.push(crate::Group {
            name: g.name,
            first: table.flows.len() as u32,
            count: g.count,
            max_delay_ps: g.max_delay_ps,
        });
        for _ in 0..g.count {
            table.flows.push(g.spec.clone());
            table.spans.push((f.weight.span(), g.source_span.clone()));
            table.node.push(g.node);
            table.prio.push(g.prio);
        }
    }
    let wmax = lim.max_weight_sum.min(MAX_WEIGHT_SUM);
    if wsum > wmax {
        return Err(cx.err(
            raw_flows.span(),
            format!(
                "sum of weights = {wsum} is out of range for {}: allowed 1..={wmax}",
                lim.alg
            ),
        ));
    }
    Ok(table)
}

/// One `[[flows]]` entry: its fields in range (for the algorithm's limits
/// `lim`), its source, its policy node and prio, and its name.
fn flow_group(
    cx: &Ctx<'_>,
    gi: usize,
    entry: &Spanned<RawFlow>,
    lim: &pktsched_core::Limits,
    policy: Option<&pktsched_core::policy::Policy>,
) -> Result<FlowGroup, ScenarioError> {
    let fspan = entry.span();
    let f = entry.get_ref();
    let count = cx.range(
        f.count.span(),
        &format!("flows[{gi}].count"),
        *f.count.get_ref(),
        1,
        MAX_FLOWS as i64,
    )?;
    let weight = cx.range(
        f.weight.span(),
        &format!("flows[{gi}].weight"),
        *f.weight.get_ref(),
        1,
        lim.max_weight.min(u32::MAX as u64) as i64,
    )? as u32;
    let sspan = if f.size.span().is_empty() {
        fspan.clone()
    } else {
        f.size.span()
    };
    let size = size_dist(cx, sspan.clone(), gi, f.size.get_ref())?;
    if u64::from(size.max()) > lim.max_len {
        return Err(cx.err(
            sspan,
            format!(
                "flows[{gi}].size: largest packet {} is out of range for {}: allowed 1..={}",
                size.max(),
                lim.alg,
                lim.max_len
            ),
        ));
    }
    let limit = match &f.limit {
        None => FlowConfig::DEFAULT_LIMIT,
        Some(l) => cx.range(
            l.span(),
            &format!("flows[{gi}].limit"),
            *l.get_ref(),
            1,
            lim.max_limit.min(u32::MAX as u64) as i64,
        )? as u32,
    };
    let (source, source_span) = match &f.source {
        None => (SourceSpec::Greedy, fspan.clone()),
        Some(s) => (source_spec(cx, s.span(), gi, s.get_ref())?, s.span()),
    };
    let (node, prio) = policy_attachment(cx, gi, f, policy)?;
    let max_delay_ps = match &f.max_delay {
        None => None,
        Some(d) => Some(
            parse_duration_ps(d.get_ref())
                .map_err(|e| cx.err(d.span(), format!("flows[{gi}].max_delay: {e}")))?,
        ),
    };
    let name = match &f.name {
        Some(n) => {
            if let Some(problem) = group_name_problem(n.get_ref()) {
                return Err(cx.err(n.span(), format!("flows[{gi}].name = {problem}")));
            }
            n.get_ref().clone()
        }
        None => format!("g{gi}"),
    };
    Ok(FlowGroup {
        name,
        count: count as u32,
        spec: FlowSpec {
            group: gi as u32,
            weight,
            size,
            source,
            limit,
        },
        source_span,
        node,
        prio,
        max_delay_ps,
    })
}

/// The policy node and prio of an entry's flows: only with a policy; the
/// node must be one of its nodes.
fn policy_attachment(
    cx: &Ctx<'_>,
    gi: usize,
    f: &RawFlow,
    policy: Option<&pktsched_core::policy::Policy>,
) -> Result<(Option<usize>, u32), ScenarioError> {
    let node = match (&f.node, policy) {
        (None, _) => None,
        (Some(n), None) => {
            return Err(cx.err(
                n.span(),
                format!("flows[{gi}].node: only used with algorithm = \"policy\""),
            ));
        }
        (Some(n), Some(pol)) => Some(pol.node(n.get_ref()).ok_or_else(|| {
            let names: Vec<&str> = pol.nodes().iter().map(|s| s.name.as_str()).collect();
            cx.err(
                n.span(),
                format!(
                    "flows[{gi}].node = {:?} is not a node of the policy; nodes: {}",
                    n.get_ref(),
                    names.join(", ")
                ),
            )
        })?),
    };
    let prio = match &f.prio {
        None => 0,
        Some(p) if policy.is_none() => {
            return Err(cx.err(
                p.span(),
                format!("flows[{gi}].prio: only used with algorithm = \"policy\""),
            ));
        }
        Some(p) => cx.range(
            p.span(),
            &format!("flows[{gi}].prio"),
            *p.get_ref(),
            0,
            i64::from(u32::MAX),
        )? as u32,
    };
    Ok((node, prio))
}

/// Longest group name, in bytes.
pub const MAX_GROUP_NAME: usize = 64;

/// Why `name` cannot name a `[[flows]]` group (or the scenario), if it
/// cannot: 1 to [`MAX_GROUP_NAME`] bytes without whitespace, control
/// characters, `"` or `\` (the rule of the run config's class names:
/// names go into the report table, JSON and plot legends as they are).
/// The message starts with the value, quoted (cut when long), and says
/// what is allowed.
pub fn group_name_problem(name: &str) -> Option<String> {
    let bad = |c: char| c.is_whitespace() || c.is_control() || c == '"' || c == '\\';
    if !name.is_empty() && name.len() <= MAX_GROUP_NAME && !name.contains(bad) {
        return None;
    }
    Some(format!(
        "{} ({} bytes): allowed 1 to {MAX_GROUP_NAME} bytes without whitespace, control \
         characters, `\"` or `\\`",
        quoted(name),
        name.len()
    ))
}

/// `text` quoted with `{:?}` (escapes shown, not sent), cut after
/// [`MAX_GROUP_NAME`] bytes at a character boundary so a megabyte of
/// input does not come back as a megabyte of message.
fn quoted(text: &str) -> String {
    if text.len() <= MAX_GROUP_NAME {
        return format!("{text:?}");
    }
    let mut end = MAX_GROUP_NAME;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}…", &text[..end])
}

/// Reads the trace file `t` names and gives its rows to the flows with
/// source "trace"; errors name the trace file and its line.
fn attach_trace(
    cx: &Ctx<'_>,
    t: &Spanned<String>,
    dir: Option<&Path>,
    cfg: &mut SimConfig,
) -> Result<(), ScenarioError> {
    let (p, text) = read_relative(cx, t, dir, "trace")?;
    let tf = p.display().to_string();
    let rows = crate::source::parse_trace(&text).map_err(|(line, msg)| ScenarioError {
        file: tf.clone(),
        line,
        col: 1,
        msg,
    })?;
    for (line, time_ns, flow, len) in rows {
        let row_err = |msg: String| ScenarioError {
            file: tf.clone(),
            line,
            col: 1,
            msg,
        };
        let flow_count = cfg.flows.len();
        let Some(fs) = cfg.flows.get_mut(flow as usize) else {
            return Err(row_err(format!(
                "flow = {flow} is out of range: allowed 0..={}",
                flow_count - 1
            )));
        };
        if !(1..=MAX_PKT_LEN).contains(&len) {
            return Err(row_err(format!(
                "len = {len} is out of range: allowed 1..={MAX_PKT_LEN}"
            )));
        }
        match &mut fs.source {
            SourceSpec::Trace(v) => {
                if v.last()
                    .is_some_and(|&(t0, _)| t0 > time_ns.saturating_mul(1000))
                {
                    return Err(row_err(format!(
                        "time_ns = {time_ns} goes back in time for flow {flow}; rows of one flow must be in time order"
                    )));
                }
                v.push((time_ns.saturating_mul(1000), len));
            }
            _ => {
                return Err(row_err(format!(
                    "flow = {flow} does not have source = {{ type = \"trace\" }}"
                )));
            }
        }
        if u64::from(len) > u64::from(fs.size.max()) {
            fs.size = SizeDist::Fixed(len.max(fs.size.max()));
        }
    }
    Ok(())
}

/// The clock counts picoseconds in a u64 (about 213 days). Bounds the
/// latest event: the end of arrivals, draining every queue at the link
/// rate, and a few PSPAT periods; refuses what could overflow.
fn check_clock_range(
    cx: &Ctx<'_>,
    raw: &RawScenario,
    cfg: &SimConfig,
) -> Result<(), ScenarioError> {
    let bps = u128::from(cfg.rate.as_bps());
    let drain_ps: u128 = cfg
        .flows
        .iter()
        .map(|f| u128::from(f.limit) * u128::from(f.size.max()) * 8 * 1_000_000_000_000 / bps + 1)
        .sum();
    let pspat_ps = cfg.pspat.as_ref().map_or(0, |p| {
        8 * (u128::from(p.arbiter_ps) + u128::from(p.dispatcher_ps))
    });
    let latest = u128::from(cfg.duration_ps) + drain_ps + pspat_ps;
    if latest > u128::from(u64::MAX / 2) {
        return Err(cx.err(
            raw.duration.span(),
            format!(
                "duration = {:?} with link = {:?} and these queue limits could take the virtual clock past {} s (2^63 ps): shorten the duration, raise the link rate or lower the queue limits",
                raw.duration.get_ref(),
                raw.link.get_ref(),
                u64::MAX / 2 / 1_000_000_000_000
            ),
        ));
    }
    Ok(())
}

/// Reads and validates the policy file `p` names (relative to the
/// scenario's directory): DOT if it ends in `.dot` or `.gv`, else TOML.
fn load_policy(
    cx: &Ctx<'_>,
    p: &Spanned<String>,
    dir: Option<&Path>,
) -> Result<pktsched_core::policy::Policy, ScenarioError> {
    let (path, text) = read_relative(cx, p, dir, "policy")?;
    pktsched_core::policy::Policy::from_named(p.get_ref(), &text)
        .map_err(|e| cx.err(p.span(), format!("policy `{}`: {e}", path.display())))
}

/// Reads the file the key `field` names, relative to the scenario's
/// directory; an error points at the key.
fn read_relative(
    cx: &Ctx<'_>,
    name: &Spanned<String>,
    dir: Option<&Path>,
    field: &'static str,
) -> Result<(PathBuf, String), ScenarioError> {
    let path = PathBuf::from(name.get_ref());
    let path = match dir {
        Some(d) if path.is_relative() => d.join(path),
        _ => path,
    };
    let cap = if field == "trace" {
        MAX_TRACE_BYTES
    } else {
        MAX_CONFIG_BYTES
    };
    match read_capped(&path, field, cap) {
        Ok(text) => Ok((path, text)),
        Err(e) => Err(cx.err(name.span(), format!("{field}: {e}"))),
    }
}

fn algorithm_limits(a: Algorithm) -> pktsched_core::Limits {
    crate::engine::limits_of(a)
}

fn size_dist(
    cx: &Ctx<'_>,
    span: Range<usize>,
    gi: usize,
    s: &RawSize,
) -> Result<SizeDist, ScenarioError> {
    let len = |v: i64| {
        cx.range(
            span.clone(),
            &format!("flows[{gi}].size"),
            v,
            1,
            i64::from(MAX_PKT_LEN),
        )
        .map(|v| v as u32)
    };
    Ok(match s {
        RawSize::Fixed(l) => SizeDist::Fixed(len(*l)?),
        RawSize::Uniform(RawUniform { min, max }) => {
            let (a, b) = (len(*min)?, len(*max)?);
            if a > b {
                return Err(cx.err(
                    span,
                    format!("flows[{gi}].size: min = {a} is above max = {b}"),
                ));
            }
            SizeDist::Uniform(a, b)
        }
        RawSize::Mix(RawMix { mix }) => {
            if mix.is_empty() {
                return Err(cx.err(
                    span,
                    format!("flows[{gi}].size.mix is empty: give [[len, weight], ...]"),
                ));
            }
            let mut v = Vec::new();
            for &(l, w) in mix {
                let l = len(l)?;
                let w = cx.range(
                    span.clone(),
                    &format!("flows[{gi}].size.mix weight"),
                    w,
                    1,
                    u32::MAX as i64,
                )? as u32;
                v.push((l, w));
            }
            SizeDist::Mix(v)
        }
    })
}

fn source_spec(
    cx: &Ctx<'_>,
    span: Range<usize>,
    gi: usize,
    s: &RawSource,
) -> Result<SourceSpec, ScenarioError> {
    let rate = |r: &str| {
        let v = Rate::parse(r)
            .map_err(|e| cx.err(span.clone(), format!("flows[{gi}].source.rate: {e}")))?;
        if v > MAX_RATE {
            return Err(cx.err(
                span.clone(),
                format!(
                    "flows[{gi}].source.rate = {r:?} is out of range: allowed 1bit..={MAX_RATE}"
                ),
            ));
        }
        Ok(v)
    };
    let dur = |f: &str, d: &str| {
        parse_duration_ps(d)
            .map_err(|e| cx.err(span.clone(), format!("flows[{gi}].source.{f}: {e}")))
            .and_then(|v| {
                if v == 0 {
                    Err(cx.err(
                        span.clone(),
                        format!("flows[{gi}].source.{f} = {d} is out of range: must be > 0"),
                    ))
                } else {
                    Ok(v)
                }
            })
    };
    Ok(match s {
        RawSource::Greedy {} => SourceSpec::Greedy,
        RawSource::Cbr { rate: r } => SourceSpec::Cbr { rate: rate(r)? },
        RawSource::Poisson { rate: r } => SourceSpec::Poisson { rate: rate(r)? },
        RawSource::Onoff {
            rate: r,
            on,
            off,
            fixed,
        } => SourceSpec::OnOff {
            rate: rate(r)?,
            on_ps: dur("on", on)?,
            off_ps: dur("off", off)?,
            exponential: !fixed,
        },
        RawSource::Trace {} => SourceSpec::Trace(Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
