//! A checked config printed back as TOML with every default filled in
//! (what `pktsched check` shows, like `nginx -t`). Parsing the output gives
//! the same config.

use std::fmt;

use pktsched_io::classify::Match;

use super::{ClassConfig, RunConfig, SchedulerChoice};

impl fmt::Display for RunConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.link;
        writeln!(f, "[link]")?;
        writeln!(f, "ingress = {}", toml_string(&l.ingress))?;
        writeln!(f, "egress = {}", toml_string(&l.egress))?;
        writeln!(f, "rate = \"{}\"", l.rate)?;
        writeln!(f, "overhead = {}", l.overhead)?;
        writeln!(f, "mpu = {}", l.mpu)?;
        writeln!(f, "max_frame = {}", l.max_frame)?;
        writeln!(f, "backend = \"{}\"", l.backend.name())?;
        writeln!(f, "promiscuous = {}", l.promiscuous)?;
        writeln!(f, "buffers = {}", l.buffers)?;
        writeln!(f, "burst = {}", l.burst)?;
        writeln!(f, "prio_burst = {}", l.prio_burst)?;
        writeln!(f, "engine = \"{}\"", l.engine.name())?;
        if let Some(cpu) = l.cpu {
            writeln!(f, "cpu = {cpu}")?;
        }
        writeln!(f, "sched = \"{}\"", l.sched)?;
        match l.busy_poll {
            None => writeln!(f, "busy_poll = false")?,
            Some(b) => writeln!(f, "busy_poll = {}", b.budget)?,
        }
        writeln!(f, "\n[scheduler]")?;
        match &self.scheduler {
            SchedulerChoice::Algorithm(a) => writeln!(f, "algorithm = \"{}\"", a.name())?,
            SchedulerChoice::Policy { source, .. } => {
                writeln!(f, "policy = {}", toml_string(source))?
            }
        }
        writeln!(f, "\n[control]")?;
        writeln!(
            f,
            "socket = {}",
            toml_string(&self.control.socket.display().to_string())
        )?;
        if let Some(p) = self.control.prometheus {
            writeln!(f, "prometheus = \"{p}\"")?;
        }
        for c in &self.classes {
            writeln!(f, "\n[[class]]")?;
            write_class_settings(f, c)?;
            if let Some(n) = &c.node {
                writeln!(f, "node = {}", toml_string(n))?;
            }
            if c.default {
                writeln!(f, "default = true")?;
            }
            if !c.rules.is_empty() {
                let rules: Vec<String> = c.rules.iter().map(rule_toml).collect();
                writeln!(f, "match = [{}]", rules.join(", "))?;
            }
        }
        Ok(())
    }
}

/// `s` as a TOML basic string: quoted, with `"` and `\\` escaped, and
/// the control characters TOML does not allow raw as `\uXXXX` (Rust's
/// `{:?}` would write `\u{301}` for a combining accent, which TOML refuses:
/// every other character is written as it is).
pub(crate) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A class's scheduling settings, defaults filled in: its name, weight,
/// prio, limit and HTB-style rate/ceil/burst/cburst (also the route's `[[egress.class]]`).
pub(crate) fn write_class_settings(f: &mut fmt::Formatter<'_>, c: &ClassConfig) -> fmt::Result {
    writeln!(f, "name = {}", toml_string(&c.name))?;
    writeln!(f, "weight = {}", c.weight)?;
    writeln!(f, "prio = {}", c.prio)?;
    writeln!(f, "limit = {}", c.limit)?;
    if let Some(r) = c.rate {
        writeln!(f, "rate = \"{r}\"")?;
    }
    if let Some(r) = c.ceil {
        writeln!(f, "ceil = \"{r}\"")?;
    }
    if let Some(b) = c.burst {
        writeln!(f, "burst = {b}")?;
    }
    if let Some(b) = c.cburst {
        writeln!(f, "cburst = {b}")?;
    }
    Ok(())
}

/// One rule as an inline TOML table, fields in a fixed order (also the
/// route config's).
pub(crate) fn rule_toml(m: &Match) -> String {
    let mut fields = Vec::new();
    if let Some(s) = &m.src {
        fields.push(format!("src = \"{s}\""));
    }
    if let Some(d) = &m.dst {
        fields.push(format!("dst = \"{d}\""));
    }
    if let Some(p) = m.proto {
        fields.push(format!("proto = {p}"));
    }
    if let Some(p) = &m.sport {
        fields.push(format!("sport = \"{p}\""));
    }
    if let Some(p) = &m.dport {
        fields.push(format!("dport = \"{p}\""));
    }
    if let Some(d) = m.dscp {
        fields.push(format!("dscp = {d}"));
    }
    if let Some(v) = m.vlan {
        fields.push(format!("vlan = {v}"));
    }
    format!("{{ {} }}", fields.join(", "))
}
