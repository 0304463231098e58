//! What a reload changes: the running config and the new one compared by
//! class name (`tc class change`-style edits in place). Settings that can
//! only take effect at start refuse the reload; the running config stays.
//! Among them: the policy tree's content (not only its path) and a class's
//! `node`, since the tree is built once and a flow never moves between
//! nodes.

use std::collections::HashMap;
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

/// A config's classes by name (a reload compares thousands of classes:
/// one lookup each, not a scan).
pub(crate) fn by_name(cfg: &RunConfig) -> HashMap<&str, &ClassConfig> {
    cfg.classes.iter().map(|c| (c.name.as_str(), c)).collect()
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

/// A policy tree is compiled and built once, at start: the running tree
/// is the file's content then. A reload that names the same file with
/// other content (or another file) takes a restart.
fn policy_unchanged(old: &SchedulerChoice, new: &SchedulerChoice) -> Result<(), NeedsRestart> {
    if let (
        SchedulerChoice::Policy { source, policy },
        SchedulerChoice::Policy {
            policy: new_policy, ..
        },
    ) = (old, new)
        && policy != new_policy
    {
        return Err(NeedsRestart {
            field: "scheduler.policy",
            old: format!("{source:?} as compiled at start"),
            new: "an edited tree (the running tree's nodes are built once, at start)".into(),
        });
    }
    Ok(())
}

/// A class's flow stays on the policy node it was added to: moving it
/// takes a restart.
fn nodes_unchanged(old: &RunConfig, new: &RunConfig) -> Result<(), NeedsRestart> {
    let node = |n: &Option<String>| {
        n.as_ref().map_or_else(
            || "none (the policy's attach node)".into(),
            |n| format!("{n:?}"),
        )
    };
    let new_classes = by_name(new);
    for c in &old.classes {
        if let Some(nc) = new_classes.get(c.name.as_str())
            && nc.node != c.node
        {
            return Err(NeedsRestart {
                field: "class.node",
                old: format!("{} (class {:?})", node(&c.node), c.name),
                new: format!(
                    "{} (a class's flow stays on its node while running)",
                    node(&nc.node)
                ),
            });
        }
    }
    Ok(())
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
    policy_unchanged(&old.scheduler, &new.scheduler)?;
    nodes_unchanged(old, new)?;
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
    let (old_classes, new_classes) = (by_name(old), by_name(new));
    for c in &old.classes {
        match new_classes.get(c.name.as_str()) {
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
        if !old_classes.contains_key(c.name.as_str()) {
            changes.push(Change::Added(c.name.clone()));
        }
    }
    Ok(changes)
}

/// The control socket's answer to a reload that was applied: `reloaded:
/// no changes`, or `reloaded:` and one indented line per change; then a
/// `note: ...` line for each of `notes` (what the config now running sets
/// but its scheduler does not use, [`RunConfig::unused_settings`]).
pub fn answer_text(changes: &[Change], notes: &[String]) -> String {
    let mut text = if changes.is_empty() {
        "reloaded: no changes\n".to_string()
    } else {
        let lines: Vec<String> = changes.iter().map(|c| format!("  {c}\n")).collect();
        format!("reloaded:\n{}", lines.concat())
    };
    for n in notes {
        text.push_str(NOTE);
        text.push_str(n);
        text.push('\n');
    }
    text
}

/// How a note line of [`answer_text`] starts.
const NOTE: &str = "note: ";

impl Change {
    /// One JSON object: `{"change": "added" | "removed", "class": NAME}`,
    /// `{"change": "changed", "class": NAME, "fields": [...]}` or
    /// `{"change": "link", "fields": [...]}`.
    pub fn json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Change::Added(c) => json!({ "change": "added", "class": c }),
            Change::Changed(c, f) => json!({ "change": "changed", "class": c, "fields": f }),
            Change::Removed(c) => json!({ "change": "removed", "class": c }),
            Change::Link(f) => json!({ "change": "link", "fields": f }),
        }
    }
}

