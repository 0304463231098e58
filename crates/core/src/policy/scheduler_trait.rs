//! [`Scheduler`] for [`PolicySched`]: flows, enqueue, dequeue and the next
//! release.

use super::member::{FlowParams, NO_PARENT, NODE, Slot};
use super::sched::PolicySched;
use super::shaper::next_tx;
use super::spec::Kind;
use crate::flow::{FlowConfig, FlowId, Pkt, Rejected};
use crate::sched::{ConfigError, Limits, Scheduler};
use crate::units::Nanos;

impl<T> Scheduler<T> for PolicySched<T> {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn add_flow_at(&mut self, node: usize, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        PolicySched::add_flow_at(self, node, cfg)
    }

    fn set_flow_params(
        &mut self,
        flow: FlowId,
        params: FlowParams,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        PolicySched::set_flow_params(self, flow, params, now)
    }

    fn limits(&self) -> Limits {
        Limits {
            max_len: u64::from(self.policy.max_len),
            max_flows: (NODE - 1) as u64,
            ..Limits::generic("policy")
        }
    }

    fn add_flow(&mut self, cfg: FlowConfig) -> Result<FlowId, ConfigError> {
        let node = match self.policy.attach {
            Some(n) => n,
            None => {
                let l = self.policy.leaves[self.next_leaf % self.policy.leaves.len()];
                self.next_leaf += 1;
                l
            }
        };
        self.add_flow_at(node, cfg)
    }

    fn change_flow(
        &mut self,
        flow: FlowId,
        cfg: FlowConfig,
        now: Nanos,
    ) -> Result<(), ConfigError> {
        let Some(_) = self.flows.config(flow) else {
            return Err(ConfigError::UnknownFlow(flow));
        };
        let node = self.fm[flow.index()].parent as usize;
        self.check(node, &cfg)?;
        self.flows.check_max_len(flow, cfg.max_len)?;
        let queued = self.fm[flow.index()].slot != Slot::Idle;
        if queued {
            self.detach(flow.0);
        }
        let m = &mut self.fm[flow.index()];
        m.weight = cfg.weight;
        m.prio = cfg.prio;
        self.flows.set_config(flow, cfg);
        if queued {
            self.activate(flow.0, now.as_u64(), false);
        }
        Ok(())
    }

    fn remove_flow(&mut self, flow: FlowId) -> Result<Vec<Pkt<T>>, ConfigError> {
        if !self.flows.contains(flow) {
            return Err(ConfigError::UnknownFlow(flow));
        }
        self.detach(flow.0);
        let bytes = self.fm[flow.index()].bytes;
        let mut n = self.fm[flow.index()].parent;
        while n != NO_PARENT {
            let m = &mut self.nm[n as usize];
            m.bytes -= bytes;
            n = m.parent;
        }
        let pkts: Vec<Pkt<T>> = self.flows.remove(flow);
        Ok(pkts)
    }

    fn enqueue(&mut self, pkt: Pkt<T>, now: Nanos) -> Result<(), Rejected<T>> {
        let (r, len) = (pkt.flow.0, pkt.len);
        let was_empty = self.flows.admit(pkt, false)?;
        // Backlog bytes along the path; children of pFabric nodes are
        // re-ranked (their remaining size changed).
        let len = u64::from(len);
        let mut c = r;
        loop {
            let m = self.member_mut(c);
            m.bytes += len;
            let (p, slot) = (m.parent, m.slot);
            if p == NO_PARENT {
                break;
            }
            if let (Kind::Pfabric { .. }, Slot::Queued(h)) = (self.nodes[p as usize].kind, slot) {
                let n = p as usize;
                self.nodes[n].q.remove(h);
                let rank = self.rank(n, c);
                let h = self.nodes[n].q.push(rank, c);
                self.member_mut(c).slot = Slot::Queued(h);
            }
            c = p | NODE;
        }
        if was_empty {
            self.activate(r, now.as_u64(), true);
        }
        Ok(())
    }

    fn dequeue(&mut self, now: Nanos) -> Option<Pkt<T>> {
        if self.flows.total_queued() == 0 {
            return None;
        }
        let now = now.as_u64();
        self.release(now);
        let root = self.root;
        let rm = &self.nm[root];
        if rm.limit.is_some() && rm.next_tx > now {
            return None;
        }
        let mut n = root;
        let mut path = core::mem::take(&mut self.path);
        path.clear();
        let f = loop {
            let Some(r) = self.pop(n, now) else {
                // Only reachable if the root is empty (all work parked).
                debug_assert!(path.is_empty());
                self.path = path;
                return None;
            };
            path.push((n as u32, r));
            if r & NODE == 0 {
                break r;
            }
            n = (r & !NODE) as usize;
        };
        let (pkt, _) = self.flows.pop(FlowId(f))?;
        let len = u64::from(pkt.len);
        for &(n, r) in path.iter().rev() {
            self.served(n as usize, r, len, now);
            if self.has_work(r) {
                self.enter(r, now, false);
            }
        }
        let rm = &mut self.nm[root];
        rm.bytes -= len;
        rm.sent += len;
        if let Some(rate) = rm.limit {
            let credit = rm.limit_credit(rate, u64::from(self.policy.max_len));
            (rm.next_tx, rm.next_tx_ahead) =
                next_tx(rm.next_tx, rm.next_tx_ahead, now, rate, len, credit);
        }
        self.path = path;
        Some(pkt)
    }

    fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        if self.flows.total_queued() == 0 {
            return None;
        }
        let rm = &self.nm[self.root];
        let root_at = if rm.limit.is_some() { rm.next_tx } else { 0 };
        let t = if !self.nodes[self.root].q.is_empty() {
            Some(root_at.max(now.as_u64()))
        } else {
            self.shaper.next().map(|t| t.max(root_at).max(now.as_u64()))
        };
        t.map(Nanos)
    }

    crate::sched::flow_table_views!(flows);
}
