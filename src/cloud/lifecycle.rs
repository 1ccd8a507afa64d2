//! Apply and delete of a fleet with its state-store bookkeeping, shared by `flightdeck
//! fleet apply|delete` and the cockpit's Fleets view. Progress goes through a callback
//! (stderr for the CLI, the provisioning log for the cockpit).

use super::inventory::{Context, Inventory, Recorded};
use super::{Backend, Progress};
use crate::fleet::BackendKind;
use crate::fleet::Fleet;
use crate::store::{self, FleetRecord, State, Store};

/// Refuse to apply a fleet whose recorded backend differs from the file's.
pub fn check_backend(fleet: &Fleet, recorded: Option<&FleetRecord>) -> Result<(), String> {
    match recorded {
        Some(r) if r.backend != fleet.backend => Err(format!(
            "fleet `{}` is recorded with the {} backend; delete it before applying it on {}",
            fleet.name, r.backend, fleet.backend
        )),
        _ => Ok(()),
    }
}

/// What applying `fleet` would do, against its record: `backend`'s plan, and each field
/// of the file that differs from what was applied (what commands run until this apply).
pub fn plan(
    backend: &dyn Backend,
    fleet: &Fleet,
    recorded: Option<&FleetRecord>,
) -> Result<super::Plan, String> {
    let mut plan = backend.plan(fleet, recorded)?;
    match recorded.map(|r| r.applied.as_deref()) {
        Some(Some(applied)) => {
            for c in crate::fleet::form::changes(applied, &fleet.applied) {
                plan.notes.push(format!("changed since apply: {c}"));
            }
        }
        Some(None) => plan.notes.push(
            "applied by an older flightdeck, which did not record the file: apply records it, and commands run from that record".into(),
        ),
        None => {}
    }
    Ok(plan)
}

/// Bring `fleet` up with `backend` and record it in the state. On failure the error says
/// what the state keeps (cloud resources are recorded as they are made) and what to do.
pub async fn apply(
    store: &Store,
    backend: &dyn Backend,
    fleet: &Fleet,
    progress: Progress<'_>,
) -> Result<FleetRecord, String> {
    let recorded = store
        .load()
        .map_err(|e| e.to_string())?
        .0
        .fleet(&fleet.name)
        .ok()
        .cloned();
    check_backend(fleet, recorded.as_ref())?;
    let nodes = match backend.apply(fleet, progress).await {
        Ok(n) => n,
        Err(e) => {
            let (left, _) = store
                .update(|s| {
                    let left = s
                        .fleets
                        .iter()
                        .find(|f| f.name == fleet.name)
                        .map(|f| f.resources.len() + f.nodes.len())
                        .unwrap_or(0);
                    if left == 0 {
                        s.fleets.retain(|f| f.name != fleet.name);
                    }
                    left
                })
                .map_err(|se| format!("{e}; and the state could not be read: {se}"))?;
            return Err(if left == 0 {
                format!("{e}\nnothing was recorded")
            } else {
                format!(
                    "{e}\nthe state keeps fleet `{}` with what it has ({}, nodes included); `flightdeck fleet apply` again or `flightdeck fleet delete {}`",
                    fleet.name, crate::words::plural(left, "resource"), fleet.name
                )
            });
        }
    };
    let file = std::fs::canonicalize(&fleet.file).ok();
    let created_at = recorded.map(|r| r.created_at).unwrap_or_else(store::now_unix);
    let (record, _) = store
        .update(|s| {
            // Resources were recorded during apply (GCP): keep them.
            let resources = s
                .fleets
                .iter()
                .find(|f| f.name == fleet.name)
                .map(|f| f.resources.clone())
                .unwrap_or_default();
            let record = FleetRecord {
                name: fleet.name.clone(),
                backend: fleet.backend,
                file: file.clone(),
                nodes: nodes.clone(),
                resources,
                created_at,
                applied: Some(fleet.applied.clone()),
            };
            s.fleets.retain(|f| f.name != record.name);
            s.fleets.push(record.clone());
            record
        })
        .map_err(|e| e.to_string())?;
    progress(format!(
        "fleet `{}`: {} ready",
        fleet.name,
        crate::words::plural(record.nodes.len(), "node")
    ));
    Ok(record)
}

/// Take a recorded fleet down and forget it. What could not be deleted stays recorded.
pub async fn delete(
    store: &Store,
    backend: &dyn Backend,
    record: &FleetRecord,
    progress: Progress<'_>,
) -> Result<(), String> {
    if let Err(e) = backend.delete(record, progress).await {
        return Err(format!(
            "{e}\nwhat could not be deleted stays in the state; `flightdeck fleet delete {}` retries",
            record.name
        ));
    }
    store
        .update(|s| s.fleets.retain(|f| f.name != record.name))
        .map_err(|e| e.to_string())?;
    progress(format!("fleet `{}`: deleted", record.name));
    Ok(())
}