/// A change line of [`answer_text`] as [`Change::json`] gives it (class
/// names hold no whitespace, so the first `: ` ends the name).
fn line_json(line: &str) -> Option<serde_json::Value> {
    use serde_json::json;
    let fields = |f: &str| f.split(", ").map(str::to_string).collect::<Vec<_>>();
    if let Some(c) = line.strip_prefix("added class ") {
        return Some(json!({ "change": "added", "class": c }));
    }
    if let Some(rest) = line.strip_prefix("removed class ") {
        let c = rest.split_once(' ').map_or(rest, |(c, _)| c);
        return Some(json!({ "change": "removed", "class": c }));
    }
    if let Some(f) = line.strip_prefix("changed link: ") {
        return Some(json!({ "change": "link", "fields": fields(f) }));
    }
    let (c, f) = line.strip_prefix("changed class ")?.split_once(": ")?;
    Some(json!({ "change": "changed", "class": c, "fields": fields(f) }))
}

/// The reload answer `text` (see [`answer_text`]) as one JSON object,
/// `{"reloaded": true, "changes": [...], "notes": [...]}` with
/// [`Change::json`] objects and the notes' texts; an answer of another
/// shape (a refusal, `error: ...`) is returned as the error.
pub fn answer_json(text: &str) -> Result<String, String> {
    let mut lines = text.lines();
    let with_changes = match lines.next() {
        Some("reloaded: no changes") => false,
        Some("reloaded:") => true,
        _ => return Err(text.trim_end().to_string()),
    };
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    for l in lines {
        // Change lines are indented, note lines are not.
        if let Some(n) = l.strip_prefix(NOTE) {
            notes.push(n.to_string());
            continue;
        }
        match line_json(l.trim()) {
            Some(c) if with_changes => changes.push(c),
            _ => {
                return Err(format!(
                    "unexpected line in the reload answer: {:?}",
                    l.trim()
                ));
            }
        }
    }
    let v = serde_json::json!({ "reloaded": true, "changes": changes, "notes": notes });
    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
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
        let new = cfg(&format!(
            "{edited}\n[[class]]\nname = \"c\"\nmatch = [{{ dport = 8080 }}]\n"
        ));
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

    #[test]
    fn the_reload_answer_reads_back_as_json_change_by_change() {
        let changes = vec![
            Change::Link(vec!["rate", "prio_burst"]),
            Change::Changed("voip:1".into(), vec!["rate", "ceil"]),
            Change::Removed("bulk".into()),
            Change::Added("né".into()),
        ];
        let text = answer_text(&changes, &[]);
        let v: serde_json::Value =
            serde_json::from_str(&answer_json(&text).expect("json")).expect("parses");
        assert_eq!(v["reloaded"], true);
        let want: Vec<serde_json::Value> = changes.iter().map(Change::json).collect();
        assert_eq!(v["changes"], serde_json::Value::Array(want), "{text}");
        assert_eq!(v["changes"][1]["class"], "voip:1");
        assert_eq!(v["changes"][0]["fields"][1], "prio_burst");
        let none: serde_json::Value =
            serde_json::from_str(&answer_json(&answer_text(&[], &[])).expect("json"))
                .expect("parses");
        assert_eq!(none["changes"], serde_json::json!([]));
        assert_eq!(none["notes"], serde_json::json!([]));
        assert_eq!(
            answer_json("error: link.engine changed\n"),
            Err("error: link.engine changed".to_string())
        );
        let e = answer_json("reloaded:\n  renamed class a\n").expect_err("unknown line");
        assert!(e.contains("\"renamed class a\""), "{e}");
    }

    /// What the new config sets but its scheduler ignores comes with the
    /// answer, one `note:` line each, after the changes (with or without
    /// any), and reads back as the JSON's `notes`.
    #[test]
    fn the_reload_answer_carries_the_new_config_s_notes() {
        let fifo = cfg(&BASE.replace(
            "rate = \"100mbit\"\n",
            "rate = \"100mbit\"\n\n[scheduler]\nalgorithm = \"fifo\"\n",
        ));
        let notes = fifo.unused_settings();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("class \"a\": weight = 2 is not used"),
            "{notes:?}"
        );
        let changes = vec![Change::Changed("a".into(), vec!["weight"])];
        let text = answer_text(&changes, &notes);
        assert_eq!(
            text,
            format!("reloaded:\n  changed class a: weight\nnote: {}\n", notes[0])
        );
        let v: serde_json::Value =
            serde_json::from_str(&answer_json(&text).expect("json")).expect("parses");
        assert_eq!(v["changes"][0]["class"], "a");
        assert_eq!(v["notes"], serde_json::json!(notes));
        let text = answer_text(&[], &notes);
        assert_eq!(text, format!("reloaded: no changes\nnote: {}\n", notes[0]));
        let v: serde_json::Value =
            serde_json::from_str(&answer_json(&text).expect("json")).expect("parses");
        assert_eq!(
            (&v["changes"], &v["notes"]),
            (&serde_json::json!([]), &serde_json::json!(notes))
        );
        // A change line after "no changes" is not an answer of this shape.
        let e = answer_json("reloaded: no changes\n  added class c\n").expect_err("shape");
        assert!(e.contains("added class c"), "{e}");
    }
}

