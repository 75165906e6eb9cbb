//! The framework lifecycle: subscription, scheduler failover, disconnection,
//! failover timeout, removal, and a simulated master failover.
//!
//! Sources: master.cpp (`subscribe`, `_subscribe`, `failoverFramework`,
//! `exited`, `frameworkFailoverTimeout`, `removeFramework`),
//! `docs/mesos-protocol.md#subscribe-and-the-framework-lifecycle` and the
//! real-master captures d, g, m, n, o.

use std::time::Duration;

use super::agent_side::AgentSide;
use super::stream::{self, RecordStream};
use super::{
    AgentState, Framework, Master, Timer, error_event, master_info, now_secs, push_bounded,
};
use crate::mesos::media::Encoding;
use crate::mesos::v1;
use crate::mesos::v1::scheduler::{Event, call, event};

impl Master {
    /// Handles a validated SUBSCRIBE and returns the stream ID and body of
    /// the 200 response. Refusals after this point are an ERROR event on that
    /// stream followed by its close (`docs/mesos-protocol.md#refusals-arrive-on-a-200-stream`).
    pub fn subscribe(
        &mut self,
        subscribe: call::Subscribe,
        encoding: Encoding,
    ) -> (String, RecordStream) {
        let stream_id = uuid::Uuid::new_v4().to_string();
        let mut info = subscribe.framework_info;
        let requested = info.id.as_ref().map(|id| id.value.clone());
        let framework_id = requested.clone().unwrap_or_else(|| {
            let id = format!("{}-{:04}", self.info.id, self.next_framework);
            self.next_framework += 1;
            id
        });
        let (sub, body) = stream::open(
            stream_id.clone(),
            encoding,
            self.cfg.stream_queue_bytes,
            self.faults.stream_latency.clone(),
            self.this.clone(),
            framework_id.clone(),
        );

        if let Some(message) = validate_framework_info(&info) {
            sub.send(&error_event(&message));
            return (stream_id, body);
        }
        if requested.is_some() && self.completed.iter().any(|f| f.id == framework_id) {
            // master.cpp subscribe: "Framework has been removed" while the ID is
            // in the bounded completed-frameworks cache.
            sub.send(&error_event("Framework has been removed"));
            return (stream_id, body);
        }
        if let Some(existing) = self.frameworks.get(&framework_id) {
            if existing.info.principal != info.principal {
                sub.send(&error_event(
                    "Changing framework's principal is not allowed.",
                ));
                return (stream_id, body);
            }
            // `user` and `checkpoint` cannot change; other fields are updated.
            info.user = existing.info.user.clone();
            info.checkpoint = existing.info.checkpoint;
        }
        info.id = Some(v1::FrameworkId {
            value: framework_id.clone(),
        });

        // Suppression becomes exactly the SUBSCRIBE's `suppressed_roles`: a
        // role not listed is revived, even one suppressed before a failover
        // (`Master::_subscribe` → `updateFramework`, then
        // `HierarchicalAllocatorProcess::updateFramework` in `hierarchical.cpp`).
        // The testbed offers one role per framework, so any listed role
        // suppresses it.
        let suppressed = !subscribe.suppressed_roles.is_empty();
        let now = now_secs();
        if self.frameworks.contains_key(&framework_id) {
            self.failover_framework(&framework_id);
            let framework = self
                .frameworks
                .get_mut(&framework_id)
                .expect("checked above");
            framework.info = info;
            framework.recovered = false;
            framework.reregistered_time = Some(now);
            framework.suppressed = suppressed;
        } else {
            let mut framework = Framework::new(framework_id.clone(), info);
            framework.suppressed = suppressed;
            framework.reregistered_time = Some(now);
            self.frameworks.insert(framework_id.clone(), framework);
        }
        let framework = self
            .frameworks
            .get_mut(&framework_id)
            .expect("inserted above");
        framework.generation += 1;
        framework.sub = Some(sub);

        let subscribed = Event {
            r#type: Some(event::Type::Subscribed as i32),
            subscribed: Some(event::Subscribed {
                framework_id: v1::FrameworkId {
                    value: framework_id.clone(),
                },
                heartbeat_interval_seconds: Some(self.cfg.heartbeat_interval.as_secs_f64()),
                master_info: Some(self.info.clone()),
            }),
            ..Default::default()
        };
        self.send(&framework_id, &subscribed);
        // The first HEARTBEAT follows SUBSCRIBED at once (master.cpp _subscribe).
        self.heartbeat(&framework_id, &stream_id);
        // A new framework triggers an allocation (hierarchical allocator addFramework).
        self.schedule(Duration::ZERO, Timer::Allocate { periodic: false });
        (stream_id, body)
    }

