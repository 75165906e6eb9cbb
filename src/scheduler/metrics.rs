//! Prometheus metrics of the scheduler core (served at `/metrics` by the web
//! layer in the OpenMetrics text format). Counters get `_total` appended by
//! the encoder.

use std::collections::HashMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::snapshot::ServiceStatus;

/// Prefix of every metric name the appliance exports, e.g.
/// `mesos_appliance_offers_total` (Prometheus naming: one application prefix).
pub const PREFIX: &str = "mesos_appliance";

/// An empty registry whose metrics take [`PREFIX`].
pub fn registry() -> Registry {
    Registry::with_prefix(PREFIX)
}

/// Labels of a status update.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpdateLabels {
    /// Mesos state name.
    pub state: String,
    /// Mesos source name.
    pub source: String,
    /// Mesos reason name, or `none`.
    pub reason: String,
}

/// What happened to an offer.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OfferLabels {
    /// `received`, `used`, `declined`, `expired`, `rescinded`.
    pub event: String,
}

/// A reconciliation run's kind and outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `explicit` or `implicit`.
    pub kind: String,
    /// `converged`, `aborted`, `superseded`, `cancelled`.
    pub outcome: String,
}

/// Labels of `tasks_health`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthLabels {
    /// `healthy` or `unhealthy` (the health check's last report).
    pub health: &'static str,
}

/// Labels of `rollouts`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    /// `in_progress` or `halted`.
    pub state: &'static str,
}

/// Labels of `job_runs`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobRunLabels {
    /// The job.
    pub job: String,
    /// The finished run's state (`succeeded`, `failed`, `killed`,
    /// `timed_out`, `skipped`, `missed`).
    pub outcome: String,
}

/// Labels of `job_start_lateness_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// The job.
    pub job: String,
}

/// Every metric the core updates. Clones share the underlying values.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Status updates received, by state, source and reason.
    pub status_updates: Family<UpdateLabels, Counter>,
    /// Offers by what happened to them.
    pub offers: Family<OfferLabels, Counter>,
    /// Tasks launched (sent in an ACCEPT).
    pub launches: Counter,
    /// KILL calls sent.
    pub kills: Counter,
    /// Reconciliation runs by kind and outcome.
    pub reconciliations: Family<ReconcileLabels, Counter>,
    /// Duration of finished reconciliation runs, seconds.
    pub reconciliation_seconds: Histogram,
    /// 1 while this replica holds a subscription; the sum over replicas must be 1.
    pub framework_subscribed: Gauge,
    /// 1 while this replica leads.
    pub leader: Gauge,
    /// Services whose rollout is under way, and halted (leader only).
    pub rollouts: Family<RolloutLabels, Gauge>,
    /// Live tasks by their health check's last report (leader only).
    pub tasks_health: Family<HealthLabels, Gauge>,
    /// Age of the oldest event read off the Mesos stream and not yet
    /// applied, seconds (leader only; 0 when none waits).
    pub event_lag_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Events read off the Mesos stream and not yet applied (leader only).
    pub event_inbox_depth: Gauge,
    /// Finished job runs by job and outcome.
    pub job_runs: Family<JobRunLabels, Counter>,
    /// Trigger time to the first attempt's TASK_RUNNING, seconds, by job.
    pub job_lateness: Family<JobLabels, Histogram, fn() -> Histogram>,
}

/// The buckets of `job_start_lateness_seconds`.
fn lateness_histogram() -> Histogram {
    Histogram::new([0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0])
}

