//! The GKE backend: a fleet is nodes of an existing cluster. Apply finds them (node pools
//! or a label selector) and records them; it creates nothing (GKE and its node pools
//! bring nodes up, DWS flex-start pools on demand). Delete removes what flightdeck made
//! in the cluster for the fleet (debug pods, NCCL test pods, JobSets) and forgets it.

use super::view::{self, Snapshot};
use super::{Clients, ClusterRef, KubeNode, DEFAULT_DEBUG_IMAGE, FLEET_LABEL};
use crate::cloud::{Backend, Change, Plan, Progress};
use crate::fleet::{Address, BackendKind, Fleet, NodeTarget};
use crate::ssh::client::BoxFuture;
use crate::store::FleetRecord;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};

pub struct GkeBackend {
    pub clients: Clients,
}

/// The fleet's cluster, namespace and node choice.
pub struct Target {
    pub cluster: ClusterRef,
    pub namespace: String,
    pub selector: Option<String>,
    pub pools: Vec<String>,
    pub debug_image: String,
    pub queue: Option<String>,
}

impl Target {
    pub fn of(fleet: &Fleet) -> Result<Target, String> {
        let g = fleet
            .spec
            .gke
            .as_ref()
            .ok_or_else(|| format!("fleet `{}` has no gke block", fleet.name))?;
        Ok(Target::from_gke(g))
    }

    /// From a fleet file's `gke` block.
    pub fn from_gke(g: &crate::fleet::spec::Gke) -> Target {
        Target {
            cluster: ClusterRef::from_spec(g),
            namespace: g.namespace.clone().unwrap_or_else(|| "default".into()),
            selector: g.selector.clone(),
            pools: g.node_pools.clone().unwrap_or_default(),
            debug_image: g
                .debug_image
                .clone()
                .unwrap_or_else(|| DEFAULT_DEBUG_IMAGE.into()),
            queue: g.queue.clone(),
        }
    }

    /// `nodes` padded to `n` ranks: a job on a DWS flex-start pool that has scaled to
    /// zero has no nodes yet (GKE brings them up once Kueue admits it), so its ranks
    /// past the recorded nodes are the cluster's, on no node yet.
    pub fn pad(&self, fleet: &str, nodes: &[NodeTarget], n: usize) -> Vec<NodeTarget> {
        let mut out: Vec<NodeTarget> = nodes.to_vec();
        for i in out.len()..n {
            out.push(self.target(fleet, i, &format!("{fleet}-rank-{i}"), None, "", None));
        }
        out
    }

    /// For a recorded fleet: what was applied ([`crate::fleet::applied`]), never the
    /// fleet file as it is now (an edit since apply must not change the debug pods'
    /// image, the namespace or the kubeconfig unreviewed); for a record of an older
    /// flightdeck, its nodes' cluster, namespace and debug image.
    pub fn of_record(record: &FleetRecord) -> Result<Target, String> {
        if let Some(f) = crate::fleet::applied::applied(record)? {
            return Target::of(&f);
        }
        let k = record
            .nodes
            .iter()
            .find_map(|n| n.kube().cloned())
            .ok_or_else(|| {
                format!(
                    "fleet `{}` was applied by an older flightdeck and has no nodes to name its cluster; `flightdeck fleet apply` it again",
                    record.name
                )
            })?;
        Ok(Target {
            cluster: k.cluster,
            namespace: k.namespace,
            selector: None,
            pools: vec![],
            debug_image: k.debug_image,
            queue: None,
        })
    }

    /// The label selector the API is asked for.
    pub fn api_selector(&self) -> Option<String> {
        let mut parts = vec![];
        if !self.pools.is_empty() {
            parts.push(format!("{} in ({})", view::POOL_LABEL, self.pools.join(",")));
        }
        if let Some(s) = &self.selector {
            parts.push(s.clone());
        }
        (!parts.is_empty()).then(|| parts.join(","))
    }

