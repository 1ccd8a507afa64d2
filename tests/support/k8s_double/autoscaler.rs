//! GKE's cluster autoscaler: node pools that scale from zero for pending pods their
//! node template would take, queued-provisioning pools grown only for a
//! ProvisioningRequest, and scale-down of unneeded nodes unless a pod blocks the drain.
//! Rules follow github.com/kubernetes/autoscaler (cluster-autoscaler/...), each named.

use super::kubelet::{bound, event};
use super::sched::{self, Unfit};
use super::{node_object, rand5, ts, NodeSpec, Provisioning, Shared, State, CLUSTER};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Taint {
    pub key: String,
    pub value: String,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    pub effect: String,
}

/// A node pool as GKE's cluster autoscaler sees it.
#[derive(Clone, Debug)]
pub struct PoolSpec {
    pub name: String,
    pub machine_type: String,
    pub accelerator: String,
    pub gpus: u32,
    pub provisioning: Provisioning,
    pub min_nodes: u32,
    pub max_nodes: u32,
    /// The pool's `--node-taints` (e.g. `cloud.google.com/gke-spot=true:NoSchedule`,
    /// which GKE does not add to spot pools by itself).
    pub taints: Vec<Taint>,
    /// `--enable-queued-provisioning`: nodes only for ProvisioningRequests.
    pub queued: bool,
}

/// A node on its way up.
struct Coming {
    pool: String,
    node: Value,
    ready_at: Instant,
    /// The ProvisioningRequest it is for (namespace, name).
    provreq: Option<(String, String)>,
    /// Pods already counted on it (for bin-packing further pending pods).
    pods: Vec<Value>,
}

#[derive(Default)]
pub struct AutoscalerState {
    coming: Vec<Coming>,
    /// Node -> since when it has been unneeded.
    unneeded: BTreeMap<String, Instant>,
    /// (node, why) of every removed node.
    pub removed: Vec<(String, String)>,
    /// Node -> the pod that blocks its removal.
    pub blocked: BTreeMap<String, String>,
    /// ProvisioningRequest -> when it became Provisioned.
    pub provisioned_at: BTreeMap<(String, String), Instant>,
    /// Workload -> when Kueue saw it (its admission delay runs from there).
    pub workload_seen: BTreeMap<(String, String), Instant>,
    seq: u32,
}

fn pool_of<'a>(s: &'a Shared, name: &str) -> Option<&'a PoolSpec> {
    s.opts.pools.iter().find(|p| p.name == name)
}

fn pool_count(st: &State, pool: &str) -> u32 {
    let real = st
        .nodes
        .iter()
        .filter(|n| n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == pool)
        .count();
    let coming = st.autoscaler.coming.iter().filter(|c| c.pool == pool).count();
    (real + coming) as u32
}

/// The node a pool would add (its template: cluster-autoscaler's
/// cloudprovider/gce/templates.go builds it from the pool's machine, labels and taints).
fn template(st: &mut State, p: &PoolSpec) -> Value {
    st.autoscaler.seq += 1;
    let spec = NodeSpec {
        name: format!("gke-{CLUSTER}-{}-{}", p.name, rand5()),
        pool: p.name.clone(),
        machine_type: p.machine_type.clone(),
        accelerator: p.accelerator.clone(),
        gpus: p.gpus,
        provisioning: p.provisioning.clone(),
        internal_ip: format!(
            "10.0.{}.{}",
            100 + st.autoscaler.seq / 250,
            st.autoscaler.seq % 250 + 2
        ),
    };
    node_object(&spec, Some(p))
}

/// Whether a pending pod fits a node template with `pods` already planned on it.
fn fits(pod: &Value, node: &Value, pods: &[Value]) -> Result<(), Unfit> {
    let name = node["metadata"]["name"].clone();
    let planned: Vec<Value> = pods
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p["spec"]["nodeName"] = name.clone();
            p
        })
        .collect();
    let refs: Vec<&Value> = planned.iter().collect();
    sched::filter(pod, node, std::slice::from_ref(node), &refs)
}

/// Pods consuming a ProvisioningRequest (Kueue's podSetUpdates annotation,
/// cluster-autoscaler apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go,
/// ProvisioningRequestPodAnnotationKey).
pub const CONSUME: &str = "autoscaling.x-k8s.io/consume-provisioning-request";

pub(super) fn tick(s: &Arc<Shared>) {
    let mut st = s.state.lock().unwrap();
    scale_up(s, &mut st);
    provision(s, &mut st);
    arrive(s, &mut st);
    scale_down(s, &mut st);
}

