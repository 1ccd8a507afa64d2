//! What a GKE fleet looks like to its operator, worked out from the API's objects
//! (plain functions over plain data): node pools with machine type, provisioning, GPUs
//! allocatable and in use; nodes with their conditions and pods; Kueue's workloads with
//! their admission state and age ("waiting for DWS capacity, 14m").

use super::GPU_RESOURCE;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::BTreeMap;

pub const POOL_LABEL: &str = "cloud.google.com/gke-nodepool";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const ACCELERATOR_LABEL: &str = "cloud.google.com/gke-accelerator";

/// How a node's VM is provisioned, from GKE's node labels.
pub fn provisioning(labels: &BTreeMap<String, String>) -> String {
    let is = |k: &str| labels.get(k).is_some_and(|v| v == "true");
    if is("cloud.google.com/gke-flex-start") {
        if is("cloud.google.com/gke-queued") {
            "DWS flex-start (queued)".into()
        } else {
            "DWS flex-start".into()
        }
    } else if is("cloud.google.com/gke-spot") {
        "Spot".into()
    } else if is("cloud.google.com/gke-preemptible") {
        "Preemptible".into()
    } else if let Some(r) = labels.get("cloud.google.com/reservation-name") {
        format!("reservation {r}")
    } else {
        "on-demand".into()
    }
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> u64 {
    q.and_then(|q| q.0.parse().ok()).unwrap_or(0)
}

/// GPUs the node offers to pods.
pub fn gpus_allocatable(n: &Node) -> u64 {
    quantity(
        n.status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(GPU_RESOURCE)),
    )
}

/// GPUs a pod holds (its containers' limits, else requests), while it is not done.
pub fn pod_gpus(p: &Pod) -> u64 {
    let done = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
    if done {
        return 0;
    }
    p.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| {
                    let r = c.resources.as_ref();
                    let lim = r
                        .and_then(|r| r.limits.as_ref())
                        .and_then(|l| l.get(GPU_RESOURCE));
                    let req = r
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|l| l.get(GPU_RESOURCE));
                    quantity(lim.or(req))
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The conditions worth an operator's eye: `Ready` when ready, else `NotReady (reason)`;
/// pressure conditions that are True; cordoned.
pub fn node_conditions(n: &Node) -> (bool, Vec<String>) {
    let mut out = vec![];
    let mut ready = false;
    for c in n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        match (c.type_.as_str(), c.status.as_str()) {
            ("Ready", "True") => ready = true,
            ("Ready", _) => out.push(format!(
                "NotReady{}",
                c.reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
            )),
            (t, "True") if t.ends_with("Pressure") || t == "NetworkUnavailable" => out.push(t.to_string()),
            _ => {}
        }
    }
    if n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        out.push("cordoned".into());
    }
    (ready, out)
}

/// A node as the Nodes view shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NodeRow {
    pub name: String,
    pub pool: String,
    pub machine_type: String,
    pub internal_ip: Option<String>,
    pub ready: bool,
    pub conditions: Vec<String>,
    pub gpus: u64,
    pub gpus_used: u64,
    pub pods: usize,
}

/// A node pool as the Fleets view shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PoolRow {
    pub name: String,
    pub machine_type: String,
    pub accelerator: Option<String>,
    pub provisioning: String,
    pub nodes: usize,
    pub ready: usize,
    pub gpus: u64,
    pub gpus_used: u64,
    /// The pool's autoscaling from the GKE API ("0-4", "fixed"), when it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<String>,
}

/// The pool table's columns, in the CLI and the cockpit.
pub const POOL_HEADER: [&str; 6] = [
    "POOL",
    "MACHINE",
    "ACCELERATOR",
    "PROVISIONING",
    "READY",
    "GPUS USED",
];

/// `fleet status`'s pool columns: [`POOL_HEADER`] and the pool's autoscaling.
pub const POOL_STATUS_HEADER: [&str; 7] = [
    "POOL",
    "MACHINE",
    "ACCELERATOR",
    "PROVISIONING",
    "READY",
    "GPUS USED",
    "AUTOSCALING",
];