    /// The fleet's nodes, in pool then name order; without pools or a selector, the
    /// nodes that offer GPUs.
    pub async fn nodes(&self, clients: &Clients) -> Result<Vec<Node>, String> {
        let client = clients.get(&self.cluster).await?;
        let api: Api<Node> = Api::all(client);
        let mut lp = ListParams::default();
        if let Some(s) = self.api_selector() {
            lp = lp.labels(&s);
        }
        let list = api.list(&lp).await.map_err(|e| {
            format!(
                "{}: listing nodes: {}",
                self.cluster.describe(),
                super::cluster::why(&e)
            )
        })?;
        let mut nodes: Vec<Node> = list
            .items
            .into_iter()
            .filter(|n| self.api_selector().is_some() || view::gpus_allocatable(n) > 0)
            .collect();
        let key = |n: &Node| {
            let l = n.metadata.labels.clone().unwrap_or_default();
            (
                l.get(view::POOL_LABEL).cloned().unwrap_or_default(),
                n.metadata.name.clone().unwrap_or_default(),
            )
        };
        nodes.sort_by_key(key);
        Ok(nodes)
    }

    pub fn targets(&self, fleet: &str, nodes: &[Node]) -> Vec<NodeTarget> {
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = n.metadata.name.clone().unwrap_or_default();
                self.target(fleet, i, &name, view::internal_ip(n), &name, None)
            })
            .collect()
    }

    /// Node `index` of the fleet: Kubernetes node `node` (empty: none yet), reached in
    /// its debug pod, or in `pod` (name, container) when given.
    fn target(
        &self,
        fleet: &str,
        index: usize,
        name: &str,
        ip: Option<String>,
        node: &str,
        pod: Option<(String, Option<String>)>,
    ) -> NodeTarget {
        let (pod, container) = pod.unzip();
        NodeTarget {
            index,
            name: name.to_string(),
            address: Address::Kube {
                host: ip.clone().unwrap_or_else(|| name.to_string()),
                node: KubeNode {
                    cluster: self.cluster.clone(),
                    fleet: fleet.to_string(),
                    node: node.to_string(),
                    namespace: self.namespace.clone(),
                    debug_image: self.debug_image.clone(),
                    pod,
                    container: container.flatten(),
                },
            },
            internal_ip: ip,
        }
    }

    /// The running pods `selector` picks in recorded fleet `record`'s namespace, as
    /// nodes ([`Target::pods`]); a fleet of another family has none to pick.
    pub async fn pods_of_record(
        clients: &Clients,
        record: &FleetRecord,
        selector: &str,
    ) -> Result<(Target, Vec<NodeTarget>), String> {
        if record.backend != BackendKind::Gke {
            return Err(format!(
                "`:open {name} SELECTOR` picks pods: fleet `{name}` is {}",
                crate::words::a(&format!("{} fleet", record.backend)),
                name = record.name
            ));
        }
        let target = Target::of_record(record)?;
        let pods = target.pods(clients, &record.name, selector).await?;
        Ok((target, pods))
    }

    /// The running pods `selector` picks in the fleet's namespace, as nodes reached in
    /// each pod's first container (panes in a job's pods).
    pub async fn pods(
        &self,
        clients: &Clients,
        fleet: &str,
        selector: &str,
    ) -> Result<Vec<NodeTarget>, String> {
        super::selector::parse(selector).map_err(|e| format!("selector: {e}"))?;
        let client = clients.get(&self.cluster).await?;
        let api: Api<Pod> = Api::namespaced(client, &self.namespace);
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| super::cluster::why(&e))?;
        let mut pods: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        pods.sort_by_key(|p| p.metadata.name.clone());
        Ok(pods
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let name = p.metadata.name.clone().unwrap_or_default();
                let spec = p.spec.as_ref();
                let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone());
                let node = spec.and_then(|s| s.node_name.clone()).unwrap_or_default();
                let container = spec.and_then(|s| s.containers.first()).map(|c| c.name.clone());
                self.target(fleet, i, &name, ip, &node, Some((name.clone(), container)))
            })
            .collect())
    }

    /// Whether the fleet takes in a pool the GKE API lists: one it names; without named
    /// pools and a selector, a GPU pool (as the nodes that offer GPUs are taken).
    pub fn wants_pool(&self, p: &view::ApiPool) -> bool {
        if !self.pools.is_empty() {
            return self.pools.contains(&p.name);
        }
        self.selector.is_none() && p.accelerator().is_some_and(|(n, _)| n > 0)
    }

    /// The GKE API's pools added to `pools` (those at zero nodes too) where the fleet
    /// names its cluster as the GKE API does; a failure is logged, the nodes' pools stay.
    pub async fn add_api_pools(&self, pools: &mut Vec<view::PoolRow>) {
        match self.cluster.node_pools().await {
            Some(Ok(api)) => view::with_api_pools(pools, &api, |p| self.wants_pool(p)),
            Some(Err(e)) => tracing::info!("node pools from the GKE API: {e}"),
            None => {}
        }
    }

    /// Pools, nodes and Kueue workloads now.
    pub async fn snapshot(&self, clients: &Clients, fleet: &str, now: u64) -> Result<Snapshot, String> {
        let nodes = self.nodes(clients).await?;
        let client = clients.get(&self.cluster).await?;
        let pods: Api<Pod> = Api::all(client.clone());
        let all = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing pods: {}", super::cluster::why(&e)))?;
        let rows = view::node_rows(&nodes, &all.items);
        let mut pools = view::pool_rows(&nodes, &rows);
        self.add_api_pools(&mut pools).await;
        let (workloads, kueue) = match super::jobs::workloads(&client, &self.namespace).await {
            Ok(w) => (w.iter().map(|w| view::workload_row(w, now)).collect(), None),
            Err(e) => (vec![], Some(e)),
        };
        let queues = match kueue {
            None => super::jobs::local_queues(&client, &self.namespace)
                .await
                .map(|q| q.iter().map(view::queue_row).collect())
                .unwrap_or_default(),
            Some(_) => vec![],
        };
        // The fleet's job pods that wait, and why (their events: FailedScheduling,
        // NotTriggerScaleUp, FailedCreatePodSandBox, ...).
        let jobs: Vec<Pod> = all
            .items
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(self.namespace.as_str()))
            .filter(|p| {
                let l = p.metadata.labels.as_ref();
                l.and_then(|l| l.get(super::ROLE_LABEL)).map(String::as_str) == Some("job")
                    && l.and_then(|l| l.get(FLEET_LABEL)).map(String::as_str) == Some(fleet)
            })
            .collect();
        let waiting = if jobs.is_empty() {
            vec![]
        } else {
            super::jobs::waiting_pods(&jobs, &super::jobs::wait_events(&client, &self.namespace).await)
        };
        // GKE's GPUDirect installers in kube-system decide the plugin and RxDM versions.
        let installed = super::nccl::kube_system_daemonsets(client.clone())
            .await
            .unwrap_or_default();
        Ok(Snapshot {
            cluster: self.cluster.describe(),
            pools,
            plugins: view::plugin_versions(&installed),
            waiting,
            nodes: rows,
            workloads,
            queues,
            kueue,
        })
    }
}

