//! Process mode, event by event: how the agent relays LAUNCH, KILL, MESSAGE
//! and SHUTDOWN to a real executor, takes its SUBSCRIBE, UPDATE and MESSAGE
//! calls, and survives a restart. Sources: `src/slave/slave.cpp`
//! (`run`, `subscribe`, `statusUpdate`, `killTask`, `schedulerMessage`,
//! `shutdownExecutor`, `reregisterExecutorTimeout`), `src/slave/http.cpp`,
//! master.cpp (`disconnect`), `docs/mesos-protocol.md#executor-api`, captures
//! executor/, r.

use std::time::Duration;

use super::executor_api::open_stream;
use super::executors::runs_our_executor;
use crate::mesos::media::Encoding;
use crate::mesos::v1::executor::{Event, call as exec_call, event};
use crate::mesos::v1::scheduler::{self, call};
use crate::mesos::v1::{self, TaskState, task_status};
use crate::testbed::master::processes::{ExecutorTimer, ProcessState};
use crate::testbed::master::stream::RecordStream;
use crate::testbed::master::tasks::{KAMIKAZE, Task};
use crate::testbed::master::{Master, Timer, push_bounded};

/// Update UUIDs remembered per executor to drop re-sent duplicates.
const MAX_RECEIVED: usize = 4096;

