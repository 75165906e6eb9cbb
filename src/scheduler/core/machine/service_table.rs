//! The service table: every service the leader knows, each with the state
//! the machine keeps for it during the term, and the service writes in
//! flight with the commands queued behind them.
//!
//! Invariants:
//!
//! - A known service's state lives in its [`ServiceState`] and nowhere
//!   else: removing a service ([`ServiceTable::remove`], or a read of the
//!   store that no longer lists it, [`ServiceTable::adopt`]) removes its
//!   restart backoff, rollout deadline, cached pass and snapshot results and
//!   shortfall with it. A service created again under the same name starts
//!   clean; nothing of a deleted service lingers until a later pass prunes it.
//! - Replacing a service's stored record ([`ServiceTable::insert`]) keeps
//!   its state: the caches check the spec they were made for, and whether a
//!   new release forgives the backoff is the caller's rule
//!   ([`ServiceTable::forgive`]).
//! - State is kept for known services only: what happens to a task of a
//!   service the leader does not know (an orphan, killed by the next pass)
//!   leaves no state behind for its name.
//! - Writes and queued commands are by name, not by known service: a
//!   create's write is in flight before the service is known, and a
//!   delete's after it is gone. At most one write per name is in flight.
//! - Malformed names are stored keys that do not decode (or do not
//!   validate): a write to one expects any version, to take it over.

use std::collections::{BTreeMap, HashMap};

use crate::coordination::Expect;
use crate::scheduler::core::io::{ReplyId, Request, RequestId};
use crate::scheduler::records::{Halt, ServiceRecord};
use crate::scheduler::rules::placement::Shortfall;
use crate::scheduler::rules::restart::ServiceBackoff;
use crate::scheduler::spec::service::ServiceSpec;

use super::schedule::Settled;
use super::view::Shown;

/// One service as the machine knows it: the stored record (spec, previous
/// spec, rollout begun, halted rollout) and its version.
#[derive(Debug, Clone)]
pub(super) struct ServiceEntry {
    pub(super) spec: ServiceSpec,
    pub(super) version: i32,
    pub(super) previous: Option<Box<ServiceSpec>>,
    pub(super) rolling_out: bool,
    pub(super) halted: Option<Halt>,
}

impl ServiceEntry {
    pub(super) fn new(record: ServiceRecord, version: i32) -> ServiceEntry {
        ServiceEntry {
            spec: record.spec,
            version,
            previous: record.previous,
            rolling_out: record.rolling_out,
            halted: record.halted,
        }
    }

    /// The record as stored.
    pub(super) fn record(&self) -> ServiceRecord {
        ServiceRecord {
            spec: self.spec.clone(),
            previous: self.previous.clone(),
            rolling_out: self.rolling_out,
            halted: self.halted.clone(),
        }
    }
}

/// A known service: its stored record and what the machine keeps for it in
/// memory during the term (a new leader starts all of it clean).
#[derive(Debug)]
pub(super) struct ServiceState {
    /// The stored record.
    pub(super) entry: ServiceEntry,
    /// Its instances' restart backoffs; `None` until one of its tasks ran
    /// or ended.
    pub(super) backoff: Option<ServiceBackoff>,
    /// Since when (seconds since the UNIX epoch) its rollout has had an
    /// instance not available: the halt's deadline runs from it.
    pub(super) rollout_since: Option<f64>,
    /// Its rollout was under way at the last pass.
    pub(super) rolling: bool,
    /// The last scheduling pass found it needing nothing.
    pub(super) settled: Option<Settled>,
    /// Its counts as the last snapshot showed them.
    pub(super) shown: Option<Shown>,
    /// Instances found no offer in the last pass, and why.
    pub(super) waiting: Option<Shortfall>,
    /// Its rollout's progress as the last pass that assessed it found it:
    /// what a pass that defers it (its record budget spent, see
    /// `schedule`) reports meanwhile.
    pub(super) progress: Option<crate::scheduler::rules::rollout::Progress>,
}

impl ServiceState {
    fn new(entry: ServiceEntry) -> ServiceState {
        ServiceState {
            entry,
            backoff: None,
            rollout_since: None,
            rolling: false,
            settled: None,
            shown: None,
            waiting: None,
            progress: None,
        }
    }

    /// The backoffs, created clean when it had none.
    pub(super) fn backoff_mut(&mut self) -> &mut ServiceBackoff {
        self.backoff.get_or_insert_default()
    }
}

