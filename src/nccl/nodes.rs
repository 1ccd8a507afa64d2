//! The node launcher: NCCL runs on a local, SSH or GCP fleet start on the nodes
//! themselves. The GPUDirect pre-flight and node-to-node SSH for mpirun first, then the
//! run's scripts detached on the nodes ([`super::runner`]'s commands: nccl-tests on one
//! node, through mpirun on the first of several, or torchrun on every node), then the
//! record in the state store and the history entry. The straggler finder starts its
//! groups' runs here too ([`start`], [`setup_node_ssh`]).

use super::history;
use super::launcher::{Progress, RunLauncher, Start, Started};
use super::nodessh;
use super::remote::{record_run, recorded_nodes, saved_run};
use super::runner::{self, Engine, MpiHost, RunSpec};
use crate::exec::{self, collect};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::{self, RunRecord};
use std::path::Path;

/// The [`RunLauncher`] of fleets whose nodes run the scripts themselves (local, SSH,
/// GCP).
pub struct NodeLauncher;

impl RunLauncher for NodeLauncher {
    fn start<'a>(
        &'a self,
        state_dir: &'a Path,
        s: &'a Start,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, anyhow::Result<Started>> {
        Box::pin(start(state_dir, s, progress))
    }

    fn heads(&self, run: &RunRecord, fleet_nodes: &[NodeTarget]) -> Vec<NodeTarget> {
        recorded_nodes(run, fleet_nodes)
    }

    fn leaves(&self) -> Option<&'static str> {
        None
    }

    fn cleanup<'a>(
        &'a self,
        _: &'a Reach,
        _: &'a str,
        _: &'a [NodeTarget],
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        // A run directory stays on its nodes: `nccl attach` reads it again.
        Box::pin(async { Ok(None) })
    }
}

