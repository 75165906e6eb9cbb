//! Master election through ZooKeeper, as Mesos masters do it
//! (`src/master/contender/zookeeper.cpp`, `src/master/detector/zookeeper.cpp`,
//! `docs/mesos-protocol.md#zookeeper-master-detection` and capture j): each master
//! creates an ephemeral sequential
//! `json.info_<seq>` child of the configured path holding its MasterInfo as
//! JSON with sorted keys; the lowest sequence leads. A master whose session
//! expires stops ("Lost candidacy as a leader... committing suicide!").

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use super::{Leadership, Shared, now_secs};
use crate::backoff::Backoff;
use crate::mesos::json;
use crate::util::zk::ZkUrl;

/// The sequence number of a master znode name (`json.info_0000000007` → 7;
/// legacy `info_7` and bare `7` too); `None` for other children.
pub(crate) fn sequence_of(name: &str) -> Option<u64> {
    name.rsplit('_').next().and_then(|s| s.parse().ok())
}

/// Runs the election until `stop` is cancelled; on session expiry it marks
/// the master leaderless, cuts every stream and cancels `stop`.
pub(crate) async fn run(
    target: ZkUrl,
    session_timeout: Duration,
    master: Shared,
    stop: CancellationToken,
) {
    let mut backoff = Backoff::jittered(Duration::from_millis(100), Duration::from_secs(5));
    let hosts = target.connect_string();
    let client = loop {
        // Silence tolerated like the C client a Mesos master uses (two thirds
        // of the session timeout), as near as zookeeper-client allows.
        let connector = crate::util::zk::connector(&target, session_timeout);
        tokio::select! {
            _ = stop.cancelled() => return,
            result = connector.connect(&hosts) => match result {
                Ok(client) => break client,
                Err(error) => {
                    tracing::warn!(%error, "testbed: cannot reach ZooKeeper; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    };
    if let Err(error) = contend(&client, &target, &master, &stop).await {
        tracing::error!(%error, "testbed: lost candidacy as a leader; stopping");
    }
    {
        let mut m = master.lock().unwrap_or_else(|p| p.into_inner());
        m.leadership = Leadership::NoLeader;
        let ids: Vec<String> = m.frameworks.keys().cloned().collect();
        for id in ids {
            m.disconnect(&id, true);
        }
    }
    stop.cancel();
}

async fn contend(
    client: &zk::Client,
    target: &ZkUrl,
    master: &Shared,
    stop: &CancellationToken,
) -> Result<(), zk::Error> {
    let read_all = [
        zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone()),
        zk::Acl::new(zk::Permission::ALL, zk::AuthId::authed()),
    ];
    let acls = if target.credentials.is_some() {
        zk::Acls::new(&read_all)
    } else {
        zk::Acls::anyone_all()
    };
    if target.root != "/" {
        match client
            .mkdir(&target.root, &zk::CreateMode::Persistent.with_acls(acls))
            .await
        {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    let info = master
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .info
        .clone();
    // serde_json maps are ordered by key: the sorted-key JSON a master writes.
    let data = serde_json::to_vec(&json::to_value(&info)).unwrap_or_default();
    let prefix = format!("{}/json.info_", target.root.trim_end_matches('/'));
    let (_, sequence) = client
        .create(
            &prefix,
            &data,
            &zk::CreateMode::EphemeralSequential.with_acls(acls),
        )
        .await?;
    let mine = sequence.into_i64() as u64;
    let mut state = client.state_watcher();
    loop {
        let (children, watcher) = client.list_and_watch_children(&target.root).await?;
        let leader = children
            .iter()
            .filter_map(|c| sequence_of(c).map(|s| (s, c)))
            .min_by_key(|(s, _)| *s);
        let leadership = match leader {
            None => Leadership::NoLeader,
            Some((seq, _)) if seq == mine => Leadership::Leading,
            Some((_, name)) => {
                let path = format!("{}/{}", target.root.trim_end_matches('/'), name);
                match client.get_data(&path).await {
                    Ok((data, _)) => match leader_address(&data) {
                        Some(leader) => Leadership::Following { leader },
                        None => Leadership::NoLeader,
                    },
                    Err(zk::Error::NoNode) => continue,
                    Err(e) => return Err(e),
                }
            }
        };
        {
            let mut m = master.lock().unwrap_or_else(|p| p.into_inner());
            if leadership == Leadership::Leading && m.leadership != Leadership::Leading {
                tracing::info!("testbed: elected leading master");
                m.elected_time = now_secs();
            }
            m.leadership = leadership;
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            event = watcher.changed() => {
                if event.event_type == zk::EventType::Session
                    && matches!(event.session_state, zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed)
                {
                    return Err(zk::Error::SessionExpired);
                }
            }
            s = state.changed() => {
                if matches!(s, zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed) {
                    return Err(zk::Error::SessionExpired);
                }
            }
        }
    }
}

/// `host:port` of a master from its znode data: MasterInfo JSON (`address`
/// preferred, then `hostname`/`port`), or a legacy `master@ip:port` PID.
pub(crate) fn leader_address(data: &[u8]) -> Option<String> {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let address = &value["address"];
        let host = address["hostname"]
            .as_str()
            .or_else(|| address["ip"].as_str())
            .or_else(|| value["hostname"].as_str());
        let port = address["port"].as_u64().or_else(|| value["port"].as_u64());
        if let (Some(host), Some(port)) = (host, port) {
            return Some(format!("{host}:{port}"));
        }
        return None;
    }
    let text = std::str::from_utf8(data).ok()?;
    text.split_once('@')
        .map(|(_, addr)| addr.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_and_addresses() {
        assert_eq!(sequence_of("json.info_0000000042"), Some(42));
        assert_eq!(sequence_of("info_7"), Some(7));
        assert_eq!(sequence_of("log_replicas"), None);
        let data = br#"{"address":{"hostname":"m1","ip":"10.0.0.1","port":5050},"hostname":"m1","port":5050}"#;
        assert_eq!(leader_address(data).as_deref(), Some("m1:5050"));
        assert_eq!(
            leader_address(b"master@10.0.0.2:5051").as_deref(),
            Some("10.0.0.2:5051")
        );
    }
}
