//! Where a command's time goes, as `debug` lines of target
//! `command_timing` (off unless asked for, e.g.
//! `RUST_LOG=info,command_timing=debug`; `benches/harness` reads them):
//!
//! - `answered`: a command's reply left the core. `queued_ms` is the web
//!   handler's send → the core taking it (the core was busy: a round of
//!   inputs, a pass, a snapshot); `core_ms` the core taking it → its reply
//!   (its ZooKeeper write and the wait for the core to read the write's
//!   result included);
//! - `stored`: a ZooKeeper operation other than a task write ended (a
//!   command's write among them): `write_ms` is the operation itself
//!   (ZooKeeper serves a session's requests in order: task batches sent
//!   before it included);
//! - `result`: the core read that operation's result `waited_ms` after it
//!   came (the core was busy meanwhile);
//! - `round`: a round of the core (inputs drained, then the settle) took
//!   longer than [`SLOW_ROUND`], with its two parts (`drain_ms` counts
//!   from the input that woke the core) and its longest step (`step_ms`,
//!   `runner/steps.rs`): a command that arrives meanwhile waits for the
//!   step under way, or for the settle;
//! - `step`: one input fed to the machine took at least [`SLOW_STEP`] of
//!   wall time: its `kind` ([`Input::name`](crate::scheduler::core::io::Input::name))
//!   and `wall_ms`; with target `step_cpu` at debug too (e.g.
//!   `RUST_LOG=info,command_timing=debug,step_cpu=debug`), also the core
//!   thread's CPU time in the step, `cpu_ms`. Far less CPU than wall time
//!   means the thread waited for a core (a loaded machine), not that the
//!   machine's work was long. The CPU clock is off by default because it
//!   is a system call per step: at 100,000 tasks it added about 10 s of
//!   CPU to a 20 s launch on this project's test machine.
//!
//! The handler's side (`SchedulerHandle::request`) logs `received`: its
//! send → the answer in hand (`total_ms`); the rest of an HTTP answer's
//! time is the handler's own work and the response.

use std::time::{Duration, Instant};

use crate::scheduler::commands::Reply;
use crate::scheduler::core::io::StoreOp;

/// Rounds at least this long are logged.
pub(super) const SLOW_ROUND: Duration = Duration::from_millis(10);

/// A command the core took and has not answered yet.
pub(super) struct Waiting {
    pub(super) reply: Reply,
    kind: &'static str,
    sent_at: Instant,
    taken_at: Instant,
}

impl Waiting {
    /// A command of `kind` sent at `sent_at`, taken by the core now.
    pub(super) fn new(reply: Reply, kind: &'static str, sent_at: Instant) -> Waiting {
        Waiting {
            reply,
            kind,
            sent_at,
            taken_at: Instant::now(),
        }
    }

    /// Logs its times as it is answered.
    pub(super) fn answered(&self) {
        tracing::debug!(
            target: "command_timing",
            kind = self.kind,
            queued_ms = ms(self.taken_at.saturating_duration_since(self.sent_at)),
            core_ms = ms(self.taken_at.elapsed()),
            "answered"
        );
    }
}

/// Logs a ZooKeeper operation `op` (not a task write) that took `write`.
pub(super) fn stored(op: &'static str, write: Duration) {
    tracing::debug!(target: "command_timing", op, write_ms = ms(write), "stored");
}

/// `op`'s name in the `stored` lines.
pub(super) fn op_name(op: &StoreOp) -> &'static str {
    match op {
        StoreOp::ReadFrameworkId => "read_framework_id",
        StoreOp::StoreFrameworkId(_) => "store_framework_id",
        StoreOp::DeleteFrameworkId => "delete_framework_id",
        StoreOp::ReadDeployment => "read_deployment",
        StoreOp::WriteDeployment(..) => "write_deployment",
        StoreOp::ListServices => "list_services",
        StoreOp::PutService(..) => "put_service",
        StoreOp::DeleteService(..) => "delete_service",
        StoreOp::ListTasks => "list_tasks",
        StoreOp::ReadTask(_) => "read_task",
        StoreOp::PutTask(..) => "put_task",
        StoreOp::DeleteTask(..) => "delete_task",
        StoreOp::DeleteAllTasks => "delete_all_tasks",
        StoreOp::AppendAudit(_) => "append_audit",
        StoreOp::ListDrains => "list_drains",
        StoreOp::PutDrain(..) => "put_drain",
        StoreOp::ListJobs => "list_jobs",
        StoreOp::PutJob(..) => "put_job",
        StoreOp::DeleteJob(..) => "delete_job",
        StoreOp::ListRuns => "list_runs",
        StoreOp::PutRun(..) => "put_run",
        StoreOp::DeleteRun(..) => "delete_run",
    }
}

/// Logs that the core read an operation's result `waited` after it came.
pub(super) fn result_read(waited: Duration) {
    tracing::debug!(target: "command_timing", waited_ms = ms(waited), "result");
}

/// Logs a round that took `drain + settle` if that is at least
/// [`SLOW_ROUND`], with its longest step `step`.
pub(super) fn round(drain: Duration, settle: Duration, step: Duration) {
    if drain + settle >= SLOW_ROUND {
        tracing::debug!(
            target: "command_timing",
            drain_ms = ms(drain),
            settle_ms = ms(settle),
            step_ms = ms(step),
            "round"
        );
    }
}

/// Steps at least this long are logged (`step` lines).
const SLOW_STEP: Duration = Duration::from_millis(20);

/// Times one input fed to the machine when `command_timing` debug lines
/// are on, in wall time, and in this thread's CPU time when `step_cpu`
/// debug lines are on too: a step whose wall time is far above its CPU
/// time waited for a core (a loaded machine), not for the machine's work.
pub(super) struct StepClock(Option<(Instant, Option<Duration>)>);

impl StepClock {
    /// Starts the clock (a no-op unless `command_timing` is at debug).
    pub(super) fn start() -> StepClock {
        let on = tracing::enabled!(target: "command_timing", tracing::Level::DEBUG);
        StepClock(on.then(|| {
            let cpu = tracing::enabled!(target: "step_cpu", tracing::Level::DEBUG);
            (Instant::now(), cpu.then(thread_cpu))
        }))
    }

    /// Logs the step, of input `kind`, if it took at least [`SLOW_STEP`].
    pub(super) fn stop(self, kind: &'static str) {
        let Some((started, cpu)) = self.0 else {
            return;
        };
        let wall = started.elapsed();
        if wall >= SLOW_STEP {
            let cpu = cpu.map(|at| ms(thread_cpu().saturating_sub(at)));
            tracing::debug!(
                target: "command_timing",
                kind,
                wall_ms = ms(wall),
                cpu_ms = cpu,
                "step"
            );
        }
    }
}

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`); zero if unreadable.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Milliseconds with a tenth's precision.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}