/// Every service the leader knows, by name, with the service writes in
/// flight. See the module doc for the invariants.
#[derive(Debug, Default)]
pub(super) struct ServiceTable {
    /// Known services, by name (sorted: passes and snapshots go in this
    /// order).
    services: BTreeMap<String, ServiceState>,
    /// Stored service keys that do not decode (written over with
    /// `Expect::Any`).
    malformed: Vec<String>,
    /// A service write in flight, by service name.
    writes: HashMap<String, RequestId>,
    /// Commands waiting for a write of the service they are for, in order.
    queued: Vec<(ReplyId, Request)>,
}

impl ServiceTable {
    /// The stored record of `name`.
    pub(super) fn get(&self, name: &str) -> Option<&ServiceEntry> {
        self.services.get(name).map(|s| &s.entry)
    }

    /// The stored record of `name`, to change in memory (what is stored
    /// follows by a write).
    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut ServiceEntry> {
        self.services.get_mut(name).map(|s| &mut s.entry)
    }

    /// The spec of `name`.
    pub(super) fn spec(&self, name: &str) -> Option<&ServiceSpec> {
        self.get(name).map(|e| &e.spec)
    }

    /// `name` with its state.
    pub(super) fn state(&self, name: &str) -> Option<&ServiceState> {
        self.services.get(name)
    }

    /// `name` with its state, to change.
    pub(super) fn state_mut(&mut self, name: &str) -> Option<&mut ServiceState> {
        self.services.get_mut(name)
    }

