//! What a reload changes: the running config and the new one compared by
//! class name (`tc class change`-style edits in place). Settings that can
//! only take effect at start refuse the reload; the running config stays.

use std::fmt;

use crate::config::{ClassConfig, RunConfig, SchedulerChoice};

/// One class-level change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new class.
    Added(String),
    /// A class whose settings changed; the fields that differ.
    Changed(String, Vec<&'static str>),
    /// A class no longer in the config; its queued frames move to the
    /// default class.
    Removed(String),
    /// The link's rate or wire accounting changed.
    Link(Vec<&'static str>),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Added(c) => write!(f, "added class {c}"),
            Change::Changed(c, fields) => write!(f, "changed class {c}: {}", fields.join(", ")),
            Change::Removed(c) => write!(
                f,
                "removed class {c} (its queue moves to the default class)"
            ),
            Change::Link(fields) => write!(f, "changed link: {}", fields.join(", ")),
        }
    }
}

/// Why a new config cannot be applied to a running shaper.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} changed from {old} to {new}: this takes a restart (the running config is kept)")]
pub struct NeedsRestart {
    /// The setting.
    pub field: &'static str,
    /// Running value.
    pub old: String,
    /// New value.
    pub new: String,
}

fn class_fields(old: &ClassConfig, new: &ClassConfig) -> Vec<&'static str> {
    let mut v = Vec::new();
    if old.weight != new.weight {
        v.push("weight");
    }
    if old.prio != new.prio {
        v.push("prio");
    }
    if old.limit != new.limit {
        v.push("limit");
    }
    if old.node != new.node {
        v.push("node");
    }
    if old.default != new.default {
        v.push("default");
    }
    if old.rules != new.rules {
        v.push("match");
    }
    if old.rate != new.rate {
        v.push("rate");
    }
    if old.ceil != new.ceil {
        v.push("ceil");
    }
    if old.burst != new.burst {
        v.push("burst");
    }
    if old.cburst != new.cburst {
        v.push("cburst");
    }
    v
}

fn scheduler_name(s: &SchedulerChoice) -> String {
    match s {
        SchedulerChoice::Algorithm(a) => format!("algorithm {}", a.name()),
        SchedulerChoice::Policy { source, .. } => format!("policy {source}"),
    }
}

/// Whether the classes have rates decides the scheduler's kind (the one
/// node of [`class_rates_policy`](crate::plan::class_rates_policy), or
/// `[scheduler]` as configured): a reload that gives the first class a
/// rate or ceil, or takes the last one's away, takes a restart. Within a
/// kind, `rate`, `ceil`, `burst` and `cburst` change live.
fn rates_kind_unchanged(old: &RunConfig, new: &RunConfig) -> Result<(), NeedsRestart> {
    let kind = |c: &RunConfig| {
        if c.has_class_rates() {
            "classes with rates".to_string()
        } else {
            "no class rates".to_string()
        }
    };
    if old.has_class_rates() != new.has_class_rates() {
        return Err(NeedsRestart {
            field: "class rate/ceil",
            old: kind(old),
            new: kind(new),
        });
    }
    // The classes' policy node was built for the largest wire frame; a
    // change of it would leave the running node checking rates against
    // the old one.
    let wire = |c: &RunConfig| c.link.wire_len(c.link.max_frame);
    if new.has_class_rates() && wire(old) != wire(new) {
        return Err(NeedsRestart {
            field: "link.overhead/mpu (with class rates)",
            old: format!("largest wire frame {} bytes", wire(old)),
            new: format!("{} bytes", wire(new)),
        });
    }
    Ok(())
}

