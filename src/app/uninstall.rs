//! `mesos-appliance uninstall`: a one-shot job that removes the framework
//! for good (`docs/deployment-strategies.md#uninstall`). It never subscribes. In order:
//!
//! 1. lists frameworks on the master (the stored ID, plus active or inactive
//!    frameworks of the same name and role) — `--dry-run` stops here and
//!    prints the plan;
//! 2. fences every replica by writing a newer deployment epoch (they step
//!    down and exit with code 3), and waits until no replica is in the
//!    election;
//! 3. tears every framework down through the operator API and waits until
//!    the master lists them as completed (or no longer knows them);
//! 4. deletes the whole ZooKeeper subtree, root included — the audit trail
//!    too, whose last [`AUDIT_SHOWN`] entries the plan prints first.
//!
//! Any failure before step 4 exits with code 4 and deletes nothing; a
//! failure during step 4 exits with code 4 too, saying that the deletion
//! stopped partway. A second run finds nothing to tear down or delete and
//! exits 0.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::cli::{ClusterArgs, CommonArgs, UninstallArgs, exit};
use super::{client_config, replica_info};
use crate::coordination::zookeeper::{ZkConfig, ZkCoordinator};
use crate::coordination::{
    AUDIT_KEPT, Coordinator, DeploymentRecord, Expect, RecordKind, Strategy,
};
use crate::mesos::operator::{self, OperatorClient};
use crate::util::zk::ZkUrl;
use crate::web::audit::AuditEntry;

/// Runs the job; prints what it does on stdout.
pub async fn run(common: CommonArgs, cluster: ClusterArgs, args: UninstallArgs) -> ExitCode {
    for flag in &args.ignored {
        eprintln!("mesos-appliance uninstall: warning: {flag} is ignored by uninstall");
    }
    match uninstall(&common, &cluster, &args).await {
        Ok(()) => ExitCode::from(exit::OK),
        Err(Error::Usage(e)) => {
            eprintln!("mesos-appliance uninstall: {e}");
            ExitCode::from(exit::USAGE)
        }
        Err(Error::Failed(e)) => {
            eprintln!("mesos-appliance uninstall: {e}; nothing was deleted from ZooKeeper");
            ExitCode::from(exit::UNINSTALL_FAILED)
        }
        Err(Error::Partway(e)) => {
            eprintln!("mesos-appliance uninstall: {e}");
            ExitCode::from(exit::UNINSTALL_FAILED)
        }
    }
}

/// Why the frameworks found only by name must not be torn down, if they
/// must not: the root stores no framework ID (a mistyped `--zk` root, or
/// none given), so nothing says they belong to this deployment — the rule
/// the appliance keeps before registering next to a same-name framework
/// (`docs/deployment-strategies.md`). `--force` overrides it.
fn unconfirmed_targets(
    stored: &Option<String>,
    targets: &BTreeSet<String>,
    coordinator: &Option<(Arc<ZkCoordinator>, String)>,
    force: bool,
) -> Option<String> {
    if force || stored.is_some() || targets.is_empty() {
        return None;
    }
    let ids: Vec<&str> = targets.iter().map(String::as_str).collect();
    let whose = match coordinator {
        Some((c, root)) if !c.root_existed() => {
            format!("ZooKeeper has no {root} (is --zk right?)")
        }
        Some((_, root)) => format!("{root} stores no framework ID (is --zk right?)"),
        None => "no --zk says which framework is this deployment's".to_string(),
    };
    Some(format!(
        "the master runs {} framework(s) of this name and role ({}), but {whose}; \
         pass --force to tear them down anyway",
        ids.len(),
        ids.join(", ")
    ))
}

enum Error {
    Usage(String),
    /// Before anything was deleted.
    Failed(String),
    /// While deleting the subtree, after some nodes were deleted.
    Partway(String),
}

