//! The Doctor view's service: the doctor on every node of a fleet of the state store,
//! as `flightdeck doctor` runs it (placement from the Compute API included), its findings
//! sent to the view as they come.

use crate::doctor;
use crate::paths::Paths;
use crate::reach::Reach;
use crate::store::Store;
use crate::tui::services::ServiceEvent;
use crate::tui::state::Msg;
use tokio::sync::mpsc;

pub async fn run(tx: mpsc::Sender<ServiceEvent>, paths: Paths, reach: Reach, fleet: String) {
    let result = examine(&tx, &paths, reach, &fleet).await;
    let _ = tx
        .send(ServiceEvent::Msg(Msg::Doctor(crate::tui::doctor::Msg::Done {
            fleet,
            result: result.map(Box::new),
        })))
        .await;
}

async fn examine(
    tx: &mpsc::Sender<ServiceEvent>,
    paths: &Paths,
    reach: Reach,
    fleet: &str,
) -> Result<doctor::Report, String> {
    let dir = paths.state_dir.clone();
    let state = tokio::task::spawn_blocking(move || Store::new(&dir).load())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?
        .0;
    let record = state.fleet(fleet).map_err(|e| e.to_string())?;
    if record.nodes.is_empty() {
        return Err(format!("fleet `{fleet}` has no nodes"));
    }
    let (ctx, compact) = doctor::context_for(
        &paths.state_dir,
        fleet,
        fleet,
        record.backend,
        record.nodes.len(),
        doctor::Asked::default(),
    );
    let _ = tx
        .send(ServiceEvent::Msg(Msg::Doctor(crate::tui::doctor::Msg::Started {
            fleet: fleet.to_string(),
            nodes: record.nodes.iter().map(|n| n.name.clone()).collect(),
        })))
        .await;
    // Findings are few (one batch per node, a few for the fleet); the final report
    // carries them all should one not fit the queue.
    let on = |e: doctor::run::Event| {
        let _ = tx.try_send(ServiceEvent::Msg(Msg::Doctor(crate::tui::doctor::Msg::Event(
            Box::new(e),
        ))));
    };
    let inventory = crate::tui::services::inventory_context(paths).with_kube(reach.kube().clone());
    let mut report = doctor::run::examine(reach, fleet, &record.nodes, &ctx, &on).await;
    report.add(doctor::run::placement(&inventory, Some(record), &record.nodes, compact).await);
    report.link_causes();
    Ok(report)
}