impl PoolRow {
    /// The row's cells under [`POOL_HEADER`].
    pub fn cells(&self) -> [String; 6] {
        [
            self.name.clone(),
            self.machine_type.clone(),
            self.accelerator.clone().unwrap_or_default(),
            self.provisioning.clone(),
            format!("{}/{}", self.ready, self.nodes),
            format!("{}/{}", self.gpus_used, self.gpus),
        ]
    }

    /// The row's cells under [`POOL_STATUS_HEADER`].
    pub fn status_cells(&self) -> Vec<String> {
        let mut c = self.cells().to_vec();
        c.push(self.autoscaling.clone().unwrap_or_else(|| "-".into()));
        c
    }
}

/// A node pool as the GKE API gives it (`projects.locations.clusters.nodePools.list`,
/// container/v1 `NodePool`): only the fields shown.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiPool {
    pub name: String,
    pub config: ApiPoolConfig,
    pub autoscaling: Option<ApiAutoscaling>,
    pub queued_provisioning: Option<ApiEnabled>,
}

/// `NodeConfig`'s fields a pool is shown by.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiPoolConfig {
    pub machine_type: Option<String>,
    pub accelerators: Vec<ApiAccelerator>,
    pub spot: bool,
    pub preemptible: bool,
    pub flex_start: bool,
    pub reservation_affinity: Option<ApiReservation>,
}

/// `AcceleratorConfig` (`acceleratorCount` is an int64, a JSON string).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiAccelerator {
    pub accelerator_count: serde_json::Value,
    pub accelerator_type: String,
}

/// `ReservationAffinity`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiReservation {
    pub consume_reservation_type: String,
    pub values: Vec<String>,
}

/// `NodePoolAutoscaling` (per-zone `min/maxNodeCount`, or cluster-wide `total*`).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiAutoscaling {
    pub enabled: bool,
    pub min_node_count: i64,
    pub max_node_count: i64,
    pub total_min_node_count: i64,
    pub total_max_node_count: i64,
}

/// `QueuedProvisioning`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct ApiEnabled {
    pub enabled: bool,
}

impl ApiPool {
    /// GPUs per node and their type.
    pub fn accelerator(&self) -> Option<(u64, String)> {
        let a = self.config.accelerators.first()?;
        let n = match &a.accelerator_count {
            serde_json::Value::String(s) => s.parse().ok()?,
            v => v.as_u64()?,
        };
        Some((n, a.accelerator_type.clone()))
    }

    /// How its VMs are provisioned, in [`provisioning`]'s words.
    pub fn provisioning(&self) -> String {
        let queued = self.queued_provisioning.as_ref().is_some_and(|q| q.enabled);
        if self.config.flex_start {
            if queued {
                "DWS flex-start (queued)".into()
            } else {
                "DWS flex-start".into()
            }
        } else if queued {
            "DWS queued".into()
        } else if self.config.spot {
            "Spot".into()
        } else if self.config.preemptible {
            "Preemptible".into()
        } else if let Some(r) = self
            .config
            .reservation_affinity
            .as_ref()
            .filter(|r| r.consume_reservation_type == "SPECIFIC_RESERVATION")
        {
            format!("reservation {}", r.values.join(","))
        } else {
            "on-demand".into()
        }
    }

    /// "0-4" (cluster-wide bounds, else per zone), or "fixed".
    pub fn autoscaling(&self) -> String {
        match &self.autoscaling {
            Some(a) if a.enabled && (a.total_min_node_count > 0 || a.total_max_node_count > 0) => {
                format!("{}-{}", a.total_min_node_count, a.total_max_node_count)
            }
            Some(a) if a.enabled => format!("{}-{} per zone", a.min_node_count, a.max_node_count),
            _ => "fixed".into(),
        }
    }
}