    /// A second subscription for a connected framework: the old stream gets
    /// ERROR "Framework failed over" and is closed; its offers are discarded
    /// without RESCIND (master.cpp failoverFramework, capture d). The
    /// framework is never deactivated on this path, so its decline filters
    /// stay (master.cpp `_failoverFramework` only discards offers; the
    /// allocator's `updateFramework` keeps the filters of the roles it keeps).
    pub(crate) fn failover_framework(&mut self, framework_id: &str) {
        if let Some(old) = self
            .frameworks
            .get_mut(framework_id)
            .and_then(|f| f.sub.take())
        {
            old.send(&error_event("Framework failed over"));
            drop(old);
        }
        self.remove_offers_of(framework_id);
    }

    /// The body of a subscription was dropped (the scheduler hung up).
    pub fn stream_closed(&mut self, framework_id: &str, stream_id: &str) {
        let current = self
            .frameworks
            .get(framework_id)
            .and_then(|f| f.sub.as_ref())
            .is_some_and(|s| s.stream_id == stream_id);
        if current {
            tracing::info!(%framework_id, "framework disconnected");
            self.disconnect(framework_id, false);
        }
    }

    /// Marks a framework disconnected and inactive: its offers are removed,
    /// its decline filters dropped, and its failover timer starts (master.cpp
    /// `exited`, `_exited`, `disconnect`, `deactivate`). With `abort` the
    /// connection is cut without a terminating chunk.
    pub fn disconnect(&mut self, framework_id: &str, abort: bool) {
        let Some(framework) = self.frameworks.get_mut(framework_id) else {
            return;
        };
        if let Some(sub) = framework.sub.take()
            && abort
        {
            sub.abort();
        }
        // Deactivation forgets the framework's offer filters, so a scheduler
        // that reconnects is offered what its previous connection declined
        // (`HierarchicalAllocatorProcess::deactivateFramework` in
        // `src/master/allocator/mesos/hierarchical.cpp`); its inverse-offer
        // filters go with its offers (`remove_offers_of`).
        framework.filters.clear();
        framework.generation += 1;
        let generation = framework.generation;
        let timeout = framework.info.failover_timeout.unwrap_or(0.0);
        self.remove_offers_of(framework_id);
        self.schedule(
            Duration::from_secs_f64(timeout.clamp(0.0, 1e9)),
            Timer::FailoverTimeout {
                framework_id: framework_id.to_string(),
                generation,
            },
        );
    }

    /// Removes a framework: its stream is closed without an event, its tasks
    /// are killed (TASK_KILLED / REASON_FRAMEWORK_REMOVED, recorded but not
    /// delivered) and it joins the bounded completed list (master.cpp
    /// `removeFramework`, captures g, h, m).
    pub fn remove_framework(&mut self, framework_id: &str) -> bool {
        let Some(mut framework) = self.frameworks.remove(framework_id) else {
            return false;
        };
        framework.sub = None;
        self.remove_offers_of(framework_id);
        self.agent_shutdown_framework(framework_id);
        let keys: Vec<_> = self
            .tasks
            .keys()
            .chain(self.unreachable_tasks.keys())
            .filter(|(f, _)| f == framework_id)
            .cloned()
            .collect();
        for key in keys {
            let task = self
                .tasks
                .remove(&key)
                .or_else(|| self.unreachable_tasks.remove(&key));
            if let Some(mut task) = task {
                self.release_task_resources(&mut task);
                task.state = v1::TaskState::TaskKilled;
                push_bounded(
                    &mut framework.completed_tasks,
                    task,
                    self.cfg.max_completed_tasks_per_framework,
                );
            }
        }
        for agent in &mut self.agents {
            let executors: Vec<_> = agent
                .executors
                .keys()
                .filter(|(f, _)| f == framework_id)
                .cloned()
                .collect();
            for key in executors {
                if let Some(executor) = agent.executors.remove(&key) {
                    agent.used.subtract(&executor.resources);
                }
            }
        }
        framework.unregistered_time = Some(now_secs());
        let limit = self.cfg.max_completed_frameworks;
        push_bounded(&mut self.completed, framework, limit);
        true
    }