/// Set up SSH among `nodes` (see [`nodessh`]): collect each node's keys, install them on all.
pub async fn setup_node_ssh(reach: Reach, fleet: &str, nodes: &[NodeTarget]) -> anyhow::Result<()> {
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.clone(), nodessh::collect_command(fleet, n.port())))
        .collect();
    let out = collect(reach.clone(), jobs).await;
    let mut peers = vec![];
    let mut failed = vec![];
    for (n, (code, stdout, stderr)) in nodes.iter().zip(&out) {
        match (code, nodessh::parse_collect(stdout)) {
            (0, Ok(keys)) => peers.push((peer_of(n), keys)),
            (_, Err(e)) => failed.push(format!("{}: {e} {}", n.name, stderr.trim())),
            (c, Ok(_)) => failed.push(format!("{}: exit {c} {}", n.name, stderr.trim())),
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("node-to-node SSH could not be set up:\n  {}", failed.join("\n  "));
    }
    let install = nodessh::install_command(fleet, &peers);
    let jobs: Vec<(NodeTarget, String)> = nodes.iter().map(|n| (n.clone(), install.clone())).collect();
    let out = collect(reach, jobs).await;
    let failed: Vec<String> = nodes
        .iter()
        .zip(&out)
        .filter(|(_, (c, o, _))| *c != 0 || o.trim() != "installed")
        .map(|(n, (c, _, e))| format!("{}: exit {c} {}", n.name, e.trim()))
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "node-to-node SSH could not be installed:\n  {}",
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// A node as the others reach it: its internal address, else the address flightdeck uses.
fn peer_of(n: &NodeTarget) -> nodessh::Peer {
    nodessh::Peer {
        name: n.name.clone(),
        addr: n.internal_ip.clone().unwrap_or_else(|| n.host().to_string()),
        port: n.port(),
        user: n.user().map(str::to_string),
    }
}

/// Start run `id` detached: one node with nccl-tests; several through mpirun on the first
/// (only it runs a script); torch on every node. Returns the nodes that run a script,
/// with their pids.
pub async fn launch(
    reach: Reach,
    id: &str,
    spec: &RunSpec,
    nodes: &[NodeTarget],
    mpirun: &str,
) -> anyhow::Result<Vec<(NodeTarget, Option<u32>)>> {
    let master = nodes[0]
        .internal_ip
        .clone()
        .unwrap_or_else(|| nodes[0].host().to_string());
    let count = nodes.len();
    let jobs: Vec<(NodeTarget, String, Vec<u8>)> = if spec.engine == Engine::NcclTests && count > 1 {
        let hosts: Vec<MpiHost> = nodes
            .iter()
            .map(|n| {
                let p = peer_of(n);
                MpiHost {
                    addr: p.addr,
                    port: p.port,
                }
            })
            .collect();
        let script = runner::mpirun_script(spec, &hosts, mpirun);
        let (command, input) = runner::launch_command(id, &script, false);
        vec![(nodes[0].clone(), command, input)]
    } else {
        nodes
            .iter()
            .enumerate()
            .map(|(rank, n)| {
                let script = runner::node_script(spec, rank, count, &master);
                let (command, input) = runner::launch_command(id, &script, spec.engine == Engine::Torch);
                (n.clone(), command, input)
            })
            .collect()
    };
    let launched_on: Vec<NodeTarget> = jobs.iter().map(|(n, _, _)| n.clone()).collect();
    let launched = exec::collect_with_input(reach, jobs).await;
    let mut failed = vec![];
    let mut started = vec![];
    for (n, (code, out, err)) in launched_on.iter().zip(&launched) {
        if *code != 0 || !out.starts_with("started ") {
            failed.push(format!("{}: {} {}", n.name, out.trim(), err.trim()));
        }
        started.push((
            n.clone(),
            out.trim().strip_prefix("started ").and_then(|p| p.parse().ok()),
        ));
    }
    if !failed.is_empty() {
        anyhow::bail!("the run could not start:\n  {}", failed.join("\n  "));
    }
    Ok(started)
}

/// Start a run: node-to-node SSH when mpirun needs it, the launch on the nodes, then
/// the record in the state store and the history entry (with the environment the nodes
/// got). [`NodeLauncher`] starts `flightdeck nccl run`'s and the cockpit's runs here; the
/// straggler finder its groups'. `progress` hears each step.
pub async fn start(
    state_dir: &Path,
    s: &Start,
    progress: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Started> {
    if s.nodes.is_empty() {
        anyhow::bail!("no nodes selected");
    }
    s.spec.check()?;
    if s.preflight {
        crate::bootstrap::preflight::check_nodes(
            s.reach.clone(),
            &s.nodes,
            s.spec.profile,
            &s.spec.env_lines(),
            progress,
        )
        .await
        .map_err(anyhow::Error::msg)?;
    }
    if s.node_ssh && s.spec.engine == Engine::NcclTests && s.nodes.len() > 1 {
        progress(format!(
            "setting up SSH between the {} nodes for mpirun",
            s.nodes.len()
        ));
        setup_node_ssh(s.reach.clone(), &s.fleet, &s.nodes).await?;
    }
    let id = runner::new_id(&s.spec.collective, store::now_unix());
    let machine = s.machine.as_ref().map(|(m, f)| (m.clone(), f.as_str()));
    let saved = saved_run(&id, &s.fleet, &s.spec, &s.nodes, machine, s.purpose.clone());
    let started = launch(s.reach.clone(), &id, &s.spec, &s.nodes, &s.mpirun).await?;
    let (dir, fleet, rid, st, entry) = (
        state_dir.to_path_buf(),
        s.fleet.clone(),
        id.clone(),
        started.clone(),
        saved.clone(),
    );
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        record_run(&dir, &fleet, &rid, &st)?;
        history::save(&dir, &entry)?;
        Ok(())
    })
    .await??;
    progress(format!(
        "run {id} started on {} of `{}`",
        crate::words::plural(s.nodes.len(), "node"),
        s.fleet
    ));
    Ok(Started {
        id,
        heads: started.into_iter().map(|(n, _)| n).collect(),
        saved,
    })
}
