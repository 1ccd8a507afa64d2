//! Running the doctor on a fleet: the node script on every node at once (results as each
//! node answers), the comparisons across nodes, then the reachability matrix in rounds.
//! The GCP placement check is the caller's (it needs the cloud client).

use super::{
    judge_facts, judge_fleet, judge_node, net, script, Context, Facts, Finding, Outcome, Report, Seen,
};
use crate::exec::{self, Chunk, Stream, Transport};
use crate::fleet::NodeTarget;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the doctor reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A node answered: its findings.
    Node { node: String, findings: Vec<Finding> },
    /// Findings about the fleet or several nodes (comparisons, the matrix).
    Fleet(Vec<Finding>),
    /// A progress line: a tally (`progress::tally`) or words.
    Progress(String),
}

/// How long a node's script may run.
pub const NODE_LIMIT: Duration = Duration::from_secs(60);

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// Examine `nodes`; `on` hears every finding as it is made. The report holds them all,
/// causes linked.
pub async fn examine(
    transport: Transport,
    fleet: &str,
    nodes: &[NodeTarget],
    ctx: &Context,
    on: &(dyn Fn(Event) + Send + Sync),
) -> Report {
    let start = Instant::now();
    let mut report = Report {
        fleet: fleet.to_string(),
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        ..Report::default()
    };
    // Checks that ask the cloud alone (placement) need nothing from the nodes.
    if !ctx.only.is_empty() && ctx.only.iter().all(|c| c == "placement") {
        report.elapsed_ms = start.elapsed().as_millis() as u64;
        return report;
    }
    let text = script::script(ctx.preflight_script().as_deref());
    let jobs: Vec<(NodeTarget, String, Vec<u8>)> = nodes
        .iter()
        .map(|n| (n.clone(), "sh -s".to_string(), text.as_bytes().to_vec()))
        .collect();
    let (tx, mut rx) = exec::channel(1024);
    let fanout = nodes.len().clamp(1, 256);
    let h = tokio::spawn(exec::run_each_with_input(
        transport.clone(),
        jobs,
        fanout,
        Some(NODE_LIMIT),
        tx,
    ));
    let pos = |index: usize| nodes.iter().position(|n| n.index == index);
    let mut stdout: Vec<String> = vec![String::new(); nodes.len()];
    let mut arrived: Vec<Option<i128>> = vec![None; nodes.len()];
    let mut facts: Vec<Option<Facts>> = vec![None; nodes.len()];
    let mut done = 0;
    on(Event::Progress(crate::progress::tally(
        0,
        nodes.len(),
        "nodes checked",
    )));
    while let Some(c) = rx.recv_chunk().await {
        match c {
            Chunk::Lines {
                node,
                stream: Stream::Stdout,
                text,
            } => {
                let Some(k) = pos(node) else { continue };
                arrived[k].get_or_insert_with(now_ns);
                stdout[k].push_str(&text);
            }
            Chunk::Lines { .. } => {}
            Chunk::Done { node, result } => {
                let Some(k) = pos(node) else { continue };
                let sections = script::parse(&stdout[k]);
                let error = match (result.code, &result.error) {
                    (exec::UNREACHABLE, Some(e)) => Some(e.clone()),
                    (exec::UNREACHABLE, None) => Some("unreachable".to_string()),
                    (exec::TIMED_OUT, _) => Some(format!(
                        "the checks did not finish within {} s",
                        NODE_LIMIT.as_secs()
                    )),
                    _ => None,
                };
                let findings = match error {
                    Some(e) => judge_node(ctx, &nodes[k].name, &sections, result.code, Some(&e)),
                    None => {
                        let f = Facts::read(&sections);
                        let found = judge_facts(ctx, &nodes[k].name, &sections, &f, result.code);
                        facts[k] = Some(f);
                        found
                    }
                };
                report.add(findings.clone());
                on(Event::Node {
                    node: nodes[k].name.clone(),
                    findings,
                });
                done += 1;
                on(Event::Progress(crate::progress::tally(
                    done,
                    nodes.len(),
                    "nodes checked",
                )));
            }
        }
    }
    let _ = h.await;

    let seen: Vec<(usize, Seen<'_>)> = facts
        .iter()
        .enumerate()
        .filter_map(|(k, f)| {
            Some((
                k,
                Seen {
                    node: &nodes[k].name,
                    facts: f.as_ref()?,
                    arrived_ns: arrived[k],
                },
            ))
        })
        .collect();
    let views: Vec<Seen<'_>> = seen
        .iter()
        .map(|(_, s)| Seen {
            node: s.node,
            facts: s.facts,
            arrived_ns: s.arrived_ns,
        })
        .collect();
    let fleet_findings = judge_fleet(ctx, &views);
    report.add(fleet_findings.clone());
    on(Event::Fleet(fleet_findings));

    if ctx.wants("reach") {
        let found = reach(transport, nodes, &seen, on).await;
        report.add(found.clone());
        on(Event::Fleet(found));
    }
    report.link_causes();
    report.elapsed_ms = start.elapsed().as_millis() as u64;
    report
}

/// The reachability matrix over the nodes that answered.
async fn reach(
    transport: Transport,
    nodes: &[NodeTarget],
    seen: &[(usize, Seen<'_>)],
    on: &(dyn Fn(Event) + Send + Sync),
) -> Vec<Finding> {
    let skip = |what: &str| vec![Finding::fleet("reach", Outcome::Skip, what)];
    if seen.len() < 2 {
        return skip("fewer than two nodes answered: no pair to probe");
    }
    // Each node's data NICs with an address: (NIC, address).
    let addrs: Vec<Vec<(String, String)>> = seen
        .iter()
        .map(|(_, s)| {
            s.facts
                .data_nics()
                .into_iter()
                .filter_map(|n| Some((n.name.clone(), n.addr.clone()?)))
                .collect()
        })
        .collect();
    let mut rails: Vec<&str> = addrs.iter().flatten().map(|(n, _)| n.as_str()).collect();
    rails.sort();
    rails.dedup();
    rails.retain(|r| addrs.iter().filter(|a| a.iter().any(|(n, _)| n == r)).count() >= 2);
    if rails.is_empty() {
        return skip("no data NIC with an address on two nodes: nothing to probe");
    }
    let m = seen.len();
    let count = net::probes_per_pair(m);
    let rounds = net::rounds(m);
    let slot = net::slot_ms(count);
    // Every node gets its rounds in one session, each round at a time agreed beforehand:
    // a lead from now (time for every session to open: more nodes, more time), by this
    // machine's clock, moved by each node's clock offset. A node whose session opens late
    // runs its first rounds back to back until it is on time.
    let lead_ms: u64 = 1500 + 20 * m as u64;
    let now = now_ns();
    let mut jobs = vec![];
    let mut peers_of: Vec<(usize, Vec<usize>)> = vec![];
    for (k, (pos, seen_k)) in seen.iter().enumerate() {
        let offset = match (seen_k.facts.time_ns, seen_k.arrived_ns) {
            (Some(t), Some(a)) => t - a,
            _ => 0,
        };
        let mut plan = vec![];
        let mut peers = vec![0; rounds.len() + 1];
        for (r, round) in rounds.iter().enumerate() {
            let Some(&(_, b)) = round.iter().find(|(a, _)| *a == k) else {
                continue;
            };
            peers[r + 1] = b;
            let targets: Vec<(String, String)> = addrs[k]
                .iter()
                .filter(|(nic, _)| rails.contains(&nic.as_str()))
                .filter_map(|(nic, _)| {
                    let peer = addrs[b].iter().find(|(n, _)| n == nic)?;
                    Some((nic.clone(), peer.1.clone()))
                })
                .collect();
            if !targets.is_empty() {
                plan.push((r + 1, targets));
            }
        }
        let start = now + i128::from(lead_ms) * 1_000_000 + offset - i128::from(slot) * 1_000_000;
        jobs.push((
            nodes[*pos].clone(),
            "sh -s".to_string(),
            net::schedule_script(&plan, count, start, slot).into_bytes(),
        ));
        peers_of.push((k, peers));
    }
    let total_ms = lead_ms + slot * rounds.len() as u64;
    on(Event::Progress(format!(
        "reachability: {} of {count} probes per pair on {}, about {:.0} s",
        crate::words::plural(rounds.len(), "round"),
        rails.join(" "),
        total_ms as f64 / 1000.0
    )));
    let limit = Duration::from_millis(total_ms + 30_000);
    let out = exec::collect_within(transport, jobs, Some(limit)).await;
    let mut probes: Vec<net::Probe> = vec![];
    for ((a, peers), (code, stdout, _)) in peers_of.into_iter().zip(out) {
        if code == exec::UNREACHABLE {
            continue;
        }
        for (round, nic, sent, received, avg_ms, error) in net::parse_probes(&stdout) {
            let Some(&b) = peers.get(round).filter(|_| round >= 1) else {
                continue;
            };
            probes.push(net::Probe {
                from: a,
                to: b,
                nic,
                sent,
                received,
                avg_ms,
                error,
            });
        }
    }
    on(Event::Progress(crate::progress::tally(
        rounds.len(),
        rounds.len(),
        "probe rounds",
    )));
    let names: Vec<String> = seen.iter().map(|(_, s)| s.node.to_string()).collect();
    super::judge_reach(&names, &probes)
}

/// The `placement` check of a GCP fleet, from the Compute API; a skip for other fleets,
/// a warning when the API does not answer.
pub async fn placement(
    paths: &crate::paths::Paths,
    fleet: &str,
    nodes: &[NodeTarget],
    compact: bool,
) -> Vec<Finding> {
    let one =
        |outcome: Outcome, what: String, fix: &str| vec![Finding::fleet("placement", outcome, what).fix(fix)];
    let record = crate::store::Store::new(&paths.state_dir)
        .load()
        .ok()
        .and_then(|(s, _)| s.fleets.into_iter().find(|f| f.name == fleet));
    let Some(record) = record.filter(|r| r.backend == "gcp") else {
        return one(
            Outcome::Skip,
            "not a GCP fleet: the API that knows placement is Compute Engine's".into(),
            "",
        );
    };
    let result = match crate::cloud::lifecycle::gcp_backend(paths) {
        Ok(b) => match b.connect().await {
            Ok(gcp) => gcp.placement(&record).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match result {
        Ok(placed) => {
            let placed: Vec<_> = placed
                .into_iter()
                .filter(|p| p.node.is_none_or(|i| nodes.iter().any(|n| n.index == i)))
                .collect();
            let names: Vec<String> = record.nodes.iter().map(|n| n.name.clone()).collect();
            super::judge_placement(compact, &placed, &names)
        }
        Err(e) => one(
            Outcome::Warn,
            format!("the Compute API did not answer: {e}"),
            "check credentials (`gcloud auth application-default login`) and retry",
        ),
    }
}
