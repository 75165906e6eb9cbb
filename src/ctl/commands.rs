//! One function per subcommand of `mesos-appliance ctl`. Tables and
//! results go to standard output, progress and errors to standard error.

use std::io::{Read, Write};
use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::args::{
    AgentsCommand, ApplyArgs, AuditArgs, CtlArgs, CtlCommand, EventsArgs, Exit, JobsCommand,
    LogsArgs, ServicesCommand, TasksArgs,
};
use super::client::{Client, CtlError, query_value, segment};
use super::render;
use super::rollout::{Verdict, judge};
use super::sse::SseParser;

/// Retry bound of a command without `--timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Retry and wait bound of `apply --wait` without `--timeout`.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest spec file read.
pub const MAX_SPEC_FILE: u64 = 4 * 1024 * 1024;
/// How often `apply --wait` and `logs --follow` ask again.
const POLL: Duration = Duration::from_secs(1);

/// Runs the command; prints its output or its error; returns the exit code.
pub async fn run(args: CtlArgs) -> Exit {
    if let CtlCommand::Completion { shell } = args.command {
        let script = completion(shell);
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(&script).and_then(|()| stdout.flush());
        return Exit::Ok;
    }
    let waits = matches!(
        &args.command,
        CtlCommand::Services(ServicesCommand::Apply(ApplyArgs { wait: true, .. }))
            | CtlCommand::Services(ServicesCommand::Restart { wait: true, .. })
            | CtlCommand::Jobs(JobsCommand::Run { wait: true, .. })
    );
    let timeout = args.global.timeout.unwrap_or(if waits {
        DEFAULT_WAIT_TIMEOUT
    } else {
        DEFAULT_TIMEOUT
    });
    let result = match Client::new(&args.global, timeout) {
        Ok(client) => dispatch(&client, args.command, args.global.json).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("{e}");
            e.exit()
        }
    }
}

async fn dispatch(client: &Client, command: CtlCommand, json: bool) -> Result<(), CtlError> {
    match command {
        CtlCommand::Services(c) => services(client, c, json).await,
        CtlCommand::Tasks(a) => tasks(client, a, json).await,
        CtlCommand::Logs(a) => logs(client, a, json).await,
        CtlCommand::Events(a) => events(client, a, json).await,
        CtlCommand::Audit(a) => audit(client, a, json).await,
        CtlCommand::Agents(AgentsCommand::List) => {
            let view = client.get("/api/v1/agents").await?;
            show(json, &view, render::agents);
            Ok(())
        }
        CtlCommand::Agents(AgentsCommand::Drain {
            agent,
            min_healthy,
            then,
            why,
        }) => {
            // `50%` is the API's string form; a bare number is a count.
            let floor = min_healthy
                .parse::<u32>()
                .map_or_else(|_| json!(min_healthy), |n| json!(n));
            let body = json!({"min_healthy": floor, "then": then, "reason": why});
            let path = format!("/api/v1/agents/{}/drain", segment(&agent));
            let (_, answer) = client.call(Method::POST, &path, Some(&body)).await?;
            show(json, &answer, summary);
            Ok(())
        }
        CtlCommand::Agents(AgentsCommand::Cancel { agent, why }) => {
            let body = json!({"reason": why});
            let path = format!("/api/v1/agents/{}/drain", segment(&agent));
            let (_, answer) = client.call(Method::DELETE, &path, Some(&body)).await?;
            show(json, &answer, summary);
            Ok(())
        }
        CtlCommand::Jobs(JobsCommand::List) => {
            let view = client.get("/api/v1/jobs").await?;
            show(json, &view, render::jobs);
            Ok(())
        }
        CtlCommand::Jobs(JobsCommand::Show { name }) => {
            let view = client.get(&job_path(&name)).await?;
            show(json, &view, render::job);
            Ok(())
        }
        CtlCommand::Jobs(JobsCommand::Kill { name, run, why }) => {
            let path = format!(
                "{}/runs/{}/kill{}",
                job_path(&name),
                segment(&run),
                reason(why.as_deref())
            );
            let (_, answer) = client.call(Method::POST, &path, None).await?;
            show(json, &answer, |r| {
                format!(
                    "job {name} run {run} being killed ({})",
                    r["state"].as_str().unwrap_or("?")
                )
            });
            Ok(())
        }
        CtlCommand::Jobs(JobsCommand::Enable { name, why }) => {
            set_job_enabled(client, &name, true, why.as_deref(), json).await
        }
        CtlCommand::Jobs(JobsCommand::Disable { name, why }) => {
            set_job_enabled(client, &name, false, why.as_deref(), json).await
        }
        CtlCommand::Jobs(JobsCommand::Run {
            name,
            args,
            env,
            why,
            wait,
        }) => {
            let env: serde_json::Map<String, Value> =
                env.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let body = json!({"args": args, "env": env});
            let path = format!(
                "/api/v1/jobs/{}/runs{}",
                segment(&name),
                reason(why.as_deref())
            );
            let (_, answer) = client.call(Method::POST, &path, Some(&body)).await?;
            let line = |run: &Value| {
                format!(
                    "job {name} run {} {}",
                    run["run_id"].as_str().unwrap_or("?"),
                    run["state"].as_str().unwrap_or("started")
                )
            };
            if !wait {
                show(json, &answer, line);
                return Ok(());
            }
            if !json {
                out(&line(&answer));
            }
            let run_id = answer["run_id"].as_str().unwrap_or_default().to_string();
            let done = wait_for_run(client, &name, &run_id, json).await?;
            show(json, &done, line);
            Ok(())
        }
        CtlCommand::Completion { .. } => Ok(()),
    }
}

