//! `flightdeck fleet validate|plan|apply|list|delete` for the local and SSH backends.

use super::{Cli, FleetCommand};
use crate::cloud::{self, Backend, Plan};
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
            let backend = backend(fleet.backend, cli)?;
            let plan = backend.plan(&fleet, recorded);
            if *json {
                println!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                print_plan(&plan);
            }
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Apply { file, yes } => {
            let Some(fleet) = load_reporting(file) else {
                return Ok(ExitCode::FAILURE);
            };
            let store = Store::new(&paths.state_dir);
            let (state, recovery) = store.load()?;
            note_recovery(recovery);
            let recorded = state.fleets.iter().find(|f| f.name == fleet.name);
            if let Some(r) = recorded {
                if r.backend != fleet.backend.as_str() {
                    anyhow::bail!(
                        "fleet `{}` is recorded with the {} backend; delete it before applying it on {}",
                        fleet.name,
                        r.backend,
                        fleet.backend.as_str()
                    );
                }
            }
            let backend = backend(fleet.backend, cli)?;
            let plan = backend.plan(&fleet, recorded);
            print_plan(&plan);
            if !yes && !ask(&format!("Apply fleet `{}`?", fleet.name))? {
                eprintln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
            let rt = runtime()?;
            let progress = |line: String| eprintln!("{line}");
            let nodes = match rt.block_on(backend.apply(&fleet, &progress)) {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("fleet apply: {e}");
                    eprintln!("nothing was recorded");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let record = FleetRecord {
                name: fleet.name.clone(),
                backend: fleet.backend.as_str().to_string(),
                file: std::fs::canonicalize(&fleet.file).ok(),
                nodes,
                resources: vec![],
                created_at: recorded.map(|r| r.created_at).unwrap_or_else(store::now_unix),
            };
            store.update(|s| {
                s.fleets.retain(|f| f.name != record.name);
                s.fleets.push(record.clone());
            })?;
            eprintln!("fleet `{}`: {} node(s) ready", fleet.name, record.nodes.len());
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::List { json } => {
            let (state, recovery) = Store::new(&paths.state_dir).load()?;
            note_recovery(recovery);
            if *json {
                println!("{}", serde_json::to_string_pretty(&state.fleets)?);
                return Ok(ExitCode::SUCCESS);
            }
            if state.fleets.is_empty() {
                eprintln!("no fleets: apply one with `flightdeck fleet apply FILE`");
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
            let Some(record) = state.fleets.iter().find(|f| f.name == *name).cloned() else {
                let names: Vec<&str> = state.fleets.iter().map(|f| f.name.as_str()).collect();
                let hint = crate::yaml::closest(name, names.iter().copied())
                    .map(|h| format!("; did you mean `{h}`?"))
                    .unwrap_or_default();
                anyhow::bail!("no fleet `{name}` in the state{hint}");
            };
            let kind = match record.backend.as_str() {
                "local" => BackendKind::Local,
                "ssh" => BackendKind::Ssh,
                other => {
                    anyhow::bail!("fleet `{name}` uses the {other} backend, which is not in this build yet")
                }
            };
            for n in &record.nodes {
                eprintln!("  delete  node  {:<20} {}", n.name, n.host);
            }
            if !yes && !ask(&format!("Delete fleet `{name}`?"))? {
                eprintln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
            let backend = backend(kind, cli)?;
            let progress = |line: String| eprintln!("{line}");
            runtime()?
                .block_on(backend.delete(&record, &progress))
                .map_err(anyhow::Error::msg)?;
            store.update(|s| s.fleets.retain(|f| f.name != *name))?;
            Ok(ExitCode::SUCCESS)
        }
        FleetCommand::Gc { .. } => {
            eprintln!(
                "flightdeck fleet gc: not available in this build yet (the GCP backend has not landed)"
            );
            Ok(ExitCode::from(2))
        }
    }
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
        eprintln!("{}", r.message);
        tracing::warn!("{}", r.message);
    }
}

/// The backend for a kind, with SSH settings from the command line.
pub fn backend(kind: BackendKind, cli: &Cli) -> anyhow::Result<Box<dyn Backend>> {
    Ok(match kind {
        BackendKind::Local => Box::new(cloud::local::Local),
        BackendKind::Ssh => {
            let (pool, resolver) = super::ssh_setup(cli);
            Box::new(cloud::ssh_hosts::SshHosts {
                pool,
                resolver,
                fanout: 64,
            })
        }
        BackendKind::Gcp => anyhow::bail!("the gcp backend is not in this build yet"),
    })
}

fn load_reporting(file: &std::path::Path) -> Option<Fleet> {
    match fleet::load(file) {
        Ok(f) => {
            for w in &f.warnings {
                eprintln!("{w}");
            }
            Some(f)
        }
        Err(diags) => {
            for d in diags {
                eprintln!("{d}");
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
                    eprintln!("{w}");
                }
                let nodes = match f.backend {
                    BackendKind::Gcp => f.spec.nodes.map(|n| format!("{n} nodes")).unwrap_or_default(),
                    _ => format!("{} node(s)", f.node_targets().len()),
                };
                println!(
                    "{}: ok ({} fleet `{}`, {nodes})",
                    file.display(),
                    f.backend.as_str(),
                    f.name
                );
            }
            Err(diags) => {
                failed |= diags.iter().any(|d| d.severity == Severity::Error);
                for d in diags {
                    eprintln!("{d}");
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
    eprintln!("fleet `{}` ({} backend):", plan.fleet, plan.backend);
    for c in &plan.changes {
        eprintln!("  {:<7} {:<5} {:<20} {}", c.action, c.kind, c.name, c.place);
    }
    if plan.is_noop() {
        eprintln!("  (no changes)");
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
        println!("{}", s.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}
