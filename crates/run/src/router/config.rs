//! The `pktsched route` config (see `examples/route.toml`): parsed from
//! TOML, every error with file, line, column, field, value and what is
//! allowed; [`RouteConfig`]'s `Display` prints it back normalised
//! (`pktsched route --check`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use pktsched_core::ingress::{
    DEFAULT_DEVICE_BUDGET, IngressConfig, MAX_CLASSES, MAX_DEVICE_BUDGET, RingPlan, Strategy,
};
use pktsched_io::classify::{IpPrefix, Match, Rule};
use toml::Spanned;

use super::cost::{COST_FORMS, Cost};
use super::egress_config::{EgressSection, parse_egress};
use super::raw::{RawRoute, RawRouteClass, RawRouteConfig, RawRouter};
use crate::config::{Backend, ConfigError, ControlConfig, Ctx, interface, match_rule};
use crate::traffic::ring_out::parse_mac;

/// Most routes in a config.
pub const MAX_ROUTES: usize = 65_536;
/// Most static neighbours.
pub const MAX_NEIGHBOURS: usize = 65_536;
/// Receive ring slots per class: the range accepted.
pub const RING_FRAMES: (u32, u32) = (16, 65_536);
/// Buffers in the pool: the range accepted.
pub const POOL_FRAMES: (u32, u32) = (64, 1 << 20);
/// Most `busy_poll` microseconds.
pub const MAX_BUSY_POLL_US: u32 = 10_000;

/// `[router]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterSection {
    /// The interface whose frames are classified into per-class rings.
    pub ingress: String,
    /// The other interface (one plain ring).
    pub egress: String,
    /// Packet I/O.
    pub backend: Backend,
    /// How the class rings are polled.
    pub strategy: Strategy,
    /// Packets one poll round may take.
    pub device_budget: u32,
    /// Receive ring slots per class.
    pub ring_frames: u32,
    /// Frame buffers shared by every ring.
    pub pool_frames: u32,
    /// Per-packet processing cost.
    pub cost: Cost,
    /// `SO_BUSY_POLL` µs on the receive sockets (0: off).
    pub busy_poll: u32,
    /// The IPv4 addresses of the ingress and the egress, the source of
    /// ICMP time-exceeded messages sent out of them (`None`: none sent).
    pub addresses: [Option<Ipv4Addr>; 2],
    /// The IPv6 addresses of the ingress and the egress, the source of
    /// ICMPv6 time-exceeded messages sent out of them (`None`: none sent).
    pub addresses6: [Option<Ipv6Addr>; 2],
}

/// One `[[class]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteClass {
    /// Unique name.
    pub name: String,
    /// Packets one visit of its ring may take (used by ll-rr, ll-wfq).
    pub budget: u32,
    /// Match rules (any of them); empty for the default class.
    pub rules: Vec<Match>,
}

/// One `[[route]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteEntry {
    /// Destination prefix.
    pub prefix: IpPrefix,
    /// Next hop; `None`: the destination is on the link.
    pub via: Option<IpAddr>,
    /// Outgoing interface: the router's ingress or egress.
    pub dev: String,
}

/// A checked route config.
#[derive(Clone, Debug)]
pub struct RouteConfig {
    /// The file it came from, as named.
    pub file: String,
    /// `[router]`.
    pub router: RouterSection,
    /// Classes in ring order (class 0 is visited first).
    pub classes: Vec<RouteClass>,
    /// The class frames no rule matches go to (the one without `match`).
    pub default_class: usize,
    /// Static routes.
    pub routes: Vec<RouteEntry>,
    /// Static neighbours: IP → MAC.
    pub neighbours: Vec<(IpAddr, [u8; 6])>,
    /// `[control]`.
    pub control: ControlConfig,
    /// `[egress]`: the egress link's rate and scheduler (`None`: frames
    /// leave in the order they were forwarded).
    pub egress: Option<EgressSection>,
}

impl RouteConfig {
    /// The validated ring plan (strategy, budgets, class → ring).
    pub fn plan(&self) -> RingPlan {
        // parse() built this plan once already; it cannot fail now.
        self.ingress()
            .plan()
            .unwrap_or_else(|_| IngressConfig::sq(1).plan().expect("sq(1) is valid"))
    }