    /// Simulates this master crashing and a new one taking over with the same
    /// agents (`docs/mesos-protocol.md#master-failover`, capture o): every stream is
    /// cut, offers vanish, frameworks and the completed list are forgotten
    /// (in-memory registry); the master gets a new ID; agents re-register after
    /// `reregister_delay`, bringing their frameworks back as "recovered".
    pub fn simulate_failover(&mut self, reregister_delay: Duration) {
        for framework in self.frameworks.values_mut() {
            if let Some(sub) = framework.sub.take() {
                sub.abort();
            }
            self.recovery_infos
                .insert(framework.id.clone(), framework.info.clone());
        }
        self.frameworks.clear();
        self.completed.clear();
        let offers: Vec<String> = self.offers.keys().cloned().collect();
        for id in offers {
            self.remove_offer(&id);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let address = self.info.address.clone().unwrap_or_default();
        self.info = master_info(
            &id,
            address.hostname.as_deref().unwrap_or("localhost"),
            self.cfg.listen.ip(),
            self.info.port as u16,
            &self.cfg.version,
        );
        self.next_framework = 0;
        self.next_offer = 0;
        self.elected_time = now_secs();
        self.epoch += 1;
        let epoch = self.epoch;
        for agent in &mut self.agents {
            if agent.state == AgentState::Registered {
                agent.state = AgentState::Recovering;
            }
        }
        let agent_ids: Vec<String> = self.agents.iter().map(|a| a.id.clone()).collect();
        for agent_id in agent_ids {
            self.schedule(reregister_delay, Timer::AgentReregister { agent_id, epoch });
        }
    }

    /// An agent re-registers with a new master: frameworks with tasks there
    /// become known again as recovered and inactive (capture o).
    pub(crate) fn agent_reregisters(&mut self, agent_id: &str) {
        let Some(agent) = self
            .agent_index(agent_id)
            .map(|index| &mut self.agents[index])
        else {
            return;
        };
        if agent.state != AgentState::Recovering {
            return;
        }
        agent.state = AgentState::Registered;
        let framework_ids: Vec<String> = self
            .tasks
            .on_agent(agent_id)
            .map(|((f, _), _)| f.clone())
            .collect();
        for framework_id in framework_ids {
            if self.frameworks.contains_key(&framework_id) {
                continue;
            }
            let Some(info) = self.recovery_infos.get(&framework_id).cloned() else {
                continue;
            };
            let mut framework = Framework::new(framework_id.clone(), info);
            framework.recovered = true;
            framework.registered_time = 0.0;
            self.frameworks.insert(framework_id, framework);
        }
    }
}

#[allow(deprecated)] // FrameworkInfo.role is what this check is about
/// Validation of a SUBSCRIBE's FrameworkInfo that is answered with an ERROR
/// event (master.cpp `validateFrameworkSubscription`,
/// `docs/mesos-protocol.md#frameworkinfo-fields-the-appliance-sets`).
fn validate_framework_info(info: &v1::FrameworkInfo) -> Option<String> {
    use v1::framework_info::capability::Type;
    let multi_role = info
        .capabilities
        .iter()
        .any(|c| c.r#type() == Type::MultiRole);
    if multi_role && info.role.is_some() {
        return Some(
            "'FrameworkInfo.role' must not be set when the framework is MULTI_ROLE capable".into(),
        );
    }
    if !multi_role && !info.roles.is_empty() {
        return Some(
            "'FrameworkInfo.roles' must not be set when the framework is not MULTI_ROLE capable"
                .into(),
        );
    }
    if let Some(timeout) = info.failover_timeout {
        // A stout Duration holds int64 nanoseconds.
        if !timeout.is_finite() || timeout < 0.0 || timeout * 1e9 > i64::MAX as f64 {
            return Some(format!(
                "The framework failover_timeout ({timeout}) is invalid"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::StreamExt;
    use prost::Message;

    use super::*;
    use crate::testbed::config::TestbedConfig;

    /// A subscriber that stops reading is cut off once its queue holds
    /// `stream_queue_bytes`, and no sooner: the bound is in bytes, not events.
    #[tokio::test]
    async fn a_subscriber_that_stops_reading_is_disconnected_at_the_byte_bound() {
        let mut cfg = TestbedConfig::for_tests(1);
        cfg.stream_queue_bytes = 64 * 1024;
        let master = Arc::new(Mutex::new(Master::new(cfg, 5050)));
        let mut body = {
            let mut m = master.lock().unwrap();
            m.this = Arc::downgrade(&master);
            let subscribe = call::Subscribe {
                framework_info: v1::FrameworkInfo {
                    user: "root".into(),
                    name: "slow".into(),
                    ..Default::default()
                },
                ..Default::default()
            };
            m.subscribe(subscribe, Encoding::Protobuf).1
        };
        // SUBSCRIBED and maybe a HEARTBEAT are queued; take them.
        let first = body.next().await.unwrap().unwrap();
        assert!(!first.is_empty());
        let update = crate::testbed::master::update_event(v1::TaskStatus {
            task_id: v1::TaskId {
                value: "t".repeat(200),
            },
            state: v1::TaskState::TaskRunning as i32,
            ..Default::default()
        });
        let size = crate::mesos::recordio::encode_record(&update.encode_to_vec()).len();
        let sent = {
            let mut m = master.lock().unwrap();
            let framework_id = m.frameworks.keys().next().unwrap().clone();
            let mut sent = 0;
            while m.send(&framework_id, &update) {
                sent += 1;
                assert!(sent < 10_000, "the queue is bounded");
            }
            // Everything still queued, ahead of the updates, is small.
            assert!(
                sent >= (64 * 1024 - 1024) / size,
                "{sent} updates of {size} bytes"
            );
            assert!(sent * size <= 64 * 1024);
            assert!(!m.frameworks[&framework_id].connected());
            sent
        };
        // The body ends with an error (cut), after what was queued.
        let mut records = 0;
        while let Some(item) = body.next().await {
            if item.is_err() {
                break;
            }
            records += 1;
        }
        assert!(records >= sent, "{records} records read, {sent} sent");
    }
}
