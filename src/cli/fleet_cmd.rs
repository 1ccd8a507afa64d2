//! `flightdeck fleet validate|plan|apply|list|delete|gc|status` for the local, SSH and GCP
//! backends.

use super::{note_recovery, runtime, Cli, FleetCommand};
use crate::cloud::{self, inventory_for, Backend, Plan};
use crate::config::Config;
use crate::fleet::{self, BackendKind, Fleet, Severity};
use crate::paths::Paths;
use crate::store::{self, Store};
use std::io::IsTerminal;
use std::process::ExitCode;

pub fn run(cmd: &FleetCommand, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    match cmd {
        FleetCommand::Validate { files } => Ok(validate(files)),
        FleetCommand::Example { name } => example(name.as_deref()),
        FleetCommand::Plan { file, json } => {
            let Some(fleet) = load_reporting(file) else {
                return Ok(ExitCode::FAILURE);
            };
            let store = Store::new(&paths.state_dir);
            let (state, recovery) = store.load()?;
            note_recovery(recovery);
            let recorded = state.fleet(&fleet.name).ok();
            let backend = backend(fleet.backend, cli, paths, &cloud::Cancel::default())?;
            let plan = match cloud::lifecycle::plan(backend.as_ref(), &fleet, recorded) {
                Ok(p) => p,
                Err(e) => {
                    errln!("flightdeck: {e}");
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
            let recorded = state.fleet(&fleet.name).ok();
            cloud::lifecycle::check_backend(&fleet, recorded).map_err(anyhow::Error::msg)?;
            let cancel = cloud::Cancel::default();
            let backend = backend(fleet.backend, cli, paths, &cancel)?;
            let plan = match cloud::lifecycle::plan(backend.as_ref(), &fleet, recorded) {
                Ok(p) => p,
                Err(e) => {
                    errln!("flightdeck: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            print_plan(&plan);
            let rt = runtime()?;
            // Credentials and keys before the question: a `y` then refused is wasted.
            if let Err(e) = rt.block_on(backend.ready()) {
                errln!("flightdeck: {e}");
                errln!("nothing was recorded");
                return Ok(ExitCode::FAILURE);
            }
            if !yes && !ask(&format!("Apply fleet `{}`?", fleet.name))? {
                errln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
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
                    status.print(&format!("flightdeck: {e}"));
                    return Ok(ExitCode::FAILURE);
                }
            };
            let reach = super::reach(&record.nodes, cli, paths);
            let enabled = Config::load(paths)?.gcp.and_then(|g| g.bootstrap).unwrap_or(true);
            match rt.block_on(cloud::lifecycle::bootstrap_after_apply(
                enabled,
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
                        f.backend.to_string(),
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
        FleetCommand::Delete {
            name,
            yes,
            forget: true,
        } => forget(paths, name, *yes),
        FleetCommand::Delete { name, yes, .. } => {
            let store = Store::new(&paths.state_dir);
            let (state, recovery) = store.load()?;
            note_recovery(recovery);
            let record = match state.fleet(name) {
                Ok(r) => r.clone(),
                Err(unknown) => {
                    // A cloud fleet already deleted (or never recorded): its family looks
                    // for what is labelled with the name anyway, so `delete` twice is fine
                    // and finds stragglers.
                    let ctx = super::inventory_context(paths)?;
                    let Some(r) = BackendKind::ALL
                        .iter()
                        .find_map(|k| inventory_for(*k).unrecorded(&ctx, name))
                    else {
                        anyhow::bail!("{unknown}");
                    };
                    let hint = crate::yaml::closest(name, state.fleets.iter().map(|f| f.name.as_str()))
                        .map(|h| format!(" (did you mean `{h}`?)"))
                        .unwrap_or_default();
                    errln!(
                        "no fleet `{name}` in the state{hint}; looking for {} resources labelled with it",
                        r.backend.as_str().to_uppercase()
                    );
                    r
                }
            };
            let kind = record.backend;
            // What goes: the command's output, on stdout as `fleet plan`'s.
            let plan = inventory_for(kind).delete_plan(&record);
            for n in &record.nodes {
                let action = plan
                    .changes
                    .iter()
                    .find(|c| c.name == n.name)
                    .map_or("delete", |c| c.action);
                outln!("  {action:<7} node  {:<20} {}", n.name, n.host());
            }
            for c in &plan.changes {
                if c.cloud.is_some() {
                    outln!("  delete  {:<16} {:<28} {}", c.kind, c.name, c.place);
                }
            }
            if plan.changes.iter().all(|c| c.action == "forget") {
                outln!("  (flightdeck forgets `{name}`; the hosts are yours and nothing on them changes)");
            }
            for n in &plan.notes {
                outln!("  note: {n}");
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
                errln!("flightdeck: {e}");
                // A fleet its cloud cannot be asked about (no project, no credentials)
                // would stay in the state for good otherwise.
                if Store::new(&paths.state_dir).load()?.0.fleet(name).is_ok() {
                    errln!(
                        "the state keeps fleet `{name}`; to drop its record without touching {}: `flightdeck fleet delete {name} --forget`",
                        kind.as_str().to_uppercase()
                    );
                }
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
    let record = super::resolve_record(fleet_arg, paths)?;
    if let Some(why) = inventory_for(record.backend).refuses_bootstrap(&record.name) {
        anyhow::bail!(why);
    }
    let reach = super::reach(&record.nodes, cli, paths);
    let (name, all) = (record.name, record.nodes);
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
        crate::fleet::select_nodes(&all, nodes).map_err(|e| super::usage(format!("--nodes {e}")))?
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

/// `fleet delete NAME --forget`: the record leaves the state; nothing in the cloud is
/// asked or touched.
fn forget(paths: &Paths, name: &str, yes: bool) -> anyhow::Result<ExitCode> {
    let store = Store::new(&paths.state_dir);
    let (state, recovery) = store.load()?;
    note_recovery(recovery);
    let record = state.fleet(name)?.clone();
    for n in &record.nodes {
        outln!("  forget  node  {:<20} {}", n.name, n.host());
    }
    for r in &record.resources {
        let place = r.zone.as_deref().or(r.region.as_deref()).unwrap_or("global");
        outln!("  forget  {:<16} {:<28} {place}", r.kind, r.name);
    }
    if !yes && !ask(&format!("Forget fleet `{name}` (nothing is deleted)?"))? {
        errln!("nothing changed");
        return Ok(ExitCode::FAILURE);
    }
    store.update(|s| s.fleets.retain(|f| f.name != record.name))?;
    errln!("fleet `{name}` forgotten: its record left the state, nothing was deleted");
    if !record.resources.is_empty() {
        errln!(
            "its {} may still exist in {}: `flightdeck fleet gc` lists what flightdeck made that no fleet knows",
            crate::words::plural(record.resources.len(), "resource"),
            record.backend.as_str().to_uppercase()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn ask(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("not a terminal: pass --yes to go ahead without a question");
    }
    Ok(super::prompt::confirm(question))
}

/// `fleet gc`: what flightdeck made that no fleet record knows, in each family that
/// [`cloud::lifecycle::sweepers`] names; the exit code is the last one's.
fn gc(paths: &Paths, yes: bool, json: bool) -> anyhow::Result<ExitCode> {
    let store = Store::new(&paths.state_dir);
    let ctx = super::inventory_context(paths)?;
    let (state, recovery) = store.load()?;
    note_recovery(recovery);
    let rt = runtime()?;
    let mut code = ExitCode::SUCCESS;
    for inventory in cloud::lifecycle::sweepers(&state, &ctx) {
        let found = rt
            .block_on(inventory.sweep(&ctx, &state))
            .map_err(anyhow::Error::msg)?;
        code = sweep(&rt, found, yes, json)?;
    }
    Ok(code)
}

/// Show what one family's sweep found and remove it (with `--yes`, or when asked).
fn sweep(
    rt: &tokio::runtime::Runtime,
    found: cloud::inventory::Sweep,
    yes: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if json {
        outln!("{}", serde_json::to_string_pretty(&found.json)?);
    } else if found.is_empty() {
        errln!("{}", found.none);
    } else {
        print_table(&found.header, &found.rows);
    }
    if found.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        let Some(question) = found
            .ask
            .as_deref()
            .filter(|_| !json && std::io::stdin().is_terminal())
        else {
            errln!("{}", found.found);
            return Ok(ExitCode::SUCCESS);
        };
        if !ask(question)? {
            errln!("nothing changed");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let removed = found.removed.clone();
    let status = super::StatusLine::start("fleet gc");
    let progress = |line: String| status.print(&line);
    let gone = rt.block_on(found.remove(&progress));
    drop(status);
    match gone {
        Ok(()) => {
            if let Some(r) = removed {
                errln!("{r}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            errln!("flightdeck: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `fleet status NAME`: the fleet's nodes as its cloud sees them now (lost GCP nodes are
/// marked in the state).
fn status(paths: &Paths, name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let (state, recovery) = Store::new(&paths.state_dir).load()?;
    note_recovery(recovery);
    let record = state.fleet(name)?;
    let ctx = super::inventory_context(paths)?;
    let status = runtime()?
        .block_on(inventory_for(record.backend).status(&ctx, record))
        .map_err(anyhow::Error::msg)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&status.json)?);
    } else {
        for b in &status.blocks {
            match b {
                cloud::inventory::Block::Line(l) => outln!("{l}"),
                cloud::inventory::Block::Table(header, rows) => print_table(header, rows),
                cloud::inventory::Block::Blank => outln!(),
            }
        }
    }
    Ok(if status.lost {
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
    let gcp = Config::load(paths)?.gcp;
    cloud::lifecycle::backend(
        kind,
        gcp,
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
                errln!("{}", super::common::diag_line(&d));
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
                let nodes = inventory_for(f.backend).declared_nodes(&f);
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
                    errln!("{}", super::common::diag_line(&d));
                }
            }
        }
    }
    if failed {
        // 2: the input is wrong (as for usage errors), not a failure to do something.
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// The plan on stdout: it is the command's output (`fleet plan > plan.txt`, `| less`);
/// questions and progress go to stderr.
fn print_plan(plan: &Plan) {
    outln!("fleet `{}` ({} backend):", plan.fleet, plan.backend);
    for c in &plan.changes {
        match &c.cloud {
            None => outln!("  {:<7} {:<5} {:<20} {}", c.action, c.kind, c.name, c.place),
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
                let line = format!(
                    "  {:<7} {:<16} {:<28} {:<16} {}",
                    c.action,
                    c.kind,
                    c.name,
                    c.place,
                    extra.join("  ")
                );
                outln!("{}", line.trim_end());
            }
        }
    }
    if plan.is_noop() {
        outln!("  (no changes)");
    }
    for n in &plan.notes {
        outln!("  note: {n}");
    }
    if let Some(total) = plan.hourly_usd {
        outln!("  cost when up: {}", cost(total));
    }
    if !plan.fallbacks.is_empty() {
        outln!("  if out of capacity, then (in order):");
        for f in plan.fallbacks.iter().take(8) {
            outln!("    {f}");
        }
        if plan.fallbacks.len() > 8 {
            outln!("    ... and {} more", plan.fallbacks.len() - 8);
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

/// An aligned table on stdout, every column kept ([`super::table::render`]).
pub fn print_table<R: AsRef<[String]>>(header: &[&'static str], rows: &[R]) {
    let cols: Vec<super::table::Col> = header.iter().map(|h| super::table::Col::left(h)).collect();
    out!("{}", super::table::render(&cols, rows, None));
}

/// `fleet example [NAME]`: an embedded example fleet file on stdout, or the list.
fn example(name: Option<&str>) -> anyhow::Result<ExitCode> {
    let Some(name) = name else {
        for (n, text) in fleet::EXAMPLES {
            // Each file's first comment line says what it is.
            let about = text
                .lines()
                .find_map(|l| l.strip_prefix('#').map(str::trim))
                .unwrap_or("");
            outln!("{n:<14} {about}");
        }
        return Ok(ExitCode::SUCCESS);
    };
    match fleet::EXAMPLES
        .iter()
        .find(|(n, _)| *n == name.trim_end_matches(".yaml"))
    {
        Some((_, text)) => {
            out!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let hint = crate::yaml::did_you_mean(name, fleet::EXAMPLES.iter().map(|(n, _)| *n));
            Err(super::Usage(format!(
                "no example fleet `{name}`{hint}; `flightdeck fleet example` lists them"
            ))
            .into())
        }
    }
}