/// Scale-up for pending pods (cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go,
/// ScaleUp): each unschedulable pod goes on a node already coming if it fits there, else
/// on a new node of the first autoscaled pool whose template takes it (taints,
/// selector/affinity, GPUs; estimator/binpacking_estimator.go) below its maximum;
/// queued-provisioning pools are left to ProvisioningRequests. A pod no pool takes
/// gets NotTriggerScaleUp with each pool's reason
/// (processors/status/eventing_scale_up_processor.go), one that does TriggeredScaleUp.
fn scale_up(s: &Shared, st: &mut State) {
    if s.opts.pools.is_empty() {
        return;
    }
    let pending: Vec<Value> = st
        .pods
        .values()
        .map(|p| p.obj.clone())
        .filter(|p| p["spec"]["nodeName"].as_str().is_none_or(str::is_empty))
        .filter(|p| p["status"]["conditions"][0]["reason"] == "Unschedulable")
        .filter(|p| p["metadata"]["annotations"][CONSUME].is_null())
        .collect();
    for pod in pending {
        let uid = pod["metadata"]["uid"].clone();
        if st
            .autoscaler
            .coming
            .iter()
            .any(|c| c.pods.iter().any(|p| p["metadata"]["uid"] == uid))
        {
            continue;
        }
        if let Some(c) = st
            .autoscaler
            .coming
            .iter_mut()
            .filter(|c| c.provreq.is_none())
            .find(|c| fits(&pod, &c.node, &c.pods).is_ok())
        {
            c.pods.push(pod);
            continue;
        }
        let mut why = vec![];
        let mut chosen = None;
        for p in s.opts.pools.iter().filter(|p| !p.queued) {
            let t = template(st, p);
            match fits(&pod, &t, &[]) {
                Err(u) => why.push(u),
                Ok(()) if pool_count(st, &p.name) >= p.max_nodes => why.push(Unfit::MaxSize),
                Ok(()) => {
                    chosen = Some((p.clone(), t));
                    break;
                }
            }
        }
        match chosen {
            Some((p, node)) => {
                let before = pool_count(st, &p.name);
                let msg = format!(
                    "pod triggered scale-up: [{{{} {before}->{} (max: {})}}]",
                    p.name,
                    before + 1,
                    p.max_nodes
                );
                event(st, &pod, "Normal", "TriggeredScaleUp", &msg, "cluster-autoscaler");
                st.autoscaler.coming.push(Coming {
                    pool: p.name.clone(),
                    node,
                    ready_at: Instant::now() + s.opts.scale_up_after,
                    provreq: None,
                    pods: vec![pod],
                });
            }
            None => {
                let msg = format!("pod didn't trigger scale-up: {}", sched::summary(&why));
                event(
                    st,
                    &pod,
                    "Normal",
                    "NotTriggerScaleUp",
                    &msg,
                    "cluster-autoscaler",
                );
            }
        }
    }
}