fn executor_event(kind: event::Type) -> Event {
    Event {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

impl Master {
    /// LAUNCH hook: if the task's executor is ours and process mode is on,
    /// the task goes to a real executor process (started if needed), queued
    /// until it subscribes. Returns false to leave the task to the simulation.
    pub(super) fn process_launch(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        task_id: &str,
    ) -> bool {
        let key = (framework_id.to_string(), task_id.to_string());
        let Some(info) = self.tasks.get(&key).and_then(|t| t.info().executor) else {
            return false;
        };
        if self.cfg.run_executors.is_none() || !runs_our_executor(&info) {
            return false;
        }
        let executor_id = info.executor_id.value.clone();
        let container_id = match self.find_process(agent_index, framework_id, &executor_id) {
            Some(container_id) => container_id,
            None => match self.spawn_executor(agent_index, framework_id, &info) {
                Ok(container_id) => container_id,
                Err(message) => {
                    tracing::warn!(%executor_id, %message, "executor launch failed");
                    self.executor_terminated(
                        framework_id,
                        agent_index,
                        &executor_id,
                        None,
                        TaskState::TaskFailed,
                        task_status::Reason::ContainerLaunchFailed,
                        &message,
                    );
                    return true;
                }
            },
        };
        let Some(process) = self.processes.live.get(&container_id) else {
            return true;
        };
        let (pid, state) = (process.pid, process.state);
        let executor_key = (framework_id.to_string(), executor_id);
        if let Some(executor) = self.agents[agent_index].executors.get_mut(&executor_key) {
            executor.pid = pid;
            executor.container_id = container_id.clone();
        }
        let Some(task) = self.tasks.get_mut(&key) else {
            return true;
        };
        task.executor_pid = pid;
        task.container_id = container_id.clone();
        let info = task.info();
        match state {
            ProcessState::Subscribed => {
                let mut launch = executor_event(event::Type::Launch);
                launch.launch = Some(event::Launch { task: info });
                self.send_to_executor(&container_id, &launch);
            }
            ProcessState::Registering | ProcessState::Disconnected => {
                if let Some(process) = self.processes.live.get_mut(&container_id) {
                    process.queued.push(info);
                }
            }
            ProcessState::Terminating | ProcessState::Exited => {
                // slave.cpp run: a task for a terminating executor is lost.
                let task = self.tasks.get(&key).cloned();
                if let Some(task) = task {
                    let status = self.agent_status(
                        &task,
                        TaskState::TaskLost,
                        task_status::Reason::ExecutorTerminated,
                        "Executor terminating",
                    );
                    self.agent_update(framework_id, task_id, status);
                }
            }
        }
        true
    }

    /// KILL hook: a task not yet delivered to its executor is killed by the
    /// agent (TASK_KILLED / REASON_TASK_KILLED_DURING_LAUNCH); otherwise the
    /// executor gets KILL with the call's kill policy. False if not ours.
    pub(super) fn process_kill(
        &mut self,
        framework_id: &str,
        task: &Task,
        kill: &call::Kill,
    ) -> bool {
        if !task.custom_executor {
            return false;
        }
        let Some(agent_index) = self.agent_index(&task.agent_id) else {
            return false;
        };
        let Some(container_id) = self.find_process(agent_index, framework_id, &task.executor_id)
        else {
            return false;
        };
        let task_id = &task.task_id;
        let Some(process) = self.processes.live.get_mut(&container_id) else {
            return false;
        };
        if let Some(i) = process.queued.iter().position(|t| &t.task_id == task_id) {
            process.queued.remove(i);
            let status = self.agent_status(
                task,
                TaskState::TaskKilled,
                task_status::Reason::TaskKilledDuringLaunch,
                "Killed before delivery to the executor",
            );
            self.agent_update(framework_id, &task_id.value, status);
            return true;
        }
        let mut event = executor_event(event::Type::Kill);
        event.kill = Some(event::Kill {
            task_id: task_id.clone(),
            kill_policy: kill.kill_policy,
        });
        if !self.send_to_executor(&container_id, &event) {
            tracing::warn!(task_id = %task_id.value, "KILL dropped: executor not connected");
        }
        true
    }

    /// MESSAGE hook: delivered only to a subscribed executor (dropped
    /// otherwise, `docs/mesos-protocol.md#framework-messages`). False if the
    /// executor is not ours.
    pub(super) fn process_message(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        message: &call::Message,
    ) -> bool {
        let executor_id = &message.executor_id.value;
        let Some(container_id) = self.find_process(agent_index, framework_id, executor_id) else {
            return false;
        };
        let key = (framework_id.to_string(), executor_id.clone());
        if message.data != KAMIKAZE
            && let Some(executor) = self.agents[agent_index].executors.get_mut(&key)
        {
            executor.messages.push(message.data.clone());
        }
        let subscribed = self
            .processes
            .live
            .get(&container_id)
            .is_some_and(|p| p.state == ProcessState::Subscribed);
        if !subscribed {
            tracing::info!(%executor_id, "framework message dropped: executor not subscribed");
            return true;
        }
        let mut event = executor_event(event::Type::Message);
        event.message = Some(event::Message {
            data: message.data.clone(),
        });
        self.send_to_executor(&container_id, &event);
        true
    }

    /// SHUTDOWN hook. False if the executor is not ours.
    pub(super) fn process_shutdown(
        &mut self,
        framework_id: &str,
        agent_index: usize,
        executor_id: &str,
    ) -> bool {
        let Some(container_id) = self.find_process(agent_index, framework_id, executor_id) else {
            return false;
        };
        self.shutdown_process(&container_id);
        true
    }

    /// A removed framework's executors are shut down (slave.cpp
    /// shutdownFramework); no task updates follow
    /// (`docs/mesos-protocol.md#what-the-scheduler-sees-when-an-executor-exits`).
    pub(super) fn process_framework_removed(&mut self, framework_id: &str) {
        self.kill_framework_commands(framework_id);
        let containers: Vec<String> = self
            .processes
            .live
            .values()
            .filter(|p| p.framework_id == framework_id)
            .map(|p| p.container_id.clone())
            .collect();
        for container_id in containers {
            self.shutdown_process(&container_id);
        }
    }

    /// SHUTDOWN to the executor (now, or when it subscribes), and a destroy
    /// after its shutdown grace period.
    fn shutdown_process(&mut self, container_id: &str) {
        let default = self.cfg.executor_shutdown_grace_period;
        let Some(process) = self.processes.live.get_mut(container_id) else {
            return;
        };
        if process.state == ProcessState::Terminating {
            return;
        }
        let grace = process
            .info
            .shutdown_grace_period
            .as_ref()
            .map(|d| Duration::from_nanos(u64::try_from(d.nanoseconds).unwrap_or(0)))
            .unwrap_or(default);
        let subscribed = process.state == ProcessState::Subscribed;
        process.state = ProcessState::Terminating;
        if subscribed {
            self.send_to_executor(container_id, &executor_event(event::Type::Shutdown));
        }
        self.schedule(
            grace,
            Timer::Executor(ExecutorTimer::ShutdownGrace {
                container_id: container_id.to_string(),
            }),
        );
    }

    /// Queues an event on the executor's stream; false if it has none (or
    /// the queue is full, which cuts the stream).
    fn send_to_executor(&mut self, container_id: &str, event: &Event) -> bool {
        let Some(process) = self.processes.live.get_mut(container_id) else {
            return false;
        };
        let Some(stream) = &process.stream else {
            return false;
        };
        if stream.send(event) {
            return true;
        }
        tracing::warn!(container_id, "executor stream full or closed; cutting it");
        if let Some(stream) = process.stream.take() {
            stream.abort();
        }
        false
    }

    /// True unless the executor never subscribed (slave/http.cpp answers 403
    /// `Executor is not subscribed` to its other calls).
    pub(crate) fn process_subscribed(&self, container_id: &str) -> bool {
        self.processes
            .live
            .get(container_id)
            .is_some_and(|p| p.state != ProcessState::Registering)
    }

    /// SUBSCRIBE from the executor: SUBSCRIBED, then the LAUNCHes queued
    /// while it registered; re-sent updates go through the status update
    /// manager (duplicates dropped) and are ACKNOWLEDGED; an executor being
    /// shut down gets SHUTDOWN at once. A previous stream is replaced.
    pub(crate) fn executor_subscribed(
        &mut self,
        container_id: &str,
        subscribe: exec_call::Subscribe,
        encoding: Encoding,
    ) -> RecordStream {
        let this = self.this.clone();
        let Some(process) = self.processes.live.get_mut(container_id) else {
            return open_stream(this, container_id, 0, encoding).1;
        };
        process.next_token += 1;
        let (stream, body) = open_stream(this, container_id, process.next_token, encoding);
        process.stream = Some(stream);
        let terminating = process.state == ProcessState::Terminating;
        if !terminating {
            process.state = ProcessState::Subscribed;
        }
        let agent_index = process.agent_index;
        let mut framework_info = process.framework_info.clone();
        framework_info.id = Some(v1::FrameworkId {
            value: process.framework_id.clone(),
        });
        let agent = &self.agents[agent_index];
        let subscribed = event::Subscribed {
            executor_info: process.info.clone(),
            framework_info,
            agent_info: v1::AgentInfo {
                hostname: agent.spec.hostname.clone(),
                resources: agent.spec.resources.to_protos(None),
                attributes: agent.spec.attributes.clone(),
                id: Some(v1::AgentId {
                    value: agent.id.clone(),
                }),
                port: Some(agent.port as i32),
            },
            container_id: Some(v1::ContainerId {
                value: container_id.to_string(),
                parent: None,
            }),
        };
        let queued = std::mem::take(&mut process.queued);
        tracing::info!(
            executor_id = %process.executor_id,
            resent_updates = subscribe.unacknowledged_updates.len(),
            unacknowledged_tasks = subscribe.unacknowledged_tasks.len(),
            "executor subscribed"
        );
        let mut event = executor_event(event::Type::Subscribed);
        event.subscribed = Some(subscribed);
        self.send_to_executor(container_id, &event);
        for task in queued {
            let mut launch = executor_event(event::Type::Launch);
            launch.launch = Some(event::Launch { task });
            self.send_to_executor(container_id, &launch);
        }
        for update in subscribe.unacknowledged_updates {
            self.executor_update(container_id, update.status);
        }
        if terminating {
            self.send_to_executor(container_id, &executor_event(event::Type::Shutdown));
        }
        let waiting = self
            .processes
            .live
            .values()
            .any(|p| p.agent_index == agent_index && p.state == ProcessState::Disconnected);
        if !waiting && let Some(endpoint) = self.processes.endpoints.get_mut(agent_index) {
            endpoint.recovering = false;
        }
        body
    }

    /// UPDATE from the executor: the agent adds its ID and the container
    /// status (slave.cpp statusUpdate), hands a new update to its status
    /// update manager ([`Master::agent_update`]) and answers ACKNOWLEDGED at
    /// once — "the agent has it", not "the scheduler has it"
    /// (`docs/mesos-protocol.md#executor-calls-and-events`).
    pub(crate) fn executor_update(&mut self, container_id: &str, mut status: v1::TaskStatus) {
        let Some(process) = self.processes.live.get_mut(container_id) else {
            return;
        };
        let uuid = status.uuid.clone().unwrap_or_default();
        let duplicate = process.received.contains(&uuid);
        if !duplicate {
            push_bounded(&mut process.received, uuid.clone(), MAX_RECEIVED);
        }
        let framework_id = process.framework_id.clone();
        let pid = process.pid;
        let agent_id = self.agents[process.agent_index].id.clone();
        let task_id = status.task_id.clone();
        if !duplicate {
            status.agent_id = Some(v1::AgentId { value: agent_id });
            status.container_status = Some(v1::ContainerStatus {
                container_id: Some(v1::ContainerId {
                    value: container_id.to_string(),
                    parent: None,
                }),
                network_infos: vec![v1::NetworkInfo {
                    ip_addresses: vec![v1::network_info::IpAddress {
                        protocol: Some(v1::network_info::Protocol::IPv4 as i32),
                        ip_address: Some("127.0.0.1".into()),
                    }],
                    ..Default::default()
                }],
                executor_pid: Some(pid),
            });
            let key = (framework_id.clone(), task_id.value.clone());
            if self.tasks.contains_key(&key) {
                self.agent_update(&framework_id, &task_id.value, status);
            } else if let Some(task) = self.unreachable_tasks.get_mut(&key) {
                // Kept by the agent; forwarded when it is reachable again.
                task.pending.push_back(status);
            } else {
                tracing::info!(task_id = %task_id.value, "update for a task the master does not know; dropped");
            }
        }
        let mut ack = executor_event(event::Type::Acknowledged);
        ack.acknowledged = Some(event::Acknowledged { task_id, uuid });
        self.send_to_executor(container_id, &ack);
    }

    /// MESSAGE from the executor: to the scheduler as
    /// `MESSAGE{agent_id, executor_id, data}`, if it is connected.
    pub(crate) fn executor_message(&mut self, container_id: &str, data: Vec<u8>) {
        let Some(process) = self.processes.live.get(container_id) else {
            return;
        };
        let event = scheduler::Event {
            r#type: Some(scheduler::event::Type::Message as i32),
            message: Some(scheduler::event::Message {
                agent_id: v1::AgentId {
                    value: self.agents[process.agent_index].id.clone(),
                },
                executor_id: v1::ExecutorId {
                    value: process.executor_id.clone(),
                },
                data,
            }),
            ..Default::default()
        };
        let framework_id = process.framework_id.clone();
        self.send(&framework_id, &event);
    }

    /// The executor's subscription response ended (it hung up, or the
    /// stream was cut); stale tokens are ignored.
    pub(crate) fn executor_stream_closed(&mut self, container_id: &str, token: u64) {
        let Some(process) = self.processes.live.get_mut(container_id) else {
            return;
        };
        if process.stream.as_ref().is_some_and(|s| s.token == token) {
            process.stream = None;
            if process.state == ProcessState::Subscribed {
                process.state = ProcessState::Disconnected;
            }
        }
    }
}
