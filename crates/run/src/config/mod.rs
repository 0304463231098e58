//! The `pktsched run` config: what is read from TOML, checked, and printed
//! back normalised by `pktsched check`.
//!
//! ```toml
//! [link]
//! ingress = "d0"        # frames received here are classified and scheduled
//! egress = "d1"         # ... and sent here; d1 → d0 is forwarded untouched
//! rate = "100mbit"      # the rate the egress is shaped to
//! overhead = 24         # bytes added to every frame on the wire (Ethernet:
//!                       # preamble 8 + gap 12 + FCS 4 = 24)
//! mpu = 84              # smallest size a frame counts for, after overhead
//! burst = 3028          # bytes it may send ahead of the rate (default: one frame)
//! # prio_burst = 1538   # more bytes ahead for the most urgent classes only:
//!                       # needs algorithm = "prio", classes on two or more
//!                       # prio levels and no class rate/ceil (default then
//!                       # one frame, else 0; see `prio_credit.rs`)
//! engine = "run-to-completion"  # one thread receives, schedules, sends;
//!                       # or "pspat": receive thread → mailbox → arbiter
//! cpu = 1               # pin the forwarder's threads to this CPU (default: any)
//! sched = "fifo:50"     # their policy: "other" (default) or SCHED_FIFO at 1..=99
//! busy_poll = true      # never sleep, drive the ingress's NAPI (needs cpu;
//!                       # a number: frames per poll, default 64)
//!
//! [scheduler]
//! algorithm = "drr"     # fifo | prio | rr | drr | wf2q | qfq
//! # policy = "tree.toml"  (or a built-in name: hpfq, hclock, ...) instead
//!
//! [[class]]
//! name = "voip"
//! weight = 10
//! rate = "2mbit"        # guaranteed (HTB's rate); optional
//! ceil = "10mbit"       # the most it may borrow up to (default: rate)
//! burst = "15k"         # bytes it may send ahead of rate (needs rate)
//! cburst = "15k"        # bytes ahead of ceil (needs ceil; default: burst,
//!                       # else one frame)
//! match = [{ proto = "udp", dport = "5000-5010" }, { dscp = "ef" }]
//!                       # first match wins; every class but the default
//!                       # needs a rule, and a rule names at least one field
//!
//! [[class]]
//! name = "bulk"
//! default = true        # frames no rule matches
//! ```
//!
//! Every error names the file, line and column, the field, the value and
//! what is allowed ([`ConfigError`]).

mod class_rates;
mod file;
mod matching;
mod normalise;
mod parse;
mod prio_credit;
mod raw;
mod threads;
mod type_error;

use std::net::SocketAddr;
use std::path::PathBuf;

use pktsched_core::policy::Policy;
use pktsched_core::{Algorithm, Rate};
use pktsched_io::classify::Match;

pub use class_rates::{ClassRateRange, MAX_CLASS_BURST, MIN_CLASS_RATE, parse_size};
pub(crate) use file::read_config;
pub use file::{MAX_CONFIG_BYTES, read_capped};
pub use matching::dscp_by_name;
pub(crate) use matching::{class_name_problem, first_vlan_class, match_rule};
pub(crate) use normalise::{rule_toml, toml_string, write_class_settings};
pub(crate) use parse::{Ctx, XDP_NO_VLAN, interface, parse_class, parse_control, prio_levels};
pub use parse::{load, parse};
pub(crate) use raw::{RateText, RawClass, RawControl, RawMatch};
pub use threads::{
    BusyPolling, DEFAULT_BUSY_POLL_BUDGET, MAX_BUSY_POLL_BUDGET, MAX_CPU, RT_PRIORITIES,
    ThreadSched,
};

/// Most classes in one config.
pub const MAX_CLASSES: usize = 4096;
/// Most match rules over all classes.
pub const MAX_RULES: usize = 4096;
/// Most packets one class may queue.
pub const MAX_CLASS_LIMIT: u32 = 1 << 20;
/// Most frame buffers (each `max_frame` rounded up to 2 KiB or more).
pub const MAX_BUFFERS: u32 = 1 << 20;
/// Largest frame (bytes, without FCS).
pub const MAX_FRAME: u32 = 9216;
/// Smallest `max_frame`: a minimal Ethernet frame without FCS.
pub const MIN_FRAME: u32 = 60;
/// Largest `burst` (bytes).
pub const MAX_BURST: u32 = 1 << 20;
/// Largest per-frame overhead and `mpu` (bytes).
pub const MAX_OVERHEAD: u32 = 256;
/// Fastest link rate accepted.
pub const MAX_LINK_RATE: Rate = Rate::gbit(400);