impl Backend for GkeBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Gke
    }

    fn plan(&self, fleet: &Fleet, recorded: Option<&FleetRecord>) -> Result<Plan, String> {
        let t = Target::of(fleet)?;
        let which = match t.api_selector() {
            Some(s) => format!("nodes matching `{s}`"),
            None => "the nodes that offer GPUs".into(),
        };
        // Which credentials apply will use, and what program they run on this machine.
        let creds = match t.cluster.kubeconfig_file() {
            Ok(Some(k)) => {
                let opt = super::cluster::operator_opt_in();
                k.permit(&opt)?;
                k.summary(&opt)
            }
            Ok(None) => "credentials: Application Default Credentials as the bearer token (no kubeconfig, nothing is run)".into(),
            Err(e) if e.missing => format!("{} (apply needs it)", e.message),
            Err(e) => return Err(e.message),
        };
        Ok(Plan {
            changes: vec![Change {
                action: match recorded {
                    None => "create",
                    // The file differs from what was applied (listed in the notes).
                    Some(r)
                        if r.applied
                            .as_deref()
                            .is_none_or(|a| !crate::fleet::form::changes(a, &fleet.applied).is_empty()) =>
                    {
                        "update"
                    }
                    Some(_) => "keep",
                },
                kind: "gke-fleet",
                name: t.cluster.describe(),
                place: format!("namespace {}", t.namespace),
                cloud: None,
            }],
            notes: vec![
                creds,
                format!("apply finds {which} and records them; it creates no nodes (GKE's node pools do)"),
                format!(
                    "panes, exec and telemetry run in a debug pod per node ({}), created on first use",
                    t.debug_image
                ),
            ],
            ..Plan::new(fleet.name.clone(), crate::fleet::BackendKind::Gke)
        })
    }

    fn apply<'a>(
        &'a self,
        fleet: &'a Fleet,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<Vec<NodeTarget>, String>> {
        Box::pin(async move {
            let t = Target::of(fleet)?;
            progress(format!("{}: finding the fleet's nodes", t.cluster.describe()));
            let nodes = t.nodes(&self.clients).await?;
            if let Some(n) = fleet.spec.nodes {
                let count = nodes.len() as u64;
                if n.min.is_some_and(|m| count < m) || n.max.is_some_and(|m| count > m) {
                    return Err(format!(
                        "{} nodes match, the fleet file asks for {n} (a DWS flex-start pool has nodes only while a workload holds them: leave `nodes` out for one)",
                        count
                    ));
                }
            }
            let rows = view::node_rows(&nodes, &[]);
            let mut pools = view::pool_rows(&nodes, &rows);
            t.add_api_pools(&mut pools).await;
            for r in pools {
                progress(format!(
                    "pool {}: {} ({}), {}, {} ready, {} GPUs{}",
                    r.name,
                    r.machine_type,
                    r.provisioning,
                    crate::words::plural(r.nodes, "node"),
                    r.ready,
                    r.gpus,
                    match (&r.autoscaling, &r.accelerator) {
                        (Some(a), Some(acc)) if r.nodes == 0 => format!(" (autoscaling {a}, {acc} a node)"),
                        (Some(a), _) => format!(" (autoscaling {a})"),
                        _ => String::new(),
                    }
                ));
            }
            if nodes.is_empty() {
                progress("no nodes now: a flex-start pool scales up when a job is admitted; `fleet apply` again records them".into());
            }
            Ok(t.targets(&fleet.name, &nodes))
        })
    }

    fn delete<'a>(
        &'a self,
        record: &'a FleetRecord,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let t = Target::of_record(record)?;
            let (gone, mut others) =
                super::exec::delete_pods(&self.clients, &t.cluster, &t.namespace, &record.name, None).await?;
            let (sets, other_sets) =
                super::jobs::delete_fleet_jobsets(&self.clients, &t.cluster, &t.namespace, &record.name)
                    .await?;
            others.extend(other_sets);
            let owner = self.clients.owner();
            progress(format!(
                "{}: removed {} and {} of fleet `{}` (labels {FLEET_LABEL}, {}={}, {}={})",
                t.cluster.describe(),
                crate::words::plural(gone, "pod"),
                crate::words::plural(sets, "JobSet"),
                record.name,
                super::OWNER_LABEL,
                owner.user,
                super::STATE_LABEL,
                owner.state
            ));
            for o in others {
                progress(format!("{o}; not touched"));
            }
            Ok(())
        })
    }
}