/// The completion script of `shell` for `mesos-appliance ctl …` (a
/// `mesos-appliance` command whose one subcommand is `ctl`).
pub fn completion(shell: clap_complete::Shell) -> Vec<u8> {
    let ctl = super::args::command()
        .name("ctl")
        .bin_name("mesos-appliance ctl");
    let mut cmd = clap::Command::new("mesos-appliance")
        .bin_name("mesos-appliance")
        .subcommand(ctl);
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "mesos-appliance", &mut script);
    script
}

/// Writes `text` and a newline to standard output; false once it is closed
/// (e.g. a pipe into `head`).
fn out(text: &str) -> bool {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .is_ok()
}

/// An action record's `summary` (the actions API's answer).
fn summary(record: &Value) -> String {
    record["summary"]
        .as_str()
        .map_or_else(|| record.to_string(), str::to_string)
}

/// Prints `value` as JSON with `--json`, else as `table` renders it.
fn show(json: bool, value: &Value, table: impl Fn(&Value) -> String) {
    if json {
        out(&serde_json::to_string_pretty(value).unwrap_or_default());
    } else {
        out(table(value).trim_end());
    }
}

/// `?reason=…` for `why`, or nothing.
fn reason(why: Option<&str>) -> String {
    why.map(|w| format!("?reason={}", query_value(w)))
        .unwrap_or_default()
}

fn service_path(name: &str) -> String {
    format!("/api/v1/services/{}", segment(name))
}

async fn services(client: &Client, command: ServicesCommand, json: bool) -> Result<(), CtlError> {
    match command {
        ServicesCommand::List => {
            let view = client.get("/api/v1/services").await?;
            show(json, &view, render::services);
        }
        ServicesCommand::Show { name } => {
            let row = client.get(&service_path(&name)).await?;
            show(json, &row, render::service);
        }
        ServicesCommand::Apply(a) => {
            let specs = read_specs(&a.file)?;
            apply(client, specs, a.why.as_deref(), a.wait, json).await?;
        }
        ServicesCommand::Scale {
            name,
            instances,
            why,
        } => scale(client, &name, instances, why.as_deref(), json).await?,
        ServicesCommand::Restart { name, why, wait } => {
            restart(client, &name, why.as_deref(), wait, json).await?;
        }
        ServicesCommand::Delete { name, why } => {
            let path = format!("{}{}", service_path(&name), reason(why.as_deref()));
            let (_, answer) = client.call(Method::DELETE, &path, None).await?;
            show(json, &answer, |_| format!("service {name} deleted"));
        }
    }
    Ok(())
}

