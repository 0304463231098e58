//! From TOML text to a checked [`RunConfig`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use pktsched_core::policy::Policy;
use pktsched_core::{Algorithm, Rate};
use pktsched_io::classify::Match;
use toml::Spanned;

use super::class_rates::{ClassRateRange, class_bursts, class_rates};
use super::matching::match_rule;
use super::raw::{RawClass, RawConfig, RawLink, RawScheduler};
use super::{
    Backend, ClassConfig, ConfigError, ControlConfig, Engine, LinkConfig, MAX_BUFFERS, MAX_BURST,
    MAX_CLASS_LIMIT, MAX_CLASSES, MAX_CONFIG_BYTES, MAX_CPU, MAX_FRAME, MAX_LINK_RATE,
    MAX_OVERHEAD, MAX_RULES, MIN_FRAME, RunConfig, SchedulerChoice, ThreadSched, read_capped,
};

/// Where errors point: the file's name and text.
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
    pub(crate) src: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn err(&self, span: Range<usize>, msg: impl Into<String>) -> ConfigError {
        let pos = self.floor(span.start);
        let before = &self.src[..pos];
        let col = before.rfind('\n').map_or(pos, |i| pos - i - 1) + 1;
        ConfigError {
            file: self.file.to_string(),
            line: self.line_of(&span),
            col,
            msg: msg.into(),
        }
    }

    /// The 1-based line of the file where `span` starts, for messages that
    /// point at a second place (a first definition).
    pub(crate) fn line_of(&self, span: &Range<usize>) -> usize {
        self.src[..self.floor(span.start)].matches('\n').count() + 1
    }

    /// `pos` within the text, at a character boundary.
    fn floor(&self, pos: usize) -> usize {
        let mut pos = pos.min(self.src.len());
        while !self.src.is_char_boundary(pos) {
            pos -= 1;
        }
        pos
    }

    /// A TOML or type error from the deserializer, said with the field's
    /// dotted name, the value, its kind and the accepted forms
    /// ([`super::type_error::describe`]).
    pub(crate) fn toml_err(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span().unwrap_or(0..0);
        let msg = super::type_error::describe(self.src, span.start, e.message());
        self.err(span, msg)
    }

    /// An error when the text holds no TOML at all (empty, blank or only
    /// comments): `needs` says what a config of this kind must have.
    pub(crate) fn refuse_empty(&self, needs: &str) -> Result<(), ConfigError> {
        let blank = self
            .src
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if blank {
            return Err(ConfigError {
                file: self.file.to_string(),
                line: 0,
                col: 0,
                msg: format!("the file holds no settings (empty or only comments): {needs}"),
            });
        }
        Ok(())
    }

    /// `v` as u32 if `min ≤ v ≤ max`, else an error naming the field.
    pub(crate) fn range(
        &self,
        v: &Spanned<i64>,
        field: &str,
        min: u32,
        max: u32,
    ) -> Result<u32, ConfigError> {
        let x = *v.get_ref();
        if x < i64::from(min) || x > i64::from(max) {
            return Err(self.err(
                v.span(),
                format!("{field} = {x} is out of range: allowed {min}..={max}"),
            ));
        }
        Ok(x as u32)
    }
}

/// Reads and checks the config file at `path` (policy paths are relative to
/// its directory).
pub fn load(path: &Path) -> Result<RunConfig, ConfigError> {
    let (file, text) = super::file::read_config(path)?;
    parse(&text, &file, path.parent())
}