    fn ingress(&self) -> IngressConfig {
        let budgets = match self.router.strategy {
            Strategy::Sq | Strategy::Rr => Vec::new(),
            Strategy::LlRr | Strategy::LlWfq => self.classes.iter().map(|c| c.budget).collect(),
        };
        IngressConfig {
            strategy: self.router.strategy,
            classes: self.classes.len(),
            budgets,
            device_budget: self.router.device_budget,
        }
    }

    /// The classifier rules, class by class.
    pub fn rules(&self) -> Vec<Rule> {
        let mut out = Vec::new();
        for (i, c) in self.classes.iter().enumerate() {
            out.extend(c.rules.iter().map(|m| Rule {
                class: i as u16,
                matches: m.clone(),
            }));
        }
        out
    }
}

/// Reads and checks the config at `path`.
pub fn load(path: &Path) -> Result<RouteConfig, ConfigError> {
    let (file, text) = crate::config::read_config(path)?;
    parse(&text, &file)
}

/// Checks config text.
pub fn parse(src: &str, file: &str) -> Result<RouteConfig, ConfigError> {
    let cx = Ctx { file, src };
    cx.refuse_empty(
        "a route config needs [router] with ingress and egress, at least one [[class]] and \
         one [[route]]",
    )?;
    let raw: RawRouteConfig = toml::from_str(src).map_err(|e| cx.toml_err(&e))?;
    let router = parse_router(&cx, &raw.router)?;
    let Some(list) = raw.class.as_ref() else {
        return Err(cx.err(
            0..0,
            "no [[class]]: at least one class is needed (the one without `match` takes \
             frames no rule matches)",
        ));
    };
    let (classes, default_class) = parse_classes(&cx, list, &router)?;
    let neighbours = super::table::parse_neighbours(&cx, raw.neighbour.as_deref())?;
    let routes = parse_routes(&cx, raw.route.as_deref(), &router, &neighbours)?;
    let control = crate::config::parse_control(&cx, raw.control.as_ref(), default_socket)?;
    let egress = raw
        .egress
        .as_ref()
        .map(|e| parse_egress(&cx, e, &classes, (router.pool_frames, router.device_budget)))
        .transpose()?;
    let cfg = RouteConfig {
        file: file.to_string(),
        router,
        classes,
        default_class,
        routes,
        neighbours,
        control,
        egress,
    };
    cfg.ingress().plan().map_err(|e| {
        cx.err(
            raw.router.span(),
            format!("[router] strategy and budgets: {e}"),
        )
    })?;
    if cfg.router.backend == Backend::Xdp
        && let Some(class) = cfg.vlan_class()
    {
        let at = raw
            .router
            .get_ref()
            .backend
            .as_ref()
            .map_or(0..0, |b| b.span());
        return Err(cx.err(
            at,
            format!(
                "router.backend = \"xdp\" with class {class:?} matching on vlan: {}; allowed \
                 backend = \"packet\" or \"auto\" (which takes AF_PACKET for such a config)",
                crate::config::XDP_NO_VLAN
            ),
        ));
    }
    Ok(cfg)
}

impl RouteConfig {
    /// The first class with a rule on a VLAN id, if any (AF_XDP cannot
    /// see tags held in metadata: such a config takes AF_PACKET).
    pub fn vlan_class(&self) -> Option<&str> {
        crate::config::first_vlan_class(
            self.classes
                .iter()
                .map(|c| (c.name.as_str(), c.rules.as_slice())),
        )
    }
}

fn opt_range(
    cx: &Ctx<'_>,
    v: &Option<Spanned<i64>>,
    field: &str,
    (min, max): (u32, u32),
    default: u32,
) -> Result<u32, ConfigError> {
    v.as_ref()
        .map_or(Ok(default), |v| cx.range(v, field, min, max))
}