#[cfg(test)]
mod policy_tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::parse;

    /// A tree of two `wfq` nodes below a `wfq` root.
    const TREE: &str = "[[node]]\nname = \"root\"\nkind = \"wfq\"\n\n\
        [[node]]\nname = \"x\"\nparent = \"root\"\nkind = \"wfq\"\n\n\
        [[node]]\nname = \"y\"\nparent = \"root\"\nkind = \"wfq\"\n";

    /// Class `a` on node `x`, the default class on node `y`.
    const CLASSES: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\n\n\
        [scheduler]\npolicy = \"tree.toml\"\n\n\
        [[class]]\nname = \"a\"\nnode = \"x\"\nmatch = [{ dport = 80 }]\n\n\
        [[class]]\nname = \"b\"\nnode = \"y\"\ndefault = true\n";

    /// A directory of this test's own holding `tree.toml` = `tree`.
    fn tree_dir(tag: &str, tree: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pktsched-reload-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("tree.toml"), tree).expect("tree");
        dir
    }

    fn cfg_in(dir: &std::path::Path, src: &str) -> RunConfig {
        parse(src, "t.toml", Some(dir)).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_edited_policy_file_at_the_same_path_takes_a_restart() {
        let dir = tree_dir("edit", TREE);
        let old = cfg_in(&dir, CLASSES);
        assert_eq!(diff(&old, &cfg_in(&dir, CLASSES)), Ok(vec![]), "same file");
        // A node ahead of the others: every node index moves by one.
        let edited = TREE.replace(
            "[[node]]\nname = \"x\"",
            "[[node]]\nname = \"w\"\nparent = \"root\"\nkind = \"wfq\"\n\n[[node]]\nname = \"x\"",
        );
        std::fs::write(dir.join("tree.toml"), edited).expect("edit");
        let new = cfg_in(&dir, CLASSES);
        let e = diff(&old, &new).expect_err("the running tree is not the file's any more");
        assert_eq!(e.field, "scheduler.policy");
        let msg = e.to_string();
        assert!(
            msg.contains("\"tree.toml\"") && msg.contains("takes a restart"),
            "{msg}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_class_moved_to_another_node_takes_a_restart() {
        let dir = tree_dir("node", TREE);
        let old = cfg_in(&dir, CLASSES);
        let moved = CLASSES.replace("node = \"x\"", "node = \"y\"");
        let e = diff(&old, &cfg_in(&dir, &moved)).expect_err("a flow stays on its node");
        assert_eq!(e.field, "class.node");
        let msg = e.to_string();
        assert!(
            msg.contains("\"x\" (class \"a\")") && msg.contains("\"y\""),
            "names the class and both nodes: {msg}"
        );
        // Other settings of a class on a node still change live.
        let weighted = CLASSES.replace("node = \"x\"", "node = \"x\"\nweight = 3");
        assert_eq!(
            diff(&old, &cfg_in(&dir, &weighted)),
            Ok(vec![Change::Changed("a".into(), vec!["weight"])])
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