impl Metrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            status_updates: Family::default(),
            offers: Family::default(),
            launches: Counter::default(),
            kills: Counter::default(),
            reconciliations: Family::default(),
            reconciliation_seconds: Histogram::new([0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0]),
            framework_subscribed: Gauge::default(),
            leader: Gauge::default(),
            rollouts: Family::default(),
            tasks_health: Family::default(),
            event_lag_seconds: Gauge::default(),
            event_inbox_depth: Gauge::default(),
            job_runs: Family::default(),
            job_lateness: Family::new_with_constructor(lateness_histogram as fn() -> Histogram),
        };
        // (name, help, metric): each clone shares the value the core updates.
        macro_rules! register {
            ($($name:literal, $help:literal => $metric:expr;)*) => {
                $(registry.register($name, $help, $metric.clone());)*
            };
        }
        register! {
            "status_updates", "Task status updates received" => m.status_updates;
            "offers", "Offers by what happened to them" => m.offers;
            "task_launches", "Tasks launched" => m.launches;
            "task_kills", "KILL calls sent" => m.kills;
            "reconciliations", "Reconciliation runs by kind and outcome" => m.reconciliations;
            "reconciliation_duration_seconds", "Duration of finished reconciliation runs"
                => m.reconciliation_seconds;
            "framework_subscribed", "1 while this replica holds the framework's subscription"
                => m.framework_subscribed;
            "leader", "1 while this replica is the elected leader" => m.leader;
            "rollouts",
                "Services whose rollout is in_progress, or halted (waiting for an operator)"
                => m.rollouts;
            "tasks_health", "Live tasks whose health check last reported healthy, or unhealthy"
                => m.tasks_health;
            "event_lag_seconds",
                "Age of the oldest event read off the Mesos stream and not yet applied, seconds"
                => m.event_lag_seconds;
            "event_inbox_depth", "Events read off the Mesos stream and not yet applied"
                => m.event_inbox_depth;
            "job_runs", "Finished job runs by job and outcome" => m.job_runs;
            "job_start_lateness_seconds",
                "Seconds from a job run's trigger to its first TASK_RUNNING" => m.job_lateness;
        }
        m
    }

    /// Sets the rollout and health gauges from the snapshot's services;
    /// `None` zeroes them (the term ended: only the leader reports).
    pub fn services(&self, services: Option<&[ServiceStatus]>) {
        let services = services.unwrap_or_default();
        let count = |f: &dyn Fn(&ServiceStatus) -> u32| services.iter().map(f).sum::<u32>();
        let halted = count(&|s| s.rollout.as_ref().is_some_and(|r| r.halted.is_some()) as u32);
        let rolling = count(&|s| s.rollout.is_some() as u32);
        for (state, n) in [("in_progress", rolling - halted), ("halted", halted)] {
            self.rollouts
                .get_or_create(&RolloutLabels { state })
                .set(n.into());
        }
        for (health, n) in [
            ("healthy", count(&|s| s.healthy)),
            ("unhealthy", count(&|s| s.unhealthy)),
        ] {
            self.tasks_health
                .get_or_create(&HealthLabels { health })
                .set(n.into());
        }
    }

    /// Counts one offer event.
    pub fn offer(&self, event: &str, n: u64) {
        self.offers
            .get_or_create(&OfferLabels {
                event: event.into(),
            })
            .inc_by(n);
    }

    /// Adds what the core counted since its last report and sets the
    /// gauges it keeps.
    pub fn record(&self, stats: &Stats) {
        self.framework_subscribed
            .set(i64::from(stats.framework_subscribed));
        self.event_lag_seconds.set(stats.event_lag_seconds);
        self.event_inbox_depth
            .set(i64::try_from(stats.event_inbox_depth).unwrap_or(i64::MAX));
        for (event, n) in &stats.offers {
            self.offer(event, *n);
        }
        if stats.launches > 0 {
            self.launches.inc_by(stats.launches);
        }
        if stats.kills > 0 {
            self.kills.inc_by(stats.kills);
        }
        for (labels, n) in &stats.status_updates {
            self.status_updates.get_or_create(labels).inc_by(*n);
        }
        for (labels, n) in &stats.reconciliations {
            self.reconciliations.get_or_create(labels).inc_by(*n);
        }
        for seconds in &stats.reconciliation_seconds {
            self.reconciliation_seconds.observe(*seconds);
        }
        for (job, outcome) in &stats.job_outcomes {
            self.job_runs
                .get_or_create(&JobRunLabels {
                    job: job.clone(),
                    outcome: (*outcome).to_string(),
                })
                .inc();
        }
        for (job, seconds) in &stats.job_lateness {
            self.job_lateness
                .get_or_create(&JobLabels { job: job.clone() })
                .observe(*seconds);
        }
    }
}

/// What the scheduler core counted for the metrics, as plain values: the
/// counts since the last `Machine::take_stats` (in `core/machine/stats.rs`),
/// and the gauges' current values. The runner takes them after each settle
/// and publishes them ([`Metrics::record`]); the core never touches the
/// registry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Gauge: the framework is subscribed.
    pub framework_subscribed: bool,
    /// Gauge: how far behind the Mesos stream the machine is, seconds.
    pub event_lag_seconds: f64,
    /// Gauge: events received and not applied yet.
    pub event_inbox_depth: usize,
    /// Offer events (`received`, `used`, `declined`, `expired`,
    /// `rescinded`, `dropped`) by event.
    pub offers: HashMap<&'static str, u64>,
    /// Tasks launched.
    pub launches: u64,
    /// KILL calls sent.
    pub kills: u64,
    /// Status updates by state, source and reason.
    pub status_updates: HashMap<UpdateLabels, u64>,
    /// Reconciliation runs ended, by kind and outcome.
    pub reconciliations: HashMap<ReconcileLabels, u64>,
    /// Durations of the runs that ended, seconds (one per run, so at most
    /// the runs of one batch between two takes).
    pub reconciliation_seconds: Vec<f64>,
    /// Job runs that finished: (job, outcome).
    pub job_outcomes: Vec<(String, &'static str)>,
    /// Job runs whose first attempt reached TASK_RUNNING: (job, seconds
    /// since the trigger).
    pub job_lateness: Vec<(String, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_with_their_names() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        m.framework_subscribed.set(1);
        m.offer("received", 3);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("framework_subscribed 1"), "{text}");
        assert!(
            text.contains("offers_total{event=\"received\"} 3"),
            "{text}"
        );
        let mut halted: ServiceStatus = serde_json::from_value(serde_json::json!({
            "spec": {"name": "web", "command": "x", "cpus": 0.1, "mem": 16, "instances": 2},
            "running": 2, "starting": 0, "killing": 0, "consecutive_failures": 0,
            "next_launch_after": null, "healthy": 1, "unhealthy": 1,
            "rollout": {"desired": 2, "replaced": 1, "healthy": 0, "remaining": 1,
                        "halted": {"at": 1.0, "reason": "r"}}
        }))
        .unwrap();
        let mut rolling = halted.clone();
        rolling.rollout.as_mut().unwrap().halted = None;
        halted.healthy = 2;
        m.services(Some(&[halted, rolling]));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "rollouts{state=\"halted\"} 1",
            "rollouts{state=\"in_progress\"} 1",
            "tasks_health{health=\"healthy\"} 3",
            "tasks_health{health=\"unhealthy\"} 2",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
        m.services(None);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("rollouts{state=\"halted\"} 0"), "{text}");
    }
}