fn parse_router(cx: &Ctx<'_>, raw: &Spanned<RawRouter>) -> Result<RouterSection, ConfigError> {
    let r = raw.get_ref();
    let ingress = interface(cx, &r.ingress, "router.ingress")?;
    let egress = interface(cx, &r.egress, "router.egress")?;
    if ingress == egress {
        return Err(cx.err(
            r.egress.span(),
            format!("router.egress = {egress:?} is also router.ingress: give two interfaces"),
        ));
    }
    let backend = match &r.backend {
        None => Backend::Auto,
        Some(b) => [Backend::Auto, Backend::Xdp, Backend::Packet]
            .into_iter()
            .find(|k| k.name() == b.get_ref().as_str())
            .ok_or_else(|| {
                cx.err(
                    b.span(),
                    format!(
                        "router.backend = {:?}: allowed auto, xdp, packet",
                        b.get_ref()
                    ),
                )
            })?,
    };
    let strategy = match &r.strategy {
        None => Strategy::LlWfq,
        Some(s) => s
            .get_ref()
            .parse::<Strategy>()
            .map_err(|e| cx.err(s.span(), format!("router.strategy: {e}")))?,
    };
    let device_budget = opt_range(
        cx,
        &r.device_budget,
        "router.device_budget",
        (1, MAX_DEVICE_BUDGET),
        DEFAULT_DEVICE_BUDGET,
    )?;
    let ring_frames = opt_range(cx, &r.ring_frames, "router.ring_frames", RING_FRAMES, 256)?;
    let pool_frames = opt_range(cx, &r.pool_frames, "router.pool_frames", POOL_FRAMES, 4096)?;
    let cost = match &r.cost {
        None => Cost::None,
        Some(c) => Cost::parse(c.get_ref()).map_err(|e| {
            cx.err(
                c.span(),
                format!("router.cost = {:?}: {e}; allowed {COST_FORMS}", c.get_ref()),
            )
        })?,
    };
    let busy_poll = opt_range(
        cx,
        &r.busy_poll,
        "router.busy_poll",
        (0, MAX_BUSY_POLL_US),
        0,
    )?;
    let address =
        |v: &Option<Spanned<String>>, field: &str| -> Result<Option<Ipv4Addr>, ConfigError> {
            v.as_ref()
                .map(|a| match a.get_ref().parse::<Ipv4Addr>() {
                    // The source of the router's ICMP errors: one host.
                    Ok(ip) if !ip.is_multicast() && !ip.is_broadcast() && !ip.is_unspecified() => {
                        Ok(ip)
                    }
                    _ => Err(cx.err(
                        a.span(),
                        format!(
                            "{field} = {:?}: allowed a unicast IPv4 address (not 0.0.0.0, \
                             255.255.255.255 or 224.0.0.0/4)",
                            a.get_ref()
                        ),
                    )),
                })
                .transpose()
        };
    let addresses = [
        address(&r.ingress_address, "router.ingress_address")?,
        address(&r.egress_address, "router.egress_address")?,
    ];
    let address6 =
        |v: &Option<Spanned<String>>, field: &str| -> Result<Option<Ipv6Addr>, ConfigError> {
            v.as_ref()
                .map(|a| match a.get_ref().parse::<Ipv6Addr>() {
                    Ok(ip) if !ip.is_multicast() && !ip.is_unspecified() => Ok(ip),
                    _ => Err(cx.err(
                        a.span(),
                        format!(
                            "{field} = {:?}: allowed a unicast IPv6 address",
                            a.get_ref()
                        ),
                    )),
                })
                .transpose()
        };
    let addresses6 = [
        address6(&r.ingress_address6, "router.ingress_address6")?,
        address6(&r.egress_address6, "router.egress_address6")?,
    ];
    Ok(RouterSection {
        addresses,
        addresses6,
        ingress,
        egress,
        backend,
        strategy,
        device_budget,
        ring_frames,
        pool_frames,
        cost,
        busy_poll,
    })
}

