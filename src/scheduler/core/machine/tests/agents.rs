//! Agents drained, deactivated and lost (`agents`): a task the agent's drain
//! ended is acknowledged and replaced at once, without backoff and without
//! counting as a failure; nothing new goes to a draining, drained or
//! deactivated agent (its offers are declined with a long filter, cleared by
//! a REVIVE once it is active again); the agent table learns from
//! GET_AGENTS, offers, FAILURE and status updates.

use std::time::Duration;

use super::*;
use crate::mesos::operator::Agent as ListedAgent;
use crate::scheduler::records::is_live;
use crate::scheduler::snapshot::{AgentState, ReconcileKind};

/// A leader running `web` with `n` instances (instance `i` on `agent-i`),
/// their RUNNING updates seen.
fn leader(n: u32) -> Harness {
    leader_with(config(), n)
}

/// [`leader`] with configuration `cfg`.
fn leader_with(cfg: CoreConfig, n: u32) -> Harness {
    let spec = service("web", n);
    let tasks: Vec<TaskRecord> = (0..n).map(|i| running_record("web", i, &spec)).collect();
    let mut h = Harness::new(cfg, Some(FRAMEWORK), std::slice::from_ref(&spec), &tasks);
    h.start();
    h.answer_stores();
    h.subscribe();
    h.answer_all();
    for t in &tasks {
        let id = t.task_id.to_string();
        let mut update = status(&id, TaskState::TaskRunning, Some(&format!("{id}-r")));
        update.agent_id = Some(v1::AgentId {
            value: t.agent_id.to_string(),
        });
        h.update(update);
    }
    h.answer_all();
    h.drain_call_log();
    h
}

/// The executor's TASK_KILLED for the agent's drain (capture u).
pub(super) fn drained_kill(task: &str, agent: &str, state: TaskState) -> v1::TaskStatus {
    v1::TaskStatus {
        reason: Some(task_status::Reason::AgentDraining as i32),
        message: Some("Command terminated with signal Terminated".into()),
        agent_id: Some(v1::AgentId {
            value: agent.into(),
        }),
        ..status(task, state, Some(&format!("{task}-drain")))
    }
}

/// A GET_AGENTS entry.
pub(super) fn listed(agent: &str, deactivated: bool, drain: Option<v1::DrainState>) -> ListedAgent {
    ListedAgent {
        agent_info: v1::AgentInfo {
            hostname: format!("{agent}.test"),
            id: Some(v1::AgentId {
                value: agent.into(),
            }),
            ..Default::default()
        },
        active: !deactivated,
        deactivated: Some(deactivated),
        version: "1.12.0".into(),
        drain_info: drain.map(|state| v1::DrainInfo {
            state: state as i32,
            config: v1::DrainConfig {
                max_grace_period: None,
                mark_gone: Some(false),
            },
        }),
        ..Default::default()
    }
}

/// Answers the GET_AGENTS calls in flight with `agents`; other operator
/// calls as the harness does.
fn answer_agents(h: &mut Harness, agents: &[ListedAgent]) {
    let mut answered = 0;
    while let Some((id, op)) = h.operators.pop_front() {
        let answer = match op {
            OperatorOp::ListAgents { .. } => {
                answered += 1;
                OperatorAnswer::Agents(Ok(agents.to_vec()))
            }
            _ => OperatorAnswer::Frameworks(Ok(Frameworks::default())),
        };
        h.feed(Input::Operator { id, answer });
    }
    assert!(answered > 0, "no GET_AGENTS in flight");
    h.answer_all();
}

/// The agents of the tasks launched by the ACCEPTs in `calls`.
fn launched_on(calls: &[MesosCall]) -> Vec<String> {
    Harness::launched_infos(calls)
        .map(|t| t.agent_id.value.clone())
        .collect()
}

async fn agent_state(h: &mut Harness, agent: &str) -> Option<AgentState> {
    let s = h.snapshot().await;
    s.agents
        .iter()
        .find(|a| a.agent_id.as_str() == agent)
        .map(|a| a.state)
}

