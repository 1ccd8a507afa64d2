//! `flightdeck fleet validate|plan|apply|list|delete|gc|status` for the local, SSH and GCP
//! backends.

use super::{Cli, FleetCommand};
use crate::cloud::gcp::backend::GcpBackend;
use crate::cloud::{self, Backend, Plan};
use crate::config::Config;
use crate::fleet::{self, BackendKind, Fleet, Severity};
use crate::paths::Paths;
use crate::store::{self, FleetRecord, Store};
use std::io::IsTerminal;
use std::process::ExitCode;

pub fn run(cmd: &FleetCommand, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    match cmd {
        FleetCommand::Validate { files } => Ok(validate(files)),
        FleetCommand::Plan { file, json } => {
            let Some(fleet) = load_reporting(file) else {
                return Ok(ExitCode::FAILURE);
            };
            let store = Store::new(&paths.state_dir);
            let (state, recovery) = store.load()?;
            note_recovery(recovery);
            let recorded = state.fleets.iter().find(|f| f.name == fleet.name);
            let backend = backend(fleet.backend, cli, paths, &cloud::Cancel::default())?;
            let plan = match backend.plan(&fleet, recorded) {
                Ok(p) => p,
                Err(e) => {
                    errln!("fleet plan: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            if *json {
                outln!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                print_plan(&plan);
            }
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Apply {
            file,
            yes,
            no_bootstrap,
        } => {
            let Some(fleet) = load_reporting(file) else {
                return Ok(ExitCode::FAILURE);
            };
            let store = Store::new(&paths.state_dir);
            let (state, recovery) = store.load()?;
            note_recovery(recovery);
            let recorded = state.fleets.iter().find(|f| f.name == fleet.name);
            cloud::lifecycle::check_backend(&fleet, recorded).map_err(anyhow::Error::msg)?;
            let cancel = cloud::Cancel::default();
            let backend = backend(fleet.backend, cli, paths, &cancel)?;
            let plan = match backend.plan(&fleet, recorded) {
                Ok(p) => p,
                Err(e) => {
                    errln!("fleet apply: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            print_plan(&plan);
            if !yes && !ask(&format!("Apply fleet `{}`?", fleet.name))? {
                errln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
            let rt = runtime()?;
            // Ctrl-C cancels: the provisioner stops waiting (a flex-start request queued
            // for capacity too) and deletes what this apply made; a second one quits.
            let c = cancel.clone();
            rt.spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    c.cancel();
                    errln!("cancelling: what this apply made is deleted (Ctrl-C again quits at once; the state keeps what is left)");
                    if tokio::signal::ctrl_c().await.is_ok() {
                        std::process::exit(130);
                    }
                }
            });
            let status = super::StatusLine::start(&format!("fleet apply {}", fleet.name));
            let progress = |line: String| status.print(&line);
            let applied = rt.block_on(cloud::lifecycle::apply(
                &store,
                backend.as_ref(),
                &fleet,
                &progress,
            ));
            // The status line lasts through the bootstrap; messages go above it.
            let record = match applied {
                Ok(r) => r,
                Err(e) => {
                    status.print(&format!("fleet apply: {e}"));
                    return Ok(ExitCode::FAILURE);
                }
            };
            let (pool, resolver) = super::ssh_setup(cli, paths);
            let reach = crate::reach::Reach::new(pool, resolver);
            match rt.block_on(cloud::lifecycle::bootstrap_after_apply(
                paths,
                &fleet,
                &record,
                reach,
                *no_bootstrap,
                &progress,
            )) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    status.print(&format!("fleet apply: the nodes are up and recorded, but {e}"));
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        FleetCommand::Bootstrap {
            fleet,
            nodes,
            flavour,
            show,
            json,
        } => bootstrap(fleet.as_deref(), nodes, *flavour, *show, *json, cli, paths),
        FleetCommand::List { json } => {
            let (state, recovery) = Store::new(&paths.state_dir).load()?;
            note_recovery(recovery);
            if *json {
                outln!("{}", serde_json::to_string_pretty(&state.fleets)?);
                return Ok(ExitCode::SUCCESS);
            }
            if state.fleets.is_empty() {
                errln!("no fleets: apply one with `flightdeck fleet apply FILE`");
                return Ok(ExitCode::SUCCESS);
            }
            let rows: Vec<[String; 5]> = state
                .fleets
                .iter()
                .map(|f| {
                    [
                        f.name.clone(),
                        f.backend.clone(),
                        f.nodes.len().to_string(),
                        age(f.created_at),
                        f.file
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default(),
                    ]
                })
                .collect();
            print_table(&["NAME", "BACKEND", "NODES", "CREATED", "FILE"], &rows);
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Delete { name, yes } => {
            let store = Store::new(&paths.state_dir);
            let (state, recovery) = store.load()?;
            note_recovery(recovery);
            let record = match state.fleets.iter().find(|f| f.name == *name).cloned() {
                Some(r) => r,
                // A GCP fleet already deleted (or never recorded): look for labelled
                // instances anyway, so `delete` twice is fine and finds stragglers.
                None if gcp_configured(paths) => {
                    let names: Vec<&str> = state.fleets.iter().map(|f| f.name.as_str()).collect();
                    let hint = crate::yaml::closest(name, names.iter().copied())
                        .map(|h| format!(" (did you mean `{h}`?)"))
                        .unwrap_or_default();
                    errln!(
                        "no fleet `{name}` in the state{hint}; looking for GCP resources labelled with it"
                    );
                    FleetRecord {
                        name: name.clone(),
                        backend: "gcp".into(),
                        file: None,
                        nodes: vec![],
                        resources: vec![],
                        created_at: 0,
                    }
                }
                None => {
                    let names: Vec<&str> = state.fleets.iter().map(|f| f.name.as_str()).collect();
                    let hint = crate::yaml::did_you_mean(name, names.iter().copied());
                    anyhow::bail!("no fleet `{name}` in the state{hint}");
                }
            };
            let kind = match record.backend.as_str() {
                "local" => BackendKind::Local,
                "ssh" => BackendKind::Ssh,
                "gcp" => BackendKind::Gcp,
                "gke" => BackendKind::Gke,
                other => {
                    anyhow::bail!("fleet `{name}` uses the {other} backend, which this build does not know")
                }
            };
            for n in &record.nodes {
                errln!("  delete  node  {:<20} {}", n.name, n.host());
            }
            for r in &record.resources {
                let place = crate::cloud::gcp::plan::record_scope(r).place();
                errln!("  delete  {:<16} {:<28} {place}", r.kind, r.name);
            }
            if !yes && !ask(&format!("Delete fleet `{name}`?"))? {
                errln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
            let backend = backend(kind, cli, paths, &cloud::Cancel::default())?;
            let status = super::StatusLine::start(&format!("fleet delete {name}"));
            let progress = |line: String| status.print(&line);
            let deleted = runtime()?.block_on(cloud::lifecycle::delete(
                &store,
                backend.as_ref(),
                &record,
                &progress,
            ));
            drop(status);
            if let Err(e) = deleted {
                errln!("fleet delete: {e}");
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Gc { yes, json } => gc(paths, *yes, *json),
        FleetCommand::Status { name, json } => status(paths, name, *json),
    }
}

/// `fleet bootstrap`: the flavour's steps on the fleet's nodes, or `--show`'s script.
fn bootstrap(
    fleet: Option<&str>,
    nodes: &[String],
    flavour: Option<super::Flavour>,
    show: Option<super::Flavour>,
    json: bool,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<ExitCode> {
    use crate::bootstrap;
    if let Some(f) = show {
        out!("{}", bootstrap::script(f.gpudirect()));
        return Ok(ExitCode::SUCCESS);
    }
    let fleet_arg = fleet.unwrap_or_default();
    let (name, all, reach) = super::exec_cmd::resolve_fleet(fleet_arg, cli, paths)?;
    if all.iter().any(|n| n.kube().is_some()) {
        anyhow::bail!(
            "fleet `{name}` is a GKE fleet: GKE sets its nodes up for GPUDirect itself (the GPUDirect guides' NCCL installer and device-plugin DaemonSets); the bootstrap is for VM fleets"
        );
    }
    let flavour = match flavour {
        Some(f) => f.gpudirect(),
        None => match crate::nccl::remote::fleet_spec(&paths.state_dir, fleet_arg, &name) {
            Some(spec) => cloud::lifecycle::bootstrap_flavour(&spec),
            None => crate::nccl::GpuDirect::None,
        },
    };
    if flavour == crate::nccl::GpuDirect::None {
        anyhow::bail!(
            "fleet `{name}` has no GPUDirect flavour (neither its network.gpudirect nor its machine type names one): pass --flavour tcpx|tcpxo|rdma"
        );
    }
    let nodes = if nodes.is_empty() {
        all
    } else {
        crate::fleet::select_nodes(&all, nodes).map_err(|e| anyhow::anyhow!("--nodes {e}"))?
    };
    if nodes.is_empty() {
        anyhow::bail!("no nodes selected");
    }
    errln!(
        "bootstrapping {} of `{name}` for {}",
        crate::words::plural(nodes.len(), "node"),
        bootstrap::flavour_title(flavour)
    );
    let status = super::StatusLine::start(&format!("bootstrap {name}"));
    let progress = |line: String| status.print(&line);
    let outcomes = runtime()?.block_on(bootstrap::remote::run(reach, &nodes, flavour, &progress));
    drop(status);
    if json {
        outln!("{}", serde_json::to_string_pretty(&outcomes)?);
    }
    errln!("{}", bootstrap::remote::summary(flavour, &outcomes));
    Ok(if outcomes.iter().all(|o| o.ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn ask(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("not a terminal: pass --yes to go ahead without a question");
    }
    Ok(super::prompt::confirm(question))
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn note_recovery(r: Option<store::Recovery>) {
    if let Some(r) = r {
        errln!("{}", r.message);
        tracing::warn!("{}", r.message);
    }
}

/// The GCP backend from the config file's `gcp:` block.
pub(super) fn gcp_backend(paths: &Paths) -> anyhow::Result<GcpBackend> {
    cloud::lifecycle::gcp_backend(paths).map_err(anyhow::Error::msg)
}

fn gcp_configured(paths: &Paths) -> bool {
    Config::load(paths).is_ok_and(|c| c.gcp.is_some())
}

/// `fleet gc` in the clusters of the recorded GKE fleets.
fn gke_gc(state: &crate::store::State, yes: bool, json: bool) -> anyhow::Result<ExitCode> {
    use crate::cloud::gke::{backend, Clients};
    let rt = runtime()?;
    let clients = Clients::default();
    let running: Vec<String> = state
        .runs
        .iter()
        .filter(|r| r.nodes.iter().any(|n| n.exit_code.is_none()))
        .map(|r| r.id.clone())
        .collect();
    let found = rt
        .block_on(backend::orphans(&clients, &state.fleets, &running))
        .map_err(anyhow::Error::msg)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&found)?);
    } else if found.is_empty() {
        errln!("GKE: nothing of flightdeck's to remove in the fleets' clusters");
    } else {
        let rows: Vec<[String; 5]> = found
            .iter()
            .map(|o| {
                [
                    o.kind.to_string(),
                    o.name.clone(),
                    o.namespace.clone(),
                    o.fleet.clone(),
                    o.why.clone(),
                ]
            })
            .collect();
        print_table(&["KIND", "NAME", "NAMESPACE", "FLEET", "WHY"], &rows);
    }
    if found.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        errln!(
            "{} found; `flightdeck fleet gc --yes` removes them",
            crate::words::plural(found.len(), "GKE object")
        );
        return Ok(ExitCode::SUCCESS);
    }
    match rt.block_on(backend::delete_orphans(&clients, &found, &|l| errln!("{l}"))) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            errln!("fleet gc: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `fleet status` of a GKE fleet: its node pools, nodes and Kueue's workloads now.
fn gke_status(record: &FleetRecord, json: bool) -> anyhow::Result<ExitCode> {
    use crate::cloud::gke::{backend::Target, view, Clients};
    let target = Target::of_record(record).map_err(anyhow::Error::msg)?;
    let rt = runtime()?;
    let snap = rt
        .block_on(target.snapshot(&Clients::default(), crate::store::now_unix()))
        .map_err(anyhow::Error::msg)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&snap)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} (fleet `{}`)", snap.cluster, record.name);
    let pools: Vec<[String; 6]> = snap.pools.iter().map(view::PoolRow::cells).collect();
    print_table(&view::POOL_HEADER, &pools);
    outln!();
    let nodes: Vec<[String; 6]> = snap
        .nodes
        .iter()
        .map(|n| {
            [
                n.name.clone(),
                n.pool.clone(),
                n.internal_ip.clone().unwrap_or_default(),
                if n.ready {
                    "Ready".into()
                } else {
                    "NotReady".into()
                },
                format!("{}/{}", n.gpus_used, n.gpus),
                if n.conditions.is_empty() {
                    n.pods.to_string()
                } else {
                    format!("{} ({})", n.pods, n.conditions.join(", "))
                },
            ]
        })
        .collect();
    print_table(&["NODE", "POOL", "IP", "STATUS", "GPUS USED", "PODS"], &nodes);
    outln!();
    if !snap.queues.is_empty() {
        let rows: Vec<[String; 4]> = snap
            .queues
            .iter()
            .map(|q| {
                [
                    q.name.clone(),
                    q.cluster_queue.clone(),
                    q.pending.to_string(),
                    q.admitted.to_string(),
                ]
            })
            .collect();
        print_table(&["LOCALQUEUE", "CLUSTERQUEUE", "PENDING", "ADMITTED"], &rows);
        outln!();
    }
    match &snap.kueue {
        Some(why) => outln!("Kueue: {why}"),
        None if snap.workloads.is_empty() => outln!("Kueue: no workloads in the namespace"),
        None => {
            let rows: Vec<[String; 5]> = snap
                .workloads
                .iter()
                .map(|w| {
                    [
                        w.name.clone(),
                        w.queue.clone(),
                        w.state.clone(),
                        w.age_s.map(view::age).unwrap_or_default(),
                        w.detail.clone(),
                    ]
                })
                .collect();
            print_table(&["WORKLOAD", "QUEUE", "STATE", "FOR", "WHY"], &rows);
        }
    }
    let lost = snap.nodes.iter().any(|n| !n.ready);
    Ok(if lost {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `fleet gc`: resources of this owner that no fleet record knows.
fn gc(paths: &Paths, yes: bool, json: bool) -> anyhow::Result<ExitCode> {
    let (state, _) = Store::new(&paths.state_dir).load()?;
    if state.fleets.iter().any(|f| f.backend == "gke") {
        let code = gke_gc(&state, yes, json)?;
        if !gcp_configured(paths) {
            return Ok(code);
        }
    }
    let backend = gcp_backend(paths)?;
    let store = Store::new(&paths.state_dir);
    let rt = runtime()?;
    let gcp = rt.block_on(backend.connect()).map_err(anyhow::Error::msg)?;
    let (state, recovery) = store.load()?;
    note_recovery(recovery);
    let orphans = rt
        .block_on(gcp.orphans(&state.fleets))
        .map_err(anyhow::Error::msg)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&orphans)?);
    } else if orphans.is_empty() {
        errln!(
            "no orphans: every resource labelled flightdeck-owner={} in project {} is in the state",
            gcp.owner,
            gcp.compute.project
        );
    } else {
        let rows: Vec<[String; 4]> = orphans
            .iter()
            .map(|o| {
                [
                    o.kind.as_str().to_string(),
                    o.name.clone(),
                    o.scope.place(),
                    o.fleet.clone(),
                ]
            })
            .collect();
        print_table(&["KIND", "NAME", "WHERE", "FLEET"], &rows);
    }
    if orphans.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        if json || !std::io::stdin().is_terminal() {
            errln!(
                "{} found; `flightdeck fleet gc --yes` deletes them",
                crate::words::plural(orphans.len(), "orphan")
            );
            return Ok(ExitCode::SUCCESS);
        }
        if !ask(&format!(
            "Delete these {}?",
            crate::words::plural(orphans.len(), "resource")
        ))? {
            errln!("nothing changed");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let status = super::StatusLine::start("fleet gc");
    let progress = |line: String| status.print(&line);
    let gone = rt.block_on(gcp.delete_orphans(&orphans, &progress));
    drop(status);
    match gone {
        Ok(()) => {
            errln!("{} deleted", crate::words::plural(orphans.len(), "orphan"));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            errln!("fleet gc: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `fleet status NAME`: each node as Compute sees it; lost nodes are marked in the state.
fn status(paths: &Paths, name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let store = Store::new(&paths.state_dir);
    let (state, recovery) = store.load()?;
    note_recovery(recovery);
    let Some(record) = state.fleets.iter().find(|f| f.name == name).cloned() else {
        anyhow::bail!("no fleet `{name}` in the state");
    };
    if record.backend == "gke" {
        return gke_status(&record, json);
    }
    if record.backend != "gcp" {
        anyhow::bail!(
            "fleet `{name}` is a {} fleet; status asks the cloud, for GCP and GKE fleets",
            record.backend
        );
    }
    let backend = gcp_backend(paths)?;
    let rt = runtime()?;
    let gcp = rt.block_on(backend.connect()).map_err(anyhow::Error::msg)?;
    let health = rt.block_on(gcp.check(&record)).map_err(anyhow::Error::msg)?;
    crate::cloud::gcp::upkeep::record_health(&store, name, &health).map_err(anyhow::Error::msg)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&health)?);
    } else {
        let rows: Vec<[String; 5]> = health
            .iter()
            .map(|h| {
                [
                    h.name.clone(),
                    h.zone.clone(),
                    h.provisioning_model.clone(),
                    h.status.clone(),
                    h.lost.clone().unwrap_or_default(),
                ]
            })
            .collect();
        print_table(&["NODE", "ZONE", "MODEL", "STATUS", "LOST"], &rows);
    }
    Ok(if health.iter().any(|h| h.lost.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The backend for a kind, with SSH settings from the command line.
pub fn backend(
    kind: BackendKind,
    cli: &Cli,
    paths: &Paths,
    cancel: &cloud::Cancel,
) -> anyhow::Result<Box<dyn Backend>> {
    cloud::lifecycle::backend(
        kind,
        paths,
        || {
            let (pool, resolver) = super::ssh_setup(cli, paths);
            crate::reach::Reach::new(pool, resolver)
        },
        cancel,
    )
    .map_err(anyhow::Error::msg)
}

fn load_reporting(file: &std::path::Path) -> Option<Fleet> {
    match fleet::load(file) {
        Ok(f) => {
            for w in &f.warnings {
                errln!("{w}");
            }
            Some(f)
        }
        Err(diags) => {
            for d in diags {
                errln!("{d}");
            }
            None
        }
    }
}

fn validate(files: &[std::path::PathBuf]) -> ExitCode {
    let mut failed = false;
    for file in files {
        match fleet::load(file) {
            Ok(f) => {
                for w in &f.warnings {
                    errln!("{w}");
                }
                let nodes = match f.backend {
                    BackendKind::Gcp => f.spec.nodes.map(|n| format!("{n} nodes")).unwrap_or_default(),
                    _ => crate::words::plural(f.node_targets().len(), "node"),
                };
                outln!(
                    "{}: ok ({} fleet `{}`, {nodes})",
                    file.display(),
                    f.backend.as_str(),
                    f.name
                );
            }
            Err(diags) => {
                failed |= diags.iter().any(|d| d.severity == Severity::Error);
                for d in diags {
                    errln!("{d}");
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print_plan(plan: &Plan) {
    errln!("fleet `{}` ({} backend):", plan.fleet, plan.backend);
    for c in &plan.changes {
        match &c.cloud {
            None => errln!("  {:<7} {:<5} {:<20} {}", c.action, c.kind, c.name, c.place),
            Some(d) => {
                let mut extra = vec![];
                if let Some(m) = &d.machine_type {
                    extra.push(m.clone());
                }
                if let Some(n) = &d.nics {
                    extra.push(format!("NICs {}", n.layout));
                }
                if let Some(p) = &d.provisioning_model {
                    extra.push(p.clone());
                }
                if c.kind == "instance" {
                    extra.push(cost(d.hourly_usd));
                }
                errln!(
                    "  {:<7} {:<16} {:<28} {:<16} {}",
                    c.action,
                    c.kind,
                    c.name,
                    c.place,
                    extra.join("  ")
                );
            }
        }
    }
    if plan.is_noop() {
        errln!("  (no changes)");
    }
    for n in &plan.notes {
        errln!("  note: {n}");
    }
    if let Some(total) = plan.hourly_usd {
        errln!("  cost when up: {}", cost(total));
    }
    if !plan.fallbacks.is_empty() {
        errln!("  if out of capacity, then (in order):");
        for f in plan.fallbacks.iter().take(8) {
            errln!("    {f}");
        }
        if plan.fallbacks.len() > 8 {
            errln!("    ... and {} more", plan.fallbacks.len() - 8);
        }
    }
}

/// `$33.20/h ($24,236/month)`, or `price unknown`.
fn cost(hourly: Option<f64>) -> String {
    match hourly {
        Some(h) => format!("${h:.2}/h (${:.0}/month)", h * 730.0),
        None => "price unknown".into(),
    }
}

fn age(created: u64) -> String {
    let secs = store::now_unix().saturating_sub(created);
    match secs {
        s if s < 120 => format!("{s}s ago"),
        s if s < 7200 => format!("{}m ago", s / 60),
        s if s < 172_800 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86400),
    }
}

/// An aligned table on stdout.
pub fn print_table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        outln!("{}", s.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}
