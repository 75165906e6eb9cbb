//! What a new leader does before it subscribes: the `hard` strategy's
//! one-time teardown of earlier frameworks, and applying the `--services`
//! file to the stored services.

use std::collections::{BTreeMap, BTreeSet};

use crate::coordination::{Coordinator, Expect, RecordKind, RecordStore, Strategy};
use crate::mesos::operator::{self, OperatorClient};
use crate::scheduler::config::CoreConfig;
use crate::scheduler::services::ServiceSpec;

/// Under `hard`, once per deployment (the first leader of it): tear down
/// every earlier framework of this name — the stored ID, and active or
/// inactive frameworks of the same name and role on the master — through
/// the operator API, delete the stored framework ID and task records, and
/// record `teardown_done` (`docs/deployment-strategies.md#hard`). Frameworks the master already
/// removed are skipped.
pub(super) async fn hard_teardown(
    coordinator: &dyn Coordinator,
    operator: &OperatorClient,
    cfg: &CoreConfig,
) -> Result<(), String> {
    let Some(record) = coordinator
        .deployment()
        .await
        .map_err(|e| format!("reading the deployment: {e}"))?
    else {
        return Ok(());
    };
    let ours =
        record.value.deployment_id == cfg.deployment_id && record.value.strategy == Strategy::Hard;
    if !ours || record.value.teardown_done {
        return Ok(());
    }
    let mut ids = BTreeSet::new();
    if let Some(stored) = coordinator
        .framework_id()
        .await
        .map_err(|e| format!("reading the framework ID: {e}"))?
    {
        ids.insert(stored.value);
    }
    let frameworks = operator
        .get_frameworks()
        .await
        .map_err(|e| format!("hard deployment: listing frameworks on the master: {e}"))?;
    for f in frameworks.active().chain(frameworks.inactive()) {
        if operator::same_name_and_role(f, &cfg.framework_name, &cfg.role)
            && let Some(id) = operator::framework_id(f)
        {
            ids.insert(id.to_string());
        }
    }
    for id in &ids {
        match operator.teardown(id).await {
            Ok(()) => {
                tracing::warn!(framework_id = %id, "hard deployment: tore down an earlier framework")
            }
            Err(e) if e.is_no_such_framework() => {
                tracing::info!(framework_id = %id, "hard deployment: framework already gone")
            }
            Err(e) => return Err(format!("hard deployment: tearing down {id}: {e}")),
        }
    }
    coordinator
        .delete_framework_id(Expect::Any)
        .await
        .map_err(|e| format!("hard deployment: deleting the framework ID: {e}"))?;
    coordinator
        .delete_records(RecordKind::Tasks)
        .await
        .map_err(|e| format!("hard deployment: deleting task records: {e}"))?;
    let mut done = record.value.clone();
    done.teardown_done = true;
    coordinator
        .write_deployment(&done, Expect::Version(record.version))
        .await
        .map_err(|e| format!("hard deployment: recording the teardown: {e}"))?;
    tracing::warn!(
        frameworks = ids.len(),
        "hard deployment: earlier frameworks torn down; registering a fresh framework"
    );
    Ok(())
}

/// Writes the `--services` specs over the stored ones and deletes stored
/// services the file does not list.
pub(super) async fn apply_services_file(
    store: &RecordStore<ServiceSpec>,
    services: &mut BTreeMap<String, ServiceSpec>,
    file: &[ServiceSpec],
) -> Result<(), String> {
    let wanted: BTreeSet<&str> = file.iter().map(|s| s.name.as_str()).collect();
    let stale: Vec<String> = services
        .keys()
        .filter(|k| !wanted.contains(k.as_str()))
        .cloned()
        .collect();
    for name in stale {
        store
            .delete(&name, Expect::Any)
            .await
            .map_err(|e| format!("deleting service {name}: {e}"))?;
        services.remove(&name);
    }
    for spec in file {
        if services.get(&spec.name) == Some(spec) {
            continue;
        }
        store
            .put(&spec.name, spec, Expect::Any)
            .await
            .map_err(|e| format!("storing service {}: {e}", spec.name))?;
        services.insert(spec.name.clone(), spec.clone());
    }
    Ok(())
}
