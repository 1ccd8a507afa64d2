//! JobSets and Kueue's objects in a cluster: the Kubernetes calls a job on GKE rides on
//! (the JobSet itself, its pods and its logs are the JobSet runner's, in `jobs`), Kueue's
//! Workloads and LocalQueues as the cockpit shows them, and the removal of a fleet's
//! JobSets when it is deleted.

use super::{object_name, Clients, ClusterRef, KubeNode, FLEET_LABEL};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};

pub fn jobset_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"))
}

/// Kueue's Workloads in `namespace` (v1beta2, else v1beta1), as JSON.
pub async fn workloads(client: &kube::Client, namespace: &str) -> Result<Vec<serde_json::Value>, String> {
    kueue_list(client, namespace, "Workload").await
}

/// Kueue's LocalQueues in `namespace`, as JSON.
pub async fn local_queues(client: &kube::Client, namespace: &str) -> Result<Vec<serde_json::Value>, String> {
    kueue_list(client, namespace, "LocalQueue").await
}

async fn kueue_list(
    client: &kube::Client,
    namespace: &str,
    kind: &str,
) -> Result<Vec<serde_json::Value>, String> {
    let mut last = String::new();
    for v in ["v1beta2", "v1beta1"] {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("kueue.x-k8s.io", v, kind));
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

/// Delete this owner's JobSets of the fleet (their Jobs and pods go with them): how
/// many, and the others of that fleet's name, listed and not touched.
pub async fn delete_fleet_jobsets(
    clients: &Clients,
    cluster: &ClusterRef,
    namespace: &str,
    fleet: &str,
) -> Result<(usize, Vec<String>), String> {
    let client = clients.get(cluster).await?;
    let owner = clients.owner();
    let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &jobset_resource());
    let list = match api
        .list(&ListParams::default().labels(&format!("{FLEET_LABEL}={fleet}")))
        .await
    {
        Ok(l) => l,
        Err(e) if super::cluster::not_found(&e) => return Ok((0, vec![])),
        Err(e) => return Err(super::cluster::why(&e)),
    };
    let mut gone = 0;
    let mut others = vec![];
    for o in list.items {
        let name = o.metadata.name.clone().unwrap_or_default();
        if let Some(whose) = owner.other(&o.metadata.labels.clone().unwrap_or_default()) {
            others.push(format!("JobSet {name} {whose}"));
            continue;
        }
        match api.delete(&name, &DeleteParams::foreground()).await {
            Ok(_) => gone += 1,
            Err(e) if super::cluster::not_found(&e) => {}
            Err(e) => return Err(format!("deleting JobSet {name}: {}", super::cluster::why(&e))),
        }
    }
    Ok((gone, others))
}

/// The label naming the job id on the JobSet and its pods.
pub const JOB_LABEL: &str = "flightdeck-job";

/// The JobSet's name for job `id` (short enough for its pods' names).
pub fn jobset_name(id: &str) -> String {
    object_name(id, 40)
}

/// Create a JobSet (`set`, the API's JSON) in `node`'s cluster and namespace.
pub async fn create_jobset(
    clients: &Clients,
    node: &KubeNode,
    set: &serde_json::Value,
) -> Result<(), String> {
    let client = clients.get(&node.cluster).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client, &node.namespace, &jobset_resource());
    let mut set = set.clone();
    super::stamp_owner(&clients.owner(), &mut set);
    let obj: DynamicObject = serde_json::from_value(set).map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &obj)
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "creating JobSet {}: {}",
                obj.metadata.name.unwrap_or_default(),
                super::cluster::why(&e)
            )
        })
}

/// Whether job `id`'s JobSet exists in `node`'s cluster and namespace.
pub async fn jobset_exists(clients: &Clients, node: &KubeNode, id: &str) -> Result<bool, String> {
    let sets: Api<DynamicObject> = Api::namespaced_with(
        clients.get(&node.cluster).await?,
        &node.namespace,
        &jobset_resource(),
    );
    Ok(sets
        .get_opt(&jobset_name(id))
        .await
        .map_err(|e| super::cluster::why(&e))?
        .is_some())
}