/// The GCP backend of the config file's `gcp:` block (`settings`), with the live catalog
/// for prices.
pub fn gcp_backend(
    settings: super::gcp::settings::GcpSettings,
    paths: &crate::paths::Paths,
) -> super::gcp::backend::GcpBackend {
    let catalog = crate::catalog::live::startup(Some(&paths.state_dir))
        .catalog
        .into_owned();
    super::gcp::backend::GcpBackend {
        settings,
        catalog: std::sync::Arc::new(catalog),
        state_dir: paths.state_dir.clone(),
        home: std::env::var_os("HOME").map(std::path::PathBuf::from),
        ssh: None,
        cancel: super::Cancel::default(),
    }
}

/// The backend for a kind; `gcp` is the config's `gcp:` block (its defaults when unset);
/// `reach` gives the way to reach nodes where one is needed; `cancel` stops an apply of a
/// cloud backend.
pub fn backend(
    kind: BackendKind,
    gcp: Option<super::gcp::settings::GcpSettings>,
    paths: &crate::paths::Paths,
    reach: impl FnOnce() -> crate::reach::Reach,
    cancel: &super::Cancel,
) -> Result<Box<dyn Backend>, String> {
    Ok(match kind {
        BackendKind::Local => Box::new(super::local::Local),
        BackendKind::Ssh => Box::new(super::ssh_hosts::SshHosts {
            reach: reach(),
            fanout: 64,
        }),
        BackendKind::Gke => Box::new(super::gke::GkeBackend {
            clients: reach().kube().clone(),
        }),
        BackendKind::Gcp => {
            let mut b = gcp_backend(gcp.unwrap_or_default(), paths);
            b.cancel = cancel.clone();
            if b.settings.proxy_jump.is_some() {
                b.ssh = Some(reach());
            }
            Box::new(b)
        }
    })
}

/// The GPUDirect flavour a fleet's nodes are bootstrapped for: the fleet file's
/// `network.gpudirect`, else its machine type's ([`crate::nccl::profile::auto_profile`]).
pub fn bootstrap_flavour(spec: &crate::fleet::FleetSpec) -> crate::nccl::GpuDirect {
    crate::nccl::profile::auto_profile(Some(spec), None).0
}

/// After `apply` of a fleet whose family bootstraps its nodes (GCP's,
/// [`Inventory::bootstraps_after_apply`]): bootstrap them for their GPUDirect flavour
/// (`crate::bootstrap`), unless `enabled` (the config's `gcp.bootstrap`) is false or `skip`
/// is set. Other backends' hosts are bootstrapped with `flightdeck fleet bootstrap` only.
pub async fn bootstrap_after_apply(
    enabled: bool,
    fleet: &Fleet,
    record: &FleetRecord,
    reach: crate::reach::Reach,
    skip: bool,
    progress: Progress<'_>,
) -> Result<(), String> {
    use crate::nccl::GpuDirect;
    if !inventory_for(fleet.backend).bootstraps_after_apply() {
        return Ok(());
    }
    let flavour = bootstrap_flavour(&fleet.spec);
    if flavour == GpuDirect::None {
        return Ok(());
    }
    if skip || !enabled {
        progress(format!(
            "GPUDirect-{} bootstrap skipped ({}); `flightdeck fleet bootstrap {}` runs it",
            flavour.name(),
            if skip {
                "--no-bootstrap"
            } else {
                "gcp.bootstrap: false"
            },
            fleet.name
        ));
        return Ok(());
    }
    progress(format!(
        "bootstrapping {} for {} (`flightdeck fleet bootstrap --show {}` prints the script)",
        crate::words::plural(record.nodes.len(), "node"),
        crate::bootstrap::flavour_title(flavour),
        flavour.name()
    ));
    let outcomes = crate::bootstrap::remote::run(reach, &record.nodes, flavour, progress).await;
    let summary = crate::bootstrap::remote::summary(flavour, &outcomes);
    if outcomes.iter().all(|o| o.ok()) {
        progress(summary);
        Ok(())
    } else {
        Err(summary)
    }
}

/// The inventory of a family: the one `match` on the kind for node rows, status, gc,
/// upkeep, placement and the delete plan.
pub fn inventory_for(kind: BackendKind) -> &'static dyn Inventory {
    static LOCAL: Recorded = Recorded(BackendKind::Local);
    static SSH: Recorded = Recorded(BackendKind::Ssh);
    match kind {
        BackendKind::Local => &LOCAL,
        BackendKind::Ssh => &SSH,
        BackendKind::Gcp => &super::gcp::upkeep::GcpInventory,
        BackendKind::Gke => &super::gke::inventory::GkeInventory,
    }
}

/// The families `fleet gc` looks in, in the order it reports them: those [`Inventory::sweeps`]
/// says, else GCP's (it finds this owner's labelled resources with ADC and the
/// environment's project even without a `gcp:` block).
pub fn sweepers(state: &State, ctx: &Context) -> Vec<&'static dyn Inventory> {
    let mut out: Vec<&'static dyn Inventory> = BackendKind::ALL
        .iter()
        .rev()
        .map(|k| inventory_for(*k))
        .filter(|i| i.sweeps(state, ctx))
        .collect();
    if out.is_empty() {
        out.push(inventory_for(BackendKind::Gcp));
    }
    out
}
