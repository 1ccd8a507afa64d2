//! Jobs on GKE.

use super::{Clients, ClusterRef, FLEET_LABEL};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};

pub fn jobset_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"))
}

/// Kueue's Workloads in `namespace` (v1beta2, else v1beta1), as JSON.
pub async fn workloads(client: &kube::Client, namespace: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut last = String::new();
    for v in ["v1beta2", "v1beta1"] {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("kueue.x-k8s.io", v, "Workload"));
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        match api.list(&ListParams::default()).await {
            Ok(l) => {
                return Ok(l
                    .items
                    .into_iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .collect())
            }
            Err(e) if super::cluster::not_found(&e) => {
                last = format!("Kueue's Workload API ({v}) is not served")
            }
            Err(e) => return Err(super::cluster::why(&e)),
        }
    }
    Err(format!("{last}: Kueue is not installed"))
}

/// Delete the fleet's JobSets (their Jobs and pods go with them); how many.
pub async fn delete_fleet_jobsets(
    clients: &Clients,
    cluster: &ClusterRef,
    namespace: &str,
    fleet: &str,
) -> Result<usize, String> {
    let client = clients.get(cluster).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &jobset_resource());
    let list = match api
        .list(&ListParams::default().labels(&format!("{FLEET_LABEL}={fleet}")))
        .await
    {
        Ok(l) => l,
        Err(e) if super::cluster::not_found(&e) => return Ok(0),
        Err(e) => return Err(super::cluster::why(&e)),
    };
    let n = list.items.len();
    for o in list.items {
        if let Some(name) = o.metadata.name {
            match api.delete(&name, &DeleteParams::foreground()).await {
                Ok(_) => {}
                Err(e) if super::cluster::not_found(&e) => {}
                Err(e) => return Err(format!("deleting JobSet {name}: {}", super::cluster::why(&e))),
            }
        }
    }
    Ok(n)
}