/// Delete job `id`'s JobSet (its pods get TERM, then KILL after their grace); one
/// already gone is no error.
pub async fn delete_jobset(clients: &Clients, node: &KubeNode, id: &str) -> Result<(), String> {
    let sets: Api<DynamicObject> = Api::namespaced_with(
        clients.get(&node.cluster).await?,
        &node.namespace,
        &jobset_resource(),
    );
    match sets.delete(&jobset_name(id), &DeleteParams::foreground()).await {
        Ok(_) => Ok(()),
        Err(e) if super::cluster::not_found(&e) => Ok(()),
        Err(e) => Err(super::cluster::why(&e)),
    }
}

/// The pod of rank `rank` of job `id`, if it exists yet.
pub async fn rank_pod(api: &Api<Pod>, id: &str, rank: usize) -> Result<Option<Pod>, String> {
    let sel = format!(
        "{JOB_LABEL}={},batch.kubernetes.io/job-completion-index={rank}",
        object_name(id, 63)
    );
    let list = api
        .list(&ListParams::default().labels(&sel))
        .await
        .map_err(|e| super::cluster::why(&e))?;
    // The newest, should the JobSet have made it again.
    Ok(list
        .items
        .into_iter()
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second())))
}

/// The events that say why a pod waits, as k9s and `kubectl describe` show them:
/// kube-scheduler's `FailedScheduling`, Cluster Autoscaler's `NotTriggerScaleUp`, the
/// kubelet's `FailedCreatePodSandBox`, `FailedMount`, `Failed` (an image pull) and
/// `BackOff`.
pub const WAIT_EVENTS: [&str; 6] = [
    "FailedScheduling",
    "NotTriggerScaleUp",
    "FailedCreatePodSandBox",
    "FailedMount",
    "Failed",
    "BackOff",
];

pub use super::view::Waiting;

/// The job pods among `pods` that wait (not running, not ended, or a container
/// waiting), with the latest of `events` about each (at most 2, newest first).
pub fn waiting_pods(pods: &[Pod], events: &[k8s_openapi::api::core::v1::Event]) -> Vec<Waiting> {
    let mut out = vec![];
    for p in pods {
        let (phase, why) = super::exec::pod_phase(p);
        let labels = p.metadata.labels.clone().unwrap_or_default();
        if labels.get(super::ROLE_LABEL).map(String::as_str) != Some("job") {
            continue;
        }
        if matches!(phase.as_str(), "Succeeded" | "Failed") || (phase == "Running" && why.is_none()) {
            continue;
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        let mut about: Vec<&k8s_openapi::api::core::v1::Event> = events
            .iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
            .filter(|e| e.reason.as_deref().is_some_and(|r| WAIT_EVENTS.contains(&r)))
            .collect();
        let when = |e: &k8s_openapi::api::core::v1::Event| {
            e.last_timestamp
                .as_ref()
                .or(e.first_timestamp.as_ref())
                .map(|t| t.0.as_second())
                .unwrap_or(0)
        };
        about.sort_by_key(|e| std::cmp::Reverse(when(e)));
        out.push(Waiting {
            job: labels.get(JOB_LABEL).cloned().unwrap_or_default(),
            rank: labels
                .get("batch.kubernetes.io/job-completion-index")
                .and_then(|i| i.parse().ok()),
            pod: name,
            why,
            events: about
                .iter()
                .take(2)
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.reason.clone().unwrap_or_default(),
                        e.message.clone().unwrap_or_default().trim()
                    )
                })
                .collect(),
        });
    }
    out.sort_by_key(|w| (w.job.clone(), w.rank));
    out
}

/// The waiting ranks of job `id` in `node`'s namespace ([`waiting_pods`]).
pub async fn waiting(clients: &Clients, node: &KubeNode, id: &str) -> Result<Vec<Waiting>, String> {
    let client = clients.get(&node.cluster).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &node.namespace);
    let list = pods
        .list(&ListParams::default().labels(&format!("{JOB_LABEL}={}", object_name(id, 63))))
        .await
        .map_err(|e| super::cluster::why(&e))?;
    let events = wait_events(&client, &node.namespace).await;
    Ok(waiting_pods(&list.items, &events))
}

/// The namespace's Warning events (none when they cannot be read).
pub async fn wait_events(client: &kube::Client, namespace: &str) -> Vec<k8s_openapi::api::core::v1::Event> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    match api.list(&ListParams::default().fields("type=Warning")).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::info!("events: {}", super::cluster::why(&e));
            vec![]
        }
    }
}