    /// True if `name` is a known service.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.services.contains_key(name)
    }

    /// True if no service is known.
    pub(super) fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// The names of the known services, sorted.
    pub(super) fn names(&self) -> Vec<String> {
        self.services.keys().cloned().collect()
    }

    /// The known services, by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &ServiceEntry)> {
        self.services.iter().map(|(name, s)| (name, &s.entry))
    }

    /// `name`'s record as now stored. Its state is kept (a new service
    /// starts clean); returns the record it replaces.
    pub(super) fn insert(&mut self, name: String, entry: ServiceEntry) -> Option<ServiceEntry> {
        match self.services.get_mut(&name) {
            Some(state) => Some(std::mem::replace(&mut state.entry, entry)),
            None => {
                self.services.insert(name, ServiceState::new(entry));
                None
            }
        }
    }

    /// Forgets `name` and all its state.
    pub(super) fn remove(&mut self, name: &str) -> Option<ServiceEntry> {
        self.services.remove(name).map(|s| s.entry)
    }

    /// The services as the store lists them now: those still listed keep
    /// their state, the others go with theirs.
    pub(super) fn adopt(
        &mut self,
        adopted: BTreeMap<String, ServiceEntry>,
        malformed: Vec<String>,
    ) {
        let mut old = std::mem::take(&mut self.services);
        self.services = adopted
            .into_iter()
            .map(|(name, entry)| {
                let state = match old.remove(&name) {
                    Some(mut state) => {
                        state.entry = entry;
                        state
                    }
                    None => ServiceState::new(entry),
                };
                (name, state)
            })
            .collect();
        self.malformed = malformed;
    }

    /// A stored key that does not decode or validate.
    pub(super) fn add_malformed(&mut self, name: String) {
        self.malformed.push(name);
    }

    /// `name` was written: it decodes now.
    pub(super) fn clear_malformed(&mut self, name: &str) {
        self.malformed.retain(|m| m != name);
    }

    /// The version a write of `name` expects: the one known, any over a
    /// malformed record, none for a new one.
    pub(super) fn expect(&self, name: &str) -> Expect {
        match self.services.get(name) {
            Some(state) => Expect::Version(state.entry.version),
            None if self.malformed.iter().any(|m| m == name) => Expect::Any,
            None => Expect::Absent,
        }
    }

    /// `name`'s backoffs, to change; `None` if the service is not known.
    pub(super) fn backoff_mut(&mut self, name: &str) -> Option<&mut ServiceBackoff> {
        self.services.get_mut(name).map(ServiceState::backoff_mut)
    }

    /// Forgets `name`'s backoffs (a new release is not to blame for the
    /// old one's failures).
    pub(super) fn forgive(&mut self, name: &str) {
        if let Some(state) = self.services.get_mut(name) {
            state.backoff = None;
        }
    }

    /// The framework was forgotten with every task record: each service's
    /// backoffs go, and so does what the last pass found of its tasks (a
    /// service found settled had its instances running; they are gone
    /// now, and no record change will say so: the table was cleared).
    pub(super) fn framework_forgotten(&mut self) {
        for state in self.services.values_mut() {
            state.backoff = None;
            state.settled = None;
        }
    }

    /// The shortfall of `name` in the last pass.
    pub(super) fn waiting(&self, name: &str) -> Option<&Shortfall> {
        self.services.get(name).and_then(|s| s.waiting.as_ref())
    }

    /// The shortfalls of this pass (every other service waits for nothing);
    /// true if any changed.
    pub(super) fn set_waiting(&mut self, mut waiting: HashMap<String, Shortfall>) -> bool {
        let mut changed = false;
        for (name, state) in &mut self.services {
            let now = waiting.remove(name);
            if state.waiting != now {
                state.waiting = now;
                changed = true;
            }
        }
        changed
    }

    /// Marks which services' rollouts are under way (`rolling` decides,
    /// by name); true if any changed.
    pub(super) fn set_rolling(&mut self, rolling: impl Fn(&str) -> bool) -> bool {
        let mut changed = false;
        for (name, state) in &mut self.services {
            let now = rolling(name);
            changed |= state.rolling != now;
            state.rolling = now;
        }
        changed
    }

    /// True if a write of `name` is in flight.
    pub(super) fn writing(&self, name: &str) -> bool {
        self.writes.contains_key(name)
    }

    /// A write of `name` is in flight as `request`.
    pub(super) fn begin_write(&mut self, name: String, request: RequestId) {
        self.writes.insert(name, request);
    }

    /// The write of `name` was answered.
    pub(super) fn end_write(&mut self, name: &str) {
        self.writes.remove(name);
    }

    /// A command waits for the write in flight of its service.
    pub(super) fn queue(&mut self, reply: ReplyId, request: Request) {
        self.queued.push((reply, request));
    }

    /// Takes the commands queued for `name`, in order.
    pub(super) fn take_queued(&mut self, name: &str) -> Vec<(ReplyId, Request)> {
        let (ready, rest) =
            std::mem::take(&mut self.queued)
                .into_iter()
                .partition(|(_, request)| match request {
                    Request::PutService(spec) => spec.name == name,
                    Request::ReplaceService { spec, .. } => spec.name == name,
                    Request::DeleteService { name: n, .. } => n == name,
                    Request::Rollout { name: n, .. } => n == name,
                    _ => false,
                });
        self.queued = rest;
        ready
    }

    /// Queues `commands` again, after those waiting.
    pub(super) fn requeue(&mut self, commands: impl IntoIterator<Item = (ReplyId, Request)>) {
        self.queued.extend(commands);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::rules::rollout::Progress;

    fn spec(name: &str, command: &str) -> ServiceSpec {
        serde_json::from_value(serde_json::json!({
            "name": name, "command": command, "cpus": 0.1, "mem": 32, "instances": 2
        }))
        .unwrap()
    }

    fn entry(name: &str, command: &str, version: i32) -> ServiceEntry {
        ServiceEntry::new(ServiceRecord::new(spec(name, command)), version)
    }

    /// `name` with every piece of per-service state set.
    fn with_state(t: &mut ServiceTable, name: &str) {
        t.insert(name.into(), entry(name, "sleep 1", 1));
        let state = t.state_mut(name).unwrap();
        state
            .backoff_mut()
            .running(0, &"web.0".into(), true, tokio::time::Instant::now());
        state.rollout_since = Some(10.0);
        state.rolling = true;
        state.settled = Some(Settled::new(&state.entry, Progress::default()));
        state.shown = Some(Shown::new(&state.entry.spec, None, 0, 10.0));
        state.waiting = Some(Shortfall::NoOffers);
    }

    fn is_clean(t: &mut ServiceTable, name: &str) -> bool {
        let s = t.state_mut(name).unwrap();
        s.backoff.is_none()
            && s.rollout_since.is_none()
            && !s.rolling
            && s.settled.is_none()
            && s.shown.is_none()
            && s.waiting.is_none()
    }

    #[test]
    fn a_removed_service_takes_its_state_and_a_recreated_one_starts_clean() {
        let mut t = ServiceTable::default();
        with_state(&mut t, "web");
        with_state(&mut t, "db");
        assert!(t.remove("web").is_some());
        assert!(!t.contains("web") && t.backoff_mut("web").is_none() && t.waiting("web").is_none());
        assert_eq!(t.names(), ["db"]);
        assert!(t.insert("web".into(), entry("web", "sleep 1", 1)).is_none());
        assert!(is_clean(&mut t, "web"));
        assert!(!is_clean(&mut t, "db"), "the other service keeps its state");
        // Nothing is kept for a name the table does not know.
        assert!(t.backoff_mut("cache").is_none());
        assert!(!t.contains("cache"));
    }

    #[test]
    fn a_replaced_record_keeps_the_state_until_forgiven() {
        let mut t = ServiceTable::default();
        with_state(&mut t, "web");
        let old = t.insert("web".into(), entry("web", "sleep 2", 2)).unwrap();
        assert_eq!(old.spec.command, spec("web", "sleep 1").command);
        assert_eq!(t.get("web").unwrap().version, 2);
        assert!(t.waiting("web").is_some());
        let state = t.state_mut("web").unwrap();
        assert!(state.backoff.is_some() && state.rollout_since.is_some());
        t.forgive("web");
        let state = t.state_mut("web").unwrap();
        assert!(state.backoff.is_none() && state.rollout_since.is_some());
    }

    #[test]
    fn adopting_the_store_keeps_the_state_of_services_still_listed_only() {
        let mut t = ServiceTable::default();
        with_state(&mut t, "web");
        with_state(&mut t, "db");
        t.add_malformed("old".into());
        let listed = BTreeMap::from([
            ("web".to_string(), entry("web", "sleep 3", 7)),
            ("cache".to_string(), entry("cache", "sleep 1", 1)),
        ]);
        t.adopt(listed, vec!["bad".into()]);
        assert_eq!(t.names(), ["cache", "web"]);
        assert_eq!(t.get("web").unwrap().version, 7);
        assert!(!is_clean(&mut t, "web"));
        assert!(is_clean(&mut t, "cache"));
        t.insert("db".into(), entry("db", "sleep 1", 2));
        assert!(
            is_clean(&mut t, "db"),
            "a service gone from the store left nothing"
        );
        assert!(matches!(t.expect("bad"), Expect::Any));
        assert!(matches!(t.expect("old"), Expect::Absent));
    }

    #[test]
    fn writes_expect_the_known_version_and_queue_commands_by_name() {
        let mut t = ServiceTable::default();
        t.insert("web".into(), entry("web", "sleep 1", 4));
        t.add_malformed("bad".into());
        assert!(matches!(t.expect("web"), Expect::Version(4)));
        assert!(matches!(t.expect("bad"), Expect::Any));
        assert!(matches!(t.expect("new"), Expect::Absent));
        t.clear_malformed("bad");
        assert!(matches!(t.expect("bad"), Expect::Absent));

        t.begin_write("web".into(), RequestId(1));
        assert!(t.writing("web") && !t.writing("db"));
        t.queue(
            ReplyId(1),
            Request::DeleteService {
                name: "web".into(),
                expected: None,
            },
        );
        t.queue(
            ReplyId(2),
            Request::DeleteService {
                name: "db".into(),
                expected: None,
            },
        );
        t.queue(
            ReplyId(3),
            Request::PutService(Box::new(
                crate::scheduler::spec::ValidServiceSpec::new(spec("web", "x")).unwrap(),
            )),
        );
        // A removed service's write stays in flight until answered.
        t.remove("web");
        assert!(t.writing("web"));
        t.end_write("web");
        assert!(!t.writing("web"));
        let ready: Vec<ReplyId> = t.take_queued("web").into_iter().map(|(r, _)| r).collect();
        assert_eq!(ready, [ReplyId(1), ReplyId(3)]);
        assert_eq!(t.take_queued("db").len(), 1);
        assert!(t.take_queued("db").is_empty());
    }

    #[test]
    fn pass_results_report_a_change_once() {
        let mut t = ServiceTable::default();
        t.insert("web".into(), entry("web", "sleep 1", 1));
        t.insert("db".into(), entry("db", "sleep 1", 1));
        let waiting = HashMap::from([("web".to_string(), Shortfall::NoOffers)]);
        assert!(t.set_waiting(waiting.clone()));
        assert!(!t.set_waiting(waiting));
        assert_eq!(t.waiting("web"), Some(&Shortfall::NoOffers));
        assert!(t.set_waiting(HashMap::new()));
        assert!(t.waiting("web").is_none());
        assert!(t.set_rolling(|n| n == "db"));
        assert!(!t.set_rolling(|n| n == "db"));
        assert!(t.set_rolling(|_| false));
    }
}