/// Checks config text; `dir` is where relative policy paths start.
pub fn parse(src: &str, file: &str, dir: Option<&Path>) -> Result<RunConfig, ConfigError> {
    let cx = Ctx { file, src };
    cx.refuse_empty(
        "a run config needs [link] with ingress, egress and rate, and at least one [[class]]",
    )?;
    let raw: RawConfig = toml::from_str(src).map_err(|e| cx.toml_err(&e))?;
    let link = parse_link(&cx, &raw.link)?;
    let scheduler = parse_scheduler(&cx, raw.scheduler.as_ref(), dir)?;
    let control = parse_control(&cx, raw.control.as_ref(), || {
        PathBuf::from(format!("/run/pktsched-{}.sock", link.egress))
    })?;
    let Some(class_list) = raw.class.as_ref() else {
        return Err(cx.err(
            0..0,
            "no [[class]]: at least one class is needed (one with `default = true` takes \
             frames no rule matches)",
        ));
    };
    let classes = parse_classes(
        &cx,
        class_list,
        &scheduler,
        ClassRateRange::for_link(link.rate, link.wire_len(link.max_frame)),
    )?;
    let mut cfg = RunConfig {
        file: file.to_string(),
        link,
        scheduler,
        control,
        classes,
    };
    cfg.link.prio_burst = super::prio_credit::prio_burst(&cx, raw.link.get_ref(), &cfg)?;
    if cfg.link.backend == Backend::Xdp
        && let Some(class) = cfg.vlan_class()
    {
        let at = raw
            .link
            .get_ref()
            .backend
            .as_ref()
            .map_or(0..0, |b| b.span());
        return Err(cx.err(at, format!("link.backend = \"xdp\" with class {class:?} matching on vlan: {XDP_NO_VLAN}; allowed backend = \"packet\" or \"auto\" (which takes AF_PACKET for such a config)")));
    }
    Ok(cfg)
}

/// Why `vlan` rules and AF_XDP do not go together.
pub(crate) const XDP_NO_VLAN: &str = "XDP sees only a frame's bytes, and a VLAN tag that \
     the NIC or kernel keeps in the frame's metadata (rx VLAN offload; a VLAN device over \
     veth) is not among them, so the rule would never match; AF_PACKET puts the tag back";

