//! Running the doctor on a fleet: the node script on every node at once (results as each
//! node answers), the comparisons across nodes, then the reachability matrix in rounds.
//! The GCP placement check is the caller's (it needs the cloud client).

use super::{
    judge_facts, judge_fleet, judge_node, net, script, Clock, Context, Facts, Finding, Outcome, Report, Seen,
};
use crate::exec::{self, Chunk, Stream};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
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
    reach: Reach,
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
        reach.clone(),
        jobs,
        fanout,
        Some(NODE_LIMIT),
        tx,
    ));
    let pos = |index: usize| nodes.iter().position(|n| n.index == index);
    // Each node's output read into sections as it arrives, in bounded memory.
    let mut readers: Vec<Option<script::Reader>> = (0..nodes.len())
        .map(|_| Some(script::Reader::default()))
        .collect();
    let mut arrived: Vec<Option<i128>> = vec![None; nodes.len()];
    // When each node's first line came, in ms from the start (its login and shell).
    let mut first_ms: Vec<Option<u128>> = vec![None; nodes.len()];
    let mut facts: Vec<Option<Facts>> = vec![None; nodes.len()];
    let mut done = 0;
    let wants_reach = ctx.wants("reach");
    let wants_clock = ctx.wants("clock") && nodes.len() > 1;
    // Each node's connection kept for the probes (their sessions then open at once).
    let mut held = Held::default();
    // The probes start as soon as every node is past its script's `net-ready` (or has
    // ended without it): they need only the network's facts, and run while the slower
    // checks do. `ready[k]`: node k's facts for the probes (None: not a prober), once known.
    let mut ready: Vec<Option<Option<Facts>>> = vec![None; nodes.len()];
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Vec<(usize, Facts, Option<i128>)>>();
    // Once every node's script has ended: the second look at suspects waits for it, so it
    // probes a fleet whose nodes run nothing of the doctor's but its pings.
    let (quiet_tx, quiet_rx) = tokio::sync::watch::channel(false);
    let mut ready_tx = Some(ready_tx);
    let send_ready = |ready: &mut Vec<Option<Option<Facts>>>,
                      arrived: &[Option<i128>],
                      tx: &mut Option<tokio::sync::oneshot::Sender<_>>| {
        if ready.iter().all(Option::is_some) {
            if let Some(tx) = tx.take() {
                let snap: Vec<(usize, Facts, Option<i128>)> = ready
                    .iter_mut()
                    .enumerate()
                    .filter_map(|(k, f)| Some((k, f.take()??, arrived[k])))
                    .collect();
                let _ = tx.send(snap);
            }
        }
    };
    on(Event::Progress(crate::progress::tally(
        0,
        nodes.len(),
        "nodes checked",
    )));
    let node_phase = async {
        while let Some(c) = rx.recv_chunk().await {
            match c {
                Chunk::Lines {
                    node,
                    stream: Stream::Stdout,
                    text,
                } => {
                    let Some(k) = pos(node) else { continue };
                    if arrived[k].is_none() {
                        arrived[k] = Some(now_ns());
                        first_ms[k] = Some(start.elapsed().as_millis());
                        held.hold(&reach, &nodes[k], k, wants_clock, wants_reach);
                    }
                    if let Some(r) = readers[k].as_mut() {
                        r.push(&text);
                        if ready[k].is_none() && r.ended("net-ready") && !r.full() {
                            ready[k] = Some(Some(Facts::read(&r.so_far())));
                            send_ready(&mut ready, &arrived, &mut ready_tx);
                        }
                    }
                }
                Chunk::Lines { .. } => {}
                Chunk::Done { node, result } => {
                    let Some(k) = pos(node) else { continue };
                    let Some(reader) = readers[k].take() else { continue };
                    // Where the node's time went: its first line, each section on the
                    // node (the bench sums these up), its end.
                    let (each, whole) = reader.timing();
                    tracing::info!(
                        "doctor: script on {}: first line {} ms, done {} ms after the start; on the node {} ms: {}",
                        nodes[k].name,
                        first_ms[k].map_or("-".to_string(), |m| m.to_string()),
                        start.elapsed().as_millis(),
                        whole.map_or("-".to_string(), |m| m.to_string()),
                        each.iter()
                            .map(|(n, ms)| format!("{n} {ms}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    let full = reader.full();
                    let (sections, cuts) = reader.finish();
                    let findings = if full {
                        // Not the node script's output (it cuts every section): nothing of it
                        // is judged.
                        super::judge_flood(&nodes[k].name, &cuts)
                    } else {
                        let error = match (result.code, &result.error) {
                            (exec::UNREACHABLE, Some(e)) => Some(e.clone()),
                            (exec::UNREACHABLE, None) => Some("unreachable".to_string()),
                            (exec::TIMED_OUT, _) => Some(format!(
                                "the checks did not finish within {} s",
                                NODE_LIMIT.as_secs()
                            )),
                            _ => None,
                        };
                        let mut findings = match error {
                            Some(e) => judge_node(ctx, &nodes[k].name, &sections, result.code, Some(&e)),
                            None => {
                                let f = Facts::read(&sections);
                                let found = judge_facts(ctx, &nodes[k].name, &sections, &f, result.code);
                                facts[k] = Some(f);
                                found
                            }
                        };
                        super::note_cuts(&nodes[k].name, &mut findings, &cuts);
                        findings
                    };
                    if ready[k].is_none() {
                        ready[k] = Some(facts[k].clone());
                        send_ready(&mut ready, &arrived, &mut ready_tx);
                    }
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
        // Nodes the runner never reported on are not probers.
        for r in ready.iter_mut().filter(|r| r.is_none()) {
            *r = Some(None);
        }
        send_ready(&mut ready, &arrived, &mut ready_tx);
        let _ = quiet_tx.send(true);
        tracing::info!(
            "doctor: node phase of {} nodes in {} ms",
            nodes.len(),
            start.elapsed().as_millis()
        );
        // The clock readings (their exchanges began with each node's first line; the
        // scripts took longer): any still on their way get a second.
        let clocks = held.clocks(nodes.len(), Duration::from_secs(1)).await;
        let seen: Vec<Seen<'_>> = facts
            .iter()
            .enumerate()
            .filter_map(|(k, f)| {
                Some(Seen {
                    node: &nodes[k].name,
                    facts: f.as_ref()?,
                    arrived_ns: arrived[k],
                    clock: clocks[k],
                })
            })
            .collect();
        let fleet_findings = judge_fleet(ctx, &seen);
        report.add(fleet_findings.clone());
        on(Event::Fleet(fleet_findings));
    };
    let probes = async {
        if !wants_reach {
            return None;
        }
        let snap = ready_rx.await.unwrap_or_default();
        let t = Instant::now();
        let seen: Vec<(usize, Seen<'_>)> = snap
            .iter()
            .map(|(k, f, a)| {
                (
                    *k,
                    Seen {
                        node: &nodes[*k].name,
                        facts: f,
                        arrived_ns: *a,
                        clock: None,
                    },
                )
            })
            .collect();
        let found = reach_matrix(reach.clone(), ctx, nodes, &seen, quiet_rx, on).await;
        tracing::info!("doctor: probes in {} ms", t.elapsed().as_millis());
        Some(found)
    };
    let ((), found) = tokio::join!(node_phase, probes);
    if let Some(found) = found {
        report.add(found.clone());
        on(Event::Fleet(found));
    }
    held.release().await;
    report.link_causes();
    report.elapsed_ms = start.elapsed().as_millis() as u64;
    report
}

/// The reachability probes over the nodes that answered: the pairs of the rounds of
/// disjoint pairs ([`net::rounds`]), all at once, on the NICs NCCL's traffic takes
/// ([`Facts::probe_nics`]), both ends of a pair probing each other; then whatever
/// [`net::analyse`] suspects is probed again alone (the suspects' pairs only, on a quiet
/// fleet), and only what that second look confirms is named. A node without `ping`
/// probes nothing (its peers still probe it) and is said not checked. The second look waits for `quiet` (every node's script ended) and
/// probes, beside the suspects, a few control pairs that the first look found clean: what
/// they lose and how slow they are at that moment is the measure of the suspects (on
/// nodes that share their cores, a burst of load drops and delays probes everywhere).
async fn reach_matrix(
    reach: Reach,
    ctx: &Context,
    nodes: &[NodeTarget],
    seen: &[(usize, Seen<'_>)],
    mut quiet: tokio::sync::watch::Receiver<bool>,
    on: &(dyn Fn(Event) + Send + Sync),
) -> Vec<Finding> {
    let skip = |what: &str| vec![Finding::fleet("reach", Outcome::Skip, what)];
    if seen.len() < 2 {
        return skip("fewer than two nodes answered: no pair to probe");
    }
    // Each node's probed NICs with an address.
    let addrs: Vec<Vec<&net::Nic>> = seen
        .iter()
        .map(|(_, s)| {
            s.facts
                .probe_nics(ctx)
                .0
                .into_iter()
                .filter(|n| n.addr.is_some())
                .collect()
        })
        .collect();
    let mut rails: Vec<&str> = addrs.iter().flatten().map(|n| n.name.as_str()).collect();
    rails.sort();
    rails.dedup();
    rails.retain(|r| addrs.iter().filter(|a| a.iter().any(|n| n.name == *r)).count() >= 2);
    let mut found: Vec<Finding> = vec![];
    // A node without ping: not a prober; said once, with the command that installs it.
    let pinger: Vec<bool> = seen.iter().map(|(_, s)| s.facts.has("ping")).collect();
    for (k, (_, s)) in seen.iter().enumerate() {
        if !pinger[k] {
            found.push(not_checked(s.node, &s.facts.os_ids));
        }
    }
    if rails.is_empty() {
        found.extend(skip(
            "no NIC NCCL uses with an address on two nodes: nothing to probe",
        ));
        return found;
    }
    let m = seen.len();
    let count = net::probes_per_pair(m);
    let rounds = net::rounds(m);
    let net = Net {
        seen,
        nodes,
        addrs: &addrs,
        rails: &rails,
        pinger: &pinger,
    };
    let pairs: Vec<Vec<(usize, usize, Option<&str>)>> = rounds
        .iter()
        .map(|r| r.iter().map(|&(a, b)| (a, b, None)).collect())
        .collect();
    let total_ms = start_margin_ms(m) + net::probes_ms(count);
    let paired: usize = pairs.iter().map(Vec::len).sum();
    on(Event::Progress(format!(
        "reachability: {} (the pairs of {} of disjoint pairs), {count} probes per pair on {}, at once, about {:.0} s",
        crate::words::plural(paired, "pair"),
        crate::words::plural(rounds.len(), "round"),
        rails.join(" "),
        total_ms as f64 / 1000.0
    )));
    let (probes, mut skipped) = net.probe(reach.clone(), &pairs, count).await;
    on(Event::Progress(crate::progress::tally(
        paired,
        paired,
        "pairs probed",
    )));
    let names: Vec<String> = seen.iter().map(|(_, s)| s.node.to_string()).collect();
    let (suspects, rails_seen) = net::analyse(&probes);
    if suspects.is_empty() {
        found.extend(super::reach_findings(&names, &[], &rails_seen, &probes, 0));
        found.append(&mut skipped);
        return found;
    }
    // The second look: each suspect alone. A node: with up to three partners of the first
    // look (those not suspected themselves first); a pair: the pair. One round.
    let suspected: std::collections::BTreeSet<usize> =
        suspects.iter().filter(|n| n.b.is_none()).map(|n| n.a).collect();
    let mut again: Vec<(usize, usize, Option<&str>)> = vec![];
    for n in &suspects {
        let nic = rails.iter().copied().find(|r| *r == n.nic);
        match n.b {
            Some(b) => again.push((n.a, b, nic)),
            None => {
                let mut partners: Vec<usize> = probes
                    .iter()
                    .filter(|p| p.nic == n.nic && (p.from == n.a || p.to == n.a))
                    .map(|p| if p.from == n.a { p.to } else { p.from })
                    .collect();
                partners.sort_by_key(|p| (suspected.contains(p), *p));
                partners.dedup();
                for p in partners.into_iter().take(3) {
                    again.push((n.a, p, nic));
                }
            }
        }
    }
    again.sort();
    again.dedup();
    log_looked("first look suspects", &suspects, &names);
    // Control pairs: pairs of the first look between nodes the second look does not
    // probe otherwise, clean then (every probe answered), up to CONTROLS a NIC.
    let busy: std::collections::BTreeSet<usize> = again.iter().flat_map(|&(a, b, _)| [a, b]).collect();
    let mut used = busy.clone();
    let mut controls: Vec<(usize, usize, Option<&str>)> = vec![];
    for nic in rails.iter().copied() {
        if !suspects.iter().any(|n| n.nic == nic) {
            continue;
        }
        let mut taken = 0;
        for p in probes
            .iter()
            .filter(|p| p.nic == nic && p.sent > 0 && p.received >= p.sent)
        {
            if taken == CONTROLS {
                break;
            }
            let (a, b) = (p.from.min(p.to), p.from.max(p.to));
            // Both ways clean.
            let back = probes.iter().any(|q| {
                q.nic == nic && q.from == p.to && q.to == p.from && q.sent > 0 && q.received >= q.sent
            });
            if !back || used.contains(&a) || used.contains(&b) {
                continue;
            }
            used.insert(a);
            used.insert(b);
            controls.push((a, b, Some(nic)));
            taken += 1;
        }
    }
    let recount = 200;
    on(Event::Progress(format!(
        "reachability: {} suspected, probed again alone",
        crate::words::plural(suspects.len(), "problem")
    )));
    let waited = Instant::now();
    let _ = tokio::time::timeout(NODE_LIMIT, quiet.wait_for(|q| *q)).await;
    tracing::info!(
        "doctor: {} suspected, probed again ({} pairs, {} control pairs) after waiting {} ms for the node scripts to end",
        suspects.len(),
        again.len(),
        controls.len(),
        waited.elapsed().as_millis()
    );
    let mut round = again.clone();
    round.extend(controls.iter().copied());
    let (second, mut skipped2) = net.probe(reach, &[round], recount).await;
    skipped.append(&mut skipped2);
    let control_probes: Vec<net::Probe> = second
        .iter()
        .filter(|p| {
            controls
                .iter()
                .any(|&(a, b, _)| (p.from, p.to) == (a, b) || (p.from, p.to) == (b, a))
        })
        .cloned()
        .collect();
    for line in pair_lines(&names, &second, |a, b| {
        if controls.iter().any(|&(x, y, _)| (x, y) == (a.min(b), a.max(b))) {
            "control"
        } else {
            "suspect"
        }
    }) {
        tracing::info!("doctor: second look: {line}");
    }
    // Slow by the first look's baseline, or the controls' now where they are slower.
    let mut base = net::baselines(&probes);
    for (nic, b) in net::baselines(&control_probes) {
        let e = base.entry(nic).or_insert(b);
        *e = e.max(b);
    }
    let (confirmed, _) = net::analyse_with(&second, &base);
    // Only a suspect can be confirmed: a control pair is the measure, not the matter.
    let confirmed: Vec<net::Named> = confirmed
        .into_iter()
        .filter(|n| [Some(n.a), n.b].into_iter().flatten().any(|x| busy.contains(&x)))
        .collect();
    log_looked("second look confirms", &confirmed, &names);
    let cleared = suspects.len().saturating_sub(confirmed.len());
    let mut evidence = second.clone();
    evidence.extend(probes.iter().cloned());
    found.extend(super::reach_findings(
        &names,
        &confirmed,
        &rails_seen,
        &evidence,
        cleared,
    ));
    found.append(&mut skipped);
    found
}

/// How many clean pairs of the first look the second look probes a NIC, as its measure.
const CONTROLS: usize = 3;

/// `a`, or `a-b`, by name.
/// Each of `found` in the log, after `what` ("first look suspects", ...): its trouble,
/// pair, NIC and evidence.
fn log_looked(what: &str, found: &[net::Named], names: &[String]) {
    for n in found {
        tracing::info!(
            "doctor: {what} {} {} on {}: {}",
            n.trouble.as_str(),
            pair_name(names, n.a, n.b),
            n.nic,
            n.evidence
        );
    }
}

fn pair_name(names: &[String], a: usize, b: Option<usize>) -> String {
    let n = |k: usize| names.get(k).map_or("?", String::as_str);
    match b {
        Some(b) => format!("{}-{}", n(a), n(b)),
        None => n(a).to_string(),
    }
}

/// Each pair's probes on each NIC, both ways together, for the log: `KIND a-b NIC: lost
/// of sent, round trip up to X ms`.
fn pair_lines(
    names: &[String],
    probes: &[net::Probe],
    kind: impl Fn(usize, usize) -> &'static str,
) -> Vec<String> {
    let mut by: std::collections::BTreeMap<(usize, usize, &str), (u64, u64, f64)> = Default::default();
    for p in probes {
        let e = by
            .entry((p.from.min(p.to), p.from.max(p.to), p.nic.as_str()))
            .or_default();
        e.0 += u64::from(p.sent.saturating_sub(p.received));
        e.1 += u64::from(p.sent);
        e.2 = e.2.max(p.avg_ms.unwrap_or(0.0));
    }
    by.into_iter()
        .map(|((a, b, nic), (lost, sent, rtt))| {
            format!(
                "{} {} {nic}: {lost} of {sent} lost, round trip up to {rtt:.3} ms",
                kind(a, b),
                pair_name(names, a, Some(b))
            )
        })
        .collect()
}

/// The finding of a node whose reach was not checked: `ping` missing.
fn not_checked(node: &str, os_ids: &[String]) -> Finding {
    Finding::new(
        "reach",
        node,
        Outcome::Warn,
        "not checked: `ping` missing on the node (its peers still probe it)",
    )
    .fix(super::install_command("ping", os_ids))
}

/// The nodes and NICs the probes run over.
struct Net<'a> {
    seen: &'a [(usize, Seen<'a>)],
    nodes: &'a [NodeTarget],
    addrs: &'a [Vec<&'a net::Nic>],
    rails: &'a [&'a str],
    pinger: &'a [bool],
}

impl Net<'_> {
    /// Probe the pairs of `rounds` `(a, b, NIC or every rail)`, every one at once: both ends
    /// that have `ping` probe the other, `count` probes each (in pings of at most
    /// [`net::PING_MAX`]), once every prober's session is open ([`run_scheduled`]).
    /// The probes, and warnings (addresses not probed, output cut).
    async fn probe(
        &self,
        reach: Reach,
        rounds: &[Vec<(usize, usize, Option<&str>)>],
        count: u32,
    ) -> (Vec<net::Probe>, Vec<Finding>) {
        let seen = self.seen;
        let m = seen.len();
        // Per node: its pings, and whom each ping id probes.
        let mut plans: Vec<Vec<net::Target>> = vec![vec![]; m];
        let mut ids: Vec<Vec<usize>> = vec![vec![]; m];
        // Addresses not probed: (the node that reported it, NIC, address) -> (prober, why).
        let mut not_probed: std::collections::BTreeMap<(usize, String, String), Vec<(usize, String)>> =
            Default::default();
        for round in rounds {
            for &(a, b, only) in round {
                for (k, peer) in [(a, b), (b, a)] {
                    if !self.pinger[k] {
                        continue;
                    }
                    for nic in self.addrs[k]
                        .iter()
                        .filter(|n| self.rails.contains(&n.name.as_str()))
                        .filter(|n| only.is_none_or(|o| o == n.name))
                    {
                        let Some(there) = self.addrs[peer].iter().find(|n| n.name == nic.name) else {
                            continue;
                        };
                        let addr = there.addr.clone().unwrap_or_default();
                        // A node pings only what its own subnets on the NIC hold: a peer's
                        // word does not send it to the metadata server, a name or a
                        // broadcast.
                        match net::probe_target(nic, &addr) {
                            Ok(ip) => {
                                for part in net::pings(count) {
                                    plans[k].push((nic.name.clone(), ip.to_string(), ids[k].len(), part));
                                    ids[k].push(peer);
                                }
                            }
                            Err(why) => not_probed
                                .entry((peer, nic.name.clone(), addr))
                                .or_default()
                                .push((k, why)),
                        }
                    }
                }
            }
        }
        let mut warnings: Vec<Finding> = not_probed
            .into_iter()
            .map(|((b, nic, addr), mut by)| {
                by.sort();
                let shown: String = addr.chars().flat_map(char::escape_debug).take(64).collect();
                Finding::new(
                    "reach",
                    seen[b].1.node,
                    Outcome::Warn,
                    format!(
                        "{nic}: its address `{shown}` was not probed by {}: {}",
                        crate::words::plural(by.len(), "node"),
                        by[0].1
                    ),
                )
                .evidence(by.iter().map(|(k, why)| format!("{}: skipped: {why}", seen[*k].1.node)))
                .fix("a probe goes only to a unicast address in the prober's own subnets on the NIC: check the node's address on it (`ip -4 addr show`)")
            })
            .collect();
        // Every prober gets its pings in one session, started at a time agreed once every
        // session is open ([`run_scheduled`]): by this machine's clock, moved by each node's
        // clock offset.
        let mut jobs = vec![];
        let mut who = vec![];
        for (k, (pos, seen_k)) in seen.iter().enumerate() {
            if plans[k].is_empty() {
                continue;
            }
            let offset = match (seen_k.facts.time_ns, seen_k.arrived_ns) {
                (Some(t), Some(a)) => t - a,
                _ => 0,
            };
            jobs.push((self.nodes[*pos].clone(), offset, std::mem::take(&mut plans[k])));
            who.push(k);
        }
        let out = run_scheduled(reach, jobs, net::probes_ms(count)).await;
        let mut probes: Vec<net::Probe> = vec![];
        let mut not_run: Vec<usize> = vec![];
        for (a, (code, stdout, dropped)) in who.into_iter().zip(out) {
            if dropped > 0 {
                warnings.push(
                    Finding::new(
                        "reach",
                        seen[a].1.node,
                        Outcome::Warn,
                        format!(
                            "its probe output passed {} MiB: the rest was not read",
                            REACH_CAP / (1024 * 1024)
                        ),
                    )
                    .evidence([format!("… {dropped} bytes more not read")]),
                );
            }
            if code == exec::UNREACHABLE {
                tracing::info!("doctor: {}'s probe session did not open", seen[a].1.node);
                continue;
            }
            if code != 0 {
                tracing::info!(
                    "doctor: {}'s probe session ended with {code} after {} bytes",
                    seen[a].1.node,
                    stdout.len()
                );
            }
            for (id, nic, sent, received, avg_ms, error) in net::parse_probes(&stdout) {
                let Some(&b) = ids[a].get(id) else { continue };
                // A probe that could not run is no word on the network.
                if error.as_deref().is_some_and(net::not_run) {
                    if !not_run.contains(&a) {
                        not_run.push(a);
                        warnings.push(not_checked(seen[a].1.node, &seen[a].1.facts.os_ids));
                    }
                    continue;
                }
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
        (net::merge_parts(probes), warnings)
    }
}

/// The most of a node's output kept in the reach round: its probes' ping summaries,
/// some 300 bytes per peer and NIC (2.5 MiB for 1024 nodes of 8 NICs).
const REACH_CAP: usize = 8 * 1024 * 1024;

/// How long the probes wait for every prober to be ready before they start without the
/// late ones (which then start as soon as they are). The node phase's connections are
/// still held ([`Held`]), so a session is a channel on a live connection; only a node
/// whose connection dropped meanwhile connects again.
pub const READY_WAIT: Duration = Duration::from_secs(10);

/// The time from the last prober ready to the probes' start: a line written to every
/// session (50 ms, and 1 ms a node for the writing from here).
pub fn start_margin_ms(probers: usize) -> u64 {
    50 + probers as u64
}

/// Each prober's pings (`(node, clock offset ns, pings)`) in a session of its own, all at
/// once, with a barrier: every session's script ([`net::schedule_script`]) says it is
/// ready and waits; once all are (or after [`READY_WAIT`]), the start is set at
/// [`start_margin_ms`] from then and each is sent that time on its own clock; the probes
/// take about `probes_ms` ([`net::probes_ms`]). (exit status, stdout, bytes of stdout
/// past [`REACH_CAP`], dropped unread) in the jobs' order.
async fn run_scheduled(
    reach: Reach,
    jobs: Vec<(NodeTarget, i128, Vec<net::Target>)>,
    probes_ms: u64,
) -> Vec<(i32, String, u64)> {
    let n = jobs.len();
    let limit = READY_WAIT + Duration::from_millis(start_margin_ms(n) + probes_ms + 30_000);
    let (start_tx, start_rx) = tokio::sync::watch::channel(None::<i128>);
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(n.max(1));
    let t0 = Instant::now();
    let mut tasks = vec![];
    for (node, offset, plan) in jobs {
        let (reach, ready_tx, start_rx) = (reach.clone(), ready_tx.clone(), start_rx.clone());
        let command = limited(&net::schedule_script(&plan), limit);
        tasks.push(tokio::spawn(async move {
            let Ok(ch) = reach.exec(&node, &command).await else {
                let _ = ready_tx.send(()).await;
                return (exec::UNREACHABLE, String::new(), 0);
            };
            // The start on the node's clock.
            let at = move |start: i128| format!("{}\n", start + offset);
            run_prober(ch, ready_tx, start_rx, at, limit).await
        }));
    }
    drop(ready_tx);
    let barrier = async {
        let mut ready = 0;
        while ready < n && ready_rx.recv().await.is_some() {
            ready += 1;
        }
    };
    let _ = tokio::time::timeout(READY_WAIT, barrier).await;
    let waited = t0.elapsed().as_millis();
    let st = now_ns() + i128::from(start_margin_ms(n)) * 1_000_000;
    let _ = start_tx.send(Some(st));
    let mut out = vec![];
    for t in tasks {
        out.push(t.await.unwrap_or((exec::UNREACHABLE, String::new(), 0)));
    }
    // When each node's probes ended (`@@fd-probes-end TIME`), the earliest and the latest,
    // and ping's own time for its probes (`..., time 712ms`): where the probes' time went.
    let ends: Vec<i128> = out
        .iter()
        .flat_map(|(_, o, _)| o.lines())
        .filter_map(|l| l.strip_prefix(net::PROBES_END)?.trim().parse::<i128>().ok())
        .map(|t| (t - st) / 1_000_000)
        .collect();
    let took: Vec<u64> = out
        .iter()
        .flat_map(|(_, o, _)| o.lines())
        .filter_map(|l| l.rsplit_once(", time ")?.1.strip_suffix("ms")?.parse().ok())
        .collect();
    tracing::info!(
        "doctor: {n} probers ready in {waited} ms; their probes ended {}–{} ms after the start ({} of {n} said so); a ping took up to {} ms, {} ms on average; all done {} ms after the sessions were asked for",
        ends.iter().min().copied().unwrap_or(0),
        ends.iter().max().copied().unwrap_or(0),
        ends.len(),
        took.iter().max().copied().unwrap_or(0),
        took.iter().sum::<u64>() / took.len().max(1) as u64,
        t0.elapsed().as_millis()
    );
    out
}

/// One prober's session: read its stdout (at most [`REACH_CAP`] kept) and, once it says
/// [`net::READY`], tell `ready`; when the start is set, write it its time (`at`) and end
/// its stdin. Stopped (TERM, channel closed) past `limit` and a grace of 2 s.
async fn run_prober(
    ch: crate::node::Channel,
    ready: tokio::sync::mpsc::Sender<()>,
    mut start: tokio::sync::watch::Receiver<Option<i128>>,
    at: impl Fn(i128) -> String,
    limit: Duration,
) -> (i32, String, u64) {
    use crate::node::Output;
    let (mut read, write) = ch.split();
    let mut stdout: Vec<u8> = vec![];
    let mut dropped = 0u64;
    let mut status = None;
    let mut said = false;
    let reading = async {
        while let Some(o) = read.next().await {
            match o {
                Output::Stdout(d) => {
                    if dropped == 0 && stdout.len() + d.len() <= REACH_CAP {
                        stdout.extend_from_slice(&d);
                    } else {
                        dropped += d.len() as u64;
                    }
                    if !said && String::from_utf8_lossy(&stdout).lines().any(|l| l == net::READY) {
                        said = true;
                        let _ = ready.send(()).await;
                    }
                }
                Output::Stderr(_) => {}
                Output::Exit(c) => status = Some(c),
            }
        }
        // Ended without a word: not waited for.
        if !said {
            let _ = ready.send(()).await;
        }
    };
    let feed = async {
        let s = start.wait_for(Option::is_some).await.map(|s| s.unwrap_or(0));
        if let Ok(s) = s {
            let line = at(s);
            let _ = write.data(line.as_bytes()).await;
        }
        let _ = write.eof().await;
    };
    let stopped = tokio::time::timeout(limit + Duration::from_secs(2), async {
        tokio::join!(feed, reading)
    })
    .await
    .is_err();
    if stopped {
        let _ = write.signal(crate::node::Signal::Term).await;
        let _ = write.close().await;
    }
    let code = match (stopped, status) {
        (true, _) | (false, Some(exec::TIMED_OUT)) => exec::TIMED_OUT,
        (false, Some(c)) => c,
        (false, None) => exec::UNREACHABLE,
    };
    (code, String::from_utf8_lossy(&stdout).into_owned(), dropped)
}

/// `command` under coreutils' `timeout` on the node where it has it (as [`exec`] runs a
/// command with a limit: the channel's TERM does not reach a root login's command).
fn limited(command: &str, limit: Duration) -> String {
    let q = crate::detach::quote(command);
    format!(
        "if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 {:.3} sh -c {q}; else exec sh -c {q}; fi",
        limit.as_secs_f64()
    )
}

/// Each node's clock read once more, on a channel of its own opened when the node's first
/// line arrives: the channel says it is up, this machine writes a line and notes the
/// time, the node answers with its clock, and this machine notes the time again. The
/// node's time was read between the two ([`Clock`]): a window of one exchange on an open
/// channel, where the script's first line can only say "before it arrived" (its login,
/// its shell and the queue behind it: seconds on a loaded bastion).
///
/// An SSH node's channel then stays open to the end of the doctor (`cat` reading until
/// told to stop): a connection closes when its last channel does, and without this every
/// probe session would connect again (a key exchange and login per node through the
/// bastion).
#[derive(Default)]
struct Held {
    stop: Option<tokio::sync::watch::Sender<bool>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Each node's reading: `None` until its exchange ends, `Some(None)` when it failed.
    clocks: std::sync::Arc<std::sync::Mutex<Vec<Option<Option<Clock>>>>>,
    /// The nodes whose exchange was started.
    asked: Vec<usize>,
}

/// The exchange: up, a line in, the clock out (in `sh`, whatever the login shell is).
const CLOCK_EXCHANGE: &str = "echo up; read -r _ && date +%s%N";

impl Held {
    /// Read `node`'s clock, and hold its connection if it is an SSH node (once its script
    /// is running on it: the channel opens on that connection, and an unreachable node is
    /// not tried twice). `k` is the node's place in the doctor's list.
    fn hold(&mut self, reach: &Reach, node: &NodeTarget, k: usize, clock: bool, keep: bool) {
        let keep = keep && matches!(node.address, crate::fleet::Address::Ssh(_));
        // A pod's clock is its node's; an exchange through the Kubernetes API is one more
        // exec per node for what the first line says: not asked there.
        let clock = clock && !matches!(node.address, crate::fleet::Address::Kube { .. });
        if !clock && !keep {
            return;
        }
        let stop = self
            .stop
            .get_or_insert_with(|| tokio::sync::watch::channel(false).0);
        let mut stop = stop.subscribe();
        {
            let mut c = self.clocks.lock().unwrap_or_else(|p| p.into_inner());
            if c.len() <= k {
                c.resize(k + 1, None);
            }
        }
        if clock {
            self.asked.push(k);
        }
        let clocks = self.clocks.clone();
        let (reach, node) = (reach.clone(), node.clone());
        // Then, to hold the connection, `cat` until stdin closes.
        let command = match (clock, keep) {
            (true, true) => format!("exec sh -c '{CLOCK_EXCHANGE}; exec cat >/dev/null'"),
            (true, false) => format!("exec sh -c '{CLOCK_EXCHANGE}'"),
            _ => "exec cat >/dev/null".to_string(),
        };
        self.tasks.push(tokio::spawn(async move {
            let put = |v: Option<Clock>| {
                if clock {
                    clocks.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(v);
                }
            };
            let Ok(ch) = reach.exec(&node, &command).await else {
                put(None);
                return;
            };
            let (mut read, write) = ch.split();
            if clock {
                let exchange = async {
                    let mut out = Vec::new();
                    let mut sent = None;
                    while let Some(o) = read.next().await {
                        let crate::node::Output::Stdout(b) = o else {
                            continue;
                        };
                        out.extend_from_slice(&b);
                        if sent.is_none() && out.starts_with(b"up\n") {
                            out.drain(..3);
                            let t = now_ns();
                            write.data(b"t\n").await.ok()?;
                            sent = Some(t);
                        }
                        if let (Some(after_ns), Some(end)) = (sent, out.iter().position(|b| *b == b'\n')) {
                            let before_ns = now_ns();
                            let node_ns = std::str::from_utf8(&out[..end]).ok()?.trim().parse().ok()?;
                            return Some(Clock {
                                node_ns,
                                after_ns,
                                before_ns,
                            });
                        }
                    }
                    None
                };
                let got = tokio::select! {
                    _ = stop.wait_for(|s| *s) => None,
                    got = tokio::time::timeout(Duration::from_secs(10), exchange) => got.ok().flatten(),
                };
                put(got);
            }
            if keep {
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => {}
                    _ = async { while read.next().await.is_some() {} } => {}
                }
            }
            let _ = write.eof().await;
            let _ = write.close().await;
        }));
    }

    /// The clock readings so far, by node; waits up to `wait` for the exchanges started
    /// and not yet ended.
    async fn clocks(&self, n: usize, wait: Duration) -> Vec<Option<Clock>> {
        let until = Instant::now() + wait;
        loop {
            let now: Vec<Option<Option<Clock>>> = {
                let c = self.clocks.lock().unwrap_or_else(|p| p.into_inner());
                (0..n).map(|k| c.get(k).copied().flatten()).collect()
            };
            if Instant::now() >= until
                || self
                    .asked
                    .iter()
                    .all(|k| now.get(*k).is_some_and(Option::is_some))
            {
                return now.into_iter().map(Option::flatten).collect();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Let every held connection go.
    async fn release(self) {
        if let Some(stop) = self.stop {
            let _ = stop.send(true);
        }
        let all = async {
            for t in self.tasks {
                let _ = t.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), all).await;
    }
}

/// The `placement` check of a fleet whose family knows placement (GCP's Compute API);
/// a skip for other fleets, a warning when the API does not answer.
pub async fn placement(
    ctx: &crate::cloud::inventory::Context,
    record: Option<&crate::store::FleetRecord>,
    nodes: &[NodeTarget],
    compact: bool,
) -> Vec<Finding> {
    let one =
        |outcome: Outcome, what: String, fix: &str| vec![Finding::fleet("placement", outcome, what).fix(fix)];
    let asked = record.and_then(|r| Some((r, crate::cloud::inventory_for(r.backend).placement(ctx, r)?)));
    let Some((record, asked)) = asked else {
        return one(
            Outcome::Skip,
            "not a GCP fleet: the API that knows placement is Compute Engine's".into(),
            "",
        );
    };
    let result = asked.await;
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