fn parse_classes(
    cx: &Ctx<'_>,
    list: &Spanned<Vec<Spanned<RawRouteClass>>>,
    router: &RouterSection,
) -> Result<(Vec<RouteClass>, usize), ConfigError> {
    let n = list.get_ref().len();
    if n == 0 || n > MAX_CLASSES {
        return Err(cx.err(
            list.span(),
            format!("{n} classes: allowed 1..={MAX_CLASSES}"),
        ));
    }
    let default_budget = (router.device_budget / n as u32).max(1);
    let mut names = HashMap::new();
    let mut classes = Vec::with_capacity(n);
    let mut default = None;
    for c in list.get_ref() {
        let raw = c.get_ref();
        let name = raw.name.get_ref().clone();
        if let Some(why) = crate::config::class_name_problem(&name) {
            return Err(cx.err(raw.name.span(), why));
        }
        if name == "reverse" {
            return Err(cx.err(
                raw.name.span(),
                "class name \"reverse\": reserved for the egress → ingress direction's \
                 counters; allowed any other name"
                    .to_string(),
            ));
        }
        if let Some(first) = names.insert(name.clone(), cx.line_of(&raw.name.span())) {
            return Err(cx.err(
                raw.name.span(),
                format!(
                    "class {name:?} is defined twice (first at line {first}): names must be \
                     unique"
                ),
            ));
        }
        let budget = opt_range(
            cx,
            &raw.budget,
            &format!("class {name:?}: budget"),
            (1, router.device_budget),
            default_budget,
        )?;
        let rules = match &raw.matches {
            None => {
                if let Some(first) = default {
                    let first: &RouteClass = &classes[first];
                    return Err(cx.err(
                        c.span(),
                        format!(
                            "class {name:?} has no `match`, nor has class {:?}: exactly one \
                             class (the default) goes without",
                            first.name
                        ),
                    ));
                }
                default = Some(classes.len());
                Vec::new()
            }
            Some(ms) if ms.get_ref().is_empty() => {
                return Err(cx.err(
                    ms.span(),
                    format!("class {name:?}: match = []: give rules, or leave `match` out for the default class"),
                ));
            }
            Some(ms) => ms
                .get_ref()
                .iter()
                .map(|m| match_rule(cx, m, &name))
                .collect::<Result<_, _>>()?,
        };
        classes.push(RouteClass {
            name,
            budget,
            rules,
        });
    }
    let default = default.ok_or_else(|| {
        cx.err(
            list.span(),
            "every class has `match`: leave it out on one class, the default for frames no \
             rule matches",
        )
    })?;
    Ok((classes, default))
}

fn parse_routes(
    cx: &Ctx<'_>,
    list: Option<&[Spanned<RawRoute>]>,
    router: &RouterSection,
    neighbours: &[(IpAddr, [u8; 6])],
) -> Result<Vec<RouteEntry>, ConfigError> {
    let list = list.unwrap_or(&[]);
    if list.is_empty() || list.len() > MAX_ROUTES {
        let span = list.first().map_or(0..0, |r| r.span());
        return Err(cx.err(
            span,
            format!(
                "{} [[route]] entries: allowed 1..={MAX_ROUTES} (without routes nothing is forwarded)",
                list.len()
            ),
        ));
    }
    let mut seen = HashMap::new();
    let mut out = Vec::with_capacity(list.len());
    for r in list {
        let raw = r.get_ref();
        let text = raw.prefix.get_ref();
        let prefix: IpPrefix = text.parse().map_err(|e| {
            cx.err(
                raw.prefix.span(),
                format!("route.prefix = {text:?}: {e} (allowed ADDRESS/LEN with no host bits, IPv4 or IPv6)"),
            )
        })?;
        if let Some(first) = seen.insert(prefix, cx.line_of(&raw.prefix.span())) {
            return Err(cx.err(
                raw.prefix.span(),
                format!("route.prefix = {text:?} is given twice (first at line {first})"),
            ));
        }
        let dev = raw.dev.get_ref();
        if *dev != router.ingress && *dev != router.egress {
            return Err(cx.err(
                raw.dev.span(),
                format!(
                    "route.dev = {dev:?}: allowed the router's interfaces, {:?} or {:?}",
                    router.ingress, router.egress
                ),
            ));
        }
        let via = match &raw.via {
            None => None,
            Some(v) => Some(super::table::via(cx, v, &prefix, neighbours)?),
        };
        out.push(RouteEntry {
            prefix,
            via,
            dev: dev.clone(),
        });
    }
    Ok(out)
}

/// Where the control socket goes by default.
pub(crate) fn default_socket() -> PathBuf {
    PathBuf::from("/run/pktsched-route.sock")
}

/// Parses a neighbour's MAC: one station's (unicast, not all zeros); the
/// error names the field.
pub(crate) fn mac(cx: &Ctx<'_>, v: &Spanned<String>, field: &str) -> Result<[u8; 6], ConfigError> {
    parse_mac(v.get_ref())
        .filter(|m| m[0] & 1 == 0 && *m != [0; 6])
        .ok_or_else(|| {
            cx.err(
                v.span(),
                format!(
                    "{field} = {:?}: allowed a unicast MAC address aa:bb:cc:dd:ee:ff (the \
                     first byte even, not all zeros)",
                    v.get_ref()
                ),
            )
        })
}