/// Add the GKE API's pools to `rows` (built from nodes): each row gets its autoscaling,
/// and a pool `want`ed that has no node now (scaled to zero) gets a row of its own with
/// its machine type, GPUs per node and provisioning.
pub fn with_api_pools(rows: &mut Vec<PoolRow>, api: &[ApiPool], want: impl Fn(&ApiPool) -> bool) {
    for p in api {
        if let Some(r) = rows.iter_mut().find(|r| r.name == p.name) {
            r.autoscaling = Some(p.autoscaling());
            continue;
        }
        if !want(p) {
            continue;
        }
        rows.push(PoolRow {
            name: p.name.clone(),
            machine_type: p.config.machine_type.clone().unwrap_or_default(),
            accelerator: p.accelerator().map(|(n, t)| format!("{n}x {t}")),
            provisioning: p.provisioning(),
            nodes: 0,
            ready: 0,
            gpus: 0,
            gpus_used: 0,
            autoscaling: Some(p.autoscaling()),
        });
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name));
}

pub fn internal_ip(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

fn labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

/// Rows for `nodes` with the pods on them.
pub fn node_rows(nodes: &[Node], pods: &[Pod]) -> Vec<NodeRow> {
    let mut per_node: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for p in pods {
        let running = !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            let e = per_node.entry(n).or_default();
            e.0 += running as usize;
            e.1 += pod_gpus(p);
        }
    }
    nodes
        .iter()
        .map(|n| {
            let l = labels(n);
            let name = n.metadata.name.clone().unwrap_or_default();
            let (ready, conditions) = node_conditions(n);
            let (pods, used) = per_node.get(name.as_str()).copied().unwrap_or_default();
            NodeRow {
                pool: l.get(POOL_LABEL).cloned().unwrap_or_default(),
                machine_type: l.get(INSTANCE_TYPE_LABEL).cloned().unwrap_or_default(),
                internal_ip: internal_ip(n),
                ready,
                conditions,
                gpus: gpus_allocatable(n),
                gpus_used: used,
                pods,
                name,
            }
        })
        .collect()
}

/// Node pools of `nodes`, in name order.
pub fn pool_rows(nodes: &[Node], rows: &[NodeRow]) -> Vec<PoolRow> {
    let mut pools: BTreeMap<String, PoolRow> = BTreeMap::new();
    for (n, r) in nodes.iter().zip(rows) {
        let l = labels(n);
        let p = pools.entry(r.pool.clone()).or_insert_with(|| PoolRow {
            name: r.pool.clone(),
            machine_type: r.machine_type.clone(),
            accelerator: l.get(ACCELERATOR_LABEL).cloned(),
            provisioning: provisioning(&l),
            nodes: 0,
            ready: 0,
            gpus: 0,
            gpus_used: 0,
            autoscaling: None,
        });
        p.nodes += 1;
        p.ready += r.ready as usize;
        p.gpus += r.gpus;
        p.gpus_used += r.gpus_used;
    }
    pools.into_values().collect()
}

/// A Kueue workload as the Fleets and Jobs views show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkloadRow {
    pub name: String,
    pub namespace: String,
    pub queue: String,
    /// The JobSet or Job it admits (`JobSet/train-1`).
    pub owner: Option<String>,
    /// pending, admitted, finished, evicted.
    pub state: String,
    /// Why it waits or what happened, in the operator's words.
    pub detail: String,
    /// Seconds in this state (since the condition that set it changed).
    pub age_s: Option<u64>,
}

