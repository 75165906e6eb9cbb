//! A timed network partition of one agent (fault API
//! `POST /testbed/agents/{agent_id}/partition {"seconds": N}`): the agent is
//! unreachable now, as after missed health checks (`master/unreachable.rs`,
//! captures q and s), and re-registers with its tasks after `seconds`, as a
//! real agent does once the network heals (`Master::_reregisterSlave` in
//! `src/master/master.cpp`; capture u run C shows the same with SIGSTOP and
//! SIGCONT of the agent).

use std::time::Duration;

use super::{AgentState, App, Master};

impl Master {
    /// Marks the agent unreachable and has it come back after `duration`.
    /// The heal applies only to this partition: if the agent came back
    /// (or was partitioned again, or marked gone) meanwhile, it does nothing.
    /// Returns false for an unknown agent.
    pub fn partition_agent(&mut self, agent_id: &str, duration: Duration) -> bool {
        if !self.agent_unreachable(agent_id) {
            return false;
        }
        let Some(index) = self.agent_index(agent_id) else {
            return false;
        };
        let AgentState::Unreachable { since_nanos } = self.agents[index].state else {
            return true;
        };
        tracing::info!(%agent_id, ?duration, "fault: agent partitioned");
        let master = self.this.clone();
        let agent_id = agent_id.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            let Some(shared) = master.upgrade() else {
                return;
            };
            let app = App(shared);
            let mut master = app.lock();
            let same = master
                .agent_index(&agent_id)
                .is_some_and(|i| master.agents[i].state == AgentState::Unreachable { since_nanos });
            if same {
                tracing::info!(%agent_id, "fault: partition healed");
                master.agent_reachable(&agent_id);
            }
        });
        true
    }
}