#[tokio::test(start_paused = true)]
async fn a_task_ended_by_the_drain_is_acknowledged_and_replaced_at_once_without_a_failure() {
    let mut h = leader(2);
    // Instance 0 failed once before: its count must stay 1.
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("f")));
    h.answer_all();
    h.advance(Duration::from_secs(3)).await;
    h.offer("o-1", "agent-5", 4.0);
    h.answer_all();
    let first = Harness::launched(&h.drain_call_log());
    assert_eq!(first.len(), 1, "{first:?}");
    let id = first[0].clone();
    let mut running = status(&id, TaskState::TaskRunning, Some("r"));
    running.agent_id = Some(v1::AgentId {
        value: "agent-5".into(),
    });
    h.update(running);
    h.answer_all();
    let before = h.snapshot().await.services[0].consecutive_failures;
    assert_eq!(before, 1);
    h.acks.clear();

    h.update(drained_kill(&id, "agent-5", TaskState::TaskKilled));
    h.answer_all();
    assert!(
        h.acks.iter().any(|a| a.task_id.as_str() == id),
        "the drain's TASK_KILLED is acknowledged: {:?}",
        h.acks
    );
    assert_eq!(
        agent_state(&mut h, "agent-5").await,
        Some(AgentState::Draining)
    );
    // An offer of the draining agent is declined; another agent's is used at once.
    h.drain_call_log();
    h.offer("o-2", "agent-5", 4.0);
    h.offer("o-3", "agent-7", 4.0);
    h.answer_all();
    let calls = h.drain_call_log();
    assert_eq!(launched_on(&calls), ["agent-7"], "{calls:?}");
    let s = h.snapshot().await;
    assert_eq!(s.services[0].consecutive_failures, before);
    assert!(s.services[0].next_launch_after.is_none());
}