fn cond<'a>(w: &'a serde_json::Value, t: &str) -> Option<&'a serde_json::Value> {
    w["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

fn is_true(c: Option<&serde_json::Value>) -> bool {
    c.is_some_and(|c| c["status"] == "True")
}

/// Unix seconds of an RFC 3339 UTC time (`2026-11-24T22:10:48Z`, fractions allowed).
pub fn parse_time(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (n(0..4)?, n(5..7)?, n(8..10)?, n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + mi * 60 + se).ok()
}

/// A workload's row at unix time `now`.
pub fn workload_row(w: &serde_json::Value, now: u64) -> WorkloadRow {
    let since = |c: Option<&serde_json::Value>| {
        c.and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(parse_time)
            .map(|t| now.saturating_sub(t))
    };
    let owner = w["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|o| o.first())
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or("?"),
                o["name"].as_str().unwrap_or("?")
            )
        });
    let finished = cond(w, "Finished");
    let evicted = cond(w, "Evicted");
    let admitted = cond(w, "Admitted");
    let reserved = cond(w, "QuotaReserved");
    let checks: Vec<&serde_json::Value> = w["status"]["admissionChecks"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let msg = |c: Option<&serde_json::Value>| c.and_then(|c| c["message"].as_str()).unwrap_or("").to_string();
    let (state, detail, age) = if is_true(finished) {
        ("finished", msg(finished), since(finished))
    } else if let Some(c) = checks.iter().find(|c| c["state"] == "Rejected") {
        // Kueue evicts and deactivates a workload whose check says Rejected (the
        // provisioning check: its ProvisioningRequest failed past the retries): it will
        // not be admitted on its own.
        let name = c["name"].as_str().unwrap_or("");
        let m = c["message"].as_str().unwrap_or("");
        (
            "rejected",
            format!("rejected by admission check {name}: {m}; it will not start: stop the job and submit it again, or use another queue"),
            since(Some(c)),
        )
    } else if let Some(c) = checks.iter().find(|c| c["state"] == "Retry") {
        // Retry: the ProvisioningRequest failed or its booking expired (kueue
        // pkg/controller/admissionchecks/provisioning/controller.go); Kueue releases the
        // quota and asks again after the check's backoff.
        let name = c["name"].as_str().unwrap_or("");
        let m = c["message"].as_str().unwrap_or("");
        (
            "pending",
            format!(
                "DWS asking again: the last request failed or its booking expired (admission check {name}: {})",
                if m.is_empty() { "Retry" } else { m }
            ),
            since(Some(c)),
        )
    } else if is_true(evicted) && !is_true(admitted) {
        let why = evicted.and_then(|c| c["reason"].as_str()).unwrap_or("");
        ("evicted", format!("{why}: {}", msg(evicted)), since(evicted))
    } else if is_true(admitted) {
        let cq = w["status"]["admission"]["clusterQueue"].as_str().unwrap_or("");
        ("admitted", format!("in ClusterQueue {cq}"), since(admitted))
    } else if let Some(c) = checks
        .iter()
        .find(|c| c["state"] != "Ready")
        .filter(|_| is_true(reserved))
    {
        // Quota is reserved; a check (DWS's ProvisioningRequest) holds it back.
        let name = c["name"].as_str().unwrap_or("");
        let m = c["message"].as_str().unwrap_or("");
        (
            "pending",
            format!(
                "waiting for DWS capacity (admission check {name}: {})",
                if m.is_empty() { "Pending" } else { m }
            ),
            since(Some(c)),
        )
    } else if let Some(c) = checks.iter().find(|c| c["state"] == "Pending") {
        let name = c["name"].as_str().unwrap_or("");
        let m = c["message"].as_str().unwrap_or("");
        (
            "pending",
            format!(
                "waiting for quota, then DWS capacity (check {name}: {m}); {}",
                msg(reserved)
            ),
            since(reserved),
        )
    } else {
        let reason = reserved.and_then(|c| c["reason"].as_str()).unwrap_or("Pending");
        ("pending", format!("{reason}: {}", msg(reserved)), since(reserved))
    };
    WorkloadRow {
        name: w["metadata"]["name"].as_str().unwrap_or("").to_string(),
        namespace: w["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
        queue: w["spec"]["queueName"].as_str().unwrap_or("").to_string(),
        owner,
        state: state.to_string(),
        detail: detail.trim_end_matches(": ").to_string(),
        age_s: age,
    }
}

/// `14m`, `2h05m`, `3d04h`, `45s`.
pub fn age(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A Kueue LocalQueue of the fleet's namespace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueRow {
    pub name: String,
    pub cluster_queue: String,
    pub pending: u64,
    pub admitted: u64,
}

/// A LocalQueue's row from its API object.
pub fn queue_row(q: &serde_json::Value) -> QueueRow {
    QueueRow {
        name: q["metadata"]["name"].as_str().unwrap_or("").to_string(),
        cluster_queue: q["spec"]["clusterQueue"].as_str().unwrap_or("").to_string(),
        pending: q["status"]["pendingWorkloads"].as_u64().unwrap_or(0),
        admitted: q["status"]["admittedWorkloads"].as_u64().unwrap_or(0),
    }
}

/// GKE's GPUDirect installer DaemonSets in kube-system, their flavour, and the versions
/// of Google's current manifests (tests/fixtures/reference/container-engine-accelerators:
/// gpudirect-tcpxo/nccl-test-latest.yaml RxDM v1.0.21 with plugin v1.0.15, as the
/// nccl-plugin-gpudirect-tcpxo README pairs them; gpudirect-tcpx/nccl-test-latest.yaml
/// RxDM v2.0.12 with plugin v3.1.9; gpudirect-rdma/nccl-test.yaml gIB v1.1.1).
pub const INSTALLERS: [(&str, &str, &str, Option<&str>); 3] = [
    ("nccl-tcpxo-installer", "tcpxo", "v1.0.15", Some("v1.0.21")),
    ("nccl-rdma-installer", "rdma", "v1.1.1", None),
    ("nccl-tcpx-installer", "tcpx", "v3.1.9", Some("v2.0.12")),
];

/// The GPUDirect plugin a cluster runs (its installer DaemonSet's image tag), or the
/// manifests' current version when no installer is there.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PluginVersion {
    pub flavour: String,
    /// The installer DaemonSet, when the cluster has it.
    pub installer: Option<String>,
    /// The plugin image's tag.
    pub plugin: String,
    /// The RxDM daemon's tag that goes with it (TCPX/TCPXO), when known: the installer
    /// decides it (the TCPXO README couples the two).
    pub rxdm: Option<String>,
}