/// Interface names: what the kernel accepts (1..=15 bytes, no `/`, no
/// whitespace, not `.` or `..`).
pub(crate) fn interface(
    cx: &Ctx<'_>,
    v: &Spanned<String>,
    field: &str,
) -> Result<String, ConfigError> {
    let s = v.get_ref();
    let ok = !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && !s.contains(|c: char| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if !ok {
        return Err(cx.err(
            v.span(),
            format!(
                "{field} = {s:?} is not an interface name: allowed 1 to 15 bytes without `/`, \
                 `:` or whitespace"
            ),
        ));
    }
    Ok(s.clone())
}

fn parse_link(cx: &Ctx<'_>, raw: &Spanned<RawLink>) -> Result<LinkConfig, ConfigError> {
    let l = raw.get_ref();
    let ingress = interface(cx, &l.ingress, "link.ingress")?;
    let egress = interface(cx, &l.egress, "link.egress")?;
    if ingress == egress {
        return Err(cx.err(
            l.egress.span(),
            format!("link.egress = {egress:?} is also link.ingress: they must differ"),
        ));
    }
    let rate = Rate::parse(l.rate.get_ref())
        .map_err(|e| cx.err(l.rate.span(), format!("link.rate: {e}")))?;
    if rate > MAX_LINK_RATE {
        return Err(cx.err(
            l.rate.span(),
            format!("link.rate = {rate} is too fast: allowed up to {MAX_LINK_RATE}"),
        ));
    }
    let opt = |v: &Option<Spanned<i64>>, field, min, max, dflt| match v {
        Some(v) => cx.range(v, field, min, max),
        None => Ok(dflt),
    };
    let overhead = opt(&l.overhead, "link.overhead", 0, MAX_OVERHEAD, 0)?;
    let mpu = opt(&l.mpu, "link.mpu", 0, MAX_OVERHEAD, 0)?;
    let max_frame = opt(&l.max_frame, "link.max_frame", MIN_FRAME, MAX_FRAME, 1514)?;
    let buffers = opt(&l.buffers, "link.buffers", 64, MAX_BUFFERS, 16384)?;
    let burst = opt(
        &l.burst,
        "link.burst",
        0,
        MAX_BURST,
        (max_frame + overhead).max(mpu),
    )?;
    let backend = match &l.backend {
        None => Backend::Auto,
        Some(b) => match b.get_ref().as_str() {
            "auto" => Backend::Auto,
            "xdp" => Backend::Xdp,
            "packet" => Backend::Packet,
            other => {
                return Err(cx.err(
                    b.span(),
                    format!("link.backend = {other:?} is unknown: allowed auto, xdp, packet"),
                ));
            }
        },
    };
    let engine = match &l.engine {
        None => Engine::RunToCompletion,
        Some(e) => Engine::ALL
            .into_iter()
            .find(|x| x.name() == e.get_ref())
            .ok_or_else(|| {
                cx.err(
                    e.span(),
                    format!(
                        "link.engine = {:?} is unknown: allowed run-to-completion, pspat",
                        e.get_ref()
                    ),
                )
            })?,
    };
    let cpu = l
        .cpu
        .as_ref()
        .map(|c| cx.range(c, "link.cpu", 0, MAX_CPU))
        .transpose()?;
    let sched = match &l.sched {
        None => ThreadSched::Other,
        Some(s) => ThreadSched::parse(s.get_ref())
            .map_err(|e| cx.err(s.span(), format!("link.sched = {e}")))?,
    };
    Ok(LinkConfig {
        ingress,
        egress,
        rate,
        overhead,
        mpu,
        max_frame,
        backend,
        promiscuous: l.promiscuous.unwrap_or(true),
        buffers,
        burst,
        // Set once the classes are known (`prio_credit::prio_burst`).
        prio_burst: 0,
        engine,
        cpu,
        sched,
        busy_poll: super::threads::parse_busy_poll(cx, l.busy_poll.as_ref(), engine)?,
    })
}

fn parse_scheduler(
    cx: &Ctx<'_>,
    raw: Option<&Spanned<RawScheduler>>,
    dir: Option<&Path>,
) -> Result<SchedulerChoice, ConfigError> {
    let Some(raw) = raw else {
        return Ok(SchedulerChoice::Algorithm(Algorithm::Drr));
    };
    let s = raw.get_ref();
    match (&s.algorithm, &s.policy) {
        (Some(_), Some(p)) => Err(cx.err(
            p.span(),
            "scheduler.policy and scheduler.algorithm are both given: allowed one of them",
        )),
        (Some(a), None) => Algorithm::parse(a.get_ref())
            .map(SchedulerChoice::Algorithm)
            .map_err(|e| cx.err(a.span(), format!("scheduler.algorithm: {e}"))),
        (None, Some(p)) => load_policy(cx, p, dir),
        (None, None) => Ok(SchedulerChoice::Algorithm(Algorithm::Drr)),
    }
}

/// A built-in policy name, or a TOML/DOT file relative to the config.
fn load_policy(
    cx: &Ctx<'_>,
    p: &Spanned<String>,
    dir: Option<&Path>,
) -> Result<SchedulerChoice, ConfigError> {
    let name = p.get_ref();
    let looks_like_file = name.contains('/') || name.contains('.');
    let policy = if looks_like_file {
        let mut path = PathBuf::from(name);
        if let (Some(d), true) = (dir, path.is_relative()) {
            path = d.join(path);
        }
        let text = read_capped(&path, "policy", MAX_CONFIG_BYTES)
            .map_err(|e| cx.err(p.span(), format!("scheduler.policy: {e}")))?;
        Policy::from_named(name, &text)
    } else {
        Policy::builtin(name)
    }
    .map_err(|e| cx.err(p.span(), format!("scheduler.policy {name:?}: {e}")))?;
    Ok(SchedulerChoice::Policy {
        source: name.clone(),
        policy: Box::new(policy),
    })
}

/// `[control]`: the socket (`default_socket` when not given) and the
/// optional Prometheus address. Shared by `pktsched run` and `route`
/// configs.
pub(crate) fn parse_control(
    cx: &Ctx<'_>,
    raw: Option<&super::raw::RawControl>,
    default_socket: impl Fn() -> PathBuf,
) -> Result<ControlConfig, ConfigError> {
    let Some(c) = raw else {
        return Ok(ControlConfig {
            socket: default_socket(),
            prometheus: None,
        });
    };
    let socket = match &c.socket {
        Some(s) if s.get_ref().is_empty() || s.get_ref().len() > 100 => {
            return Err(cx.err(
                s.span(),
                format!(
                    "control.socket = {:?}: allowed a path of 1 to 100 bytes (sun_path)",
                    s.get_ref()
                ),
            ));
        }
        Some(s) => PathBuf::from(s.get_ref()),
        None => default_socket(),
    };
    let prometheus = match &c.prometheus {
        None => None,
        Some(p) => {
            let text = p.get_ref();
            let addr = text.parse::<SocketAddr>().or_else(|_| {
                text.parse::<u16>()
                    .map(|port| ([127, 0, 0, 1], port).into())
            });
            Some(addr.map_err(|_| {
                cx.err(
                    p.span(),
                    format!(
                        "control.prometheus = {text:?}: allowed ADDRESS:PORT (e.g. \
                         \"127.0.0.1:9465\") or a port (bound to 127.0.0.1)"
                    ),
                )
            })?)
        }
    };
    Ok(ControlConfig { socket, prometheus })
}

fn parse_classes(
    cx: &Ctx<'_>,
    list: &Spanned<Vec<Spanned<RawClass>>>,
    scheduler: &SchedulerChoice,
    range: ClassRateRange,
) -> Result<Vec<ClassConfig>, ConfigError> {
    if list.get_ref().len() > MAX_CLASSES {
        return Err(cx.err(
            list.span(),
            format!(
                "{} classes: allowed at most {MAX_CLASSES}",
                list.get_ref().len()
            ),
        ));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut classes = Vec::with_capacity(list.get_ref().len());
    let mut rules = 0usize;
    let mut default: Option<&Spanned<RawClass>> = None;
    for c in list.get_ref() {
        let raw = c.get_ref();
        let name = raw.name.get_ref();
        if let Some(why) = super::class_name_problem(name) {
            return Err(cx.err(raw.name.span(), why));
        }
        if let Some(first) = seen.insert(name, cx.line_of(&raw.name.span())) {
            return Err(cx.err(
                raw.name.span(),
                format!(
                    "class {name:?} is defined twice (first at line {first}): names must be \
                     unique"
                ),
            ));
        }
        let class = parse_class(cx, raw, scheduler, range)?;
        rules += class.rules.len();
        if rules > MAX_RULES {
            return Err(cx.err(
                c.span(),
                format!("more than {MAX_RULES} match rules over all classes"),
            ));
        }
        if class.default {
            if let Some(d) = default {
                return Err(cx.err(
                    c.span(),
                    format!(
                        "class {name:?} and class {:?} both have default = true: allowed one",
                        d.get_ref().name.get_ref()
                    ),
                ));
            }
            default = Some(c);
        }
        classes.push(class);
    }
    if default.is_none() {
        return Err(cx.err(
            list.span(),
            "no class has default = true: one class must take the frames no rule matches",
        ));
    }
    shadowed_rules(cx, list, &classes)?;
    unreachable_classes(cx, list, &classes)?;
    prio_levels(cx, list.get_ref(), scheduler, &classes)?;
    Ok(classes)
}

/// The `prio` algorithm alone has the core's default number of levels;
/// with a class `rate` or `ceil` the classes hang below a policy `prio`
/// node of 1024 levels (`plan::class_rates_policy`), which `parse_class`
/// allows. A level past the algorithm's is refused here, at its line.
/// `raws[i]` is the class `classes[i]` was parsed from (`pktsched
/// route`'s `[[egress.class]]` entries are checked the same way).
pub(crate) fn prio_levels(
    cx: &Ctx<'_>,
    raws: &[Spanned<RawClass>],
    scheduler: &SchedulerChoice,
    classes: &[ClassConfig],
) -> Result<(), ConfigError> {
    let rated = classes.iter().any(|c| c.rate.is_some() || c.ceil.is_some());
    if rated || !matches!(scheduler, SchedulerChoice::Algorithm(Algorithm::Prio)) {
        return Ok(());
    }
    let levels = pktsched_core::SchedParams::default().prio_levels;
    for (c, raw) in classes.iter().zip(raws) {
        if let Some(p) = &raw.get_ref().prio
            && c.prio >= levels
        {
            return Err(cx.err(
                p.span(),
                format!(
                    "class {:?}: prio = {} is out of range for algorithm = \"prio\": allowed \
                     0..={} (0..=1023 when a class has a rate or ceil)",
                    c.name,
                    c.prio,
                    levels - 1
                ),
            ));
        }
    }
    Ok(())
}

/// A class no frame can reach (not the default, no rule) and a rule
/// that matches every frame outside the default class (the default then
/// gets none): refused, naming the class and what would do.
fn unreachable_classes(
    cx: &Ctx<'_>,
    list: &Spanned<Vec<Spanned<RawClass>>>,
    classes: &[ClassConfig],
) -> Result<(), ConfigError> {
    let default = classes
        .iter()
        .find(|c| c.default)
        .map_or("", |c| c.name.as_str());
    for (j, class) in classes.iter().enumerate().filter(|(_, c)| !c.default) {
        let span = list.get_ref()[j].span();
        if class.rules.is_empty() {
            return Err(cx.err(
                span,
                format!(
                    "class {:?} has no match rules and is not the default class ({default:?}): \
                     no frame can reach it; allowed: match = [{{ ... }}] on it, or default = \
                     true on it instead",
                    class.name
                ),
            ));
        }
        if let Some(k) = class.rules.iter().position(|r| *r == Match::default()) {
            return Err(cx.err(
                span,
                format!(
                    "class {:?}: match rule {} names no field, so it matches every frame and \
                     the default class {default:?} gets none; allowed: at least one of src, \
                     dst, proto, sport, dport, dscp, vlan, or default = true on this class",
                    class.name,
                    k + 1
                ),
            ));
        }
    }
    Ok(())
}

/// A rule that an earlier rule of another class covers can never match
/// (first match wins): refused, naming both.
fn shadowed_rules(
    cx: &Ctx<'_>,
    list: &Spanned<Vec<Spanned<RawClass>>>,
    classes: &[ClassConfig],
) -> Result<(), ConfigError> {
    for (j, later) in classes.iter().enumerate() {
        for (k, rule) in later.rules.iter().enumerate() {
            let earlier = classes[..j]
                .iter()
                .find_map(|c| c.rules.iter().position(|r| r.covers(rule)).map(|m| (c, m)));
            if let Some((c, m)) = earlier {
                return Err(cx.err(
                    list.get_ref()[j].span(),
                    format!(
                        "class {:?}: match rule {} can never match: class {:?}'s rule {} comes \
                         first and covers it (first match wins; put the narrower rule first)",
                        later.name,
                        k + 1,
                        c.name,
                        m + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn parse_class(
    cx: &Ctx<'_>,
    raw: &RawClass,
    scheduler: &SchedulerChoice,
    range: ClassRateRange,
) -> Result<ClassConfig, ConfigError> {
    let name = raw.name.get_ref().clone();
    let (rate, ceil) = class_rates(cx, raw, scheduler, range)?;
    let (burst, cburst) = class_bursts(cx, raw, rate, ceil)?;
    let field = |f: &str| format!("class {name:?}: {f}");
    let weight = match &raw.weight {
        Some(w) => cx.range(w, &field("weight"), 1, 65536)?,
        None => 1,
    };
    let prio = match &raw.prio {
        Some(p) => cx.range(p, &field("prio"), 0, 1023)?,
        None => 0,
    };
    let limit = match &raw.limit {
        Some(l) => cx.range(l, &field("limit"), 1, MAX_CLASS_LIMIT)?,
        None => 1024,
    };
    let node = match (&raw.node, scheduler) {
        (None, _) => None,
        (Some(n), SchedulerChoice::Algorithm(a)) => {
            return Err(cx.err(
                n.span(),
                format!(
                    "{}: node = {:?} needs scheduler.policy; scheduler.algorithm = {:?} has no \
                     nodes",
                    field("node"),
                    n.get_ref(),
                    a.name()
                ),
            ));
        }
        (Some(n), SchedulerChoice::Policy { policy, source }) => {
            if policy.node(n.get_ref()).is_none() {
                return Err(cx.err(
                    n.span(),
                    format!(
                        "{}: node {:?} is not in policy {source:?}",
                        field("node"),
                        n.get_ref()
                    ),
                ));
            }
            Some(n.get_ref().clone())
        }
    };
    let mut rules = Vec::new();
    if let Some(list) = &raw.matches {
        for m in list.get_ref() {
            rules.push(match_rule(cx, m, &name)?);
        }
    }
    Ok(ClassConfig {
        name,
        weight,
        prio,
        limit,
        rate,
        ceil,
        burst,
        cburst,
        node,
        default: raw.default.as_ref().is_some_and(|d| *d.get_ref()),
        rules,
    })
}