fn job_path(name: &str) -> String {
    format!("/api/v1/jobs/{}", segment(name))
}

/// `jobs enable` / `jobs disable`.
async fn set_job_enabled(
    client: &Client,
    name: &str,
    enabled: bool,
    why: Option<&str>,
    json: bool,
) -> Result<(), CtlError> {
    let verb = if enabled { "enable" } else { "disable" };
    let path = format!("{}/{verb}{}", job_path(name), reason(why));
    let (_, answer) = client.call(Method::POST, &path, None).await?;
    show(json, &answer, |a| {
        format!("job {name} {}", a["outcome"].as_str().unwrap_or(verb))
    });
    Ok(())
}

/// How long `--wait` lets the replica it asks not show a change the
/// leader accepted before it concludes the service (run) was deleted or
/// the change replaced by a later one: continuously, counted from the
/// start or from the last time it was shown. A follower reads ZooKeeper
/// within a second or two, but across a leader failover the replicas show
/// nothing until the new leader has read the records (the session timeout
/// and then some): an absence shorter than this proves nothing.
const NOT_SHOWN_GRACE: Duration = Duration::from_secs(20);

/// `jobs run --wait`: polls the run every second until it is finished
/// (`docs/jobs.md#run-states`); the run when it `succeeded`, else
/// [`CtlError::RunEnded`]; [`CtlError::TimedOut`] past the deadline.
async fn wait_for_run(
    client: &Client,
    job: &str,
    run_id: &str,
    json: bool,
) -> Result<Value, CtlError> {
    let path = format!("{}/runs/{}", job_path(job), segment(run_id));
    let mut said = String::new();
    let mut missing_since = Some(Instant::now());
    loop {
        let run = match client.get(&path).await {
            Ok(run) => {
                missing_since = None;
                run
            }
            // A replica that has not read the run yet — or the run (its
            // job) was deleted.
            Err(CtlError::Api { status: 404, .. }) => {
                let since = *missing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > NOT_SHOWN_GRACE {
                    return Err(CtlError::Gone(format!(
                        "job {job} run {run_id} was deleted while waiting for it \
                         (was the job deleted?)"
                    )));
                }
                Value::Null
            }
            Err(e) => return Err(e),
        };
        let state = run["state"].as_str().unwrap_or("starting").to_string();
        match state.as_str() {
            "succeeded" => return Ok(run),
            "starting" | "running" => {
                if state != said && !json {
                    eprintln!("job {job} run {run_id}: {state}");
                }
                said = state;
            }
            _ => {
                if json {
                    out(&serde_json::to_string_pretty(&run).unwrap_or_default());
                }
                return Err(CtlError::RunEnded {
                    job: job.to_string(),
                    run: run_id.to_string(),
                    reason: run["reason"].as_str().unwrap_or("no reason given").into(),
                    state,
                });
            }
        }
        if Instant::now() + POLL >= client.deadline() {
            return Err(CtlError::TimedOut(format!(
                "job {job} run {run_id} not finished within the timeout (still {said})"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `services restart`: `POST /api/v1/services/{name}/restart` (a rolling
/// restart, `docs/cli.md#services`); with `wait`, polls as `apply --wait`
/// until the service shows the next restart generation and its rollout is
/// complete (or halted).
async fn restart(
    client: &Client,
    name: &str,
    why: Option<&str>,
    wait: bool,
    json: bool,
) -> Result<(), CtlError> {
    let before = client.get(&service_path(name)).await?;
    let generation = before["restart_generation"].as_u64().unwrap_or(0);
    let body = json!({ "reason": why });
    let path = format!("{}/restart", service_path(name));
    let (_, answer) = client.call(Method::POST, &path, Some(&body)).await?;
    if !wait {
        show(json, &answer, summary);
        return Ok(());
    }
    if !json {
        out(&summary(&answer));
    }
    // What the row must show: the next generation (a replica may not show
    // the restart yet right after the 202).
    let target = json!({ "name": name, "restart_generation": generation + 1 });
    let verdicts = wait_for(client, std::slice::from_ref(&target), json).await?;
    if json {
        let result = json!({
            "name": name, "outcome": "restarted", "rollout": "complete",
            "status": verdicts.first(), "action": answer,
        });
        out(&serde_json::to_string_pretty(&result).unwrap_or_default());
    }
    Ok(())
}

/// The stored spec of `name` (the `spec` of its row), refused when the API
/// hid a URI password in it: sending it back would store `***`.
/// `services scale`: reads the service, puts its spec with `instances`
/// conditioned on the version read (`If-Match`). A replica behind the
/// leader (a follower, a new leader still reading ZooKeeper) can show an
/// older spec; the leader refuses a change made on it (412) rather than
/// undo a change it did not see, and the scale reads again, until the
/// client's deadline.
async fn scale(
    client: &Client,
    name: &str,
    instances: u32,
    why: Option<&str>,
    json: bool,
) -> Result<(), CtlError> {
    let path = format!("{}{}", service_path(name), reason(why));
    loop {
        let row = client.get(&service_path(name)).await?;
        let mut spec = spec_of(&row, name)?;
        spec["instances"] = json!(instances);
        let version = row["version"].as_str().unwrap_or_default();
        let condition = [("if-match", format!("\"{version}\""))];
        match client
            .call_with(Method::PUT, &path, Some(&spec), &condition)
            .await
        {
            Ok((_, answer)) => {
                let outcome = answer["outcome"].as_str().unwrap_or("applied");
                // As `apply` shows its results: a list.
                show(json, &json!([{"name": name, "outcome": outcome}]), |_| {
                    format!("service {name} {outcome}")
                });
                return Ok(());
            }
            Err(CtlError::Api { status: 412, .. })
                if Instant::now() + SCALE_REREAD < client.deadline() =>
            {
                tokio::time::sleep(SCALE_REREAD).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// How long `services scale` waits before it reads a service again after
/// the leader refused a change made on an older spec.
const SCALE_REREAD: Duration = Duration::from_millis(500);

/// The spec of `row` (`GET /api/v1/services/{name}`), to change and put
/// back; refused when a URI's password was redacted (putting it back would
/// store the redaction).
fn spec_of(row: &Value, name: &str) -> Result<Value, CtlError> {
    let spec = row["spec"].clone();
    if !spec.is_object() {
        return Err(CtlError::Usage(format!(
            "the API gave no spec for service {name}"
        )));
    }
    let redacted = spec["uris"].as_array().into_iter().flatten().any(|u| {
        u["value"]
            .as_str()
            .is_some_and(|v| v.contains(crate::util::zk::url::REDACTED))
    });
    if redacted {
        return Err(CtlError::Usage(format!(
            "service {name} fetches a URI with a password the API does not show; \
             change it with `services apply -f` and the full spec"
        )));
    }
    Ok(spec)
}

/// Reads a spec file (`-`: standard input): one JSON object or an array of
/// them, each with a `name` of its own.
fn read_specs(path: &std::path::Path) -> Result<Vec<Value>, CtlError> {
    let what = path.display();
    let mut text = String::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_SPEC_FILE + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_SPEC_FILE + 1).read_to_string(&mut text))
    };
    read.map_err(|e| CtlError::Usage(format!("{what}: {e}")))?;
    if text.len() as u64 > MAX_SPEC_FILE {
        return Err(CtlError::Usage(format!(
            "{what}: larger than {MAX_SPEC_FILE} bytes"
        )));
    }
    let value: Value =
        serde_json::from_str(&text).map_err(|e| CtlError::Usage(format!("{what}: {e}")))?;
    let specs = match value {
        Value::Array(specs) => specs,
        one @ Value::Object(_) => vec![one],
        _ => {
            return Err(CtlError::Usage(format!(
                "{what}: not a service spec (a JSON object) or an array of them"
            )));
        }
    };
    for (i, spec) in specs.iter().enumerate() {
        let Some(name) = spec["name"].as_str().filter(|n| !n.is_empty()) else {
            return Err(CtlError::Usage(format!("{what}: [{i}].name: missing")));
        };
        // As a `--services` file: each service once (applied in turn, a
        // second spec would replace the first).
        if let Some(first) = specs[..i].iter().position(|s| s["name"] == name) {
            return Err(CtlError::Usage(format!(
                "{what}: [{i}].name: {name:?} is [{first}]'s too; give each service once"
            )));
        }
    }
    if specs.is_empty() {
        return Err(CtlError::Usage(format!("{what}: no service in it")));
    }
    Ok(specs)
}

/// PUTs each spec, then with `wait` follows every rollout ([`wait_for`]).
async fn apply(
    client: &Client,
    specs: Vec<Value>,
    why: Option<&str>,
    wait: bool,
    json: bool,
) -> Result<(), CtlError> {
    let mut results = Vec::new();
    for spec in &specs {
        let name = spec["name"].as_str().unwrap_or_default();
        let path = format!("{}{}", service_path(name), reason(why));
        let (_, answer) = client.call(Method::PUT, &path, Some(spec)).await?;
        let outcome = answer["outcome"].as_str().unwrap_or("applied").to_string();
        if !json {
            out(&format!("service {name} {outcome}"));
        }
        results.push(json!({"name": name, "outcome": outcome}));
    }
    if wait {
        let verdicts = wait_for(client, &specs, json).await?;
        for (result, line) in results.iter_mut().zip(verdicts) {
            result["rollout"] = json!("complete");
            result["status"] = json!(line);
        }
    }
    if json {
        out(&serde_json::to_string_pretty(&Value::Array(results)).unwrap_or_default());
    }
    Ok(())
}

/// Polls each applied service until its rollout is done, halted or the
/// client's deadline passes (`rollout` module). Progress goes to standard
/// error when it changes. Returns the final line of each.
async fn wait_for(client: &Client, specs: &[Value], json: bool) -> Result<Vec<String>, CtlError> {
    let mut done: Vec<Option<String>> = vec![None; specs.len()];
    let mut said: Vec<String> = vec![String::new(); specs.len()];
    // Since when each service has not shown the applied spec.
    let mut missing_since = vec![Some(Instant::now()); specs.len()];
    loop {
        for (i, spec) in specs.iter().enumerate() {
            if done[i].is_some() {
                continue;
            }
            let name = spec["name"].as_str().unwrap_or_default();
            let verdict = match client.get(&service_path(name)).await {
                Ok(row) => judge(&row, spec),
                // A replica that has not seen the new service yet — or the
                // service was deleted.
                Err(CtlError::Api { status: 404, .. }) => {
                    if missing_since[i].is_some_and(|t| t.elapsed() > NOT_SHOWN_GRACE) {
                        return Err(CtlError::Gone(format!(
                            "service {name} was deleted while waiting for its rollout"
                        )));
                    }
                    missing_since[i].get_or_insert_with(Instant::now);
                    Verdict::NotShown(format!("service {name}: not shown"))
                }
                Err(e) => return Err(e),
            };
            if let Verdict::NotShown(_) = &verdict {
                if missing_since[i].is_some_and(|t| t.elapsed() > NOT_SHOWN_GRACE) {
                    return Err(CtlError::Gone(format!(
                        "service {name} was changed again by another request while waiting: \
                         its rollout is no longer this apply's (see `ctl services show {name}`)"
                    )));
                }
                missing_since[i].get_or_insert_with(Instant::now);
            } else {
                missing_since[i] = None;
            }
            match verdict {
                Verdict::Halted(reason) => {
                    if json {
                        out(
                            &json!({"name": name, "rollout": "halted", "reason": reason})
                                .to_string(),
                        );
                    }
                    return Err(CtlError::Halted {
                        service: name.to_string(),
                        reason,
                    });
                }
                Verdict::Done(line) => {
                    if !json {
                        out(&format!("{line}: rollout complete"));
                    }
                    done[i] = Some(line);
                }
                Verdict::Waiting(line) | Verdict::NotShown(line) => {
                    if line != said[i] {
                        eprintln!("{line}");
                        said[i] = line;
                    }
                }
            }
        }
        if done.iter().all(Option::is_some) {
            return Ok(done.into_iter().flatten().collect());
        }
        if Instant::now() + POLL >= client.deadline() {
            let pending: Vec<&str> = specs
                .iter()
                .zip(&done)
                .filter(|(_, d)| d.is_none())
                .filter_map(|(s, _)| s["name"].as_str())
                .collect();
            return Err(CtlError::TimedOut(format!(
                "the rollout of {} did not finish within --timeout ({})",
                pending.join(", "),
                said.iter()
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn tasks(client: &Client, a: TasksArgs, json: bool) -> Result<(), CtlError> {
    let mut query = vec!["per_page=10000".to_string()];
    if let Some(service) = &a.service {
        query.push(format!("service={}", query_value(service)));
    }
    if let Some(state) = &a.state {
        query.push(format!("state={}", query_value(state)));
    }
    let view = client
        .get(&format!("/api/v1/tasks?{}", query.join("&")))
        .await?;
    show(json, &view, render::tasks);
    Ok(())
}

async fn audit(client: &Client, a: AuditArgs, json: bool) -> Result<(), CtlError> {
    let mut query = vec![format!("limit={}", a.limit)];
    if let Some(who) = &a.who {
        query.push(format!("who={}", query_value(who)));
    }
    if let Some(action) = &a.action {
        query.push(format!("action={}", query_value(action)));
    }
    let view = client
        .get(&format!("/api/v1/audit?{}", query.join("&")))
        .await?;
    show(json, &view, render::audit);
    Ok(())
}

/// `logs`: the tail, then with `--follow` each new part (asked for again
/// at once while the file is longer than what was read, else after
/// [`POLL`]) until interrupted or the log is gone.
async fn logs(client: &Client, a: LogsArgs, json: bool) -> Result<(), CtlError> {
    let base = format!(
        "/api/v1/tasks/{}/logs/{}",
        segment(&a.task),
        a.file.as_str()
    );
    let mut path = format!("{base}?length={}", a.tail.max(1));
    loop {
        let read = client.get(&path).await?;
        let data = read["data"].as_str().unwrap_or("");
        let open = if json {
            out(&read.to_string())
        } else if data.is_empty() {
            true
        } else {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(data.as_bytes())
                .and_then(|()| stdout.flush())
                .is_ok()
        };
        if !a.follow || !open {
            return Ok(());
        }
        let next = read["next_offset"].as_u64().unwrap_or(0);
        let size = read["size"].as_u64().unwrap_or(0);
        path = format!("{base}?offset={next}");
        client.renew();
        if next >= size {
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    }
}

/// `events`: the public event stream (`/api/v1/events/stream`), or the
/// dashboard's (`/api/v1/stream`) on replicas without it; reconnects with
/// `Last-Event-ID` when the stream breaks, until interrupted.
async fn events(client: &Client, a: EventsArgs, json: bool) -> Result<(), CtlError> {
    let filter = if a.types.is_empty() {
        String::new()
    } else {
        format!("?type={}", query_value(&a.types.join(",")))
    };
    let mut paths: Vec<String> = match &a.path {
        Some(p) => vec![p.clone()],
        None => vec![
            format!("/api/v1/events/stream{filter}"),
            "/api/v1/stream".to_string(),
        ],
    };
    let mut last_id: Option<String> = None;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        client.renew();
        let mut headers = Vec::new();
        if let Some(id) = &last_id {
            headers.push(("last-event-id", id.clone()));
        }
        let response = match client.open_stream(&paths[0], &headers).await {
            Err(CtlError::Api { status: 404, .. }) if paths.len() > 1 => {
                paths.remove(0);
                continue;
            }
            other => other?,
        };
        let mut parser = SseParser::resuming(last_id.clone());
        let mut body = response.bytes_stream();
        let broke = loop {
            let chunk = tokio::select! {
                chunk = body.next() => chunk,
                _ = &mut interrupted => return Ok(()),
            };
            let bytes = match chunk {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => break format!("the stream broke: {e}"),
                None => break "the stream ended".to_string(),
            };
            let events = parser
                .feed(&bytes)
                .map_err(|e| CtlError::Usage(format!("the event stream is unusable: {e}")))?;
            for e in events {
                if !a.types.is_empty() && !a.types.contains(&e.event) {
                    continue;
                }
                let line = if json {
                    let data = serde_json::from_str::<Value>(&e.data)
                        .unwrap_or_else(|_| Value::String(e.data.clone()));
                    json!({"id": e.id, "event": e.event, "data": data}).to_string()
                } else {
                    let id = e.id.as_deref().map(|i| format!("{i} ")).unwrap_or_default();
                    format!("{id}{} {}", e.event, e.data)
                };
                if !out(&line) {
                    return Ok(());
                }
            }
            last_id = parser.last_id().map(str::to_string);
        };
        eprintln!(
            "{}; reconnecting",
            crate::util::redact_password(&broke.to_string())
        );
    }
}

/// Exit code numbers, for the docs test.
pub fn exit_codes() -> [(Exit, u8); 6] {
    [
        (Exit::Ok, 0),
        (Exit::Api, 1),
        (Exit::Usage, 2),
        (Exit::Halted, 3),
        (Exit::Unreachable, 4),
        (Exit::TimedOut, 5),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_files_are_one_spec_or_an_array_with_names() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let one = write("one.json", r#"{"name": "web", "command": "x"}"#);
        assert_eq!(read_specs(&one).unwrap().len(), 1);
        let two = write("two.json", r#"[{"name": "a"}, {"name": "b"}]"#);
        assert_eq!(read_specs(&two).unwrap().len(), 2);
        for (text, says) in [
            (r#"[{"name": "a"}, {"command": "b"}]"#, "[1].name: missing"),
            ("42", "not a service spec"),
            ("{", "EOF"),
            ("[]", "no service"),
            // Applied in turn, the second would silently replace the
            // first (and `--wait` would wait for a spec no longer there).
            (
                r#"[{"name": "a"}, {"name": "b"}, {"name": "a"}]"#,
                "[2].name: \"a\" is [0]'s too",
            ),
        ] {
            let e = read_specs(&write("bad.json", text)).unwrap_err();
            assert_eq!(e.exit(), Exit::Usage);
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
        let e = read_specs(&dir.path().join("missing.json")).unwrap_err();
        assert_eq!(e.exit(), Exit::Usage);
    }

    #[test]
    fn completion_scripts_name_the_subcommands() {
        use clap::ValueEnum;
        for shell in clap_complete::Shell::value_variants() {
            let script = String::from_utf8(completion(*shell)).unwrap();
            for word in ["ctl", "services", "apply", "wait", "url"] {
                assert!(script.contains(word), "{shell}: {word}");
            }
        }
    }

    #[test]
    fn exit_codes_are_as_documented() {
        for (exit, code) in exit_codes() {
            assert_eq!(exit as u8, code);
        }
        // Read at run time: `include_str!` would make the build read docs/
        // (the Dockerfile's build stage copies only what the build reads).
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md"))
            .expect("docs/cli.md");
        for (_, code) in exit_codes() {
            assert!(
                doc.contains(&format!("| {code} |")),
                "docs/cli.md lists {code}"
            );
        }
    }
}
