//! Placement: first fit of missing task instances onto held offers, honouring
//! constraints, taking ports from offered ranges, several tasks per offer.
//! Pure: it subtracts planned resources from the offers' `remaining` and
//! returns what to launch; the core does the I/O.

use std::collections::HashMap;

use super::offers::OfferRegistry;
use crate::mesos::resources::{self, Resources};
use crate::mesos::v1;
use crate::scheduler::ids::AgentId;
use crate::scheduler::spec::service::{Constraint, ServiceSpec};

/// Instances of one service to place.
#[derive(Debug, Clone)]
pub struct Demand<'a> {
    /// The service.
    pub spec: &'a ServiceSpec,
    /// Instance numbers to launch, in order.
    pub missing: Vec<u32>,
    /// Agents (ID, hostname) of the service's live tasks, for UNIQUE
    /// (only read when the spec has a UNIQUE constraint; may be left
    /// empty otherwise).
    pub occupied: Vec<(AgentId, String)>,
    /// Extra resources each task needs for its executor (our executor runs
    /// one per task; the command executor needs none at the master).
    pub executor_resources: Resources,
}

/// One task to launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Service name.
    pub service: String,
    /// Instance number.
    pub instance: u32,
    /// The offer it goes on.
    pub offer_id: String,
    /// That offer's agent.
    pub agent_id: AgentId,
    /// That agent's hostname.
    pub hostname: String,
    /// Host ports taken from the offer's `ports` ranges.
    pub ports: Vec<u64>,
}

/// The value of a constraint field on an agent: its hostname or an attribute.
fn field_value(field: &str, hostname: &str, attributes: &[v1::Attribute]) -> Option<String> {
    if field == "hostname" {
        return Some(hostname.to_string());
    }
    attributes
        .iter()
        .find(|a| a.name == field)
        .map(resources::attribute_text)
}

/// A constraint with its regex compiled, anchored at both ends (`None`
/// where it has none, or it does not compile: nothing matches it). Compiled
/// once per demand of a pass, not once per offer looked at.
struct Compiled {
    constraint: Constraint,
    regex: Option<regex::Regex>,
}

fn compile(constraints: Vec<Constraint>) -> Vec<Compiled> {
    constraints
        .into_iter()
        .map(|constraint| {
            let regex = match &constraint {
                Constraint::Like { regex, .. } | Constraint::Unlike { regex, .. } => {
                    regex::Regex::new(&format!("^(?:{regex})$")).ok()
                }
                Constraint::Unique { .. } => None,
            };
            Compiled { constraint, regex }
        })
        .collect()
}

fn matches(regex: Option<&regex::Regex>, value: &str) -> bool {
    regex.is_some_and(|r| r.is_match(value))
}

/// True when a task of the service may go on this agent.
fn satisfies(
    constraints: &[Compiled],
    hostname: &str,
    attributes: &[v1::Attribute],
    occupied: &[(AgentId, String)],
    agent_attributes: &HashMap<AgentId, Vec<v1::Attribute>>,
) -> bool {
    constraints.iter().all(|c| match &c.constraint {
        Constraint::Like { field, .. } => {
            field_value(field, hostname, attributes).is_some_and(|v| matches(c.regex.as_ref(), &v))
        }
        Constraint::Unlike { field, .. } => {
            field_value(field, hostname, attributes).is_none_or(|v| !matches(c.regex.as_ref(), &v))
        }
        Constraint::Unique { field } => {
            let Some(mine) = field_value(field, hostname, attributes) else {
                return false;
            };
            !occupied.iter().any(|(agent, host)| {
                let attrs = agent_attributes
                    .get(agent)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                field_value(field, host, attrs).as_deref() == Some(mine.as_str())
            })
        }
    })
}

/// The lowest `count` ports of `available`, or `None` if there are fewer.
fn take_ports(available: &[(u64, u64)], count: u32) -> Option<Vec<u64>> {
    let mut out = Vec::with_capacity(count as usize);
    for &(begin, end) in available {
        let mut port = begin;
        while port <= end && out.len() < count as usize {
            out.push(port);
            port += 1;
        }
        if out.len() == count as usize {
            return Some(out);
        }
    }
    (out.len() == count as usize).then_some(out)
}