/// Something flightdeck made in a cluster that `fleet gc` removes, or (`keep`) one of
/// another owner's, listed and not touched.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Orphan {
    /// `pod` or `jobset`.
    pub kind: &'static str,
    pub name: String,
    pub namespace: String,
    pub cluster: String,
    pub fleet: String,
    /// Why it goes: its fleet is gone, an idle debug pod, a finished run's test pod; or
    /// whose it is when kept.
    pub why: String,
    /// Another owner's (or another state directory's): listed, never deleted.
    pub keep: bool,
    #[serde(skip)]
    cluster_ref: Option<ClusterRef>,
}

/// What `fleet gc` finds in the clusters of `fleets` (the recorded GKE fleets), among
/// the objects this owner made ([`Clients::owner`]): pods and JobSets whose fleet is no
/// longer recorded, debug pods unused for [`super::exec::debug_idle`] (never one a
/// command or pane runs in), and test pods of runs that are not running. Objects of
/// other owners are listed with `keep` and never removed.
pub async fn orphans(
    clients: &Clients,
    fleets: &[FleetRecord],
    running_runs: &[String],
) -> Result<Vec<Orphan>, String> {
    use std::collections::BTreeSet;
    let known: BTreeSet<&str> = fleets.iter().map(|f| f.name.as_str()).collect();
    let owner = clients.owner();
    let idle = super::exec::debug_idle().as_secs();
    let now = crate::store::now_unix();
    let mut places: Vec<(ClusterRef, String)> = vec![];
    for f in fleets
        .iter()
        .filter(|f| f.backend == crate::fleet::BackendKind::Gke)
    {
        if let Ok(t) = Target::of_record(f) {
            if !places.contains(&(t.cluster.clone(), t.namespace.clone())) {
                places.push((t.cluster, t.namespace));
            }
        }
    }
    let running: BTreeSet<String> = running_runs.iter().map(|r| super::object_name(r, 63)).collect();
    let mut out = vec![];
    for (cluster, ns) in places {
        let client = clients.get(&cluster).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let sel = format!("{}={}", super::MANAGED_BY.0, super::MANAGED_BY.1);
        let list = pods
            .list(&ListParams::default().labels(&sel))
            .await
            .map_err(|e| format!("{}: {}", cluster.describe(), super::cluster::why(&e)))?;
        let found = |kind, name: Option<String>, fleet: String, why: String, keep: bool| Orphan {
            kind,
            name: name.unwrap_or_default(),
            namespace: ns.clone(),
            cluster: cluster.describe(),
            fleet,
            why,
            keep,
            cluster_ref: Some(cluster.clone()),
        };
        for p in list.items {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            let fleet = labels.get(FLEET_LABEL).cloned().unwrap_or_default();
            if let Some(whose) = owner.other(&labels) {
                out.push(found(
                    "pod",
                    p.metadata.name,
                    fleet,
                    format!("{whose}; not touched"),
                    true,
                ));
                continue;
            }
            let role = labels.get(super::ROLE_LABEL).map(String::as_str).unwrap_or("");
            let run = labels.get(super::nccl::RUN_LABEL).cloned().unwrap_or_default();
            let why = if !known.contains(fleet.as_str()) {
                Some("its fleet is not in the state".to_string())
            } else if role == "debug" {
                match super::exec::debug_use(&pods, &p, now).await {
                    super::exec::DebugUse::Idle(s) if s >= idle => Some(format!(
                        "a debug pod unused for {} (made again when a pane, exec or sampler needs it)",
                        view::age(s)
                    )),
                    _ => None,
                }
            } else if role == "nccl" && !running.contains(&run) {
                Some("a test pod of a run that is not running".into())
            } else {
                None
            };
            if let Some(why) = why {
                out.push(found("pod", p.metadata.name, fleet, why, false));
            }
        }
        let sets: Api<kube::api::DynamicObject> =
            Api::namespaced_with(client, &ns, &super::jobs::jobset_resource());
        if let Ok(list) = sets.list(&ListParams::default().labels(&sel)).await {
            for j in list.items {
                let labels = j.metadata.labels.clone().unwrap_or_default();
                let fleet = labels.get(FLEET_LABEL).cloned().unwrap_or_default();
                if let Some(whose) = owner.other(&labels) {
                    out.push(found(
                        "jobset",
                        j.metadata.name,
                        fleet,
                        format!("{whose}; not touched"),
                        true,
                    ));
                } else if !known.contains(fleet.as_str()) {
                    out.push(found(
                        "jobset",
                        j.metadata.name,
                        fleet,
                        "its fleet is not in the state".into(),
                        false,
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// Delete what [`orphans`] found.
pub async fn delete_orphans(
    clients: &Clients,
    orphans: &[Orphan],
    progress: Progress<'_>,
) -> Result<(), String> {
    let mut failed = vec![];
    for o in orphans.iter().filter(|o| !o.keep) {
        let Some(cluster) = &o.cluster_ref else { continue };
        let client = clients.get(cluster).await?;
        let r = match o.kind {
            "pod" => Api::<Pod>::namespaced(client, &o.namespace)
                .delete(&o.name, &kube::api::DeleteParams::default())
                .await
                .map(|_| ()),
            _ => Api::<kube::api::DynamicObject>::namespaced_with(
                client,
                &o.namespace,
                &super::jobs::jobset_resource(),
            )
            .delete(&o.name, &kube::api::DeleteParams::foreground())
            .await
            .map(|_| ()),
        };
        match r {
            Ok(()) => progress(format!("deleted {} {}", o.kind, o.name)),
            Err(e) if super::cluster::not_found(&e) => {}
            Err(e) => failed.push(format!("{} {}: {}", o.kind, o.name, super::cluster::why(&e))),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}