/// A config error with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file as named.
    pub file: String,
    /// 1-based line (0 when the error has no position, e.g. unreadable).
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// Field, value and what is allowed.
    pub msg: String,
}

impl std::fmt::Display for ConfigError {
    /// `file:line:col: msg`, or `file: msg` when the error has no position
    /// (the file could not be read).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.msg)
        }
    }
}

/// Which packet I/O to use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// AF_XDP where it works, else AF_PACKET (the reason is logged).
    Auto,
    /// AF_XDP only.
    Xdp,
    /// AF_PACKET only.
    Packet,
}

impl Backend {
    /// The config word.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Xdp => "xdp",
            Backend::Packet => "packet",
        }
    }
}

/// How the frames of the scheduled direction are moved through the
/// scheduler (`link.engine`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// One thread receives a batch, classifies it, enqueues it, releases
    /// what the emulated link allows and transmits, then sleeps in `poll`
    /// on the ingress until a frame arrives or the next link or shaper
    /// deadline: no hand-off between threads.
    RunToCompletion,
    /// PSPAT: a receive thread (client) hands frames through a lock-free
    /// mailbox to the arbiter thread, which schedules and transmits.
    Pspat,
}

impl Engine {
    /// The config word.
    pub fn name(self) -> &'static str {
        match self {
            Engine::RunToCompletion => "run-to-completion",
            Engine::Pspat => "pspat",
        }
    }

    /// Every engine, in the order the config lists them.
    pub const ALL: [Engine; 2] = [Engine::RunToCompletion, Engine::Pspat];
}

/// `[link]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// Interface frames to schedule arrive on.
    pub ingress: String,
    /// Interface they leave on.
    pub egress: String,
    /// The shaped rate of the egress.
    pub rate: Rate,
    /// Bytes added to every frame's length on the wire.
    pub overhead: u32,
    /// Smallest wire length a frame counts for (after `overhead`).
    pub mpu: u32,
    /// Largest frame accepted (bytes without FCS); longer ones are dropped
    /// and counted.
    pub max_frame: u32,
    /// Packet I/O.
    pub backend: Backend,
    /// Put both interfaces in promiscuous mode (a bump in the wire).
    pub promiscuous: bool,
    /// Frame buffers shared by everything queued (bounds memory).
    pub buffers: u32,
    /// Bytes the shaper may send ahead of its rate (HTB's `burst`): frames
    /// leave up to that much early, saving a wake-up per frame; the
    /// long-run rate is exact. Default: one maximum frame on the wire.
    pub burst: u32,
    /// The priority credit (bytes): how much further than `burst` the
    /// shaper may run ahead of its rate for a frame of the most urgent
    /// classes ([`RunConfig::urgent_level`]), so such a frame never waits
    /// for the frame on the wire; the other classes pay it back at once.
    /// Default: one maximum frame on the wire when the config has urgent
    /// classes, else 0 (see `config/prio_credit.rs`).
    pub prio_burst: u32,
    /// The threads that move scheduled frames (fixed at start).
    pub engine: Engine,
    /// The CPU the forwarder's threads are pinned to (`None`: any).
    pub cpu: Option<u32>,
    /// The forwarder's threads' scheduling policy.
    pub sched: ThreadSched,
    /// Busy polling of the ingress (`None`: the forwarder sleeps when idle).
    pub busy_poll: Option<BusyPolling>,
}

impl LinkConfig {
    /// The length a frame of `frame_len` bytes counts for on the wire:
    /// `max(frame_len + overhead, mpu)`.
    pub fn wire_len(&self, frame_len: u32) -> u32 {
        (frame_len + self.overhead).max(self.mpu)
    }
}

/// `[scheduler]`: a flat algorithm or a policy tree.
#[derive(Clone, Debug)]
pub enum SchedulerChoice {
    /// One of the flat algorithms; every class is a flow.
    Algorithm(Algorithm),
    /// A policy tree; classes hang below its nodes.
    Policy {
        /// As written in the file (a path or a built-in name).
        source: String,
        /// The compiled policy.
        policy: Box<Policy>,
    },
}