/// The scalar resources one task of `spec` takes (cpus, mem, disk).
pub fn task_resources(spec: &ServiceSpec) -> Resources {
    let mut r = Resources::new();
    r.add_scalar("cpus", spec.cpus);
    r.add_scalar("mem", spec.mem);
    if spec.disk > 0.0 {
        r.add_scalar("disk", spec.disk);
    }
    r
}

/// Places as many demanded instances as fit, first fit over offers in
/// arrival order, services in the given order. `agent_attributes` maps agent
/// IDs to attributes seen in their offers (for UNIQUE on attributes).
pub fn plan(
    demands: &[Demand<'_>],
    offers: &mut OfferRegistry,
    agent_attributes: &HashMap<AgentId, Vec<v1::Attribute>>,
) -> Vec<Planned> {
    let mut planned = Vec::new();
    let order: Vec<String> = offers.iter().map(|o| o.id().to_string()).collect();
    for demand in demands {
        let constraints = compile(demand.spec.parsed_constraints());
        let mut need = task_resources(demand.spec);
        need.add(&demand.executor_resources);
        let mut occupied = demand.occupied.clone();
        // First fit resumes at the offer the last instance took: every
        // offer before it refused that instance and refuses this one too
        // (within a pass an offer's resources and ports only shrink, and
        // the hosts UNIQUE excludes only grow). A launch of thousands of
        // instances so looks at each offer about once, not once per
        // instance.
        let mut from = 0;
        'instances: for &instance in &demand.missing {
            for (at, id) in order.iter().enumerate().skip(from) {
                let Some(offer) = offers.get_mut(id) else {
                    continue;
                };
                if !offer.remaining.contains(&need) {
                    continue;
                }
                let hostname = offer.offer.hostname.clone();
                let agent_id = AgentId::from(offer.agent_id());
                if !satisfies(
                    &constraints,
                    &hostname,
                    &offer.offer.attributes,
                    &occupied,
                    agent_attributes,
                ) {
                    continue;
                }
                let Some(ports) = take_ports(offer.remaining.ranges("ports"), demand.spec.ports)
                else {
                    continue;
                };
                use_up(&mut offer.remaining, &need, &ports);
                occupied.push((agent_id.clone(), hostname.clone()));
                planned.push(Planned {
                    service: demand.spec.name.clone(),
                    instance,
                    offer_id: id.clone(),
                    agent_id,
                    hostname,
                    ports,
                });
                from = at;
                continue 'instances;
            }
            // No offer takes this instance, so none takes the next.
            break;
        }
    }
    planned
}

/// Takes one task's `need` and host `ports` from what an offer has left.
fn use_up(remaining: &mut Resources, need: &Resources, ports: &[u64]) {
    remaining.subtract(need);
    let taken: Vec<(u64, u64)> = ports.iter().map(|p| (*p, *p)).collect();
    let mut port_resources = Resources::new();
    port_resources.add_ranges("ports", &taken);
    remaining.subtract(&port_resources);
}

/// Why no held offer takes one more instance of a service (see [`shortfall`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Shortfall {
    /// No offers are held: normal while Mesos has not offered yet.
    NoOffers,
    /// No held offer has enough of some resources: each named with the
    /// amount one task needs and the largest amount offered.
    Resources {
        /// Offers held.
        offers: usize,
        /// `(resource, needed, largest offered)`; ports as a count.
        short: Vec<(&'static str, f64, f64)>,
    },
    /// Some offers have room but the service's constraints exclude them.
    Constraints {
        /// Offers held.
        offers: usize,
        /// The constraints as written.
        constraints: Vec<String>,
    },
    /// Other tasks took the room in this pass.
    Taken {
        /// Offers held.
        offers: usize,
    },
}

impl Shortfall {
    /// True when waiting for more offers will not help by itself: no offer
    /// the cluster makes is large enough, or the constraints rule them out.
    pub fn is_stuck(&self) -> bool {
        matches!(
            self,
            Shortfall::Resources { .. } | Shortfall::Constraints { .. }
        )
    }
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shortfall::NoOffers => {
                write!(f, "no offers held; waiting for Mesos to offer resources")
            }
            Shortfall::Resources { offers, short } => {
                write!(f, "no offer of the {offers} held has enough: needs ")?;
                for (i, (name, needed, largest)) in short.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(
                        f,
                        "{sep}{name} {} (largest offer: {})",
                        amount(*needed),
                        amount(*largest)
                    )?;
                }
                Ok(())
            }
            Shortfall::Constraints {
                offers,
                constraints,
            } => write!(
                f,
                "constraints {} exclude every one of the {offers} offers held with room",
                constraints.join(", ")
            ),
            Shortfall::Taken { offers } => write!(
                f,
                "the {offers} offers held are taken by other tasks; waiting for more"
            ),
        }
    }
}