impl PluginVersion {
    pub fn line(&self) -> String {
        let rxdm = match (&self.rxdm, self.flavour.as_str()) {
            (Some(r), _) => format!(", RxDM {r}"),
            (None, "tcpx" | "tcpxo") => {
                ", RxDM: the one the installer's version pairs with (not known here)".into()
            }
            _ => String::new(),
        };
        match &self.installer {
            Some(i) => format!(
                "{}: plugin {}{rxdm} (DaemonSet kube-system/{i})",
                self.flavour, self.plugin
            ),
            None => format!(
                "{}: plugin {}{rxdm} (the manifests' current; no installer DaemonSet)",
                self.flavour, self.plugin
            ),
        }
    }
}

/// The plugin image an installer DaemonSet runs (its `nccl-plugin` container, an init
/// container in Google's installers).
pub fn installer_plugin_image(ds: &serde_json::Value) -> Option<&str> {
    let spec = &ds["spec"]["template"]["spec"];
    spec["initContainers"]
        .as_array()
        .into_iter()
        .chain(spec["containers"].as_array())
        .flatten()
        .filter_map(|c| c["image"].as_str())
        .find(|i| i.contains("nccl-plugin"))
}

/// The plugin versions of the installer DaemonSets among `daemonsets` (apps/v1 objects
/// of kube-system): each one's first image tag, with the RxDM of the manifests' pair
/// when the tag is theirs. Without any installer: the manifests' current versions.
pub fn plugin_versions(daemonsets: &[serde_json::Value]) -> Vec<PluginVersion> {
    let mut out = vec![];
    for (name, flavour, plugin, rxdm) in INSTALLERS {
        let Some(ds) = daemonsets.iter().find(|d| d["metadata"]["name"] == name) else {
            continue;
        };
        let image = installer_plugin_image(ds).unwrap_or("");
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("").to_string();
        out.push(PluginVersion {
            flavour: flavour.into(),
            installer: Some(name.into()),
            rxdm: if tag == plugin {
                rxdm.map(String::from)
            } else {
                None
            },
            plugin: if tag.is_empty() { "unknown".into() } else { tag },
        });
    }
    if out.is_empty() {
        out = INSTALLERS
            .iter()
            .map(|(_, flavour, plugin, rxdm)| PluginVersion {
                flavour: flavour.to_string(),
                installer: None,
                plugin: plugin.to_string(),
                rxdm: rxdm.map(String::from),
            })
            .collect();
    }
    out
}

