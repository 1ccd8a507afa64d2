//! `flightdeck nics FLEET [--interval 1s] [--samples N] [--json]`: run the telemetry
//! sampler on every node for N samples (N+1 readings of the counters), then print per
//! node and NIC the rx/tx rates (current, average, peak), per GPU its figures, and the
//! imbalance flags; a table, or one JSON document (`telemetry::report::FleetReport`).
//! A node that cannot be reached is reported with its error; the others are still
//! sampled, and the exit code is then 1.

use super::{Cli, NicsArgs};
use crate::paths::Paths;
use crate::telemetry::report::{self, format_bps, FleetReport, NodeInfo};
use crate::telemetry::service::{self, Options, TelemetryEvent};
use crate::telemetry::{Classifier, Interval, Rule, Telemetry};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// How long a node may take to connect and start, beyond its samples.
const START_GRACE: Duration = Duration::from_secs(20);

pub fn run(args: &NicsArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let interval = match Interval::parse(&args.interval) {
        Ok(i) => i,
        Err(e) => {
            errln!("flightdeck: --interval {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if args.samples == 0 {
        errln!("flightdeck: --samples must be at least 1");
        return Ok(ExitCode::from(2));
    }
    let (name, _, nodes, reach) = super::resolve_fleet_kind_now(&args.fleet, cli, paths)?;
    let classifier = Classifier {
        data: args.data_nics.clone(),
        control: args.control_nics.clone(),
        other: Vec::new(),
    };
    let records_wanted = u64::from(args.samples) + 1;
    let mut store = Telemetry::new(records_wanted as usize + 1);
    let slots = nodes.iter().map(|n| n.index).max().map_or(0, |m| m + 1);
    let mut errors: Vec<Option<String>> = vec![None; slots];
    let mut taken = vec![0u64; slots];
    let mut done = vec![false; slots];
    let rt = super::runtime()?;
    // Debug pods the samplers make on GKE nodes go at the end (or at Ctrl-C).
    let kube = reach.kube().clone();
    let finished = rt.block_on(crate::cloud::gke::exec::removing_debug_pods(&kube, async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        let mut options = Options::once(interval);
        options.gpu_links = args.gpu_links;
        let samplers = service::spawn(reach, nodes.clone(), options, tx);
        let deadline =
            tokio::time::Instant::now() + START_GRACE + interval.duration() * (2 * records_wanted as u32);
        let pending = |done: &[bool]| nodes.iter().any(|n| !done[n.index]);
        while pending(&done) {
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                _ = tokio::time::sleep_until(deadline) => None,
            };
            let Some(ev) = ev else { break };
            match ev {
                TelemetryEvent::Hello { node, hello } => {
                    if !done[node] {
                        store.hello(node, hello);
                    }
                }
                TelemetryEvent::Record {
                    node,
                    record,
                    arrived_unix_ns,
                } => {
                    if !done[node] && store.ingest(node, &record, arrived_unix_ns).is_some() {
                        taken[node] += 1;
                        done[node] = taken[node] >= records_wanted;
                    }
                }
                TelemetryEvent::Stderr { node, text } => tracing::debug!(node, "sampler: {text}"),
                TelemetryEvent::Down { node, error, .. } => {
                    if !done[node] {
                        errors[node] = Some(if taken[node] == 0 {
                            error
                        } else {
                            format!(
                                "stopped after {} of {records_wanted} readings: {error}",
                                taken[node]
                            )
                        });
                        done[node] = true;
                    }
                }
            }
        }
        drop(samplers);
    }));
    if finished.is_none() {
        errln!("interrupted");
        return Ok(std::process::ExitCode::from(130));
    }
    for n in &nodes {
        if !done[n.index] {
            errors[n.index] = Some(format!(
                "timed out with {} of {records_wanted} readings",
                taken[n.index]
            ));
        }
    }
    let infos: Vec<NodeInfo> = nodes
        .iter()
        .map(|n| NodeInfo {
            index: n.index,
            name: n.name.clone(),
            host: n.host().to_string(),
            error: errors[n.index].clone(),
        })
        .collect();
    let to = store.now_ms().unwrap_or(0);
    let from = (0..store.node_count())
        .filter_map(|i| store.node(i).and_then(|n| n.times().get(0)))
        .min()
        .unwrap_or(to);
    let report = report::build(&name, &store, &infos, &classifier, &Rule::default(), from, to);
    let failed = infos.iter().any(|n| n.error.is_some());
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        table(&report, interval, args.samples, super::table::stdout_width())
    };
    // NIC names, errors and flags come from the nodes: shown, never acted on.
    let text = crate::term::visible::text(&text);
    let mut out = std::io::stdout().lock();
    // shown
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    if !args.json {
        for n in infos.iter().filter(|n| n.error.is_some()) {
            errln!("{} ({}): {}", n.name, n.host, n.error.as_deref().unwrap_or(""));
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn figure(x: Option<f64>, digits: usize) -> String {
    x.map(|v| format!("{v:.digits$}")).unwrap_or_else(|| "-".into())
}

fn table(r: &FleetReport, interval: Interval, samples: u32, width: Option<usize>) -> String {
    let mut s = format!(
        "fleet {}: {}, {} every {interval} over {:.1} s\n\n",
        r.fleet,
        crate::words::plural(r.nodes.len(), "node"),
        crate::words::plural(samples as usize, "sample"),
        r.window_s
    );
    use super::table::{render, Col};
    // On a narrow terminal the averages go first, then the peaks: now is what is read.
    let cols = [
        Col::left("NODE").shrink(),
        Col::left("NIC"),
        Col::left("ROLE"),
        Col::right("RX NOW"),
        Col::right("RX AVG").drop(1),
        Col::right("RX PEAK").drop(2),
        Col::right("TX NOW"),
        Col::right("TX AVG").drop(1),
        Col::right("TX PEAK").drop(2),
    ];
    let mut rows = vec![];
    for n in &r.nodes {
        for nic in &n.nics {
            rows.push(vec![
                n.node.clone(),
                nic.name.clone(),
                nic.role.as_str().to_string(),
                format_bps(nic.rx_bps.current),
                format_bps(nic.rx_bps.avg),
                format_bps(nic.rx_bps.peak),
                format_bps(nic.tx_bps.current),
                format_bps(nic.tx_bps.avg),
                format_bps(nic.tx_bps.peak),
            ]);
        }
        if let Some(e) = &n.error {
            if n.nics.is_empty() {
                rows.push(vec![n.node.clone(), format!("(not sampled: {e})")]);
            }
        }
    }
    s.push_str(&render(&cols, &rows, width));
    if r.nodes.iter().any(|n| !n.gpus.is_empty()) {
        let cols = [
            Col::left("NODE").shrink(),
            Col::right("GPU"),
            Col::right("UTIL %"),
            Col::right("AVG").drop(1),
            Col::right("PEAK").drop(2),
            Col::right("MEM MiB"),
            Col::right("OF").drop(3),
            Col::right("POWER W"),
            Col::right("PEAK").drop(2),
            Col::right("TEMP C").drop(3),
            Col::right("SM MHz").drop(3),
        ];
        let mut rows = vec![];
        for n in &r.nodes {
            for g in &n.gpus {
                rows.push(vec![
                    n.node.clone(),
                    g.index.to_string(),
                    figure(g.utilization_pct.current, 0),
                    figure(g.utilization_pct.avg, 0),
                    figure(g.utilization_pct.peak, 0),
                    figure(g.memory_used_mib.current, 0),
                    figure(g.memory_total_mib, 0),
                    figure(g.power_w.current, 1),
                    figure(g.power_w.peak, 1),
                    figure(g.temperature_c, 0),
                    figure(g.sm_clock_mhz, 0),
                ]);
            }
        }
        s.push('\n');
        s.push_str(&render(&cols, &rows, width));
    }
    s.push('\n');
    if r.flags.is_empty() {
        s.push_str("no imbalance\n");
    } else {
        s.push_str("imbalance:\n");
        for f in &r.flags {
            s.push_str(&format!("  {}\n", f.message));
        }
    }
    s
}
