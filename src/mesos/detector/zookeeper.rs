//! The Mesos masters' ZooKeeper group, read the way Mesos' own detector does
//! (`src/master/detector/zookeeper.cpp`, `src/zookeeper/group.cpp`,
//! `docs/mesos-protocol.md#zookeeper-master-detection` and capture j).
//!
//! Each master holds an ephemeral sequential child of the group path:
//! `json.info_<seq>` with `MasterInfo` as JSON (Mesos ≥ 0.24), or the legacy
//! `info_<seq>` (binary `MasterInfo`) and bare `<seq>` (a `master@ip:port`
//! PID). The leader is the child with the lowest sequence number among the
//! children whose name ends in an integer after its last `_`, whatever the
//! label; other children (`log_replicas` of the replicated log) are ignored.
//!
//! The detector keeps its own session, with digest credentials from the URL.
//! While that session is disconnected the last leader stays published (the
//! masters may be fine; only our view is stale); after it expires a new
//! session is opened.

use std::net::Ipv4Addr;
use std::time::Duration;

use prost::Message;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use super::{DetectorOptions, MasterAddress, Scheme, publish};
use crate::backoff::Backoff;
use crate::mesos::v1;
use crate::util::zk::ZkUrl;

/// Pause before retrying a read that failed on a live session.
const RETRY: Duration = Duration::from_millis(200);

