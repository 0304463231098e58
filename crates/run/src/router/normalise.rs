//! A checked route config printed back as TOML with every default filled
//! in (`pktsched route --check`).

use std::fmt;

use super::config::RouteConfig;
use super::egress_config::EgressSection;
use crate::config::{toml_string, write_class_settings};

fn mac_text(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

impl fmt::Display for RouteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.router;
        writeln!(f, "[router]")?;
        writeln!(f, "ingress = {}", toml_string(&r.ingress))?;
        writeln!(f, "egress = {}", toml_string(&r.egress))?;
        writeln!(f, "backend = \"{}\"", r.backend.name())?;
        writeln!(f, "strategy = \"{}\"", r.strategy.name())?;
        writeln!(f, "device_budget = {}", r.device_budget)?;
        writeln!(f, "ring_frames = {}", r.ring_frames)?;
        writeln!(f, "pool_frames = {}", r.pool_frames)?;
        writeln!(f, "cost = \"{}\"", r.cost)?;
        writeln!(f, "busy_poll = {}", r.busy_poll)?;
        for (field, a) in ["ingress_address", "egress_address"]
            .iter()
            .zip(r.addresses)
        {
            if let Some(a) = a {
                writeln!(f, "{field} = \"{a}\"")?;
            }
        }
        for (field, a) in ["ingress_address6", "egress_address6"]
            .iter()
            .zip(r.addresses6)
        {
            if let Some(a) = a {
                writeln!(f, "{field} = \"{a}\"")?;
            }
        }
        let plan = self.plan();
        for (i, c) in self.classes.iter().enumerate() {
            writeln!(f, "\n[[class]]")?;
            writeln!(f, "name = {}", toml_string(&c.name))?;
            let ring = plan.ring_of(i);
            writeln!(
                f,
                "budget = {}  # ring {ring}, polled with {} per visit",
                c.budget,
                plan.budget(ring)
            )?;
            if i == self.default_class {
                writeln!(f, "# default: frames no rule matches")?;
            } else {
                let rules: Vec<String> = c.rules.iter().map(crate::config::rule_toml).collect();
                writeln!(f, "match = [{}]", rules.join(", "))?;
            }
        }
        for rt in &self.routes {
            writeln!(f, "\n[[route]]")?;
            writeln!(f, "prefix = \"{}\"", rt.prefix)?;
            if let Some(v) = rt.via {
                writeln!(f, "via = \"{v}\"")?;
            }
            writeln!(f, "dev = {}", toml_string(&rt.dev))?;
        }
        for (ip, mac) in &self.neighbours {
            writeln!(f, "\n[[neighbour]]")?;
            writeln!(f, "ip = \"{ip}\"")?;
            writeln!(f, "mac = \"{}\"", mac_text(*mac))?;
        }
        if let Some(e) = &self.egress {
            write_egress(f, e)?;
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
        Ok(())
    }
}

/// `[egress]` and one `[[egress.class]]` per class, defaults filled in.
fn write_egress(f: &mut fmt::Formatter<'_>, e: &EgressSection) -> fmt::Result {
    writeln!(f, "\n[egress]")?;
    writeln!(f, "rate = \"{}\"", e.rate)?;
    writeln!(f, "overhead = {}", e.overhead)?;
    writeln!(f, "mpu = {}", e.mpu)?;
    writeln!(f, "algorithm = \"{}\"", e.algorithm.name())?;
    for c in &e.classes {
        writeln!(f, "\n[[egress.class]]")?;
        write_class_settings(f, c)?;
    }
    Ok(())
}