async fn uninstall(
    common: &CommonArgs,
    cluster: &ClusterArgs,
    args: &UninstallArgs,
) -> Result<(), Error> {
    let master = cluster
        .master
        .as_deref()
        .ok_or_else(|| Error::Usage("--master is required".into()))?;
    let mut client = client_config(cluster, master).map_err(|e| Error::Usage(e.0))?;
    // An unreachable master fails the job within --wait, not the default minute.
    client.operator_retry_for = args.wait;
    let cancel = CancellationToken::new();
    let operator = OperatorClient::start(&client, cancel.clone());

    let coordinator = match &cluster.zk {
        None => None,
        Some(url) => {
            let url = ZkUrl::parse(url, &common.framework_name)
                .map_err(|e| Error::Usage(format!("--zk: {e}")))?;
            let root = url.root.clone();
            let mut config = ZkConfig::new(url, replica_info("uninstall", "uninstall"))
                .with_session_timeout(cluster.zk_session_timeout());
            config.join_election = false;
            config.private_acl = cluster.zk_private_acl;
            let c = ZkCoordinator::start(config)
                .await
                .map_err(|e| Error::Failed(format!("ZooKeeper: {e}")))?;
            Some((Arc::new(c), root))
        }
    };

    // 1. The plan.
    let members = match &coordinator {
        Some((c, _)) => c
            .members()
            .await
            .map_err(|e| Error::Failed(format!("listing replicas: {e}")))?,
        None => Vec::new(),
    };
    let task_records = match &coordinator {
        Some((c, _)) => c
            .list_records(RecordKind::Tasks)
            .await
            .map_err(|e| Error::Failed(format!("listing task records: {e}")))?
            .records
            .len(),
        None => 0,
    };
    let audit = match &coordinator {
        Some((c, _)) => c
            .audit_log(AUDIT_KEPT)
            .await
            .map_err(|e| Error::Failed(format!("reading the audit log: {e}")))?,
        None => Vec::new(),
    };
    let stored = match &coordinator {
        Some((c, _)) => c
            .framework_id()
            .await
            .map_err(|e| Error::Failed(format!("reading the framework ID: {e}")))?
            .map(|v| v.value),
        None => None,
    };
    let frameworks = operator
        .get_frameworks()
        .await
        .map_err(|e| Error::Failed(format!("listing frameworks on the master: {e}")))?;
    let mut targets = BTreeSet::new();
    if let Some(id) = &stored
        && !frameworks.is_completed(id)
        && frameworks.get(id).is_some()
    {
        targets.insert(id.clone());
    }
    for f in frameworks.active().chain(frameworks.inactive()) {
        if operator::same_name_and_role(f, &common.framework_name, &common.framework_role)
            && let Some(id) = operator::framework_id(f)
        {
            targets.insert(id.to_string());
        }
    }
    println!(
        "uninstall plan for framework name {:?}:",
        common.framework_name
    );
    match &stored {
        Some(id) => println!("  stored framework ID: {id}"),
        None => println!("  stored framework ID: none"),
    }
    if targets.is_empty() {
        println!("  frameworks to tear down: none");
    }
    let name_on_master = |id: &str| {
        frameworks
            .get(id)
            .map(|f| f.framework_info.name.clone())
            .unwrap_or_default()
    };
    for id in &targets {
        let name = name_on_master(id);
        println!("  tear down framework {id} (named {name:?} on the master)");
        if stored.as_deref() == Some(id.as_str()) && name != common.framework_name {
            println!(
                "  warning: the stored framework {id} is named {name:?} on the master, not \
                 {:?} (--framework-name); it is torn down all the same: its ID is the one \
                 stored under this --zk root",
                common.framework_name
            );
        }
    }
    let refusal = unconfirmed_targets(&stored, &targets, &coordinator, args.force);
    if let Some(why) = &refusal {
        println!("  refusing: {why}");
    }
    match &coordinator {
        Some((_, root)) => {
            println!("  replicas in the election: {}", members.len());
            for m in &members {
                println!("    {} at {}", m.info.replica_id, m.info.advertised_url);
            }
            println!("  task records: {task_records}");
            print_audit(&audit);
            println!("  fence every replica, then delete ZooKeeper subtree {root}");
        }
        None => println!("  no --zk: nothing stored to delete"),
    }
    if args.dry_run || refusal.is_some() {
        // Connecting created the empty layout to read it: take it away again.
        if let Some((c, _)) = &coordinator
            && !c.root_existed()
            && let (_, Err(e)) = c.delete_tree().await
        {
            tracing::warn!("could not remove the empty layout this run created: {e}");
        }
        if let Some(why) = refusal
            && !args.dry_run
        {
            return Err(Error::Failed(why));
        }
        println!("dry run: nothing changed");
        return Ok(());
    }

    // 2. Fence every replica.
    if let Some((c, _)) = &coordinator {
        fence(c.as_ref()).await?;
        let deadline = Instant::now() + args.wait;
        loop {
            let members = c
                .members()
                .await
                .map_err(|e| Error::Failed(format!("listing replicas: {e}")))?;
            if members.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let urls: Vec<String> = members
                    .iter()
                    .map(|m| m.info.advertised_url.clone())
                    .collect();
                return Err(Error::Failed(format!(
                    "{} replica(s) still in the election after {:?}: {}",
                    members.len(),
                    args.wait,
                    urls.join(", ")
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        match members.len() {
            0 => println!("fenced: no replica was in the election"),
            n => println!("fenced: {n} replica(s) in the election stepped down"),
        }
    }

    // 3. Tear down and wait until the master lists them as completed.
    for id in &targets {
        match operator.teardown(id).await {
            Ok(()) => println!("tore down framework {id}"),
            Err(e) if e.is_no_such_framework() => println!("framework {id} was already gone"),
            Err(e) => return Err(Error::Failed(format!("tearing down {id}: {e}"))),
        }
    }
    let deadline = Instant::now() + args.wait;
    loop {
        let now = operator
            .get_frameworks()
            .await
            .map_err(|e| Error::Failed(format!("listing frameworks on the master: {e}")))?;
        let left: Vec<&String> = targets.iter().filter(|id| now.get(id).is_some()).collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(Error::Failed(format!(
                "the master still lists {left:?} as running after {:?}",
                args.wait
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 4. Delete the subtree.
    if let Some((c, root)) = &coordinator {
        let (deleted, result) = c.delete_tree().await;
        match result {
            Err(e) if deleted == 0 => {
                return Err(Error::Failed(format!("deleting {root}: {e}")));
            }
            Err(e) => {
                return Err(Error::Partway(format!(
                    "deleting ZooKeeper subtree {root} stopped partway: {e}; {deleted} node(s) \
                     were deleted, what remains is still under {root}; run uninstall again \
                     after fixing the cause of that error"
                )));
            }
            Ok(()) => {}
        }
        c.close().await;
        if c.root_existed() {
            println!("deleted ZooKeeper subtree {root}");
        } else {
            println!("ZooKeeper subtree {root}: nothing to delete (it did not exist)");
        }
    }
    cancel.cancel();
    println!("uninstalled: {} framework(s) torn down", targets.len());
    Ok(())
}

/// Audit entries the plan prints.
pub const AUDIT_SHOWN: usize = 20;

/// The audit log's size and its last [`AUDIT_SHOWN`] entries, one line
/// each, oldest first; `audit trail: empty` when there are none.
fn print_audit(log: &[(u64, serde_json::Value)]) {
    for line in audit_lines(log) {
        println!("{line}");
    }
}

/// The lines [`print_audit`] prints.
fn audit_lines(log: &[(u64, serde_json::Value)]) -> Vec<String> {
    if log.is_empty() {
        return vec!["  audit trail: empty".to_string()];
    }
    let mut lines = vec![format!(
        "  audit trail: {} entr{} (deleted with the rest); the last ones:",
        log.len(),
        if log.len() == 1 { "y" } else { "ies" }
    )];
    lines.extend(
        log[log.len().saturating_sub(AUDIT_SHOWN)..]
            .iter()
            .map(
                |(seq, value)| match serde_json::from_value::<AuditEntry>(value.clone()) {
                    Ok(e) => format!(
                        "    #{seq} {} {} ({}) {} {}: {}{}",
                        crate::util::format_time(e.at),
                        e.who,
                        e.method,
                        e.action,
                        if e.ok { "ok" } else { "FAILED" },
                        e.outcome,
                        e.reason
                            .map(|r| format!(" — reason: {r:?}"))
                            .unwrap_or_default()
                    ),
                    Err(_) => format!("    #{seq} (unreadable entry)"),
                },
            ),
    );
    lines
}

/// Writes a newer deployment epoch under an ID of its own: every replica
/// sees itself superseded and exits.
async fn fence(c: &dyn Coordinator) -> Result<(), Error> {
    for _ in 0..20 {
        let current = c
            .deployment()
            .await
            .map_err(|e| Error::Failed(format!("reading the deployment: {e}")))?;
        let (epoch, expect) = match &current {
            Some(v) => (v.value.epoch + 1, Expect::Version(v.version)),
            None => (1, Expect::Absent),
        };
        let record = DeploymentRecord {
            deployment_id: format!("uninstall-{}", uuid::Uuid::new_v4()),
            epoch,
            strategy: Strategy::Hard,
            teardown_done: false,
        };
        match c.write_deployment(&record, expect).await {
            Ok(_) => return Ok(()),
            Err(crate::coordination::CoordinationError::VersionConflict { .. }) => continue,
            Err(e) => return Err(Error::Failed(format!("fencing replicas: {e}"))),
        }
    }
    Err(Error::Failed("the deployment record kept changing".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_audit_trail_says_so() {
        assert_eq!(audit_lines(&[]), ["  audit trail: empty"]);
        let one = audit_lines(&[(7, serde_json::json!({"garbage": true}))]);
        assert_eq!(
            one,
            [
                "  audit trail: 1 entry (deleted with the rest); the last ones:",
                "    #7 (unreadable entry)"
            ]
        );
    }
}