/// The changes from `old` to `new`, or the first setting that needs a
/// restart.
pub fn diff(old: &RunConfig, new: &RunConfig) -> Result<Vec<Change>, NeedsRestart> {
    let (o, n) = (&old.link, &new.link);
    let fixed: [(&'static str, String, String); 11] = [
        ("link.ingress", o.ingress.clone(), n.ingress.clone()),
        ("link.egress", o.egress.clone(), n.egress.clone()),
        (
            "link.max_frame",
            o.max_frame.to_string(),
            n.max_frame.to_string(),
        ),
        (
            "link.backend",
            o.backend.name().into(),
            n.backend.name().into(),
        ),
        ("link.buffers", o.buffers.to_string(), n.buffers.to_string()),
        (
            "link.engine",
            o.engine.name().into(),
            n.engine.name().into(),
        ),
        ("link.cpu", format!("{:?}", o.cpu), format!("{:?}", n.cpu)),
        ("link.sched", o.sched.to_string(), n.sched.to_string()),
        (
            "link.busy_poll",
            format!("{:?}", o.busy_poll),
            format!("{:?}", n.busy_poll),
        ),
        (
            "link.promiscuous",
            o.promiscuous.to_string(),
            n.promiscuous.to_string(),
        ),
        (
            "scheduler",
            scheduler_name(&old.scheduler),
            scheduler_name(&new.scheduler),
        ),
    ];
    for (field, a, b) in fixed {
        if a != b {
            return Err(NeedsRestart {
                field,
                old: a,
                new: b,
            });
        }
    }
    if old.control != new.control {
        return Err(NeedsRestart {
            field: "control",
            old: format!("{:?}", old.control),
            new: format!("{:?}", new.control),
        });
    }
    rates_kind_unchanged(old, new)?;
    let mut changes = Vec::new();
    let mut link = Vec::new();
    if o.rate != n.rate {
        link.push("rate");
    }
    if o.overhead != n.overhead {
        link.push("overhead");
    }
    if o.mpu != n.mpu {
        link.push("mpu");
    }
    if o.burst != n.burst {
        link.push("burst");
    }
    if o.prio_burst != n.prio_burst {
        link.push("prio_burst");
    }
    if !link.is_empty() {
        changes.push(Change::Link(link));
    }
    for c in &old.classes {
        match new.class(&c.name) {
            None => changes.push(Change::Removed(c.name.clone())),
            Some(nc) => {
                let fields = class_fields(c, nc);
                if !fields.is_empty() {
                    changes.push(Change::Changed(c.name.clone(), fields));
                }
            }
        }
    }
    for c in &new.classes {
        if old.class(&c.name).is_none() {
            changes.push(Change::Added(c.name.clone()));
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    const BASE: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\n\n\
        [[class]]\nname = \"a\"\nweight = 2\nmatch = [{ dport = 80 }]\n\n\
        [[class]]\nname = \"b\"\ndefault = true\n";

    fn cfg(src: &str) -> RunConfig {
        parse(src, "t.toml", None).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn classes_are_compared_by_name() {
        let old = cfg(BASE);
        assert_eq!(diff(&old, &old), Ok(vec![]));
        let edited = BASE
            .replace("weight = 2", "weight = 5")
            .replace("100mbit", "50mbit")
            .replace("dport = 80", "dport = 443");
        let new = cfg(&format!("{edited}\n[[class]]\nname = \"c\"\n"));
        let d = diff(&old, &new).expect("live");
        assert_eq!(
            d,
            vec![
                Change::Link(vec!["rate"]),
                Change::Changed("a".into(), vec!["weight", "match"]),
                Change::Added("c".into()),
            ]
        );
        let gone = cfg(&BASE.replace("name = \"a\"", "name = \"z\""));
        let d = diff(&old, &gone).expect("live");
        assert_eq!(
            d,
            vec![Change::Removed("a".into()), Change::Added("z".into())]
        );
        assert_eq!(
            d[0].to_string(),
            "removed class a (its queue moves to the default class)"
        );
    }

    #[test]
    fn class_shaping_changes_live_but_not_the_scheduler_kind() {
        let rated = BASE.replace(
            "weight = 2\n",
            "weight = 2\nrate = \"10mbit\"\nburst = \"15k\"\n",
        );
        let old = cfg(&rated);
        assert_eq!(
            diff(&old, &cfg(&rated.replace("\"15k\"", "15360"))),
            Ok(vec![])
        );
        let edited = rated
            .replace("\"15k\"", "\"30k\"")
            .replace("\"10mbit\"", "\"20mbit\"\nceil = \"50mbit\"");
        assert_eq!(
            diff(&old, &cfg(&edited)),
            Ok(vec![Change::Changed(
                "a".into(),
                vec!["rate", "ceil", "burst"]
            )])
        );
        let e = diff(
            &old,
            &cfg(&rated.replace("[link]\n", "[link]\noverhead = 24\n")),
        )
        .expect_err("overhead");
        assert_eq!(e.field, "link.overhead/mpu (with class rates)");
        // The first rate makes the scheduler a different kind: a restart.
        let e = diff(&cfg(BASE), &old).expect_err("kind");
        assert_eq!(e.field, "class rate/ceil");
        assert_eq!(
            (e.old.as_str(), e.new.as_str()),
            ("no class rates", "classes with rates")
        );
    }

    #[test]
    fn start_only_settings_refuse_the_reload() {
        let old = cfg(BASE);
        for (from, to, field) in [
            ("egress = \"d1\"", "egress = \"d2\"", "link.egress"),
            (
                "rate = \"100mbit\"",
                "rate = \"100mbit\"\nbuffers = 128",
                "link.buffers",
            ),
            (
                "rate = \"100mbit\"",
                "rate = \"100mbit\"\nengine = \"pspat\"",
                "link.engine",
            ),
            (
                "rate = \"100mbit\"",
                "rate = \"100mbit\"\ncpu = 0",
                "link.cpu",
            ),
            (
                "rate = \"100mbit\"",
                "rate = \"100mbit\"\nsched = \"fifo:5\"",
                "link.sched",
            ),
            (
                "rate = \"100mbit\"\n",
                "rate = \"100mbit\"\n[scheduler]\nalgorithm = \"qfq\"\n",
                "scheduler",
            ),
        ] {
            let e = diff(&old, &cfg(&BASE.replace(from, to))).expect_err(field);
            assert_eq!(e.field, field);
            assert!(e.to_string().contains("takes a restart"), "{e}");
        }
        // Busy polling needs a pinned core, so both sides pin one.
        let pinned = BASE.replace("rate = \"100mbit\"", "rate = \"100mbit\"\ncpu = 0");
        let polling = pinned.replace("cpu = 0", "cpu = 0\nbusy_poll = true");
        let e = diff(&cfg(&pinned), &cfg(&polling)).expect_err("busy_poll");
        assert_eq!(e.field, "link.busy_poll");
    }
}