/// Why no held offer takes one more instance of `demand`, for operators.
/// Called after [`plan`], on the offers' remaining resources.
pub fn shortfall(demand: &Demand<'_>, offers: &OfferRegistry) -> Shortfall {
    if offers.is_empty() {
        return Shortfall::NoOffers;
    }
    let mut need = task_resources(demand.spec);
    need.add(&demand.executor_resources);
    let largest = |amount: &dyn Fn(&Resources) -> f64| {
        offers
            .iter()
            .map(|o| amount(&o.remaining))
            .fold(0.0, f64::max)
    };
    let mut short = Vec::new();
    for name in ["cpus", "mem", "disk"] {
        let most = largest(&|r| r.scalar(name));
        if need.scalar(name) > most {
            short.push((name, need.scalar(name), most));
        }
    }
    let most_ports = largest(&|r| port_count(r.ranges("ports")) as f64);
    if f64::from(demand.spec.ports) > most_ports {
        short.push(("ports", f64::from(demand.spec.ports), most_ports));
    }
    let offers = offers.len();
    if !short.is_empty() {
        Shortfall::Resources { offers, short }
    } else if !demand.spec.constraints.is_empty() {
        Shortfall::Constraints {
            offers,
            constraints: demand.spec.constraints.clone(),
        }
    } else {
        Shortfall::Taken { offers }
    }
}