#[tokio::test(start_paused = true)]
async fn gone_by_operator_after_a_drain_with_mark_gone_is_replaced_at_once() {
    let mut h = leader(1);
    h.update(drained_kill(
        "web.0.stored",
        "agent-0",
        TaskState::TaskGoneByOperator,
    ));
    h.answer_all();
    assert!(h.acks.iter().any(|a| a.task_id.as_str() == "web.0.stored"));
    h.feed(Input::AgentLost("agent-0".into()));
    assert_eq!(agent_state(&mut h, "agent-0").await, Some(AgentState::Gone));
    h.drain_call_log();
    h.offer("o-1", "agent-2", 4.0);
    h.answer_all();
    assert_eq!(launched_on(&h.drain_call_log()), ["agent-2"]);
    let s = h.snapshot().await;
    assert_eq!(s.services[0].consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn offers_of_held_agents_are_declined_until_get_agents_shows_them_active() {
    let mut h = leader(1);
    // GET_AGENTS is asked for at the first tick once subscribed.
    h.advance(Duration::from_secs(1)).await;
    answer_agents(
        &mut h,
        &[
            listed("agent-0", false, None),
            listed("agent-1", true, Some(v1::DrainState::Draining)),
            listed("agent-2", true, Some(v1::DrainState::Drained)),
            listed("agent-3", true, None),
        ],
    );
    assert_eq!(
        agent_state(&mut h, "agent-1").await,
        Some(AgentState::Draining)
    );
    assert_eq!(
        agent_state(&mut h, "agent-2").await,
        Some(AgentState::Drained)
    );
    assert_eq!(
        agent_state(&mut h, "agent-3").await,
        Some(AgentState::Deactivated)
    );
    assert_eq!(
        agent_state(&mut h, "agent-0").await,
        Some(AgentState::Active)
    );
    h.update(status("web.0.stored", TaskState::TaskFailed, Some("f")));
    h.answer_all();
    h.advance(Duration::from_secs(3)).await;
    h.drain_call_log();
    for agent in ["agent-1", "agent-2", "agent-3"] {
        h.offer(&format!("o-{agent}"), agent, 4.0);
    }
    h.answer_all();
    let calls = h.drain_call_log();
    assert!(launched_on(&calls).is_empty(), "{calls:?}");
    let declined: Vec<(usize, Option<f64>)> = calls
        .iter()
        .filter_map(|c| match c {
            MesosCall::Decline {
                offer_ids,
                refuse_seconds,
            } => Some((offer_ids.len(), *refuse_seconds)),
            _ => None,
        })
        .collect();
    assert_eq!(declined.iter().map(|d| d.0).sum::<usize>(), 3, "{calls:?}");
    assert!(declined.iter().all(|d| d.1 >= Some(600.0)), "{declined:?}");

    // The next poll: agent-3 is reactivated: REVIVE, and its offer is used.
    h.advance(Duration::from_secs(6)).await;
    answer_agents(
        &mut h,
        &[
            listed("agent-0", false, None),
            listed("agent-1", true, Some(v1::DrainState::Drained)),
            listed("agent-3", false, None),
        ],
    );
    assert_eq!(
        agent_state(&mut h, "agent-3").await,
        Some(AgentState::Active)
    );
    // Not listed any more: unreachable (or gone; the master does not say).
    assert_eq!(
        agent_state(&mut h, "agent-2").await,
        Some(AgentState::Unreachable)
    );
    let calls = h.drain_call_log();
    assert!(
        Harness::kinds_of_calls(&calls).contains(&"REVIVE"),
        "{calls:?}"
    );
    h.offer("o-back", "agent-3", 4.0);
    h.answer_all();
    assert_eq!(launched_on(&h.drain_call_log()), ["agent-3"]);
}

#[tokio::test(start_paused = true)]
async fn the_table_learns_from_offers_failures_and_updates() {
    let mut h = leader(1);
    h.offer("o-1", "agent-4", 0.01);
    h.answer_all();
    assert_eq!(
        agent_state(&mut h, "agent-4").await,
        Some(AgentState::Active)
    );
    h.feed(Input::AgentLost("agent-4".into()));
    assert_eq!(
        agent_state(&mut h, "agent-4").await,
        Some(AgentState::Unreachable)
    );
    // Back: the master re-sends RUNNING with REASON_AGENT_REREGISTERED.
    let mut back = reconciled("web.0.stored", TaskState::TaskRunning);
    back.reason = Some(task_status::Reason::AgentReregistered as i32);
    back.agent_id = Some(v1::AgentId {
        value: "agent-0".into(),
    });
    h.feed(Input::AgentLost("agent-0".into()));
    assert_eq!(
        agent_state(&mut h, "agent-0").await,
        Some(AgentState::Unreachable)
    );
    h.update(back);
    h.answer_all();
    assert_eq!(
        agent_state(&mut h, "agent-0").await,
        Some(AgentState::Active)
    );
    let s = h.snapshot().await;
    let entry = s
        .agents
        .iter()
        .find(|a| a.agent_id.as_str() == "agent-0")
        .unwrap();
    assert_eq!(*entry.tasks, ["web.0.stored"]);
    assert_eq!(entry.maintenance, None);
}

/// An agent held while a launch's records are being written: the ACCEPT
/// is not sent (the placement saw the agent active, the table holds it
/// now); the offer is declined for the hold and reconciliation settles the
/// written record. Found by the core's property tests.
#[tokio::test(start_paused = true)]
async fn no_accept_on_an_agent_held_while_the_launch_records_were_written() {
    let mut h = Harness::leader(&[service("web", 1)], &[]);
    h.subscribe();
    h.answer_all();
    h.advance(Duration::from_secs(1)).await;
    h.drain_call_log();
    h.offer("o-1", "agent-1", 4.0);
    assert!(!h.stores.is_empty(), "the launch's record is being written");
    answer_agents(
        &mut h,
        &[listed("agent-1", false, Some(v1::DrainState::Draining))],
    );
    let calls = h.drain_call_log();
    assert!(launched_on(&calls).is_empty(), "{calls:?}");
    assert!(
        calls.iter().any(|c| matches!(c,
            MesosCall::Decline { offer_ids, .. } if offer_ids == &["o-1".to_string()])),
        "{calls:?}"
    );
    let s = h.snapshot().await;
    assert_eq!(s.services[0].consecutive_failures, 0);
}

/// The live tasks of `s`'s task list by agent, as `s.agents` should show
/// them.
fn live_by_agent(s: &Snapshot) -> BTreeMap<String, Vec<String>> {
    let mut by_agent: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in &s.agents {
        by_agent.insert(a.agent_id.to_string(), Vec::new());
    }
    for t in s.tasks.iter().filter(|t| is_live(t)) {
        if let Some(tasks) = by_agent.get_mut(t.agent_id.as_str()) {
            tasks.push(t.task_id.to_string());
        }
    }
    by_agent
}

fn shown_by_agent(s: &Snapshot) -> BTreeMap<String, Vec<String>> {
    s.agents
        .iter()
        .map(|a| {
            let tasks = a.tasks.iter().map(ToString::to_string).collect();
            (a.agent_id.to_string(), tasks)
        })
        .collect()
}

/// A command's answer publishes a light snapshot with the last full one's
/// task list; its tasks by agent are that list's too, not counted again
/// from every record (a command's answer goes over no record: at 100,000
/// tasks that was milliseconds for every command). The next full snapshot
/// shows the change on both.
#[tokio::test(start_paused = true)]
async fn a_light_snapshot_shows_the_tasks_by_agent_of_its_task_list() {
    // Full snapshots at most once a second: none comes between the
    // failure and the command's answer (time is paused).
    let cfg = CoreConfig {
        snapshot_interval: Duration::from_secs(1),
        ..config()
    };
    let mut h = leader_with(cfg, 2);
    h.advance(Duration::from_secs(2)).await;
    // Something shown changed: a full snapshot now.
    h.feed(Input::Heartbeat);
    let full = h.snapshot.clone().expect("a full snapshot");
    assert_eq!(shown_by_agent(&full), live_by_agent(&full));
    assert_eq!(shown_by_agent(&full)["agent-1"], ["web.1.stored"]);
    h.update(status("web.1.stored", TaskState::TaskFailed, Some("f-1")));
    h.answer_stores();
    assert_eq!(
        h.stored("web.1.stored").map(|r| r.state),
        Some(TaskState::TaskFailed)
    );
    let id = h.command(Request::Reconcile(ReconcileKind::Explicit));
    assert!(h.reply(id).is_some());
    let light = h.snapshot.clone().expect("the answer's snapshot");
    let shown_running = |s: &Snapshot| {
        s.tasks
            .iter()
            .any(|t| t.task_id.as_str() == "web.1.stored" && is_live(t))
    };
    assert!(
        shown_running(&light),
        "the light snapshot's task list is the last full one's"
    );
    assert_eq!(shown_by_agent(&light), live_by_agent(&light));
    h.advance(Duration::from_secs(2)).await;
    let full = h.snapshot.clone().expect("a full snapshot");
    assert!(!shown_running(&full));
    assert_eq!(shown_by_agent(&full), live_by_agent(&full));
    assert!(shown_by_agent(&full)["agent-1"].is_empty());
}

/// The master's `registered_time` and `reregistered_time` (GET_AGENTS,
/// `Master::Http::getAgents`) are shown with each agent: unlike `since`,
/// which is this leader's own observation and starts again with its term,
/// they say how long the agent has been with the master. (Before, a new
/// leader showed only its own "since", seconds old after a failover.)
#[tokio::test(start_paused = true)]
async fn the_master_s_registration_times_are_shown_with_each_agent() {
    let mut h = leader(2);
    h.advance(Duration::from_secs(1)).await;
    // Before the master's list: the agents the updates named, and no
    // claim that this is the master's word.
    let s = h.snapshot().await;
    assert_eq!((s.agents.len(), s.agents_listed_at), (2, None));
    let mut a0 = listed("agent-0", false, None);
    a0.registered_time = Some(v1::TimeInfo {
        nanoseconds: 1_700_000_000_500_000_000,
    });
    let mut a1 = listed("agent-1", false, None);
    a1.registered_time = Some(v1::TimeInfo {
        nanoseconds: 1_700_000_000_000_000_000,
    });
    a1.reregistered_time = Some(v1::TimeInfo {
        nanoseconds: 1_700_000_100_000_000_000,
    });
    answer_agents(&mut h, &[a0, a1]);
    let s = h.snapshot().await;
    assert!(
        s.agents_listed_at.is_some_and(|t| t > 0.0 && t <= s.at),
        "{:?}",
        s.agents_listed_at
    );
    let times: Vec<(String, Option<f64>, Option<f64>)> = s
        .agents
        .iter()
        .map(|a| {
            (
                a.agent_id.to_string(),
                a.registered_time,
                a.reregistered_time,
            )
        })
        .collect();
    assert_eq!(
        times,
        [
            ("agent-0".into(), Some(1_700_000_000.5), None),
            (
                "agent-1".into(),
                Some(1_700_000_000.0),
                Some(1_700_000_100.0)
            ),
        ]
    );
}