/// Everything the cockpit and `fleet status` show of a GKE fleet at one time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Snapshot {
    pub cluster: String,
    pub pools: Vec<PoolRow>,
    pub nodes: Vec<NodeRow>,
    pub workloads: Vec<WorkloadRow>,
    /// Kueue's LocalQueues in the namespace.
    #[serde(default)]
    pub queues: Vec<QueueRow>,
    /// The GPUDirect plugin versions: the cluster's installers', else the manifests'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginVersion>,
    /// Job ranks whose pods wait, with why and the latest events about them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Waiting>,
    /// Why Kueue's workloads could not be read (Kueue not installed), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kueue: Option<String>,
}

/// A job rank whose pod waits: why (its container's waiting reason, else why it is not
/// scheduled) and the latest events about it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Waiting {
    pub job: String,
    pub rank: Option<usize>,
    pub pod: String,
    pub why: Option<String>,
    pub events: Vec<String>,
}

impl Waiting {
    /// One line: "rank 1 (pod P) waits: WHY; FailedScheduling: MESSAGE".
    pub fn line(&self) -> String {
        let mut s = match self.rank {
            Some(r) => format!("rank {r} (pod {}) waits", self.pod),
            None => format!("pod {} waits", self.pod),
        };
        if let Some(w) = &self.why {
            s.push_str(&format!(": {w}"));
        }
        for e in &self.events {
            s.push_str(&format!("; {e}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, pool: &str, extra: &[(&str, &str)], gpus: u32, ready: bool) -> Node {
        let mut labels = serde_json::json!({
            POOL_LABEL: pool, INSTANCE_TYPE_LABEL: "a3-ultragpu-8g", ACCELERATOR_LABEL: "nvidia-h200-141gb"
        });
        for (k, v) in extra {
            labels[*k] = serde_json::json!(v);
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "status": {
                "allocatable": {GPU_RESOURCE: gpus.to_string()},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}, "reason": "KubeletNotReady"}]
            }
        }))
        .unwrap()
    }

    fn pod(node: &str, gpus: u32, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {GPU_RESOURCE: gpus.to_string()}}}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    #[test]
    fn pools_sum_their_nodes_and_name_provisioning() {
        let nodes = vec![
            node(
                "n1",
                "flex",
                &[("cloud.google.com/gke-flex-start", "true")],
                8,
                true,
            ),
            node(
                "n2",
                "flex",
                &[("cloud.google.com/gke-flex-start", "true")],
                8,
                false,
            ),
            node("n3", "spot", &[("cloud.google.com/gke-spot", "true")], 8, true),
            node(
                "n4",
                "res",
                &[("cloud.google.com/reservation-name", "r1")],
                8,
                true,
            ),
        ];
        let pods = vec![
            pod("n1", 8, "Running"),
            pod("n1", 0, "Running"),
            pod("n3", 8, "Succeeded"),
        ];
        let rows = node_rows(&nodes, &pods);
        assert_eq!((rows[0].gpus_used, rows[0].pods), (8, 2));
        assert_eq!(rows[2].gpus_used, 0, "a finished pod holds no GPUs");
        assert_eq!(rows[1].conditions, vec!["NotReady (KubeletNotReady)".to_string()]);
        let pools = pool_rows(&nodes, &rows);
        let flex = &pools[0];
        assert_eq!(
            (
                flex.name.as_str(),
                flex.nodes,
                flex.ready,
                flex.gpus,
                flex.gpus_used
            ),
            ("flex", 2, 1, 16, 8)
        );
        assert_eq!(flex.provisioning, "DWS flex-start");
        assert_eq!(pools[1].provisioning, "reservation r1");
        assert_eq!(pools[2].provisioning, "Spot");
    }

    #[test]
    fn workloads_say_why_they_wait_and_for_how_long() {
        let now = parse_time("2026-11-24T22:30:00Z").unwrap();
        let pending: serde_json::Value = serde_json::json!({
            "metadata": {"name": "jobset-train-abcde", "namespace": "default",
                         "ownerReferences": [{"kind": "JobSet", "name": "train"}]},
            "spec": {"queueName": "a3u"},
            "status": {
                "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved", "lastTransitionTime": "2026-11-24T22:16:00Z"}],
                "admissionChecks": [{"name": "dws-prov", "state": "Pending", "message": "Waiting for resources.", "lastTransitionTime": "2026-11-24T22:16:00Z"}]
            }
        });
        let r = workload_row(&pending, now);
        assert_eq!(r.state, "pending");
        assert!(r.detail.starts_with("waiting for DWS capacity"), "{}", r.detail);
        assert_eq!(r.age_s, Some(14 * 60));
        assert_eq!(age(r.age_s.unwrap()), "14m");
        assert_eq!(r.owner.as_deref(), Some("JobSet/train"));
        let mut quota = pending.clone();
        quota["status"]["conditions"][0] = serde_json::json!({"type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": "couldn't assign flavors to pod set workers: insufficient unused quota", "lastTransitionTime": "2026-11-24T22:29:00Z"});
        quota["status"]["admissionChecks"] = serde_json::json!([]);
        let r = workload_row(&quota, now);
        assert_eq!(
            r.detail,
            "Pending: couldn't assign flavors to pod set workers: insufficient unused quota"
        );
        assert_eq!(r.age_s, Some(60));
        let mut done = pending.clone();
        done["status"]["conditions"] = serde_json::json!([{"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-24T22:20:00Z"},
            {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully", "lastTransitionTime": "2026-11-24T22:29:30Z"}]);
        assert_eq!(workload_row(&done, now).state, "finished");
        // Gke review L2: Retry and Rejected are not "waiting for DWS capacity".
        let mut retry = pending.clone();
        retry["status"]["admissionChecks"][0]["state"] = "Retry".into();
        retry["status"]["admissionChecks"][0]["message"] =
            "BookingExpired: capacity was not used in time".into();
        let r = workload_row(&retry, now);
        assert_eq!(r.state, "pending");
        assert!(
            r.detail.starts_with("DWS asking again") && r.detail.contains("BookingExpired"),
            "{}",
            r.detail
        );
        let mut rejected = pending.clone();
        rejected["status"]["admissionChecks"][0]["state"] = "Rejected".into();
        rejected["status"]["admissionChecks"][0]["message"] = "Failed: ResourcePoolExhausted".into();
        rejected["status"]["conditions"] = serde_json::json!([{"type": "Evicted", "status": "True", "reason": "AdmissionCheck",
            "message": "At least one admission check is false", "lastTransitionTime": "2026-11-24T22:29:00Z"}]);
        let r = workload_row(&rejected, now);
        assert_eq!(r.state, "rejected");
        assert!(
            r.detail.contains("dws-prov: Failed: ResourcePoolExhausted")
                && r.detail.contains("will not start"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn times_parse() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2026-11-24T22:10:48.123Z"), Some(1_795_558_248));
        assert_eq!(parse_time("nope"), None);
    }
}