/// A resource amount for people: at most three decimals, no trailing zeros
/// (0.1 + 0.2 shows as 0.3).
fn amount(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn port_count(ranges: &[(u64, u64)]) -> u64 {
    ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    fn spec(json: serde_json::Value) -> ServiceSpec {
        serde_json::from_value(json).unwrap()
    }

    fn registry(offers: &[(&str, &str, &str, &str, &str)]) -> OfferRegistry {
        let mut r = OfferRegistry::new(Duration::from_secs(60), Duration::from_secs(60));
        for (i, (id, agent, host, res, attrs)) in offers.iter().enumerate() {
            let offer = v1::Offer {
                id: v1::OfferId {
                    value: id.to_string(),
                },
                agent_id: v1::AgentId {
                    value: agent.to_string(),
                },
                hostname: host.to_string(),
                resources: Resources::parse(res).unwrap().to_protos(None),
                attributes: resources::parse_attributes(attrs).unwrap(),
                ..Default::default()
            };
            r.add(offer, Instant::now() + Duration::from_millis(i as u64), 0.0);
        }
        r
    }

    fn demand<'a>(spec: &'a ServiceSpec, missing: &[u32]) -> Demand<'a> {
        Demand {
            spec,
            missing: missing.to_vec(),
            occupied: vec![],
            executor_resources: Resources::new(),
        }
    }

    /// First fit as written before the resumed scan (`plan`'s `from`):
    /// every instance looks at every offer from the first, the regexes
    /// compiled at each look. The property below holds `plan` to it.
    fn first_fit_reference(
        demands: &[Demand<'_>],
        offers: &mut OfferRegistry,
        agent_attributes: &HashMap<AgentId, Vec<v1::Attribute>>,
    ) -> Vec<(String, u32, String, Vec<u64>)> {
        let mut planned = Vec::new();
        let order: Vec<String> = offers.iter().map(|o| o.id().to_string()).collect();
        for demand in demands {
            let mut need = task_resources(demand.spec);
            need.add(&demand.executor_resources);
            let mut occupied = demand.occupied.clone();
            'instances: for &instance in &demand.missing {
                for id in &order {
                    let Some(offer) = offers.get_mut(id) else {
                        continue;
                    };
                    let constraints = compile(demand.spec.parsed_constraints());
                    let host = offer.offer.hostname.clone();
                    let attrs = offer.offer.attributes.clone();
                    if !offer.remaining.contains(&need)
                        || !satisfies(&constraints, &host, &attrs, &occupied, agent_attributes)
                    {
                        continue;
                    }
                    let Some(ports) =
                        take_ports(offer.remaining.ranges("ports"), demand.spec.ports)
                    else {
                        continue;
                    };
                    use_up(&mut offer.remaining, &need, &ports);
                    occupied.push((AgentId::from(offer.agent_id()), host));
                    planned.push((demand.spec.name.clone(), instance, id.clone(), ports));
                    continue 'instances;
                }
            }
        }
        planned
    }

    proptest::proptest! {
        /// `plan` places exactly as first fit over every offer does, for
        /// any offers and demands (sizes, ports, UNIQUE, LIKE, UNLIKE).
        #[test]
        fn the_resumed_scan_places_as_first_fit_does(
            offers in proptest::collection::vec((1u8..8, 0u8..4, 0u8..3, 0u8..3), 1..8),
            demands in proptest::collection::vec((1u8..4, 0u32..3, 0u8..4, 1u32..12), 1..4),
        ) {
            let rows: Vec<(String, String, String, String, String)> = offers
                .iter()
                .enumerate()
                .map(|(i, (cpus, ports, host, rack))| {
                    let ports = if *ports == 0 {
                        String::new()
                    } else {
                        format!(";ports:[{}-{}]", 31000, 31000 + u32::from(*ports) * 2)
                    };
                    (
                        format!("o{i}"),
                        format!("a{i}"),
                        format!("h{host}"),
                        format!("cpus:{cpus};mem:1000{ports}"),
                        format!("rack:r{rack}"),
                    )
                })
                .collect();
            let borrowed: Vec<(&str, &str, &str, &str, &str)> = rows
                .iter()
                .map(|(a, b, c, d, e)| (a.as_str(), b.as_str(), c.as_str(), d.as_str(), e.as_str()))
                .collect();
            let constraint_sets = [
                vec![],
                vec!["hostname:UNIQUE"],
                vec!["rack:LIKE:r[12]"],
                vec!["rack:UNLIKE:r1", "hostname:UNIQUE"],
            ];
            let specs: Vec<ServiceSpec> = demands
                .iter()
                .enumerate()
                .map(|(i, (cpus, ports, constraints, _))| {
                    spec(serde_json::json!({
                        "name": format!("s{i}"), "command": "x", "cpus": f64::from(*cpus) / 2.0,
                        "mem": 10, "ports": ports, "instances": 20,
                        "constraints": constraint_sets[usize::from(*constraints)],
                    }))
                })
                .collect();
            let list: Vec<Demand<'_>> = specs
                .iter()
                .zip(&demands)
                .map(|(s, (_, _, _, missing))| demand(s, &(0..*missing).collect::<Vec<_>>()))
                .collect();
            let attributes = HashMap::new();
            let mut mine = registry(&borrowed);
            let got: Vec<(String, u32, String, Vec<u64>)> = plan(&list, &mut mine, &attributes)
                .into_iter()
                .map(|p| (p.service, p.instance, p.offer_id, p.ports))
                .collect();
            let mut theirs = registry(&borrowed);
            let want = first_fit_reference(&list, &mut theirs, &attributes);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn several_tasks_per_offer_with_ports() {
        let s = spec(
            serde_json::json!({"name": "web", "command": "x", "cpus": 1, "mem": 100, "ports": 2, "instances": 3}),
        );
        let mut offers = registry(&[
            ("o1", "a1", "h1", "cpus:2;mem:1000;ports:[31000-31002]", ""),
            ("o2", "a2", "h2", "cpus:4;mem:1000;ports:[32000-32010]", ""),
        ]);
        let planned = plan(&[demand(&s, &[0, 1, 2])], &mut offers, &HashMap::new());
        let placed: Vec<(&str, Vec<u64>)> = planned
            .iter()
            .map(|p| (p.offer_id.as_str(), p.ports.clone()))
            .collect();
        assert_eq!(
            placed,
            [
                ("o1", vec![31000, 31001]),
                ("o2", vec![32000, 32001]),
                ("o2", vec![32002, 32003])
            ]
        );
        let o1 = offers.iter().next().unwrap();
        assert_eq!(o1.remaining.scalar("cpus"), 1.0);
        assert_eq!(o1.remaining.ranges("ports"), &[(31002, 31002)]);
    }

    #[test]
    fn hostname_unique_spreads_and_stops_when_hosts_run_out() {
        let s = spec(
            serde_json::json!({"name": "u", "command": "x", "cpus": 0.1, "mem": 10, "instances": 3, "constraints": ["hostname:UNIQUE"]}),
        );
        let mut offers = registry(&[
            ("o1", "a1", "h1", "cpus:4;mem:1000", ""),
            ("o2", "a2", "h2", "cpus:4;mem:1000", ""),
        ]);
        let mut d = demand(&s, &[1, 2]);
        d.occupied = vec![("a1".into(), "h1".into())];
        let planned = plan(&[d], &mut offers, &HashMap::new());
        assert_eq!(
            planned.len(),
            1,
            "h1 is taken by instance 0; only h2 is left"
        );
        assert_eq!(planned[0].hostname, "h2");
    }

    #[test]
    fn like_and_unlike_on_attributes() {
        let like = spec(
            serde_json::json!({"name": "l", "command": "x", "cpus": 0.1, "mem": 10, "instances": 1, "constraints": ["rack:LIKE:r[12]"]}),
        );
        let unlike = spec(
            serde_json::json!({"name": "n", "command": "x", "cpus": 0.1, "mem": 10, "instances": 1, "constraints": ["rack:UNLIKE:r[12]"]}),
        );
        let mut offers = registry(&[
            ("o1", "a1", "h1", "cpus:1;mem:100", "rack:r3"),
            ("o2", "a2", "h2", "cpus:1;mem:100", "rack:r2"),
        ]);
        let planned = plan(
            &[demand(&like, &[0]), demand(&unlike, &[0])],
            &mut offers,
            &HashMap::new(),
        );
        assert_eq!(planned[0].hostname, "h2");
        assert_eq!(planned[1].hostname, "h1");
    }

    #[test]
    fn unique_on_an_attribute_uses_known_agent_attributes() {
        let s = spec(
            serde_json::json!({"name": "z", "command": "x", "cpus": 0.1, "mem": 10, "instances": 2, "constraints": ["zone:UNIQUE"]}),
        );
        let mut offers = registry(&[
            ("o1", "a1", "h1", "cpus:1;mem:100", "zone:a"),
            ("o2", "a3", "h3", "cpus:1;mem:100", "zone:b"),
        ]);
        let mut attrs = HashMap::new();
        attrs.insert(
            AgentId::from("a2"),
            resources::parse_attributes("zone:a").unwrap(),
        );
        let mut d = demand(&s, &[1]);
        d.occupied = vec![("a2".into(), "h2".into())];
        let planned = plan(&[d], &mut offers, &attrs);
        assert_eq!(
            planned[0].hostname, "h3",
            "zone a is taken by the task on a2"
        );
    }

    #[test]
    fn nothing_fits_nothing_planned() {
        let s = spec(
            serde_json::json!({"name": "big", "command": "x", "cpus": 8, "mem": 10, "instances": 1}),
        );
        let mut offers = registry(&[("o1", "a1", "h1", "cpus:4;mem:1000", "")]);
        assert!(plan(&[demand(&s, &[0])], &mut offers, &HashMap::new()).is_empty());
        assert_eq!(take_ports(&[(1, 2)], 3), None);
        assert_eq!(take_ports(&[], 0), Some(vec![]));
    }

    #[test]
    fn shortfall_names_the_missing_resource_or_the_constraint() {
        let big = spec(
            serde_json::json!({"name": "big", "command": "x", "cpus": 8, "mem": 10, "ports": 2, "instances": 1}),
        );
        let empty = OfferRegistry::new(Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(shortfall(&demand(&big, &[0]), &empty), Shortfall::NoOffers);
        let offers = registry(&[
            ("o1", "a1", "h1", "cpus:4;mem:1000;ports:[31000-31000]", ""),
            ("o2", "a2", "h2", "cpus:2;mem:1000", ""),
        ]);
        assert_eq!(amount(0.1 + 0.2), "0.3");
        assert_eq!(amount(4.0), "4");
        assert_eq!(
            shortfall(&demand(&big, &[0]), &offers).to_string(),
            "no offer of the 2 held has enough: needs cpus 8 (largest offer: 4), \
             ports 2 (largest offer: 1)"
        );
        let picky = spec(
            serde_json::json!({"name": "p", "command": "x", "cpus": 1, "mem": 10, "instances": 1, "constraints": ["rack:LIKE:r9"]}),
        );
        assert_eq!(
            shortfall(&demand(&picky, &[0]), &offers).to_string(),
            "constraints rack:LIKE:r9 exclude every one of the 2 offers held with room"
        );
    }
}