/// GKE's queued provisioning (cluster-autoscaler/provisioningrequest/, class
/// `queued-provisioning.gke.io`): a new request is validated (GKE docs
/// how-to/provisioningrequest: `maxRunDurationSeconds` at most 7 days) and Accepted; a
/// queued-provisioning pool whose template takes the pod template and has room for
/// all of its pods grows by them at once; when they are Ready the request is
/// Provisioned. Its booking lasts `booking_time` (GKE: 10 min): pods that have not
/// landed by then leave it BookingExpired
/// (apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go conditions).
fn provision(s: &Shared, st: &mut State) {
    let keys: Vec<(String, String)> = st.provreqs.keys().cloned().collect();
    for key in keys {
        let pr = st.provreqs[&key].clone();
        let has = |t: &str| {
            pr["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == t && c["status"] == "True")
        };
        if has("Failed") || has("BookingExpired") {
            continue;
        }
        let t = ts();
        if has("Provisioned") {
            let booking = s.opts.booking_time.unwrap_or(Duration::from_secs(600));
            let at = st.autoscaler.provisioned_at.get(&key).copied();
            let want: u64 = pr["spec"]["podSets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p["count"].as_u64().unwrap_or(0))
                .sum();
            let landed = bound(st)
                .iter()
                .filter(|p| p["metadata"]["annotations"][CONSUME] == key.1.as_str())
                .count() as u64;
            if landed < want && at.is_some_and(|a| a.elapsed() >= booking) {
                push_condition(
                    st,
                    &key,
                    json!({"type": "BookingExpired", "status": "True", "reason": "BookingExpired",
                    "message": format!("Capacity booking for the Provisioning Request has expired: {landed} of {want} pods consumed it"), "lastTransitionTime": t}),
                );
            }
            continue;
        }
        if has("Accepted") {
            continue;
        }
        if let Some(v) = pr["spec"]["parameters"]["maxRunDurationSeconds"].as_str() {
            let ok = v.parse::<u64>().is_ok_and(|n| n > 0 && n <= 7 * 24 * 3600);
            if !ok {
                push_condition(
                    st,
                    &key,
                    json!({"type": "Failed", "status": "True", "reason": "InvalidParameters",
                    "message": format!("maxRunDurationSeconds {v:?} is not a number of seconds up to 604800 (7 days)"), "lastTransitionTime": t}),
                );
                continue;
            }
        }
        let count: u32 = pr["spec"]["podSets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p["count"].as_u64().unwrap_or(0) as u32)
            .sum();
        let tmpl_name = pr["spec"]["podSets"][0]["podTemplateRef"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let Some(tmpl) = st.pod_templates.get(&(key.0.clone(), tmpl_name)).cloned() else {
            continue;
        };
        let mut pod = json!({"metadata": tmpl["template"]["metadata"].clone(), "spec": tmpl["template"]["spec"].clone()});
        pod["metadata"]["namespace"] = key.0.clone().into();
        sched::extended_resource_toleration(&mut pod);
        let mut why = vec![];
        let mut chosen = None;
        for p in s.opts.pools.iter().filter(|p| p.queued) {
            let node = template(st, p);
            // One node per pod when the pods' anti-affinity or GPUs leave room for one.
            let per_node = match fits(&pod, &node, std::slice::from_ref(&pod)) {
                Ok(()) => (p.gpus as u64 / sched::pod_request(&pod, sched::GPU).max(1)).max(1) as u32,
                Err(_) => 1,
            };
            let nodes = count.div_ceil(per_node);
            match fits(&pod, &node, &[]) {
                Err(u) => why.push(u),
                Ok(()) if pool_count(st, &p.name) + nodes > p.max_nodes => why.push(Unfit::MaxSize),
                Ok(()) => {
                    chosen = Some((p.clone(), nodes));
                    break;
                }
            }
        }
        match chosen {
            Some((p, nodes)) => {
                push_condition(
                    st,
                    &key,
                    json!({"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Provisioning Request was accepted", "lastTransitionTime": t}),
                );
                for _ in 0..nodes {
                    let node = template(st, &p);
                    st.autoscaler.coming.push(Coming {
                        pool: p.name.clone(),
                        node,
                        ready_at: Instant::now() + s.opts.scale_up_after,
                        provreq: Some(key.clone()),
                        pods: vec![],
                    });
                }
            }
            None => {
                if !has("Accepted") && pr["status"]["conditions"].as_array().is_none_or(|c| c.is_empty()) {
                    push_condition(
                        st,
                        &key,
                        json!({"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Provisioning Request was accepted", "lastTransitionTime": t}),
                    );
                    push_condition(
                        st,
                        &key,
                        json!({"type": "Provisioned", "status": "False", "reason": "CapacityIsNotFound",
                        "message": format!("no queued-provisioning node pool takes the pods: {}", sched::summary(&why)), "lastTransitionTime": t}),
                    );
                }
            }
        }
    }
}

fn push_condition(st: &mut State, key: &(String, String), c: Value) {
    if let Some(pr) = st.provreqs.get_mut(key) {
        let list = pr["status"]["conditions"].as_array_mut().unwrap();
        list.retain(|x| x["type"] != c["type"]);
        list.push(c);
    }
}

/// Nodes whose scale-up finished join the cluster, Ready; a ProvisioningRequest whose
/// nodes are all there is Provisioned.
fn arrive(s: &Shared, st: &mut State) {
    let now = Instant::now();
    let (ready, wait): (Vec<Coming>, Vec<Coming>) = std::mem::take(&mut st.autoscaler.coming)
        .into_iter()
        .partition(|c| c.ready_at <= now);
    st.autoscaler.coming = wait;
    let mut touched = vec![];
    for c in ready {
        let name = c.node["metadata"]["name"].as_str().unwrap_or("").to_string();
        let p = pool_of(s, &c.pool).unwrap();
        st.node_devices
            .insert(name, super::devices::defaults(&p.machine_type, p.gpus));
        st.nodes.push(c.node);
        st.rv += 1;
        touched.extend(c.provreq);
    }
    for key in touched {
        if st
            .autoscaler
            .coming
            .iter()
            .any(|c| c.provreq.as_ref() == Some(&key))
        {
            continue;
        }
        st.autoscaler.provisioned_at.insert(key.clone(), Instant::now());
        push_condition(
            st,
            &key,
            json!({"type": "Provisioned", "status": "True", "reason": "Provisioned",
            "message": "Provisioning Request was successfully provisioned.", "lastTransitionTime": ts()}),
        );
    }
}

/// Why a pod blocks draining its node, by cluster-autoscaler's drainability rules
/// (cluster-autoscaler/simulator/drainability/rules/): DaemonSet and terminal pods never
/// (rules/daemonset, rules/terminal); `safe-to-evict: "true"` never (rules/safetoevict),
/// `"false"` always (rules/notsafetoevict); a pod no controller owns
/// (rules/replicated: "is not replicated"); a pod with local storage, a hostPath or a
/// non-memory emptyDir (rules/localstorage, utils/drain/drain.go isLocalVolume).
fn blocks(pod: &Value) -> Option<String> {
    let owners: Vec<&Value> = pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    if owners.iter().any(|o| o["kind"] == "DaemonSet") {
        return None;
    }
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    match pod["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"].as_str() {
        Some("true") => return None,
        Some("false") => return Some(format!("pod annotated as not safe to evict present: {name}")),
        _ => {}
    }
    if !owners.iter().any(|o| o["controller"] == true) {
        return Some(format!("{ns}/{name} is not replicated"));
    }
    let local = pod["spec"]["volumes"].as_array().into_iter().flatten().any(|v| {
        !v["hostPath"].is_null() || (!v["emptyDir"].is_null() && v["emptyDir"]["medium"] != "Memory")
    });
    local.then(|| format!("pod with local storage present: {name}"))
}

/// Scale-down (cluster-autoscaler/core/scaledown/): a node of an autoscaled pool above
/// its minimum is unneeded when its GPUs are less than half requested
/// (simulator/utilization/info.go; `--scale-down-gpu-utilization-threshold` 0.5) and no
/// booked ProvisioningRequest capacity waits for it; after `scale_down_after` unneeded it
/// is drained and removed, unless one of its pods blocks the drain. Pods left on a
/// removed node are deleted (pkg/controller/podgc/gc_controller.go, gcOrphaned).
fn scale_down(s: &Shared, st: &mut State) {
    let after = s.opts.scale_down_after.unwrap_or(Duration::from_secs(600));
    let names: Vec<(String, String)> = st
        .nodes
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap_or("").to_string(),
                n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    for (node, pool) in names {
        let Some(p) = pool_of(s, &pool) else { continue };
        let on: Vec<Value> = bound(st)
            .into_iter()
            .filter(|x| x["spec"]["nodeName"] == node.as_str())
            .cloned()
            .collect();
        let n = st
            .nodes
            .iter()
            .find(|n| n["metadata"]["name"] == node.as_str())
            .unwrap();
        let alloc = n["status"]["allocatable"][sched::GPU]
            .as_str()
            .and_then(|g| g.parse::<u64>().ok())
            .unwrap_or(0);
        let used: u64 = on.iter().map(|x| sched::pod_request(x, sched::GPU)).sum();
        let booked = st.provreqs.iter().any(|(k, pr)| {
            let live = pr["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Provisioned" && c["status"] == "True")
                && !pr["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "BookingExpired" && c["status"] == "True");
            live && !bound(st)
                .iter()
                .any(|x| x["metadata"]["annotations"][CONSUME] == k.1.as_str())
                && n["metadata"]["labels"]["cloud.google.com/gke-queued"] == "true"
        });
        let unneeded = pool_count(st, &pool) > p.min_nodes && (alloc == 0 || used * 2 < alloc) && !booked;
        if !unneeded {
            st.autoscaler.unneeded.remove(&node);
            st.autoscaler.blocked.remove(&node);
            continue;
        }
        if let Some(why) = on.iter().find_map(blocks) {
            st.autoscaler.blocked.insert(node.clone(), why);
            continue;
        }
        st.autoscaler.blocked.remove(&node);
        let since = *st
            .autoscaler
            .unneeded
            .entry(node.clone())
            .or_insert_with(Instant::now);
        if since.elapsed() < after {
            continue;
        }
        st.autoscaler.unneeded.remove(&node);
        st.nodes.retain(|n| n["metadata"]["name"] != node.as_str());
        st.node_devices.remove(&node);
        let gone: Vec<(String, String)> = st
            .pods
            .iter()
            .filter(|(_, r)| r.obj["spec"]["nodeName"] == node.as_str())
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            if let Some(rec) = st.pods.remove(&k) {
                super::kubelet::kill_pod(&rec);
            }
        }
        st.rv += 1;
        st.autoscaler.removed.push((
            node.clone(),
            format!("scale-down: empty node {node} of pool {pool} unneeded for {after:?}"),
        ));
        let obj = json!({"kind": "Node", "metadata": {"name": node, "namespace": "default"}});
        event(
            st,
            &obj,
            "Normal",
            "ScaleDown",
            "node removed by cluster autoscaler",
            "cluster-autoscaler",
        );
    }
}
