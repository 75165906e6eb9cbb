//! The integration tests: one binary, one module per behaviour, sharing
//! [`support`] (compiled once).
//!
//! Modules are named by the part they exercise:
//! - `client_*`: the Mesos scheduler/operator clients and leader detection
//!   against the in-process `mesos-testbed`;
//! - `coordination_*`: election and stores on a real ZooKeeper server, and
//!   two replicas through the faults of a three-server ensemble
//!   (`coordination_ensemble`);
//! - `scheduler_*`: the scheduler core driving the testbed;
//! - `ctl`: `mesos-appliance ctl` as a process against real replicas;
//! - `deploy_*`: deployment strategies, scenarios, uninstall, the CLI and the
//!   deployment files, mostly as real processes;
//! - `executor_*`: `mesos-appliance-executor` under the testbed's process mode;
//! - `testbed_*`: `mesos-testbed` itself, checked against real Mesos captures;
//! - `web_*`, `e2e_dashboard`: the dashboard and JSON API, in process and in
//!   headless Chromium;
//! - `pymesos_client`, `wire_vectors`: clients and bytes nobody here wrote.
//!
//! Tests that need ZooKeeper start their own server on a free loopback port
//! ([`support::zookeeper::ZkServer`]) or ensemble
//! ([`support::zookeeper_ensemble::ZkEnsemble`]); the rest run on the
//! in-memory coordinator.

#[path = "../support/mod.rs"]
mod support;

mod client_auth;
mod client_leader_detection;
mod client_operator;
mod client_refusals;
mod client_subscription;
mod coordination_audit;
mod coordination_deployment_fence;
mod coordination_election;
mod coordination_ensemble;
mod coordination_harness;
mod coordination_mirror;
mod coordination_request_size;
mod coordination_slow_zookeeper;
mod coordination_stores;
mod ctl;
mod deploy_cli;
mod deploy_files;
mod deploy_scenarios;
mod deploy_strategies;
mod deploy_uninstall;
mod e2e_agents_drain;
mod e2e_dashboard;
mod executor_agent;
mod executor_tasks;
mod marathon;
mod pymesos_client;
mod scheduler_drain;
mod scheduler_failover;
mod scheduler_health;
mod scheduler_jobs;
mod scheduler_jobs_acceptance;
mod scheduler_maintenance;
mod scheduler_offers;
mod scheduler_partition;
mod scheduler_removed;
mod scheduler_revive;
mod scheduler_rollout;
mod scheduler_safety;
mod scheduler_sla_drain;
mod scheduler_standby;
mod scheduler_store;
mod scheduler_takeover;
mod scheduler_workload;
mod testbed_degraded;
mod testbed_drain;
mod testbed_election;
mod testbed_fault_api;
mod testbed_faults;
mod testbed_finite;
mod testbed_health;
mod testbed_inspection;
mod testbed_lifecycle;
mod testbed_maintenance;
mod testbed_offers;
mod testbed_operator;
mod testbed_tasks;
mod testbed_transport;
mod web_abdicate_audit;
mod web_actions;
mod web_agents;
mod web_api;
mod web_audit;
mod web_browser;
mod web_connections;
mod web_console;
mod web_events;
mod web_inputs;
mod web_jobs;
mod web_jobs_browser;
mod web_liveness;
mod web_logs;
mod web_openapi;
mod web_pages;
mod web_rollout;
mod web_services;
mod web_services_browser;
mod web_tls;
mod web_why;
mod wire_health_container;
mod wire_vectors;