/// Runs until `cancel`: one session after another, watching the group.
pub(super) async fn run(
    url: ZkUrl,
    scheme: Scheme,
    options: DetectorOptions,
    leader: &watch::Sender<Option<MasterAddress>>,
    redetect: &Notify,
    cancel: CancellationToken,
) {
    let mut backoff = Backoff::jittered(options.backoff_min, options.backoff_max);
    loop {
        let client = tokio::select! {
            _ = cancel.cancelled() => return,
            client = connect(&url, options.zk_session_timeout) => client,
        };
        match client {
            Ok(client) => {
                backoff.reset();
                let group = Group {
                    client: &client,
                    path: &url.root,
                    scheme,
                    leader,
                };
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    end = group.watch(redetect) => {
                        tracing::warn!(error = %end, url = %url, "ZooKeeper session of the master detector ended; reconnecting");
                    }
                }
            }
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(%error, url = %url, retry_in = ?delay, "cannot reach ZooKeeper to detect the Mesos master");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

async fn connect(url: &ZkUrl, session_timeout: Duration) -> Result<zk::Client, zk::Error> {
    let connector = crate::util::zk::connector(url, session_timeout);
    match tokio::time::timeout(
        session_timeout + Duration::from_secs(1),
        connector.connect(&url.connect_string()),
    )
    .await
    {
        Ok(result) => result,
        Err(_) => Err(zk::Error::Timeout),
    }
}

struct Group<'a> {
    client: &'a zk::Client,
    path: &'a str,
    scheme: Scheme,
    leader: &'a watch::Sender<Option<MasterAddress>>,
}

impl Group<'_> {
    /// Watches the group until the session ends; returns why it ended.
    async fn watch(&self, redetect: &Notify) -> zk::Error {
        let mut last_error = None;
        loop {
            let watcher = match self.evaluate().await {
                Ok(watcher) => watcher,
                Err(error) if self.client.state().is_terminated() => return error,
                Err(error) => {
                    // NoAuth or a lost connection: say it once, retry quietly.
                    let text = error.to_string();
                    if last_error.as_ref() != Some(&text) {
                        tracing::warn!(error = %text, path = self.path, "cannot read the masters' group; retrying");
                        last_error = Some(text);
                    }
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            last_error = None;
            tokio::select! {
                _ = redetect.notified() => {}
                event = watcher.changed() => {
                    if event.event_type == zk::EventType::Session && event.session_state.is_terminated() {
                        return zk::Error::SessionExpired;
                    }
                }
            }
        }
    }

    /// Reads the group, publishes its leader and returns a watch on the
    /// children (or, while the group node is missing, on its creation).
    async fn evaluate(&self) -> Result<zk::OneshotWatcher, zk::Error> {
        loop {
            let (children, watcher) = match self.client.list_and_watch_children(self.path).await {
                Ok(found) => found,
                Err(zk::Error::NoNode) => {
                    publish(self.leader, None);
                    let (stat, watcher) = self.client.check_and_watch_stat(self.path).await?;
                    if stat.is_some() {
                        continue;
                    }
                    return Ok(watcher);
                }
                Err(error) => return Err(error),
            };
            let Some(name) = leader_child(&children) else {
                publish(self.leader, None);
                return Ok(watcher);
            };
            let child_path = format!("{}/{name}", self.path.trim_end_matches('/'));
            let data = match self.client.get_data(&child_path).await {
                Ok((data, _)) => data,
                // The leader left between the listing and the read.
                Err(zk::Error::NoNode) => continue,
                Err(error) => return Err(error),
            };
            let address = leader_address(name, &data, self.scheme);
            if address.is_none() {
                tracing::warn!(znode = %child_path, "cannot read the leading master's address from its znode");
            }
            publish(self.leader, address);
            return Ok(watcher);
        }
    }
}

/// The sequence number of a group member (`json.info_0000000007` → 7,
/// `info_7` → 7, `7` → 7); `None` for other children.
pub(crate) fn sequence_of(name: &str) -> Option<u64> {
    let suffix = name.rsplit('_').next()?;
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    suffix.parse().ok()
}

/// The leading member among `children`: the lowest sequence number.
pub(crate) fn leader_child(children: &[String]) -> Option<&str> {
    children
        .iter()
        .filter_map(|c| sequence_of(c).map(|s| (s, c.as_str())))
        .min_by_key(|(s, _)| *s)
        .map(|(_, c)| c)
}

/// The address of the master in znode `name` holding `data`, by label:
/// `json.info_` → MasterInfo JSON, `info_` → binary MasterInfo, bare
/// number → PID text. Unknown labels give `None` (Mesos: detection error).
pub(crate) fn leader_address(name: &str, data: &[u8], scheme: Scheme) -> Option<MasterAddress> {
    let label = name.rsplit_once('_').map(|(label, _)| label);
    let (host, port) = match label {
        Some("json.info") => from_json(data)?,
        Some("info") => from_info(&v1::MasterInfo::decode(data).ok()?)?,
        None => from_pid(std::str::from_utf8(data).ok()?)?,
        Some(_) => return None,
    };
    MasterAddress::new(scheme, &host, port)
}

/// MasterInfo JSON: `address` (hostname, else ip) and its port first, then
/// `hostname` / decoded `ip` with `port`, then `pid`
/// (`docs/mesos-protocol.md#zookeeper-master-detection`).
fn from_json(data: &[u8]) -> Option<(String, u16)> {
    let value: serde_json::Value = serde_json::from_slice(data).ok()?;
    let text = |v: &serde_json::Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let port = |v: &serde_json::Value| {
        v.as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
    };
    let address = &value["address"];
    if let (Some(host), Some(port)) = (
        text(&address["hostname"]).or_else(|| text(&address["ip"])),
        port(&address["port"]),
    ) {
        return Some((host, port));
    }
    let host = text(&value["hostname"])
        .or_else(|| value["ip"].as_u64().and_then(|ip| decode_ip(ip as u32)));
    let main_port = port(&value["port"]).unwrap_or(super::DEFAULT_MASTER_PORT);
    if let Some(host) = host {
        return Some((host, main_port));
    }
    from_pid(value["pid"].as_str()?)
}

/// Binary MasterInfo (legacy `info_` members), with the same preferences.
fn from_info(info: &v1::MasterInfo) -> Option<(String, u16)> {
    if let Some(address) = &info.address {
        let host = address
            .hostname
            .clone()
            .filter(|h| !h.is_empty())
            .or_else(|| address.ip.clone());
        if let (Some(host), Ok(port)) = (host, u16::try_from(address.port)) {
            return Some((host, port));
        }
    }
    let port = u16::try_from(info.port).unwrap_or(super::DEFAULT_MASTER_PORT);
    if let Some(host) = info
        .hostname
        .clone()
        .filter(|h| !h.is_empty())
        .or_else(|| decode_ip(info.ip))
    {
        return Some((host, port));
    }
    from_pid(info.pid.as_deref()?)
}

/// `MasterInfo.ip`: an IPv4 address in network byte order stored in a native
/// (little-endian on x86) integer — 127.0.0.1 is 16777343
/// (`docs/mesos-protocol.md#masterinfoip-is-in-network-byte-order`).
fn decode_ip(ip: u32) -> Option<String> {
    (ip != 0).then(|| Ipv4Addr::from(ip.to_le_bytes()).to_string())
}

/// `master@10.0.0.1:5050` → (`10.0.0.1`, 5050).
fn from_pid(pid: &str) -> Option<(String, u16)> {
    let (_, address) = pid.trim().split_once('@')?;
    let (host, port) = address.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lowest_numeric_suffix_leads_whatever_the_label() {
        assert_eq!(
            leader_child(&names(&[
                "log_replicas",
                "json.info_0000000012",
                "info_0000000011",
                "json.info_0000000003"
            ])),
            Some("json.info_0000000003")
        );
        assert_eq!(
            leader_child(&names(&["0000000002", "json.info_0000000005"])),
            Some("0000000002")
        );
        assert_eq!(
            leader_child(&names(&["log_replicas", "json.info_x", "json.info_"])),
            None
        );
        assert_eq!(leader_child(&[]), None);
        assert_eq!(sequence_of("json.info_-1"), None);
    }

    #[test]
    fn reads_the_json_a_real_master_writes() {
        // Capture j, verbatim.
        let data = br#"{"address":{"hostname":"localhost","ip":"127.0.0.1","port":5050},"capabilities":[{"type":"AGENT_UPDATE"},{"type":"AGENT_DRAINING"},{"type":"QUOTA_V2"}],"hostname":"localhost","id":"26a9bc4c-b6a0-4cbd-bce5-4c8e9cadba80","ip":16777343,"pid":"master@127.0.0.1:5050","port":5050,"version":"1.12.0"}"#;
        let leader = leader_address("json.info_0000000001", data, Scheme::Http).unwrap();
        assert_eq!(leader.to_string(), "http://localhost:5050");
    }

    #[test]
    fn falls_back_from_address_to_hostname_ip_and_pid() {
        let cases: [(&[u8], &str); 5] = [
            (
                br#"{"address":{"ip":"10.0.0.9","port":5051},"hostname":"h"}"#,
                "http://10.0.0.9:5051",
            ),
            (
                br#"{"hostname":"m1","ip":16777343,"port":5052}"#,
                "http://m1:5052",
            ),
            (br#"{"ip":16777343,"port":5053}"#, "http://127.0.0.1:5053"),
            (
                br#"{"ip":0,"pid":"master@10.1.2.3:5054"}"#,
                "http://10.1.2.3:5054",
            ),
            (br#"{"hostname":"m2"}"#, "http://m2:5050"),
        ];
        for (data, want) in cases {
            let got = leader_address("json.info_1", data, Scheme::Http).map(|a| a.to_string());
            assert_eq!(
                got.as_deref(),
                Some(want),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
        assert_eq!(leader_address("json.info_1", b"{}", Scheme::Http), None);
        assert_eq!(
            leader_address("json.info_1", b"not json", Scheme::Http),
            None
        );
    }

    #[test]
    fn reads_legacy_members() {
        let info = v1::MasterInfo {
            id: "m".into(),
            ip: u32::from_le_bytes([10, 0, 0, 7]),
            port: 5055,
            ..Default::default()
        };
        let leader =
            leader_address("info_0000000004", &info.encode_to_vec(), Scheme::Https).unwrap();
        assert_eq!(leader.to_string(), "https://10.0.0.7:5055");
        let leader = leader_address("0000000004", b"master@10.0.0.8:5056\n", Scheme::Http).unwrap();
        assert_eq!(leader.to_string(), "http://10.0.0.8:5056");
        assert_eq!(
            leader_address("other_0000000004", b"master@h:1", Scheme::Http),
            None
        );
    }
}
