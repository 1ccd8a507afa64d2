//! The NCCL view's services: the fleets for the run dialog, each with its backend family
//! and what `auto` picks for it, and starting a run the way `flightdeck nccl run` does
//! (through the fleet's [`crate::nccl::RunLauncher`]: on VMs node-to-node SSH for mpirun
//! and the launch on the nodes, on GKE the test pods; then the record in the state store
//! and the history with the environment as edited).

use crate::nccl::launcher::Start;
use crate::nccl::profile;
use crate::reach::Reach;
use crate::store::{FleetRecord, Store};
use crate::tui::nccl::{FleetChoice, RunRequest};
use crate::tui::services::ServiceEvent;
use crate::tui::state::Msg;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;

/// The fleets of the state store, with their backend family, machine type and the
/// profile `auto` picks (the fleet file's `network.gpudirect`, else the machine type's
/// flavour).
pub fn choices(dir: &Path) -> Result<Vec<FleetChoice>, String> {
    let (state, _) = Store::new(dir).load().map_err(|e| e.to_string())?;
    Ok(state
        .fleets
        .iter()
        .map(|f| {
            let spec = crate::fleet::applied::applied_spec(f);
            let (machine_type, auto, from) = profile::machine_and_profile(spec.as_ref(), None);
            FleetChoice {
                name: f.name.clone(),
                family: f.backend,
                nodes: f.nodes.len(),
                machine_type,
                auto,
                auto_from: from.as_str().to_string(),
            }
        })
        .collect())
}

/// Start the run of the dialog on every node of its fleet; reports its id or why not.
pub async fn start(tx: mpsc::Sender<ServiceEvent>, dir: PathBuf, reach: Reach, req: RunRequest) {
    let result = start_run(&dir, req, |_| Ok(reach)).await;
    let _ = tx
        .send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Started(
            result,
        ))))
        .await;
}

/// Start `req` on every node of its fleet of the state store in `dir`, reached through
/// `reach`; the run's id, or why it did not start.
pub async fn start_run(
    dir: &Path,
    req: RunRequest,
    reach: impl FnOnce(&FleetRecord) -> Result<Reach, String>,
) -> Result<String, String> {
    let d = dir.to_path_buf();
    let state = tokio::task::spawn_blocking(move || Store::new(&d).load())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?
        .0;
    let fleet = state
        .fleet(&req.fleet)
        .map_err(|_| format!("fleet `{}` is gone from the state", req.fleet))?;
    let reach = reach(fleet)?;
    let start = Start {
        fleet: fleet.name.clone(),
        nodes: fleet.nodes.clone(),
        reach,
        spec: req.spec,
        mpirun: "mpirun".into(),
        machine: req.machine_type.map(|m| (m, "fleet instance_types".to_string())),
        purpose: None,
        node_ssh: true,
        preflight: true,
    };
    crate::nccl::launcher_for(fleet.backend)
        .start(dir, &start, &|m| tracing::info!("nccl run: {m}"))
        .await
        .map(|s| s.id)
        .map_err(|e| format!("{e:#}"))
}