/// `[control]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    /// The Unix socket `pktsched stats` and `reload` talk to (mode 0600).
    pub socket: PathBuf,
    /// Where to serve Prometheus metrics, if anywhere.
    pub prometheus: Option<SocketAddr>,
}

/// One `[[class]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassConfig {
    /// Unique name (reload matches classes by it).
    pub name: String,
    /// Weight among classes (share = weight / sum).
    pub weight: u32,
    /// Priority for `prio` (0 first).
    pub prio: u32,
    /// Queue limit in packets.
    pub limit: u32,
    /// Guaranteed rate (HTB's `rate`; see [`ClassConfig::ceiling`]).
    pub rate: Option<Rate>,
    /// The most it may send (HTB's `ceil`), as written.
    pub ceil: Option<Rate>,
    /// Bytes (on the wire) it may send ahead of its `rate` (HTB's
    /// `burst`), as written; see [`ClassConfig::ceiling_burst`].
    pub burst: Option<u32>,
    /// Bytes (on the wire) it may send ahead of its `ceil` (HTB's
    /// `cburst`), as written.
    pub cburst: Option<u32>,
    /// With a policy tree: the node the class hangs below.
    pub node: Option<String>,
    /// Frames no rule matches go here.
    pub default: bool,
    /// Match rules (any of them).
    pub rules: Vec<Match>,
}

impl ClassConfig {
    /// The class's limit: `ceil`, else `rate` (HTB's default), else none.
    pub fn ceiling(&self) -> Option<Rate> {
        self.ceil.or(self.rate)
    }

    /// The credit of the class's limit ([`ClassConfig::ceiling`]):
    /// `cburst`, else `burst` (as `ceil` defaults to `rate`), else `None`:
    /// one maximum frame on the wire.
    pub fn ceiling_burst(&self) -> Option<u32> {
        self.cburst.or(self.burst)
    }
}

/// A checked config.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The file it came from, as named.
    pub file: String,
    /// `[link]`.
    pub link: LinkConfig,
    /// `[scheduler]`.
    pub scheduler: SchedulerChoice,
    /// `[control]`.
    pub control: ControlConfig,
    /// The classes in file order.
    pub classes: Vec<ClassConfig>,
}

impl RunConfig {
    /// Index of the default class (exactly one exists in a checked config).
    pub fn default_class(&self) -> usize {
        self.classes.iter().position(|c| c.default).unwrap_or(0)
    }

    /// Whether any class has a `rate` or `ceil` (its classes then hang
    /// below one hClock or prio node, see [`crate::plan`]).
    pub fn has_class_rates(&self) -> bool {
        self.classes
            .iter()
            .any(|c| c.rate.is_some() || c.ceil.is_some())
    }

    /// Settings the config accepts but its scheduler does not use, one
    /// line each (`check` prints them as notes, `run` logs them): a class
    /// `weight` under `fifo`, `prio` or `rr`.
    pub fn unused_settings(&self) -> Vec<String> {
        let SchedulerChoice::Algorithm(alg) = &self.scheduler else {
            return Vec::new();
        };
        // With class rates, `rr` still gives every class weight 1 and
        // `prio` takes a prio node (`plan::class_rates_policy`).
        if !matches!(alg, Algorithm::Fifo | Algorithm::Prio | Algorithm::Rr) {
            return Vec::new();
        }
        self.classes
            .iter()
            .filter(|c| c.weight != 1)
            .map(|c| {
                format!(
                    "class {:?}: weight = {} is not used by algorithm = \"{}\" (drr, wf2q and qfq \
                     share by weight)",
                    c.name,
                    c.weight,
                    alg.name()
                )
            })
            .collect()
    }

    /// The first class with a rule on a VLAN id, if any (AF_XDP cannot
    /// see tags held in metadata: such a config takes AF_PACKET).
    pub fn vlan_class(&self) -> Option<&str> {
        crate::config::first_vlan_class(
            self.classes
                .iter()
                .map(|c| (c.name.as_str(), c.rules.as_slice())),
        )
    }

    /// The class called `name`.
    pub fn class(&self, name: &str) -> Option<&ClassConfig> {
        self.classes.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests;
